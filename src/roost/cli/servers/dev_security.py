"""`roost up --security MODE`: a secured node or cluster for development in one flag.

MODE is ssl, sasl_plaintext or sasl_ssl (plaintext: the default, nothing to do). In
DATA_DIR/security it makes, once, a throw-away certificate authority and a broker certificate for
localhost, 127.0.0.1 and --host (with `cryptography`), a first admin user with a random password
(a PLAIN user of the listener's JAAS login, also the brokers' own inter-broker login, and the
web console's login; the console serves HTTPS with the broker certificate when TLS is on), and a
client properties file that kcat (`-F`) and librdkafka-style clients read. The broker settings
only *point* at those files (`${file:...}`), so neither `roost up`'s output nor the brokers'
config files hold the password. Not for production: the CA key is kept beside the data.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

MODES = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
ADMIN_USER = "admin"
VALID_DAYS = 365


@dataclass(frozen=True)
class DevSecurity:
    protocol: str  # SSL, SASL_PLAINTEXT or SASL_SSL: the listener's name and protocol
    directory: Path
    settings: dict[str, str]  # broker settings every broker shares

    @property
    def tls(self) -> bool:
        return "SSL" in self.protocol

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    @property
    def admin_user(self) -> str:
        return ADMIN_USER

    def listener(self, host_port: str) -> str:
        return f"{self.protocol}://{host_port}"

    def client_settings(self, with_password: bool) -> dict[str, str]:
        settings = {"security.protocol": self.protocol.lower()}
        if self.tls:
            settings["ssl.ca.location"] = str(self.directory / "ca.pem")
        if self.sasl:
            settings.update({"sasl.mechanism": "PLAIN", "sasl.username": ADMIN_USER})
            settings["sasl.password"] = (self.directory / "admin.password").read_text().strip() if with_password \
                else f'"$(cat {self.directory / "admin.password"})"'
        return settings

    def hints(self, bootstrap: str) -> list[str]:
        """How to connect, for roost up's output: paths, never the password."""
        lines = [f"roost: security {self.protocol.lower()}: files in {self.directory}"
                 + (f"; CA certificate {self.directory / 'ca.pem'}" if self.tls else "")
                 + f"; user {ADMIN_USER} (the console's login" + (" and a SASL user" if self.sasl else "")
                 + f"), password in {self.directory / 'admin.password'}"]
        flags = " ".join(f"-X {key}={value}" for key, value in self.client_settings(with_password=False).items())
        lines.append(f"roost: kcat -F {self.directory / 'client.properties'} -b {bootstrap} -L")
        lines.append(f"roost: roost topic list -b {bootstrap} {flags}")
        return lines


def _private_write(path: Path, data: bytes) -> None:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:
        handle.write(data)


def _make_certificates(directory: Path, hosts: list[str]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Roost development CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "roost-broker")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    _private_write(directory / "ca-key.pem", ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                                  serialization.NoEncryption()))
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    _private_write(directory / "broker.pem", key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption())
                   + leaf.public_bytes(pem) + ca.public_bytes(pem))


def prepare(data_dir: Path, mode: str, host: str) -> DevSecurity | None:
    """The secured set-up of `mode` in DATA_DIR/security (made on first use, then reused); None
    for plaintext."""
    assert mode in MODES, mode
    if mode == "plaintext":
        return None
    protocol = mode.upper()
    directory = (data_dir / "security").absolute()
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    settings = {"listener.security.protocol.map": f"{protocol}:{protocol}",
                "inter.broker.listener.name": protocol}
    if "SSL" in protocol:
        if not (directory / "broker.pem").exists():
            _make_certificates(directory, ["localhost", "127.0.0.1", "::1", *([host] if host not in ("0.0.0.0", "::") else [])])
        settings.update({"ssl.keystore.location": str(directory / "broker.pem"),
                         "ssl.truststore.location": str(directory / "ca.pem")})
    # The admin's password: the console's login in every mode, and the SASL login of its clients.
    password_file = directory / "admin.password"
    if not password_file.exists():
        _private_write(password_file, secrets.token_urlsafe(18).encode())
    if protocol.startswith("SASL"):
        password = password_file.read_text().strip()
        # The admin is a PLAIN user of the listener and the brokers' own inter-broker login.
        _private_write(directory / "jaas.conf", (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{ADMIN_USER}" password="{password}" user_{ADMIN_USER}="{password}";').encode())
        settings.update({"sasl.jaas.config": "${file:" + str(directory / "jaas.conf") + "}",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    security = DevSecurity(protocol, directory, settings)
    _private_write(directory / "client.properties", "".join(
        f"{key}={value}\n" for key, value in security.client_settings(with_password=True).items()).encode())
    return security
