"""The broker's log directories (Kafka's `log.dirs`): where each partition's log lives, which
directory a new one goes to, and which directories have failed.

Each configured directory D keeps its partition logs in D/logs/<topic>-<partition> and its identity
in D/meta.properties (Kafka's file: `broker.id` and a `directory.id`); a directory that another
broker wrote is refused at start. A partition being moved between directories has a second copy,
D'/logs/<topic>-<partition>.<id>-future (Kafka's name), and the swap renames the current copy to
<topic>-<partition>.<id>-delete before the future copy takes the plain name. At start the names on
disk say how far a move got (`recover`): a future copy beside a current one is discarded (the
current one is whole); a future copy beside a -delete copy, with no current one, finished its
copying and was closed before the current one was renamed, so it becomes the current one. A
partition found in two directories under its plain name is an error: the broker will not guess.
A deleted partition's log is renamed to <topic>-<partition>.<id>-deleted and removed by a thread of
its own (`roost.storage.log_deleter`); one still there at start is removed then.

A directory whose disk fails (an I/O error on an append, a roll, a flush) is taken offline for the
life of the process: its partitions answer KAFKA_STORAGE_ERROR and new partitions go elsewhere.
"""

from __future__ import annotations

import logging
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from roost.log.files import atomic_write, fsync_directory
from roost.storage.settings import Settings

log = logging.getLogger("roost.storage.directories")

META_PROPERTIES = "meta.properties"
LIVE_NAME = re.compile(r"^(?P<topic>.+)-(?P<index>\d+)$")
MOVING_NAME = re.compile(r"^(?P<topic>.+)-(?P<index>\d+)\.(?P<id>[0-9a-f]{32})-(?P<kind>future|delete)$")
# A deleted partition's log, renamed on deletion and removed by the log deleter's thread.
DELETED_NAME = re.compile(r"^(?P<topic>.+)-(?P<index>\d+)\.(?P<id>[0-9a-f]{32})-deleted$")


class LogDirError(Exception):
    """The log directories are not in a state the broker can start from."""


def configured_log_dirs(config: Settings, data_dir: Path) -> list[Path]:
    """Every log directory: `data_dir` (which also holds the broker's meta/), then the other
    entries of `log.dirs` in their order."""
    listed = [Path(entry.strip()) for entry in str(config["log.dirs"]).split(",") if entry.strip()]
    others = [path for path in listed if path.resolve() != data_dir.resolve()]
    dirs = [data_dir, *others]
    assert len({path.resolve() for path in dirs}) == len(dirs), f"log.dirs lists a directory twice: {dirs}"
    return dirs


def partition_name(topic: str, index: int) -> str:
    return f"{topic}-{index}"


def deleted_name(topic: str, index: int) -> str:
    return f"{topic}-{index}.{uuid.uuid4().hex}-deleted"


def moving_name(topic: str, index: int, move_id: str, kind: str) -> str:
    assert kind in ("future", "delete") and len(move_id) == 32
    return f"{topic}-{index}.{move_id}-{kind}"


@dataclass
class LogDir:
    path: Path  # as configured: what DescribeLogDirs reports and AlterReplicaLogDirs names
    directory_id: str = ""
    error: str | None = None  # why it is offline; None while it serves

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def online(self) -> bool:
        return self.error is None


@dataclass
class _Found:
    live: dict[tuple[str, int], Path] = field(default_factory=dict)
    moving: list[tuple[str, int, str, Path]] = field(default_factory=list)  # (topic, index, kind, path)
    deleted: list[Path] = field(default_factory=list)


class LogDirs:
    """Which directory holds each partition's log, and the directories' health."""

    def __init__(self, paths: Iterable[Path], broker_id: int) -> None:
        self.dirs = [LogDir(Path(path)) for path in paths]
        assert self.dirs, "at least one log directory"
        self.broker_id = broker_id
        self._where: dict[tuple[str, int], LogDir] = {}
        # Partitions per directory, kept with _where (counting them per placement made creating
        # N partitions cost N^2).
        self._counts: dict[Path, int] = {log_dir.path: 0 for log_dir in self.dirs}
        self._preferred: dict[tuple[str, int], LogDir] = {}
        self.offline_listeners: list[Callable[[LogDir], None]] = []
        for log_dir in self.dirs:
            self._open_dir(log_dir)
        self._recover()

    # start --------------------------------------------------------------------------------------
    def _open_dir(self, log_dir: LogDir) -> None:
        """Check or write the directory's identity; a directory that cannot be used starts offline."""
        try:
            log_dir.logs.mkdir(parents=True, exist_ok=True)
            properties = log_dir.path / META_PROPERTIES
            if properties.exists():
                values = dict(line.split("=", 1) for line in properties.read_text().splitlines()
                              if "=" in line and not line.startswith("#"))
                if int(values.get("broker.id", self.broker_id)) != self.broker_id:
                    raise LogDirError(f"{log_dir.path} belongs to broker {values['broker.id']}, "
                                      f"not {self.broker_id} (its {META_PROPERTIES})")
                log_dir.directory_id = values.get("directory.id", "")
            if not log_dir.directory_id:
                log_dir.directory_id = uuid.uuid4().hex
                text = f"version=0\nbroker.id={self.broker_id}\ndirectory.id={log_dir.directory_id}\n"
                atomic_write(properties, text.encode())
        except OSError as error:
            log.error("log directory %s is unusable, starting it offline: %s", log_dir.path, error)
            log_dir.error = f"{type(error).__name__}: {error}"

    def _scan(self, log_dir: LogDir) -> _Found:
        found = _Found()
        for entry in sorted(log_dir.logs.iterdir()):
            if not entry.is_dir():
                continue
            moving = MOVING_NAME.match(entry.name)
            if moving:
                found.moving.append((moving["topic"], int(moving["index"]), moving["kind"], entry))
                continue
            if DELETED_NAME.match(entry.name):
                found.deleted.append(entry)
                continue
            live = LIVE_NAME.match(entry.name)
            if live:
                found.live[(live["topic"], int(live["index"]))] = entry
        return found

    def _recover(self) -> None:
        """Place every partition found on disk, and settle moves a crash interrupted."""
        scans: list[tuple[LogDir, _Found]] = []
        for log_dir in self.dirs:
            if not log_dir.online:
                continue
            try:
                scans.append((log_dir, self._scan(log_dir)))
            except OSError as error:
                log_dir.error = f"{type(error).__name__}: {error}"
        for _log_dir, found in scans:
            for path in found.deleted:
                log.info("removing %s: its topic was deleted before the broker stopped", path)
                _remove(path)
        for log_dir, found in scans:
            for key in found.live:
                if key in self._where:
                    raise LogDirError(f"partition {partition_name(*key)} is in two log directories: "
                                      f"{self._where[key].path} and {log_dir.path}")
                self._put(key, log_dir)
        futures = [((t, i), d, p) for d, found in scans for t, i, kind, p in found.moving if kind == "future"]
        deletes = [((t, i), d, p) for d, found in scans for t, i, kind, p in found.moving if kind == "delete"]
        being_deleted = {key for key, _dir, _path in deletes}
        for key, log_dir, path in futures:
            if key in self._where:
                log.info("discarding %s: an unfinished move (the current copy is in %s)",
                         path, self._where[key].path)
                _remove(path)
            elif key in being_deleted:
                # Copied and closed before the current copy was renamed to -delete: it is whole.
                _rename(path, partition_name(*key))
                self._put(key, log_dir)
                log.info("finished the move of %s: %s is now its copy", partition_name(*key), path)
            else:
                log.info("discarding %s: its partition is gone", path)
                _remove(path)
        for key, log_dir, path in deletes:
            if key in self._where:
                _remove(path)
            else:
                # Never lose the only copy: a -delete copy alone is put back.
                _rename(path, partition_name(*key))
                self._put(key, log_dir)
                log.warning("restored %s: no other copy of %s was found", path, partition_name(*key))

    # placement ----------------------------------------------------------------------------------
    def find(self, path: str) -> LogDir | None:
        """The log directory named `path` (as configured, or resolved to the same place)."""
        wanted = Path(path)
        for log_dir in self.dirs:
            if wanted == log_dir.path or wanted.resolve() == log_dir.path.resolve():
                return log_dir
        return None

    def dir_of(self, topic: str, index: int) -> LogDir | None:
        return self._where.get((topic, index))

    def partition_count(self, log_dir: LogDir) -> int:
        return self._counts[log_dir.path]

    def _put(self, key: tuple[str, int], log_dir: LogDir) -> None:
        self._pop(key)
        self._where[key] = log_dir
        self._counts[log_dir.path] += 1

    def _pop(self, key: tuple[str, int]) -> None:
        placed = self._where.pop(key, None)
        if placed is not None:
            self._counts[placed.path] -= 1
            assert self._counts[placed.path] >= 0, placed.path

    def place(self, topic: str, index: int) -> LogDir:
        """Where the partition's log is, or (a new one) the online directory asked for by an
        AlterReplicaLogDirs beforehand, else the online directory with the fewest partitions."""
        key = (topic, index)
        placed = self._where.get(key)
        if placed is not None:
            return placed
        preferred = self._preferred.pop(key, None)
        online = [d for d in self.dirs if d.online]
        if not online:
            raise OSError(f"no log directory is online for {partition_name(topic, index)}")
        chosen = preferred if preferred is not None and preferred.online else \
            min(online, key=self.partition_count)  # ties: the first listed
        self._put(key, chosen)
        return chosen

    def prefer(self, topic: str, index: int, log_dir: LogDir) -> None:
        """Kafka's rule for a replica not hosted yet: it will be created in `log_dir`."""
        self._preferred[(topic, index)] = log_dir

    def moved(self, topic: str, index: int, log_dir: LogDir) -> None:
        assert (topic, index) in self._where
        self._put((topic, index), log_dir)

    def forget(self, topic: str, index: int) -> None:
        self._pop((topic, index))

    # failures -----------------------------------------------------------------------------------
    def dir_holding(self, path: Path) -> LogDir | None:
        """The log directory a partition directory `path` is in."""
        for log_dir in self.dirs:
            if path.parent == log_dir.logs:
                return log_dir
        return None

    def fail(self, log_dir: LogDir, error: BaseException) -> None:
        """Take `log_dir` offline (once) and tell the listeners."""
        if not log_dir.online:
            return
        log_dir.error = f"{type(error).__name__}: {error}"
        log.error("log directory %s failed and is now offline: %s", log_dir.path, log_dir.error)
        for listener in self.offline_listeners:
            listener(log_dir)


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if path.parent.is_dir():
        fsync_directory(path.parent)


def _rename(path: Path, name: str) -> None:
    path.rename(path.with_name(name))
    fsync_directory(path.parent)
