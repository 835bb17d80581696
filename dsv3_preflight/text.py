"""Small text helpers shared by checks that put system strings into remediations."""
from __future__ import annotations

#: where a remediation names this node's interface toward MASTER_ADDR: the collective probe's decoder fills it in
#: (dsv3_preflight.collective.decode.fill_interface), for its own texts and the doctor's records it reads
IFACE = "<IFACE>"
#: NCCL_SOCKET_IFNAME's value for that interface: NCCL reads a bare name as a prefix (eth0 also selects eth01,
#: eth1 also eth10), ``=NAME`` selects exactly NAME (net.nic_route prints the bare name where it is exact)
NCCL_IFACE = "=" + IFACE
NCCL_EXACT = "# =NAME: exactly that interface (NCCL reads a bare name as a prefix)"


def one_line(cmdline: str | None, limit: int = 200) -> str:
    """A command line as one line (a `python -c` script has newlines; pasted after `#` they would run)."""
    text = " ".join((cmdline or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}
_CONTROL.update({0x1B: "\\e", 0x0D: "\\r"})
#: bidirectional formatting characters (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates, the LRM/RLM
#: and ALM marks): a terminal reorders what follows them, so a hostile node name or log line could show other text
BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
_TRANSLATE = {**{code: text for code, text in _CONTROL.items()}, **{c: f"\\u{c:04x}" for c in BIDI}}


def safe_terminal(text: object) -> str:
    """Text from an input (a log line, an environment value, a file name) made safe to print to a terminal.

    Every C0/C1 control character except newline and tab is shown escaped (ESC as ``\\e``, CR as ``\\r``,
    others as ``\\xNN``), and every bidirectional formatting character as ``\\uNNNN`` (U+202E as ``\\u202e``), so a
    hostile log line cannot move the cursor, retitle the window, hide text or reorder it."""
    return str(text).translate(_TRANSLATE)
