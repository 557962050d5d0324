"""The console in a real browser (Debian's chromium, headless, through Playwright) against the
package's real three-broker, three-keeper cluster. The broker-kill test comes last: it leaves the
cluster with a broker down."""

from __future__ import annotations

import re
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient

from tests.console import screenshots
from tests.console.conftest import ConsoleProcess
from tests.support import referees
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for

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
    assert documented == {path.name for path in written}


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
