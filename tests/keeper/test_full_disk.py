"""A keeper whose data directory is a small tmpfs that fills during writes (a real filesystem, the
kernel's own ENOSPC; tests/support/faultfs.small_disk).

Before it fills, /metrics flags the directory (roost_keeper_data_dir_free_space_low). The write that
hits ENOSPC is not acknowledged (its client gets ConnectionLoss, as after any failed write), the
member stops taking writes, and a session that only reads keeps being answered. Space freed and the
keeper restarted, every acknowledged znode is there and writes are taken again. (Apache ZooKeeper
exits on such an error; Roost keeps answering reads until restarted.)
"""

from __future__ import annotations

from pathlib import Path

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tests.keeper.test_failing_fsync import close
from tests.keeper.zkharness import kazoo, keeper_config, unique_root
from tests.support.faultfs import fill, small_disk
from tests.support.procs import RoostProcess, start_roost
from tests.support.scrape import scrape, value

DATA = b"z" * (64 * 1024)


def start(config: Path) -> RoostProcess:
    return start_roost(["keeper", "--config", str(config), "--metrics-port", "0"],
                       expect=("keeper", "keeper metrics"))


def low(proc: RoostProcess, directory: Path) -> float:
    return value(scrape(proc.address("keeper metrics")), "roost_keeper_data_dir_free_space_low",
                 directory=str(directory))


def test_a_full_disk_stops_the_keepers_writes_not_its_reads_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    with small_disk(tmp_path / "small-disk", 8) as disk:
        data_dir = disk / "data"
        config = keeper_config(tmp_path / "keeper", extra={"forceSync": True, "dataDir": str(data_dir)})
        root = unique_root("full")
        acked: list[str] = []
        proc = start(config)
        try:
            assert low(proc, data_dir) == 0
            writer = kazoo(proc.address("keeper"))
            reader = kazoo(proc.address("keeper"))
            try:
                acked.append(writer.create(root, b"root"))
                filler = fill(disk, leave_bytes=512 * 1024)  # 0.5 MiB of 8 left: below the 10 % warning
                assert low(proc, data_dir) == 1, "no warning before the disk is full"
                refused = None
                for n in range(40):  # bounded: 40 x 64 KiB is past the 0.5 MiB left
                    try:
                        acked.append(writer.create_async(f"{root}/n-{n:03d}", DATA).get(timeout=10))
                    except (KazooException, KazooTimeoutError) as error:
                        refused = error
                        break
                assert refused is not None, "the full disk never refused a write"
                assert len(acked) > 1, "nothing fitted before the disk filled"
                # Reads go on, on a session that does not write.
                assert len(reader.get_children(root)) == len(acked) - 1
                assert reader.get(acked[-1])[0] == DATA
            finally:
                close(writer)
                close(reader)
        finally:
            proc.stop()
        filler.unlink()
        proc = start(config)
        try:
            assert low(proc, data_dir) == 0
            client = kazoo(proc.address("keeper"))
            try:
                lost = [path for path in acked if client.exists(path) is None]
                client.create(f"{root}/again", b"x")  # writes are taken again
            finally:
                close(client)
        finally:
            proc.stop()
    assert not lost, f"{len(lost)} acknowledged writes lost (first {lost[:3]})"
