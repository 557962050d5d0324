"""The fuzz targets in CI: the committed corpora replayed (with truncations, bounded memory and
time), the Kafka corpora checked to cover every advertised API version, and a brief coverage-guided
atheris run of every target (scripts/fuzz.py brief; long runs are scripts/fuzz.py run)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS, FuzzTarget, _advertised_pairs, check

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
BRIEF_SECONDS = 30  # the whole atheris run in CI, all targets together
SLOW_INPUT_S = 2.0  # one input of at most a few KiB decoding for longer than this is a hang


def _variants(data: bytes) -> list[bytes]:
    """The input and cuts of it: a valid seed cut short reaches every decoder's truncation path."""
    cuts = {len(data) - 1, len(data) // 2, 9}
    return [data] + [data[:cut] for cut in sorted(cuts) if 0 <= cut < len(data)]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_committed_corpus_decodes_or_raises_the_documented_error(name: str) -> None:
    target: FuzzTarget = TARGETS[name]
    decode, expected = target.setup(), target.expected()
    files = sorted((CORPUS / name).iterdir())
    assert files, f"no corpus for {name}: scripts/fuzz.py seed {name}"
    for path in files:
        for data in _variants(path.read_bytes()):
            tracemalloc.start()
            started = time.monotonic()
            try:
                check(target, decode, expected, data)
            except BaseException as error:
                raise AssertionError(f"{name}/{path.name} ({len(data)} bytes): {type(error).__name__}: "
                                     f"{error}") from error
            finally:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            elapsed = time.monotonic() - started
            assert elapsed < SLOW_INPUT_S * 10, f"{name}/{path.name}: {elapsed:.1f} s"  # tracemalloc slows
            assert peak < target.memory_limit, f"{name}/{path.name} ({len(data)} bytes): peak {peak} bytes"


def _request_pair(frame: bytes) -> tuple[int, int]:
    return int.from_bytes(frame[0:2], "big", signed=True), int.from_bytes(frame[2:4], "big", signed=True)


def test_kafka_corpora_cover_every_advertised_api_and_version() -> None:
    advertised = set(_advertised_pairs())
    requests = {_request_pair(path.read_bytes()) for path in (CORPUS / "kafka_request").iterdir()}
    responses = {_request_pair(path.read_bytes()) for path in (CORPUS / "kafka_response").iterdir()}
    assert len(advertised) > 200
    assert not advertised - requests, f"requests without a seed: {sorted(advertised - requests)}"
    assert not advertised - responses, f"responses without a seed: {sorted(advertised - responses)}"


def test_brief_coverage_guided_run_of_every_target(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), "brief", "--total", str(BRIEF_SECONDS),
                           "--artifacts", str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=BRIEF_SECONDS + 30 * len(TARGETS))
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    lines = {line.split(":")[0]: line for line in proc.stdout.splitlines() if ": " in line and "executions" in line}
    assert set(lines) == set(TARGETS), proc.stdout
    for line in lines.values():
        executions = line.split(": ", 1)[1].split(" ")[0]
        # How many depends on the machine's load (a loaded CI machine may only replay the sample);
        # what matters is that each ran and found nothing.
        assert executions.isdigit() and int(executions) > 0 and line.endswith(", ok"), line
