r"""`roost produce` and `roost consume` as a user runs them: subprocesses against a real broker,
cross-checked with independent clients (confluent-kafka used directly, and kcat)."""

from __future__ import annotations

import base64
import json
import shutil
import signal
import subprocess
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.procs import ROOST, stop_process, wait_for

RUN_TIMEOUT_S = 90  # against hangs only


def new_topic(bootstrap: str, partitions: int = 3, config: dict[str, str] | None = None) -> str:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        future.result(30)
    return name


def roost(bootstrap: str | None, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    target = ["-b", bootstrap] if bootstrap else []
    return subprocess.run([*ROOST, *args, *target], input=stdin, capture_output=True, timeout=RUN_TIMEOUT_S)


def roost_all(bootstrap: str | None, *runs: tuple[str, ...] | tuple[tuple[str, ...], bytes]
              ) -> list[subprocess.CompletedProcess[bytes]]:
    """Several independent `roost` runs at once (each a tuple of arguments, or (arguments, stdin)):
    the interpreter's start-up is most of a short run, and two cores share it."""
    target = ["-b", bootstrap] if bootstrap else []
    started = []
    for run in runs:
        args, stdin = (run[0], run[1]) if isinstance(run[0], tuple) else (run, b"")
        popen = subprocess.Popen([*ROOST, *args, *target], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        started.append((popen, args, stdin))
    results = []
    for popen, args, stdin in started:
        try:
            stdout, stderr = popen.communicate(stdin, timeout=RUN_TIMEOUT_S)
        finally:
            stop_process(popen)
        results.append(subprocess.CompletedProcess(args, popen.returncode, stdout, stderr))
    return results


def ok(result: subprocess.CompletedProcess[bytes]) -> bytes:
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"Traceback" not in result.stderr
    return result.stdout


def read_directly(bootstrap: str, topic: str, expected: int) -> list:
    """The topic's records through confluent-kafka, not through roost (every partition from its
    start, without a group), after waiting for at least `expected` of them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    messages: list = []
    at_end: set[int] = set()
    try:
        def enough() -> bool:
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    messages.append(message)
                    at_end.discard(message.partition())
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
            return len(messages) >= expected and at_end == set(partitions)
        wait_for(enough, timeout=60, what=f"{expected} records in {topic}")
    finally:
        consumer.close()
    return messages


def produce_directly(bootstrap: str, topic: str, records: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(30) == 0


def test_ten_thousand_keyed_lines_come_back_exactly(bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(bootstrap)
    lines = [f"key-{i % 997} value {i} ünïcode and spaces" for i in range(10_000)]
    path = tmp_path / "input.txt"
    path.write_text("".join(line + "\n" for line in lines))
    ok(roost(bootstrap, "produce", topic, "-f", r"%k %v\n", "--file", str(path), "--progress"))

    # The independent reader: confluent-kafka directly.
    direct = read_directly(bootstrap, topic, 10_000)
    assert sorted(f"{m.key().decode()} {m.value().decode()}" for m in direct) == sorted(lines)

    # --json: every record once, keys kept per partition in the order they were sent.
    documents = [json.loads(line) for line in ok(roost(bootstrap, "consume", topic, "-o", ":end", "--json")).splitlines()]
    assert len(documents) == 10_000
    assert sorted(f"{d['key']} {d['value']}" for d in documents) == sorted(lines)
    assert {d["topic"] for d in documents} == {topic}
    for partition in range(3):
        offsets = [d["offset"] for d in documents if d["partition"] == partition]
        assert offsets == list(range(len(offsets)))
        values = [int(d["value"].split()[1]) for d in documents if d["partition"] == partition]
        assert values == sorted(values)
    assert all(d["timestamp"] == datetime.fromtimestamp(d["timestamp_ms"] / 1000, UTC)
               .strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" for d in documents[:50])

    # The same format reads and prints: what produce read, consume prints.
    printed = ok(roost(bootstrap, "consume", topic, "-e", "-f", r"%k %v\n")).decode()
    assert sorted(printed.splitlines()) == sorted(lines)

    if shutil.which("kcat"):
        kcat = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", "%k %s\n"],
                              capture_output=True, timeout=RUN_TIMEOUT_S)
        assert kcat.returncode == 0, kcat.stderr
        assert sorted(kcat.stdout.decode().splitlines()) == sorted(lines)


def test_a_time_range_returns_exactly_the_records_stamped_in_it(bootstrap: str) -> None:
    topic = new_topic(bootstrap, partitions=2)
    base = 1_795_428_000_000  # 2026-11-23T10:00:00Z
    produce_directly(bootstrap, topic, [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp": base + i * 1000, "partition": i % 2}
        for i in range(20)])

    specs = [f"@{base + 5000}:{base + 12000}", "@2026-11-23T10:00:05Z:7s",
             "@2026-11-23T10:00:05.001Z:2026-11-23T10:00:07Z", f"@:{base + 3000}", "@2026-11-23T10:00:17Z:end",
             "@-1h:end"]
    results = roost_all(bootstrap, *[("consume", topic, "-o", spec, "-f", r"%v\n") for spec in specs],
                        ("consume", topic, "-o", f"@{base + 2000}:{base + 3000}", "-f", r"%T %d %v\n"))
    found = [sorted(ok(result).decode().split(), key=lambda v: int(v[1:])) for result in results[:-1]]
    assert found == [
        [f"v{i}" for i in range(5, 12)],
        [f"v{i}" for i in range(5, 12)],
        ["v6"],
        ["v0", "v1", "v2"],
        ["v17", "v18", "v19"],
        [],  # the records are stamped days ago
    ]
    assert ok(results[-1]).decode() == f"{base + 2000} 2026-11-23T10:00:02.000Z v2\n"


def test_headers_tombstones_keys_partition_and_echo(bootstrap: str) -> None:
    topic = new_topic(bootstrap)
    result = ok(roost(bootstrap, "produce", topic, "-f", r"%h %v\n", "-k", "fixed", "-H", "source=cli",
                      "-H", "run=7", "-H", "run=8", "-Z", "NULL", "-p", "1", "--acks", "1",
                      "-z", "zstd", "-o", r"partition %p offset %o key %k %h\n", stdin=b"trace=abc first\n second\nx=1,y NULL\n"))
    assert result.decode().splitlines() == [
        "partition 1 offset 0 key fixed source=cli,run=7,run=8,trace=abc",
        "partition 1 offset 1 key fixed source=cli,run=7,run=8",
        "partition 1 offset 2 key fixed source=cli,run=7,run=8,x=1,y"]

    direct = sorted(read_directly(bootstrap, topic, 3), key=lambda m: m.offset())
    assert [(m.partition(), m.key(), m.value()) for m in direct] == [
        (1, b"fixed", b"first"), (1, b"fixed", b"second"), (1, b"fixed", None)]
    assert [m.headers() for m in direct] == [
        [("source", b"cli"), ("run", b"7"), ("run", b"8"), ("trace", b"abc")],
        [("source", b"cli"), ("run", b"7"), ("run", b"8")],
        [("source", b"cli"), ("run", b"7"), ("run", b"8"), ("x", b"1"), ("y", None)]]

    documents = [json.loads(line) for line in ok(roost(bootstrap, "consume", topic, "-e", "-f", "json")).splitlines()]
    assert documents[2]["value"] is None and documents[2]["key"] == "fixed"
    assert documents[2]["headers"] == [{"key": "source", "value": "cli"}, {"key": "run", "value": "7"},
                                       {"key": "run", "value": "8"}, {"key": "x", "value": "1"},
                                       {"key": "y", "value": None}]
    printed = ok(roost(bootstrap, "consume", topic, "-e", "-p", "1", "-Z", "<null>", "-f", r"%p:%o %h %v\n"))
    assert printed.decode().splitlines()[2] == "1:2 source=cli,run=7,run=8,x=1,y <null>"

    # What `consume --json` printed, `produce -f json` sends again: a copy of the topic.
    copy = new_topic(bootstrap)
    ok(roost(bootstrap, "produce", copy, "-f", "json", stdin=ok(roost(bootstrap, "consume", topic, "-e", "--json"))))
    copied = sorted(read_directly(bootstrap, copy, 3), key=lambda m: m.offset())
    assert [(m.partition(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in copied] == \
        [(m.partition(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in direct]


def test_every_compression_codec_delivers(bootstrap: str) -> None:
    codecs = ["gzip", "snappy", "lz4"]  # zstd: in test_headers_tombstones_keys_partition_and_echo
    topics = {codec: new_topic(bootstrap, partitions=1) for codec in codecs}
    for result in roost_all(bootstrap, *[(("produce", topics[c], "-z", c), b"a\nb\n") for c in codecs]):
        ok(result)
    for result in roost_all(bootstrap, *[("consume", topics[c], "-o", ":end") for c in codecs]):
        assert ok(result) == b"a\nb\n"


def test_non_utf8_values_survive_and_print_escaped(bootstrap: str) -> None:
    topic = new_topic(bootstrap, partitions=1)
    binary = b"\xff\xfe\x00 raw \x80"
    produce_directly(bootstrap, topic, [{"key": b"\xc3\x28", "value": binary}, {"value": "ok ✓".encode()}])

    as_json, as_text, as_hex, as_base64 = roost_all(
        bootstrap, ("consume", topic, "-e", "--json"), ("consume", topic, "-e"),
        ("consume", topic, "-e", "-f", r"%v{hex}\n"), ("consume", topic, "-e", "-f", r"%v{base64}\n"))
    documents = [json.loads(line) for line in ok(as_json).splitlines()]
    assert documents[0]["value_encoding"] == "base64" and base64.b64decode(documents[0]["value"]) == binary
    assert documents[0]["key_encoding"] == "base64" and base64.b64decode(documents[0]["key"]) == b"\xc3\x28"
    assert documents[1]["value"] == "ok ✓" and "value_encoding" not in documents[1]

    assert ok(as_text) == b"\\xff\\xfe\x00 raw \\x80\n" + "ok ✓\n".encode()
    assert ok(as_hex).split()[0] == binary.hex().encode()

    # Binary in through base64, checked by the independent client.
    sent = ok(as_base64)
    copy = new_topic(bootstrap, partitions=1)
    ok(roost(bootstrap, "produce", copy, "-f", r"%v{base64}\n", stdin=sent))
    assert [m.value() for m in read_directly(bootstrap, copy, 2)] == [binary, "ok ✓".encode()]


def test_partitions_limits_regex_and_groups(bootstrap: str) -> None:
    stem = f"cli-rx-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(f"{stem}-a", 2, 1), NewTopic(f"{stem}-b", 1, 1)]).values():
        future.result(30)
    produce_directly(bootstrap, f"{stem}-a", [{"value": f"a{i}".encode(), "partition": i % 2} for i in range(6)])
    produce_directly(bootstrap, f"{stem}-b", [{"value": f"b{i}".encode()} for i in range(4)])

    results = roost_all(
        bootstrap,
        ("consume", f"{stem}-.*", "-r", "-e", "-f", r"%t %v\n"),
        ("consume", f"{stem}-a,{stem}-b", "-e", "-p", "0"),
        ("consume", f"{stem}-b", "-n", "2"),
        ("consume", f"{stem}-b", "-o", "-2", "-e"),
        ("consume", f"{stem}-b", "-o", "+1", "-n", "1"),
        ("consume", f"{stem}-b", "-o", "1:3"),
        ("consume", f"{stem}-b", "-o", "end", "-e"),
    )
    both, listed, *rest = [ok(result).decode() for result in results]
    assert sorted(both.splitlines()) == sorted([f"{stem}-a a{i}" for i in range(6)] + [f"{stem}-b b{i}" for i in range(4)])
    assert sorted(listed.split()) == ["a0", "a2", "a4", "b0", "b1", "b2", "b3"]
    assert rest == ["b0\nb1\n", "b2\nb3\n", "b1\n", "b1\nb2\n", ""]

    group = f"g-{uuid.uuid4().hex[:6]}"
    assert ok(roost(bootstrap, "consume", f"{stem}-b", "-g", group, "-n", "3")) == b"b0\nb1\nb2\n"
    assert ok(roost(bootstrap, "consume", f"{stem}-b", "-g", group, "-e")) == b"b3\n"  # from the commit
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        assert [tp.offset for tp in checker.committed([TopicPartition(f"{stem}-b", 0)], timeout=30)] == [4]
    finally:
        checker.close()


def test_typed_lines_are_sent_as_they_come(bootstrap: str) -> None:
    """produce does not wait for the end of its input: each line is sent, and its echo printed,
    while stdin stays open (as when someone types at a terminal)."""
    topic = new_topic(bootstrap, partitions=1)
    produce = subprocess.Popen([*ROOST, "produce", topic, "-b", bootstrap, "-o", r"offset %o %v\n"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    echoed: list[bytes] = []
    assert produce.stdout is not None and produce.stdin is not None
    reader = threading.Thread(target=lambda: echoed.extend(iter(produce.stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        for number, word in enumerate([b"one", b"two"]):
            produce.stdin.write(word + b"\n")
            produce.stdin.flush()
            wait_for(lambda n=number: len(echoed) > n, timeout=30, what=f"the echo of line {number + 1}")
        assert echoed == [b"offset 0 one\n", b"offset 1 two\n"]
        produce.stdin.close()
        assert produce.wait(RUN_TIMEOUT_S) == 0
    finally:
        stop_process(produce)
        reader.join(5)


def test_ctrl_c_while_waiting_for_records_exits_cleanly(bootstrap: str) -> None:
    """Plain and as a group member: status 130, nothing on stderr, and the member commits what it
    printed (the record is visible at once: the tests run with PYTHONUNBUFFERED, so a Ctrl-C
    landing between printing a record and storing its offset would lose the commit)."""
    topic = new_topic(bootstrap, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    produce_directly(bootstrap, topic, [{"value": b"first"}])
    consumes = [subprocess.Popen([*ROOST, "consume", topic, "-b", bootstrap, *extra], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for extra in ([], ["-g", group])]
    try:
        for consume in consumes:
            assert consume.stdout is not None
            assert consume.stdout.readline() == b"first\n"  # it is reading and now waits for more
        for consume in consumes:
            consume.send_signal(signal.SIGINT)
        errors = [consume.communicate(timeout=RUN_TIMEOUT_S)[1] for consume in consumes]
    finally:
        for consume in consumes:
            stop_process(consume)
    assert [consume.returncode for consume in consumes] == [130, 130]
    assert errors == [b"", b""]
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        assert [tp.offset for tp in checker.committed([TopicPartition(topic, 0)], timeout=30)] == [1]
    finally:
        checker.close()


def test_bad_input_is_one_line_and_a_nonzero_exit(bootstrap: str) -> None:
    topic = new_topic(bootstrap, partitions=1)
    runs = [
        (("consume", topic, "-o", "@soon"), "bad offset '@soon'"),
        (("consume", topic, "-f", "%v{rot13}"), "bad format '%v{rot13}': unknown modifier"),
        (("consume", "no-such-topic", "-e"), "unknown topic 'no-such-topic'"),
        ((("produce", "no-such-topic"), b"x\n"), "unknown topic 'no-such-topic'"),
        (("consume", topic, "-p", "5", "-e"), "has no partition 5"),
        (("consume", topic, "-g", "g", "-o", "3"), "with -g, -o may only be start or end"),
        (("produce", topic, "-f", "%k%v"), "put a delimiter"),
        ((("produce", topic, "-f", r"%p %v\n"), b"0 a\nzero b\n"), "input record 2: %p: expected a whole number"),
        ((("produce", topic, "-X", "no.such.setting=1"), b"x\n"), "client settings"),
    ]
    unreachable = [
        (("consume", topic, "--timeout", "1"), "cannot reach the cluster at 127.0.0.1:1 within 1s"),
        ((("produce", topic, "--timeout", "1"), b"x\n"), "cannot reach the cluster at 127.0.0.1:1 within 1s"),
    ]
    cases = [*zip(roost_all(bootstrap, *(run for run, _ in runs)), (m for _, m in runs), strict=True),
             *zip(roost_all("127.0.0.1:1", *(run for run, _ in unreachable)), (m for _, m in unreachable),
                  strict=True)]
    for result, message in cases:
        stderr = result.stderr.decode()
        assert result.returncode == 1, (message, stderr)
        assert stderr.startswith("roost: ") and message in stderr, (message, stderr)
        assert stderr.count("\n") == 1, stderr  # one line, no traceback
    # The good record before the bad line was still sent.
    assert [m.value() for m in read_directly(bootstrap, topic, 1)] == [b"a"]


def test_a_delivery_the_broker_refuses_is_reported_and_fails_the_run(bootstrap: str) -> None:
    topic = new_topic(bootstrap, partitions=1, config={"max.message.bytes": "2000"})
    result = roost(bootstrap, "produce", topic, "--timeout", "10", stdin=b"x" * 5000 + b"\n")
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert f"record not delivered to {topic}[0]" in stderr and "1 of 1 records not delivered" in stderr, stderr
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        assert watcher.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (0, 0)
    finally:
        watcher.close()


def test_help_lists_the_commands() -> None:
    listing = subprocess.run([*ROOST, "--help"], capture_output=True, timeout=RUN_TIMEOUT_S, text=True).stdout
    assert "produce" in listing and "consume" in listing
