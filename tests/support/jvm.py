"""Java processes for tests: finding `java`, a referee's classpath, and a JVM started and stopped
like every Roost process the suite starts (bounded waits, SIGTERM then SIGKILL, output to a file
under the test's tmp dir).

The referees' jars are installed by `scripts/setup.sh test` (Maven, the poms in referees/) into
`$ROOST_REFEREE_CACHE/<name>/libs` (default `~/.cache/roost/referees`): "kafka-3.9", "kafka-4",
"zookeeper-3.9". `referee_classpath(name)` is None when that referee is not installed; tests
then skip through tests/support/referees.py (a failure under `make test`).

    proc = start_java("kafka.Kafka", [str(properties)], classpath=referee_classpath("kafka-3.9"),
                      log=tmp_path / "kafka.out")
    ...
    proc.stop()
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.procs import stop_process

DEFAULT_HEAP = "512m"  # HELPER-RULES: every JVM -Xmx512m or less (2 cores, 24 GiB, shared)


def referee_cache() -> Path:
    return Path(os.environ.get("ROOST_REFEREE_CACHE", Path.home() / ".cache" / "roost" / "referees"))


def java_binary() -> str | None:
    """The `java` to run: $JAVA_HOME/bin/java when set, else the one on PATH (Java 17 here)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def referee_libs(name: str) -> Path:
    return referee_cache() / name / "libs"


def referee_classpath(name: str) -> str | None:
    """Every jar of the referee `name` joined as a classpath, or None when it is not installed
    (no java, no libs dir, or no jar in it) or its install is incomplete (no manifest)."""
    libs = referee_libs(name)
    if java_binary() is None or not libs.is_dir() or not (libs.parent / "MANIFEST.sha256").exists():
        return None
    jars = sorted(str(jar) for jar in libs.glob("*.jar"))
    return ":".join(jars) if jars else None


@dataclass
class JvmProcess:
    """A running JVM whose stdout and stderr go to `log`."""

    popen: subprocess.Popen[bytes]
    command: list[str]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def output(self, last: int = 6000) -> str:
        """The tail of what the JVM printed (for failure messages)."""
        try:
            return self.log.read_text(errors="replace")[-last:]
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a JVM's shutdown hooks run: Kafka's controlled shutdown), SIGKILL after
        `timeout` seconds; returns the exit status."""
        return stop_process(self.popen, signal.SIGTERM, timeout)

    def kill9(self) -> int:
        return stop_process(self.popen, signal.SIGKILL, 20.0)


def start_java(main_class: str, args: Sequence[str], *, classpath: str, log: Path,
               heap: str = DEFAULT_HEAP, jvm_args: Sequence[str] = (), cwd: Path | None = None,
               env: dict[str, str] | None = None) -> JvmProcess:
    """Start `java -cp classpath main_class args` (not waited for: the caller knows what ready
    means). `jvm_args` come after the heap flags, so a caller may add -D settings or its own GC."""
    java = java_binary()
    assert java is not None, "no java (check referee_classpath() first)"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [java, f"-Xmx{heap}", "-Xss1m", "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError",
               *jvm_args, "-cp", classpath, main_class, *args]
    full_env = dict(os.environ)
    full_env.pop("CLASSPATH", None)  # only `classpath`, whatever the caller's shell exported
    if env:
        full_env.update(env)
    with log.open("ab") as out:
        popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 cwd=cwd or log.parent, env=full_env)
    return JvmProcess(popen, command, log)


def run_java(main_class: str, args: Sequence[str], *, classpath: str, log: Path, timeout: float = 120.0,
             heap: str = "256m", jvm_args: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """Run a Java command-line tool to its end (bounded by `timeout`), capturing its output."""
    java = java_binary()
    assert java is not None, "no java (check referee_classpath() first)"
    command = [java, f"-Xmx{heap}", "-Djava.awt.headless=true", *jvm_args, "-cp", classpath, main_class, *args]
    env = dict(os.environ)
    env.pop("CLASSPATH", None)
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=log.parent,
                            env=env, stdin=subprocess.DEVNULL)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {' '.join(command[-len(args) - 1:])}\n{result.stdout}\n{result.stderr}")
    return result
