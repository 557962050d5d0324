#!/usr/bin/env python3
"""Coverage-guided fuzzing of every decoder that reads from outside (tests/fuzz/targets.py), with
atheris (libFuzzer for Python).

    scripts/fuzz.py seed                       # (re)write the seed corpora in tests/fuzz/corpus/
    scripts/fuzz.py run --seconds 600          # each target for 10 minutes (long run)
    scripts/fuzz.py run kafka_request --seconds 3600 --keep   # and merge what it found
    scripts/fuzz.py replay                     # every committed input once, as CI does
    scripts/fuzz.py brief --total 40           # CI's run: all targets within 40 s

Each target runs in a child process of its own (atheris.Fuzz runs once per process) with:
- the committed corpus copied into a scratch directory (so a run never dirties the repository
  unless --keep, which merges new coverage back with libFuzzer's -merge=1, keeping it small);
- `-timeout` per input (a hang is a finding), and an address-space limit (RLIMIT_AS) so that a
  length prefix that makes a decoder allocate gigabytes raises MemoryError, which is a finding:
  the targets allow only their module's documented error;
- crashes written to --artifacts (default /tmp/roost-fuzz-artifacts/<target>/): copy a crash into
  tests/fuzz/corpus/<target>/ as its regression case once it is fixed.

Prints one line per target: executions, corpus size, seconds, and the result.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
ADDRESS_SPACE_LIMIT = 6 << 30  # far above a decoder's honest needs, far below "allocate gigabytes"


def _targets():
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from tests.fuzz.targets import TARGETS
    return TARGETS


def seed(names: list[str]) -> None:
    targets = _targets()
    for name in names or sorted(targets):
        directory = CORPUS / name
        directory.mkdir(parents=True, exist_ok=True)
        written = 0
        for data in targets[name].seeds():
            path = directory / f"seed-{hashlib.sha1(data).hexdigest()[:16]}"
            if not path.exists():
                path.write_bytes(data)
                written += 1
        print(f"{name}: {written} new seeds, {len(list(directory.iterdir()))} files")


def replay(names: list[str]) -> int:
    targets = _targets()
    from tests.fuzz.targets import check

    failures = 0
    for name in names or sorted(targets):
        target = targets[name]
        decode, expected = target.setup(), target.expected()
        files = sorted((CORPUS / name).iterdir())
        for path in files:
            try:
                check(target, decode, expected, path.read_bytes())
            except BaseException as error:  # a finding: report it and go on
                failures += 1
                print(f"{name}: {path.name}: {type(error).__name__}: {error}")
        print(f"{name}: {len(files)} inputs replayed")
    return 1 if failures else 0


def _child(name: str, libfuzzer_args: list[str]) -> None:
    """Inside the fuzzing process: limit memory, import the decoders instrumented, fuzz."""
    import atheris

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    targets = _targets()
    import tests.fuzz.targets as module

    target = targets[name]
    module._INSTRUMENT_GENERATED = True
    with atheris.instrument_imports(include=list(target.instrument)):
        decode = target.setup()
    expected = target.expected()

    def one_input(data: bytes) -> None:
        module.check(target, decode, expected, data)

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input)
    atheris.Fuzz()


_STATS = re.compile(r"#(\d+)\s+(?:DONE|INITED|pulse|NEW|REDUCE).*?corp: (\d+)/")


def run_target(name: str, seconds: float, runs: int | None, keep: bool, artifacts: Path,
               max_len: int, sample: int | None = None) -> tuple[bool, str]:
    """Fuzz one target in a child process; `sample`: start from that many committed inputs (evenly
    spread) instead of all, so a brief run spends its seconds mutating rather than loading."""
    artifacts.mkdir(parents=True, exist_ok=True)
    committed = CORPUS / name
    with tempfile.TemporaryDirectory(prefix=f"roost-fuzz-{name}-") as scratch:
        work = Path(scratch) / "corpus"
        work.mkdir()
        files = sorted(committed.iterdir()) if committed.exists() else []
        if sample is not None and len(files) > sample:
            files = files[::len(files) // sample][:sample]
        for path in files:
            shutil.copyfile(path, work / path.name)
        args = [str(work), f"-max_total_time={max(1, int(seconds))}", "-timeout=10",
                f"-max_len={max_len}", f"-artifact_prefix={artifacts}/", "-print_final_stats=1",
                "-rss_limit_mb=0"]  # memory is bounded by RLIMIT_AS, which a MemoryError reports
        if runs is not None:
            args.append(f"-runs={runs}")
        started = time.monotonic()
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
        proc = subprocess.run([sys.executable, __file__, "_child", name, "--", *args], env=env,
                              capture_output=True, text=True, timeout=seconds + 120)
        elapsed = time.monotonic() - started
        output = proc.stdout + proc.stderr
        executions = corpus = "?"
        for match in _STATS.finditer(output):
            executions, corpus = match.group(1), match.group(2)
        ok = proc.returncode == 0
        if keep and ok:
            subprocess.run([sys.executable, __file__, "_child", name, "--", "-merge=1", str(committed), str(work)],
                           env=env, capture_output=True, timeout=600, check=True)
        verdict = "ok" if ok else f"FINDING (exit {proc.returncode})"
        line = f"{name}: {executions} executions, corpus {corpus} inputs, {elapsed:.1f} s, {verdict}"
        if not ok:
            tail = "\n".join(output.splitlines()[-40:])
            line += f"\n{tail}"
        return ok, line


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "_child":
        separator = sys.argv.index("--")
        _child(sys.argv[2], sys.argv[separator + 1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("seed").add_argument("targets", nargs="*")
    sub.add_parser("replay").add_argument("targets", nargs="*")
    for command in ("run", "brief"):
        p = sub.add_parser(command)
        p.add_argument("targets", nargs="*")
        p.add_argument("--seconds", type=float, default=60.0, help="per target (run)")
        p.add_argument("--total", type=float, default=40.0, help="for all targets together (brief)")
        p.add_argument("--runs", type=int, default=None, help="at most this many inputs per target")
        p.add_argument("--keep", action="store_true", help="merge new coverage into the committed corpus")
        p.add_argument("--sample", type=int, default=None if command == "run" else 40,
                       help="start from at most this many committed inputs per target")
        p.add_argument("--artifacts", type=Path, default=Path(tempfile.gettempdir()) / "roost-fuzz-artifacts")
    args = parser.parse_args()
    if args.command == "seed":
        seed(args.targets)
        return 0
    if args.command == "replay":
        return replay(args.targets)
    targets = _targets()
    names = args.targets or sorted(targets)
    # Startup (imports, loading the corpus) is about a second per target; brief splits the rest.
    seconds = args.seconds if args.command == "run" else max(1.0, args.total / len(names) - 1.5)
    failed = 0
    for name in names:
        ok, line = run_target(name, seconds, args.runs, args.keep, args.artifacts / name, targets[name].max_len,
                              args.sample)
        print(line, flush=True)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
