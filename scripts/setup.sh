#!/usr/bin/env bash
# Installs what `make run` (argument "run") or `make test` (argument "test") needs on a fresh
# Debian machine: the virtualenv with Roost and its PyPI packages, and for the tests the Debian
# packages the test suite drives (kcat, Apache ZooKeeper, a JRE, strace, jq, chromium for the web
# console's browser tests, Node.js and npm to rebuild the console's bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-run}"
PYTHON="${PYTHON:-python3}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

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
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq "${need[@]}"
  fi
fi

# The JVM referees (referees/*/pom.xml): Apache Kafka 3.9 (ZooKeeper mode), the newest Kafka 4
# (KRaft) and ZooKeeper 3.9, their jars and dependencies copied from Maven Central into a cache
# keyed by the pom's hash, so a changed pom fetches anew and an unchanged one costs nothing. The
# cache entry is complete only when its manifest (every jar's sha256) exists and still matches.
# `make run` needs none of this.
if [ "$what" = "test" ]; then
  command -v mvn >/dev/null 2>&1 || { $sudo apt-get update -qq || true; $sudo apt-get install -y -qq maven; }
  cache="${ROOST_REFEREE_CACHE:-$HOME/.cache/roost/referees}"
  for pom in referees/*/pom.xml; do
    name=$(basename "$(dirname "$pom")")
    key=$(sha256sum "$pom" | cut -c1-16)
    dest="$cache/$name-$key"
    if ! { [ -f "$dest/MANIFEST.sha256" ] && (cd "$dest/libs" && sha256sum --quiet -c ../MANIFEST.sha256); }; then
      rm -rf "$dest" && mkdir -p "$dest/libs"
      mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dest/libs"
      (cd "$dest/libs" && sha256sum -- *.jar > ../MANIFEST.sha256)
    fi
    ln -sfn "$dest" "$cache/$name"  # tests/support/jvm.py reads $cache/<name>/libs
  done
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
