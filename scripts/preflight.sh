#!/usr/bin/env bash
# Set up and run the main job on a fresh machine (README command 1): the full suite on this machine
# through an embedded local Ray cluster, writing the JSON + HTML report into ./preflight-reports/.
# Extra arguments go to `dsv3-preflight run` (on the GPU cluster: drop the CPU profile, pass --config).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet torch==2.13.0 -e '.[all]'
exec .venv/bin/dsv3-preflight run --all-nodes "${@:---profile=cpu}"
