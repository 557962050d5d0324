"""The console in a real browser (Debian's chromium, headless, through Playwright) against the
package's real three-broker, three-keeper cluster. The broker-kill test comes last: it leaves the
cluster with a broker down."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from kazoo.client import KazooClient

from roost.admin.share_groups import DEAD_LETTER_TOPIC_CONFIG
from roost.broker.link.configs import MIRROR_LINK_CONFIG
from roost.broker.link.settings import LINKS_PATH, LinkSettings, link_path
from tests.console import screenshots
from tests.console.conftest import ConsoleProcess
from tests.support import referees
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for
from tests.support.share_configs import set_group_configs

expect = referees.import_or_skip("playwright.sync_api", "Playwright").expect

WAIT_MS = 30_000  # generous bound against hangs; no test asserts on how fast anything is


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def accept_dialogs(page: Any, typed: str | None = None) -> None:
    page.on("dialog", lambda dialog: dialog.accept(typed) if typed is not None else dialog.accept())


def test_overview_shows_three_brokers_and_the_controller(page: Any, console: ConsoleProcess,
                                                         console_cluster: LocalCluster) -> None:
    page.goto(console.url + "/")
    expect(page.locator("#brokers tbody tr")).to_have_count(3, timeout=WAIT_MS)
    expect(page.locator("#brokers-up")).to_have_text("3 / 3", timeout=WAIT_MS)
    controller = console_cluster.controller()
    expect(page.locator("#controller")).to_have_text(f"broker {controller}", timeout=WAIT_MS)
    expect(page.locator(f"#brokers tr[data-broker='{controller}'] td").first).to_have_text(f"{controller} (controller)")
    expect(page.locator("#keepers tbody tr")).to_have_count(3)
    expect(page.locator("#keepers tbody")).to_contain_text("leader")
    # The charts' module loads after the tables are filled, as a chunk of its own.
    expect(page.locator("#rate-chart canvas")).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#bytes-chart canvas")).to_have_count(1, timeout=WAIT_MS)


# The requests for an API URL that started before a second after the page's script ran (its next
# refresh comes seconds later).
FIRST_REQUESTS = """(path) => {
  const ran = performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd;
  return performance.getEntriesByType("resource")
    .filter((entry) => entry.name === location.origin + path && entry.startTime < ran + 1000).length;
}"""
LOADS_TO_CARRY = 5  # a shell carries the answer only when it is ready in time (app.FIRST_ANSWER_WAIT_S)


def test_the_overview_topic_list_and_messages_fill_their_first_table_from_the_shell_without_a_request(
        page: Any, console: ConsoleProcess, console_cluster: LocalCluster) -> None:
    topic = unique("carried")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 3}).status == 201
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    for index in range(6):
        producer.produce(topic, value=f"carried {index}".encode(), partition=index % 3)
    assert producer.flush(30) == 0
    for shell, api, filled in (("/", "/api/overview", "#brokers tbody tr"),
                               ("/topics", "/api/topics?search=&page=1&size=50&internal=false", "#topics tbody tr"),
                               (f"/topics/{topic}/messages",
                                f"/api/topics/{topic}/messages?partition=all&start=newest&limit=50&search=",
                                "#messages tbody tr")):
        for _ in range(LOADS_TO_CARRY):
            carried = 'id="first-answer"' in (page.goto(console.url + shell).text() or "")
            if carried:
                break
        assert carried, f"none of {LOADS_TO_CARRY} loads of {shell} carried the first answer"
        expect(page.locator(filled).first).to_be_visible(timeout=WAIT_MS)
        page.wait_for_timeout(1000)  # past the window in which the page's own first request would start
        assert page.evaluate(FIRST_REQUESTS, api) == 0, shell
        assert page.locator("#first-answer").count() == 0  # taken by the page
    # The messages page lists the partitions to choose from out of that answer, asking nothing else.
    expect(page.locator("#messages tbody tr")).to_have_count(6)
    expect(page.locator("#partition option")).to_have_text(["all (by time)", "0", "1", "2"])
    assert page.evaluate(FIRST_REQUESTS, f"/api/topics/{topic}") == 0


def test_create_a_topic_produce_from_the_ui_and_find_it_by_searching(page: Any, console: ConsoleProcess) -> None:
    topic = unique("ui")
    page.goto(console.url + "/topics")
    form = page.locator("#create-topic")
    form.locator("input[name=name]").fill(topic)
    form.locator("input[name=partitions]").fill("2")
    form.locator("button[type=submit]").click()
    expect(page.locator("#status")).to_have_text(f"created topic {topic}", timeout=WAIT_MS)
    page.locator("#topic-search").fill(topic)
    expect(page.locator("#topics tbody a", has_text=topic)).to_have_count(1, timeout=WAIT_MS)
    page.locator("#topics tbody a", has_text=topic).click()
    expect(page.locator("#partitions tbody tr")).to_have_count(2, timeout=WAIT_MS)

    page.goto(f"{console.url}/topics/{topic}/messages")
    needle = unique("needle")
    for value in ("an ordinary value", f"the value holding {needle} inside"):
        produce = page.locator("#produce")
        produce.locator("input[name=key]").fill("k")
        produce.locator("textarea[name=value]").fill(value)
        produce.locator("input[name=headers]").fill("source=console-test")
        produce.locator("button[type=submit]").click()
        expect(page.locator("#status")).to_contain_text("produced to partition", timeout=WAIT_MS)
        page.locator("#status").evaluate("node => { node.textContent = ''; }")
    page.locator("#search").fill(needle)
    page.locator("#start").select_option("oldest")
    page.locator("#browse-button").click()
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(1, timeout=WAIT_MS)
    expect(rows.first).to_contain_text(f"the value holding {needle} inside")
    expect(rows.first).to_contain_text("source=console-test")


def test_the_topic_list_shows_a_topics_size_and_byte_rate_grow_as_records_are_produced(
        page: Any, console: ConsoleProcess, console_cluster: LocalCluster) -> None:
    topic = unique("sized-ui")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 1, "replication": 3}).status == 201
    page.goto(console.url + "/topics")
    page.locator("#topic-search").fill(topic)
    row = page.locator("#topics tbody tr", has_text=topic)
    size, _messages_rate, bytes_rate = (row.locator("td").nth(index) for index in (5, 6, 7))
    expect(size).to_have_text("0 B", timeout=WAIT_MS)  # sampled empty, before anything is produced

    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    for index in range(200):  # 200 x 1000 bytes: 195.3 KiB of values, and a little framing
        producer.produce(topic, value=bytes([index % 256]) * 1000)
    assert producer.flush(30) == 0
    # The page refreshes itself; the rate between the empty sample and the next is above zero.
    expect(size).to_have_text(re.compile(r"^(19[5-9]|2\d\d) KiB$"), timeout=WAIT_MS)
    expect(bytes_rate).to_have_text(re.compile(r"^[1-9][\d.]* (B|KiB|MiB)/s$"), timeout=WAIT_MS)


def test_live_tail_shows_a_message_produced_by_confluent_kafka(page: Any, console: ConsoleProcess,
                                                               console_cluster: LocalCluster) -> None:
    topic = unique("tail")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 3}).status == 201
    page.goto(f"{console.url}/topics/{topic}/messages")
    page.locator("#live").check()
    expect(page.locator("#status")).to_contain_text("live:", timeout=WAIT_MS)
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    producer.produce(topic, key=b"tail-key", value=b"tailed by the console")
    assert producer.flush(30) == 0
    expect(page.locator("#messages tbody")).to_contain_text("tailed by the console", timeout=WAIT_MS)


def test_group_lag_shows_while_its_consumer_is_stopped_and_the_reset_preview_shows_new_offsets(
        page: Any, console: ConsoleProcess, console_cluster: LocalCluster) -> None:
    topic, group = unique("lagged"), unique("group")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 1}).status == 201
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    for index in range(3):
        producer.produce(topic, value=f"first {index}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": console_cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         # The broker it asks may not know the new topic yet: ask again soon, not in 5 min.
                         "topic.metadata.refresh.interval.ms": 500})
    consumer.subscribe([topic])
    seen = 0
    for _ in range(60):  # bounded: at most 60 polls of 0.5 s
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
            if seen == 3:
                consumer.commit(message, asynchronous=False)
                break
    consumer.close()  # stopped: its lag now grows with what is produced
    assert seen == 3
    for index in range(5):
        producer.produce(topic, value=f"second {index}".encode())
    assert producer.flush(30) == 0

    page.goto(f"{console.url}/groups/{group}")
    expect(page.locator("#total-lag")).to_have_text("5", timeout=WAIT_MS)
    expect(page.locator("#offsets tbody tr").first).to_contain_text("3")
    page.locator("#reset input[name=to]").fill("end")
    page.locator("#reset button[type=submit]").click()
    plan = page.locator("#reset-plan tbody tr")
    expect(plan).to_have_count(1, timeout=WAIT_MS)
    expect(plan.first.locator("td.new-offset")).to_have_text("8")
    accept_dialogs(page)
    page.locator("#reset-apply").click()
    expect(page.locator("#status")).to_contain_text("committed 1 offset(s)", timeout=WAIT_MS)
    expect(page.locator("#total-lag")).to_have_text("0", timeout=WAIT_MS)


def test_hostile_messages_display_escaped_and_cut_and_no_script_runs(page: Any, console: ConsoleProcess,
                                                                    console_cluster: LocalCluster) -> None:
    topic = unique("hostile")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 1,
                                                "configs": {"max.message.bytes": str(4 * 1024 * 1024)}}).status == 201
    script = b"<script>window.__pwned = 'script'</script>"
    image = b"<img src=x onerror=\"window.__pwned = 'img'\">"
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap, "message.max.bytes": 4 * 1024 * 1024})
    producer.produce(topic, key=image, value=script + b" \xff\xfe\xc3 invalid", headers=[("h", image)])
    producer.produce(topic, key=b"big", value=b"<b>" + b"x" * (1024 * 1024))
    assert producer.flush(30) == 0

    page.goto(f"{console.url}/topics/{topic}/messages")
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(2, timeout=WAIT_MS)
    hostile = page.locator("#messages tbody tr[data-offset='0']")
    expect(hostile).to_contain_text("<script>window.__pwned = 'script'</script>")
    expect(hostile).to_contain_text("<img src=x onerror=")
    expect(hostile).to_contain_text("not valid UTF-8")
    big = page.locator("#messages tbody tr[data-offset='1']")
    expect(big).to_contain_text(f"showing the start of {1024 * 1024 + 3} bytes")
    assert len(big.locator("td.payload pre").nth(1).text_content()) <= 4096
    assert page.locator("#messages img, #messages script, #messages b").count() == 0
    page.locator("#decode").select_option("hex")
    expect(hostile).to_contain_text("3c 73 63 72 69 70 74 3e")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.locator("#live").check()  # the page stays responsive: live tail still polls
    expect(page.locator("#status")).to_contain_text("live:", timeout=WAIT_MS)
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_keeper_tree_shows_a_znode_change_as_it_happens(page: Any, console: ConsoleProcess,
                                                         console_cluster: LocalCluster) -> None:
    base = f"/{unique('watched')}"
    keeper = KazooClient(hosts=console_cluster.zookeeper)
    keeper.start(timeout=15)
    try:
        keeper.create(base, b"first data")
        page.goto(console.url + "/keeper")
        expect(page.locator("#children")).to_contain_text(base[1:], timeout=WAIT_MS)
        page.locator(f"#children button[data-child='{base[1:]}']").click()
        expect(page.locator("#node-path")).to_have_text(base, timeout=WAIT_MS)
        expect(page.locator("#node-data")).to_have_text("first data")
        expect(page.locator("#watch-state")).to_have_text("watching", timeout=WAIT_MS)
        keeper.set(base, b"second data")
        expect(page.locator("#node-data")).to_have_text("second data", timeout=WAIT_MS)
        expect(page.locator("td[data-stat='version']")).to_have_text("1")
        keeper.create(f"{base}/child", b"")
        expect(page.locator("#children")).to_contain_text("child", timeout=WAIT_MS)
    finally:
        keeper.stop()
        keeper.close()


def test_read_only_console_shows_no_change_forms_and_refuses_writes(page: Any,
                                                                    read_only_console: ConsoleProcess) -> None:
    page.goto(read_only_console.url + "/topics")
    expect(page.locator("#read-only-badge")).to_be_visible()
    expect(page.locator("#topics tbody tr a").first).to_be_visible(timeout=WAIT_MS)
    assert page.locator("#create-topic").count() == 0
    status = page.evaluate("""async () => (await fetch('/api/topics', {method: 'POST',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({name: 'nope'})})).status""")
    assert status == 403


def test_an_open_transaction_shows_with_its_partitions_and_holds_the_lso_below_the_high_watermark(
        page: Any, console: ConsoleProcess, console_cluster: LocalCluster, tmp_path: Path) -> None:
    topic = unique("txn-shown")
    transactional_id = unique("console-txn")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 1}).status == 201
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for index in range(2):
        producer.produce(topic, value=f"pending {index}".encode(), partition=0)
    assert producer.flush(30) == 0
    page.goto(console.url + "/transactions")
    row = page.locator(f"#transactions tr[data-transactional-id='{transactional_id}']")
    expect(row).to_contain_text("Ongoing", timeout=WAIT_MS)
    expect(row).to_contain_text(f"{topic}-0")
    page.screenshot(path=str(tmp_path / "transactions.png"), full_page=True)
    page.goto(console.url + f"/topics/{topic}")
    cells = page.locator("#partitions tbody tr").first.locator("td")
    expect(cells.nth(5)).to_have_text("2", timeout=WAIT_MS)  # end offset: the high watermark
    expect(cells.nth(6)).to_have_text("0")  # LSO: the open transaction's first offset
    page.screenshot(path=str(tmp_path / "topic-lso.png"), full_page=True)
    producer.commit_transaction(30)
    page.goto(console.url + "/transactions")
    expect(page.locator("#transactions tbody")).not_to_contain_text(transactional_id, timeout=WAIT_MS)
    page.goto(console.url + f"/topics/{topic}")
    # The two records and the COMMIT marker: the end offset passes 2, and the LSO reaches it. (A
    # coordinator whose marker write timed out or lost its answer writes the marker again, as
    # Kafka's does: once in CI the end offset was 4.)
    expect(cells.nth(6)).not_to_have_text("0", timeout=WAIT_MS)
    end, lso = int(cells.nth(5).inner_text()), int(cells.nth(6).inner_text())
    assert end >= 3 and lso == end, (end, lso)


def poll_share(consumer: ShareConsumer, wanted: set[int], seen: dict[int, Any]) -> None:
    """Polls (bounded) until the offsets `wanted` have come; each one's message kept in `seen`."""
    deadline = time.monotonic() + 60
    while not wanted <= set(seen) and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if message.error() is None:
                seen[message.offset()] = message
    assert wanted <= set(seen), f"offsets {sorted(wanted - set(seen))} never came"


def test_a_share_group_page_shows_its_members_in_flight_and_acquired_records_lag_and_delivery_counts(
        page: Any, console: ConsoleProcess, console_cluster: LocalCluster) -> None:
    """20 records; a consumer accepts 0-4, rejects 5 (copied to the dead-letter topic), releases
    6-19, then takes 6-19 again (their second delivery), accepts 6-9 and holds 10-19. The page
    must show exactly that state: start offset 10, end 20, lag 10, 10 in flight, 10 acquired, 10
    unfinished records delivered twice, the member holding the partition, the dead-letter topic."""
    topic, group, dead = unique("queue"), unique("workers"), unique("queue-dlq")
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 3), NewTopic(dead, 1, 3)]).values():
        future.result(60)
    set_group_configs(console_cluster.bootstrap, group, {
        "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "60000",
        DEAD_LETTER_TOPIC_CONFIG: dead}, seen_by=console_cluster.running_addresses())
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap, "linger.ms": 50})
    for index in range(20):
        producer.produce(topic, value=f"task {index}".encode())
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": console_cluster.bootstrap, "group.id": group,
                              "client.id": "email-worker-1", "share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe([topic])
        first: dict[int, Any] = {}
        poll_share(consumer, set(range(20)), first)
        for offset, message in sorted(first.items()):
            verdict = AcknowledgeType.ACCEPT if offset < 5 else AcknowledgeType.REJECT if offset == 5 \
                else AcknowledgeType.RELEASE
            consumer.acknowledge(message, verdict)
        consumer.commit_sync()
        second: dict[int, Any] = {}
        poll_share(consumer, set(range(6, 20)), second)
        for offset in range(6, 10):
            consumer.acknowledge(second[offset], AcknowledgeType.ACCEPT)
        consumer.commit_sync()  # 10-19 stay acquired (explicit mode: nothing acknowledges them)

        page.goto(console.url + "/share-groups")
        expect(page.locator(f"#share-groups tr[data-group='{group}']")).to_contain_text("stable", timeout=WAIT_MS)
        page.locator(f"#share-groups a:text-is('{group}')").click()
        row = page.locator(f"#share-partitions tr[data-partition='{topic}:0']")
        expect(row.locator("td.start")).to_have_text("10", timeout=WAIT_MS)
        expect(row.locator("td.end")).to_have_text("20")
        expect(row.locator("td.lag")).to_have_text("10")
        expect(row.locator("td.in-flight")).to_have_text("10")
        expect(row.locator("td.acquired")).to_have_text("10")
        expect(row.locator("td.delivery")).to_have_text("2\u00d7: 10")
        expect(row).to_contain_text("email-worker-1")
        expect(page.locator("#delivery-counts tr[data-delivery-count='2'] td").nth(1)).to_have_text("10")
        expect(page.locator("#share-total-lag")).to_have_text("10")
        expect(page.locator("#share-state")).to_have_text("stable")
        expect(page.locator("#share-member-count")).to_have_text("1")
        expect(page.locator("#dead-letter-topic")).to_have_text(dead)
        expect(page.locator("#dead-letter-topic a")).to_have_attribute("href", f"/topics/{dead}/messages")
        expect(page.locator("#share-members tbody")).to_contain_text(f"{topic}[0]")
        expect(page.locator("#metrics-note")).to_be_hidden()
        screenshots.shoot(page, "share-group")
    finally:
        consumer.close()
    # The rejected record is in the dead-letter topic the page names.
    wait_for(lambda: console.get(f"/api/topics/{dead}")["partitions"][0]["end_offset"] == 1, 30,
             what="the rejected record in the dead-letter topic")
    # A group no coordinator knows is a clear 404, not a stack trace.
    missing = console.call("GET", f"/api/share-groups/{unique('nobody')}")
    assert missing.status == 404 and "GROUP_ID_NOT_FOUND" in missing.body["error"]


def create_link(zookeeper: str, name: str, settings: dict[str, str]) -> None:
    """What `roost link create` writes (its settings, checked, at /config/cluster-links/NAME),
    written here directly: four `roost` processes would cost this test seconds of start-up."""
    with keeper_client(zookeeper) as client:
        client.ensure_path(LINKS_PATH)
        client.create(link_path(name), LinkSettings.parse(name, settings).encode())


@contextlib.contextmanager
def keeper_client(zookeeper: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_the_link_pages_show_a_links_mirrors_their_lag_its_errors_and_a_promoted_topic(
        page: Any, console: ConsoleProcess, console_cluster: LocalCluster) -> None:
    """A link whose source is this same cluster (the mirror is `copy-<topic>`, and only <topic>
    is mirrored): its page shows the source, ACTIVE, each partition's source high watermark and
    mirrored end (30 and 20 records), lag 0; once promoted (its roost.mirror.link removed, as
    `roost link promote` does) the topic shows promoted. A link to a source that does not answer shows SOURCE_UNAVAILABLE and its error."""
    topic, name, broken = unique("origin"), unique("self"), unique("nowhere")
    mirror = f"copy-{topic}"
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 3)]).values():
        future.result(60)
    for index in range(50):
        producer.produce(topic, value=f"record {index}".encode(), partition=0 if index < 30 else 1)
    assert producer.flush(30) == 0
    create_link(console_cluster.zookeeper, name, {"bootstrap.servers": console_cluster.bootstrap,
                                                  "topics": f"literal:{topic}", "cluster.link.prefix": "copy-",
                                                  "consumer.offset.sync.enable": "false"})
    create_link(console_cluster.zookeeper, broken, {"bootstrap.servers": "127.0.0.1:1"})
    try:
        page.goto(console.url + "/links")
        expect(page.locator(f"#links tr[data-link='{name}']")).to_contain_text("ACTIVE", timeout=WAIT_MS)
        expect(page.locator(f"#links tr[data-link='{name}']")).to_contain_text(console_cluster.bootstrap)
        page.locator(f"#links a:text-is('{name}')").click()
        for partition, records in ((0, "30"), (1, "20")):
            row = page.locator(f"#link-partitions tr[data-partition='{mirror}:{partition}']")
            expect(row.locator("td.mirrored")).to_have_text(records, timeout=WAIT_MS)
            expect(row.locator("td.source-hw")).to_have_text(records)
            expect(row.locator("td.lag")).to_have_text("0")
            expect(row.locator("td.state")).to_have_text("mirroring")
        expect(page.locator("#link-state")).to_have_text("ACTIVE")
        expect(page.locator("#link-source")).to_have_text(console_cluster.bootstrap)
        expect(page.locator("#link-lag")).to_have_text("0")
        expect(page.locator("#link-errors tbody")).to_have_text("none")
        screenshots.shoot(page, "link")
        # Promotion, as `roost link promote` does it: the mirror's roost.mirror.link config removed.
        promote = ConfigResource(ResourceType.TOPIC, mirror, incremental_configs=[
            ConfigEntry(MIRROR_LINK_CONFIG, "", incremental_operation=AlterConfigOpType.DELETE)])
        for future in admin.incremental_alter_configs([promote]).values():
            future.result(30)
        expect(page.locator(f"#link-partitions tr[data-partition='{mirror}:0'] td.state")).to_have_text(
            "promoted", timeout=WAIT_MS)
        expect(page.locator(f"#link-partitions tr[data-partition='{mirror}:1'] td.state")).to_have_text("promoted")

        page.goto(console.url + f"/links/{broken}")
        expect(page.locator("#link-state")).to_have_text("SOURCE_UNAVAILABLE", timeout=WAIT_MS)
        expect(page.locator("#link-errors tbody tr.bad").first).to_be_visible(timeout=WAIT_MS)
        missing = console.call("GET", f"/api/links/{unique('none')}")
        assert missing.status == 404 and "not found: cluster link" in missing.body["error"]
    finally:
        with keeper_client(console_cluster.zookeeper) as client:
            for each in (name, broken):
                client.delete(link_path(each))


ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "int"}, {"name": "customer", "type": "string"}]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string", "default": ""}]}
HOSTILE_SUBJECT = "<img src=x onerror=alert(1)>"


def test_the_schema_pages_show_subjects_versions_their_diff_compatibility_and_decoded_messages(
        page: Any, registry_url: str, console: ConsoleProcess, read_only_console: ConsoleProcess,
        console_cluster: LocalCluster) -> None:
    """Two Avro versions of `<topic>-value` (a field added with a default, under BACKWARD) and a
    record produced with confluent-kafka's AvroSerializer: the subject list shows version 2, the
    subject's page its compatibility, versions, schema text and the added field in the diff, and
    the message browser the record's schema id and its fields decoded. A subject named with
    markup and a JSON schema carrying a script show as text. The console without a registry
    says how to give it one."""
    registry = SchemaRegistryClient({"url": registry_url})

    topic = unique("orders")
    subject = f"{topic}-value"
    registry.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))
    registry.set_compatibility(subject, "BACKWARD")
    second = registry.register_schema(subject, Schema(json.dumps(ORDER_V2), "AVRO"))
    hostile = {"type": "object", "description": "<script>alert('schema')</script>",
               "properties": {"x": {"type": "string"}}}
    registry.register_schema(HOSTILE_SUBJECT, Schema(json.dumps(hostile), "JSON"))
    serialize = AvroSerializer(registry, json.dumps(ORDER_V2), conf={"auto.register.schemas": False,
                                                                     "use.latest.version": True})
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    value = serialize({"id": 7, "customer": "c-<b>42</b>", "note": "gift"}, SerializationContext(topic, MessageField.VALUE))
    producer.produce(topic, value=value)
    assert producer.flush(30) == 0

    page.goto(console.url + "/schemas")
    row = page.locator(f"#subjects tr[data-subject='{subject}']")
    expect(row.locator("td").nth(1)).to_have_text("2", timeout=WAIT_MS)
    expect(row.locator("td").nth(2)).to_have_text(str(second))
    expect(page.locator("#subjects tbody")).to_contain_text(HOSTILE_SUBJECT)
    row.locator("a").click()
    expect(page.locator("#compatibility")).to_have_text("BACKWARD", timeout=WAIT_MS)
    expect(page.locator("#version-count")).to_have_text("2")
    expect(page.locator("#shown-version")).to_have_text("2")
    expect(page.locator("#schema-id")).to_have_text(str(second))
    expect(page.locator("#schema-text")).to_contain_text('"name": "note"')
    expect(page.locator("#diff .added").filter(has_text='"name": "note"')).to_have_count(1)
    expect(page.locator("#diff .removed")).to_have_count(0)
    screenshots.shoot(page, "schema")
    page.locator("#version").select_option("1")
    expect(page.locator("#shown-version")).to_have_text("1", timeout=WAIT_MS)
    expect(page.locator("#diff")).to_contain_text("the first version")
    expect(page.locator("#schema-text")).not_to_contain_text("note")

    page.goto(console.url + f"/topics/{topic}/messages")
    payload = page.locator("#messages tbody tr").first.locator("td.payload").nth(1)
    expect(payload.locator(".schema-id")).to_contain_text(f"schema id {second} (AVRO)", timeout=WAIT_MS)
    expect(payload.locator("pre")).to_contain_text('"customer": "c-<b>42</b>"')
    expect(payload.locator("pre")).to_contain_text('"note": "gift"')
    screenshots.shoot(page, "schema-messages")
    payload.locator(".schema-id a").click()
    expect(page.locator("h1")).to_have_text(f"Subject {subject}", timeout=WAIT_MS)

    page.goto(console.url + "/schemas/subjects/" + urllib.parse.quote(HOSTILE_SUBJECT, safe=""))
    expect(page.locator("h1")).to_have_text(f"Subject {HOSTILE_SUBJECT}", timeout=WAIT_MS)
    expect(page.locator("#schema-text")).to_contain_text("<script>alert('schema')</script>", timeout=WAIT_MS)
    expect(page.locator("#compatibility")).to_have_text(re.compile(r"\(global\)$"))

    # A console started without --schema-registry says how to give it one, never a trace.
    page.goto(read_only_console.url + "/schemas")
    expect(page.locator("#no-registry")).to_be_visible()
    expect(page.locator("#status")).to_contain_text("--schema-registry URL", timeout=WAIT_MS)
    missing = read_only_console.call("GET", "/api/schemas")
    assert missing.status == 404 and "--schema-registry" in missing.body["error"]
    unknown = console.call("GET", f"/api/schemas/subjects/{unique('nobody')}")
    assert unknown.status == 404 and "40401" in unknown.body["error"], unknown


def test_the_documentations_screenshots_are_taken_from_the_console_as_it_is(
        browser: Any, console: ConsoleProcess, console_cluster: LocalCluster) -> None:
    """docs/screenshots/console-*.png, which the documentation shows, are retaken here on every
    run (tests/console/screenshots.py), before the broker-kill test below leaves a broker down."""
    screenshots.seed(console_cluster.bootstrap)
    stop = threading.Event()
    trickle = threading.Thread(target=screenshots.keep_producing, args=(console_cluster.bootstrap, stop), daemon=True)
    trickle.start()
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        written = screenshots.take(context.new_page(), console.url, screenshots.output_dir(), WAIT_MS)
    finally:
        context.close()
        stop.set()
        trickle.join(30)
    assert [path.name for path in written] == [f"console-{name}.png" for name, *_ in screenshots.SHOTS]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000, path
    documented = set(re.findall(r"\]\(screenshots/([\w.-]+)\)", (screenshots.ROOT / "docs" / "console.md").read_text()))
    assert documented == {path.name for path in written} | {f"console-{n}.png" for n in screenshots.TAKEN_BY_THEIR_TESTS}


def test_a_killed_broker_shows_down_and_its_partitions_under_replicated(page: Any, console: ConsoleProcess,
                                                                        console_cluster: LocalCluster) -> None:
    topic = unique("replicated")
    assert console.call("POST", "/api/topics", {"name": topic, "partitions": 3, "replication": 3}).status == 201
    console_cluster.wait_for_isr(topic)
    victim = next(b for b in (3, 2, 1) if b != console_cluster.controller())
    page.goto(console.url + "/")
    expect(page.locator("#brokers-up")).to_have_text("3 / 3", timeout=WAIT_MS)
    console_cluster.kill(victim)
    expect(page.locator("#brokers-up")).to_have_text("2 / 3", timeout=WAIT_MS)
    expect(page.locator(f"#brokers tr[data-broker='{victim}']")).to_contain_text("down")
    expect(page.locator("#unhealthy tbody")).to_contain_text(topic, timeout=WAIT_MS)
    expect(page.locator("#urp-count")).not_to_have_text("0")
    rows = page.locator("#unhealthy tbody tr", has_text=topic)
    wait_for(lambda: rows.count() == 3, 30, what=f"three partitions of {topic} under-replicated")
    assert re.search(r"under-replicated", rows.first.text_content() or "")
    # The surviving brokers' /metrics say so too: they lead all three partitions now.
    survivors = [node for node in console_cluster.brokers.values() if node.running]

    def under_replicated_in_metrics() -> float:
        total = 0.0
        for node in survivors:
            assert node.process is not None
            address = node.process.address(f"broker {node.broker_id} metrics")
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
                text = response.read().decode()
            found = re.search(r"^kafka_server_replicamanager_underreplicatedpartitions (\S+)$", text, re.MULTILINE)
            assert found is not None, "the series is missing"
            total += float(found[1])
        return total

    wait_for(lambda: under_replicated_in_metrics() >= 3, 30, what="under-replicated partitions in /metrics")
