"""DescribeClientQuotas (48) and AlterClientQuotas (49), with Kafka's checks and error codes
(INVALID_REQUEST for a bad entity, filter, key or value, per entry). The quotas themselves and
where they are stored: roost.broker.quotas."""

from __future__ import annotations

import logging
from typing import Any

from roost.broker.net.request import Request
from roost.broker.quotas.core import CLIENT_ID, IP, USER, QuotaConfigs, QuotaError, check_value, make_entity
from roost.broker.quotas.store import QuotaStore
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.quotas")


def _entity_data(entity: Any) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


class ClientQuotasApi:
    def __init__(self, configs: QuotaConfigs, store: QuotaStore) -> None:
        self._configs = configs
        self._store = store

    def handle_describe(self, request: Request) -> dict[str, Any]:
        components = []
        seen = set()
        for component in request.body["components"]:
            kind, match_type, match = component["entity_type"], component["match_type"], component["match"]
            problem = None
            if kind not in (USER, CLIENT_ID, IP):
                problem = f"unknown entity type {kind!r}"
            elif kind in seen:
                problem = f"entity type {kind!r} filtered twice"
            elif match_type not in (0, 1, 2):
                problem = f"unknown match type {match_type}"
            elif match_type == 0 and match is None:
                problem = "an exact match needs a name"
            if problem is not None:
                return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "error_message": problem,
                        "entries": None}
            seen.add(kind)
            components.append((kind, match_type, match))
        entries = [{"entity": _entity_data(entity),
                    "values": [{"key": key, "value": value} for key, value in sorted(quotas.items())]}
                   for entity, quotas in self._configs.matching(components, request.body["strict"])]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}

    async def handle_alter(self, request: Request) -> dict[str, Any]:
        results = []
        for entry in request.body["entries"]:
            results.append(await self._alter_one(entry, request.body["validate_only"]))
        return {"throttle_time_ms": 0, "entries": results}

    async def _alter_one(self, entry: dict[str, Any], validate_only: bool) -> dict[str, Any]:
        answer = {"error_code": ErrorCode.NONE, "error_message": None, "entity": entry["entity"]}
        try:
            entity = make_entity((part["entity_type"], part["entity_name"]) for part in entry["entity"])
            upserts: dict[str, float] = {}
            removals: set[str] = set()
            for op in entry["ops"]:
                key = op["key"]
                if key in upserts or key in removals:
                    raise QuotaError(f"quota key {key!r} altered twice")
                if op["remove"]:
                    check_value(entity, key, 1.0)  # the key must be one the entity takes
                    removals.add(key)
                else:
                    upserts[key] = check_value(entity, key, op["value"])
        except QuotaError as error:
            return {**answer, "error_code": ErrorCode.INVALID_REQUEST, "error_message": str(error)}
        if validate_only:
            return answer
        try:
            await self._store.alter(entity, upserts, removals)
        except Exception as error:  # ZooKeeper unreachable or the znode kept changing
            log.warning("altering the client quotas of %s failed: %r", entity, error)
            return {**answer, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(error)}
        return answer
