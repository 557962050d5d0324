"""Takes the README's screenshots of the web console (docs/screenshots/*.png).

It starts `roost up --brokers 3 --keepers 3` in a temporary directory with its console on a free
port, puts some data in (topics, JSON messages, a consumer group that lags), opens each main page
in Debian's headless chromium through Playwright, saves a screenshot, and stops the cluster.

    .venv/bin/python scripts/console_screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
READY = re.compile(r"cluster ready: bootstrap servers (\S+); zookeeper.connect (\S+)")
CONSOLE = re.compile(r"console listening on (\S+)")


def start_cluster(data_dir: Path) -> tuple[subprocess.Popen[str], str, str]:
    process = subprocess.Popen([sys.executable, "-m", "roost.cli.main", "up", "--brokers", "3", "--keepers", "3",
                                "--data-dir", str(data_dir), "--console-port", "0", "--log-level", "WARNING"],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    bootstrap = console = ""
    deadline = time.monotonic() + 120
    for line in process.stdout:
        if found := READY.search(line):
            bootstrap = found[1]
        if found := CONSOLE.search(line):
            console = f"http://{found[1]}"
        if (bootstrap and console) or time.monotonic() > deadline:
            break
    if not (bootstrap and console):
        process.kill()
        raise SystemExit("the cluster did not start")
    return process, bootstrap, console


def seed(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("orders", 6, 3), NewTopic("payments", 3, 3), NewTopic("audit-log", 1, 3)]
    topics += [NewTopic(f"service-{i:02d}.events", 2, 2) for i in range(12)]
    for future in admin.create_topics(topics).values():
        future.result(30)
    time.sleep(2)
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
    deadline = time.monotonic() + 30
    while read < 150 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read += 1
    consumer.commit(asynchronous=False)
    consumer.close()


def keep_producing(bootstrap: str, stop: threading.Event) -> None:
    """A steady trickle (about 40 messages/s of 300 bytes to two topics), so that the rates and the
    charts in the screenshots have something to show."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    number = 0
    while not stop.wait(0.05):
        payment = {"payment": number, "amount": round(5 + number % 97 * 0.75, 2), "note": "x" * 240}
        producer.produce("payments", key=f"p-{number % 11}", value=json.dumps(payment))
        producer.produce("service-03.events", value=json.dumps({"event": number, "kind": "tick"}))
        producer.poll(0)
        number += 1
    producer.flush(10)


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as directory:
        process, bootstrap, console = start_cluster(Path(directory))
        try:
            seed(bootstrap)
            stop = threading.Event()
            trickle = threading.Thread(target=keep_producing, args=(bootstrap, stop), daemon=True)
            trickle.start()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                shots = [("overview", "/", 15000), ("topics", "/topics", 4000), ("topic", "/topics/orders", 1500),
                         ("messages", "/topics/orders/messages", 2000), ("group", "/groups/billing", 6000),
                         ("keeper", "/keeper?path=/brokers/ids/1", 2000)]
                for name, path, settle_ms in shots:
                    page.goto(console + path)
                    if name == "group":
                        page.locator("#reset input[name=to]").fill("-20")
                        page.locator("#reset button[type=submit]").click()
                    if name == "messages":
                        page.locator("#decode").select_option("json")
                        page.locator("#limit").fill("6")
                        page.locator("#browse-button").click()
                    page.wait_for_timeout(settle_ms)
                    page.screenshot(path=str(out / f"console-{name}.png"))
                    print(f"wrote {out / f'console-{name}.png'}")
                browser.close()
            stop.set()
            trickle.join(30)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
