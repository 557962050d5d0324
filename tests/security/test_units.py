"""The sans-IO parts: principal mapping rules, JAAS parsing, the SASL frame order, SCRAM credential
strings, listener settings and secret references."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from roost.broker.security.jaas import parse_jaas
from roost.broker.security.principal_mapping import map_subject, parse_rules
from roost.broker.security.sasl import Action, SaslAuthenticator, SaslSettings, State
from roost.broker.security.scram import ScramCredential, make_credential, sanitize
from roost.config import BrokerConfig, ConfigError
from roost.wire.kafka import RequestHeader, decode_response, encode_request


def test_mapping_rules_as_kafka_documents_them() -> None:
    rules = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?).*$/$1@$2/L,"
                        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT")
    assert map_subject(rules, "CN=kafka1,OU=ServiceUsers,O=Org") == "kafka1"
    assert map_subject(rules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert map_subject(rules, "cn=duke,ou=x") == "DUKE"
    assert map_subject(parse_rules("DEFAULT"), "CN=a,O=b") == "CN=a,O=b"
    assert map_subject(parse_rules("RULE:^CN=(x)$/$1/"), "CN=y") is None
    with pytest.raises(ValueError, match=r"invalid ssl\.principal\.mapping\.rules"):
        parse_rules("RULE:nope")


def test_jaas_users_and_login_and_no_secret_in_repr() -> None:
    jaas = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                      'password="admin-secret" user_admin="admin-secret" user_alice="a\\"b";')
    assert jaas.username == "admin" and jaas.password == "admin-secret"
    assert jaas.plain_users() == {"admin": "admin-secret", "alice": 'a"b'}
    assert "secret" not in repr(jaas)
    with pytest.raises(ValueError) as raised:
        parse_jaas('PlainLoginModule required user_x="top-secret"')  # no ';'
    assert "top-secret" not in str(raised.value)


def frame(api: int, version: int, body: dict) -> bytearray:
    return bytearray(b"".join(bytes(b) for b in encode_request(RequestHeader(api, version, 7, "c"), body))[4:])


def answer(api: int, version: int, step_reply: list[bytes]) -> dict:
    return decode_response(api, version, b"".join(step_reply)[4:])[1]


def authenticator() -> SaslAuthenticator:
    return SaslAuthenticator(SaslSettings(["PLAIN"], lambda: {"alice": "pw"}))


def test_frame_order_api_versions_then_handshake_then_tokens() -> None:
    auth = authenticator()
    assert auth.on_frame(frame(18, 3, {"client_software_name": "x", "client_software_version": "1"})).action \
        is Action.ROUTE
    # A second ApiVersions is not allowed once the first was answered.
    again = authenticator()
    again.on_frame(frame(18, 0, {}))
    assert again.on_frame(frame(18, 0, {})).action is Action.CLOSE
    step = auth.on_frame(frame(17, 1, {"mechanism": "PLAIN"}))
    assert step.action is Action.REPLY and answer(17, 1, step.reply)["error_code"] == 0
    done = auth.on_frame(frame(36, 1, {"auth_bytes": b"\0alice\0pw"}))
    assert done.action is Action.DONE and str(done.principal) == "User:alice" and auth.state is State.COMPLETE


def test_a_request_before_the_login_closes() -> None:
    assert authenticator().on_frame(frame(3, 1, {"topics": []})).action is Action.CLOSE
    auth = authenticator()
    auth.on_frame(frame(17, 1, {"mechanism": "PLAIN"}))
    assert auth.on_frame(frame(3, 1, {"topics": []})).action is Action.CLOSE


def test_failed_logins_look_alike_and_name_no_secret() -> None:
    replies, reasons = [], []
    for token in (b"\0alice\0wrong-pw-123", b"\0nobody\0wrong-pw-123", b"garbage"):
        auth = authenticator()
        auth.on_frame(frame(17, 1, {"mechanism": "PLAIN"}))
        step = auth.on_frame(frame(36, 1, {"auth_bytes": token}))
        assert step.action is Action.FAIL
        replies.append(answer(36, 1, step.reply))
        reasons.append(step.reason)
    assert replies[0] == replies[1] == replies[2]
    assert replies[0]["error_code"] == 58
    assert not any("wrong-pw-123" in reason for reason in reasons)


def test_unknown_mechanism_and_raw_v0_tokens() -> None:
    auth = authenticator()
    step = auth.on_frame(frame(17, 1, {"mechanism": "GSSAPI"}))
    assert step.action is Action.FAIL and answer(17, 1, step.reply) == {"error_code": 33, "mechanisms": ["PLAIN"]}
    raw = authenticator()
    raw.on_frame(frame(17, 0, {"mechanism": "PLAIN"}))
    done = raw.on_frame(bytearray(b"\0alice\0pw"))
    assert done.action is Action.DONE and done.reply == [b"\0\0\0\0", b""]


def test_scram_credentials_are_kafka_s_strings_and_scramp_s_keys() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, b"0123456789abcdef")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", b"0123456789abcdef", 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    assert credential.stored_key == hashlib.sha256(client_key).digest()
    text = credential.encode()
    assert text.startswith(f"salt={base64.b64encode(b'0123456789abcdef').decode()},stored_key=")
    assert ScramCredential.decode(text) == credential
    assert sanitize("a b*c/d") == "a%20b%2Ac%2Fd"


def test_listener_settings_and_per_listener_overrides() -> None:
    config = BrokerConfig.build([("f", {
        "listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://0.0.0.0:9094",
        "advertised.listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://kafka1.example.com:9094",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })])
    assert config.inter_broker_listener() == "INTERNAL"
    assert config.for_listener("EXTERNAL", "sasl.enabled.mechanisms") == "SCRAM-SHA-512"
    assert config.for_listener("INTERNAL", "sasl.enabled.mechanisms") == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    with pytest.raises(ConfigError, match="no security protocol"):
        BrokerConfig.build([("f", {"listeners": "CLIENT://127.0.0.1:1"})])
    with pytest.raises(ConfigError, match="inter-broker listener"):
        BrokerConfig.build([("f", {"listeners": "SSL://127.0.0.1:1", "ssl.keystore.location": "/k"})])
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        BrokerConfig.build([("f", {"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2"})])
    with pytest.raises(ConfigError, match="unknown setting"):
        BrokerConfig.build([("f", {"listener.name.external.no.such.setting": "x"})])


def test_secret_references(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "jaas").write_text('PlainLoginModule required user_a="b";\n')
    monkeypatch.setenv("ROOST_TEST_PW", "from-env")
    config = BrokerConfig.build([("f", {"sasl.jaas.config": "${file:" + str(tmp_path / "jaas") + "}",
                                        "ssl.key.password": "${env:ROOST_TEST_PW}"})])
    assert config["sasl.jaas.config"] == 'PlainLoginModule required user_a="b";'
    assert config["ssl.key.password"] == "from-env"
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE"):
        BrokerConfig.build([("f", {"ssl.key.password": "${env:NOT_SET_ANYWHERE}"})])


def test_pkcs12_key_and_trust_stores_serve_tls(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A listener context from PKCS#12 stores (read with cryptography) completes a TLS handshake
    with a client that trusts the CA and shows a certificate the server's trust store accepts."""
    import socket
    import ssl
    import threading

    import trustme
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )

    from roost.broker.security.tls import ListenerTls

    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    cert = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    (tmp_path / "keystore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, [ca_cert], BestAvailableEncryption(b"store-pw")))  # type: ignore[arg-type]
    (tmp_path / "truststore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"ca", None, ca_cert, None, BestAvailableEncryption(b"trust-pw")))
    config = BrokerConfig.build([("f", {
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tmp_path / "keystore.p12"),
        "ssl.keystore.password": "store-pw", "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(tmp_path / "truststore.p12"), "ssl.truststore.password": "trust-pw",
        "ssl.client.auth": "required"})])
    tls = ListenerTls(config, "SSL")
    client_cert = ca.issue_cert("carol@example.com", common_name="carol")
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    client_cert.configure_cert(client_context)
    server_side, client_side = socket.socketpair()
    seen: list[object] = []

    def serve() -> None:
        with tls.context.wrap_socket(server_side, server_side=True) as wrapped:
            seen.append(tls.principal(wrapped))

    thread = threading.Thread(target=serve)
    thread.start()
    with client_context.wrap_socket(client_side, server_hostname="localhost"):
        thread.join(10)
    # DEFAULT mapping: the whole subject, RFC 2253 order (most specific first).
    assert len(seen) == 1 and str(seen[0]).startswith("User:CN=carol,OU=Testing cert") \
        and ",O=trustme" in str(seen[0])


def test_roost_up_brokers_with_security_plans_secured_listeners(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`roost up --brokers 3 --security sasl_ssl`: every broker listens on SASL_SSL, talks to the
    others over it as the admin user, and its config file points at the secrets without them."""
    import tomllib

    from roost.cli.main import build_parser
    from roost.cli.servers import cluster_plan, dev_security
    from roost.cli.servers.node_runner import given_settings

    args = build_parser().parse_args(["up", "--brokers", "3", "--data-dir", str(tmp_path), "--kafka-port", "19192",
                                      "--security", "sasl_ssl"])
    security = dev_security.prepare(args.data_dir, args.security, args.host)
    assert security is not None
    plan = cluster_plan.plan_from_args(args, given_settings(args), security)
    plan.write_configs()
    password = (tmp_path / "security" / "admin.password").read_text().strip()
    for spec in plan.brokers:
        text = spec.config_path.read_text()
        assert password not in text
        config = BrokerConfig.build([("file", tomllib.loads(text))])  # the child's own check
        assert config["listeners"] == f"SASL_SSL://127.0.0.1:{spec.address[1]}"
        assert config.inter_broker_listener() == "SASL_SSL"
        assert f'password="{password}"' in config["sasl.jaas.config"]  # resolved from the file
