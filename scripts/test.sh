#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine (README command 2; .ci/run calls this).
#  - system packages the integration tests drive for real: iproute2 + iptables/nftables (network
#    namespaces), chromium + chromium-driver (the HTML report opened in a real browser)
#  - .venv holding exactly requirements/lock.txt (torch 2.13.0+cpu here; users keep their own CUDA build)
#    and the package itself, editable
#  - scripts/lint.sh (ruff, mypy, complexity and file-size gates), then pytest over tests/ (slow integration
#    tests included), then `pytest checks/` under the CPU profile
#
#   bash scripts/test.sh [PYTEST ARGS]            the locked environment (.venv): what CI runs
#   bash scripts/test.sh --latest [PYTEST ARGS]   the newest releases pyproject.toml admits, in .venv-latest,
#                                                 to find upstream breakage on purpose (never in CI)
set -euo pipefail
cd "$(dirname "$0")/.."
SAY_AS=test.sh
source scripts/_env.sh

VENV=.venv
if [ "${1:-}" = "--latest" ]; then
  shift
  VENV=.venv-latest
fi

need_apt=()
command -v ip >/dev/null || need_apt+=(iproute2)
command -v iptables >/dev/null || need_apt+=(iptables)
command -v nft >/dev/null || need_apt+=(nftables)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
  else
    env_say "not root; tests needing ${need_apt[*]} will skip with the reason"
  fi
fi

if [ "$VENV" = .venv-latest ]; then
  env_say "installing the NEWEST releases pyproject.toml admits into $VENV (not the lock)"
  make_latest_env "$VENV"
  "$VENV/bin/python" -m uv pip freeze --python "$VENV/bin/python" > "$VENV/resolved.txt"
  env_say "resolved: $VENV/resolved.txt; differences from the lock:"
  diff <(grep -E '^[A-Za-z0-9]' "$LOCK" | sed 's/ .*//' | tr 'A-Z_' 'a-z-' | sort) \
       <(grep -E '^[A-Za-z0-9]' "$VENV/resolved.txt" | grep -v '^dsv3-preflight' | tr 'A-Z_' 'a-z-' | sort) >&2 || true
else
  env_say "installing requirements/lock.txt and dsv3-preflight (editable) into $VENV"
  make_env "$VENV"
fi

# the lint gates first (scripts/lint.sh: ruff, mypy strict on the core and the rules, complexity <= 30, files
# <= 800 lines): seconds, and a finding fails the run before the 15 minutes of pytest
DSV3_LINT_PYTHON="$VENV/bin/python" bash scripts/lint.sh
# this checkout's own sources byte-compiled once, as uv's --compile-bytecode does for the packages (scripts/_env.sh):
# where PYTHONDONTWRITEBYTECODE is set (these machines set it) no process writes them, so every one of the suite's
# processes that imports the preflight (CLI runs, Ray workers, probes, torchrun workers) would compile its sources
# again. Explicit compileall writes them whatever that variable says; __pycache__ is ignored by git.
"$VENV/bin/python" -m compileall -q -j 0 dsv3_preflight checks launch reports examples benchmarks tests >/dev/null
# pytest's assertion rewriting, cached the same way: pytest writes the rewritten test modules to __pycache__ only where
# bytecode may be written, so each xdist worker (every one collects the whole suite) and each pytest the tests start
# rewrote all of them again. One collection with the variable unset writes them (13 CPU-s once); each worker's
# collection then takes 7 CPU-s instead of 13. Only for a whole run: a run of a few tests would pay more than it saves.
if [ $# -eq 0 ]; then
  env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" -m pytest --collect-only -q -p no:cacheprovider tests >/dev/null 2>&1 || true   # a collection error: pytest below reports it
fi
# pytest's own exit codes pass through (5 = no tests collected is a failure here, not hidden).
# Four workers on two cores: much of the suite waits (rendezvous and store timeouts, torchrun and Ray start-ups in
# network namespaces). The Ray group is one worker's serial run and the critical path (tests/conftest.py); the other
# three workers run niced (DSV3_TEST_OTHERS_NICE, default 5) so the Ray labs get the CPU first. Measured on a quiet
# 2-core machine: -n 3 910 s; -n 4 873 s; -n 4 with nice 5 844 s (the cores 2-3 % idle in both -n 4 runs).
# DSV3_TEST_WORKERS and DSV3_TEST_OTHERS_NICE override them.
export DSV3_TEST_OTHERS_NICE="${DSV3_TEST_OTHERS_NICE:-5}"
"$VENV/bin/python" -m pytest -n "${DSV3_TEST_WORKERS:-4}" --dist loadgroup --no-loadscope-reorder --durations=25 "$@"
"$VENV/bin/python" -m pytest checks/ --preflight-profile cpu -q -p no:cacheprovider
