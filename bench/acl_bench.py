"""What the authorizer adds to an unbatched produce: broker CPU per request with and without
`authorizer.class.name`, in one run (issue 19's target: at most 5 % more).

Prints figures with their conditions; never asserts.

    .venv/bin/python bench/acl_bench.py [--requests 20000] [--rounds 3]

Over a socket: `roost up --no-keeper` (a lone broker; its ACLs in meta/acls.json, written before
it starts), this process sending Produce v9 (one 100 B record, acks=1, one partition) one at a
time and waiting for each answer, the broker's user + system CPU per request from /proc. Rounds
alternate between the two brokers so that a noisy machine favours neither. The ACLs are
realistic rather than a short cut: User:ANONYMOUS is no super user, its topic has a LITERAL ALLOW
for Write/Describe/Create among 200 other topics' ACLs, a PREFIXED DENY for another principal and
a `*` pattern (so every decision looks at candidates); the cache makes all but the first
decision per (principal, host, operation, topic) one dict lookup.

Also in process: the Produce rule alone (`api_rules.RULES[PRODUCE]` on a decoded request), µs
per call, for the same ACLs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from broker_bench import running_broker as lone_broker
from process_cpu import cpu_seconds

from roost.broker.handlers.api_rules import guard
from roost.broker.metadata.cache import MetadataCache, PartitionInfo
from roost.broker.net.request import Request
from roost.broker.security import acl_znodes
from roost.broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from roost.broker.security.authorizer import Authorizer
from roost.principal import ANONYMOUS
from roost.wire.kafka import ApiKey, RequestHeader, decode_response, encode_request
from roost.wire.kafka.records import build_batch

TOPIC = "acl-bench"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
OTHER_TOPICS = 200


def bench_acls() -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    def allow(principal: str, *operations: AclOperation) -> frozenset[AccessControlEntry]:
        return frozenset(AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW) for op in operations)
    acls = {ResourcePattern(ResourceType.TOPIC, TOPIC, PatternType.LITERAL):
            allow("User:ANONYMOUS", AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE),
            ResourcePattern(ResourceType.TOPIC, "acl-", PatternType.PREFIXED): frozenset(
                {AccessControlEntry("User:mallory", "*", AclOperation.ALL, AclPermissionType.DENY)}),
            ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL): allow("User:monitor", AclOperation.DESCRIBE)}
    for n in range(OTHER_TOPICS):
        acls[ResourcePattern(ResourceType.TOPIC, f"other-{n}", PatternType.LITERAL)] = \
            allow(f"User:app{n}", AclOperation.READ, AclOperation.WRITE)
    return acls


def write_local_acls(data_dir: Path) -> None:
    """meta/acls.json as the lone broker's LocalAclStore keeps it."""
    (data_dir / "meta").mkdir(parents=True, exist_ok=True)
    document = {f"{p.pattern_type.name}/{acl_znodes.pascal(p.resource_type.name)}/{p.name}":
                json.loads(acl_znodes.encode_entries(entries)) for p, entries in bench_acls().items()}
    (data_dir / "meta" / "acls.json").write_text(json.dumps(document))


@contextmanager
def running_broker(authorized: bool) -> Iterator[tuple[int, str]]:
    with tempfile.TemporaryDirectory(prefix="roost-acl-bench-") as data:
        flags = []
        if authorized:
            write_local_acls(Path(data) / "broker")
            write_local_acls(Path(data))
            flags = ["--authorizer.class.name", AUTHORIZER]
        with lone_broker(*flags, data_dir=Path(data)) as broker:
            yield broker.popen.pid, broker.bootstrap


class Producer:
    """One Produce v9 at a time on one connection, each frame encoded once."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": 0, "records": bytes(build_batch([(None, b"x" * 100)], timestamp_ms=int(time.time() * 1000)))}]}]}
        self.frame = b"".join(bytes(b) for b in encode_request(RequestHeader(0, 9, 1, "acl-bench"), body))

    def one(self) -> int:
        self.sock.sendall(self.frame)
        size = struct.unpack(">i", self._read(4))[0]
        _, response = decode_response(0, 9, self._read(size))
        return response["responses"][0]["partition_responses"][0]["error_code"]

    def _read(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


def socket_round(authorized: bool, requests: int) -> float:
    """Broker CPU µs per produce over `requests` (after a warm-up that also creates the topic)."""
    with running_broker(authorized) as (pid, bootstrap):
        producer = Producer(bootstrap)
        deadline = time.monotonic() + 30
        while producer.one() != 0:  # the first ones create the topic (auto-creation)
            if time.monotonic() > deadline:
                raise RuntimeError("produce never succeeded")
            time.sleep(0.05)
        for _ in range(min(2000, requests)):
            producer.one()
        before = cpu_seconds(pid)
        for _ in range(requests):
            code = producer.one()
            assert code == 0, code
        used = cpu_seconds(pid) - before
        producer.sock.close()
    return used / requests * 1e6


def guard_us(calls: int) -> tuple[float, float]:
    """µs per call of a trivial Produce handler, bare and behind the authorizer's guard, on a
    decoded request (the cache warm): what the check adds in process."""
    authorizer = Authorizer()
    for pattern, entries in bench_acls().items():
        authorizer.replace(pattern, entries)
    metadata = MetadataCache()
    metadata.set_partition(TOPIC, 0, PartitionInfo(0, 0, (0,), (0,)))

    def handler(request: Request) -> Any:
        return request

    guarded = guard({ApiKey.PRODUCE: handler}, authorizer, metadata, auto_create=True)[ApiKey.PRODUCE]
    body = {"acks": 1, "transactional_id": None, "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0}]}]}
    request = Request(RequestHeader(0, 9, 1, "bench"), body, "127.0.0.1", ANONYMOUS)
    assert guarded(request) is request
    timings = []
    for call in (handler, guarded):
        started = time.process_time()
        for _ in range(calls):
            call(request)
        timings.append((time.process_time() - started) / calls * 1e6)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"acl_bench: Python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"{args.requests} unbatched Produce v9 (100 B, acks=1) per round, {args.rounds} rounds each, alternating")
    off: list[float] = []
    on: list[float] = []
    for _ in range(args.rounds):
        off.append(socket_round(False, args.requests))
        on.append(socket_round(True, args.requests))
    for label, runs in (("no authorizer", off), ("AclAuthorizer", on)):
        print(f"  {label:15s} broker CPU per produce: median {statistics.median(runs):6.1f} µs "
              f"(runs {', '.join(f'{r:.1f}' for r in runs)})")
    added = statistics.median(on) / statistics.median(off) - 1
    print(f"  added by the authorizer: {added * 100:+.1f} % of the broker's CPU per unbatched produce (target <= 5 %)")
    bare, guarded = guard_us(200_000)
    print(f"  in process, the guard around a Produce handler: {guarded - bare:.2f} µs per request "
          f"({len(bench_acls())} ACL patterns, cache warm)")


if __name__ == "__main__":
    main()
