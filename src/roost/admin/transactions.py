"""Open transactions of a cluster, for `roost txn`: ListTransactions asked of every broker (each
answers for the transactional ids it coordinates) and DescribeTransactions asked of an id's
coordinator (FindCoordinator key type 1), as kafka-transactions.sh does.

confluent-kafka's AdminClient (2.16) has neither request, so they go over a plain socket with
Roost's own codec (`roost.wire.kafka`), as `replica_sizes` does. Plaintext listeners only.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from roost.admin.errors import AdminError
from roost.admin.kafka_client import fetch_metadata, open_admin, read_exactly
from roost.admin.target import Target
from roost.wire.kafka import ApiKey, KafkaCodecError, RequestHeader, decode_response, encode_request
from roost.wire.kafka.errors import ErrorCode

LIST_VERSION, DESCRIBE_VERSION, FIND_COORDINATOR_VERSION = 1, 0, 3
MAX_ANSWER_BYTES = 64 << 20
UNANSWERED = (OSError, KafkaCodecError, struct.error)


def ask(host: str, port: int, api: ApiKey, version: int, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    request = b"".join(bytes(part) for part in encode_request(RequestHeader(api, version, 1, "roost-cli"), body))
    with socket.create_connection((host.strip("[]"), port), timeout=timeout_s) as sock:
        sock.sendall(request)
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        if not 0 < size <= MAX_ANSWER_BYTES:
            raise OSError(f"implausible answer size {size}")
        _correlation, answer = decode_response(api, version, bytearray(read_exactly(sock, size)))
    return answer


def require_plaintext(target: Target) -> None:
    if target.settings.get("security.protocol", "plaintext").lower() != "plaintext":
        raise AdminError("roost txn speaks to plaintext listeners only")


def list_transactions(target: Target, states: list[str], producer_ids: list[int] | None = None
                      ) -> list[dict[str, Any]]:
    """Every transaction the cluster's brokers coordinate (filtered by Kafka's state names and
    producer ids), with the id of the broker that answered."""
    require_plaintext(target)
    admin = open_admin(target)
    brokers = fetch_metadata(admin, target).brokers.values()
    found: list[dict[str, Any]] = []
    for broker in sorted(brokers, key=lambda b: b.id):
        try:
            answer = ask(broker.host, broker.port, ApiKey.LIST_TRANSACTIONS, LIST_VERSION,
                         {"state_filters": states, "producer_id_filters": producer_ids or [], "duration_filter": -1},
                         target.timeout_s)
        except UNANSWERED as error:
            raise AdminError(f"list transactions: broker {broker.id} did not answer ({error})") from None
        if answer["unknown_state_filters"]:
            raise AdminError(f"unknown transaction states: {', '.join(answer['unknown_state_filters'])}")
        found += [{"transactional_id": t["transactional_id"], "producer_id": t["producer_id"],
                   "state": t["transaction_state"], "coordinator": broker.id} for t in answer["transaction_states"]]
    return sorted(found, key=lambda t: t["transactional_id"])


def coordinator_of(target: Target, transactional_id: str) -> dict[str, Any]:
    """FindCoordinator (key type 1) asked of the first bootstrap broker: node_id, host, port."""
    host, _, port = target.bootstrap.split(",")[0].strip().rpartition(":")
    found = ask(host, int(port), ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                 {"key": transactional_id, "key_type": 1}, target.timeout_s)
    if found["error_code"] != ErrorCode.NONE:
        raise AdminError(f"transaction {transactional_id}: no coordinator ({ErrorCode(found['error_code']).name})")
    return found


def describe_state(target: Target, transactional_id: str) -> dict[str, Any] | None:
    """The coordinator's description of `transactional_id` (flattened), or None when the
    coordinator does not know it (TRANSACTIONAL_ID_NOT_FOUND)."""
    require_plaintext(target)
    try:
        found = coordinator_of(target, transactional_id)
        answer = ask(found["host"], found["port"], ApiKey.DESCRIBE_TRANSACTIONS, DESCRIBE_VERSION,
                      {"transactional_ids": [transactional_id]}, target.timeout_s)
    except UNANSWERED as error:
        raise AdminError(f"describe transaction {transactional_id}: no answer ({error})") from None
    (state,) = answer["transaction_states"]
    if state["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return None
    if state["error_code"] != ErrorCode.NONE:
        raise AdminError(f"describe transaction {transactional_id}: {ErrorCode(state['error_code']).name}")
    return {"transactional_id": transactional_id, "coordinator": found["node_id"],
            "state": state["transaction_state"], "producer_id": state["producer_id"],
            "producer_epoch": state["producer_epoch"], "timeout_ms": state["transaction_timeout_ms"],
            "start_time_ms": state["transaction_start_time_ms"],
            "partitions": [f"{t['topic']}-{p}" for t in state["topics"] for p in t["partitions"]]}


def describe_transaction(target: Target, transactional_id: str) -> dict[str, Any]:
    described = describe_state(target, transactional_id)
    if described is None:
        raise AdminError(f"describe transaction {transactional_id}: TRANSACTIONAL_ID_NOT_FOUND")
    return described
