"""Is the cluster healthy? The brokers and the controller, partitions that are offline or
under-replicated, and each keeper member's role from its answer to the four-letter word `srvr`:
what `roost cluster status` prints and the console's overview shows."""

from __future__ import annotations

import concurrent.futures
import socket
import ssl
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from roost.admin.kafka_client import await_result, broker_api_keys
from roost.admin.target import Target

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


def four_letter_word(address: str, word: str, timeout_s: float, tls: ssl.SSLContext | None = None) -> str:
    """Send a four-letter word to `address` (host:port) and read the whole answer; over TLS with
    `tls` (a keeper's or ZooKeeper's secure client port answers them too)."""
    host, _, port = address.strip().rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
        sock = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def probe_keeper(address: str, timeout_s: float, tls: ssl.SSLContext | None = None) -> KeeperMember:
    """The member at `address`, from its answer to `srvr`."""
    try:
        answer = four_letter_word(address, "srvr", timeout_s, tls)
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
