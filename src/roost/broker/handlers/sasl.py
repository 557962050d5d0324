"""SaslHandshake and SaslAuthenticate outside a login, and the SCRAM credential APIs.

A SASL login is handled by the connection (roost.broker.security.sasl) before any request is
routed; a SaslHandshake or SaslAuthenticate that reaches a handler came on a listener without SASL
or after the login: Kafka answers ILLEGAL_SASL_STATE. DescribeUserScramCredentials and
AlterUserScramCredentials read and write /config/users (roost.broker.security.scram_zk).
"""

from __future__ import annotations

from typing import Any

from roost.broker.net.request import Request
from roost.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MECHANISM_CODES,
    MIN_ITERATIONS,
    ScramCredential,
    ScramCredentialStore,
    credential_from_salted_password,
)
from roost.broker.security.scram_zk import ZkScramCredentials
from roost.wire.kafka.errors import ErrorCode


def handle_sasl_handshake(request: Request) -> dict[str, Any]:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


def handle_sasl_authenticate(request: Request) -> dict[str, Any]:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "no SASL login in progress",
            "auth_bytes": b"", "session_lifetime_ms": 0}


class ScramApi:
    def __init__(self, store: ScramCredentialStore, source: ZkScramCredentials | None) -> None:
        self._store = store
        self._source = source

    def handle_describe(self, request: Request) -> dict[str, Any]:
        users = self._store.users()
        wanted = request.body["users"]
        results = []
        if not wanted:
            names = sorted(users)
            duplicates: set[str] = set()
        else:
            names = [u["name"] for u in wanted]
            duplicates = {n for n in names if names.count(n) > 1}
        for name in dict.fromkeys(names):
            if name in duplicates:
                results.append({"user": name, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                                "error_message": f"user {name!r} named twice", "credential_infos": []})
            elif name not in users:
                results.append({"user": name, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                                "error_message": f"attempt to describe a user credential that does not exist: {name}",
                                "credential_infos": []})
            else:
                results.append({"user": name, "error_code": ErrorCode.NONE, "error_message": None,
                                "credential_infos": [{"mechanism": MECHANISM_CODES[m], "iterations": c.iterations}
                                                     for m, c in sorted(users[name].items())]})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}

    async def handle_alter(self, request: Request) -> dict[str, Any]:
        body = request.body
        errors: dict[str, tuple[ErrorCode, str]] = {}
        seen: set[tuple[str, int]] = set()
        upserts: dict[str, dict[str, ScramCredential]] = {}
        deletions: dict[str, set[str]] = {}
        order: list[str] = []

        def refuse(user: str, code: ErrorCode, message: str) -> None:
            errors.setdefault(user, (code, message))

        for kind, entries in (("delete", body["deletions"]), ("upsert", body["upsertions"])):
            for entry in entries:
                user, code = entry["name"], entry["mechanism"]
                order.append(user)
                mechanism = MECHANISM_BY_CODE.get(code)
                if not user:
                    refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "username must not be empty")
                elif mechanism is None:
                    refuse(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism {code}")
                elif (user, code) in seen:
                    refuse(user, ErrorCode.DUPLICATE_RESOURCE, "a user's mechanism was named twice")
                elif kind == "delete":
                    if self._store.get(user, mechanism) is None:
                        refuse(user, ErrorCode.RESOURCE_NOT_FOUND,
                               f"attempt to delete a user credential that does not exist: {user}")
                    deletions.setdefault(user, set()).add(mechanism)
                elif not MIN_ITERATIONS <= entry["iterations"] <= MAX_ITERATIONS:
                    refuse(user, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                           f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
                else:
                    upserts.setdefault(user, {})[mechanism] = credential_from_salted_password(
                        mechanism, bytes(entry["salt"]), bytes(entry["salted_password"]), entry["iterations"])
                seen.add((user, code))
        results = []
        for user in dict.fromkeys(order):
            if user in errors:
                code, message = errors[user]
            elif self._source is None:
                code, message = ErrorCode.UNSUPPORTED_VERSION, "SCRAM credentials need zookeeper.connect"
            else:
                try:
                    await self._source.alter_user(user, upserts.get(user, {}), deletions.get(user, set()))
                    code, message = ErrorCode.NONE, None
                except Exception as error:  # ZooKeeper unreachable: say so, never a secret
                    code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store the credentials: {type(error).__name__}"
            results.append({"user": user, "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "results": results}
