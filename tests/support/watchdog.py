"""A backstop under pytest-timeout, so that no test can hang the run.

pytest-timeout (the suite's `timeout` in pyproject.toml, method "signal" on Linux) fails an
overrunning test by raising from a SIGALRM handler in the main thread, printing every thread's
stack first, and the run goes on. That works only if the main thread returns to the interpreter:
a test stuck in C code that blocks or never checks signals (a client library's flush, a blocked
signal mask), or one whose handler-raised exception left a lock held that the next callback waits
on, would still hang — for the CI job's whole 90 minutes.

So each test also arms faulthandler's watchdog (a C thread, independent of the GIL-holding main
thread's state) for its timeout plus a grace period: if the test is still running then, every
thread's stack goes to stderr and the process exits (status 1). The run ends early and fails,
with the stacks of the stuck test; it never hangs. Tests without a timeout get no watchdog.

The grace (default 60 s; ROOST_TEST_WATCHDOG_GRACE_S) leaves pytest-timeout its chance to fail
only the one test and let the run go on.
"""

from __future__ import annotations

import faulthandler
import os
from collections.abc import Generator
from typing import Any

import pytest

GRACE_ENV = "ROOST_TEST_WATCHDOG_GRACE_S"
DEFAULT_GRACE_S = 60.0


def test_timeout(item: pytest.Item) -> float:
    """The item's timeout as pytest-timeout reads it: its mark, else the ini setting (0: none)."""
    mark = item.get_closest_marker("timeout")
    if mark is not None:
        value = mark.args[0] if mark.args else mark.kwargs.get("timeout")
        return float(value or 0)
    try:
        return float(item.config.getini("timeout") or 0)
    except ValueError:  # pytest-timeout not loaded: no ini key
        return 0.0


class Watchdog:
    """The plugin: tests/conftest.py registers one at configure time."""

    def __init__(self) -> None:
        # At configure time pytest's output capture is suspended, so fd 2 is the real stderr; the
        # dump must go there, not into the capture file of the test it is about.
        self._stderr = os.fdopen(os.dup(2), "w")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        timeout = test_timeout(item)
        if timeout > 0:
            grace = float(os.environ.get(GRACE_ENV, DEFAULT_GRACE_S))
            faulthandler.dump_traceback_later(timeout + grace, exit=True, file=self._stderr)
        try:
            return (yield)
        finally:
            if timeout > 0:
                faulthandler.cancel_dump_traceback_later()

    def pytest_unconfigure(self) -> None:
        self._stderr.close()
