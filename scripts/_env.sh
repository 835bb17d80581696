# Sourced by scripts/test.sh, scripts/preflight.sh and scripts/lock.sh: make a virtual environment that holds
# exactly a lock file's packages. Nothing here resolves versions except make_latest_env (test.sh --latest).
#
#   DSV3_WHEELS  a directory of wheels searched beside the package index (default /opt/wheels, where these
#                machines keep torch 2.13.0+cpu; the lock pins that CPU build)
#   PYTHON       the interpreter the environment is made from (default python3)

LOCK=requirements/lock.txt
WHEELS=${DSV3_WHEELS:-/opt/wheels}
PY=${PYTHON:-python3}
# --compile-bytecode: byte-compile at install, as pip does; uv does not by default, and where the environment sets
# PYTHONDONTWRITEBYTECODE (these machines do) every process would compile torch's sources again on each import
# (import torch: 4.0 s instead of 1.5 s here; pytest 1721 s instead of 1043 s)
UV_FLAGS=(--find-links "$WHEELS" --quiet --compile-bytecode)

env_say() { printf '[%s %s] %s\n' "${SAY_AS:-env}" "$(date +%H:%M:%S)" "$*" >&2; }

# the uv release the lock pins, installed by pip into the environment itself (no uv needed beforehand)
lock_pin() { sed -n "s/^$1==\([^ ]*\).*/\1/p" "$LOCK" | head -n 1; }

# uv's scratch files (the editable build's uv-setuptools-*.lock, which it never removes) go inside the environment,
# not into /tmp: a temp directory of DIR's own
uv_tmp() { mkdir -p "$1/.uv-tmp" && (cd "$1/.uv-tmp" && pwd); }

# make_env DIR: DIR becomes a virtual environment holding exactly the lock's packages and this project (editable)
make_env() {
  local dir=$1 uv_version
  uv_version=$(lock_pin uv)
  [ -n "$uv_version" ] || { env_say "no uv pin in $LOCK"; return 1; }
  [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
  local TMPDIR
  TMPDIR=$(uv_tmp "$dir")
  export TMPDIR
  if [ "$("$dir/bin/python" -m uv --version 2>/dev/null | cut -d' ' -f2)" != "$uv_version" ]; then
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$uv_version"
  fi
  # a new environment first gets the lock alone: the editable build below runs without isolation, on the lock's
  # setuptools, not on the older one a new venv comes with
  if ! "$dir/bin/python" -I -c "import importlib.metadata as m; m.version('dsv3-preflight')" 2>/dev/null; then
    "$dir/bin/python" -m uv pip sync --python "$dir/bin/python" "${UV_FLAGS[@]}" "$LOCK"
  fi
  # sync: installs what the lock pins and this checkout (editable), and removes the rest (a reused .venv cannot
  # drift); one sync, so a .venv in use (README command 1 run by the tests) never loses its dsv3-preflight command
  "$dir/bin/python" -m uv pip sync --python "$dir/bin/python" "${UV_FLAGS[@]}" --no-build-isolation \
    "$LOCK" <(printf -- '-e %s\n' "$PWD")
}

# make_latest_env DIR: the newest releases pyproject.toml admits (torch stays the CPU build), not the lock
make_latest_env() {
  local dir=$1
  [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
  local TMPDIR
  TMPDIR=$(uv_tmp "$dir")
  export TMPDIR
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade uv
  "$dir/bin/python" -m uv pip install --python "$dir/bin/python" "${UV_FLAGS[@]}" --upgrade \
    --override requirements/torch-cpu.txt -r requirements/tools.in -e '.[test]'
}
