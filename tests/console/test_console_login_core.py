"""The console's login core (roost.console.login) and its keeper identity
(roost.console.keeper_identity), without a server: which credentials pass, how sessions expire
and are bounded, where a login may send the browser next."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import pytest

from roost.console.keeper_identity import kazoo_identity
from roost.console.login import MAX_SESSIONS, LoginGate, safe_next
from roost.console.settings import Login


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate(clock: Clock | None = None) -> LoginGate:
    return LoginGate(Login("ops", "s3cret-pw", session_s=60.0), clock or Clock())


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_only_the_user_with_its_password_passes() -> None:
    checks = gate()
    assert checks.password_ok("ops", "s3cret-pw")
    for user, password in (("ops", "wrong"), ("other", "s3cret-pw"), ("", ""), ("ops", "s3cret-pw" + "x" * 2000),
                           ("ops", "s3cret-p"), ("OPS", "s3cret-pw")):
        assert not checks.password_ok(user, password), (user, password)


def test_basic_auth_passes_with_the_password_only() -> None:
    checks = gate()
    assert checks.basic_ok(basic("ops", "s3cret-pw"))
    assert checks.basic_ok("basic " + basic("ops", "s3cret-pw").split()[1])  # the scheme in any case
    for header in (None, "", basic("ops", "nope"), basic("x", "s3cret-pw"), "Bearer s3cret-pw", "Basic !!!",
                   "Basic " + base64.b64encode(b"ops-s3cret-pw").decode(), "Basic " + "A" * 10000):
        assert not checks.basic_ok(header), header


def test_a_session_lasts_its_time_and_ends_at_logout() -> None:
    clock = Clock()
    checks = gate(clock)
    token = checks.open_session()
    assert checks.session_ok(token)
    assert not checks.session_ok(token + "x") and not checks.session_ok(None) and not checks.session_ok("")
    clock.now += 59
    assert checks.session_ok(token)
    clock.now += 2
    assert not checks.session_ok(token)
    other = checks.open_session()
    checks.close_session(other)
    assert not checks.session_ok(other)


def test_sessions_are_bounded() -> None:
    clock = Clock()
    checks = gate(clock)
    first = checks.open_session()
    for _ in range(MAX_SESSIONS + 10):
        clock.now += 0.001
        checks.open_session()
    assert checks.sessions == MAX_SESSIONS
    assert not checks.session_ok(first)  # the oldest went first


@pytest.mark.parametrize(("asked", "sent"), [
    ("/topics", "/topics"), ("/topics?search=a", "/topics?search=a"), (None, "/"), ("", "/"),
    ("https://evil.example/", "/"), ("//evil.example/x", "/"), ("/\\evil.example", "/"), ("topics", "/")])
def test_a_login_sends_the_browser_to_this_console_only(asked: str | None, sent: str) -> None:
    assert safe_next(asked) == sent


def test_the_keeper_identity_in_kafkas_names() -> None:
    assert kazoo_identity({}) == {}
    assert kazoo_identity({"zookeeper.digest": "kafka:pw"}) == {"auth_data": [("digest", "kafka:pw")]}
    sasl = kazoo_identity({"zookeeper.sasl.client.username": "kafka", "zookeeper.sasl.client.password": "pw"})
    assert sasl == {"sasl_options": {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "pw"}}
    tls = kazoo_identity({"zookeeper.ssl.client.enable": "true", "zookeeper.ssl.truststore.location": "/ca.pem",
                          "zookeeper.ssl.keystore.location": "/me.pem"})
    assert tls["use_ssl"] and tls["verify_certs"] and tls["check_hostname"]
    assert (tls["ca"], tls["certfile"], tls["keyfile"]) == ("/ca.pem", "/me.pem", "/me.pem")


@pytest.mark.parametrize("settings", [
    {"zookeeper.sasl.client.usrname": "kafka"},  # misspelt: refused, not ignored
    {"zookeeper.sasl.client.username": "kafka"},  # no password
    {"zookeeper.digest": "no-colon"},
    {"zookeeper.ssl.keystore.type": "PKCS12"}])
def test_a_bad_keeper_setting_is_refused_naming_it_never_its_value(settings: dict[str, str]) -> None:
    with pytest.raises(ValueError) as refused:
        kazoo_identity(settings)
    assert "zookeeper." in str(refused.value)
    assert all(value not in str(refused.value) for value in settings.values() if value not in ("kafka",))


@pytest.mark.parametrize("mode", ["ssl", "sasl_ssl"])
def test_roost_up_hands_its_console_references_never_the_password(mode: str, tmp_path: Path) -> None:
    from roost.cli.servers.dev_security import prepare
    from roost.cli.servers.up_console import console_security

    security = prepare(tmp_path, mode, "127.0.0.1")
    assert security is not None
    password = (security.directory / "admin.password").read_text().strip()
    client, flags = console_security(argparse.Namespace(dev_security=security))
    reference = "${file:" + str(security.directory / "admin.password") + "}"
    assert client["security.protocol"] == mode and client["ssl.ca.location"].endswith("ca.pem")
    assert client.get("sasl.password", reference) == reference
    assert flags[:4] == ["--login-user", "admin", "--login-password", reference]
    assert flags[4:] == ["--tls-cert", str(security.directory / "broker.pem")]
    assert password not in repr((client, flags))
    assert console_security(argparse.Namespace(dev_security=None)) == ({}, [])


def test_roost_console_takes_settings_and_login_from_a_profile(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from roost.cli.client.client_options import CliError
    from roost.cli.servers.console_command import console_settings

    (tmp_path / "login.password").write_text("from-a-file\n")
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(f"""
[prod]
bootstrap = "kafka1:9093"
zookeeper = "zk1:2182"
[prod.settings]
"security.protocol" = "sasl_ssl"
"sasl.password" = "${{env:TEST_CONSOLE_PROFILE_PASSWORD}}"
"zookeeper.sasl.client.username" = "console"
"zookeeper.sasl.client.password" = "zk-secret"
[prod.console]
login-user = "ops"
login-password = "${{file:{tmp_path / 'login.password'}}}"
tls-cert = "/etc/roost/console.pem"
""")
    monkeypatch.setenv("ROOST_PROFILES_FILE", str(profiles))
    monkeypatch.setenv("TEST_CONSOLE_PROFILE_PASSWORD", "kafka-secret")
    settings = console_settings(None, None, ("client.id=ops-console",), "prod", "0.0.0.0", 0, False,
                                None, None, None, None)
    assert (settings.bootstrap, settings.zookeeper) == ("kafka1:9093", "zk1:2182")
    assert settings.client_settings == {"security.protocol": "sasl_ssl", "sasl.password": "kafka-secret",
                                        "client.id": "ops-console"}
    assert settings.keeper_settings == {"zookeeper.sasl.client.username": "console",
                                        "zookeeper.sasl.client.password": "zk-secret"}
    assert settings.login is not None and (settings.login.username, settings.login.password) == ("ops", "from-a-file")
    assert settings.tls is not None and str(settings.tls.certificate) == "/etc/roost/console.pem"
    assert "kafka-secret" not in repr(settings) and "from-a-file" not in repr(settings)
    with pytest.raises(CliError, match="--login-user and --login-password go together"):
        console_settings("k:9092", None, (), None, "127.0.0.1", 0, False, "ops", None, None, None)
    with pytest.raises(CliError, match="unknown keeper setting"):
        console_settings("k:9092", None, ("zookeeper.sasl.usr=x",), None, "127.0.0.1", 0, False, None, None, None, None)
