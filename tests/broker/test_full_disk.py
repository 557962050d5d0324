"""A log directory's disk fills during acks=all writes, on a real `roost up` process whose second
log directory is a 16 MiB tmpfs (tests/support/faultfs.small_disk: a real filesystem, the kernel's
own ENOSPC).

Before it fills, /metrics flags the directory (roost_log_dir_free_space_low). When an append hits
ENOSPC, the directory goes offline as on any I/O error (Kafka's rule): its partition answers
KAFKA_STORAGE_ERROR, the other directory keeps serving, nothing acknowledged is lost. Space freed,
the broker is restarted (an offline directory is checked again only at start-up, as in Kafka) and
the partition serves again with every acknowledged record.
"""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaProducer
from kafka.errors import KafkaStorageError, KafkaTimeoutError

from tests.broker.test_log_dirs import (
    KAFKA_STORAGE_ERROR,
    assert_offline,
    create_topic,
    describe,
    placement,
    read_all,
)
from tests.support.faultfs import fill, small_disk
from tests.support.procs import RoostProcess, start_roost
from tests.support.scrape import scrape, value

RECORD = 64 * 1024


def start(first: Path, second: Path) -> RoostProcess:
    return start_roost(["up", "--data-dir", str(first), "--kafka-port", "0", "--metrics-port", "0",
                        "--set", f"log.dirs={first},{second}", "--set", "message.max.bytes=2000000"],
                       expect=("kafka", "keeper", "metrics"))


def low(proc: RoostProcess, directory: Path) -> float:
    return value(scrape(proc.address("metrics")), "roost_log_dir_free_space_low", directory=str(directory))


def test_a_full_log_directory_goes_offline_loses_nothing_and_serves_again_after_space_and_a_restart(
        tmp_path: Path) -> None:
    first = tmp_path / "data"
    acked: dict[int, list[bytes]] = {}
    with small_disk(tmp_path / "small-disk", 16) as second:
        proc = start(first, second)
        try:
            bootstrap = proc.address("kafka")
            create_topic(bootstrap, "filling", 2)
            where = placement(describe(bootstrap), "filling")
            healthy = next(i for i, (d, _) in where.items() if d != str(second))
            full = next(i for i, (d, _) in where.items() if d == str(second))
            acked = {healthy: [], full: []}
            assert low(proc, second) == 0
            filler = fill(second, leave_bytes=1 << 20)  # 1 MiB of 16 left: below the 10 % warning
            assert low(proc, second) == 1, "no warning before the disk is full"
            producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks="all", max_request_size=2_000_000,
                                     request_timeout_ms=5000, delivery_timeout_ms=8000)
            refused = None
            try:
                for n in range(60):  # bounded: 60 x 64 KiB is past the 1 MiB left
                    record = f"{n:04d}".encode().ljust(RECORD, b".")
                    try:
                        producer.send("filling", record, partition=full).get(timeout=15)
                    except (KafkaStorageError, KafkaTimeoutError) as error:
                        refused = error
                        break
                    acked[full].append(record)
                for n in range(20):  # the other directory keeps serving
                    record = f"healthy-{n}".encode()
                    producer.send("filling", record, partition=healthy).get(timeout=30)
                    acked[healthy].append(record)
            finally:
                producer.close(10)
            assert isinstance(refused, KafkaStorageError), f"the full disk was never refused: {refused!r}"
            assert acked[full], "nothing fitted before the disk filled"
            assert_offline(bootstrap, "filling", full)
            assert describe(bootstrap)[str(second)]["error_code"] == KAFKA_STORAGE_ERROR
            samples = scrape(proc.address("metrics"))
            assert value(samples, "kafka_log_logmanager_logdirectoryoffline", logdirectory=str(second)) == 1
            assert value(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 1
        finally:
            proc.stop()
        filler.unlink()  # space again; the directory comes back with the restart
        proc = start(first, second)
        try:
            bootstrap = proc.address("kafka")
            assert describe(bootstrap)[str(second)]["error_code"] == 0
            producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks="all")
            try:
                producer.send("filling", b"again", partition=full).get(timeout=30)
                acked[full].append(b"again")
            finally:
                producer.close(10)
            stored = read_all(bootstrap, "filling", (healthy, full))
            assert low(proc, second) == 0
        finally:
            proc.stop()
    for index, values in acked.items():
        kept = [record for (p, _o), record in sorted(stored.items()) if p == index]
        assert kept == values, f"partition {index}: {len(values)} acknowledged, {len(kept)} read back in order"
