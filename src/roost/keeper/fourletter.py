"""Answers to ZooKeeper's four-letter admin words (ruok, srvr, stat, mntr, envi, conf, ...).

The formats follow ZooKeeper 3.8 closely enough for tools that parse them: kazoo's
`server_version()` reads `zookeeper.version=` from `envi`; monitoring scripts read `mntr`'s
tab-separated `zk_*` lines.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from dataclasses import dataclass

# The ZooKeeper version we speak, reported so that clients enable the features of 3.8.
ZOOKEEPER_VERSION = "3.8.0-roost, built on 2026-01-01 00:00 UTC"

# ZooKeeper's answer to the words that describe a running server while the member is not serving
# (an ensemble member cut off from its quorum, or still looking for a leader).
NOT_SERVING = "This ZooKeeper instance is not currently serving requests\n"
_NEED_SERVING = frozenset({"srvr", "stat", "mntr", "conf", "cons", "wchs", "srst", "crst"})


@dataclass(slots=True)
class ServerFacts:
    """A snapshot of the numbers the four-letter words report."""

    mode: str  # standalone, leader, follower, observer
    zxid: int
    node_count: int
    connections: int
    outstanding: int
    packets_received: int
    packets_sent: int
    min_latency_ms: int
    avg_latency_ms: float
    max_latency_ms: int
    watch_count: int
    watched_paths: int
    ephemerals_count: int
    approximate_data_size: int
    sessions: int
    uptime_ms: int
    client_lines: list[str]
    config_lines: list[str]
    serving: bool = True  # False: an ensemble member that knows no leader


def _srvr_body(facts: ServerFacts, with_clients: bool) -> str:
    lines = [f"Zookeeper version: {ZOOKEEPER_VERSION}"]
    if with_clients:
        lines.append("Clients:")
        lines.extend(facts.client_lines)
        lines.append("")
    lines += [
        f"Latency min/avg/max: {facts.min_latency_ms}/{facts.avg_latency_ms:.4f}/{facts.max_latency_ms}",
        f"Received: {facts.packets_received}",
        f"Sent: {facts.packets_sent}",
        f"Connections: {facts.connections}",
        f"Outstanding: {facts.outstanding}",
        f"Zxid: 0x{facts.zxid:x}",
        f"Mode: {facts.mode}",
        f"Node count: {facts.node_count}",
    ]
    return "\n".join(lines) + "\n"


def _mntr(facts: ServerFacts) -> str:
    rows = [
        ("zk_version", ZOOKEEPER_VERSION),
        ("zk_server_state", facts.mode),
        ("zk_avg_latency", f"{facts.avg_latency_ms:.4f}"),
        ("zk_max_latency", facts.max_latency_ms),
        ("zk_min_latency", facts.min_latency_ms),
        ("zk_packets_received", facts.packets_received),
        ("zk_packets_sent", facts.packets_sent),
        ("zk_num_alive_connections", facts.connections),
        ("zk_outstanding_requests", facts.outstanding),
        ("zk_znode_count", facts.node_count),
        ("zk_watch_count", facts.watch_count),
        ("zk_ephemerals_count", facts.ephemerals_count),
        ("zk_approximate_data_size", facts.approximate_data_size),
        ("zk_global_sessions", facts.sessions),
        ("zk_local_sessions", 0),
        ("zk_uptime", facts.uptime_ms),
        ("zk_open_file_descriptor_count", open_file_descriptors()),
    ]
    return "".join(f"{key}\t{value}\n" for key, value in rows)


def open_file_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def _envi() -> str:
    rows = [
        ("zookeeper.version", ZOOKEEPER_VERSION),
        ("host.name", socket.gethostname()),
        ("python.version", sys.version.split()[0]),
        ("os.name", platform.system()),
        ("os.arch", platform.machine()),
        ("os.version", platform.release()),
        ("user.dir", os.getcwd()),
    ]
    return "Environment:\n" + "".join(f"{key}={value}\n" for key, value in rows)


def answer(command: str, facts: ServerFacts, whitelist: frozenset[str] | None) -> str:
    """The text a server sends back for `command` before closing the connection."""
    if whitelist is not None and command not in whitelist:
        return f"{command} is not executed because it is not in the whitelist.\n"
    if command in _NEED_SERVING and not facts.serving:
        return NOT_SERVING
    if command == "ruok":
        return "imok"
    if command == "srvr":
        return _srvr_body(facts, with_clients=False)
    if command == "stat":
        return _srvr_body(facts, with_clients=True)
    if command == "mntr":
        return _mntr(facts)
    if command == "envi":
        return _envi()
    if command == "conf":
        return "\n".join(facts.config_lines) + "\n"
    if command == "cons":
        return "\n".join(facts.client_lines) + "\n\n"
    if command == "isro":
        return "rw"
    if command == "wchs":
        return (f"{facts.connections} connections watching {facts.watched_paths} paths\n"
                f"Total watches:{facts.watch_count}\n")
    if command in ("srst", "crst"):
        return "Server stats reset.\n" if command == "srst" else "Connection stats reset.\n"
    return f"{command} is not supported by this server.\n"
