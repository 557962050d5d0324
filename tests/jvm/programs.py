"""The Java programs of the JVM ecosystem tests (tests/jvm/java), compiled once against Apache
Kafka 3.9's jars, and the ways to run them: `ToolShell`, one JVM that runs Kafka's command-line
tools and the Java client's scenarios on request, and `JavaProcess`, a long-running JVM (a Kafka
Streams application, a Connect worker, MirrorMaker 2) with its output in a file.

Kafka's jars are a referee (scripts/setup.sh test installs them): without them these tests skip,
or fail where referees are required (tests/support/referees.py).
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support import referees
from tests.support.procs import stop_process

REFEREES = Path(os.environ.get("ROOST_REFEREE_CACHE", Path.home() / ".cache" / "roost" / "referees"))
KAFKA_39_LIBS = REFEREES / "kafka-3.9" / "libs"
KAFKA_39 = "Apache Kafka 3.9's jars (scripts/setup.sh test installs them from referees/kafka-3.9/pom.xml)"
SOURCES = Path(__file__).parent / "java"
HEAP = "-Xmx384m"  # every JVM here: two cores and eight helpers share the machine
JAVA = shutil.which("java") or "java"
JAVAC = shutil.which("javac") or "javac"
COMPILE_TIMEOUT_S = 180.0

# Kafka's scripts (bin/kafka-*.sh) and the main class each runs, in Kafka 3.9.
TOOLS: dict[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-acls": "kafka.admin.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
}


def kafka_available() -> bool:
    return (KAFKA_39_LIBS / "kafka-clients-3.9.2.jar").is_file() and shutil.which("javac") is not None


def require_kafka() -> None:
    if not kafka_available():
        referees.skip(KAFKA_39)


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def compiled(cache: Path | None = None) -> Path:
    """The directory of the compiled classes (and log4j.properties): compiled once per set of
    sources and jars, into a cache keyed by their hash, so a second session reuses it."""
    require_kafka()
    digest = hashlib.sha256()
    for source in [*_sources(), SOURCES / "log4j.properties"]:
        digest.update(source.relative_to(SOURCES).as_posix().encode() + b"\0" + source.read_bytes())
    digest.update(str(sorted(p.name for p in KAFKA_39_LIBS.iterdir())).encode())
    root = cache or REFEREES.parent / "jvm-tests"
    target = root / digest.hexdigest()[:16]
    if (target / "done").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    try:
        subprocess.run([JAVAC, "-nowarn", "--release", "17", "-d", str(building), "-cp", f"{KAFKA_39_LIBS}/*",
                        *map(str, _sources())], check=True, timeout=COMPILE_TIMEOUT_S, capture_output=True, text=True)
        shutil.copy(SOURCES / "log4j.properties", building / "log4j.properties")
        (building / "done").write_text("ok\n")
        try:
            building.rename(target)
        except OSError:  # another session compiled the same sources meanwhile
            pass
    except subprocess.CalledProcessError as error:
        raise AssertionError(f"javac failed:\n{error.stdout}\n{error.stderr}") from None
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return target


def java_command(classes: Path, main: str, args: Sequence[str] = (), heap: str = HEAP,
                 system: dict[str, str] | None = None) -> list[str]:
    props = {"log4j.configuration": f"file:{classes / 'log4j.properties'}", **(system or {})}
    return [JAVA, heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            *(f"-D{k}={v}" for k, v in props.items()),
            "-cp", f"{classes}:{KAFKA_39_LIBS}/*", main, *args]


class ToolShell:
    """A JVM running roost.jvm.ToolShell: `run(tool, *args)` runs one of Kafka's tools (a name of
    TOOLS or a main class) in it and returns (exit status, output); `clients(scenario, *args)`
    runs a Java client scenario and returns its @@RESULT as a dict."""

    def __init__(self, classes: Path, log: Path) -> None:
        self.log = log
        self._stderr = log.open("wb")
        self.popen = subprocess.Popen(java_command(classes, "roost.jvm.ToolShell"), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        first = self._next_line(60.0)
        if first != "@@READY":
            self.close()
            raise AssertionError(f"the tool shell did not start ({first!r}); its log:\n{log.read_text()[-3000:]}")

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _next_line(self, timeout: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the tool shell said nothing for {timeout}s") from None

    def run(self, tool: str, *args: str, timeout: float = 120.0) -> tuple[int, str]:
        main = TOOLS.get(tool, tool)
        assert all("\t" not in a and "\n" not in a for a in args), args
        assert self.popen.stdin is not None and self.popen.poll() is None, "the tool shell has ended"
        self.popen.stdin.write("\t".join([main, *args]) + "\n")
        self.popen.stdin.flush()
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while True:
            line = self._next_line(max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"the tool shell ended during {tool} {args}:\n" + "\n".join(lines))
            if line.startswith("@@END "):
                return int(line.split()[1]), "\n".join(lines)
            lines.append(line)

    def ok(self, tool: str, *args: str, timeout: float = 120.0) -> str:
        """`run`, failing the test unless the tool exits 0."""
        status, text = self.run(tool, *args, timeout=timeout)
        assert status == 0, f"{tool} {' '.join(args)} exited {status}:\n{text}"
        return text

    def clients(self, scenario: str, *args: str, timeout: float = 150.0) -> dict[str, Any]:
        import json
        text = self.ok(f"clients:{scenario}", *args, timeout=timeout)
        results = [line for line in text.splitlines() if line.startswith("@@RESULT ")]
        assert results, f"no result from {scenario}:\n{text}"
        return json.loads(results[-1].removeprefix("@@RESULT "))

    def close(self) -> None:
        if self.popen.poll() is None and self.popen.stdin is not None:
            try:
                self.popen.stdin.write("quit\n")
                self.popen.stdin.flush()
            except OSError:
                pass
        stop_process(self.popen, signal.SIGTERM, timeout=10)
        self._stderr.close()


class JavaProcess:
    """A long-running JVM (a Streams application, a Connect worker, MirrorMaker 2), its stdout
    and stderr in `log`. Stopped by `stop` (SIGTERM) or `kill` (SIGKILL); always stop it."""

    def __init__(self, classes: Path, main: str, args: Sequence[str], log: Path, heap: str = HEAP,
                 system: dict[str, str] | None = None) -> None:
        self.log = log
        self._out = log.open("wb")
        self.popen = subprocess.Popen(java_command(classes, main, args, heap, system), stdout=self._out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def kill(self) -> None:
        stop_process(self.popen, signal.SIGKILL, timeout=10)

    def stop(self, timeout: float = 30.0) -> int:
        status = stop_process(self.popen, signal.SIGTERM, timeout=timeout)
        self._out.close()
        return status
