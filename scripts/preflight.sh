#!/usr/bin/env bash
# Set up and run the main job on a fresh machine (README command 1): the full suite on this machine
# through an embedded local Ray cluster, writing the JSON + HTML report into ./preflight-reports/.
# Extra arguments go to `dsv3-preflight run` (default: the CPU profile, for a machine without GPUs).
# On a GPU cluster, install into the training environment instead (docs/cluster.md): this script's
# private .venv has its own torch, which is not the torch your training runs with.
set -euo pipefail
cd "$(dirname "$0")/.."
SAY_AS=preflight.sh
source scripts/_env.sh
say() { env_say "$@"; }
say "1/2 installing requirements/lock.txt (torch 2.13.0+cpu, Ray, peft, ...) and dsv3-preflight into .venv"
make_env .venv
case " $* " in
  *" --ray-address"*)  # the caller names a cluster: connect to it as it is
    say "2/2 running: dsv3-preflight run --all-nodes $*"
    exec .venv/bin/dsv3-preflight run --all-nodes "$@" ;;
esac
say "2/2 running: dsv3-preflight run --all-nodes --ray-address local ${*:---profile=cpu} (embedded Ray on 127.0.0.1)"
exec .venv/bin/dsv3-preflight run --all-nodes --ray-address local "${@:---profile=cpu}"   # the embedded Ray listens on 127.0.0.1
