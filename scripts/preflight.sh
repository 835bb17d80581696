#!/usr/bin/env bash
# Set up and run the main job on a fresh machine (README command 1): the full suite on this machine
# through an embedded local Ray cluster, writing the JSON + HTML report into ./preflight-reports/.
# Extra arguments go to `dsv3-preflight run` (default: the CPU profile, for a machine without GPUs).
# On a GPU cluster, install into the training environment instead (docs/cluster.md): this script's
# private .venv has its own torch, which is not the torch your training runs with.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { printf '[preflight.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
if [ -x .venv/bin/python ]; then
  say "1/3 virtual environment .venv exists"
else
  say "1/3 creating the virtual environment .venv"
  "$PY" -m venv .venv
fi
say "2/3 installing torch 2.13.0 (CPU) and dsv3-preflight[all] into .venv (the first time takes a few minutes)"
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0 -e '.[all]'
case " $* " in
  *" --ray-address"*)  # the caller names a cluster: connect to it as it is
    say "3/3 running: dsv3-preflight run --all-nodes $*"
    exec .venv/bin/dsv3-preflight run --all-nodes "$@" ;;
esac
say "3/3 running: dsv3-preflight run --all-nodes --ray-address local ${*:---profile=cpu} (embedded Ray on 127.0.0.1)"
exec .venv/bin/dsv3-preflight run --all-nodes --ray-address local "${@:---profile=cpu}"   # the embedded Ray listens on 127.0.0.1
