#!/usr/bin/env bash
# Refresh the lock files from pyproject.toml (the one documented command: `bash scripts/lock.sh`):
#   requirements/lock.txt           every package of the test and all extras, torch as the CPU build, and the
#                                   installers (requirements/tools.in); scripts/test.sh, scripts/preflight.sh
#                                   and .ci/run install exactly this
#   tests/envs/transformers4.txt    the sealed environment of tests/lora/test_lora_transformers4.py
# Then run `bash scripts/test.sh` and commit the lock files with the result.
set -euo pipefail
cd "$(dirname "$0")/.."
SAY_AS=lock.sh
source scripts/_env.sh
command -v uv >/dev/null || { env_say "needs uv on PATH: python3 -m pip install uv"; exit 4; }
TARGET=(--python-version 3.11 --python-platform x86_64-manylinux_2_28 --find-links "$WHEELS"
        --override requirements/torch-cpu.txt --custom-compile-command "bash scripts/lock.sh")
uv pip compile "${TARGET[@]}" pyproject.toml requirements/tools.in --extra test -o requirements/lock.txt "$@"
uv pip compile "${TARGET[@]}" pyproject.toml tests/envs/transformers4.in --extra lora -o tests/envs/transformers4.txt "$@"
