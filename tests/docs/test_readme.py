"""The README's own code blocks, extracted and run as a new user would run them, so that the
README cannot drift from what Roost does: the round trips with `roost` and with confluent-kafka
against a real `roost up` node, the local 3-broker cluster in one command and `roost cluster
status` against it, and the pytest fixture example in a pytest of its own.

Each block is marked in the README by the HTML comment `<!-- readme-test: NAME -->` on the line
before its fence. Only what a new user would change is changed: the fixed address 127.0.0.1:9092
becomes the test node's (or ROOST_BOOTSTRAP names it), `roost` is this checkout's, the cluster's
data directory is a temporary one, and the cluster-status example's address is one the cluster
printed. One node is shared by the module; the 3-broker cluster is the long part (about 10-30 s
on a loaded 2-core machine).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.reference import ROOT
from tests.support.procs import RoostProcess, start_roost, wait_for

MARK = re.compile(r"<!-- readme-test: (?P<name>[a-z-]+) -->\n```(?P<lang>\w+)\n(?P<code>.*?)\n```", re.S)
README_ADDRESS = "127.0.0.1:9092"
CLUSTER_READY = re.compile(r"cluster ready: bootstrap servers (?P<bootstrap>\S+); zookeeper.connect (?P<zk>\S+)")


def readme_blocks() -> dict[str, tuple[str, str]]:
    """name -> (language, code) of every marked block of the README."""
    text = (ROOT / "README.md").read_text()
    return {m["name"]: (m["lang"], m["code"]) for m in MARK.finditer(text)}


BLOCKS = readme_blocks()


def block(name: str, lang: str) -> str:
    assert name in BLOCKS, f"README.md has no block marked <!-- readme-test: {name} -->"
    found_lang, code = BLOCKS[name]
    assert found_lang == lang, f"README block {name} is {found_lang}, not {lang}"
    return code


def user_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_shell(code: str, env: dict[str, str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a README `sh` block line by line in bash, with `roost` this checkout's command."""
    script = f'set -euo pipefail\nroost() {{ "{sys.executable}" -m roost.cli.main "$@"; }}\n{code}\n'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("readme-node")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0"], expect=("kafka", "keeper"))
    yield proc
    proc.stop()


def test_the_readme_marks_every_block_this_test_runs() -> None:
    assert set(BLOCKS) == {"cli-round-trip", "python-round-trip", "cluster", "cluster-status", "pytest"}
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 160, f"the README is {len(lines)} lines: detail belongs in docs/"
    # The two set-up commands CI depends on (.ci/run runs `make test`).
    assert "    make run" in lines and "    make test" in lines


def test_a_message_round_trip_with_the_roost_command(node: RoostProcess) -> None:
    result = run_shell(block("cli-round-trip", "sh"), user_env(ROOST_BOOTSTRAP=node.address("kafka")))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "hello", result.stdout


def test_a_message_round_trip_with_a_python_client(node: RoostProcess) -> None:
    code = block("python-round-trip", "python")
    assert README_ADDRESS in code
    code = code.replace(README_ADDRESS, node.address("kafka"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=user_env(), timeout=90)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "b'user-42' b'hello'"


def test_the_fixture_example_passes_in_a_users_pytest(node: RoostProcess, tmp_path: Path) -> None:
    """The example runs in a pytest of its own that loads the plugin through its entry point, as
    a user's would; it is pointed at the module's node (--roost-bootstrap) so that no second node
    starts."""
    (tmp_path / "test_users_app.py").write_text(block("pytest", "python") + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_users_app.py"),
         "--roost-bootstrap", node.address("kafka"), "--roost-zookeeper", node.address("keeper")],
        capture_output=True, text=True, cwd=tmp_path, env=user_env(), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_a_local_cluster_in_one_command_and_its_status(tmp_path: Path) -> None:
    up = block("cluster", "sh").strip()
    assert up.startswith("roost up --brokers 3 --data-dir /tmp/roost-cluster") and "\n" not in up
    args = up.split()[1:]
    args[args.index("/tmp/roost-cluster")] = str(tmp_path / "roost-cluster")
    cluster = start_roost(args, expect=(), wait=False)
    try:
        ready = wait_for(lambda: CLUSTER_READY.search(cluster.text()) or cluster.popen.poll() is not None,
                         timeout=90, what="the cluster to be ready")
        assert isinstance(ready, re.Match), cluster.text()
        first = ready["bootstrap"].split(",")[0]
        assert len(ready["bootstrap"].split(",")) == 3
        status = block("cluster-status", "sh").strip()
        address = re.search(r"-b (\S+)", status)
        assert address is not None
        # The README's address is an example of what the cluster prints: use the one it printed.
        result = run_shell(status.replace(address[1], first), user_env(), timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "True" in result.stdout or "true" in result.stdout, result.stdout
    finally:
        cluster.stop(timeout=60)


def test_every_file_the_readme_links_to_exists() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing
