"""Kafka transactions end to end: real transactional clients (confluent-kafka, kafka-python, aiokafka)
against one real `roost up` broker (ZooKeeper mode, with its keeper) shared by the module.

- commit: a read_committed consumer sees every record of the transaction, on both partitions;
- abort: read_committed sees none, read_uncommitted sees them all;
- consume-transform-produce with send_offsets_to_transaction: the output and the group's offsets
  move together; while the offsets wait for their marker OffsetFetch(require_stable) answers
  UNSTABLE_OFFSET_COMMIT;
- fencing: a second producer with the same transactional.id fences the first, whose next
  operation fails fatally and whose records are never visible to read_committed;
- a producer that walks away mid-transaction: the coordinator aborts it after
  transaction.timeout.ms and read_committed consumers move past it;
- DescribeTransactions / ListTransactions, and `roost txn list|describe` over them;
- hanging transactions found and aborted by `roost txn find-hanging|abort`;
- the transaction series of /metrics, scraped;
- DeleteRecords stops at an undecided transaction's first record;
- the cleaner of a compacted topic removes aborted records and compacts committed ones.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import FAST_GROUPS
from tests.cli.kafka_cli import run_cli, run_json
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, start_roost
from tests.support.reading import read_to_end
from tests.support.scrape import Samples, scrape, value

TXN_PARTITIONS = "3"  # __transaction_state: small, created on the first transactional lookup
OFFSET_FETCH, REQUIRE_STABLE_VERSION = 9, 7
UNSTABLE_OFFSET_COMMIT = 88
WRITE_TXN_MARKERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 27, 65, 66
TRANSACTIONAL_ID_NOT_FOUND = 105
PRODUCE, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_RECORD = 0, 53, 87
INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED = 47, 52


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("txn-broker")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", "--metrics-port", "0", *FAST_GROUPS,
                        "--transaction.state.log.num.partitions", TXN_PARTITIONS,
                        "--transaction.abort.timed.out.transaction.cleanup.interval.ms", "300",
                        "--log.cleaner.backoff.ms", "200"],
                       expect=("kafka", "keeper", "metrics"))
    yield proc
    proc.stop()


def topic(node: RoostProcess, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def producer(node: RoostProcess, transactional_id: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": node.address("kafka"), "transactional.id": transactional_id,
                     "linger.ms": 5, **extra})


def read_all(node: RoostProcess, name: str, isolation: str, partitions: int = 2,
             until: Callable[[list[bytes]], bool] | None = None, timeout: float = 15.0) -> list[bytes]:
    """Every record of `name` visible with `isolation`, read to the end of each partition (for
    read_committed the end is the last stable offset)."""
    return read_to_end(node.address("kafka"), name, partitions, isolation, until=until, timeout=timeout)


def test_committed_transaction_is_seen_whole_by_read_committed(node: RoostProcess) -> None:
    name = topic(node)
    p = producer(node, f"commit-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(name, b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    committed = read_all(node, name, "read_committed")
    assert sorted(committed) == sorted(b"c%d" % i for i in range(10))


def test_aborted_transaction_is_invisible_to_read_committed_only(node: RoostProcess) -> None:
    name = topic(node)
    p = producer(node, f"abort-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(name, b"a%d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(name, b"kept", partition=0)
    p.commit_transaction(30)
    assert read_all(node, name, "read_committed") == [b"kept"]
    uncommitted = read_all(node, name, "read_uncommitted")
    assert sorted(uncommitted) == sorted([b"kept", *(b"a%d" % i for i in range(6))])


def offset_fetch(node: RoostProcess, group: str, name: str, partition: int) -> dict[str, Any]:
    client = WireClient(node.address("kafka"))
    try:
        answer = client.request(OFFSET_FETCH, REQUIRE_STABLE_VERSION, {
            "group_id": group, "topics": [{"name": name, "partition_indexes": [partition]}], "require_stable": True})
    finally:
        client.close()
    return answer["topics"][0]["partitions"][0]


def test_consume_transform_produce_commits_output_and_offsets_together(node: RoostProcess) -> None:
    source, sink = topic(node, 1), topic(node, 1)
    seed = Producer({"bootstrap.servers": node.address("kafka")})
    for i in range(20):
        seed.produce(source, b"in%d" % i, partition=0)
    assert seed.flush(10) == 0
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": node.address("kafka"), "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([source])
    p = producer(node, f"ctp-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    processed = 0
    checked_unstable = False
    deadline = time.monotonic() + 30
    try:
        while processed < 20 and time.monotonic() < deadline:
            batch = consumer.consume(5, 0.5)
            if not batch:
                continue
            p.begin_transaction()
            for message in batch:
                assert not message.error(), message.error()
                p.produce(sink, message.value().replace(b"in", b"out"), partition=0)
            p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                          consumer.consumer_group_metadata(), 30)
            if not checked_unstable:
                # The offsets are in __consumer_offsets, held until the COMMIT marker.
                assert offset_fetch(node, group, source, 0)["error_code"] == UNSTABLE_OFFSET_COMMIT
                checked_unstable = True
            p.commit_transaction(30)
            processed += len(batch)
        assert processed == 20
        # EndTxn is answered before the markers are written: stable a moment later.
        deadline = time.monotonic() + 10
        fetched = offset_fetch(node, group, source, 0)
        while fetched["error_code"] == UNSTABLE_OFFSET_COMMIT and time.monotonic() < deadline:
            time.sleep(0.05)
            fetched = offset_fetch(node, group, source, 0)
        assert (fetched["error_code"], fetched["committed_offset"]) == (0, 20)
    finally:
        consumer.close()
    out = read_all(node, sink, "read_committed", partitions=1)
    assert sorted(out) == sorted(b"out%d" % i for i in range(20))


def test_a_second_producer_with_the_same_id_fences_the_first(node: RoostProcess) -> None:
    name = topic(node)
    transactional_id = f"fence-{uuid.uuid4().hex[:6]}"
    first = producer(node, transactional_id)
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(name, b"zombie-1", partition=0)
    first.flush(10)
    second = producer(node, transactional_id)
    second.init_transactions(30)  # aborts the first's transaction, bumping the epoch
    with pytest.raises(KafkaException) as failure:
        first.produce(name, b"zombie-2", partition=1)
        first.commit_transaction(30)
    assert failure.value.args[0].fatal(), failure.value.args[0]
    second.begin_transaction()
    second.produce(name, b"new", partition=1)
    second.commit_transaction(30)
    assert read_all(node, name, "read_committed") == [b"new"]


def test_an_abandoned_transaction_is_aborted_after_its_timeout(node: RoostProcess) -> None:
    name = topic(node, 1)
    abandoned = producer(node, f"gone-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 2000})
    abandoned.init_transactions(30)
    abandoned.begin_transaction()
    abandoned.produce(name, b"never", partition=0)
    abandoned.flush(10)
    later = Producer({"bootstrap.servers": node.address("kafka")})
    later.produce(name, b"after", partition=0)
    assert later.flush(10) == 0
    # The open transaction holds the LSO below "after" until the coordinator aborts it.
    started = time.monotonic()
    seen = read_all(node, name, "read_committed", partitions=1, until=lambda v: b"after" in v, timeout=15)
    assert seen == [b"after"], f"after {time.monotonic() - started:.1f} s"


def test_kafka_python_transactional_producer(node: RoostProcess) -> None:
    from kafka import KafkaProducer

    name = topic(node, 1)
    p = KafkaProducer(bootstrap_servers=node.address("kafka"), transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(name, b"kp-aborted", partition=0)
        p.abort_transaction()
        p.begin_transaction()
        p.send(name, b"kp-committed", partition=0)
        p.commit_transaction()
    finally:
        p.close(5)
    assert read_all(node, name, "read_committed", partitions=1) == [b"kp-committed"]


def write_marker(node: RoostProcess, name: str, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
    client = WireClient(node.address("kafka"))
    try:
        answer = client.request(WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
            "coordinator_epoch": coordinator_epoch, "topics": [{"name": name, "partition_indexes": [0]}]}]})
    finally:
        client.close()
    return answer["markers"][0]["topics"][0]["partitions"][0]["error_code"]


def test_markers_from_an_older_coordinator_or_producer_epoch_are_refused(node: RoostProcess) -> None:
    """The leader's check before a marker enters the log (Kafka's appendEndTxnMarker)."""
    name = topic(node, 1)
    assert write_marker(node, name, 424242, 3, coordinator_epoch=5) == 0
    assert write_marker(node, name, 424242, 3, coordinator_epoch=4) == TRANSACTION_COORDINATOR_FENCED
    assert write_marker(node, name, 424242, 2, coordinator_epoch=5) == INVALID_PRODUCER_EPOCH
    assert write_marker(node, name, 424242, 4, coordinator_epoch=6) == 0


def wire(node: RoostProcess, api: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    client = WireClient(node.address("kafka"))
    try:
        return client.request(api, version, body)
    finally:
        client.close()


def test_describe_and_list_transactions(node: RoostProcess) -> None:
    name = topic(node)
    transactional_id = f"described-{uuid.uuid4().hex[:6]}"
    p = producer(node, transactional_id)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(name, b"x", partition=0)
    p.produce(name, b"y", partition=1)
    p.flush(10)
    described = wire(node, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id, "nobody-ever"]})
    mine, unknown = described["transaction_states"]
    assert (mine["error_code"], mine["transaction_state"]) == (0, "Ongoing")
    assert mine["topics"] == [{"topic": name, "partitions": [0, 1]}] and mine["transaction_start_time_ms"] > 0
    assert unknown["error_code"] == TRANSACTIONAL_ID_NOT_FOUND
    listed = wire(node, LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                                               "duration_filter": -1})
    assert listed["unknown_state_filters"] == ["Bogus"]
    assert transactional_id in {t["transactional_id"] for t in listed["transaction_states"]}
    listed_by_cli = run_json("txn", "list", "--state", "Ongoing", "-b", node.address("kafka"))
    assert {"transactional_id": transactional_id, "producer_id": mine["producer_id"], "state": "Ongoing",
            "coordinator": 0} in listed_by_cli
    described_by_cli = run_json("txn", "describe", transactional_id, "-b", node.address("kafka"))
    assert described_by_cli[0]["partitions"] == [f"{name}-0", f"{name}-1"]
    unknown_by_cli = run_cli("txn", "describe", "nobody-ever", "-b", node.address("kafka"))
    assert unknown_by_cli.returncode != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown_by_cli.stderr
    p.commit_transaction(30)
    deadline = time.monotonic() + 10
    state = ""
    while time.monotonic() < deadline and state != "CompleteCommit":
        state = wire(node, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})[
            "transaction_states"][0]["transaction_state"]
        time.sleep(0.05)
    assert state == "CompleteCommit"


def test_aiokafka_transactional_producer(node: RoostProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    name = topic(node, 1)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=node.address("kafka"), transactional_id=f"aio-{uuid.uuid4().hex[:6]}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(name, b"aio-committed", partition=0)
            await p.begin_transaction()
            await p.send_and_wait(name, b"aio-aborted", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
    assert read_all(node, name, "read_committed", partitions=1) == [b"aio-committed"]
    assert sorted(read_all(node, name, "read_uncommitted", partitions=1)) == [b"aio-aborted", b"aio-committed"]


def test_produce_takes_transactional_batches_only_with_a_transactional_id(node: RoostProcess) -> None:
    from roost.log.transactions import build_marker
    from roost.wire.kafka.records import build_batch

    name = topic(node, 1)
    batch = build_batch([(None, b"t")], timestamp_ms=int(time.time() * 1000), producer_id=777_777, producer_epoch=0,
                        base_sequence=0, is_transactional=True)
    marker = build_marker(777_777, 0, commit=True, coordinator_epoch=0, timestamp_ms=int(time.time() * 1000))

    def produce(records: bytes, transactional_id: str | None) -> int:
        answer = wire(node, PRODUCE, 9, {"transactional_id": transactional_id, "acks": 1, "timeout_ms": 5000,
                                         "topic_data": [{"name": name, "partition_data": [
                                             {"index": 0, "records": records}]}]})
        return answer["responses"][0]["partition_responses"][0]["error_code"]

    assert produce(bytes(batch), None) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(bytes(marker), "someone") == INVALID_RECORD  # markers come from the coordinator only
    assert produce(bytes(batch), "someone") == 0


def test_hanging_transactions_are_found_and_aborted_by_roost_txn(node: RoostProcess) -> None:
    """kafka-transactions.sh's find-hanging and abort: two producers leave transactional records on a
    partition without their coordinator knowing (a client that wrote before AddPartitionsToTxn),
    which pins the last stable offset; find-hanging names exactly those two, not a transaction its
    coordinator runs; abort by start offset ends the one that starts there, abort by ids with a
    stale epoch is refused, and once both are aborted read_committed readers move on."""
    from roost.wire.kafka.records import build_batch

    name = topic(node, 1)
    bootstrap = ("-b", node.address("kafka"))
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    stray = {777_100 + (uuid.uuid4().int % 1000) * 10 + i: 5 for i in range(2)}  # producer id: epoch
    for i, (pid, epoch) in enumerate(stray.items()):
        batch = build_batch([(None, b"stray-%d" % i)], timestamp_ms=an_hour_ago, producer_id=pid,
                            producer_epoch=epoch, base_sequence=0, is_transactional=True)
        answer = wire(node, PRODUCE, 9, {"transactional_id": f"stray-{i}", "acks": -1, "timeout_ms": 5000,
                                         "topic_data": [{"name": name, "partition_data": [
                                             {"index": 0, "records": bytes(batch)}]}]})
        assert answer["responses"][0]["partition_responses"][0]["base_offset"] == i
    first, second = stray
    known = producer(node, f"known-{uuid.uuid4().hex[:6]}")
    known.init_transactions(30)
    known.begin_transaction()
    known.produce(name, b"ok", partition=0)
    known.flush(10)

    hanging = run_json("txn", "find-hanging", "--topic", name, "--max-transaction-timeout", "0", *bootstrap)
    assert sorted((h["start_offset"], h["producer_id"], h["producer_epoch"]) for h in hanging) == [
        (0, first, 5), (1, second, 5)]
    assert all(h["duration_min"] >= 59 for h in hanging)
    on_broker = run_json("txn", "find-hanging", "--broker-id", "0", *bootstrap)  # the default: 15 minutes
    assert {(name, 0, first), (name, 1, second)} <= {(h["topic"], h["start_offset"], h["producer_id"])
                                                      for h in on_broker}
    assert run_cli("txn", "find-hanging", *bootstrap).returncode != 0  # --topic or --broker-id is required
    known.commit_transaction(30)
    assert read_all(node, name, "read_committed", partitions=1) == []  # the stray transactions pin the LSO

    run_json("txn", "abort", "--topic", name, "--partition", "0", "--start-offset", "1", *bootstrap)
    producers = run_json("txn", "describe-producers", "--topic", name, "--partition", "0", *bootstrap)
    open_at = {p["producer_id"]: p["current_txn_start_offset"] for p in producers}
    assert (open_at[first], open_at[second]) == (0, -1)
    stale = run_cli("txn", "abort", "--topic", name, "--partition", "0", "--producer-id", str(first),
                    "--producer-epoch", "4", "--coordinator-epoch", "-1", *bootstrap)
    assert stale.returncode != 0 and "INVALID_PRODUCER_EPOCH" in stale.stderr
    assert read_all(node, name, "read_committed", partitions=1) == []
    run_json("txn", "abort", "--topic", name, "--partition", "0", "--producer-id", str(first),
             "--producer-epoch", "5", "--coordinator-epoch", "-1", *bootstrap)
    assert read_all(node, name, "read_committed", partitions=1) == [b"ok"]
    assert sorted(read_all(node, name, "read_uncommitted", partitions=1)) == [b"ok", b"stray-0", b"stray-1"]
    assert run_json("txn", "find-hanging", "--topic", name, "--max-transaction-timeout", "0", *bootstrap) == []
    missing = run_cli("txn", "abort", "--topic", name, "--partition", "0", "--start-offset", "0", *bootstrap)
    assert missing.returncode != 0 and "no open transaction starts at offset 0" in missing.stderr


def scrape_until(node: RoostProcess, holds: Callable[[Samples], bool], timeout: float = 10.0) -> Samples:
    deadline = time.monotonic() + timeout
    samples = scrape(node.address("metrics"))
    while not holds(samples) and time.monotonic() < deadline:
        time.sleep(0.1)
        samples = scrape(node.address("metrics"))
    return samples


def test_metrics_show_the_lso_lag_the_coordinator_and_late_transactions(node: RoostProcess) -> None:
    """Kafka's LastStableOffsetLag per partition, PartitionsWithLateTransactionsCount and
    ProducerIdCount, the coordinator's load times, and Roost's counts of transactions by state,
    markers written and timeout aborts, as a transaction runs, commits, times out, hangs."""
    from roost.admin.hanging_transactions import abort_transaction
    from roost.admin.target import Target
    from roost.wire.kafka.records import build_batch

    name = topic(node, 1)
    at = {"topic": name, "partition": "0"}
    before = scrape(node.address("metrics"))
    p = producer(node, f"metered-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(name, b"m%d" % i, partition=0)
    p.flush(10)
    running = scrape(node.address("metrics"))
    assert value(running, "kafka_cluster_partition_laststableoffsetlag", **at) == 3
    assert value(running, "roost_transaction_coordinator_transactions", state="Ongoing") >= 1
    assert value(running, "kafka_server_replicamanager_produceridcount") >= 1
    assert value(running, "kafka_server_transaction_coordinator_metrics_partition_load_time_max") >= 0
    p.commit_transaction(30)
    markers = "roost_transaction_coordinator_markers_written_total"
    done = scrape_until(node, lambda s: value(s, "kafka_cluster_partition_laststableoffsetlag", **at) == 0
                        and value(s, markers) > value(before, markers))
    assert value(done, "kafka_cluster_partition_laststableoffsetlag", **at) == 0
    assert value(done, markers) >= value(before, markers) + 1

    aborts = "roost_transaction_coordinator_timeout_aborts_total"
    quitter = producer(node, f"quitter-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1000})
    quitter.init_transactions(30)
    quitter.begin_transaction()
    quitter.produce(name, b"left", partition=0)
    quitter.flush(10)
    timed_out = scrape_until(node, lambda s: value(s, aborts) > value(before, aborts))
    assert value(timed_out, aborts) == value(before, aborts) + 1

    late = "kafka_server_replicamanager_partitionswithlatetransactionscount"
    a_day_ago = int(time.time() * 1000) - 86_400_000
    stray = build_batch([(None, b"late")], timestamp_ms=a_day_ago, producer_id=888_888, producer_epoch=0,
                        base_sequence=0, is_transactional=True)
    wire(node, PRODUCE, 9, {"transactional_id": "late", "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": name, "partition_data": [{"index": 0, "records": bytes(stray)}]}]})
    hanging = scrape(node.address("metrics"))
    assert value(hanging, late) == value(before, late) + 1
    abort_transaction(Target(node.address("kafka")), name, 0, 888_888, 0, -1)
    assert value(scrape(node.address("metrics")), late) == value(before, late)


def test_the_next_transaction_waits_for_the_last_ones_markers_instead_of_concurrent_transactions(
        node: RoostProcess) -> None:
    """EndTxn is answered before the markers are written (Kafka's order); an AddPartitionsToTxn
    for the next transaction sent right behind it (pipelined on one connection) waits for them
    and the CompleteCommit record instead of answering CONCURRENT_TRANSACTIONS, which costs
    librdkafka a retry backoff per transaction."""
    name = topic(node, 2)
    transactional_id = f"back-to-back-{uuid.uuid4().hex[:6]}"
    client = WireClient(node.address("kafka"))
    try:
        deadline = time.monotonic() + 15
        while client.request(10, 1, {"key": transactional_id, "key_type": 1})["error_code"] != 0:
            assert time.monotonic() < deadline, "no transaction coordinator"
            time.sleep(0.1)
        init = client.request(22, 1, {"transactional_id": transactional_id, "transaction_timeout_ms": 60000})
        assert init["error_code"] == 0
        ids = {"v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": init["producer_id"],
               "v3_and_below_producer_epoch": init["producer_epoch"]}
        add = {**ids, "v3_and_below_topics": [{"name": name, "partitions": [0, 1]}]}
        end = {"transactional_id": transactional_id, "producer_id": init["producer_id"],
               "producer_epoch": init["producer_epoch"], "committed": True}
        codes = []
        for _ in range(5):
            added = client.request(24, 1, add)
            assert added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0
            end_id, end_frame = client.frame(26, 1, end)
            add_id, add_frame = client.frame(24, 1, add)
            client.send_raw(end_frame + add_frame)
            assert client.receive(26, 1, end_id)["error_code"] == 0
            codes += [p["partition_error_code"] for t in client.receive(24, 1, add_id)["results_by_topic_v3_and_below"]
                      for p in t["results_by_partition"]]
            assert client.request(26, 1, end)["error_code"] == 0
        assert codes == [0] * 10
    finally:
        client.close()


def test_delete_records_never_cuts_under_an_undecided_transaction(node: RoostProcess) -> None:
    """DeleteRecords stops at the last stable offset: cutting under an open transaction's first
    record would leave read_committed consumers part of it once it commits. Past it the request
    gets OFFSET_OUT_OF_RANGE (as past the high watermark) and "-1" means the LSO; once the
    transaction ends, the same request goes through."""
    name = topic(node, 1)
    plain = Producer({"bootstrap.servers": node.address("kafka")})
    for i in range(3):
        plain.produce(name, b"plain-%d" % i, partition=0)
    assert plain.flush(10) == 0
    p = producer(node, f"delete-under-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(name, b"undecided", partition=0)  # offset 3: the first unstable offset
    assert p.flush(10) == 0
    plain.produce(name, b"after", partition=0)  # offset 4: high watermark 5
    assert plain.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})

    def delete_to(offset: int) -> int:
        return admin.delete_records([TopicPartition(name, 0, offset)])[TopicPartition(name, 0)].result(15).low_watermark

    with pytest.raises(KafkaException, match="OFFSET_OUT_OF_RANGE"):
        delete_to(5)
    assert delete_to(-1) == 3  # as far as may go: the transaction's first record
    p.commit_transaction(30)
    assert read_all(node, name, "read_committed", partitions=1) == [b"undecided", b"after"]
    assert delete_to(5) == 5


def test_the_cleaner_removes_aborted_records_and_compacts_committed_ones(node: RoostProcess) -> None:
    """A compacted topic written by a real transactional producer: once the broker's cleaner has
    run, the aborted record is gone from the log (read_uncommitted no longer sees it), the
    committed value a later transaction replaced is gone too, and read_committed sees the latest
    committed value of every key."""
    name = f"txn-compacted-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})
    admin.create_topics([NewTopic(name, 1, 1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0"})])[name].result(15)
    p = producer(node, f"compacted-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    for records, commit in (([(b"k1", b"v1"), (b"k2", b"v1")], True), ([(b"k1", b"aborted")], False),
                            ([(b"k1", b"v2"), (b"k3", b"v1")], True)):
        p.begin_transaction()
        for key, record_value in records:
            p.produce(name, record_value, key=key, partition=0)
        assert p.flush(10) == 0
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    assert sorted(read_all(node, name, "read_uncommitted", partitions=1)) == [b"aborted", b"v1", b"v1", b"v1", b"v2"]

    deadline = time.monotonic() + 20  # segment.ms rolls the segment, the cleaner looks every 200 ms
    while sorted(read_all(node, name, "read_uncommitted", partitions=1)) != [b"v1", b"v1", b"v2"]:
        assert time.monotonic() < deadline, "the cleaner did not remove the aborted and replaced records"
        time.sleep(0.3)
    assert sorted(read_all(node, name, "read_committed", partitions=1)) == [b"v1", b"v1", b"v2"]
