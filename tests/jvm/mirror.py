"""MirrorMaker 2 (Kafka 3.9's connect-mirror, dedicated mode: org.apache.kafka.connect.mirror.
MirrorMaker with an mm2.properties) between named clusters: MirrorSourceConnector copies topics
to "<source alias>.<topic>" on the target, MirrorCheckpointConnector writes each consumer group's
offsets, translated to the target's, to "<source alias>.checkpoints.internal" there and (with
sync.group.offsets.enabled) commits them for the group on the target, so a consumer of the group
moved to the target goes on where it left off.

One MirrorMaker process runs every flow a test names, so one JVM start serves them all.
"""

from __future__ import annotations

from pathlib import Path

from tests.jvm.programs import JavaProcess

# Fast enough for a test: topics, groups and checkpoints looked at every second or two, an offset
# sync for every record (offset.lag.max=0, so a translated offset is exact, not a lower bound).
FAST = {
    "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2",
    "emit.checkpoints.interval.seconds": "1", "emit.heartbeats.interval.seconds": "1",
    "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
    "offset.lag.max": "0", "sync.topic.configs.enabled": "true", "sync.topic.acls.enabled": "false",
    "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
    "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
    "config.storage.replication.factor": "1",
    # MirrorSourceTask sends the offset syncs it had to hold back only when its offsets are
    # committed: every second, not every minute (the default), or a checkpoint waits for them.
    "offset.flush.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "2000", "plugin.discovery": "service_load",
    "dedicated.mode.enable.internal.rest": "false",
}


def mm2_properties(clusters: dict[str, str], flows: dict[tuple[str, str], str], groups: str) -> str:
    """`clusters`: alias -> bootstrap; `flows`: (source, target) -> the topics regex to mirror."""
    lines = [f"clusters = {', '.join(clusters)}"]
    lines += [f"{alias}.bootstrap.servers = {bootstrap}" for alias, bootstrap in clusters.items()]
    # MirrorMaker and each herder's worker (which takes its settings from its target cluster's
    # prefix) find the plugins through their ServiceLoader manifests, not by scanning every jar
    # (25 s each here).
    lines += [f"{alias}.plugin.discovery = service_load" for alias in clusters]
    for source in clusters:
        for target in clusters:
            if source == target:
                continue
            topics = flows.get((source, target))
            lines.append(f"{source}->{target}.enabled = {'true' if topics else 'false'}")
            if not topics:  # no herder at all for a flow that is off (heartbeats would make one)
                lines.append(f"{source}->{target}.emit.heartbeats.enabled = false")
            if topics:
                lines.append(f"{source}->{target}.topics = {topics}")
                lines.append(f"{source}->{target}.groups = {groups}")
    lines += [f"{k} = {v}" for k, v in FAST.items()]
    return "\n".join(lines) + "\n"


def start(classes: Path, root: Path, clusters: dict[str, str], flows: dict[tuple[str, str], str],
          groups: str) -> JavaProcess:
    properties = root / "mm2.properties"
    properties.write_text(mm2_properties(clusters, flows, groups))
    return JavaProcess(classes, "org.apache.kafka.connect.mirror.MirrorMaker", [str(properties)],
                       root / "mirror-maker.log", heap="-Xmx512m")
