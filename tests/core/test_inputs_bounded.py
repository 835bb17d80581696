"""The bounded reader: regular files only, a size cap, a nesting bound, and one error type naming the file."""
import contextlib
import os
import threading
import time

import pytest

from dsv3_preflight.inputs import InputError, read_json, read_text, read_toml, read_yaml


def _refused(func, path, **kw):
    started = time.monotonic()
    with pytest.raises(InputError) as info:
        func(path, **kw)
    assert time.monotonic() - started < 2.0  # refused at once, never a blocking read
    return str(info.value)


def test_a_fifo_nobody_writes_is_refused_at_once_naming_it(tmp_path):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    assert _refused(read_toml, fifo, what="--config") == f"--config {fifo}: is a FIFO (named pipe), not a regular file"


@pytest.mark.parametrize("path, kind", [("/dev/zero", "a character device"), ("/dev/urandom", "a character device")])
def test_devices_are_refused_without_reading_them(path, kind):
    assert _refused(read_json, path, what="report") == f"report {path}: is {kind}, not a regular file"


def test_a_directory_and_a_missing_file_are_named(tmp_path):
    assert _refused(read_text, tmp_path, what="log") == f"log {tmp_path}: is a directory, not a regular file"
    assert _refused(read_text, tmp_path / "nope", what="log") == f"log {tmp_path / 'nope'}: no such file"


def test_a_file_over_the_cap_is_refused_without_reading_it_whole(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    assert "larger than 1024 bytes" in _refused(read_json, big, max_bytes=1024)


def test_a_binary_file_is_a_decode_error_naming_the_byte(tmp_path):
    binary = tmp_path / "x.toml"
    binary.write_bytes(b"a = 1\n\xff\xfe")
    assert "not UTF-8 text (byte 6" in _refused(read_toml, binary)


def test_deep_nesting_is_bounded_in_json_yaml_and_toml(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 200000 + "]" * 200000)
    assert "nested too deeply" in _refused(read_json, tmp_path / "deep.json")
    (tmp_path / "d.json").write_text('{"a":' * 80 + "1" + "}" * 80)
    assert "nested deeper than 64 levels" in _refused(read_json, tmp_path / "d.json")
    (tmp_path / "d.yaml").write_text("[" * 80 + "]" * 80)
    assert "nested deeper than 64 levels" in _refused(read_yaml, tmp_path / "d.yaml")


def test_nan_is_refused_in_json_unless_allowed(tmp_path):
    (tmp_path / "n.json").write_text('{"pass": NaN}')
    assert "NaN is not valid JSON" in _refused(read_json, tmp_path / "n.json")
    assert read_json(tmp_path / "n.json", allow_nan=True)["pass"] != 0


def test_a_fifo_with_a_writer_is_still_refused(tmp_path):
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    def write() -> None:
        with contextlib.suppress(OSError):   # the refusing reader may close first (EPIPE)
            with open(fifo, "w") as fh:
                fh.write("{}")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert "is a FIFO" in _refused(read_json, fifo)
    # if the writer still waits in open(), a reader lets it through; never a blocking open of ours (the refusal's
    # own non-blocking open may already have let it through and it is gone: a blocking open would wait forever)
    while writer.is_alive():
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join(0.2)
        os.close(fd)
    writer.join(5)
    assert not writer.is_alive()


def test_good_files_read_normally(tmp_path):
    (tmp_path / "a.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "a.toml").write_text('nnodes = 3\n')
    (tmp_path / "a.yaml").write_text('lora_target: q_a_proj,o_proj\n')
    assert read_json(tmp_path / "a.json")["zero_optimization"]["stage"] == 3
    assert read_toml(tmp_path / "a.toml") == {"nnodes": 3}
    assert read_yaml(tmp_path / "a.yaml") == {"lora_target": "q_a_proj,o_proj"}


def test_control_sequences_from_inputs_are_shown_escaped_never_sent_raw():
    from dsv3_preflight.text import safe_terminal

    hostile = "ok\x1b]0;pwned\x07 \x1b[2J\rhidden\x9b31m\ttab\nnext"
    shown = safe_terminal(hostile)
    assert shown == "ok\\e]0;pwned\\x07 \\e[2J\\rhidden\\x9b31m\ttab\nnext"
    assert not any(ord(c) < 0x20 and c not in "\t\n" or 0x7F <= ord(c) < 0xA0 for c in shown)
