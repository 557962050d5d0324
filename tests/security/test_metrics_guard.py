"""A guarded /metrics (roost.metrics.endpoint with a bearer token and TLS): the real endpoint on
a loopback port, scraped with urllib as Prometheus would. Without the token (or with a wrong one,
or the wrong scheme) the answer is 401 and carries no metric; with it, the metrics; plain HTTP to
the TLS port gets nothing; the token never reaches the log."""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from prometheus_client import CollectorRegistry, Counter

from roost.metrics.endpoint import MetricsEndpoint

TOKEN = "scrape-token-7f3a"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def served(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """https://127.0.0.1:PORT of an endpoint that needs TOKEN, and the CA file to trust it with."""
    where = tmp_path_factory.mktemp("metrics-guard")
    ca_file = where / "ca.pem"
    ca.cert_pem.write_to_path(ca_file)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    registry = CollectorRegistry()
    Counter("roost_guard_test", "a series to find", registry=registry).inc()
    loop = asyncio.new_event_loop()
    endpoint = MetricsEndpoint([registry], TOKEN, context)
    host, port = loop.run_until_complete(endpoint.start("127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"https://{host}:{port}", ca_file
    finally:
        asyncio.run_coroutine_threadsafe(endpoint.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def scrape(url: str, ca_file: Path, authorization: str | None) -> tuple[int, str, str | None]:
    request = urllib.request.Request(url + "/metrics")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    context = ssl.create_default_context(cafile=str(ca_file))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, answer.read().decode(), None
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers.get("WWW-Authenticate")


def test_without_the_token_a_scrape_gets_401_and_no_metric(served: tuple[str, Path],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    url, ca_file = served
    caplog.set_level(logging.WARNING, logger="roost.console.metrics")
    for authorization in (None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer "):
        status, body, challenge = scrape(url, ca_file, authorization)
        assert status == 401, authorization
        assert "roost_guard_test" not in body and challenge is not None and challenge.startswith("Bearer")
    assert "refused a scrape" in caplog.text
    assert TOKEN not in caplog.text


def test_with_the_token_a_scrape_gets_the_metrics(served: tuple[str, Path]) -> None:
    url, ca_file = served
    status, body, _ = scrape(url, ca_file, f"Bearer {TOKEN}")
    assert status == 200 and "roost_guard_test_total 1.0" in body
    assert TOKEN not in body


def test_plain_http_to_the_tls_port_gets_nothing(served: tuple[str, Path]) -> None:
    url, _ = served
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)), \
            urllib.request.urlopen(url.replace("https:", "http:") + "/metrics", timeout=10) as answer:
        answer.read()


def test_the_keepers_metrics_guard_in_zookeepers_names(ca: trustme.CA, tmp_path: Path) -> None:
    from roost.keeper.config import ConfigError, KeeperConfig

    pem = tmp_path / "keeper.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(pem)
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = KeeperConfig.from_mapping({"dataDir": str(tmp_path), "metricsProvider": {
        "httpsPort": 0, "ssl": {"keyStore": {"location": str(pem)}}, "bearerToken": "${file:" + str(tmp_path / "token") + "}"}})
    assert config.metrics_port == 0 and config.metrics_tls is not None and config.metrics_tls.key_store == str(pem)
    assert config.metrics_token == TOKEN and TOKEN not in repr(config)
    for bad, named in (({"httpsPort": 0}, "keyStore.location"),
                       ({"httpPort": 1, "httpsPort": 2, "ssl.keyStore.location": str(pem)}, "httpsPort"),
                       ({"ssl.keyStore.location": str(pem)}, "needs 'metricsProvider.httpsPort'"),
                       ({"bearerToken": "${env:ROOST_TEST_SURELY_UNSET_VARIABLE}"}, "bearerToken"),
                       ({"bearerToken": "  "}, "the token is empty")):
        with pytest.raises(ConfigError, match=named):
            KeeperConfig.from_mapping({"dataDir": str(tmp_path), **{f"metricsProvider.{k}": v for k, v in bad.items()}})
