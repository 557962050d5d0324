"""`roost cluster status`: is the cluster healthy? Brokers (id, address, rack), the controller,
partitions that are under-replicated or offline, and the keeper (ZooKeeper) ensemble's members
with their roles, read with the four-letter word `srvr`.

    roost cluster status -b 10.0.0.5:9092       # the keepers: from the brokers' zookeeper.connect
    roost cluster status -b 10.0.0.5:9092 --zookeeper 10.0.0.5:2181,10.0.0.6:2181,10.0.0.7:2181
    roost cluster status --format json && echo healthy

Exit status: 0 healthy; 2 unhealthy (an offline or under-replicated partition, a keeper member
down or not serving, an ensemble without a leader); 1 when the brokers cannot be asked at all.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
from dataclasses import dataclass
from typing import Any

import click
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from roost.cli.client_options import DEFAULT_ZOOKEEPER, Target, format_option, kafka_target_options
from roost.cli.kafka_admin import (
    await_result,
    broker_api_keys,
    emit_document,
    fetch_metadata,
    open_admin,
)

DESCRIBE_CLUSTER_KEY = 60
NOT_SERVING = "not currently serving requests"
# Roles of a keeper that serves: ZooKeeper's `Mode:` values.
SERVING_MODES = ("standalone", "leader", "follower", "observer")


@dataclass(frozen=True)
class KeeperMember:
    """One ensemble member as its `srvr` answer shows it."""

    address: str
    role: str  # a Mode (leader, follower, standalone, ...), or down, not-serving, unknown
    zxid: str | None = None
    nodes: int | None = None
    detail: str | None = None

    @property
    def healthy(self) -> bool:
        return self.role in SERVING_MODES or self.role == "unknown"


def four_letter_word(address: str, word: str, timeout_s: float) -> str:
    """Send a four-letter word to `address` (host:port) and read the whole answer."""
    host, _, port = address.strip().rpartition(":")
    with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout_s) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def probe_keeper(address: str, timeout_s: float) -> KeeperMember:
    """The member at `address`, from its answer to `srvr`."""
    try:
        answer = four_letter_word(address, "srvr", timeout_s)
    except (OSError, ValueError) as error:
        return KeeperMember(address, "down", detail=str(error) or type(error).__name__)
    if NOT_SERVING in answer:
        return KeeperMember(address, "not-serving", detail="no quorum: knows no leader")
    fields = dict(line.split(": ", 1) for line in answer.splitlines() if ": " in line)
    if "Mode" not in fields:  # e.g. srvr not in 4lw.commands.whitelist: up, role not told
        return KeeperMember(address, "unknown", detail=answer.strip()[:80] or "empty answer to srvr")
    nodes = fields.get("Node count")
    return KeeperMember(address, fields["Mode"].strip(), zxid=fields.get("Zxid"),
                        nodes=int(nodes) if nodes and nodes.strip().isdigit() else None)


def ensemble_problems(members: list[KeeperMember]) -> list[str]:
    problems = [f"keeper {m.address} is {m.role}" for m in members if not m.healthy]
    leaders = [m for m in members if m.role == "leader"]
    if len(members) > 1 and all(m.healthy for m in members) and not leaders \
            and not any(m.role == "unknown" for m in members):
        problems.append("the keeper ensemble has no leader")
    if len(leaders) > 1:
        problems.append(f"the keeper ensemble has {len(leaders)} leaders")
    return problems


def brokers_and_controller(target: Target, admin: Any, metadata: Any) -> tuple[list[dict[str, Any]], int | None]:
    """Live brokers (with racks when the cluster answers DescribeCluster) and the controller id."""
    keys = broker_api_keys(target)
    if keys is None or DESCRIBE_CLUSTER_KEY in keys:
        described = await_result(admin.describe_cluster(request_timeout=target.timeout_s), target, "describe cluster")
        rows = [{"id": node.id, "address": f"{node.host}:{node.port}", "rack": node.rack}
                for node in sorted(described.nodes, key=lambda n: n.id)]
        return rows, described.controller.id if described.controller else None
    rows = [{"id": b.id, "address": f"{b.host}:{b.port}", "rack": None}
            for b in sorted(metadata.brokers.values(), key=lambda b: b.id)]
    return rows, metadata.controller_id if metadata.controller_id >= 0 else None


def brokers_zookeeper_connect(target: Target, admin: Any, broker_ids: list[int]) -> str | None:
    """The ensemble the brokers are joined to, from a broker's `zookeeper.connect`
    (DescribeConfigs) without its chroot; None when no broker says (KRaft, or no answer)."""
    for broker_id in broker_ids[:3]:
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        try:
            configs = admin.describe_configs([resource], request_timeout=target.timeout_s)[resource] \
                .result(timeout=target.timeout_s)
        except (KafkaException, concurrent.futures.TimeoutError, ValueError):
            continue
        entry = configs.get("zookeeper.connect")
        if entry is not None and entry.value:
            return str(entry.value).split("/", 1)[0]
    return None


def unhealthy_partitions(metadata: Any) -> list[dict[str, Any]]:
    rows = []
    for topic in sorted(metadata.topics):
        for index, p in sorted(metadata.topics[topic].partitions.items()):
            problems = [name for name, bad in (("offline", p.leader < 0),
                                               ("under-replicated", len(p.isrs) < len(p.replicas))) if bad]
            if problems:
                rows.append({"topic": topic, "partition": index, "leader": p.leader, "replicas": list(p.replicas),
                             "isr": list(p.isrs), "problem": ",".join(problems)})
    return rows


@click.group("cluster")
def command() -> None:
    """The cluster as a whole: status."""


@command.command("status")
@click.option("--zookeeper", "--server", "zookeeper", metavar="HOST:PORT[,...]",
              help="the keeper (ZooKeeper) ensemble's members (default: env ROOST_ZOOKEEPER, the profile's, "
                   "else the brokers' zookeeper.connect, else 127.0.0.1:2181)")
@kafka_target_options
@format_option
def status(target: Target, zookeeper: str | None, output_format: str) -> None:
    """Brokers, controller, under-replicated and offline partitions, keeper members and roles.
    Exits 2 when the cluster is unhealthy, 0 when healthy.

    \b
    roost cluster status --zookeeper 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183
    """
    admin = open_admin(target)
    metadata = fetch_metadata(admin, target)
    brokers, controller = brokers_and_controller(target, admin, metadata)
    partitions = unhealthy_partitions(metadata)
    live = {b["id"] for b in brokers}
    missing = sorted({r for t in metadata.topics.values() for p in t.partitions.values() for r in p.replicas} - live)
    ensemble = zookeeper or os.environ.get("ROOST_ZOOKEEPER") or \
        (target.zookeeper if target.zookeeper != DEFAULT_ZOOKEEPER else None) or \
        brokers_zookeeper_connect(target, admin, [b["id"] for b in brokers]) or DEFAULT_ZOOKEEPER
    addresses = [a.strip() for a in ensemble.split(",") if a.strip()]
    keepers = [probe_keeper(address, min(target.timeout_s, 5.0)) for address in addresses]
    problems = [f"{len([p for p in partitions if 'offline' in p['problem']])} offline partition(s)"] \
        if any("offline" in p["problem"] for p in partitions) else []
    under = [p for p in partitions if "under-replicated" in p["problem"]]
    if under:
        problems.append(f"{len(under)} under-replicated partition(s)")
    if missing:
        problems.append(f"replica broker(s) not live: {', '.join(map(str, missing))}")
    if controller is None:
        problems.append("no controller")
    problems += ensemble_problems(keepers)
    document = {
        "summary": [{"cluster_id": metadata.cluster_id, "controller": controller,
                     "brokers": len(brokers), "healthy": not problems}],
        "problems": [{"problem": p} for p in problems],
        "brokers": brokers,
        "partitions": partitions,
        "keepers": [{"address": k.address, "role": k.role, "zxid": k.zxid, "nodes": k.nodes, "detail": k.detail}
                    for k in keepers],
    }
    emit_document(document, [
        ("summary", None, ["cluster_id", "controller", "brokers", "healthy"]),
        ("problems", "problems", ["problem"]),
        ("brokers", "brokers", ["id", "address", "rack"]),
        ("partitions", "under-replicated or offline partitions", ["topic", "partition", "leader", "replicas", "isr",
                                                                  "problem"]),
        ("keepers", "keepers", ["address", "role", "zxid", "nodes", "detail"]),
    ], output_format)
    if problems:
        # SystemExit, not click's Exit: main() runs click with standalone_mode=False, where an
        # Exit's code is returned by cli.main() and dropped.
        raise SystemExit(2)
