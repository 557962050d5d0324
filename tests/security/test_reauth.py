"""KIP-368 (connections.max.reauth.ms) on the shared node's REAUTH listener: the login answer
gives the session lifetime, a client logs in again on the same connection, a session not renewed
in time has its connection closed at the next request, and librdkafka keeps producing across
re-logins."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from tests.security.conftest import PLAIN_USERS, REAUTH_MS, SecuredNode
from tests.support.kafka_wire import WireClient

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3


def login(client: WireClient, user: str = "alice") -> dict:
    assert client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    return client.request(SASL_AUTHENTICATE, 1, {"auth_bytes": f"\0{user}\0{PLAIN_USERS[user]}".encode()})


def test_a_session_is_renewed_on_its_connection_and_closed_when_not(secured: SecuredNode) -> None:
    client = WireClient(secured.address("REAUTH"), timeout=10)
    answer = login(client)
    assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == REAUTH_MS
    time.sleep(REAUTH_MS / 1000 * 0.6)
    assert login(client)["session_lifetime_ms"] == REAUTH_MS  # renewed on the same connection
    time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session's end, within the second's
    assert client.request(METADATA, 1, {"topics": []})["brokers"]
    time.sleep(REAUTH_MS / 1000 + 0.2)
    client.send(METADATA, 1, {"topics": []})
    assert client.is_closed_by_peer()
    assert "expired (connections.max.reauth.ms)" in secured.log


def test_a_re_login_may_not_change_the_principal(secured: SecuredNode) -> None:
    client = WireClient(secured.address("REAUTH"), timeout=10)
    assert login(client, "alice")["error_code"] == 0
    assert client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    client.send(SASL_AUTHENTICATE, 1, {"auth_bytes": f"\0bob\0{PLAIN_USERS['bob']}".encode()})
    assert client.is_closed_by_peer()


def test_librdkafka_keeps_producing_across_re_logins(secured: SecuredNode) -> None:
    relogins_before = secured.log.count("again (KIP-368)")
    expiries_before = secured.log.count("expired (connections.max.reauth.ms)")
    producer = Producer({"bootstrap.servers": secured.address("REAUTH"), "security.protocol": "sasl_plaintext",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"],
                         "linger.ms": 0})
    failures: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failures.append(error)

    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x", on_delivery=delivered)
        producer.poll(0.1)
        sent += 1
    assert producer.flush(30) == 0
    assert failures == [] and sent > 10
    # librdkafka logged in again on its connections (KIP-368), none of which had to be closed.
    assert secured.log.count("again (KIP-368)") > relogins_before
    assert secured.log.count("expired (connections.max.reauth.ms)") == expiries_before
