#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine (README command 2; .ci/run calls this).
#  - system packages the integration tests drive for real: iproute2 + iptables/nftables (network
#    namespaces), chromium + chromium-driver (the HTML report opened in a real browser)
#  - a virtual environment with torch 2.13.0 (CPU wheel here; users keep their own CUDA build) and
#    the package with its test extras
#  - pytest over tests/ (slow integration tests included), then `pytest checks/` under the CPU profile
set -euo pipefail
cd "$(dirname "$0")/.."

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
    echo "scripts/test.sh: not root; tests needing ${need_apt[*]} will skip with the reason" >&2
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
echo "[test.sh] installing torch 2.13.0 (CPU) and dsv3-preflight[test] into .venv" >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0 -e '.[test]'

# pytest's own exit codes pass through (5 = no tests collected is a failure here, not hidden).
.venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
.venv/bin/python -m pytest checks/ --preflight-profile cpu -q -p no:cacheprovider
