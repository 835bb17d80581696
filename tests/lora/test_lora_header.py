"""The safetensors header as the scanner reads it: the same verdict as the safetensors library on arbitrary
headers, reads that never go past the header, and memory bounded on hostile headers (issue 21)."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv3_preflight.lora.probes.adapter_files import read_header
from dsv3_preflight.lora.safetensors_header import DTYPE_BITS, MAX_TENSORS, parse_header

REPO = Path(__file__).resolve().parents[2]
DTYPES = sorted(DTYPE_BITS) + ["F32 ", "float32", "C128"]


def _library_accepts(blob: bytes, path: Path) -> bool:
    from safetensors import safe_open

    path.write_bytes(blob)
    try:
        with safe_open(str(path), framework="numpy") as f:
            for k in f.keys():
                f.get_slice(k).get_shape()
        return True
    except Exception:  # noqa: BLE001 - the library's refusal is the reference verdict
        return False


@st.composite
def headers(draw):
    """A header and its data: mostly well formed, with one random flaw (or none)."""
    n = draw(st.integers(0, 4))
    entries, offset = {}, 0
    for i in range(n):
        dtype = draw(st.sampled_from(["F32", "BF16", "F16", "I8", "F4", "F6_E2M3", "BOOL"]))
        shape = draw(st.lists(st.integers(0, 5), max_size=3))
        count = 1
        for s in shape:
            count *= s
        nbytes = count * DTYPE_BITS[dtype] // 8 if count * DTYPE_BITS[dtype] % 8 == 0 else count
        entries[f"t{i}"] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    data_len = offset
    flaw = draw(st.sampled_from(["none", "dtype", "shape", "offsets", "gap", "data", "meta", "json", "extra", "pad"]))
    text = None
    if entries and flaw == "dtype":
        entries["t0"]["dtype"] = draw(st.sampled_from(DTYPES))
    elif entries and flaw == "shape":
        entries["t0"]["shape"] = draw(st.one_of(st.lists(st.one_of(st.integers(-2, 3), st.floats(0, 2), st.booleans()),
                                                         max_size=2), st.none(), st.text(max_size=2)))
    elif entries and flaw == "offsets":
        entries["t0"]["data_offsets"] = draw(st.lists(st.integers(-1, 40), min_size=1, max_size=3))
    elif entries and flaw == "gap":
        entries[f"t{n - 1}"]["data_offsets"] = [x + 1 for x in entries[f"t{n - 1}"]["data_offsets"]]
        data_len += 1
    elif flaw == "data":
        data_len += draw(st.integers(-3, 3))
    elif flaw == "meta":
        entries["__metadata__"] = draw(st.one_of(st.dictionaries(st.text(max_size=3), st.one_of(st.text(max_size=3),
                                                                                                 st.integers()), max_size=2),
                                                 st.none(), st.lists(st.integers(), max_size=1)))
    elif flaw == "extra" and entries:
        entries["t0"]["x"] = draw(st.one_of(st.integers(), st.text(max_size=3)))
    text = json.dumps(entries, separators=(",", ":"))
    if flaw == "json":
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(["", "}", "NaN", "\\ud800", "\x00", " x", "{", "\"\""])) + text[cut:]
    if flaw == "pad":
        text = draw(st.sampled_from(["", " ", "\n"])) + text + " " * draw(st.integers(0, 9))
    header = text.encode("utf-8", "surrogatepass")
    data = bytes(max(0, data_len))
    return struct.pack("<Q", len(header)) + header + data, header, len(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(headers())
def test_the_header_parser_accepts_exactly_what_safetensors_accepts(tmp_path, case):
    blob, header, data_len = case
    ours = parse_header(header, data_len).error is None
    assert ours == _library_accepts(blob, tmp_path / "x.safetensors"), (header, data_len, parse_header(header, data_len))


CAP = 4096


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(st.one_of(
    st.binary(max_size=300),
    st.tuples(st.integers(0, (1 << 64) - 1), st.binary(max_size=300)).map(lambda t: struct.pack("<Q", t[0]) + t[1]),
    st.tuples(st.integers(0, 400), st.text(max_size=200), st.binary(max_size=100)).map(
        lambda t: struct.pack("<Q", t[0]) + t[1].encode() + t[2]),
    st.tuples(st.integers(CAP + 1, 1 << 63), st.binary(max_size=50)).map(lambda t: struct.pack("<Q", t[0]) + t[1]),
))
def test_arbitrary_bytes_never_raise_and_never_read_beyond_the_cap(tmp_path, data):
    f = tmp_path / "adapter_model.safetensors"
    f.write_bytes(data)
    h = read_header(f, cap=CAP)
    assert h["bytes_read"] <= 8 + CAP
    if len(data) >= 8 and struct.unpack("<Q", data[:8])[0] > CAP:
        assert h["error"] and "beyond" in h["error"] and h["bytes_read"] == 8


def _peak_rss_mib(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Run the CLI in a child that reports its own peak RSS (VmHWM of its own address space: the rusage of a child
    forked from this torch-laden test process would count this process's memory too)."""
    code = ("import sys\nfrom dsv3_preflight.cli import main\ncode = main(sys.argv[1:])\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
            "print('VmHWM', hwm, file=sys.stderr)\nsys.exit(code)")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=REPO)
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("VmHWM"))
    return int(line.split()[1]) / 1024, p


@pytest.mark.slow
def test_a_header_declaring_600k_zero_size_tensors_is_judged_in_bounded_memory(tmp_path):
    """Issue 21.7: a 62.8 MiB header (under the 64 MiB cap) declaring 600,000 zero-size tensors took 1.17 GiB of RSS
    (measured again on the code before this change: 1.18 GiB, 31 s). Now it is refused after counting, unparsed."""
    n = 600_000
    ck = tmp_path / "checkpoint-1"
    ck.mkdir()
    entry = '"base_model.model.model.layers.{:06d}.xxxxxxx.lora_A.weight":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'
    header = ("{" + ",".join(entry.format(i) for i in range(n)) + "}").encode()
    assert 62 * 2 ** 20 < len(header) < 64 * 2 ** 20
    with open(ck / "adapter_model.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(header)))
        fh.write(header)
    del header
    peak, p = _peak_rss_mib(["lora", "scan", str(ck), "--json"])
    assert p.returncode == 1, p.stderr
    (a,) = json.loads(p.stdout)["adapters"]
    assert f"declares {n:,} tensors" in a["summary"] and a["status"] == "fail"
    assert peak < 200, f"peak RSS {peak:.0f} MiB"


@pytest.mark.slow
def test_the_most_tensors_an_adapter_may_declare_parse_in_bounded_memory(tmp_path):
    """At the limit (MAX_TENSORS zero-size tensors, a 29 MiB header) the parse stays well under 400 MiB."""
    n = MAX_TENSORS - 1
    f = tmp_path / "adapter_model.safetensors"
    entry = '"base_model.model.model.layers.{}.mlp.experts.{}.up_proj.lora_A.weight":{{"dtype":"BF16","shape":[0],"data_offsets":[0,0]}}'
    header = ("{" + ",".join(entry.format(i // 256, i % 256) for i in range(n)) + "}").encode()
    f.write_bytes(struct.pack("<Q", len(header)) + header)
    del header
    peak, p = _peak_rss_mib(["lora", "scan", str(f), "--json"])
    assert p.returncode == 1, p.stderr
    assert "have zero elements (every tensor)" in json.loads(p.stdout)["adapters"][0]["summary"]
    assert peak < 400, f"peak RSS {peak:.0f} MiB"


def test_a_deepseek_v3_sized_adapter_is_judged_from_its_header_alone(tmp_path):
    """194 MB of tensor data (sparse), an 86 KB header: the kernel counts only the header's bytes read."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_lora_scan as bench

    head, data = bench._header(16, None)
    ck = tmp_path / "checkpoint-1"
    ck.mkdir()
    with open(ck / "adapter_model.safetensors", "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + data)
    (ck / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 16, "lora_alpha": 32,
                                                        "target_modules": sorted(bench.MLA)}))
    code = ("import json, sys\nfrom dsv3_preflight.lora.probes.scan import scan_paths\n"
            "def rchar():\n    with open('/proc/self/io') as fh:\n        return int(fh.read().split('rchar:')[1].split()[0])\n"
            "scan_paths([sys.argv[1]])\nscan_paths([sys.argv[1]])\n"
            "before = rchar()\ndoc, _ = scan_paths([sys.argv[1]])\nprint(json.dumps({'read': rchar() - before, "
            "'adapter': doc['adapters'][0]}))")
    p = subprocess.run([sys.executable, "-c", code, str(ck)], capture_output=True, text=True, timeout=120, cwd=REPO)
    out = json.loads(p.stdout)
    assert out["adapter"]["status"] == "pass" and out["adapter"]["lora_modules"] == 61 * 5, out["adapter"]
    assert out["adapter"]["bytes_read"] == len(head)
    config = (ck / "adapter_config.json").stat().st_size
    assert out["read"] < len(head) + config + 16 * 1024, out["read"]  # never the 194 MB of data
