#!/usr/bin/env bash
# Installs what `make run` (argument "run") or `make test` (argument "test") needs on a fresh
# Debian machine: the virtualenv with Roost and its PyPI packages, and for the tests the Debian
# packages the test suite drives (kcat, Apache ZooKeeper, a JRE, strace, jq).
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
  if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq "${need[@]}"
  fi
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "$what" = "test" ]; then
  .venv/bin/python -m pip install -q -e '.[test]'
else
  .venv/bin/python -m pip install -q -e .
fi
