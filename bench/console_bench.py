"""Web console load times against a real `roost up` node on loopback, with a `roost console`
process of its own (so the console's CPU is measured apart from the broker's).

Figures: the overview and the topic list (page shell, JSON API, and the page in headless
chromium until its table is filled) at N topics; the first page of messages of a large topic
(newest, oldest, and a search that finds nothing and so runs into its scan bound); where a page
load's time goes, from the page's own clocks and the console's Server-Timing. Prints
figures with their conditions and the CPU seconds of console and broker; never asserts.

    .venv/bin/python bench/console_bench.py                       # 1,000 topics, 1 GiB topic
    .venv/bin/python bench/console_bench.py --topics 5000 --size-mib 256

The machine is shared and noisy: medians of --repeat runs, compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic, PartitionMetadata, TopicMetadata
from process_cpu import cpu_seconds

from roost.console.history import MIN_INTERVAL_S
from roost.console.kafka_side import METADATA_CACHE_S, KafkaSide
from roost.console.sampling import leader_sizes
from roost.console.settings import ConsoleSettings

LISTENING = re.compile(r"roost: (?P<name>[a-z ]+?) listening on (?P<address>\S+)$")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


# Where a page load's time goes, from the page's own clocks (Navigation and Resource Timing, the
# console's Server-Timing on the shell, which carries the first answer); a page script marks when
# its table is first filled.
PAGE_READY = {"overview": "#brokers tbody tr", "topics": "#topics tbody tr a", "messages": "#messages tbody tr"}
MARK_FILLED = """(() => {
  const ready = READY;
  const observer = new MutationObserver(() => {
    const selector = document.body && ready[document.body.dataset.page];
    if (selector && document.querySelector(selector)) { window.roostFilled = performance.now(); observer.disconnect(); }
  });
  observer.observe(document, { subtree: true, childList: true });
})();""".replace("READY", json.dumps(PAGE_READY))
PAGE_TIMES = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const asked = performance.getEntriesByType("resource").filter((e) => new URL(e.name).pathname.startsWith("/api/"));
  return { "shell received": nav.responseEnd,
           "console's share of it": nav.serverTiming.length ? nav.serverTiming[0].duration : NaN,
           "script ran": nav.domContentLoadedEventStart, "table filled": window.roostFilled,
           "API requests before it": asked.filter((e) => e.startTime < window.roostFilled).length };
}"""


def start(args: list[str], names: set[str], stack: ExitStack) -> tuple[subprocess.Popen[str], dict[str, str]]:
    process = subprocess.Popen([sys.executable, "-m", "roost.cli.main", *args], stdout=subprocess.PIPE, text=True)

    def stop() -> None:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    stack.callback(stop)
    found: dict[str, str] = {}
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    while not names <= found.keys() and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if match := LISTENING.search(line.strip()):
            found[match["name"]] = match["address"]
    if not names <= found.keys():
        raise SystemExit(f"roost {args[0]} did not start: {found}")
    return process, found


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and worst wall milliseconds of `repeat` calls (after one warm-up call)."""
    call()
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        call()
        times.append((time.perf_counter() - begin) * 1000)
    return statistics.median(times), max(times)


def timed_due(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """As `timed`, but each call waits out the console's sampling interval first, so every call
    takes a fresh sample (end offsets and DescribeLogDirs) instead of reusing the last."""
    times = []
    for _ in range(repeat + 1):
        time.sleep(MIN_INTERVAL_S + 0.05)
        begin = time.perf_counter()
        call()
        times.append((time.perf_counter() - begin) * 1000)
    return statistics.median(times[1:]), max(times[1:])


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for begin in range(0, len(names), 200):
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[begin:begin + 200]],
                                      operation_timeout=60, request_timeout=60)
        for future in futures.values():
            future.result(120)


def fill_topic(bootstrap: str, topic: str, size_mib: int, record_bytes: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1024 * 1024,
                         "queue.buffering.max.kbytes": 256 * 1024})
    count = size_mib * 1024 * 1024 // record_bytes
    value = os.urandom(record_bytes // 2).hex().encode()[:record_bytes]
    for index in range(count):
        while True:
            try:
                producer.produce(topic, key=str(index).encode(), value=value)
                break
            except BufferError:
                producer.poll(0.05)
        if index % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0
    return count


def report(label: str, median_ms: float, worst_ms: float, extra: str = "") -> None:
    print(f"  {label:<58} {median_ms:8.1f} ms median  {worst_ms:8.1f} ms worst{extra}", flush=True)


def synthetic_topic_list(topics: int, repeat: int) -> None:
    """The console's own paging code (KafkaSide.topic_page) over a Metadata answer of `topics`
    topics of 3 partitions built in memory: the CPU the console spends per page at a size the
    one-node cluster here cannot be filled to in reasonable time. No cluster is involved."""
    metadata = ClusterMetadata()
    for index in range(topics):
        topic = TopicMetadata()
        topic.topic = f"service-{index:05d}.events"
        for number in range(3):
            partition = PartitionMetadata()
            partition.id, partition.leader, partition.replicas, partition.isrs = number, 1, [1, 2, 3], [1, 2, 3]
            topic.partitions[number] = partition
        metadata.topics[topic.topic] = topic
    kafka = KafkaSide(ConsoleSettings(bootstrap="127.0.0.1:9"))  # never connects: the metadata is given
    kafka._metadata = (float("inf"), metadata)
    print(f"\n== the console's topic paging over an in-memory Metadata answer of {topics:,} topics "
          f"(3 partitions each; no cluster, no HTTP), median of {repeat} ==")
    for label, call in (("first page of 50", lambda: kafka.topic_page("", 1, 50, False)),
                        ("a search matching 11 topics", lambda: kafka.topic_page("0999", 1, 50, False)),
                        ("last page", lambda: kafka.topic_page("", 10**9, 50, False))):
        cpu = time.process_time()
        median_ms, worst_ms = timed(call, repeat)
        report(label, median_ms, worst_ms, f"   CPU {(time.process_time() - cpu) / (repeat + 1) * 1000:5.1f} ms per page")


def launch_browser(stack: ExitStack) -> Any:
    """Headless chromium through Playwright, closed with `stack`; None where there is no chromium."""
    if not os.path.exists(CHROMIUM):
        print(f"# {CHROMIUM} not found: the browser rows are skipped")
        return None
    from playwright.sync_api import sync_playwright

    playwright = stack.enter_context(sync_playwright())
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    stack.callback(browser.close)
    return browser


# A first visit loads each time in a new browser context (nothing cached, a new renderer); a
# returning one reloads in the same tab (the statics cached: they are immutable).
VISITS = (("first visit, empty cache", True), ("returning visit, statics cached", False))


def visit_measures(browser: Any, url: str, loads: int, first_visit: bool, measure: str,
                   ready: str | None = None) -> list[Any]:
    """The page function `measure` evaluated after each of `loads` loads of `url` (once the
    selector `ready` matches, when given), as a first or a returning visit (VISITS)."""
    measures = []
    tab = None
    for _ in range(loads):
        if first_visit or tab is None:
            tab = browser.new_context().new_page()
            tab.add_init_script(MARK_FILLED)
        tab.goto(url)
        if ready is not None:
            tab.wait_for_selector(ready, timeout=60_000)
        measures.append(tab.evaluate(measure))
        if first_visit:
            tab.context.close()
    if tab is not None and not first_visit:
        tab.context.close()
    return measures


def page_clock_rows(browser: Any, url: str, name: str, repeat: int) -> None:
    for label, first_visit in VISITS:
        loads = visit_measures(browser, url, repeat + 1, first_visit, PAGE_TIMES, PAGE_READY[name])[1:]
        filled = [load["table filled"] for load in loads]
        report(f"{name}: {label}", statistics.median(filled), max(filled))
        print("      median ms after navigation start: " + ", ".join(
            f"{key} {statistics.median(load[key] for load in loads):.1f}" for key in loads[0]), flush=True)


DOCUMENT_READY = """() => performance.getEntriesByType("navigation")[0].domContentLoadedEventStart"""


def browser_floor_rows(browser: Any, url: str, repeat: int) -> None:
    """The browser's own part of the rows above: a plain text file (chromium shows it in a <pre>:
    no script, no style sheet) until its document is ready, by the page's clock."""
    for label, first_visit in VISITS:
        ready = visit_measures(browser, url + "/static/console.css", repeat + 1, first_visit, DOCUMENT_READY)[1:]
        report(f"floor: a plain text file, its document ready, {label}", statistics.median(ready), max(ready))


def harness_rows(browser: Any, url: str, repeat: int) -> None:
    page = browser.new_page()
    median_ms, worst_ms = timed(lambda: page.goto(url + "/static/console.css"), repeat)
    report("baseline: navigation to a static file", median_ms, worst_ms)

    def load_static() -> None:  # the page rows below also wait for an element: Playwright's own cost
        page.goto(url + "/static/console.css")
        page.wait_for_selector("pre", timeout=60_000)  # chromium shows a text file in a <pre>
    median_ms, worst_ms = timed(load_static, repeat)
    report("baseline: the same, then waiting for an element in it", median_ms, worst_ms)
    for name, path in (("overview", "/"), ("topics", "/topics")):
        def load(p: str = path, r: str = PAGE_READY[name]) -> None:
            page.goto(url + p)
            page.wait_for_selector(r, timeout=60_000)
        median_ms, worst_ms = timed(load, repeat)
        report(f"{name}: until the table is filled", median_ms, worst_ms)
    page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the large topic (default 1 GiB; 0: skip it)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--synthetic-topics", type=int, default=10_000,
                        help="topics of the in-memory paging measurement (0: skip it)")
    args = parser.parse_args()
    if args.synthetic_topics:
        synthetic_topic_list(args.synthetic_topics, args.repeat)
    print(f"# console bench: Python {platform.python_version()}, {os.cpu_count()} CPUs (shared), "
          f"one broker + embedded keeper (`roost up`), `roost console` in its own process, loopback")
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        broker, listeners = start(["up", "--data-dir", str(Path(directory) / "data"), "--kafka-port", "0",
                                   "--keeper-port", "0", "--no-console", "--log-level", "WARNING"],
                                  {"kafka", "keeper"}, stack)
        bootstrap, zookeeper = listeners["kafka"], listeners["keeper"]
        console, found = start(["console", "-b", bootstrap, "--zookeeper", zookeeper, "--port", "0"], {"console"}, stack)
        url = f"http://{found['console']}"

        begin = time.monotonic()
        create_topics(bootstrap, [f"bench-topic-{i:05d}" for i in range(args.topics)], 1)
        print(f"# created {args.topics:,} topics of 1 partition in {time.monotonic() - begin:.1f} s")

        print(f"\n== overview and topic list at {args.topics:,} topics: HTTP from this process, "
              f"median of {args.repeat} after a warm-up ==")
        for label, path in (("GET / (overview page shell)", "/"),
                            ("GET /api/overview", "/api/overview"),
                            ("GET /topics (topic list page shell)", "/topics"),
                            ("GET /api/topics (first page of 50)", "/api/topics?page=1&size=50"),
                            ("GET /api/topics?search=00999 (one match)", "/api/topics?search=00999"),
                            ("GET /api/topics page 10 of 50", "/api/topics?page=10&size=50")):
            console_cpu, broker_cpu = cpu_seconds(console.pid), cpu_seconds(broker.pid)
            median_ms, worst_ms = timed(lambda p=path: fetch(url + p), args.repeat)
            spent_console = (cpu_seconds(console.pid) - console_cpu) / (args.repeat + 1) * 1000
            spent_broker = (cpu_seconds(broker.pid) - broker_cpu) / (args.repeat + 1) * 1000
            report(label, median_ms, worst_ms,
                   f"   CPU per request: console {spent_console:5.1f} ms, broker {spent_broker:5.1f} ms")

        print(f"\n== the same, each request with a sample due (waits {MIN_INTERVAL_S:g} s first: end offsets and "
              f"DescribeLogDirs, taken in the console's thread pool while the answer uses the last sample; and "
              f"Metadata over {METADATA_CACHE_S:g} s old, refreshed likewise), median of {args.repeat} ==")
        for label, path in (("GET /api/overview (sample of all partitions started)", "/api/overview"),
                            ("GET /api/topics (first page of 50: their sample started)", "/api/topics?page=1&size=50")):
            console_cpu, broker_cpu = cpu_seconds(console.pid), cpu_seconds(broker.pid)
            median_ms, worst_ms = timed_due(lambda p=path: fetch(url + p), args.repeat)
            spent_console = (cpu_seconds(console.pid) - console_cpu) / (args.repeat + 1) * 1000
            spent_broker = (cpu_seconds(broker.pid) - broker_cpu) / (args.repeat + 1) * 1000
            report(label, median_ms, worst_ms,
                   f"   CPU per request: console {spent_console:5.1f} ms, broker {spent_broker:5.1f} ms")
        kafka = KafkaSide(ConsoleSettings(bootstrap=bootstrap))
        metadata = kafka.metadata(fresh=True)
        some = sorted(metadata.topics)[:50]
        for label, topics in ((f"DescribeLogDirs of every partition ({len(metadata.topics):,} topics), in-process",
                               None), ("DescribeLogDirs of 50 topics, in-process", some)):
            cpu = time.process_time()
            median_ms, worst_ms = timed(lambda t=topics: leader_sizes(metadata, t, 60.0), args.repeat)
            report(label, median_ms, worst_ms, f"   CPU {(time.process_time() - cpu) / (args.repeat + 1) * 1000:5.1f} ms")

        browser = launch_browser(stack)
        if browser is not None:
            print(f"\n== the same pages in headless chromium, {args.repeat} loads each after a warm-up ==")
            print("  navigation start until the table is filled, by the page's own clock (performance.now(), "
                  "what a person at the browser waits):")
            for name, path in (("overview", "/"), ("topics", "/topics")):
                page_clock_rows(browser, url + path, name, args.repeat)
            browser_floor_rows(browser, url, args.repeat)
            print("  Playwright's wall clock around the same loads (goto, which waits for the load event, then "
                  "wait_for_selector; includes the harness's round trips to the browser):")
            harness_rows(browser, url, args.repeat)

        if not args.size_mib:
            return
        topic = "bench-large"
        create_topics(bootstrap, [topic], 4)
        begin = time.monotonic()
        count = fill_topic(bootstrap, topic, args.size_mib, args.record_bytes)
        print(f"\n# filled {topic}: {count:,} records of {args.record_bytes} B in 4 partitions "
              f"({args.size_mib} MiB of values) in {time.monotonic() - begin:.1f} s")
        print(f"== first page of messages of the {args.size_mib} MiB topic, median of {args.repeat} ==")
        for label, path in (("newest 50, merged across 4 partitions", "?start=newest&limit=50"),
                            ("oldest 50, merged across 4 partitions", "?start=oldest&limit=50"),
                            ("newest 50 of partition 0", "?start=newest&limit=50&partition=0"),
                            ("offset 30000 of partition 1, 50", "?start=offset&position=30000&partition=1&limit=50")):
            console_cpu = cpu_seconds(console.pid)
            median_ms, worst_ms = timed(lambda p=path: fetch(f"{url}/api/topics/{topic}/messages{p}"), args.repeat)
            spent = (cpu_seconds(console.pid) - console_cpu) / (args.repeat + 1) * 1000
            report(label, median_ms, worst_ms, f"   console CPU {spent:5.1f} ms per request")
        begin = time.perf_counter()
        answer = json.loads(fetch(f"{url}/api/topics/{topic}/messages?start=oldest&search=no-such-text"))
        print(f"  a search that matches nothing (bounded scan): {(time.perf_counter() - begin) * 1000:8.1f} ms, "
              f"read {answer['scanned']:,} records / {answer['scanned_bytes'] / 1048576:.1f} MiB, "
              f"stopped by {answer['bounds_hit'] or 'the end of the topic'}")
        if browser is not None:
            print(f"  the messages page in headless chromium (the newest 50 of all partitions, carried by the shell), "
                  f"navigation start until its first rows show, by the page's own clock, {args.repeat} loads each:")
            page_clock_rows(browser, f"{url}/topics/{topic}/messages", "messages", args.repeat)


if __name__ == "__main__":
    main()
