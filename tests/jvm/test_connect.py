"""Kafka Connect (3.9) in distributed mode on the shared Roost cluster: two workers keep their
config, offset and status topics on Roost; the FileStream source and sink connectors copy a file
through a topic into another file; one worker is killed with SIGKILL, its connectors and tasks
move to the other, and the sink file ends up with every line of the source file (FileStream is
at-least-once: a line may come twice across the kill, never not at all, and nothing else comes).
The longer version: scripts/connect_failover.py."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import ConfigResource

from tests.jvm import connect
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

CONNECTORS = ["file-source", "file-sink"]


def test_tasks_move_to_the_surviving_worker_and_every_line_arrives(roost3: LocalCluster, java_classes: Path,
                                                                   tmp_path: Path) -> None:
    workers = connect.ConnectCluster(java_classes, tmp_path, roost3.bootstrap, count=2)
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    try:
        workers.start_all()
        connect.copy_lines(workers, source, sink, "connect-lines")
        written = connect.append_lines(source, 0, 200)
        placed = wait_for(lambda: workers.placed_on(CONNECTORS, workers.alive()), 90, interval=0.5,
                          what="both connectors and their tasks running")
        wait_for(lambda: set(written) <= set(connect.sink_lines(sink)), 60, interval=0.3,
                 what="the first lines in the sink file")

        # Kill the worker running the source task (its offsets are what the other must resume from).
        source_task_worker = placed["file-source"][1]
        victim = next(w for w in workers.workers if w.worker_id == source_task_worker)
        assert victim.process is not None
        victim.process.kill()
        survivor = [w for w in workers.workers if w is not victim]
        written += connect.append_lines(source, 200, 300)
        moved = wait_for(lambda: workers.placed_on(CONNECTORS, survivor), 90, interval=0.5,
                         what="the connectors and tasks moved to the surviving worker")
        assert {worker for ids in moved.values() for worker in ids} == {survivor[0].worker_id}
        wait_for(lambda: set(written) <= set(connect.sink_lines(sink)), 60, interval=0.3,
                 what="every source line in the sink file")
        copied = connect.sink_lines(sink)
        assert set(copied) == set(written)  # nothing but the source's lines
        assert copied[-1] == written[-1]  # the last line last
    finally:
        workers.close()
    # Connect's own topics are on Roost, compacted as Connect requires (it checks at start).
    admin = roost3.admin()
    for topic in ("roost-connect-configs", "roost-connect-offsets", "roost-connect-status"):
        resource = ConfigResource("topic", topic)
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["cleanup.policy"].value == "compact", topic
