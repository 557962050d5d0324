"""roost._speedups.load: the compiled twin when built, None when forced off or stale."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from roost import _speedups

built = importlib.util.find_spec("roost._speedups.records") is not None


@pytest.mark.skipif(not built, reason="roost._speedups.records is not built")
def test_load_gives_the_twin_unless_the_environment_forces_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_speedups.PURE_PYTHON_ENV, raising=False)
    assert _speedups.load("records") is importlib.import_module("roost._speedups.records")
    monkeypatch.setenv(_speedups.PURE_PYTHON_ENV, "0")
    assert _speedups.load("records") is not None
    monkeypatch.setenv(_speedups.PURE_PYTHON_ENV, "1")
    assert _speedups.load("records") is None


@pytest.mark.skipif(not built, reason="roost._speedups.records is not built")
def test_a_twin_built_for_another_interface_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_speedups.PURE_PYTHON_ENV, raising=False)
    monkeypatch.setitem(_speedups.INTERFACES, "records", 999)
    assert _speedups.load("records") is None


def test_unknown_twins_are_a_programming_error() -> None:
    with pytest.raises(AssertionError):
        _speedups.load("no-such-module")
