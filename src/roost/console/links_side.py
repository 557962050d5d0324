"""The cluster links' pages' shell: reads the links' settings and their brokers' status from the
destination's ZooKeeper (through the console's keeper client), the mirror topics' configs and
partition counts through the Kafka side, and remembers which topics it has seen as each link's
mirrors, so that one made writable since is shown as promoted (roost.console.link_view)."""

from __future__ import annotations

import threading
from typing import Any

from kazoo.exceptions import KazooException, NoNodeError

from roost.console.errors import ConsoleError, not_found
from roost.console.kafka_side import KafkaSide
from roost.console.keeper_side import KeeperSide
from roost.console.link_view import (
    LINKS_PATH,
    STATUS_PATH,
    LinkDataError,
    broker_status,
    link_settings,
    link_state,
    link_summary,
)

MIRROR_LINK_CONFIG = "roost.mirror.link"  # the broker's name (roost.broker.link.configs)
MAX_LINKS = 1000  # listed at most
MAX_REMEMBERED = 10_000  # mirror topics remembered per link


class LinksSide:
    def __init__(self, keeper: KeeperSide | None, kafka: KafkaSide) -> None:
        self.keeper = keeper
        self.kafka = kafka
        self._lock = threading.Lock()
        self._seen: dict[str, set[str]] = {}  # link -> topics seen as its mirrors

    def _client(self) -> Any:
        if self.keeper is None:
            raise ConsoleError(404, "links are defined in the destination's ZooKeeper: start the console with "
                                    "--zookeeper HOST:PORT to see them")
        return self.keeper.client()

    def _read(self, what: str, call: Any) -> Any:
        try:
            return call()
        except NoNodeError:
            raise
        except KazooException as error:
            raise ConsoleError(503, f"{what}: the keeper did not answer ({type(error).__name__})") from None

    def _statuses(self, client: Any, name: str) -> list[dict[str, Any]]:
        try:
            brokers = self._read(f"status of link {name}", lambda: client.get_children(f"{STATUS_PATH}/{name}"))
        except NoNodeError:
            return []
        found = []
        for broker in sorted(brokers):
            try:
                data, _ = self._read(f"status of link {name}", lambda b=broker: client.get(f"{STATUS_PATH}/{name}/{b}"))
            except NoNodeError:
                continue  # that broker's session ended between the two reads
            status = broker_status(data)
            if status is not None:
                status["broker"] = int(broker) if broker.isdigit() else broker
                found.append(status)
        return found

    def _settings(self, client: Any, name: str) -> dict[str, Any]:
        try:
            data, _ = self._read(f"link {name}", lambda: client.get(f"{LINKS_PATH}/{name}"))
        except NoNodeError:
            raise not_found(f"cluster link {name}") from None
        try:
            return link_settings(name, data)
        except LinkDataError as error:
            raise ConsoleError(502, str(error)) from None

    def links(self) -> list[dict[str, Any]]:
        client = self._client()
        try:
            names = sorted(self._read("links", lambda: client.get_children(LINKS_PATH)))[:MAX_LINKS]
        except NoNodeError:
            return []
        rows = []
        for name in names:
            try:
                settings = self._settings(client, name)
            except ConsoleError as error:
                if error.status == 404:
                    continue  # deleted meanwhile
                raise
            statuses = self._statuses(client, name)
            rows.append({"link": name, "source": settings.get("bootstrap.servers"), "state": link_state(statuses),
                         "mirrors": sum(len(s.get("partitions", [])) for s in statuses)})
        return rows

    def link(self, name: str) -> dict[str, Any]:
        client = self._client()
        settings = self._settings(client, name)
        statuses = self._statuses(client, name)
        reported = {str(p.get("topic")) for s in statuses for p in s.get("partitions", [])}
        with self._lock:
            seen = self._seen.setdefault(name, set())
            if len(seen) + len(reported) <= MAX_REMEMBERED:
                seen |= reported
            candidates = sorted(seen - reported)
        promoted = {}
        if candidates:
            metadata = self.kafka.metadata(fresh=True)
            for topic in candidates:
                found = metadata.topics.get(topic)
                if found is None or not found.partitions:
                    with self._lock:
                        seen.discard(topic)  # deleted: nothing to show
                    continue
                configs = {c["name"]: c["value"] for c in self.kafka.topic_configs(topic)}
                if not configs.get(MIRROR_LINK_CONFIG):
                    promoted[topic] = len(found.partitions)
        return link_summary(name, settings, statuses, promoted)
