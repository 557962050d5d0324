#!/usr/bin/env python3
"""The schema registry's and REST proxy's schemathesis fuzz, long: the same tests CI runs briefly
(tests/registry/test_openapi.py against an in-memory registry, and the proxy's operations in
tests/registry/test_restproxy.py against a real `roost up`), with many more examples per
operation. Exit status is pytest's.

    .venv/bin/python scripts/registry_fuzz.py                 # 200 examples per operation
    .venv/bin/python scripts/registry_fuzz.py --examples 1000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=200)
    args = parser.parse_args()
    env = dict(os.environ, ROOST_REGISTRY_FUZZ_EXAMPLES=str(args.examples))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), str(REPO), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "7200",
               "tests/registry/test_openapi.py",
               "tests/registry/test_restproxy.py::test_a_brief_fuzz_of_the_proxy_operations_finds_no_5xx"]
    return subprocess.run(command, cwd=REPO, env=env, timeout=4 * 3600, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
