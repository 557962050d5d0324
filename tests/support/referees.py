"""Referees: the outside programs and data some tests compare Roost against, or observe it with.

A real Apache ZooKeeper (Java and Debian's `zookeeper` package), PySpark, Kafka's own JSON message
definitions (kafka-python's copy), the independent client libraries, and strace. Without one of
them those tests cannot say anything, so they skip: on a developer's machine that is a convenience.

Where the suite is meant to prove something (`make test`, CI: environment `CI=true`, the pytest
option `--require-referees`, or `ROOST_REQUIRE_REFEREES=1`), a referee skip is a failure instead,
with the message saying what is missing: the hooks in tests/conftest.py turn every skip whose
reason starts with `PREFIX` into one. So a test skips for a missing referee only through the
helpers below, never with a bare `pytest.skip` or `pytest.importorskip`.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

PREFIX = "referee missing: "
OPTION = "--require-referees"
ENV = "ROOST_REQUIRE_REFEREES"

ZOOKEEPER = "Apache ZooKeeper 3.8 (java and Debian's zookeeper package; make test installs them)"
KAFKA_39 = "Apache Kafka 3.9 (make test installs it via Maven: scripts/setup.sh test, referees/kafka-3.9)"
KAFKA_4 = "Apache Kafka 4 (make test installs it via Maven: scripts/setup.sh test, referees/kafka-4)"
ZOOKEEPER_39 = "Apache ZooKeeper 3.9 (make test installs it via Maven: scripts/setup.sh test, referees/zookeeper-3.9)"
KAFKA_JSON = "Kafka's JSON message definitions (kafka-python's copy; make test installs kafka-python)"


def reason(what: str) -> str:
    """The skip reason for a missing referee `what` (what is missing and how to get it)."""
    return PREFIX + what


def is_referee_reason(text: str) -> bool:
    # pytest prefixes "Skipped: " to reasons given to pytest.skip().
    return text.removeprefix("Skipped: ").startswith(PREFIX)


def skip(what: str) -> NoReturn:
    """Skip the running test (or fixture) because the referee `what` is missing."""
    pytest.skip(reason(what), allow_module_level=True)


def skip_unless(available: bool, what: str) -> pytest.MarkDecorator:
    """A skipif mark for a test or module that needs the referee `what`."""
    return pytest.mark.skipif(not available, reason=reason(what))


def import_or_skip(module: str, what: str | None = None) -> ModuleType:
    """`pytest.importorskip` for a referee: import `module` or skip as a missing referee."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        skip(f"{what or module} (cannot import {module}: {error}); `make test` installs it")


def required(option_given: bool, environ: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """Why referee skips must fail this run (None when they may stay skips)."""
    if option_given:
        return f"the pytest option {OPTION} is given"
    if environ.get(ENV, "").lower() in ("1", "true", "yes"):
        return f"{ENV}={environ[ENV]}"
    if environ.get("CI", "").lower() in ("1", "true", "yes"):
        return f"CI={environ['CI']}"
    return None
