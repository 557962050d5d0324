"""`roost demo`: start a Roost node, run both scenarios on it, print what happened.

1. messenger (async tasks): messages sent while the mail service is down; a share group of
   notify workers, emailer and analytics consumer groups; the emails go out once the mail
   service is back.
2. trending hashtags on Spark: generated posts, a Structured Streaming job through the roost
   source and sink, the trending table read back and checked against a plain-Python count.

The scenarios live in the repository's `examples/` folder, which this command puts on sys.path.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

LISTENING = re.compile(r"^roost: kafka listening on (?P<address>[0-9.]+:\d+)$")
REPO_ROOT = Path(__file__).resolve().parents[4]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="start a Roost node and run the messenger and trending-hashtags scenarios",
        description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="use this running node (host:port) instead of starting one")
    parser.add_argument("--data-dir", type=Path, help="the started node's data (default: a temporary folder)")
    parser.add_argument("--messages", type=int, default=300, help="messages to send (default 300)")
    parser.add_argument("--posts", type=int, default=3000, help="posts to publish (default 3000)")
    parser.add_argument("--skip-spark", action="store_true", help="run the messenger scenario only")
    parser.set_defaults(func=run)


class ChildNode:
    """`roost up` as a child process on a free port; stopped with SIGTERM."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "roost.cli.main", "up", "--data-dir", str(data_dir), "--kafka-port", "0", "--no-console", "--no-schema-registry",
             "--group.initial.rebalance.delay.ms", "500", "--log-level", "WARNING"],
            stdout=subprocess.PIPE, text=True)
        self.address: str | None = None
        ready = threading.Event()

        def pump() -> None:
            assert self.popen.stdout is not None
            for line in self.popen.stdout:
                match = LISTENING.match(line.strip())
                if match:
                    self.address = match["address"]
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(60) or self.address is None:
            self.stop()
            raise RuntimeError("roost demo: the node did not start")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(30)


def run(args: argparse.Namespace) -> int:
    if not (REPO_ROOT / "examples" / "messenger").is_dir():
        print(f"roost demo: the examples folder is not at {REPO_ROOT / 'examples'}; run from a clone",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO_ROOT))
    with tempfile.TemporaryDirectory(prefix="roost-demo-") as scratch:
        node = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            node = ChildNode(args.data_dir or Path(scratch) / "data")
            bootstrap = node.address
        assert bootstrap is not None
        try:
            print(f"== Roost demo: node at {bootstrap} ==", flush=True)
            return run_scenarios(bootstrap, args, Path(scratch))
        finally:
            if node is not None:
                node.stop()


def run_scenarios(bootstrap: str, args: argparse.Namespace, scratch: Path) -> int:
    from examples.messenger.scenario import emails_owed, run_messenger

    print("\n-- messenger: async tasks (mail service down while messages are sent) --", flush=True)
    messenger = run_messenger(bootstrap, messages=args.messages)
    print(messenger.summary())
    owed = emails_owed(messenger.events)
    problems = []
    if messenger.notifications != messenger.sent:
        problems.append(f"notifications {messenger.notifications} != messages {messenger.sent}")
    if messenger.analytics_messages != messenger.sent or messenger.analytics_reads != messenger.reads:
        problems.append("analytics totals differ from what was sent")
    if messenger.email_recipients != owed:
        problems.append(f"emails {messenger.emails} differ from the {len(owed)} owed")
    if not args.skip_spark:
        print("\n-- trending hashtags on Spark (roost source -> sliding windows -> roost sink) --", flush=True)
        from examples.trending.run import run_trending

        from roost.spark.session import local_session

        spark = local_session("roost-demo")
        try:
            trending = run_trending(spark, bootstrap, str(scratch / "trending-checkpoint"), posts_count=args.posts)
        finally:
            spark.stop()
        print(trending.table)
        print(f"{trending.posts} posts -> {trending.windows} windows in {trending.seconds:.1f} s; "
              f"equal to a plain-Python count: {'yes' if not trending.mismatches else 'NO'}")
        problems.extend(trending.mismatches)
    print("\n== summary ==")
    print(f"messages sent {messenger.sent}: notified {messenger.notifications}, emailed {messenger.emails} "
          f"(owed {len(owed)}), counted by analytics {messenger.analytics_messages}")
    if problems:
        print("PROBLEMS: " + "; ".join(problems))
        return 1
    print("nothing lost, nothing duplicated")
    return 0
