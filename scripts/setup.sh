#!/usr/bin/env bash
# Installs what `make run` (argument "run") or `make test` (argument "test") needs on a fresh
# Debian machine: the virtualenv with Roost and its PyPI packages, and for the tests the Debian
# packages the test suite drives (kcat, Apache ZooKeeper, a JRE, strace, jq, chromium for the web
# console's browser tests, Node.js and npm to rebuild the console's bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-run}"
PYTHON="${PYTHON:-python3}"

if [ "$what" = "test" ]; then
  need=()
  command -v kcat >/dev/null 2>&1 || need+=(kcat)
  [ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
  command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
  command -v strace >/dev/null 2>&1 || need+=(strace)
  command -v jq >/dev/null 2>&1 || need+=(jq)  # examples/cli/newcomer.sh, run by tests/cli
  [ -x /usr/bin/chromium ] || need+=(chromium)  # tests/console drives it headless (Playwright)
  command -v node >/dev/null 2>&1 || need+=(nodejs)
  command -v npm >/dev/null 2>&1 || need+=(npm)
  command -v nft >/dev/null 2>&1 || need+=(nftables)  # tests/faults: partitions inside network namespaces
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq "${need[@]}"
  fi
fi

# The console's browser bundle is committed (src/roost/console/static), so `make run` needs no
# Node; the test set-up rebuilds it from the locked npm packages, proving the build still works.
if [ "$what" = "test" ] && command -v npm >/dev/null 2>&1; then
  (cd src/roost/console/frontend && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "$what" = "test" ]; then
  .venv/bin/python -m pip install -q -e '.[test]'
else
  .venv/bin/python -m pip install -q -e .
fi
