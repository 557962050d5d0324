"""roost.testing, the pytest plugin, used as users use it: test modules a user would write run in
a pytest of their own (pytester's runpytest_subprocess), which loads the plugin through its
`pytest11` entry point, against real `roost` processes and real clients (confluent-kafka, kazoo).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from roost.testing.plugin import unique_topic_name
from tests.support.procs import process_alive, start_roost, wait_for
from tests.testing import user_modules

pytest_plugins = ["pytester"]

RUN_TIMEOUT_S = 180.0  # against a hang only; a run takes seconds


def run_user_tests(pytester: pytest.Pytester, modules: dict[str, str], *args: str) -> pytest.RunResult:
    pytester.makeconftest(user_modules.CONFTEST)
    pytester.makepyfile(**modules)
    return pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider", *args, timeout=RUN_TIMEOUT_S)


def leftovers(pytester: pytest.Pytester) -> dict[str, list[int]]:
    """The pids the user's tests saw and those still running after the session's teardown."""
    return json.loads((pytester.path / "leftovers.json").read_text())


def recorded_bootstraps(pytester: pytest.Pytester) -> set[str]:
    lines = (pytester.path / "pids.txt").read_text().splitlines()
    return {json.loads(line)["bootstrap"] for line in lines}


def test_a_users_node_tests_pass_through_the_entry_point(pytester: pytest.Pytester) -> None:
    result = run_user_tests(pytester, {"test_with_roost": user_modules.NODE_TESTS})
    result.stdout.fnmatch_lines(["plugins:*roost-*"])  # loaded as an installed plugin, by its entry point
    result.assert_outcomes(passed=9)
    seen = leftovers(pytester)
    assert len(seen["pids"]) == 1, "one node for the whole session"
    assert seen["alive"] == [], "the node was stopped at the end of the session"


def test_a_failing_user_test_reports_normally_and_the_node_still_stops(pytester: pytest.Pytester) -> None:
    result = run_user_tests(pytester, {"test_with_bug": user_modules.FAILING_TEST})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: the user's own assertion*"])
    seen = leftovers(pytester)
    assert len(seen["pids"]) == 1
    assert seen["alive"] == []


@pytest.mark.parametrize("how", ["command line", "ini file"])
def test_an_external_node_is_used_and_nothing_started(pytester: pytest.Pytester, tmp_path: Path, how: str) -> None:
    node = start_roost(["up", "--data-dir", str(tmp_path / "external"), "--kafka-port", "0",
                        "--set", "group.initial.rebalance.delay.ms=0"], expect=("kafka", "keeper"))
    try:
        bootstrap, zookeeper = node.address("kafka"), node.address("keeper")
        if how == "command line":
            args: tuple[str, ...] = ("--roost-bootstrap", bootstrap, "--roost-zookeeper", zookeeper)
            passed = 9
        else:
            pytester.makeini(f"[pytest]\nroost_bootstrap = {bootstrap}\nroost_zookeeper = {zookeeper}\n")
            args = ("-k", "helpers or kazoo or test_with_cluster")  # the command line's run shows the rest
            passed = 2
        result = run_user_tests(pytester, {"test_with_roost": user_modules.NODE_TESTS,
                                           "test_with_cluster": user_modules.CLUSTER_TESTS}, *args)
        result.assert_outcomes(passed=passed, skipped=2)
        result.stdout.fnmatch_lines(["SKIPPED*roost_cluster injects faults*with --roost-bootstrap*"])
        assert recorded_bootstraps(pytester) == {bootstrap}
        assert leftovers(pytester)["pids"] == [], "nothing was started"
        assert node.popen.poll() is None, "the external node is left running"
    finally:
        node.stop()


def test_a_cluster_survives_a_killed_broker_an_expired_session_and_a_keeper_restart(
        pytester: pytest.Pytester) -> None:
    result = run_user_tests(pytester, {"test_with_cluster": user_modules.CLUSTER_TESTS})
    result.assert_outcomes(passed=2)
    seen = leftovers(pytester)
    # 1 keeper + 3 brokers, one broker restarted after a kill and two more restarted later, and the
    # keeper restarted once.
    assert len(seen["pids"]) == 4 + 3 + 1
    assert seen["alive"] == []


def test_cluster_tests_of_one_module_must_agree_on_its_size(pytester: pytest.Pytester) -> None:
    module = ("import pytest\n\n"
              "@pytest.mark.roost_cluster(brokers=2)\ndef test_two(roost_cluster):\n    pass\n\n"
              "@pytest.mark.roost_cluster(brokers=3)\ndef test_three(roost_cluster):\n    pass\n")
    result = run_user_tests(pytester, {"test_sizes": module})
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*roost_cluster is one cluster per module*"])


def test_unique_topic_names_are_legal_and_differ() -> None:
    first = unique_topic_name("test_x[a/b c]")
    assert first.startswith("test_x-a-b-c-")
    assert first != unique_topic_name("test_x[a/b c]")
    assert len(unique_topic_name("t" * 500)) <= 249


def test_the_helpers_say_what_to_install_without_confluent_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    from roost.testing.clients import MissingClientError, confluent
    from roost.testing.node import RoostNode

    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # as if not installed
    with pytest.raises(MissingClientError, match="pip install confluent-kafka"):
        confluent()
    with pytest.raises(MissingClientError):
        RoostNode.external("127.0.0.1:1", None).create_topic("t")


def test_a_node_does_not_outlive_a_killed_pytest(tmp_path: Path) -> None:
    """The fixtures' processes get SIGTERM from the kernel when the process that started them
    dies, even by SIGKILL (where no teardown runs)."""
    starter = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom roost.testing.node import RoostNode\n"
         "node = RoostNode.start(Path(sys.argv[1]))\nprint(node.process.pid, flush=True)\ntime.sleep(120)\n",
         str(tmp_path / "node")], stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        node_pid = int(starter.stdout.readline())
        assert process_alive(node_pid)
    finally:
        starter.kill()
        starter.wait(30)
    wait_for(lambda: not process_alive(node_pid), 30, what=f"node {node_pid} to exit after its starter was killed")
    assert "roost: stopped" in (tmp_path / "node" / "roost.log").read_text(), "it stopped cleanly, by SIGTERM"


