"""SCRAM credentials where Kafka keeps them (/config/users, change notifications), the SCRAM
credential APIs, the certificate principal, and secrets kept out of DescribeConfigs."""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from kazoo.client import KazooClient
from scramp import ScramClient

from roost.broker.security.scram import make_credential, sanitize
from tests.security.conftest import PLAIN_USERS, SCRAM_PASSWORD, SCRAM_USER, SecuredNode
from tests.support.kafka_wire import WireClient


def scram_login_works(secured: SecuredNode, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """A SCRAM login over the wire (scramp as the client): whether the broker accepts it."""
    client = WireClient(secured.address("SASL_PLAINTEXT"), timeout=10)
    try:
        assert client.request(17, 1, {"mechanism": mechanism})["error_code"] == 0
        scram = ScramClient([mechanism], user, password)
        first = client.request(36, 1, {"auth_bytes": scram.get_client_first().encode()})
        scram.set_server_first(bytes(first["auth_bytes"]).decode())
        final = client.request(36, 1, {"auth_bytes": scram.get_client_final().encode()})
        return final["error_code"] == 0
    finally:
        client.close()


def test_a_user_written_into_zookeeper_by_another_client_logs_in_within_a_second(secured: SecuredNode) -> None:
    zk = KazooClient(hosts=secured.node.zookeeper)
    zk.start(timeout=10)
    try:
        credential = make_credential("SCRAM-SHA-256", "dave-secret", 4096)
        node = {"version": 1, "config": {"SCRAM-SHA-256": credential.encode()}}
        assert credential.encode().startswith("salt=") and ",iterations=4096" in credential.encode()
        zk.create(f"/config/users/{sanitize('dave')}", json.dumps(node).encode(), makepath=True)
        written = time.monotonic()
        zk.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": "users/dave"}).encode(),
                  sequence=True)
        deadline = written + 1.0
        while "user 'dave': SCRAM credentials for SCRAM-SHA-256" not in secured.log:
            assert time.monotonic() < deadline, "the broker did not see the new user within a second"
            time.sleep(0.02)
    finally:
        zk.stop()
        zk.close()
    assert scram_login_works(secured, "dave", "dave-secret")
    assert not scram_login_works(secured, "dave", "wrong")


def test_describe_user_scram_credentials(secured: SecuredNode) -> None:
    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    described = admin.describe_user_scram_credentials([SCRAM_USER])[SCRAM_USER].result(timeout=30)
    infos = described.scram_credential_infos
    assert sorted((info.mechanism.name, info.iterations) for info in infos) == \
        [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]
    missing = admin.describe_user_scram_credentials(["nobody-at-all"])["nobody-at-all"]
    error = missing.exception(timeout=30)
    assert error is not None and error.args[0].code() == 91  # RESOURCE_NOT_FOUND


def test_the_znode_holds_what_kafka_stores(secured: SecuredNode) -> None:
    zk = KazooClient(hosts=secured.node.zookeeper)
    zk.start(timeout=10)
    try:
        data, _ = zk.get(f"/config/users/{SCRAM_USER}")
    finally:
        zk.stop()
        zk.close()
    node = json.loads(data)
    assert node["version"] == 1
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        fields = dict(part.split("=", 1) for part in node["config"][mechanism].split(","))
        assert set(fields) == {"salt", "stored_key", "server_key", "iterations"} and fields["iterations"] == "4096"


def test_secrets_come_back_null_and_sensitive_from_describe_configs(secured: SecuredNode) -> None:
    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    jaas = configs["sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert configs["ssl.keystore.location"].value is not None and not configs["ssl.keystore.location"].is_sensitive


def test_a_client_certificate_becomes_the_principal_by_the_mapping_rule(secured: SecuredNode) -> None:
    producer = Producer({"bootstrap.servers": secured.address("MTLS"), "security.protocol": "ssl",
                         "ssl.ca.location": str(secured.ca), "ssl.certificate.location": str(secured.client_cert),
                         "ssl.key.location": str(secured.client_key)})
    producer.produce("mtls-principal", b"x")
    assert producer.flush(30) == 0
    assert "on listener MTLS: TLS client certificate proves User:alice" in secured.log


def test_no_password_reaches_the_broker_log_or_metrics(secured: SecuredNode) -> None:
    """Whatever the tests before did (logins, failures, user changes), no password is logged or
    served on /metrics."""
    metrics = secured.metrics_text()
    assert "kafka_" in metrics or "roost_" in metrics
    text = secured.log + metrics
    for secret in (*PLAIN_USERS.values(), SCRAM_PASSWORD, "dave-secret", "not-the-password-4711"):
        assert secret not in text
    assert "authenticated as User:" in text  # the log does say who logged in


def test_every_listener_is_registered_as_kafka_registers_it(secured: SecuredNode) -> None:
    zk = KazooClient(hosts=secured.node.zookeeper)
    zk.start(timeout=10)
    try:
        data, _ = zk.get("/brokers/ids/0")
    finally:
        zk.stop()
        zk.close()
    registration = json.loads(data)
    assert registration["endpoints"][0] == f"PLAINTEXT://127.0.0.1:{secured.ports['PLAINTEXT']}"  # inter-broker first
    assert sorted(registration["endpoints"]) == sorted(
        f"{name}://127.0.0.1:{port}" for name, port in secured.ports.items())
    assert registration["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SASL_SSL": "SASL_SSL", "REAUTH": "SASL_PLAINTEXT"}
