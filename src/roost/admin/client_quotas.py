"""DescribeClientQuotas and AlterClientQuotas for `roost quota` (librdkafka, under
confluent-kafka, has no client-quota admin calls, so these go through Roost's own codec on one
blocking plaintext connection to the first bootstrap broker; for TLS or SASL listeners use
Kafka's kafka-configs.sh --bootstrap-server with a --command-config).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from roost.admin.errors import AdminError
from roost.admin.kafka_client import read_exactly
from roost.admin.target import Target
from roost.wire.kafka import ApiKey, KafkaCodecError, RequestHeader, decode_response, encode_request
from roost.wire.kafka.errors import ErrorCode

MAX_RESPONSE_BYTES = 16 << 20
VERSION = 1

Entity = list[tuple[str, str | None]]  # (entity type, name or None for the default)


def _request(target: Target, api_key: int, body: dict[str, Any], what: str) -> dict[str, Any]:
    if target.settings.get("security.protocol", "plaintext").lower() != "plaintext":
        raise AdminError(f"{what}: roost quota speaks plaintext only; for a TLS or SASL listener use "
                         "kafka-configs.sh --bootstrap-server ... --command-config")
    host, _, port = target.bootstrap.split(",")[0].strip().rpartition(":")
    frame = b"".join(encode_request(RequestHeader(api_key, VERSION, 1, "roost-cli"), body))
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=target.timeout_s) as sock:
            sock.sendall(frame)
            (size,) = struct.unpack(">i", read_exactly(sock, 4))
            if not 0 < size <= MAX_RESPONSE_BYTES:
                raise AdminError(f"{what}: the broker answered a frame of {size} bytes")
            _, answer = decode_response(api_key, VERSION, read_exactly(sock, size))
    except (OSError, ValueError) as error:
        raise AdminError(f"{what}: cannot reach {target.bootstrap}: {error}") from None
    except KafkaCodecError as error:
        raise AdminError(f"{what}: the broker's answer is not a {ApiKey(api_key).name} response: {error}") from None
    return answer


def _entity_data(entity: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


def alter_quotas(target: Target, entity: Entity, upserts: dict[str, float], removals: list[str],
                 validate_only: bool = False) -> None:
    ops = [{"key": k, "value": v, "remove": False} for k, v in upserts.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in removals]
    answer = _request(target, ApiKey.ALTER_CLIENT_QUOTAS, {
        "entries": [{"entity": _entity_data(entity), "ops": ops}], "validate_only": validate_only}, "alter quotas")
    for entry in answer["entries"]:
        if entry["error_code"] != ErrorCode.NONE:
            raise AdminError(f"alter quotas: {ErrorCode(entry['error_code']).name}: {entry['error_message']}")


def describe_quotas(target: Target, components: list[tuple[str, int, str | None]],
                    strict: bool = False) -> list[tuple[Entity, dict[str, float]]]:
    """(entity, quotas) of every stored entity the filter matches (match types: 0 exact name,
    1 the default, 2 any name)."""
    answer = _request(target, ApiKey.DESCRIBE_CLIENT_QUOTAS, {
        "components": [{"entity_type": kind, "match_type": match_type, "match": match}
                       for kind, match_type, match in components], "strict": strict}, "describe quotas")
    if answer["error_code"] != ErrorCode.NONE:
        raise AdminError(f"describe quotas: {ErrorCode(answer['error_code']).name}: {answer['error_message']}")
    return [([(part["entity_type"], part["entity_name"]) for part in entry["entity"]],
             {value["key"]: value["value"] for value in entry["values"]}) for entry in answer["entries"] or []]
