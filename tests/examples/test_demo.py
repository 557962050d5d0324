"""`roost demo` end to end (the messenger part; the Spark part is covered by test_trending)."""

from __future__ import annotations

import subprocess
import sys


def test_roost_demo_runs_the_messenger_scenario_and_reports_nothing_lost() -> None:
    done = subprocess.run([sys.executable, "-m", "roost.cli.main", "demo", "--skip-spark", "--messages", "120"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "messages sent 120: notified 120" in done.stdout
    assert "nothing lost, nothing duplicated" in done.stdout
