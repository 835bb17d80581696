"""A training script whose ranks read stdin, as a login prompt (wandb's, huggingface_hub's) or a debugger does
(tests/launch/test_launch_gate.py's terminal test)."""
import os
import sys

try:
    line = input("rank asks: ")
except EOFError:
    print(f"rank {os.environ.get('RANK')} stdin: end of file", flush=True)
    sys.exit(3)
print(f"rank {os.environ.get('RANK')} read {line!r}", flush=True)
