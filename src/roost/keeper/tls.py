"""TLS for the keeper, from ZooKeeper-named settings (`roost.keeper.config.TlsFiles`): the client
port's server context, the members' mutual-TLS contexts, and the `x509` id of a client
certificate (ZooKeeper's X509AuthenticationProvider: the subject's distinguished name)."""

from __future__ import annotations

import ssl

from cryptography import x509

from roost.keeper.config import TlsFiles
from roost.wire.zk.records import Id

_VERIFY = {"need": ssl.CERT_REQUIRED, "want": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def server_context(tls: TlsFiles) -> ssl.SSLContext:
    """TLS 1.2+; client certificates checked against the trust store as `ssl.clientAuth` says."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.key_store, password=tls.key_password or None)
    context.verify_mode = _VERIFY[tls.client_auth]
    if tls.client_auth != "none":
        if tls.trust_store:
            context.load_verify_locations(tls.trust_store)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def peer_client_context(tls: TlsFiles) -> ssl.SSLContext:
    """A member dialling another: it presents its own certificate and checks the other's against
    the trust store (by CA, not by host name: members are named by id, and their certificates
    are issued for the ensemble)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(tls.key_store, password=tls.key_password or None)
    if tls.trust_store:
        context.load_verify_locations(tls.trust_store)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return context


def x509_id(ssl_object: ssl.SSLObject | None) -> Id | None:
    """The `x509` id of the certificate a client presented (None without one)."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    return Id("x509", subject)
