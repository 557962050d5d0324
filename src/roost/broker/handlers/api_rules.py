"""What each API needs from the authorizer, Kafka's table ("Operations and Resources on
Protocols", KafkaApis.scala), applied around the handlers without touching them.

`guard(routes, authorizer, ...)` wraps every route in a check: a rule looks at the request and
either lets it through, refuses it whole with Kafka's error response, or takes the unauthorized
topics (groups, resources) out of the request and puts their errors back into the handler's
answer, as Kafka answers per topic. ApiVersions and the SASL login are never checked.

Requests a broker sends to itself (a one-broker cluster's controller) are served in-process with
`BROKER_ITSELF`, a principal no listener can produce (TLS and SASL make `User:` principals only).
Requests from other brokers arrive over a listener with that listener's principal: they need
CLUSTER_ACTION on the cluster like in Kafka (for a PLAINTEXT inter-broker listener: User:ANONYMOUS,
via `super.users` or an ACL; see docs/acls.md).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from roost.broker.group.consumer_protocol import MAY_DESCRIBE_TOPIC
from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.request import NO_RESPONSE, Handler, Request
from roost.broker.security.acl import CLUSTER_NAME, VALID_OPERATIONS, AclOperation, ResourceType
from roost.broker.security.authorizer import Authorizer
from roost.principal import KafkaPrincipal
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

BROKER_ITSELF = KafkaPrincipal("Broker", "in-process")

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
READ, WRITE, CREATE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE
ALTER, DESCRIBE, CLUSTER_ACTION = AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_GROUP = 32
_ZERO_UUID = uuid.UUID(int=0)

Merge = Callable[[dict[str, Any]], dict[str, Any]]
# A rule's outcome: None (go on), a dict (the whole answer: refused), or a Merge (the request was
# narrowed; the handler's answer gets the refused part's errors back).
Outcome = None | dict[str, Any] | Merge


class Check:
    """One request's questions to the authorizer."""

    __slots__ = ("authorizer", "auto_create", "host", "metadata", "principal", "request")

    def __init__(self, authorizer: Authorizer, metadata: MetadataCache, request: Request,
                 auto_create: bool = False) -> None:
        self.authorizer = authorizer
        self.auto_create = auto_create  # auto.create.topics.enable: unknown topics need CREATE
        self.metadata = metadata
        self.request = request
        self.principal = request.principal
        self.host = request.client_host

    def may(self, operation: AclOperation, resource: ResourceType, name: str = CLUSTER_NAME) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource, name)

    def split(self, items: list[dict[str, Any]], name: Callable[[dict[str, Any]], str], operation: AclOperation,
              resource: ResourceType = TOPIC) -> list[dict[str, Any]]:
        """Keep in `items` (in place) those allowed; return the refused ones."""
        refused = [item for item in items if not self.may(operation, resource, name(item))]
        if refused:
            items[:] = [item for item in items if not any(item is r for r in refused)]
        return refused


def authorized_operations(c: Check, resource: ResourceType, name: str = CLUSTER_NAME) -> int:
    """Kafka's authorized-operations bitfield: bit `op` set for each operation of the resource's
    type the principal may do (Metadata, DescribeGroups, DescribeCluster when asked for)."""
    return sum(1 << op for op in VALID_OPERATIONS[resource] if c.may(op, resource, name))


def _chain(first: Outcome, then: Merge) -> Outcome:
    """`first` (None or a merge), then `then`; a whole refusal stays as it is."""
    if first is None:
        return then
    if type(first) is dict:
        return first
    assert callable(first)
    return lambda response: then(first(response))


def _then(result: Any, merge: Merge) -> Any:
    """Apply `merge` to a handler's answer, now or when it comes."""
    if type(result) is dict:
        return merge(result)
    if result is NO_RESPONSE:
        return result
    assert inspect.isawaitable(result), type(result)

    async def merged() -> Any:
        answer = await result
        return merge(answer) if type(answer) is dict else answer
    return merged()


def _appending(field: str, entries: list[dict[str, Any]]) -> Merge:
    """The handler's answer with the refused entries added to its list `field`."""
    def merge(response: dict[str, Any]) -> dict[str, Any]:
        response[field] = list(response.get(field) or []) + entries
        return response
    return merge


# --- rules, one per API -------------------------------------------------------------------------

def _produce(c: Check) -> Outcome:
    body = c.request.body
    topics = body["topic_data"]
    if not body.get("transactional_id"):  # the hot path: every topic known and writable
        for topic in topics:
            name = topic["name"]
            if not c.may(WRITE, TOPIC, name) or (c.auto_create and name not in c.metadata):
                break
        else:
            return None
    if body.get("transactional_id") and not c.may(WRITE, TXN, body["transactional_id"]):
        refused, code = list(topics), TXN_DENIED
        topics[:] = []
    else:
        refused, code = c.split(topics, lambda t: t["name"], WRITE), TOPIC_DENIED
    # Roost's Produce creates unknown topics (Kafka leaves that to Metadata): that needs CREATE too.
    unknown = [t for t in topics if c.auto_create and t["name"] not in c.metadata and not (
        c.may(CREATE, CLUSTER) or c.may(CREATE, TOPIC, t["name"]))]
    if unknown:
        topics[:] = [t for t in topics if t not in unknown]
    if not refused and not unknown:
        return None
    entries = [{"name": t["name"], "partition_responses": [
        {"index": p["index"], "error_code": code, "base_offset": -1, "log_start_offset": -1}
        for p in t["partition_data"]]} for t in refused]
    entries += [{"name": t["name"], "partition_responses": [
        {"index": p["index"], "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "base_offset": -1,
         "log_start_offset": -1} for p in t["partition_data"]]} for t in unknown]
    if not topics:
        # acks=0: no answer at all, as for any other produce error.
        return NO_RESPONSE if body["acks"] == 0 else {"throttle_time_ms": 0, "responses": entries}
    return _appending("responses", entries)


def _fetch(c: Check) -> Outcome:
    body = c.request.body
    state = body.get("replica_state")
    replica = state.get("replica_id", -1) if state else body.get("replica_id", -1)
    topics = body["topics"]

    def name(topic: dict[str, Any]) -> str:
        if topic.get("topic"):
            return topic["topic"]
        info = c.metadata.by_id(topic["topic_id"]) if topic.get("topic_id") else None
        return info.name if info is not None else ""

    if replica >= 0:
        if c.may(CLUSTER_ACTION, CLUSTER):
            return None
        refused = list(topics)
        topics[:] = []
    else:
        # A topic id the broker does not know gets the handler's UNKNOWN_TOPIC_ID, as in Kafka.
        refused = [t for t in topics if (n := name(t)) and not c.may(READ, TOPIC, n)]
        if not refused:
            return None
        topics[:] = [t for t in topics if not any(t is r for r in refused)]
    entries = [{"topic": t.get("topic", ""), "topic_id": t.get("topic_id"), "partitions": [
        {"partition_index": p["partition"], "error_code": TOPIC_DENIED, "high_watermark": -1}
        for p in t["partitions"]]} for t in refused]
    for entry in entries:
        if entry["topic_id"] is None:
            del entry["topic_id"]
    if not topics:
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": entries}
    return _appending("responses", entries)


def _topic_partitions(operation: AclOperation, part_field: str = "partitions", extra: Mapping[str, Any] | None = None,
                      top: Mapping[str, Any] | None = None) -> Callable[[Check], Outcome]:
    """The rule of an API naming `topics` with partitions (`part_field`: dicts with a
    `partition_index`, or plain indexes) and answering `topics` of `partitions`: each refused
    topic's partitions get TOPIC_AUTHORIZATION_FAILED."""
    def rule(c: Check) -> Outcome:
        topics = c.request.body["topics"]
        refused = c.split(topics, lambda t: t["name"], operation)
        if not refused:
            return None
        entries = [{"name": t["name"], "partitions": [
            {"partition_index": p if isinstance(p, int) else p["partition_index"], "error_code": TOPIC_DENIED,
             **(extra or {})} for p in t[part_field]]} for t in refused]
        if not topics:
            return {"throttle_time_ms": 0, **(top or {}), "topics": entries}
        return _appending("topics", entries)
    return rule


_list_offsets = _topic_partitions(DESCRIBE, extra={"offset": -1, "timestamp": -1})
_delete_records = _topic_partitions(DELETE, extra={"low_watermark": -1})
_describe_producers = _topic_partitions(READ, part_field="partition_indexes")
_commit_topics = _topic_partitions(READ)
_offset_delete_topics = _topic_partitions(READ, top={"error_code": 0})


def _metadata(c: Check) -> Outcome:
    outcome = _metadata_topics(c)
    body = c.request.body
    if body.get("include_topic_authorized_operations") or body.get("include_cluster_authorized_operations"):
        def operations(response: dict[str, Any]) -> dict[str, Any]:
            if body.get("include_topic_authorized_operations"):
                for topic in response["topics"]:
                    if topic.get("error_code", 0) == 0:
                        topic["topic_authorized_operations"] = authorized_operations(c, TOPIC, topic["name"])
            if body.get("include_cluster_authorized_operations"):
                response["cluster_authorized_operations"] = authorized_operations(c, CLUSTER)
            return response
        return _chain(outcome, operations)
    return outcome


def _metadata_topics(c: Check) -> Outcome:
    body = c.request.body
    topics = body.get("topics")
    if topics is None:  # every topic: those the principal may not describe are left out
        def hide(response: dict[str, Any]) -> dict[str, Any]:
            response["topics"] = [t for t in response["topics"] if c.may(DESCRIBE, TOPIC, t["name"])]
            return response
        return hide
    # v12+: a topic asked for by id alone is checked under the name it has (share consumers and
    # KIP-848 members look their assigned topics up so); an unknown id is the handler's
    # UNKNOWN_TOPIC_ID, as in Kafka, and a refused one keeps its id, not its name.
    refused: list[dict[str, Any]] = []
    refused_ids: list[dict[str, Any]] = []
    for t in topics:
        if t.get("name") or not t.get("topic_id"):
            if not c.may(DESCRIBE, TOPIC, t.get("name") or ""):
                refused.append(t)
        elif (info := c.metadata.by_id(t["topic_id"])) is not None and not c.may(DESCRIBE, TOPIC, info.name):
            refused_ids.append(t)
    if refused or refused_ids:
        topics[:] = [t for t in topics if not any(t is r for r in (*refused, *refused_ids))]
    if c.auto_create and body.get("allow_auto_topic_creation", True) and not c.may(CREATE, CLUSTER):
        # Auto-creation needs CREATE on the cluster or on the topic; without it: 29.
        uncreatable = [t for t in topics if t.get("name") and t["name"] not in c.metadata
                       and not c.may(CREATE, TOPIC, t["name"])]
        if uncreatable:
            topics[:] = [t for t in topics if not any(t is u for u in uncreatable)]
            refused += uncreatable
    if not refused and not refused_ids:
        return None
    entries = [{"error_code": TOPIC_DENIED, "name": t.get("name"), "is_internal": False, "partitions": []}
               for t in refused]
    entries += [{"error_code": TOPIC_DENIED, "name": None, "topic_id": t["topic_id"], "is_internal": False,
                 "partitions": []} for t in refused_ids]
    return _appending("topics", entries)


def _group_whole(code_field: str = "error_code", extra: Mapping[str, Any] | None = None) -> Callable[[Check], Outcome]:
    def rule(c: Check) -> Outcome:
        if c.may(READ, GROUP, c.request.body["group_id"]):
            return None
        return {"throttle_time_ms": 0, code_field: GROUP_DENIED, **(extra or {})}
    return rule


def _consumer_group_heartbeat(c: Check) -> Outcome:
    """KIP-848: Group READ, then Topic DESCRIBE on every subscribed topic named (Kafka 4's check)."""
    body = c.request.body
    denied = {"throttle_time_ms": 0, "error_message": None, "member_id": None, "member_epoch": 0,
              "heartbeat_interval_ms": 0, "assignment": None}
    if not c.may(READ, GROUP, body["group_id"]):
        return {**denied, "error_code": GROUP_DENIED}
    hidden = [t for t in body.get("subscribed_topic_names") or () if not c.may(DESCRIBE, TOPIC, t)]
    if hidden:
        return {**denied, "error_code": TOPIC_DENIED,
                "error_message": f"not authorized to describe topics {sorted(hidden)}"}
    # A pattern's topics: the coordinator leaves out those this principal may not describe.
    body[MAY_DESCRIBE_TOPIC] = lambda topic: c.may(DESCRIBE, TOPIC, topic)
    return None


def _consumer_group_describe(c: Check) -> Outcome:
    body = c.request.body
    groups = body["group_ids"]
    refused = [g for g in groups if not c.may(DESCRIBE, GROUP, g)]
    outcome: Outcome = None
    if refused:
        groups[:] = [g for g in groups if g not in refused]
        entries = [{"error_code": GROUP_DENIED, "error_message": None, "group_id": g, "group_state": "",
                    "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []}
                   for g in refused]
        outcome = {"throttle_time_ms": 0, "groups": entries} if not groups else _appending("groups", entries)
    if not body.get("include_authorized_operations"):
        return outcome

    def operations(response: dict[str, Any]) -> dict[str, Any]:
        for group in response["groups"]:
            if group.get("error_code", 0) == 0:
                group["authorized_operations"] = authorized_operations(c, GROUP, group["group_id"])
        return response
    return _chain(outcome, operations)


def _share_read(c: Check) -> Outcome:
    """ShareFetch / ShareAcknowledge: READ on the group, and READ on every topic named (Kafka
    answers a refused topic per partition; Roost refuses the request, TOPIC_AUTHORIZATION_FAILED)."""
    body = c.request.body
    denied: dict[str, Any] = {"throttle_time_ms": 0, "error_message": None, "acquisition_lock_timeout_ms": 0, "responses": [],
              "node_endpoints": []}
    if not c.may(READ, GROUP, body.get("group_id") or ""):
        return {**denied, "error_code": GROUP_DENIED}
    for topic in body["topics"]:
        info = c.metadata.by_id(topic["topic_id"])
        if info is not None and not c.may(READ, TOPIC, info.name):
            return {**denied, "error_code": TOPIC_DENIED, "error_message": f"not authorized to read {info.name}"}
    return None


def _describe_share_group_offsets(c: Check) -> Outcome:
    """DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED for it) and on each topic: a named
    topic refused answers TOPIC_AUTHORIZATION_FAILED per partition; with every topic asked for
    (null), those not describable are left out (KafkaApis.handleDescribeShareGroupOffsetsRequest)."""
    body = c.request.body
    refused_groups = [g for g in body["groups"] if not c.may(DESCRIBE, GROUP, g["group_id"])]
    body["groups"][:] = [g for g in body["groups"] if not any(g is r for r in refused_groups)]
    refused_topics: dict[str, list[dict[str, Any]]] = {}
    for group in body["groups"]:
        if group.get("topics") is not None:
            refused = c.split(group["topics"], lambda t: t["topic_name"], DESCRIBE)
            if refused:
                refused_topics[group["group_id"]] = refused

    def merge(response: dict[str, Any]) -> dict[str, Any]:
        for group in response.get("groups", []):  # a whole-request refusal has none
            asked_all = not any(group["group_id"] == g["group_id"] and g.get("topics") is not None
                                for g in body["groups"])
            if asked_all:
                group["topics"] = [t for t in group["topics"] if c.may(DESCRIBE, TOPIC, t["topic_name"])]
            if group.get("error_code", 0) == 0:
                group["topics"] = list(group["topics"]) + [
                    {"topic_name": t["topic_name"], "topic_id": _ZERO_UUID, "partitions": [
                        {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1,
                         "error_code": TOPIC_DENIED, "error_message": TOPIC_DENIED.name} for p in t["partitions"]]}
                    for t in refused_topics.get(group["group_id"], [])]
        response["groups"] = list(response.get("groups", [])) + [
            {"group_id": g["group_id"], "topics": [], "error_code": GROUP_DENIED, "error_message": None}
            for g in refused_groups]
        return response
    if not body["groups"]:
        return merge({"throttle_time_ms": 0, "groups": []})
    return merge


def _alter_share_group_offsets(c: Check) -> Outcome:
    """READ on the group (else the whole request is GROUP_AUTHORIZATION_FAILED) and on each topic
    (a refused one: TOPIC_AUTHORIZATION_FAILED on its partitions)."""
    body = c.request.body
    if not c.may(READ, GROUP, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "error_message": None, "responses": []}
    refused = c.split(body["topics"], lambda t: t["topic_name"], READ)
    if not refused:
        return None
    entries = [{"topic_name": t["topic_name"], "topic_id": _topic_id(c, t["topic_name"]), "partitions": [
        {"partition_index": p["partition_index"], "error_code": TOPIC_DENIED, "error_message": TOPIC_DENIED.name}
        for p in t["partitions"]]} for t in refused]
    return _appending("responses", entries)


def _delete_share_group_offsets(c: Check) -> Outcome:
    """DELETE on the group, READ on each topic (KafkaApis.handleDeleteShareGroupOffsetsRequest)."""
    body = c.request.body
    if not c.may(DELETE, GROUP, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "error_message": None, "responses": []}
    refused = c.split(body["topics"], lambda t: t["topic_name"], READ)
    if not refused:
        return None
    return _appending("responses", [{"topic_name": t["topic_name"], "topic_id": _ZERO_UUID,
                                     "error_code": TOPIC_DENIED, "error_message": TOPIC_DENIED.name}
                                    for t in refused])


def _topic_id(c: Check, name: str) -> uuid.UUID:
    info = c.metadata.get(name)
    return info.topic_id if info is not None else _ZERO_UUID


def _offset_commit(c: Check) -> Outcome:
    body = c.request.body
    if not c.may(READ, GROUP, body["group_id"]):
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": GROUP_DENIED}
                                               for p in t["partitions"]]} for t in body["topics"]]}
    return _commit_topics(c)


def _offset_fetch_groups(c: Check) -> Outcome:
    """OffsetFetch v8+ (a batch of groups): a group the principal may not describe answers
    GROUP_AUTHORIZATION_FAILED, a topic it may not describe TOPIC_AUTHORIZATION_FAILED per
    partition (left out when all the group's topics were asked for). Applied to the answer: the
    reads themselves have no effect."""
    def restrict(response: dict[str, Any]) -> dict[str, Any]:
        for group in response["groups"]:
            if not c.may(DESCRIBE, GROUP, group["group_id"]):
                group.update(error_code=GROUP_DENIED, topics=[])
                continue
            asked = next((g for g in c.request.body["groups"] if g["group_id"] == group["group_id"]), {})
            if asked.get("topics") is None:
                group["topics"] = [t for t in group["topics"] if c.may(DESCRIBE, TOPIC, t["name"])]
                continue
            for topic in group["topics"]:
                if not c.may(DESCRIBE, TOPIC, topic["name"]):
                    for partition in topic["partitions"]:
                        partition.update(committed_offset=-1, committed_leader_epoch=-1, metadata="",
                                         error_code=TOPIC_DENIED)
        return response
    return restrict


def _offset_fetch(c: Check) -> Outcome:
    body = c.request.body
    if "groups" in body:
        return _offset_fetch_groups(c)
    if not c.may(DESCRIBE, GROUP, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "",
                                                "error_code": GROUP_DENIED} for p in t["partition_indexes"]]}
            for t in body.get("topics") or []]}
    topics = body.get("topics")
    if topics is None:  # every topic the group has offsets for: those not describable are dropped
        def hide(response: dict[str, Any]) -> dict[str, Any]:
            response["topics"] = [t for t in response["topics"] if c.may(DESCRIBE, TOPIC, t["name"])]
            return response
        return hide
    refused = c.split(topics, lambda t: t["name"], DESCRIBE)
    if not refused:
        return None
    entries = [{"name": t["name"], "partitions": [
        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": TOPIC_DENIED}
        for p in t["partition_indexes"]]} for t in refused]
    if not topics:
        return {"throttle_time_ms": 0, "error_code": 0, "topics": entries}
    return _appending("topics", entries)


def _coordinator_key_refusal(c: Check, key_type: int, key: str) -> ErrorCode | None:
    """Kafka's FindCoordinator checks: DESCRIBE on the transactional id (type 1) or the group
    (type 0); a share-partition's coordinator (type 2) is for brokers only (CLUSTER_ACTION)."""
    if key_type == 1:
        return None if c.may(DESCRIBE, TXN, key) else TXN_DENIED
    if key_type == 2:
        return None if c.may(CLUSTER_ACTION, CLUSTER) else CLUSTER_DENIED
    return None if c.may(DESCRIBE, GROUP, key) else GROUP_DENIED


def _find_coordinator(c: Check) -> Outcome:
    body = c.request.body
    key_type = body.get("key_type", 0)
    if "coordinator_keys" not in body:  # v0-3: one key
        code = _coordinator_key_refusal(c, key_type, body["key"])
        if code is None:
            return None
        return {"throttle_time_ms": 0, "error_code": code, "error_message": code.name, "node_id": -1, "host": "",
                "port": -1}
    keys = body["coordinator_keys"]
    refused = {key: code for key in keys if (code := _coordinator_key_refusal(c, key_type, key)) is not None}
    if not refused:
        return None
    keys[:] = [key for key in keys if key not in refused]
    entries = [{"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": code.name}
               for key, code in refused.items()]
    if not keys:
        return {"throttle_time_ms": 0, "coordinators": entries}
    return _appending("coordinators", entries)


def _describe_groups(c: Check) -> Outcome:
    outcome = _describe_groups_refused(c)
    if not c.request.body.get("include_authorized_operations"):
        return outcome

    def operations(response: dict[str, Any]) -> dict[str, Any]:
        for group in response["groups"]:
            if group.get("error_code", 0) == 0:
                group["authorized_operations"] = authorized_operations(c, GROUP, group["group_id"])
        return response
    return _chain(outcome, operations)


def _describe_groups_refused(c: Check) -> Outcome:
    groups = c.request.body["groups"]
    refused = [g for g in groups if not c.may(DESCRIBE, GROUP, g)]
    if not refused:
        return None
    groups[:] = [g for g in groups if g not in refused]
    entries = [{"error_code": GROUP_DENIED, "group_id": g, "group_state": "", "protocol_type": "",
                "protocol_data": "", "members": []} for g in refused]
    if not groups:
        return {"throttle_time_ms": 0, "groups": entries}
    return _appending("groups", entries)


def _list_groups(c: Check) -> Outcome:
    if c.may(DESCRIBE, CLUSTER):
        return None

    def only_describable(response: dict[str, Any]) -> dict[str, Any]:
        response["groups"] = [g for g in response["groups"] if c.may(DESCRIBE, GROUP, g["group_id"])]
        return response
    return only_describable


def _delete_groups(c: Check) -> Outcome:
    groups = c.request.body["groups_names"]
    refused = [g for g in groups if not c.may(DELETE, GROUP, g)]
    if not refused:
        return None
    groups[:] = [g for g in groups if g not in refused]
    entries = [{"group_id": g, "error_code": GROUP_DENIED} for g in refused]
    if not groups:
        return {"throttle_time_ms": 0, "results": entries}
    return _appending("results", entries)


def _offset_delete(c: Check) -> Outcome:
    if not c.may(DELETE, GROUP, c.request.body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "topics": []}
    return _offset_delete_topics(c)


def _create_topics(c: Check) -> Outcome:
    """CREATE on the cluster or on each topic (29); from v5 the answer shows a created topic's
    configs only to a principal with DESCRIBE_CONFIGS on it (else TopicConfigErrorCode 29)."""
    outcome = _create_topics_refused(c)
    if c.request.version < 5:
        return outcome

    def hide_configs(response: dict[str, Any]) -> dict[str, Any]:
        for topic in response["topics"]:
            if topic.get("error_code", 0) == 0 and not c.may(DESCRIBE_CONFIGS, TOPIC, topic["name"]):
                topic.update(configs=None, topic_config_error_code=TOPIC_DENIED)
        return response
    return _chain(outcome, hide_configs)


def _create_topics_refused(c: Check) -> Outcome:
    if c.may(CREATE, CLUSTER):
        return None
    topics = c.request.body["topics"]
    refused = c.split(topics, lambda t: t["name"], CREATE)
    if not refused:
        return None
    entries = [{"name": t["name"], "error_code": TOPIC_DENIED, "error_message": "not authorized to create it"}
               for t in refused]
    if not topics:
        return {"throttle_time_ms": 0, "topics": entries}
    return _appending("topics", entries)


def _delete_topics(c: Check) -> Outcome:
    body = c.request.body
    names = body.get("topic_names")
    if names is None:
        return None  # v6+ (by topic id) is not advertised
    refused = [n for n in names if not c.may(DELETE, TOPIC, n)]
    if not refused:
        return None
    names[:] = [n for n in names if n not in refused]
    entries = [{"name": n, "error_code": TOPIC_DENIED, "error_message": "not authorized to delete it"}
               for n in refused]
    if not names:
        return {"throttle_time_ms": 0, "responses": entries}
    return _appending("responses", entries)


def _create_partitions(c: Check) -> Outcome:
    topics = c.request.body["topics"]
    refused = c.split(topics, lambda t: t["name"], ALTER)
    if not refused:
        return None
    entries = [{"name": t["name"], "error_code": TOPIC_DENIED, "error_message": "not authorized to alter it"}
               for t in refused]
    if not topics:
        return {"throttle_time_ms": 0, "results": entries}
    return _appending("results", entries)


def _configs(operation: AclOperation, out_field: str) -> Callable[[Check], Outcome]:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: a topic needs the operation on the
    topic (29), a broker (or its loggers) on the cluster (31)."""
    describing = operation is DESCRIBE_CONFIGS

    def rule(c: Check) -> Outcome:
        resources = c.request.body["resources"]

        def allowed(r: dict[str, Any]) -> bool:
            if r["resource_type"] == CONFIG_RESOURCE_TOPIC:
                return c.may(operation, TOPIC, r["resource_name"])
            if r["resource_type"] == CONFIG_RESOURCE_GROUP:
                return c.may(operation, GROUP, r["resource_name"])
            return c.may(operation, CLUSTER)

        def denied(r: dict[str, Any]) -> ErrorCode:
            kind = r["resource_type"]
            return TOPIC_DENIED if kind == CONFIG_RESOURCE_TOPIC else GROUP_DENIED if kind == CONFIG_RESOURCE_GROUP \
                else CLUSTER_DENIED
        refused = [r for r in resources if not allowed(r)]
        if not refused:
            return None
        resources[:] = [r for r in resources if allowed(r)]
        entries = [{"error_code": denied(r),
                    "error_message": "not authorized", "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"], **({"configs": []} if describing else {})}
                   for r in refused]
        if not resources:
            return {"throttle_time_ms": 0, out_field: entries}
        return _appending(out_field, entries)
    return rule


def _init_producer_id(c: Check) -> Outcome:
    txn = c.request.body.get("transactional_id")
    if txn:
        if c.may(WRITE, TXN, txn):
            return None
        code = TXN_DENIED
    elif c.may(AclOperation.IDEMPOTENT_WRITE, CLUSTER) or c.authorizer.authorize_any(c.principal, c.host, WRITE, TOPIC):
        return None
    else:
        code = CLUSTER_DENIED
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


def _add_partitions_to_txn(c: Check) -> Outcome:
    """WRITE on the transactional id (else 53 everywhere) and WRITE on each topic: refused topics
    29, the others OPERATION_NOT_ATTEMPTED (Kafka answers nothing partially)."""
    body = c.request.body
    topics = body["v3_and_below_topics"]
    if not c.may(WRITE, TXN, body["v3_and_below_transactional_id"]):
        denied = {t["name"]: TXN_DENIED for t in topics}
    else:
        refused = {t["name"] for t in topics if not c.may(WRITE, TOPIC, t["name"])}
        if not refused:
            return None
        denied = {t["name"]: TOPIC_DENIED if t["name"] in refused else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for t in topics}
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t["name"], "results_by_partition": [
            {"partition_index": p, "partition_error_code": denied[t["name"]]} for p in t["partitions"]]}
        for t in topics]}


def _add_offsets_to_txn(c: Check) -> Outcome:
    body = c.request.body
    if not c.may(WRITE, TXN, body["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": TXN_DENIED}
    if not c.may(READ, GROUP, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED}
    return None


def _end_txn(c: Check) -> Outcome:
    if c.may(WRITE, TXN, c.request.body["transactional_id"]):
        return None
    return {"throttle_time_ms": 0, "error_code": TXN_DENIED}


def _txn_offset_commit(c: Check) -> Outcome:
    """WRITE on the transactional id (53), READ on the group (30), READ on each topic (29)."""
    body = c.request.body
    code = TXN_DENIED if not c.may(WRITE, TXN, body["transactional_id"]) else \
        GROUP_DENIED if not c.may(READ, GROUP, body["group_id"]) else None
    if code is not None:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                               for p in t["partitions"]]} for t in body["topics"]]}
    return _commit_topics(c)


def _write_txn_markers(c: Check) -> Outcome:
    """From the transaction coordinator: CLUSTER_ACTION (or ALTER) on the cluster."""
    if c.may(CLUSTER_ACTION, CLUSTER) or c.may(ALTER, CLUSTER):
        return None
    return {"markers": [{"producer_id": m["producer_id"], "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p, "error_code": CLUSTER_DENIED}
                                           for p in t["partition_indexes"]]} for t in m["topics"]]}
        for m in c.request.body["markers"]]}


def _share_state(c: Check) -> Outcome:
    """The share coordinator's state APIs, from share-partition leaders: CLUSTER_ACTION on the
    cluster (Kafka's KafkaApis), else every partition CLUSTER_AUTHORIZATION_FAILED."""
    if c.may(CLUSTER_ACTION, CLUSTER):
        return None
    return {"results": [{"topic_id": t["topic_id"], "partitions": [
        {"partition": p["partition"], "error_code": CLUSTER_DENIED, "error_message": None}
        for p in t["partitions"]]} for t in c.request.body["topics"]]}


def _describe_transactions(c: Check) -> Outcome:
    ids = c.request.body["transactional_ids"]
    refused = [t for t in ids if not c.may(DESCRIBE, TXN, t)]
    if not refused:
        return None
    ids[:] = [t for t in ids if t not in refused]
    entries = [{"error_code": TXN_DENIED, "transactional_id": t, "transaction_state": "",
                "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                "producer_epoch": -1, "topics": []} for t in refused]
    if not ids:
        return {"throttle_time_ms": 0, "transaction_states": entries}
    return _appending("transaction_states", entries)


def _list_transactions(c: Check) -> Outcome:
    """Only the transactional ids the principal may describe are listed (Kafka's rule)."""
    def only_describable(response: dict[str, Any]) -> dict[str, Any]:
        response["transaction_states"] = [t for t in response["transaction_states"]
                                          if c.may(DESCRIBE, TXN, t["transactional_id"])]
        return response
    return only_describable


def _alter_replica_log_dirs(c: Check) -> Outcome:
    if c.may(ALTER, CLUSTER):
        return None
    return {"throttle_time_ms": 0, "results": [
        {"topic_name": t["name"], "partitions": [{"partition_index": p, "error_code": CLUSTER_DENIED}
                                                 for p in t["partitions"]]}
        for d in c.request.body["dirs"] for t in d["topics"]]}


def _describe_topic_partitions(c: Check) -> Outcome:
    """DESCRIBE on each topic; each described topic carries its authorized operations (Kafka
    fills them in unasked for this API)."""
    def operations(response: dict[str, Any]) -> dict[str, Any]:
        for topic in response["topics"]:
            if topic.get("error_code", 0) == 0 and topic.get("name"):
                topic["topic_authorized_operations"] = authorized_operations(c, TOPIC, topic["name"])
        return response
    return _chain(_describe_topic_partitions_refused(c), operations)


def _describe_topic_partitions_refused(c: Check) -> Outcome:
    topics = c.request.body["topics"]
    refused = c.split(topics, lambda t: t["name"], DESCRIBE)
    if not refused:
        return None
    entries = [{"error_code": TOPIC_DENIED, "name": t["name"], "is_internal": False, "partitions": []}
               for t in refused]
    if not topics:
        return {"throttle_time_ms": 0, "topics": entries, "next_cursor": None}
    return _appending("topics", entries)


def _offset_for_leader_epoch(c: Check) -> Outcome:
    if c.request.body.get("replica_id", -1) >= 0:
        if c.may(CLUSTER_ACTION, CLUSTER):
            return None
        topics = c.request.body["topics"]
        return {"throttle_time_ms": 0, "topics": [{"topic": t["topic"], "partitions": [
            {"partition": p["partition"], "error_code": CLUSTER_DENIED, "end_offset": -1} for p in t["partitions"]]}
            for t in topics]}
    topics = c.request.body["topics"]
    refused = c.split(topics, lambda t: t["topic"], DESCRIBE)
    if not refused:
        return None
    entries = [{"topic": t["topic"], "partitions": [
        {"partition": p["partition"], "error_code": TOPIC_DENIED, "end_offset": -1} for p in t["partitions"]]}
        for t in refused]
    if not topics:
        return {"throttle_time_ms": 0, "topics": entries}
    return _appending("topics", entries)


def _cluster(operation: AclOperation, answer: Mapping[str, Any]) -> Callable[[Check], Outcome]:
    """An API that needs `operation` on the cluster, refused whole with `answer`."""
    def rule(c: Check) -> Outcome:
        return None if c.may(operation, CLUSTER) else {**answer}
    return rule


def _describe_cluster(c: Check) -> Outcome:
    if not c.may(DESCRIBE, CLUSTER):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                "error_message": "not authorized to describe the cluster", "cluster_id": "", "controller_id": -1,
                "brokers": []}
    if not c.request.body.get("include_cluster_authorized_operations"):
        return None

    def operations(response: dict[str, Any]) -> dict[str, Any]:
        response["cluster_authorized_operations"] = authorized_operations(c, CLUSTER)
        return response
    return operations


def _client_quota_alterations(c: Check) -> Outcome:
    if c.may(ALTER_CONFIGS, CLUSTER):
        return None
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": CLUSTER_DENIED, "error_message": "not authorized to alter the cluster's configs",
         "entity": entry["entity"]} for entry in c.request.body["entries"]]}


def _acl_creations(c: Check) -> Outcome:
    if c.may(ALTER, CLUSTER):
        return None
    return {"throttle_time_ms": 0, "results": [
        {"error_code": CLUSTER_DENIED, "error_message": "not authorized to alter the cluster"}
        for _ in c.request.body["creations"]]}


def _acl_deletions(c: Check) -> Outcome:
    if c.may(ALTER, CLUSTER):
        return None
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": CLUSTER_DENIED, "error_message": "not authorized to alter the cluster", "matching_acls": []}
        for _ in c.request.body["filters"]]}


def _scram_alterations(c: Check) -> Outcome:
    if c.may(ALTER, CLUSTER):
        return None
    users = dict.fromkeys(entry["name"] for kind in ("deletions", "upsertions") for entry in c.request.body[kind])
    return {"throttle_time_ms": 0, "results": [
        {"user": user, "error_code": CLUSTER_DENIED, "error_message": "not authorized to alter the cluster"}
        for user in users]}


DENIED_31 = {"error_code": CLUSTER_DENIED}

RULES: dict[ApiKey, Callable[[Check], Outcome]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group_whole(extra={"generation_id": -1, "protocol_name": "", "leader": "",
                                           "member_id": "", "members": []}),
    ApiKey.HEARTBEAT: _group_whole(),
    ApiKey.LEAVE_GROUP: _group_whole(extra={"members": []}),
    ApiKey.SYNC_GROUP: _group_whole(extra={"assignment": b""}),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    # KIP-932: the same checks as the consumer protocol's (Group READ and Topic DESCRIBE on the
    # subscribed topics; Group DESCRIBE to describe).
    ApiKey.SHARE_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.SHARE_FETCH: _share_read,
    ApiKey.SHARE_ACKNOWLEDGE: _share_read,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _delete_share_group_offsets,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: _share_state,
    ApiKey.READ_SHARE_GROUP_STATE: _share_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: _share_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: _share_state,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _share_state,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_CONFIGS: _configs(DESCRIBE_CONFIGS, "results"),
    ApiKey.ALTER_CONFIGS: _configs(ALTER_CONFIGS, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _configs(ALTER_CONFIGS, "responses"),
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DESCRIBE_LOG_DIRS: _cluster(DESCRIBE, {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED, "results": []}),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    # KIP-1142: listing which resources have configs asks DESCRIBE_CONFIGS on the cluster.
    ApiKey.LIST_CONFIG_RESOURCES: _cluster(DESCRIBE_CONFIGS, {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                                              "config_resources": []}),
    ApiKey.DESCRIBE_ACLS: _cluster(DESCRIBE, {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                              "error_message": "not authorized to describe the cluster",
                                              "resources": []}),
    ApiKey.CREATE_ACLS: _acl_creations,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(DESCRIBE, {
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
        "error_message": "not authorized to describe the cluster", "results": []}),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _scram_alterations,
    # Client quotas: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, as Kafka's AuthHelper asks.
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster(DESCRIBE_CONFIGS, {
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
        "error_message": "not authorized to describe the cluster's configs", "entries": None}),
    ApiKey.ALTER_CLIENT_QUOTAS: _client_quota_alterations,
    ApiKey.DELETE_ACLS: _acl_deletions,
    # The cluster's own requests: only brokers (CLUSTER_ACTION) may send them.
    ApiKey.LEADER_AND_ISR: _cluster(CLUSTER_ACTION, {"error_code": CLUSTER_DENIED, "topics": []}),
    ApiKey.UPDATE_METADATA: _cluster(CLUSTER_ACTION, DENIED_31),
    ApiKey.STOP_REPLICA: _cluster(CLUSTER_ACTION, {"error_code": CLUSTER_DENIED, "partition_errors": []}),
    ApiKey.CONTROLLED_SHUTDOWN: _cluster(CLUSTER_ACTION, {"error_code": CLUSTER_DENIED, "remaining_partitions": []}),
    ApiKey.ALTER_PARTITION: _cluster(CLUSTER_ACTION, {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                                      "topics": []}),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.ELECT_LEADERS: _cluster(ALTER, {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                           "replica_election_results": []}),
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster(ALTER, {
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
        "error_message": "not authorized to alter the cluster", "responses": []}),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(DESCRIBE, {
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
        "error_message": "not authorized to describe the cluster", "topics": []}),
}
# Asked before (or to establish) who the client is: Kafka never checks them.
UNCHECKED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def guard(routes: Mapping[ApiKey, Handler], authorizer: Authorizer, metadata: MetadataCache,
          auto_create: bool) -> dict[ApiKey, Handler]:
    """`routes` with each handler behind its API's rule. An API without a rule is a bug: refused."""
    missing = set(routes) - set(RULES) - UNCHECKED
    assert not missing, f"APIs without an authorization rule: {sorted(missing)}"
    return {key: handler if key in UNCHECKED else _guarded(RULES[key], handler, authorizer, metadata, auto_create)
            for key, handler in routes.items()}


def _guarded(rule: Callable[[Check], Outcome], handler: Handler, authorizer: Authorizer,
             metadata: MetadataCache, auto_create: bool) -> Handler:
    def checked(request: Request) -> Any:
        if request.principal is BROKER_ITSELF:
            return handler(request)
        outcome = rule(Check(authorizer, metadata, request, auto_create))
        if outcome is None:
            return handler(request)
        if type(outcome) is dict or outcome is NO_RESPONSE:
            return outcome
        return _then(handler(request), outcome)
    return checked
