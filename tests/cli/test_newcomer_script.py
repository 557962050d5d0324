"""A newcomer's shell script against a running `roost up` (examples/cli/newcomer.sh): create a
topic, produce 10,000 keyed lines from a file, read them back as JSON and by a format string with
exact equality, a time range with @, a group's lag while it is behind, a seek planned then
executed, a trim, a delete. Each step checks itself and the script stops at the first surprise.

It runs twice: once with `roost consume` reading the records back, once with kcat doing every
read (a client that shares no code with Roost), and both must pass."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.procs import ROOST, RoostProcess

SCRIPT = Path(__file__).parents[2] / "examples" / "cli" / "newcomer.sh"


@pytest.fixture(scope="module")
def roost_command(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`roost` of this checkout, as a command the script can call."""
    wrapper = tmp_path_factory.mktemp("bin") / "roost"
    wrapper.write_text("#!/bin/sh\nexec " + " ".join(ROOST) + ' "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.parametrize("checker", ["roost", "kcat"])
def test_the_newcomer_script_passes_every_step(broker: RoostProcess, roost_command: str, checker: str) -> None:
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ROOST": roost_command, "CHECKER": checker,
                               "ROOST_BOOTSTRAP": broker.address("kafka")})
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    steps = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert len(steps) == 10 and steps[-1] == f"== all steps passed ({checker} checking)", done.stdout
