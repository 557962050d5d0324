"""What `roost up` tells its console beyond Kafka (roost.cli.servers.up_console.console_extras):
the brokers' plain-HTTP schema registry on a known port, and each broker's /metrics served
without TLS or a token; nothing it could not reach."""

from __future__ import annotations

from roost.cli.servers.up_command import plain_metrics
from roost.cli.servers.up_console import console_extras, loopback_url


def test_a_known_registry_and_metrics_ports_are_handed_on_as_loopback_urls():
    assert console_extras("http://0.0.0.0:8081", [("0.0.0.0", 9404), ("127.0.0.1", 9405)]) == [
        "--schema-registry", "http://127.0.0.1:8081",
        "--broker-metrics", "http://127.0.0.1:9404/metrics", "--broker-metrics", "http://127.0.0.1:9405/metrics"]
    assert loopback_url("http://10.0.0.5:8081") == "http://10.0.0.5:8081"


def test_what_the_console_could_not_reach_is_left_out():
    assert console_extras(None, [("127.0.0.1", -1)]) == []
    assert console_extras("http://127.0.0.1:0", []) == []  # a free port chosen later: unknown now
    assert console_extras("https://127.0.0.1:8081", []) == []  # TLS: the console has no CA for it
    assert plain_metrics({"metrics.port": 9404, "metrics.bearer.token": "${file:/t}"}) == ("", -1)
    assert plain_metrics({"metrics.port": 9404, "metrics.host": "0.0.0.0"}) == ("0.0.0.0", 9404)
    assert plain_metrics({}) == ("127.0.0.1", -1)
