"""The documentation's screenshots of the console (docs/screenshots/console-*.png), taken by the
browser tests (tests/console/test_console_browser.py) on their real cluster, so that the pictures
in the docs show the console as it is: data that looks like a shop's (orders as JSON with
headers, payments trickling in, a consumer group that lags, and one hostile message shown
escaped), then each main page in headless chromium. `scripts/console_screenshots.py` runs that
test alone. ROOST_SCREENSHOTS_DIR writes them elsewhere."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
# (file name, path, what must show before the picture is taken, then how long to let charts fill)
SHOTS = (("overview", "/", "#brokers tbody tr", 6000), ("topics", "/topics", "#topics tbody tr", 1500),
         ("topic", "/topics/orders", "#partitions tbody tr", 800),
         ("messages", "/topics/orders/messages", "#messages tbody tr", 800),
         ("group", "/groups/billing", "#offsets tbody tr", 2500),
         ("keeper", "/keeper?path=/brokers/ids/1", "#node-stat tbody tr", 800))


def output_dir() -> Path:
    return Path(os.environ.get("ROOST_SCREENSHOTS_DIR") or ROOT / "docs" / "screenshots")


def seed(bootstrap: str) -> None:
    """Topics, 240 JSON orders with headers, a hostile last message, and group `billing` 90 behind."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("orders", 6, 3), NewTopic("payments", 3, 3), NewTopic("audit-log", 1, 3)]
    topics += [NewTopic(f"service-{i:02d}.events", 2, 2) for i in range(4)]
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap})
    for number in range(240):
        order = {"order": 1000 + number, "customer": f"c-{number % 17}", "amount": round(9.5 + number * 1.25, 2),
                 "items": [{"sku": f"sku-{number % 5}", "qty": 1 + number % 3}]}
        producer.produce("orders", key=f"c-{number % 17}", value=json.dumps(order),
                         headers=[("source", b"web"), ("trace-id", f"t{number:05d}".encode())])
    assert producer.flush(30) == 0
    time.sleep(0.05)  # the newest message: hostile bytes, shown escaped
    producer.produce("orders", key=b"<img src=x onerror=alert(1)>", value=b"<script>alert('hi')</script> \xff\xfe")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 150 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert read >= 150, f"the group read {read} of 150"


def keep_producing(bootstrap: str, stop: threading.Event) -> None:
    """A steady trickle (about 40 messages/s of 300 bytes), so that the rates and charts show something."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    number = 0
    while not stop.wait(0.05):
        payment = {"payment": number, "amount": round(5 + number % 97 * 0.75, 2), "note": "x" * 240}
        producer.produce("payments", key=f"p-{number % 11}", value=json.dumps(payment))
        producer.produce("service-03.events", value=json.dumps({"event": number, "kind": "tick"}))
        producer.poll(0)
        number += 1
    producer.flush(10)


# Pages whose picture their own browser test takes, at the moment their figures are known.
TAKEN_BY_THEIR_TESTS = ("share-group", "link", "schema", "schema-messages", "balancer")


def shoot(page: Any, name: str) -> Path:
    """One page as it is now (the share group, link, schema and balancer pages are taken by their own
    tests, at the moment their figures are known), as docs/screenshots/console-NAME.png."""
    assert name in TAKEN_BY_THEIR_TESTS, name
    out = output_dir()
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"console-{name}.png"
    page.screenshot(path=str(target), full_page=True)
    return target


def take(page: Any, console_url: str, out: Path, wait_ms: int = 30_000) -> list[Path]:
    """Each main page, once what it must show is there; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, path, ready, settle_ms in SHOTS:
        page.goto(console_url + path)
        page.wait_for_selector(ready, timeout=wait_ms)
        if name == "group":
            page.locator("#reset input[name=to]").fill("-20")
            page.locator("#reset button[type=submit]").click()
        if name == "messages":
            page.locator("#decode").select_option("json")
            page.locator("#limit").fill("6")
            page.locator("#browse-button").click()
        page.wait_for_timeout(settle_ms)
        target = out / f"console-{name}.png"
        page.screenshot(path=str(target))
        written.append(target)
    return written
