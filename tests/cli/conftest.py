"""One real `roost up` (broker and keeper) per test module of the client commands' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.kafka_cli import start_module_broker
from tests.support.procs import RoostProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    yield from start_module_broker(tmp_path_factory)


@pytest.fixture(scope="module")
def bootstrap(broker: RoostProcess) -> str:
    return broker.address("kafka")
