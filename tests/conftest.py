"""Suite-wide hooks: a skip for a missing referee fails the run where the suite must prove things;
a test stuck past its timeout ends the run with its threads' stacks instead of hanging it.

See tests/support/referees.py for what a referee is and when its absence is an error, and
tests/support/watchdog.py for the backstop under pytest-timeout.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import referees
from tests.support.cluster import LocalCluster
from tests.support.watchdog import Watchdog

_REQUIRED = pytest.StashKey[str | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(referees.OPTION, action="store_true", default=False,
                     help="fail (instead of skip) tests whose referee is missing: ZooKeeper, PySpark, "
                          "Kafka's JSON definitions, the client libraries, strace (also: CI=true, "
                          f"{referees.ENV}=1)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REQUIRED] = referees.required(config.getoption(referees.OPTION))
    config.pluginmanager.register(Watchdog(), "roost-watchdog")


def pytest_report_header(config: pytest.Config) -> str | None:
    why = config.stash[_REQUIRED]
    return f"referees: required ({why})" if why else None


def _skip_reason(longrepr: Any) -> str:
    # A skip's longrepr is (path, lineno, reason).
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _failure(reason: str, why: str) -> str:
    return (f"{reason.removeprefix('Skipped: ')}\n"
            f"This test needs that referee and may not skip because {why}.")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        _attach_broker_output(item, report)
    why = item.config.stash[_REQUIRED]
    if why and report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report.longrepr)
        if referees.is_referee_reason(reason):
            report.outcome = "failed"
            report.longrepr = _failure(reason, why)
    return report


def _attach_broker_output(item: pytest.Item, report: pytest.TestReport, lines: int = 60) -> None:
    """A failed test on a LocalCluster shows each broker's last lines: what the brokers did is
    what explains a cluster test's failure, and it is gone once the fixture stops them."""
    for value in getattr(item, "funcargs", {}).values():
        cluster = value if isinstance(value, LocalCluster) else getattr(value, "cluster", None)  # or a wrapper's
        if isinstance(cluster, LocalCluster):
            for broker_id, node in cluster.brokers.items():
                tail = cluster.broker_output(broker_id).splitlines(keepends=True)[-lines:]
                state = "running" if node.running else "NOT RUNNING"
                report.sections.append((f"broker {broker_id} ({state}): its last {lines} lines", "".join(tail)))


class MissingReferee(pytest.Item):
    """Stands for a test module that skipped at import for a missing referee, so that the run
    reports a failure and goes on (a collection error would stop the whole run)."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message

    def runtest(self) -> None:
        pytest.fail(self.message, pytrace=False)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    why = collector.config.stash[_REQUIRED]
    if why and report.skipped:
        reason = _skip_reason(report.longrepr)
        if referees.is_referee_reason(reason):
            report.outcome = "passed"
            report.longrepr = None
            report.result = [MissingReferee.from_parent(collector, name="missing-referee",
                                                        message=_failure(reason, why))]
    return report
