"""A skip for a missing referee stays a skip on a developer's machine and fails the run where the
suite must prove things (--require-referees, CI=true, ROOST_REQUIRE_REFEREES=1); other skips stay
skips everywhere. Each case runs pytest in a child process on a small throwaway suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import referees

ROOT = Path(__file__).resolve().parents[2]

SUITE = {
    # The suite-wide hooks, as tests/conftest.py provides them to the real suite.
    "conftest.py": "from tests.conftest import *  # noqa: F403\n",
    "test_at_run_time.py": (
        "import pytest\n"
        "from tests.support import referees\n\n"
        "def test_needs_a_referee():\n"
        "    referees.skip('the frobnicator (make test installs it)')\n\n"
        "@referees.skip_unless(False, 'the JSON of frobs')\n"
        "def test_marked_for_a_referee():\n"
        "    pass\n\n"
        "def test_skips_for_another_reason():\n"
        "    pytest.skip('not on this platform')\n\n"
        "def test_passes():\n"
        "    pass\n"),
    "test_at_import.py": (
        "from tests.support import referees\n\n"
        "referees.import_or_skip('roost_no_such_module', 'the frob library')\n\n"
        "def test_never_collected():\n"
        "    pass\n"),
}


def run_suite(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, int], str]:
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "ROOST_REQUIRE_REFEREES")}
    environ["PYTHONPATH"] = str(ROOT)
    environ.update(env or {})
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path), *args],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120)
    summary = done.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    return done.returncode, counts, done.stdout


def test_referee_skips_stay_skips_when_not_required(tmp_path: Path) -> None:
    code, counts, out = run_suite(tmp_path)
    assert code == 0, out
    assert counts == {"passed": 1, "skipped": 4}, out


@pytest.mark.parametrize("option, env", [(["--require-referees"], {}), ([], {"CI": "true"})],
                         ids=["option", "CI"])
def test_referee_skips_fail_when_required(tmp_path: Path, option: list[str], env: dict[str, str]) -> None:
    code, counts, out = run_suite(tmp_path, *option, env=env)
    assert code == 1, out
    # The run-time skip and the module that skipped at import fail, the skipif mark errors at
    # setup; the unrelated skip stays a skip, and the run goes on to the passing test.
    assert counts == {"passed": 1, "failed": 2, "error": 1, "skipped": 1}, out
    for missing in ("the frobnicator", "the JSON of frobs", "the frob library (cannot import roost_no_such_module"):
        assert f"referee missing: {missing}" in out, out
    assert "may not skip because" in out


def test_what_requires_referees() -> None:
    assert referees.required(False, {}) is None
    assert referees.required(False, {"CI": "false", "ROOST_REQUIRE_REFEREES": "0"}) is None
    assert referees.required(True, {}) is not None
    assert referees.required(False, {"CI": "true"}) == "CI=true"
    assert referees.required(False, {"ROOST_REQUIRE_REFEREES": "1"}) == "ROOST_REQUIRE_REFEREES=1"
