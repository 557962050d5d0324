"""Fixtures for broker tests: real `roost up` processes on ephemeral ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.procs import RoostProcess, start_roost

# Settings that keep tests quick without changing what is tested: consumer groups form in one
# rebalance instead of one per member, and sessions may be short; members of consumer-protocol
# (KIP-848) groups heartbeat every 500 ms instead of 5 s, so assignments move within a second.
FAST_GROUPS = ["--group.initial.rebalance.delay.ms", "500", "--group.min.session.timeout.ms", "1000",
               "--group.consumer.heartbeat.interval.ms", "500"]

StartBroker = Callable[..., RoostProcess]


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[StartBroker]:
    """Start `roost up` processes (stopped at teardown); data lives under tmp_path/<name>."""
    started: list[RoostProcess] = []

    def start(*flags: str, name: str = "data", fast_groups: bool = True) -> RoostProcess:
        args = ["up", "--data-dir", str(tmp_path / name), "--kafka-port", "0", *flags]
        if fast_groups:
            args += FAST_GROUPS
        proc = start_roost(args, expect=("kafka", "keeper") if "--no-keeper" not in args else ("kafka",))
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def broker(start_broker: StartBroker) -> RoostProcess:
    return start_broker()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    """One broker for a whole test module (tests use distinct topic and group names)."""
    directory = tmp_path_factory.mktemp("shared-broker")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", *FAST_GROUPS])
    yield proc
    proc.stop()
