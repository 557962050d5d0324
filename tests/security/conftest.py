"""One secured Roost node shared by the security tests: PLAINTEXT (for set-up), SSL, SSL with
required client certificates (MTLS), SASL_PLAINTEXT and SASL_SSL listeners on free loopback ports,
a throw-away CA from trustme, PLAIN users in the JAAS setting and SCRAM users created through
AlterUserScramCredentials."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from roost.testing.node import RoostNode

PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL", "REAUTH")
REAUTH_MS = 1500  # the REAUTH listener's connections.max.reauth.ms (KIP-368)


@dataclass
class SecuredNode:
    node: RoostNode
    ports: dict[str, int]  # listener name -> port
    ca: Path
    client_cert: Path  # alice's certificate (CN=alice)
    client_key: Path
    client_pem: Path  # key and certificate in one file

    def metrics_text(self) -> str:
        import urllib.request
        assert self.node.process is not None
        host, port = self.node.process.wait_listening(["metrics"])["metrics"]
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
            return answer.read().decode()

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def log(self) -> str:
        assert self.node.process is not None
        return self.node.process.log_text()


def make_certificates(where: Path) -> dict[str, Path]:
    ca = trustme.CA()
    paths = {name: where / f"{name}.pem" for name in ("ca", "broker", "alice", "alice-cert", "alice-key")}
    ca.cert_pem.write_to_path(paths["ca"])
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(paths["broker"])
    alice = ca.issue_cert("alice@example.com", common_name="alice")
    alice.private_key_and_cert_chain_pem.write_to_path(paths["alice"])
    alice.cert_chain_pems[0].write_to_path(paths["alice-cert"])
    alice.private_key_pem.write_to_path(paths["alice-key"])
    return paths


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    root = tmp_path_factory.mktemp("secured")
    certs = make_certificates(root)
    users = " ".join(f'user_{name}="{password}"' for name, password in PLAIN_USERS.items())
    settings = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(certs["broker"]),
        "ssl.truststore.location": str(certs["ca"]),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.reauth.connections.max.reauth.ms": REAUTH_MS,
        "metrics.port": 0,
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/L,DEFAULT",
        "sasl.jaas.config": f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
    }
    node = RoostNode.start(root / "data", settings)
    assert node.process is not None
    names = [f"kafka listener {name.lower().replace('_', '-')}" for name in LISTENERS]
    found = node.process.wait_listening(names)
    ports = {name: found[label][1] for name, label in zip(LISTENERS, names, strict=True)}
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(mechanism, 4096), SCRAM_PASSWORD.encode())
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)])
    for future in futures.values():
        future.result(timeout=30)
    yield SecuredNode(node, ports, certs["ca"], certs["alice-cert"], certs["alice-key"], certs["alice"])
    node.stop()
