"""The keeper's TLS client port (ZooKeeper's secureClientPort and ssl.* settings, PEM files from a
throw-away `trustme` CA) with kazoo's `use_ssl` and the broker's own ZooKeeper client: mutual
TLS, the client certificate as an `x509` id in ACLs, and the refusals (no certificate, a plain
client on the TLS port, a TLS client on the plain port), after which the keeper serves on.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl

from roost.broker.zk.security import client_ssl_context
from roost.config import BrokerConfig
from roost.wire.zk.constants import Perms
from roost.wire.zk.records import ACL
from roost.zkclient import ZkClient
from tests.keeper.zkharness import kazoo, keeper_config, keeper_ensemble, unique_root
from tests.support.procs import RoostProcess, start_roost


@dataclass
class Pki:
    ca: Path
    server: Path  # key + chain, one PEM (ssl.keyStore.location)
    certs: dict[str, tuple[Path, Path]]  # client name -> (certificate chain, key)
    keystores: dict[str, Path]  # client name -> key + chain in one PEM
    subjects: dict[str, str]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(directory / "ca.pem")
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(directory / "keeper.pem")
    certs, keystores, subjects = {}, {}, {}
    for name in ("alice", "bob", "carol"):
        leaf = ca.issue_cert(f"{name}.clients.example", common_name=name)
        chain, key = directory / f"{name}-chain.pem", directory / f"{name}-key.pem"
        for index, blob in enumerate(leaf.cert_chain_pems):
            blob.write_to_path(chain, append=index > 0)
        leaf.private_key_pem.write_to_path(key)
        leaf.private_key_and_cert_chain_pem.write_to_path(directory / f"{name}.pem")
        certs[name], keystores[name] = (chain, key), directory / f"{name}.pem"
        subjects[name] = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).subject.rfc4514_string()
    return Pki(directory / "ca.pem", directory / "keeper.pem", certs, keystores, subjects)


@pytest.fixture(scope="module")
def tls_keeper(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    config = keeper_config(tmp_path_factory.mktemp("tls-keeper"), extra={
        "secureClientPort": 0, "ssl.keyStore.location": str(pki.server),
        "ssl.trustStore.location": str(pki.ca), "ssl.clientAuth": "need",
        "zookeeper.X509AuthenticationProvider.superUser": pki.subjects["carol"],
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory"})
    proc = start_roost(["keeper", "--config", str(config)], expect=("keeper", "keeper secure"))
    try:
        yield proc
    finally:
        proc.stop()


def tls_kazoo(pki: Pki, address: str, name: str | None, **kwargs: object) -> KazooClient:
    certificate = {"certfile": str(pki.certs[name][0]), "keyfile": str(pki.certs[name][1])} if name else {}
    return kazoo(address, use_ssl=True, ca=str(pki.ca), verify_certs=True, check_hostname=True,
                 **certificate, **kwargs)


def test_kazoo_over_mutual_tls_with_x509_acls(pki: Pki, tls_keeper: RoostProcess) -> None:
    secure = tls_keeper.address("keeper secure")
    root = unique_root("tls")
    alice, bob, carol = (tls_kazoo(pki, secure, name) for name in ("alice", "bob", "carol"))
    try:
        alice.create(root, b"alice's", acl=[make_acl("x509", pki.subjects["alice"], all=True)])
        assert alice.get(root)[0] == b"alice's"
        with pytest.raises(NoAuthError):
            bob.get(root)
        with pytest.raises(NoAuthError):
            bob.set(root, b"bob's")
        # `auth` expands to the certificate's id too.
        alice.create(root + "/mine", acl=[make_acl("auth", "", all=True)])
        assert [(a.id.scheme, a.id.id) for a in alice.get_acls(root + "/mine")[0]] == [
            ("x509", pki.subjects["alice"])]
        # zookeeper.X509AuthenticationProvider.superUser: carol's certificate passes every check.
        assert carol.get(root)[0] == b"alice's"
        carol.set(root, b"carol's")
        carol.delete(root, recursive=True)
    finally:
        for client in (alice, bob, carol):
            client.stop()
            client.close()


def _refused_handshake(pki: Pki, address: str, with_certificate: bool) -> bool:
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(pki.ca))
    if with_certificate:
        context.load_cert_chain(*pki.certs["alice"])
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(b"srvr")  # TLS 1.3 reports a refused certificate on the first read
            return b"Mode" not in tls.recv(4096)
    except (ssl.SSLError, OSError):
        return True


def _closed_by_server(sock: socket.socket) -> bool:
    """Read until the server closes (True) or 10 s pass (False); a TLS alert may come first."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
    return False


def test_refusals_and_the_keeper_serves_on(pki: Pki, tls_keeper: RoostProcess) -> None:
    secure, plain = tls_keeper.address("keeper secure"), tls_keeper.address("keeper")
    assert not _refused_handshake(pki, secure, with_certificate=True)
    assert _refused_handshake(pki, secure, with_certificate=False)  # ssl.clientAuth = need
    # A plain client on the TLS port: its bytes are no TLS handshake; the connection ends.
    host, port = secure.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(b"\x00\x00\x00\x2c" + bytes(44))  # a ZooKeeper ConnectRequest's length
        assert _closed_by_server(raw)
    # A TLS client on the plain port fails its handshake.
    assert _refused_handshake(pki, plain, with_certificate=True)
    client = tls_kazoo(pki, secure, "bob")
    try:
        assert client.get("/")[1] is not None
    finally:
        client.stop()
        client.close()


def test_the_brokers_zookeeper_client_over_tls(pki: Pki, tls_keeper: RoostProcess) -> None:
    config = BrokerConfig.build([("test", {
        "zookeeper.ssl.client.enable": True, "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": str(pki.keystores["alice"]),
        "zookeeper.ssl.truststore.location": str(pki.ca)})])

    async def scenario() -> bytes:
        async with ZkClient(tls_keeper.address("keeper secure"), ssl_context=client_ssl_context(config)) as zk:
            path = unique_root("broker-tls")
            await zk.create(path, b"over tls", acl=[ACL(Perms.ALL, "x509", pki.subjects["alice"])])
            data, _ = await zk.get(path)
            await zk.delete(path)
            return data

    assert asyncio.run(scenario()) == b"over tls"


def test_an_ensemble_on_mutual_tls(pki: Pki, tmp_path: Path) -> None:
    """sslQuorum: the members' Raft links are mutual TLS; writes replicate as usual, and a peer
    with a certificate from another CA (or none) cannot open a link."""
    settings = {"sslQuorum": True, "ssl.quorum.keyStore.location": str(pki.server),
                "ssl.quorum.trustStore.location": str(pki.ca)}
    with keeper_ensemble(tmp_path, 3, settings) as members:
        writer = kazoo(members[0].address("keeper"))
        reader = kazoo(members[2].address("keeper"))
        try:
            path = unique_root("quorum-tls")
            writer.create(path, b"replicated over TLS")
            reader.sync(path)
            assert reader.get(path)[0] == b"replicated over TLS"
        finally:
            for client in (writer, reader):
                client.stop()
                client.close()
        peer = re.search(r'server\.2 = "127\.0\.0\.1:(\d+)"', (tmp_path / "keeper1" / "keeper.toml").read_text())
        assert peer is not None
        # The peer port speaks TLS and takes a certificate of the ensemble's CA...
        member = ssl.create_default_context(cafile=str(pki.ca))
        member.check_hostname = False
        member.load_cert_chain(str(pki.keystores["alice"]))
        with socket.create_connection(("127.0.0.1", int(peer[1])), timeout=10) as raw, \
                member.wrap_socket(raw) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
        # ...and no other: a certificate from another CA, or none.
        stranger_ca = trustme.CA()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        stranger_ca.issue_cert("127.0.0.1").configure_cert(context)
        for certificate in (True, False):
            if not certificate:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            with socket.create_connection(("127.0.0.1", int(peer[1])), timeout=10) as raw:
                try:
                    with context.wrap_socket(raw) as tls:
                        tls.sendall(b"\x00" * 64)  # a hello would follow; TLS 1.3 refuses on read
                        assert _closed_by_server(tls)
                except (ssl.SSLError, OSError):
                    pass  # refused in the handshake
        check = kazoo(members[1].address("keeper"))
        try:
            assert check.get(path)[0] == b"replicated over TLS"
        finally:
            check.stop()
            check.close()


def test_a_keeper_for_tls_clients_only(pki: Pki, tmp_path: Path) -> None:
    config = keeper_config(tmp_path, client_port=-1, extra={
        "secureClientPort": 0, "ssl.keyStore.location": str(pki.server), "ssl.trustStore.location": str(pki.ca)})
    proc = start_roost(["keeper", "--config", str(config)], expect=("keeper secure",))
    try:
        assert "keeper" not in proc.listeners  # no plain port at all
        client = tls_kazoo(pki, proc.address("keeper secure"), "alice")
        try:
            assert client.get("/")[1] is not None
        finally:
            client.stop()
            client.close()
    finally:
        proc.stop()
