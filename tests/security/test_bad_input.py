"""Bad input on the secured listeners, over raw sockets: each gets Kafka's answer or a closed
connection, the broker keeps serving others, and its log says what happened without the secret."""

from __future__ import annotations

import os
import socket
import ssl
import time

import pytest
from confluent_kafka import Producer
from scramp import ScramClient

from roost.wire.kafka import RequestHeader, encode_request
from tests.security.conftest import PLAIN_USERS, SCRAM_PASSWORD, SCRAM_USER, SecuredNode
from tests.support.kafka_wire import WireClient

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 18, 17, 36, 3
GENERIC = "Authentication failed: Invalid username or password"
WRONG_PASSWORD = "not-the-password-4711"


def sasl_client(secured: SecuredNode, mechanism: str) -> WireClient:
    client = WireClient(secured.address("SASL_PLAINTEXT"), timeout=10)
    assert client.request(API_VERSIONS, 0, {})["error_code"] == 0
    answer = client.request(SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    assert answer["error_code"] == 0 and mechanism in answer["mechanisms"]
    return client


def authenticate(client: WireClient, token: bytes) -> dict:
    return client.request(SASL_AUTHENTICATE, 1, {"auth_bytes": token})


def still_serving(secured: SecuredNode) -> None:
    producer = Producer({"bootstrap.servers": secured.address("SASL_PLAINTEXT"), "security.protocol": "sasl_plaintext",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"]})
    producer.produce("still-serving", b"x")
    assert producer.flush(30) == 0


def scram_failure(secured: SecuredNode, user: str, password: str) -> tuple[dict, dict]:
    """(server-first answer, final answer) of a SCRAM-SHA-256 login."""
    client = sasl_client(secured, "SCRAM-SHA-256")
    scram = ScramClient(["SCRAM-SHA-256"], user, password)
    first = authenticate(client, scram.get_client_first().encode())
    scram.set_server_first(bytes(first["auth_bytes"]).decode())
    final = authenticate(client, scram.get_client_final().encode())
    assert client.is_closed_by_peer()
    client.close()
    return first, final


def test_wrong_plain_password_and_unknown_user_get_the_same_generic_answer(secured: SecuredNode) -> None:
    answers = []
    for user, password in (("alice", WRONG_PASSWORD), ("nobody", WRONG_PASSWORD)):
        client = sasl_client(secured, "PLAIN")
        started = time.monotonic()
        answer = authenticate(client, f"\0{user}\0{password}".encode())
        assert time.monotonic() - started >= 0.09  # connection.failed.authentication.delay.ms = 100
        assert client.is_closed_by_peer()
        client.close()
        answers.append(answer)
    assert answers[0] == answers[1]
    assert answers[0]["error_code"] == 58 and answers[0]["error_message"] == GENERIC
    still_serving(secured)
    assert WRONG_PASSWORD not in secured.log
    assert "PLAIN login of user 'nobody' refused" in secured.log


def test_scram_unknown_user_fails_like_a_wrong_password(secured: SecuredNode) -> None:
    first_wrong, final_wrong = scram_failure(secured, SCRAM_USER, WRONG_PASSWORD)
    first_unknown, final_unknown = scram_failure(secured, "mallory", WRONG_PASSWORD)
    # Both get a salt and an iteration count, and fail only at the proof, the same way.
    for first in (first_wrong, first_unknown):
        assert first["error_code"] == 0 and b",s=" in bytes(first["auth_bytes"]) and bytes(first["auth_bytes"]).endswith(b",i=4096")
    assert final_wrong == final_unknown
    assert final_wrong["error_code"] == 58 and final_wrong["error_message"] == GENERIC
    assert WRONG_PASSWORD not in secured.log
    still_serving(secured)


def test_scram_right_password_over_the_wire(secured: SecuredNode) -> None:
    client = sasl_client(secured, "SCRAM-SHA-512")
    scram = ScramClient(["SCRAM-SHA-512"], SCRAM_USER, SCRAM_PASSWORD)
    first = authenticate(client, scram.get_client_first().encode())
    scram.set_server_first(bytes(first["auth_bytes"]).decode())
    final = authenticate(client, scram.get_client_final().encode())
    assert final["error_code"] == 0
    scram.set_server_final(bytes(final["auth_bytes"]).decode())  # the server proves it knows the key too
    assert client.request(METADATA, 1, {"topics": []})["brokers"]
    client.close()


def test_handshake_v0_takes_raw_tokens(secured: SecuredNode) -> None:
    client = WireClient(secured.address("SASL_PLAINTEXT"), timeout=10)
    assert client.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
    token = f"\0bob\0{PLAIN_USERS['bob']}".encode()
    client.send_raw(len(token).to_bytes(4, "big") + token)
    assert client.read_frame() == b""  # PLAIN's empty answer, as a raw zero-length frame
    assert client.request(METADATA, 1, {"topics": []})["brokers"]
    client.close()


def test_unknown_mechanism_gets_the_enabled_list_and_a_close(secured: SecuredNode) -> None:
    client = WireClient(secured.address("SASL_PLAINTEXT"), timeout=10)
    answer = client.request(SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
    assert answer["error_code"] == 33
    assert set(answer["mechanisms"]) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert client.is_closed_by_peer()
    still_serving(secured)


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_request_before_authentication_closes_the_connection(secured: SecuredNode, listener: str) -> None:
    client = WireClient(secured.address(listener), timeout=10)
    if listener == "SASL_SSL":  # the same socket, TLS first
        client.sock = ssl.create_default_context(cafile=str(secured.ca)).wrap_socket(
            client.sock, server_hostname="localhost")
    client.send(METADATA, 1, {"topics": []})
    assert client.is_closed_by_peer()
    client.close()
    assert "before SASL authentication" in secured.log


def test_a_100_mb_token_is_refused_without_being_read(secured: SecuredNode) -> None:
    client = sasl_client(secured, "PLAIN")
    client.send_raw((100 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1024)
    assert client.is_closed_by_peer()
    still_serving(secured)


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SSL", "PLAINTEXT"])
def test_random_bytes_close_the_connection(secured: SecuredNode, listener: str) -> None:
    client = WireClient(secured.address(listener), timeout=10)
    client.send_raw(b"\x00\x00\x00\x20" + os.urandom(32) if listener != "SSL" else os.urandom(300))
    assert client.is_closed_by_peer()
    still_serving(secured)


def test_a_plain_client_on_a_tls_port_is_closed(secured: SecuredNode) -> None:
    client = WireClient(secured.address("SSL"), timeout=10)
    client.send(API_VERSIONS, 0, {})
    assert client.is_closed_by_peer()


def test_a_tls_client_on_a_plain_port_fails_its_handshake(secured: SecuredNode) -> None:
    context = ssl.create_default_context(cafile=str(secured.ca))
    raw = socket.create_connection(("127.0.0.1", secured.ports["PLAINTEXT"]), timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError, TimeoutError)):
        context.wrap_socket(raw, server_hostname="localhost")
    raw.close()
    still_serving(secured)


def test_mutual_tls_refuses_a_client_without_a_certificate(secured: SecuredNode) -> None:
    context = ssl.create_default_context(cafile=str(secured.ca))
    raw = socket.create_connection(("127.0.0.1", secured.ports["MTLS"]), timeout=10)
    request = b"".join(bytes(b) for b in encode_request(RequestHeader(API_VERSIONS, 0, 1, "t"), {}))
    answer = b""
    try:
        tls = context.wrap_socket(raw, server_hostname="localhost")
        # TLS 1.3 finishes the client's handshake first: the refusal comes with the first read.
        tls.sendall(request)
        answer = tls.recv(1024)
    except (ssl.SSLError, ConnectionError):
        pass
    finally:
        raw.close()
    assert answer == b"", "a client without a certificate was answered"
    still_serving(secured)
