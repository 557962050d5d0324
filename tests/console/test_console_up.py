"""`roost up` serves the console beside its node, in a process of its own that ends with the node
(even when the node is killed), and a console port already taken does not stop the node (one line
says there is no console)."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

from tests.support.procs import RoostProcess, process_alive, start_roost, wait_for


def console_children(node: RoostProcess) -> list[int]:
    """The node's child processes that run `roost console` (Linux /proc)."""
    pid = node.popen.pid
    children = [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()]
    return [c for c in children if b"console" in Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")]


def test_roost_up_serves_the_console_beside_its_node(tmp_path: Path) -> None:
    node = start_roost(["up", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0", "--console-port", "0"],
                       expect=("kafka", "console"))
    try:
        with urllib.request.urlopen(f"http://{node.address('console')}/api/overview", timeout=30) as response:
            overview = json.loads(response.read())
        assert [b["address"] for b in overview["brokers"]] == [node.address("kafka")]
        assert [m["role"] for m in overview["keepers"]] == ["standalone"]
        with urllib.request.urlopen(f"http://{node.address('console')}/", timeout=30) as response:
            assert b"Roost console" in response.read()
        # Its own process, so that rendering pages never holds the broker's event loop.
        [console] = console_children(node)
    finally:
        assert node.stop() == 0
    wait_for(lambda: not process_alive(console), 30, what="the console to stop with its node")


def test_the_console_process_ends_when_its_node_is_killed(tmp_path: Path) -> None:
    node = start_roost(["up", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0", "--console-port", "0"],
                       expect=("kafka", "console"))
    try:
        [console] = console_children(node)
        node.kill9()
        wait_for(lambda: not process_alive(console), 30, what="the orphaned console to stop")
        with socket.socket() as probe:
            host, port = node.address("console").rsplit(":", 1)
            assert probe.connect_ex((host, int(port))) != 0, "the console port still answers"
    finally:
        node.stop()


def test_a_taken_console_port_leaves_the_node_running_without_a_console(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = start_roost(["up", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0", "--console-port", str(port)])
        try:
            wait_for(lambda: "console: cannot listen" in node.text(), 30, what="the no-console line")
            assert "console" not in node.listeners
            assert node.popen.poll() is None
        finally:
            assert node.stop() == 0


def test_roost_up_with_brokers_serves_the_console_once_the_cluster_is_ready(tmp_path: Path) -> None:
    cluster = start_roost(["up", "--brokers", "1", "--data-dir", str(tmp_path / "c"), "--console-port", "0"],
                          expect=("broker 1 kafka", "console"))
    try:
        with urllib.request.urlopen(f"http://{cluster.address('console')}/api/overview", timeout=30) as response:
            overview = json.loads(response.read())
        assert [(b["id"], b["address"], b["up"]) for b in overview["brokers"]] == [
            (1, cluster.address("broker 1 kafka"), True)]
        assert [m["role"] for m in overview["keepers"]] == ["standalone"]
    finally:
        assert cluster.stop() == 0
