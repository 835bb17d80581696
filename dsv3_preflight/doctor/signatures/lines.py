"""What an error line looks like, for lines no signature knows, and what never is one.

A line matching no signature but ``ERROR_RE`` (after ``ERROR_NEEDLES``) is an unrecognised error line: reported,
never guessed at. Benign signatures come first; ``QUIET_RE`` lines (NCCL INFO, glog INFO) are never error lines.
"""
from __future__ import annotations

import re

from .shared import LABELS

ERROR_NEEDLES: tuple[bytes, ...] = (
    b"Error", b"error", b"ERROR", b"Exception", b"Traceback", b"FAIL", b"Fail", b"fail", b"WARN", b"Fatal", b"FATAL",
    b"fatal", b"terminate called", b"core dumped", b"Segmentation fault", b"Aborted", b"Killed", b"timed out",
    b"Timed out", b"exitcode", b"exit code", b"return code", b"refused", b"unreachable", b"CRITICAL", b"panic",
    b"[E", b"[F",   # glog's ERROR/FATAL prefix (torch's C++)
)
ERROR_RE = re.compile(
    r"Traceback \(most recent call last\)|(?:^|[\s\]:>('\"])(?:[A-Za-z_][\w.]*)?(?:Error|Exception)(?:_[A-Za-z]\w*)?\b(?=:|\s*$| \()"
    r"|\bERROR\b|\bFATAL\b|\bCRITICAL\b|\b[Ff]atal\b|NCCL WARN|\bWARN\b.*\b(?:[Ff]ail|[Ee]rror)"
    r"|terminate called|core dumped|Segmentation fault|\bAborted\b|\bKilled\b|\b(?:CUDA|[Cc]uda|NCCL) (?:error|failure)\b"
    r"|\b(?:failed|FAILED|Failed to)\b|\berror(?:[:=]| \d| code|s? occurred)|[Tt]imed out"
    r"|exit ?code:? ?-?[1-9]|return code = -?[1-9]|[Cc]onnection refused|unreachable|\bpanic\b"
    # glog's severity prefix, as torch's C++ prints ERROR and FATAL lines: [E socket.cpp:601], [F1229 20:37:13.09 X.cpp:1306]
    r"|\[[EF](?:\d{4} \d\d:\d\d:\d\d\.\d+)? ?\w[\w./-]*\.(?:cpp|cc|hpp|h):\d+\]"
)
# (torch's C++ INFO lines: glog's "I1124 00:14:01.93 123 x.cpp:9]" and c10's own "[I1124 00:14:01.939 socket.cpp:931]",
# "[I socket.cpp:480]": with TORCH_CPP_LOG_LEVEL=INFO the store's client prints "... not yet listening (errno: 111 -
# Connection refused), will retry" at INFO while it waits for the server: a retry, not an error)
QUIET_RE = re.compile(r"^" + LABELS + r"frame #\d+: |\bNCCL INFO\b|^" + LABELS + r"I\d{4} \d\d:\d\d"
                      r"|^" + LABELS + r"\[I(?:\d{4} \d\d:\d\d:\d\d\.\d+)? ?\w[\w./-]*\.(?:cpp|cc|hpp|h):\d+\]"
                      r"|\[INFO\]|(?<!=)\bINFO\b[ :|-]|UserWarning|FutureWarning|DeprecationWarning")

# First words that do not help tell causes apart (for "nearest known causes").
STOPWORDS = frozenset("""the a an of to in on for and or is was not no be by at with from this that it as are
    error errors failed failure warn warning info nccl torch rank ranks process line file call run""".split())
