"""The console of `roost up --security sasl_ssl`: it serves HTTPS with the node's development
certificate, asks for a login (the admin user, its password read from the password file by
reference), talks to the SASL_SSL broker as the admin, and the password shows nowhere: not in
pages, API answers, the node's output, nor the console process's command line. A real browser
(Playwright driving Debian's chromium) logs in and sees the topics. The same node serves
/metrics over TLS to scrapes with its bearer token only (metrics.bearer.token by reference)."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from roost.cli.servers.dev_security import prepare
from roost.console.login import FAILED_LOGIN_DELAY_S
from tests.console import screenshots
from tests.console.test_console_up import console_children
from tests.support.procs import RoostProcess, start_roost, wait_for

TOPIC = "secured-orders"
METRICS_TOKEN = "metrics-token-5b1e9c"


@dataclass
class Secured:
    node: RoostProcess
    directory: Path  # DATA_DIR/security
    password: str

    @property
    def console(self) -> str:
        return self.node.address("console")

    def request(self, method: str, path: str, headers: dict[str, str] | None = None,
                body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        """One HTTPS request, checked against the development CA; redirects are not followed."""
        host, port = self.console.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(self.directory / "ca.pem"))
        connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            answer = connection.getresponse()
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
        finally:
            connection.close()

    def basic(self, password: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"admin:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    data = tmp_path_factory.mktemp("secured-console")
    token_file = data / "metrics.token"
    token_file.write_text(METRICS_TOKEN + "\n")
    node = start_roost(["up", "--data-dir", str(data), "--host", "127.0.0.1", "--kafka-port", "0",
                        "--security", "sasl_ssl", "--console-port", "0", "--set", "metrics.port=0",
                        "--set", "metrics.bearer.token=${file:" + str(token_file) + "}",
                        "--set", f"metrics.ssl.keystore.location={data / 'security' / 'broker.pem'}"],
                       expect=("kafka", "console", "metrics"))
    try:
        security = prepare(data, "sasl_ssl", "127.0.0.1")
        assert security is not None
        config = {"bootstrap.servers": node.address("kafka"), **security.client_settings(with_password=True)}
        admin = AdminClient(config)  # held while its futures are waited on
        for future in admin.create_topics([NewTopic(TOPIC, 3, 1)], operation_timeout=30).values():
            future.result(60)
        producer = Producer(config)
        for index in range(5):
            producer.produce(TOPIC, json.dumps({"order": index}).encode())
        assert producer.flush(30) == 0
        yield Secured(node, security.directory, (security.directory / "admin.password").read_text().strip())
    finally:
        node.stop()


def test_without_a_login_nothing_but_the_login_form_is_served(secured: Secured) -> None:
    status, headers, body = secured.request("GET", "/api/topics")
    assert status == 401 and headers["www-authenticate"].startswith("Basic ")
    assert "log in" in json.loads(body)["error"]
    status, headers, _ = secured.request("GET", "/topics?search=x")
    assert status == 303 and headers["location"] == "/login?next=/topics%3Fsearch%3Dx"
    for method, path in (("POST", "/api/topics"), ("DELETE", f"/api/topics/{TOPIC}"), ("GET", "/api/overview")):
        assert secured.request(method, path, {"Content-Type": "application/json"}, b"{}")[0] == 401, path
    assert secured.request("GET", "/api/topics", secured.basic("not-the-password"))[0] == 401
    status, _, body = secured.request("GET", "/login")
    assert status == 200 and b'id="login-form"' in body


def test_a_wrong_password_is_refused_and_logged_without_it(secured: Secured) -> None:
    form = b"username=admin&password=guess-123&next=%2F"
    status, headers, body = secured.request("POST", "/login", {"Content-Type": "application/x-www-form-urlencoded"},
                                            form)
    assert status == 401 and "set-cookie" not in headers and b"Wrong user name or password" in body
    # The console's log line comes through roost up's relay a moment after the answer.
    wait_for(lambda: "failed login for user 'admin'" in secured.node.text(), 10, what="the refusal in the log")
    assert "guess-123" not in secured.node.text()
    # A login form posted from another site's page is refused whatever it carries.
    right = f"username=admin&password={secured.password}".encode()
    for where in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site", "Origin": "null"}):
        status, headers, _ = secured.request("POST", "/login", {
            "Content-Type": "application/x-www-form-urlencoded", **where}, right)
        assert status == 403 and "set-cookie" not in headers, where


def test_guesses_in_parallel_are_refused_one_after_another(secured: Secured) -> None:
    guesses = 4
    started = time.monotonic()
    with ThreadPoolExecutor(guesses) as pool:
        statuses = list(pool.map(lambda n: secured.request("GET", "/api/topics", secured.basic(f"guess-{n}"))[0],
                                 range(guesses)))
    assert statuses == [401] * guesses
    assert time.monotonic() - started >= guesses * FAILED_LOGIN_DELAY_S * 0.9
    assert secured.request("GET", "/api/topics", secured.basic(secured.password))[0] == 200


def test_basic_auth_reaches_the_sasl_ssl_cluster_as_the_admin(secured: Secured) -> None:
    status, _, body = secured.request("GET", "/api/topics", secured.basic(secured.password))
    assert status == 200, body
    assert TOPIC in [topic["name"] for topic in json.loads(body)["topics"]]
    for path in ("/api/overview", "/api/topics", f"/api/topics/{TOPIC}", "/", "/topics"):
        status, _, body = secured.request("GET", path, secured.basic(secured.password))
        assert status == 200, path
        assert secured.password.encode() not in body, path


def test_the_password_is_not_on_the_consoles_command_line_nor_in_the_output(secured: Secured) -> None:
    [console] = console_children(secured.node)
    command_line = Path(f"/proc/{console}/cmdline").read_bytes()
    assert b"--login-password" in command_line and b"${file:" in command_line
    assert secured.password.encode() not in command_line
    assert secured.password not in secured.node.text()
    assert "console at https://" in secured.node.text() and "log in as admin" in secured.node.text()


def test_a_browser_logs_in_and_sees_the_topics_of_the_sasl_ssl_node(secured: Secured, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 720}, ignore_https_errors=True)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"https://{secured.console}/topics", timeout=30_000)
        assert "/login?next=/topics" in page.url
        page.fill("#username", "admin")
        page.fill("#password", "not-it")
        page.click("#log-in")
        page.wait_for_selector("#login-error", timeout=10_000)
        page.screenshot(path=str(screenshots.output_dir() / "console-login.png"))
        page.fill("#username", "admin")
        page.fill("#password", secured.password)
        page.click("#log-in")
        page.wait_for_url(f"https://{secured.console}/topics", timeout=15_000)
        row = page.wait_for_selector(f"#topics tbody tr >> text={TOPIC}", timeout=30_000)
        assert row is not None
        [cookie] = context.cookies()
        assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
        assert secured.password not in page.content()
        page.screenshot(path=str(screenshots.output_dir() / "console-secured-topics.png"))
        page.click("#log-out")
        page.wait_for_url("**/login", timeout=10_000)
        assert page.request.get(f"https://{secured.console}/api/topics").status == 401
    finally:
        context.close()
    assert not errors, errors


def test_metrics_need_tls_and_the_bearer_token(secured: Secured) -> None:
    host, port = secured.node.address("metrics").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(secured.directory / "ca.pem"))

    def scrape(headers: dict[str, str]) -> tuple[int, bytes]:
        connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
        try:
            connection.request("GET", "/metrics", headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read()
        finally:
            connection.close()

    status, body = scrape({})
    assert status == 401 and b"kafka_server" not in body
    assert scrape({"Authorization": "Bearer guess"})[0] == 401
    status, body = scrape({"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert status == 200 and b"kafka_server_replicamanager_partitioncount" in body
    assert secured.password.encode() not in body and METRICS_TOKEN.encode() not in body
    wait_for(lambda: "refused a scrape" in secured.node.text(), 10, what="the refusal in the log")
    assert METRICS_TOKEN not in secured.node.text()
