"""A training script that says it started, then waits to be stopped (tests/launch/test_launch_gate.py's interrupt test)."""
import os
import sys
import time
from pathlib import Path

marker = Path(sys.argv[sys.argv.index("--started") + 1])
(marker.parent / f"{marker.name}.{os.environ.get('RANK', '0')}").write_text(str(os.getpid()))
time.sleep(120)
