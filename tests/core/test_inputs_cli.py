"""Every bad input the commands take is refused at once with exit 4 naming the file: never a hang (a FIFO nobody
writes, /dev/zero), never an internal error (a binary file, deep nesting, NaN counts), never gigabytes of memory
(an 80 MiB result document took 1.78 GiB)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import python_cli


@pytest.fixture(scope="module")
def green(tmp_path_factory) -> Path:
    """A GO document the CLI wrote replaying a recorded scenario (tests/report_lab.py)."""
    from report_lab import SCENARIOS, replay

    out = tmp_path_factory.mktemp("green") / "green.json"
    replay(SCENARIOS / "net_leftover_holds_port_cpu.facts.json", out, "--skip", "host.resources,net.port_free",
           expect_rc=0)
    return out


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, what the error says about it)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    empty = tmp_path / "empty"
    empty.write_text("")
    deep = tmp_path / "deep"
    deep.write_text("[" * 100000 + "]" * 100000)
    return {"a directory": (tmp_path, "is a directory"), "a FIFO nobody writes": (fifo, "is a FIFO (named pipe)"),
            "/dev/zero": (Path("/dev/zero"), "is a character device"), "a binary file": (binary, "not UTF-8 text"),
            "an empty file": (empty, ""), "deep nesting": (deep, "nested too deeply")}


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    started = time.monotonic()
    proc = subprocess.run(python_cli(*args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    proc.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return proc


def _refused(proc: subprocess.CompletedProcess, path: Path, said: str) -> None:
    assert proc.returncode == 4, (proc.returncode, proc.stderr[-2000:])
    assert str(path) in proc.stderr and said in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert proc.elapsed < 20  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", ["a directory", "a FIFO nobody writes", "/dev/zero", "a binary file"])
def test_a_bad_toml_config_is_a_usage_error_naming_it(tmp_path, case):
    path, said = _bad_inputs(tmp_path)[case]
    _refused(_cli("config", "--config", str(path)), path, said)


@pytest.mark.parametrize("case", ["an empty file", "deep nesting", "a FIFO nobody writes", "/dev/zero", "a directory"])
def test_a_bad_result_document_given_to_report_is_a_usage_error_naming_it(tmp_path, case, green):
    path, said = _bad_inputs(tmp_path)[case]
    proc = _cli("report", str(green), str(path), "-o", str(tmp_path / "out.html"))
    _refused(proc, path, said or "not a readable JSON document")
    assert not (tmp_path / "out.html").exists()


def test_nan_counts_in_a_result_document_are_refused(tmp_path, green):
    doc = json.loads(green.read_text())
    text = json.dumps(doc).replace('"pass": ' + str(doc["counts"]["pass"]), '"pass": NaN', 1)
    assert "NaN" in text
    bad = tmp_path / "nan.json"
    bad.write_text(text)
    _refused(_cli("report", str(bad), "-o", str(tmp_path / "o.html")), bad, "NaN is not valid JSON")


#: peak memory of the command itself: VmHWM starts afresh at exec (ru_maxrss would count the forking test's memory)
MEASURE = textwrap.dedent("""
    import re, sys
    from dsv3_preflight.cli import main
    code = main(sys.argv[1:])
    hwm = re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)
    print(f"maxrss_kib={hwm}", file=sys.stderr)
    sys.exit(code)
""")


def test_an_80_mib_result_document_is_refused_before_it_is_read(tmp_path, green):
    big = tmp_path / "big.json"
    with open(big, "w") as fh:  # a valid document padded to 80 MiB
        doc = json.loads(green.read_text())
        doc["padding"] = "x" * (80 << 20)
        json.dump(doc, fh)
        del doc
    proc = subprocess.run([sys.executable, "-c", MEASURE, "report", str(big), "-o", str(tmp_path / "o.html")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4 and "larger than 32 MiB" in proc.stderr, proc.stderr[-2000:]
    rss_mib = int(proc.stderr.split("maxrss_kib=")[1].split()[0]) / 1024
    assert rss_mib < 200, f"{rss_mib:.0f} MiB to refuse an 80 MiB document"


@pytest.mark.parametrize("case", ["an empty file", "deep nesting", "a FIFO nobody writes", "/dev/zero", "a binary file"])
def test_bad_facts_in_is_a_usage_error_naming_it(tmp_path, case):
    path, said = _bad_inputs(tmp_path)[case]
    _refused(_cli("run", "--facts-in", str(path), "--no-report"), path, said or "not a readable JSON facts file")


@pytest.mark.parametrize("case", ["a FIFO nobody writes", "a binary file", "deep nesting"])
def test_a_bad_trainer_config_never_hangs_or_crashes_launch(tmp_path, case):
    path, said = _bad_inputs(tmp_path)[case]
    config = tmp_path / "trainer.yaml"
    os.rename(path, config) if case != "a FIFO nobody writes" else os.mkfifo(config)
    (tmp_path / "train.py").write_text("print('training')\n")
    started = time.monotonic()
    proc = subprocess.run(python_cli("launch", "--profile", "cpu", "--only", "env.*", "--no-report", "--dry-run", "--",
                                     "train.py", str(config)),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert time.monotonic() - started < 60
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if case != "a FIFO nobody writes":  # a FIFO is not a file: not taken as a trainer config at all
        assert f"note: training config {config}: {said}" in proc.stderr, proc.stderr[-2000:]
