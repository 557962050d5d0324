"""Helpers for the tests of the Kafka client commands (`roost topic`, `group`, `cluster`): the
CLI run as a subprocess, its output and exit status; one real `roost up` per test module."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.broker.conftest import FAST_GROUPS  # groups form in one rebalance, sessions may be short
from tests.support.procs import ROOST, RoostProcess, free_ports, start_roost


def start_module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    """A `roost up` (broker and keeper) for a test module; stopped when the module ends."""
    directory = tmp_path_factory.mktemp("cli-broker")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", *FAST_GROUPS],
                       expect=("kafka", "keeper"))
    yield proc
    proc.stop()


def run_cli(*args: str, timeout: float = 60.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`roost ARGS...` to completion (bounded: a hang fails the test); `env` adds variables."""
    return subprocess.run([*ROOST, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)


def run_json(*args: str) -> Any:
    """`roost ARGS... --format json`, which must succeed; its output parsed."""
    done = run_cli(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """A failure as the client commands report one: non-zero, one line on stderr naming what
    went wrong, no traceback."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def dead_address() -> str:
    """A loopback address where nothing listens."""
    return f"127.0.0.1:{free_ports(1)[0]}"


def run_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`roost ARGS...` through roost.cli.main.main in this process (for the many small argument
    checks: no interpreter start per case); an uncaught exception fails the test."""
    from roost.cli.main import main

    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["roost", *args], code, captured.out, captured.err)
