"""The console's JSON API against a real three-broker, three-keeper cluster, without a browser."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
import uuid
from email.message import Message

import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient

from roost.console.browse import Browser, BrowseRequest
from roost.console.context import Console
from roost.console.kafka_side import KafkaSide
from roost.console.settings import Bounds, ConsoleSettings
from tests.console.conftest import ConsoleProcess
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 4 * 1024 * 1024})
    for value in values:
        producer.produce(topic, value=value, **({} if partition is None else {"partition": partition}))
    assert producer.flush(30) == 0


def test_overview_shows_three_brokers_the_controller_and_the_keeper_roles(console: ConsoleProcess,
                                                                          console_cluster: LocalCluster) -> None:
    overview = console.get("/api/overview")
    assert [b["id"] for b in overview["brokers"]] == [1, 2, 3]
    assert all(b["up"] for b in overview["brokers"])
    assert overview["controller"] == console_cluster.controller()
    roles = sorted(member["role"] for member in overview["keepers"])
    assert roles == ["follower", "follower", "leader"]


def test_topic_create_describe_change_produce_browse_search_and_delete(console: ConsoleProcess) -> None:
    topic = unique("api")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 2, "replication": 3,
                                                "configs": {"retention.ms": "3600000"}}).status == 201
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 2}).status == 409
    described = console.get(f"/api/topics/{topic}")
    assert [p["partition"] for p in described["partitions"]] == [0, 1]
    assert all(sorted(p["replicas"]) == [1, 2, 3] for p in described["partitions"])
    assert {c["name"]: c["value"] for c in described["configs"]}["retention.ms"] == "3600000"

    assert console.call("PUT", f"/api/topics/{topic}/configs", {"set": {"retention.ms": "7200000"}}).status == 200
    configs = {c["name"]: c["value"] for c in console.get(f"/api/topics/{topic}")["configs"]}
    assert configs["retention.ms"] == "7200000"
    assert console.call("POST", f"/api/topics/{topic}/partitions", {"total": 3}).status == 200
    # Each Metadata answer comes from whichever broker is asked; they learn of the change in turn.
    wait_for(lambda: len(console.get(f"/api/topics/{topic}")["partitions"]) == 3, 30, what="three partitions")

    for index in range(6):
        answer = console.call("POST", f"/api/topics/{topic}/messages",
                              {"key": f"k{index}", "value": f"value number {index}", "partition": index % 3,
                               "headers": [{"key": "trace", "value": f"t-{index}"}]})
        assert answer.status == 201, answer
        assert answer.body["partition"] == index % 3
    newest = console.get(f"/api/topics/{topic}/messages?start=newest&limit=4")
    assert len(newest["messages"]) == 4
    assert [m["value"]["text"] for m in newest["messages"]] == [f"value number {i}" for i in (5, 4, 3, 2)]
    oldest = console.get(f"/api/topics/{topic}/messages?start=oldest&limit=2&partition=1")
    assert [(m["partition"], m["offset"]) for m in oldest["messages"]] == [(1, 0), (1, 1)]
    from_offset = console.get(f"/api/topics/{topic}/messages?start=offset&position=1&partition=2")
    assert [m["key"]["text"] for m in from_offset["messages"]] == ["k5"]

    found = console.get(f"/api/topics/{topic}/messages?search=number%203&start=oldest")
    assert [m["key"]["text"] for m in found["messages"]] == ["k3"]
    by_header = console.get(f"/api/topics/{topic}/messages?search=t-4&search_in=headers")
    assert [m["key"]["text"] for m in by_header["messages"]] == ["k4"]
    assert console.get(f"/api/topics/{topic}/messages?search=t-4&search_in=value")["messages"] == []

    listed = console.get(f"/api/topics?search={topic[-8:]}")
    assert [t["name"] for t in listed["topics"]] == [topic]

    refused = console.call("DELETE", f"/api/topics/{topic}", {"confirm": "something else"})
    assert refused.status == 400 and "typed again" in refused.body["error"]
    assert console.call("DELETE", f"/api/topics/{topic}", {"confirm": topic}).status == 200
    assert console.call("GET", f"/api/topics/{topic}").status == 404


def test_topic_list_pages_on_the_server(console: ConsoleProcess) -> None:
    prefix = unique("paged")
    for index in range(5):
        assert console.call("POST", "/api/topics", {"name": f"{prefix}-{index}", "partitions": 1,
                                                    "replication": 1}).status == 201
    first = console.get(f"/api/topics?search={prefix}&size=2&page=1")
    last = console.get(f"/api/topics?search={prefix}&size=2&page=3")
    assert (first["total"], first["pages"]) == (5, 3)
    assert [t["name"] for t in first["topics"]] == [f"{prefix}-0", f"{prefix}-1"]
    assert [t["name"] for t in last["topics"]] == [f"{prefix}-4"]


RECORDS, VALUE_BYTES = 200, 1000


def test_a_topics_size_grows_by_what_was_produced_and_its_rates_show_it(console: ConsoleProcess,
                                                                       console_cluster: LocalCluster) -> None:
    topic = unique("sized")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 2, "replication": 3}).status == 201
    wait_for(lambda: console.get(f"/api/topics?search={topic}")["topics"][0]["size"] is not None, 30,
             what="the new topic's first size sample")
    before = console.get(f"/api/topics?search={topic}")["topics"][0]["size"]
    # A list, never empty, so that a cluster of 0 bytes counts as answered.
    (cluster_before,) = wait_for(lambda: [size for size in [console.get("/api/overview")["size"]] if size is not None],
                                 30, what="the cluster's size")

    produce(console_cluster.bootstrap, topic, [bytes([index % 256]) * VALUE_BYTES for index in range(RECORDS)])

    def grown() -> dict | None:
        (row,) = console.get(f"/api/topics?search={topic}")["topics"]
        return row if row["size"] >= before + RECORDS * VALUE_BYTES and (row["bytes_per_second"] or 0) > 0 else None

    row = wait_for(grown, 30, interval=0.2, what=f"{topic} {RECORDS * VALUE_BYTES} bytes bigger, bytes/s above 0")
    assert row["messages_per_second"] is not None and row["messages_per_second"] > 0, row
    partitions = console.get(f"/api/topics/{topic}")["partitions"]
    assert sum(p["size"] for p in partitions) >= before + RECORDS * VALUE_BYTES, partitions

    def cluster_grown() -> dict | None:
        overview = console.get("/api/overview")
        return overview if overview["size"] is not None and overview["size"] >= cluster_before + RECORDS * VALUE_BYTES \
            and (overview["bytes_per_second"] or 0) > 0 else None

    overview = wait_for(cluster_grown, 30, interval=0.2, what="the cluster's size grown and bytes/s above 0")
    assert overview["sizes_known"] and overview["bytes_history"]["v"], overview
    assert console.call("DELETE", f"/api/topics/{topic}", {"confirm": topic}).status == 200


def test_tail_returns_what_came_after_the_positions_it_gave(console: ConsoleProcess,
                                                           console_cluster: LocalCluster) -> None:
    topic = unique("tail")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 2}).status == 201
    produce(console_cluster.bootstrap, topic, [b"before"], partition=0)
    start = console.get(f"/api/topics/{topic}/tail")
    assert start["messages"] == [] and start["next"] == {"0": 1, "1": 0}
    produce(console_cluster.bootstrap, topic, [b"after-0"], partition=0)
    produce(console_cluster.bootstrap, topic, [b"after-1"], partition=1)
    after = urllib.parse.quote(json.dumps(start["next"]))
    tailed = console.get(f"/api/topics/{topic}/tail?after={after}")
    assert sorted(m["value"]["text"] for m in tailed["messages"]) == ["after-0", "after-1"]
    assert tailed["next"] == {"0": 2, "1": 1}


def test_a_browse_stops_at_its_bounds_and_says_which(console_cluster: LocalCluster) -> None:
    topic = unique("bounded")
    settings = ConsoleSettings(bootstrap=console_cluster.bootstrap)
    kafka = KafkaSide(settings)
    kafka.create_topic(topic, 1, 1, {})
    produce(console_cluster.bootstrap, topic, [f"record {i}".encode() for i in range(50)])
    browser = Browser(kafka, Bounds(max_scan_messages=10))
    answer = browser.browse(BrowseRequest(topic, start="oldest", search="no such text"))
    assert answer["messages"] == []
    assert answer["bounds_hit"] == ["max_scan_messages"]
    assert answer["scanned"] == 10
    cut = Browser(kafka, Bounds(display_bytes=8)).browse(BrowseRequest(topic, start="oldest", limit=1))
    shown = cut["messages"][0]["value"]
    assert (shown["text"], shown["size"], shown["truncated"]) == ("record 0", 8, False)
    longer = Browser(kafka, Bounds(display_bytes=4)).browse(BrowseRequest(topic, start="oldest", limit=1))
    assert (longer["messages"][0]["value"]["text"], longer["messages"][0]["value"]["truncated"]) == ("reco", True)


def test_keeper_node_create_set_with_version_check_and_delete(console: ConsoleProcess,
                                                             console_cluster: LocalCluster) -> None:
    path = f"/{unique('console')}"
    assert console.call("POST", "/api/keeper/node", {"path": path, "data": "one"}).status == 201
    node = console.get(f"/api/keeper/node?path={path}")
    assert node["data"]["text"] == "one" and node["stat"]["version"] == 0
    assert console.call("PUT", "/api/keeper/node", {"path": path, "data": "two", "version": 0}).status == 200
    stale = console.call("PUT", "/api/keeper/node", {"path": path, "data": "three", "version": 0})
    assert stale.status == 409 and "changed since version 0" in stale.body["error"]
    keeper = KazooClient(hosts=console_cluster.zookeeper)
    keeper.start(timeout=15)
    try:
        assert keeper.get(path)[0] == b"two"
    finally:
        keeper.stop()
        keeper.close()
    assert console.call("DELETE", "/api/keeper/node", {"path": path, "version": 1}).status == 400  # no confirm
    assert console.call("DELETE", "/api/keeper/node", {"path": path, "version": 1, "confirm": True}).status == 200
    assert console.call("GET", f"/api/keeper/node?path={path}").status == 404
    assert console.call("GET", "/api/keeper/node?path=/a/../b").status == 400


def test_read_only_console_refuses_every_change(read_only_console: ConsoleProcess, console: ConsoleProcess) -> None:
    topic = unique("ro")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 1}).status == 201
    changes = [("POST", "/api/topics", {"name": unique("ro-new")}),
               ("POST", f"/api/topics/{topic}/messages", {"value": "x"}),
               ("PUT", f"/api/topics/{topic}/configs", {"set": {"retention.ms": "1"}}),
               ("POST", f"/api/topics/{topic}/partitions", {"total": 2}),
               ("DELETE", f"/api/topics/{topic}", {"confirm": topic}),
               ("POST", "/api/groups/g/reset", {"to": "start", "confirm": True}),
               ("POST", "/api/keeper/node", {"path": "/ro", "data": ""}),
               ("PUT", "/api/keeper/node", {"path": "/ro", "data": "", "version": 0}),
               ("DELETE", "/api/keeper/node", {"path": "/ro", "version": 0, "confirm": True})]
    for method, path, body in changes:
        answer = read_only_console.call(method, path, body)
        assert answer.status == 403, (method, path, answer)
        assert "read-only" in answer.body["error"]
    # Reads still work (once the broker this console asks has heard of the topic).
    wait_for(lambda: read_only_console.call("GET", f"/api/topics/{topic}").status == 200, 30,
             what=f"{topic} seen by the read-only console")
    assert read_only_console.get("/api/topics/" + topic + "/messages")["messages"] == []


def test_writes_must_be_json_and_come_through_a_local_host_name(console: ConsoleProcess) -> None:
    form = console.call("POST", "/api/topics", raw=b"name=evil", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status == 415
    rebound = console.call("GET", "/api/overview", headers={"Host": "attacker.example:80"})
    assert rebound.status == 421


def test_browse_from_a_timestamp_starts_at_the_first_record_at_or_after_it(console: ConsoleProcess,
                                                                          console_cluster: LocalCluster) -> None:
    topic = unique("timed")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 1}).status == 201
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    for index, stamp in enumerate((1_700_000_000_000, 1_700_000_001_000, 1_700_000_002_000)):
        producer.produce(topic, value=f"at {index}".encode(), timestamp=stamp)
    assert producer.flush(30) == 0
    answer = console.get(f"/api/topics/{topic}/messages?start=timestamp&position=1700000000500")
    assert [m["value"]["text"] for m in answer["messages"]] == ["at 1", "at 2"]
    assert answer["messages"][0]["timestamp"] == 1_700_000_001_000


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_reset_is_refused_while_the_group_has_a_live_member(console: ConsoleProcess, console_cluster: LocalCluster,
                                                              protocol: str) -> None:
    """Either kind of group (classic, or KIP-848's consumer protocol) is shown with its state,
    member and assignment, and protected from a reset while it has a live member."""
    topic, group = unique("live"), unique("live-group")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 1}).status == 201
    # KIP-848 members take their session timeout from the broker (a client value is refused).
    session = {"session.timeout.ms": 6000} if protocol == "classic" else {}
    consumer = Consumer({"bootstrap.servers": console_cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "group.protocol": protocol, **session,
                         # The broker it asks may not know the new topic yet: ask again soon, not in 5 min.
                         "topic.metadata.refresh.interval.ms": 500})
    try:
        consumer.subscribe([topic])

        def assigned() -> bool:
            consumer.poll(0.2)  # the group protocol runs inside poll
            return bool(consumer.assignment())

        wait_for(assigned, 30, what="an assignment")

        def stable() -> dict | None:
            consumer.poll(0.1)  # a live member keeps polling (its heartbeats)
            found = console.get(f"/api/groups/{group}")
            return found if found["state"] == "stable" and len(found["members"]) == 1 else None

        described = wait_for(stable, 30, what=f"{group} stable with one member, as the console tells it")
        assert described["members"][0]["assignment"] == [{"topic": topic, "partition": 0}]
        for path in (f"/api/groups/{group}/reset-preview", f"/api/groups/{group}/reset"):
            refused = console.call("POST", path, {"to": "start", "topics": [topic], "confirm": True})
            assert refused.status == 409, refused
            assert "live member" in refused.body["error"]
    finally:
        consumer.close()


def test_answers_carry_a_content_security_policy_allowing_only_the_consoles_own_scripts(
        console: ConsoleProcess) -> None:
    with urllib.request.urlopen(console.url + "/", timeout=30) as response:
        policy = response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy


def headers_of(url: str) -> tuple[bytes, Message]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read(), response.headers


def test_static_files_named_by_their_content_are_kept_for_good_and_others_revalidated(console: ConsoleProcess) -> None:
    shell, headers = headers_of(console.url + "/")
    assert headers["Server-Timing"].startswith("app;dur="), headers  # the console's share of the answer
    named = re.findall(r'(?:href|src)="(/static/[^"?]+)\?v=([^"]+)"', shell.decode())
    assert {path for path, _ in named} == {"/static/console.css", "/static/uplot.min.css", "/static/console.js"}
    for path, version in named:
        body, headers = headers_of(f"{console.url}{path}?v={version}")
        assert headers["Cache-Control"] == "public, max-age=31536000, immutable", path
        assert headers["Content-Security-Policy"] and "Server-Timing" not in headers
        for other in (path, f"{path}?v=not-its-hash"):  # an old page's URL: the browser asks again
            assert headers_of(console.url + other)[1]["Cache-Control"] == "no-cache", other
        if path.endswith(".js"):  # the chart chunk, loaded by the script, is named by esbuild's content hash
            (chunk,) = re.findall(r'import\("\./(chunks/charts-[A-Z0-9]+\.js)"\)', body.decode())
            chunk_body, chunk_headers = headers_of(f"{console.url}/static/{chunk}")
            assert chunk_headers["Cache-Control"] == "public, max-age=31536000, immutable"
            assert b"lineChart" in chunk_body and chunk_headers["Content-Type"].endswith("/javascript")


def test_the_first_answer_a_shell_carries_is_escaped_json() -> None:
    console = Console(ConsoleSettings(bootstrap="127.0.0.1:9"))  # never connects: the answer is given
    hostile = {"detail": "</script><script>alert(1)</script> & 'quoted' <!--"}
    try:
        html = console.page("overview.html", "Overview", {"path": "/api/overview", "answer": hostile}).text
    finally:
        console.pool.shutdown()
    assert html is not None
    (block,) = re.findall(r'<script type="application/json" id="first-answer">(.*?)</script>', html, re.DOTALL)
    assert "<" not in block and ">" not in block
    assert json.loads(block) == {"path": "/api/overview", "answer": hostile}


def test_a_search_from_the_newest_spends_its_bound_on_the_newest_records(console_cluster: LocalCluster) -> None:
    topic = unique("newest-search")
    kafka = KafkaSide(ConsoleSettings(bootstrap=console_cluster.bootstrap))
    kafka.create_topic(topic, 1, 1, {})
    produce(console_cluster.bootstrap, topic, [f"{i:04d}".encode() + b"." * 96 for i in range(999)] + [b"the needle"])
    # 20 KB of scanning covers the newest 200 records, not the whole 100 KB topic.
    browser = Browser(kafka, Bounds(max_scan_bytes=20_000))
    found = browser.browse(BrowseRequest(topic, start="newest", search="needle"))
    assert [m["offset"] for m in found["messages"]] == [999]
    missing = browser.browse(BrowseRequest(topic, start="newest", search="0001"))
    assert missing["messages"] == [] and missing["bounds_hit"] == ["max_scan_bytes"]
    assert missing["scanned_bytes"] <= 20_000 + 100


def test_a_search_from_the_oldest_reads_past_the_first_page_to_the_log_end(console_cluster: LocalCluster) -> None:
    topic = unique("oldest-search")
    kafka = KafkaSide(ConsoleSettings(bootstrap=console_cluster.bootstrap))
    kafka.create_topic(topic, 2, 1, {})
    produce(console_cluster.bootstrap, topic, [f"record {i}".encode() for i in range(30)] + [b"the needle"],
            partition=0)
    produce(console_cluster.bootstrap, topic, [f"other {i}".encode() for i in range(12)], partition=1)
    browser = Browser(kafka, Bounds())
    # The match lies beyond the first `limit` records of its partition.
    found = browser.browse(BrowseRequest(topic, start="oldest", search="needle", limit=5))
    assert [(m["partition"], m["offset"]) for m in found["messages"]] == [(0, 30)]
    # A search that matches nothing reads every record and says no bound stopped it.
    missing = browser.browse(BrowseRequest(topic, start="oldest", search="no such text", limit=5))
    assert (missing["messages"], missing["scanned"], missing["bounds_hit"]) == ([], 43, [])
    # A forward search stops once it has `limit` matches and says so.
    several = browser.browse(BrowseRequest(topic, start="oldest", search="record", limit=5))
    assert [m["offset"] for m in several["messages"]] == [0, 1, 2, 3, 4]


def test_the_browser_reuses_its_consumers_and_reads_exactly_each_range(console_cluster: LocalCluster) -> None:
    """One consumer serves read after read (opening one per request cost about 10 ms), and a
    reused consumer reads exactly the range asked, whatever the previous read had assigned."""
    topic = unique("reused")
    kafka = KafkaSide(ConsoleSettings(bootstrap=console_cluster.bootstrap))
    kafka.create_topic(topic, 2, 1, {})
    produce(console_cluster.bootstrap, topic, [f"record {i}".encode() for i in range(20)], partition=0)
    browser = Browser(kafka, Bounds())
    try:
        for begin, end in [(10, 15), (0, 3), (17, 20), (3, 4), (0, 20)]:
            scan = browser.read(topic, {0: begin}, {0: end})
            assert [r.offset() for r in scan.records] == list(range(begin, end))
            assert [r.value() for r in scan.records] == [f"record {i}".encode() for i in range(begin, end)]
        for _ in range(3):
            browser.browse(BrowseRequest(topic, start="newest", limit=5))
        assert browser.consumers_opened == 1
    finally:
        browser.close()


def test_the_create_form_proposes_the_clusters_replication_not_zero(console: ConsoleProcess) -> None:
    with urllib.request.urlopen(console.url + "/topics", timeout=30) as response:
        html = response.read().decode()
    field = re.search(r'<input name="replication"[^>]*>', html)
    assert field is not None
    assert 'value="3"' in field[0] and 'min="1"' in field[0], field[0]  # three brokers: min(3, 3)


def test_a_znodes_ephemeral_owner_shows_in_hex_as_zkcli_shows_it(console: ConsoleProcess,
                                                                  console_cluster: LocalCluster) -> None:
    keeper = KazooClient(hosts=console_cluster.zookeeper)
    keeper.start(timeout=15)
    path = f"/{unique('owned')}"
    try:
        keeper.create(path, b"x", ephemeral=True)
        stat = console.get(f"/api/keeper/node?path={path}")["stat"]
        assert stat["ephemeral_owner"] == hex(keeper.client_id[0])
        assert console.get("/api/keeper/node?path=/")["stat"]["ephemeral_owner"] == "0x0"
    finally:
        keeper.stop()
        keeper.close()
