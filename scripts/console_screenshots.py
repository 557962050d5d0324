"""Retakes the documentation's screenshots of the web console (docs/screenshots/*.png).

The browser tests take them on every run (tests/console/test_console_browser.py, with the data
and pages of tests/console/screenshots.py), on their real three-broker, three-keeper cluster; this
runs those tests alone (the main pages' one, and the share group, link and schema pages' tests,
which take theirs when their figures are known), writing to OUT_DIR when given.

    .venv/bin/python scripts/console_screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "tests/console/test_console_browser.py"
TESTS = [f"{MODULE}::test_the_documentations_screenshots_are_taken_from_the_console_as_it_is",
         f"{MODULE}::test_a_share_group_page_shows_its_members_in_flight_and_acquired_records_lag_and_delivery_counts",
         f"{MODULE}::test_the_link_pages_show_a_links_mirrors_their_lag_its_errors_and_a_promoted_topic",
         f"{MODULE}::test_the_schema_pages_show_subjects_versions_their_diff_compatibility_and_decoded_messages"]


def main() -> int:
    env = dict(os.environ)
    if len(sys.argv) > 1:
        env["ROOST_SCREENSHOTS_DIR"] = str(Path(sys.argv[1]).resolve())
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *TESTS], cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
