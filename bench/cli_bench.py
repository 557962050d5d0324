"""`roost produce` and `roost consume` as a user runs them: records per second through the CLI
processes, against a real `roost up` on loopback, with the CLI's CPU seconds beside kcat's.

Prints figures with their conditions; never asserts.

    .venv/bin/python bench/cli_bench.py                 # 100,000 records of ~40 bytes
    .venv/bin/python bench/cli_bench.py --records 20000

The machine is shared and noisy: compare rows of the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.procs import ROOST, start_roost


def timed(command: list[str], stdin: Path | None = None) -> tuple[float, float, bytes]:
    """(wall seconds, the child's CPU seconds, stdout) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as source:
        result = subprocess.run(command, stdin=source, capture_output=True, check=True, timeout=600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        broker = start_roost(["up", "--data-dir", directory, "--kafka-port", "0"])
        try:
            bootstrap = broker.address("kafka")
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
                future.result(30)
            data = Path(directory) / "input.txt"
            data.write_text("".join(f"key-{i % 1000} value {i:08d} padding-padding\n" for i in range(args.records)))
            size = data.stat().st_size
            print(f"# {args.records} records, {size} bytes, 3 partitions, 1 broker on loopback; "
                  f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
                  f"load average {os.getloadavg()[0]:.1f}")
            runs = [
                ("roost produce -f '%k %v\\n' --file", [*ROOST, "produce", topic, "-b", bootstrap, "-f", r"%k %v\n",
                                                        "--file", str(data)], None),
                ("roost consume -o :end -f '%k %v\\n'", [*ROOST, "consume", topic, "-b", bootstrap, "-o", ":end",
                                                         "-f", r"%k %v\n"], None),
                ("roost consume -o :end --json", [*ROOST, "consume", topic, "-b", bootstrap, "-o", ":end", "--json"],
                 None),
            ]
            if shutil.which("kcat"):
                runs.append(("kcat -C -e -f '%k %s\\n'", ["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q",
                                                          "-f", "%k %s\n"], None))
            print(f"{'command':40} {'wall s':>8} {'records/s':>10} {'CPU s':>7}")
            for name, command, stdin in runs:
                wall, cpu, stdout = timed(command, stdin)
                lines = stdout.count(b"\n") or args.records
                print(f"{name:40} {wall:8.2f} {lines / wall:10.0f} {cpu:7.2f}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
