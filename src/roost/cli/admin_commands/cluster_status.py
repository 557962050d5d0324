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

import os

import click

from roost.admin.health import (
    brokers_and_controller,
    brokers_zookeeper_connect,
    ensemble_problems,
    probe_keeper,
    unhealthy_partitions,
)
from roost.admin.kafka_client import fetch_metadata, open_admin
from roost.admin.target import DEFAULT_ZOOKEEPER, Target
from roost.cli.client.admin_output import emit_document
from roost.cli.client.client_options import format_option, kafka_target_options


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
