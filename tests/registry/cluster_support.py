"""A 3-broker Roost cluster whose brokers each serve the schema registry (their
`schema.registry.listeners`), shared by a test module; and helpers to build Protobuf message
classes at run time (no protoc in the test run)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

REGISTRY_LINE = re.compile(r"roost: broker (\d+) schema registry listening on ([0-9.]+):(\d+)")


class RegistryCluster:
    def __init__(self, root: Path, settings: dict[str, Any] | None = None) -> None:
        self.cluster = LocalCluster.start(root, brokers=3, keepers=1, settings={
            "schema.registry.listeners": "http://127.0.0.1:0", "schema.registry.group.session.timeout.ms": 6000,
            **(settings or {})})
        self.urls: dict[int, str] = {}
        try:
            for broker_id in self.cluster.brokers:
                self.refresh_url(broker_id)
            for broker_id, url in self.urls.items():
                wait_for(lambda u=url: _answers(u), 60, 0.2, f"broker {broker_id}'s registry to answer")
            wait_for(lambda: self.writer() is not None, 60, 0.2, "a registry writer")
        except BaseException:
            self.cluster.close()
            raise

    def refresh_url(self, broker_id: int, timeout: float = 180) -> str:
        def found() -> str | None:
            matches = [m for m in REGISTRY_LINE.finditer(self.cluster.broker_output(broker_id))
                       if int(m.group(1)) == broker_id]
            return f"http://{matches[-1].group(2)}:{matches[-1].group(3)}" if matches else None
        previous = self.urls.get(broker_id)
        try:
            url = wait_for(lambda: (u := found()) and u != previous and u, timeout, 0.1,
                           f"broker {broker_id}'s schema registry")
        except AssertionError as missing:
            tail = self.cluster.broker_output(broker_id).splitlines()[-40:]
            raise AssertionError(f"{missing}; its last lines:\n" + "\n".join(tail)) from None
        self.urls[broker_id] = url
        return url

    def writer(self) -> int | None:
        """The broker whose registry is the writer, as the registries themselves say."""
        for broker_id, url in self.urls.items():
            if not self.cluster.brokers[broker_id].running:
                continue
            try:
                body = get_json(f"{url}/roost/writer")
            except OSError:
                continue
            if body.get("is_writer"):
                return broker_id
        return None

    def lead_schemas_from(self, broker_id: int) -> None:
        """Make `broker_id` the leader of `_schemas`-0 (its replicas reordered to put it first,
        then a preferred election): the failover test then kills the registry's writer and the
        partition's leader at once, the case where a stale leader in a client's metadata shows."""
        from kafka import KafkaAdminClient
        from kafka.structs import TopicPartition

        leader, replicas, _ = self.cluster.partitions("_schemas")[0]
        if leader == broker_id:
            return
        assert broker_id in replicas, (broker_id, replicas)
        admin = KafkaAdminClient(bootstrap_servers=self.cluster.running_bootstrap().split(","),
                                 request_timeout_ms=30000)
        try:
            admin.alter_partition_reassignments(
                {TopicPartition("_schemas", 0): [broker_id, *[r for r in replicas if r != broker_id]]})
            wait_for(lambda: not admin.list_partition_reassignments({"_schemas": [0]}), 30, 0.2,
                     "the reordering of _schemas' replicas")
            self.cluster.wait_for_isr("_schemas", full=True, timeout=30)

            def led() -> bool:
                admin.elect_leaders(0, {"_schemas": [0]}, raise_errors=False)
                return self.cluster.partitions("_schemas")[0][0] == broker_id
            wait_for(led, 30, 0.5, f"broker {broker_id} leading _schemas")
        finally:
            admin.close()

    def close(self) -> None:
        self.cluster.close()


def _answers(url: str) -> bool:
    try:
        get_json(url + "/")
    except OSError:
        return False
    return True


def get_json(url: str, timeout: float = 10) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return json.loads(reply.read())


def protobuf_classes(files: list[Any]) -> dict[str, Any]:
    """Message classes for the FileDescriptorProtos `files` (dependencies first), added to the
    default pool as generated code would be."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.Default()
    classes: dict[str, Any] = {}
    for proto in files:
        try:
            pool.FindFileByName(proto.name)
        except KeyError:
            pool.Add(proto)
        file = pool.FindFileByName(proto.name)
        for name, message in file.message_types_by_name.items():
            classes[name] = message_factory.GetMessageClass(message)
    return classes
