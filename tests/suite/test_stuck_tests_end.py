"""A test that overruns its time fails with its threads' stacks and never hangs the run: the
suite's own timeout settings and watchdog (tests/conftest.py), on a small throwaway suite run in a
child process with a 2-second timeout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 2
GRACE_S = 3
STUCK_S = 300  # what a stuck test would take if nothing ended it
BOUND_S = 200  # the whole child run, far below a hang
# A child run ended by the timeout takes its start-up (seconds, or tens of seconds on a loaded
# machine: it imports the suite's conftest) plus TIMEOUT_S; one that waited for its stuck test
# takes STUCK_S. This bound tells them apart with room for a slow start.
ENDED_BY_TIMEOUT_S = 120

STUCK_IN_PYTHON = (
    f"import threading, time\n\nSTUCK_S = {STUCK_S}\n\n"
    "def test_stuck_in_python():\n"
    "    helper = threading.Thread(target=time.sleep, args=(STUCK_S,), name='helper-thread', daemon=True)\n"
    "    helper.start()\n"
    "    time.sleep(STUCK_S)\n\n"
    "def test_after_the_stuck_one_runs():\n"
    "    pass\n")
STUCK_OUT_OF_REACH = (
    f"import signal, threading\n\nSTUCK_S = {STUCK_S}\n\n"
    "def test_stuck_where_the_alarm_cannot_reach():\n"
    "    # Like C code that blocks the signal or never returns to the interpreter.\n"
    "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
    "    threading.Event().wait(STUCK_S)\n\n"
    "def test_never_reached():\n"
    "    pass\n")


def run_suite(tmp_path: Path, test_module: str) -> tuple[subprocess.CompletedProcess[str], float]:
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_stuck.py").write_text(test_module)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "ROOST_REQUIRE_REFEREES")}
    env["PYTHONPATH"] = str(ROOT)
    env["ROOST_TEST_WATCHDOG_GRACE_S"] = str(GRACE_S)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-o",
                           f"timeout={TIMEOUT_S}", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BOUND_S)
    return done, time.monotonic() - started


def test_the_suite_fails_overrunning_tests_by_signal_with_a_bound() -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert float(settings["timeout"]) > 0
    # "signal" (the default on Linux) fails the one test and lets the run go on; the watchdog is
    # the backstop when the signal cannot get through.
    assert settings.get("timeout_method", "signal") == "signal"


def test_a_stuck_test_fails_with_its_threads_stacks_and_the_run_goes_on(tmp_path: Path) -> None:
    done, took = run_suite(tmp_path, STUCK_IN_PYTHON)
    out = done.stdout + done.stderr
    assert re.search(r"test_stuck_in_python FAILED", out), out
    assert "Timeout" in out and "helper-thread" in out, out  # every thread's stack
    assert re.search(r"test_after_the_stuck_one_runs PASSED", out), out
    assert done.returncode == 1
    assert took < ENDED_BY_TIMEOUT_S, f"took {took:.1f}s"


def test_a_test_the_alarm_cannot_reach_ends_the_run_with_stacks_instead_of_hanging(tmp_path: Path) -> None:
    done, took = run_suite(tmp_path, STUCK_OUT_OF_REACH)
    # faulthandler's watchdog: every thread's stack, then the process exits.
    assert "Timeout (0:00:" in done.stderr and "Thread 0x" in done.stderr, done.stdout + done.stderr
    assert "test_stuck.py\", line" in done.stderr, done.stderr  # the stuck test's own frame
    assert "test_never_reached" not in done.stdout
    assert done.returncode != 0
    assert took < ENDED_BY_TIMEOUT_S, f"took {took:.1f}s"
