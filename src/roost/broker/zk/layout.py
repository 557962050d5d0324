"""Kafka's ZooKeeper layout: the znode paths and the JSON each one holds, as Kafka 3.x writes them.

Pure functions from Python values to znode bytes and back, so that a Roost broker and Kafka's own
tools read each other's znodes. (The `"version"` inside each JSON body is a schema version, not
the znode's stat version.)

    /cluster/id                                   {"version":"1","id":"<base64 uuid>"}
    /controller            (ephemeral)            {"version":1,"brokerid":N,"timestamp":"ms"}
    /controller_epoch                             a bare decimal integer
    /brokers/ids/<id>      (ephemeral)            endpoints, rack, ... (broker epoch = its czxid)
    /brokers/topics/<t>                           {"version":3,"partitions":{"0":[1,2]},"topic_id":...}
    /brokers/topics/<t>/partitions/<p>/state      {"version":1,"leader":L,"leader_epoch":E,...}
    /config/topics/<t>                            {"version":1,"config":{k:v}}
    /config/brokers/<id> and /config/brokers/<default>  {"version":1,"config":{k:v}} (dynamic broker configs)
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/<t>"} (or "brokers/<id>")
    /admin/delete_topics/<t>                      (empty)
    /admin/preferred_replica_election             (not used: preferred elections go through the API)
    /admin/reassign_partitions                    (not used: reassignments go through the API)
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
# The persistent paths every cluster has; created (if missing) by each broker at start.
PERSISTENT_PATHS = ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics", "/config/changes",
                    "/config/brokers", "/admin/delete_topics", "/isr_change_notification",
                    "/latest_producer_id_block", "/log_dir_event_notification")
# A broker whose log directory failed says so here (Kafka's LogDirEventNotification): a
# sequential child the controller reads, acts on and deletes.
LOG_DIR_EVENTS = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE = 1

NO_LEADER = -1
LEADER_DURING_DELETE = -2
RECOVERED = 0  # leader_recovery_state: a normal leader
RECOVERING = 1  # elected uncleanly: its log may lack committed records


class LayoutError(ValueError):
    """A znode holds something that is not what Kafka writes there."""


def _load(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise LayoutError(f"{what}: empty znode")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LayoutError(f"{what}: not JSON: {error}") from None
    if not isinstance(value, dict):
        raise LayoutError(f"{what}: not a JSON object")
    return value


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LayoutError(f"{what}: {value!r} is not an integer")
    return value


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list):
        raise LayoutError(f"{what}: {value!r} is not a list")
    return [_int(v, what) for v in value]


# ---------------------------------------------------------------------------------------- paths
def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -------------------------------------------------------------------------------- cluster id
def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    value = _load(data, CLUSTER_ID)
    cluster_id = value.get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise LayoutError(f"{CLUSTER_ID}: no id")
    return cluster_id


def new_cluster_id() -> str:
    """A base64url UUID without padding, as Kafka's Uuid.randomUuid().toString()."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# ------------------------------------------------------------------------------- controller
def encode_controller(broker_id: int, now_ms: int | None = None) -> bytes:
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(stamp)})


def decode_controller(data: bytes | None) -> int:
    return _int(_load(data, CONTROLLER).get("brokerid"), f"{CONTROLLER} brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode().strip())
    except (UnicodeDecodeError, ValueError):
        raise LayoutError(f"{CONTROLLER_EPOCH}: {data!r} is not an integer") from None


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE})


def decode_log_dir_event(data: bytes | None) -> int:
    """The broker a log directory event names."""
    return _int(_load(data, LOG_DIR_EVENTS).get("broker"), f"{LOG_DIR_EVENTS} broker")


# ---------------------------------------------------------------------------------- brokers
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # UpdateMetadata's int16


@dataclass(frozen=True)
class RegisteredEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class BrokerRegistration:
    """/brokers/ids/<id>. `host`/`port`/`listener` are the inter-broker endpoint (where the
    controller and the other brokers reach this one); `endpoints` lists every listener, the
    inter-broker one first, as Kafka registers them (with listener_security_protocol_map)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listener: str = "PLAINTEXT"
    epoch: int = -1  # the znode's czxid, filled in by whoever reads it
    endpoints: tuple[RegisteredEndpoint, ...] = ()

    def all_endpoints(self) -> tuple[RegisteredEndpoint, ...]:
        return self.endpoints or (RegisteredEndpoint(self.listener, self.host, self.port),)

    def encode(self, now_ms: int | None = None) -> bytes:
        stamp = now_ms if now_ms is not None else int(time.time() * 1000)
        endpoints = self.all_endpoints()
        body: dict[str, Any] = {
            "version": 5, "host": self.host, "port": self.port,
            "endpoints": [f"{e.listener}://{_host_text(e.host)}:{e.port}" for e in endpoints],
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
            "jmx_port": -1, "timestamp": str(stamp), "features": {},
        }
        if self.rack is not None:
            body["rack"] = self.rack
        return _dump(body)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None, epoch: int = -1) -> BrokerRegistration:
        what = broker_path(broker_id)
        value = _load(data, what)
        host, port = value.get("host"), value.get("port")
        protocols = value.get("listener_security_protocol_map") or {}
        endpoints: list[RegisteredEndpoint] = []
        for entry in value.get("endpoints") or []:
            if not isinstance(entry, str) or "://" not in entry:
                continue
            # "LISTENER://host:port" (host may be empty or bracketed IPv6).
            listener, _, address = entry.partition("://")
            ep_host, _, ep_port = address.rpartition(":")
            if not ep_port.isdigit():
                continue
            protocol = protocols.get(listener, listener) if isinstance(protocols, dict) else listener
            endpoints.append(RegisteredEndpoint(listener, ep_host.strip("[]") or str(host), int(ep_port),
                                                protocol if protocol in SECURITY_PROTOCOL_IDS else "PLAINTEXT"))
        listener = "PLAINTEXT"
        if endpoints:
            listener, host, port = endpoints[0].listener, endpoints[0].host, endpoints[0].port
        if not isinstance(host, str) or not isinstance(port, int) or port < 0:
            raise LayoutError(f"{what}: no usable endpoint in {value!r}")
        rack = value.get("rack")
        return cls(broker_id, host, port, rack if isinstance(rack, str) else None, listener, epoch,
                   tuple(endpoints))


# ----------------------------------------------------------------------------------- topics
@dataclass
class TopicAssignment:
    """/brokers/topics/<t>: the replicas of each partition (the first is the preferred leader)."""

    topic_id: uuid.UUID
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)
    version: int = -1  # the znode's version when read (not part of its data)

    def encode(self) -> bytes:
        def by_partition(mapping: dict[int, list[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(mapping.items())}

        return _dump({"version": 3, "topic_id": _encode_topic_id(self.topic_id),
                      "partitions": by_partition(self.partitions),
                      "adding_replicas": by_partition(self.adding),
                      "removing_replicas": by_partition(self.removing)})

    @classmethod
    def decode(cls, topic: str, data: bytes | None, version: int = -1) -> TopicAssignment:
        what = topic_path(topic)
        value = _load(data, what)

        def by_partition(key: str) -> dict[int, list[int]]:
            raw = value.get(key) or {}
            if not isinstance(raw, dict):
                raise LayoutError(f"{what}: {key} is not an object")
            try:
                return {int(p): _int_list(r, f"{what} {key}") for p, r in raw.items()}
            except ValueError as error:
                raise LayoutError(f"{what}: {key}: {error}") from None

        partitions = by_partition("partitions")
        if sorted(partitions) != list(range(len(partitions))):
            raise LayoutError(f"{what}: partitions are not 0..n-1: {sorted(partitions)}")
        raw_id = value.get("topic_id")
        topic_id = _decode_topic_id(raw_id, what) if raw_id is not None else _legacy_topic_id(topic)
        return cls(topic_id, partitions, by_partition("adding_replicas"), by_partition("removing_replicas"),
                   version)


def _encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _decode_topic_id(raw: Any, what: str) -> uuid.UUID:
    if not isinstance(raw, str):
        raise LayoutError(f"{what}: topic_id {raw!r} is not a string")
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, TypeError):
        raise LayoutError(f"{what}: topic_id {raw!r} is not a base64 UUID") from None


def _legacy_topic_id(topic: str) -> uuid.UUID:
    """Topics written before topic ids (Kafka < 2.8) get a stable id derived from the name."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"roost-topic:{topic}")


@dataclass(frozen=True)
class LeaderAndIsr:
    """/brokers/topics/<t>/partitions/<p>/state. The partition epoch is the znode's version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    recovery_state: int = RECOVERED

    def encode(self) -> bytes:
        body: dict[str, Any] = {"version": 1, "leader": self.leader, "leader_epoch": self.leader_epoch,
                                "controller_epoch": self.controller_epoch, "isr": list(self.isr)}
        if self.recovery_state != RECOVERED:
            body["leader_recovery_state"] = self.recovery_state
        return _dump(body)

    @classmethod
    def decode(cls, what: str, data: bytes | None) -> LeaderAndIsr:
        value = _load(data, what)
        return cls(_int(value.get("leader"), f"{what} leader"),
                   _int(value.get("leader_epoch"), f"{what} leader_epoch"),
                   tuple(_int_list(value.get("isr"), f"{what} isr")),
                   _int(value.get("controller_epoch"), f"{what} controller_epoch"),
                   _int(value.get("leader_recovery_state", RECOVERED), f"{what} leader_recovery_state"))


# ---------------------------------------------------------------------------------- configs
def encode_topic_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": {k: str(v) for k, v in sorted(configs.items())}})


def decode_topic_config(topic: str, data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    value = _load(data, topic_config_path(topic))
    config = value.get("config") or {}
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise LayoutError(f"{topic_config_path(topic)}: config is not an object of strings")
    return dict(config)


def encode_entity_change(entity_path: str) -> bytes:
    """A change notification for `topics/<t>`, `brokers/<id>` or `brokers/<default>`."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_entity_change(data: bytes | None) -> str | None:
    """The entity path a config-change notification names (None if it names none)."""
    entity = _load(data, CONFIG_CHANGES).get("entity_path")
    return entity if isinstance(entity, str) and entity else None


def entity_config_path(entity_path: str) -> str:
    """/config/topics/<t>, /config/brokers/<id> or /config/brokers/<default>."""
    return f"/config/{entity_path}"


def decode_config_change(data: bytes | None) -> str | None:
    """The topic a config-change notification names, or None for other entities."""
    value = _load(data, CONFIG_CHANGES)
    entity = value.get("entity_path")
    if isinstance(entity, str) and entity.startswith("topics/"):
        return entity.removeprefix("topics/")
    return None
