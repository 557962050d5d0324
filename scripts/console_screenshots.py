"""Retakes the documentation's screenshots of the web console (docs/screenshots/*.png).

The browser tests take them on every run (tests/console/test_console_browser.py, with the data
and pages of tests/console/screenshots.py), on their real three-broker, three-keeper cluster; this
runs that one test alone, writing to OUT_DIR when given.

    .venv/bin/python scripts/console_screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/console/test_console_browser.py::test_the_documentations_screenshots_are_taken_from_the_console_as_it_is"


def main() -> int:
    env = dict(os.environ)
    if len(sys.argv) > 1:
        env["ROOST_SCREENSHOTS_DIR"] = str(Path(sys.argv[1]).resolve())
    return subprocess.run([sys.executable, "-m", "pytest", "-q", TEST], cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
