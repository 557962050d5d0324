"""The schema registry and REST proxy of a real `roost up` node on loopback: schema lookups per
second on a registered id (GET /schemas/ids/{id}, one keep-alive connection), registered schemas
per second (each a produce with acks=all read back from `_schemas`), and records per second
produced through the REST proxy (v3, one record per request and a stream of records in one
request) against confluent-kafka's native producer.

Prints figures with their conditions; never asserts.

    .venv/bin/python bench/registry_bench.py
    .venv/bin/python bench/registry_bench.py --lookups 5000 --registrations 300 --records 5000

The machine is shared and noisy: compare rows of the same run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", category=DeprecationWarning)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from tests.support.procs import start_roost  # noqa: E402


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s ({count} in {seconds:.2f} s)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lookups", type=int, default=3000)
    parser.add_argument("--registrations", type=int, default=200)
    parser.add_argument("--records", type=int, default=3000)
    args = parser.parse_args()
    print(f"{platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as directory:
        node = start_roost(["up", "--data-dir", directory, "--kafka-port", "0", "--schema-registry-port", "0",
                            "--set", "group.initial.rebalance.delay.ms=0"], expect=("kafka", "schema registry"),
                           timeout=120)
        try:
            host, port = node.listeners["schema registry"]
            url = f"http://{host}:{port}"
            client = SchemaRegistryClient({"url": url})
            schema = json.dumps({"type": "record", "name": "Bench", "fields": [{"name": "n", "type": "long"}]})
            schema_id = client.register_schema("bench-value", Schema(schema, "AVRO"))

            connection = http.client.HTTPConnection(host, port, timeout=30)
            started = time.perf_counter()
            for _ in range(args.lookups):
                connection.request("GET", f"/schemas/ids/{schema_id}")
                reply = connection.getresponse()
                reply.read()
                assert reply.status == 200
            print(f"lookups of a registered id (server, keep-alive):  {rate(args.lookups, time.perf_counter() - started)}")

            started = time.perf_counter()
            for n in range(args.registrations):
                client.register_schema(f"bench-{n}", Schema(json.dumps(
                    {"type": "record", "name": f"B{n}", "fields": [{"name": "n", "type": "long"}]}), "AVRO"))
            print(f"registrations (distinct schemas, one client):     "
                  f"{rate(args.registrations, time.perf_counter() - started)}")

            bootstrap = node.address("kafka")
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(30)
            cluster = json.loads(_get(host, port, "/v3/clusters"))["data"][0]["cluster_id"]
            path = f"/v3/clusters/{cluster}/topics/bench/records"
            one = json.dumps({"value": {"type": "JSON", "data": {"n": 1, "pad": "x" * 40}}})
            count = max(1, args.records // 10)
            started = time.perf_counter()
            for _ in range(count):
                connection.request("POST", path, one, {"Content-Type": "application/json"})
                reply = connection.getresponse()
                reply.read()
                assert reply.status == 200
            print(f"REST proxy, one record per request:               {rate(count, time.perf_counter() - started)}")
            stream = "\n".join([one] * args.records)
            started = time.perf_counter()
            connection.request("POST", path, stream, {"Content-Type": "application/json"})
            reply = connection.getresponse()
            reply.read()
            assert reply.status == 200
            print(f"REST proxy, a stream of records in one request:   "
                  f"{rate(args.records, time.perf_counter() - started)}")

            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
            started = time.perf_counter()
            for _ in range(args.records):
                producer.produce("bench", one.encode())
                producer.poll(0)
            producer.flush(60)
            print(f"native confluent-kafka producer (acks=all):       "
                  f"{rate(args.records, time.perf_counter() - started)}")
        finally:
            node.stop()


def _get(host: str, port: int, path: str) -> bytes:
    connection = http.client.HTTPConnection(host, port, timeout=30)
    connection.request("GET", path)
    return connection.getresponse().read()


if __name__ == "__main__":
    main()
