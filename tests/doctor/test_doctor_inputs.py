"""Bad inputs are refused quickly as a usage error (exit 4) naming the file, without hanging or reading forever:
a FIFO nobody writes, /dev/zero, /dev/urandom, a socket, a binary file, xz data, a corrupt, truncated or
decompression-bomb gzip (issue 21 item 2). The other inputs of the same call are still diagnosed."""
import gzip
import json
import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import python_cli

from dsv3_preflight.doctor import reader, triage

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"
OOM = b"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"


def _doctor(*args, timeout=30):
    return subprocess.run(python_cli("doctor", *args), capture_output=True, timeout=timeout)


def _refused(p, path):
    assert p.returncode == 4, (p.returncode, p.stdout[-500:], p.stderr[-500:])
    assert f"refused input {path}".encode() in p.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_nobody_writes_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    p = _doctor(str(fifo), timeout=20)   # opening it for reading would block forever
    _refused(p, fifo)
    assert b"FIFO" in p.stderr


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom"])
def test_character_devices_are_refused_without_reading(dev):
    if not os.path.exists(dev):
        pytest.skip(f"{dev} missing")
    p = _doctor(dev, timeout=20)
    _refused(p, dev)
    assert b"character device" in p.stderr


def test_unix_socket_is_refused(tmp_path):
    path = tmp_path / "s.sock"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        _refused(_doctor(str(path)), path)
    finally:
        s.close()


def test_binary_file_is_refused(tmp_path):
    path = tmp_path / "core.bin"
    path.write_bytes(os.urandom(200_000))
    p = _doctor(str(path))
    _refused(p, path)
    assert b"binary" in p.stderr


def test_file_of_nul_bytes_is_refused(tmp_path):
    path = tmp_path / "zeros.log"
    path.write_bytes(b"\0" * 100_000)
    _refused(_doctor(str(path)), path)


def test_corrupt_gzip_is_refused(tmp_path):
    path = tmp_path / "bad.log.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(5000))
    _refused(_doctor(str(path)), path)


def test_truncated_gzip_is_refused(tmp_path):
    path = tmp_path / "cut.log.gz"
    data = gzip.compress(b"".join(b"line %d of a log\n" % i for i in range(50_000)) + OOM)
    path.write_bytes(data[: len(data) // 2])
    _refused(_doctor(str(path)), path)


def test_gzip_bomb_is_refused_by_its_inflation_ratio(tmp_path):
    path = tmp_path / "bomb.log.gz"
    path.write_bytes(gzip.compress(b"a\n" * (20 << 20), 9))   # 40 MiB of text in ~40 KiB: no log compresses 1000x
    p = _doctor(str(path))
    _refused(p, path)
    assert b"bomb" in p.stderr


def test_xz_file_is_refused_with_a_hint(tmp_path):
    path = tmp_path / "node.log.xz"
    path.write_bytes(b"\xfd7zXZ\x00\x00\x04" + os.urandom(200))
    p = _doctor(str(path))
    _refused(p, path)
    assert b"xz" in p.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_inside_a_directory_is_refused_and_the_other_logs_are_still_read(tmp_path):
    (tmp_path / "node1.log").write_bytes(OOM)
    os.mkfifo(tmp_path / "node2.log")
    p = _doctor(str(tmp_path), "--json", timeout=20)
    _refused(p, tmp_path / "node2.log")
    doc = json.loads(p.stdout)
    assert doc["findings"][0]["id"] == "cuda.out_of_memory" and doc["exit_code"] == 4


def test_good_input_beside_a_refused_one_is_still_diagnosed():
    doc = triage(["/dev/zero", str(DATA / "cuda_oom.log")]) if os.path.exists("/dev/zero") else None
    if doc is None:
        pytest.skip("/dev/zero missing")
    assert doc["unreadable"][0]["path"] == "/dev/zero" and doc["findings"][0]["id"] == "cuda.out_of_memory"


def test_open_log_refuses_a_fifo_even_if_it_appears_after_the_check(tmp_path):
    fifo = tmp_path / "late.log"
    os.mkfifo(fifo)
    with pytest.raises(reader.InputError) as exc:
        reader.open_log(str(fifo))   # O_NONBLOCK open + fstat: no wait for a writer
    assert exc.value.path == str(fifo)


def test_text_with_ansi_colours_and_a_few_odd_bytes_is_not_binary():
    text = (b"\x1b[31m" + OOM + b"\x1b[0m") * 100 + b"caf\xe9\n" + b"\x08\x07\r\n"
    assert not reader.looks_binary(text)
    assert reader.looks_binary(os.urandom(65536))
