"""A training script whose ranks read stdin, as a login prompt (wandb's, huggingface_hub's) or a debugger does
(tests/launch/test_launch_gate.py's terminal test).

With READER_SYNC_DIR set, a rank that met the end of stdin waits (at most 60 s) until every rank of the node has
said so before it exits: the first rank's exit makes torchrun stop the others, and on a loaded machine a slower rank
was stopped before it reached its read, so the test saw one rank's line, not both."""
import os
import sys
import time

try:
    line = input("rank asks: ")
except EOFError:
    print(f"rank {os.environ.get('RANK')} stdin: end of file", flush=True)
    sync = os.environ.get("READER_SYNC_DIR")
    if sync:
        os.makedirs(sync, exist_ok=True)
        open(os.path.join(sync, f"rank{os.environ.get('RANK')}"), "w").close()
        deadline = time.monotonic() + 60
        while len(os.listdir(sync)) < int(os.environ.get("LOCAL_WORLD_SIZE", "1")) and time.monotonic() < deadline:
            time.sleep(0.05)
    sys.exit(3)
print(f"rank {os.environ.get('RANK')} read {line!r}", flush=True)
