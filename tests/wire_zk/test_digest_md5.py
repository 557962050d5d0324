"""SASL DIGEST-MD5 (roost.wire.zk.digest_md5): our client against our server, and pure-sasl's
client (what kazoo uses) against our server, including the refusals."""

from __future__ import annotations

import pytest
from puresasl.client import SASLClient

from roost.wire.zk.digest_md5 import DigestMd5Client, DigestMd5Server, SaslFailure, parse_directives

USERS = {"kafka": "s3cret, with \"quotes\""}


def run(client: DigestMd5Client, server: DigestMd5Server) -> None:
    token = client.step(None)
    while not client.complete:
        assert token is not None
        token = client.step(server.step(token))


def test_our_client_and_server_agree() -> None:
    server = DigestMd5Server(USERS.get, b"n" * 16)
    run(DigestMd5Client("kafka", USERS["kafka"], b"c" * 16), server)
    assert server.complete and server.username == "kafka"


@pytest.mark.parametrize("user, password", [("kafka", "wrong"), ("nobody", USERS["kafka"])])
def test_a_wrong_password_or_unknown_user_fails_alike(user: str, password: str) -> None:
    server = DigestMd5Server(USERS.get, b"n" * 16)
    with pytest.raises(SaslFailure, match=r"^wrong password or unknown user$"):
        run(DigestMd5Client(user, password, b"c" * 16), server)
    assert server.username is None


def test_pure_sasl_as_kazoo_drives_it() -> None:
    server = DigestMd5Server(USERS.get, b"\x01" * 16)
    client = SASLClient("zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5",
                        username="kafka", password=USERS["kafka"])
    challenge = None
    for _ in range(4):
        response = client.process(challenge=challenge)
        if client.complete:
            break
        challenge = server.step(response or b"")
    assert client.complete and server.username == "kafka"


def test_a_client_refuses_a_server_that_does_not_know_the_password() -> None:
    client = DigestMd5Client("kafka", USERS["kafka"], b"c" * 16)
    client.step(None)
    client.step(DigestMd5Server(USERS.get, b"n" * 16).challenge())
    with pytest.raises(SaslFailure):
        client.step(b"rspauth=00000000000000000000000000000000")


def test_bad_tokens() -> None:
    for token in (b"x" * 5000, b"\xff\xfe", b'username="open', b"=v"):
        server = DigestMd5Server(USERS.get, b"n" * 16)
        server.step(b"")
        with pytest.raises(SaslFailure):
            server.step(token)
    assert parse_directives(b'a=1, b="x\\"y"') == {"a": "1", "b": 'x"y'}
