"""The balancer page in a real browser (Debian's chromium through Playwright) against the
console package's real cluster (three brokers, three keepers: tests/console/conftest.py): the load
model per broker as the brokers sample it, a throttled execution of a real plan followed move by
move (each proposal with its goals, in progress then done), and a dry run on request."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from roost.admin.balancer import ClusterOps, cluster_model, execute, read_loads
from roost.broker.balance.executor import Executor, Phase
from roost.broker.balance.planner import plan
from tests.console import screenshots
from tests.console.conftest import ConsoleProcess
from tests.support import referees
from tests.support.cluster import LocalCluster

playwright = referees.import_or_skip("playwright.sync_api", "Playwright")
expect, PlaywrightTimeout = playwright.expect, playwright.TimeoutError

WAIT_MS = 30_000  # a bound against hangs; nothing here asserts on how fast anything is
RATE = 60_000  # bytes/s: the new broker copies 2 x 300 kB at it, 64 kB a fetch (conftest): about 6 s
# The page as one rendering draws a move in progress: the proposal's progress (the executor's
# word), its reassignment listed (the controller's) with the new broker adding, the phase in
# words and by name, and the throttle.
IN_PROGRESS = """([name, phase]) => {
  const text = (selector) => document.querySelector(selector)?.textContent ?? "";
  return text(`#plan-proposals tr[data-partition='${name}'] td.state`) === "in progress"
    && text(`#execution-moving tr[data-partition='${name}']`).includes("[3]")
    && text("#execution-phase-name") === phase && text("#execution-phase") === "moving replicas"
    && text("#execution-throttle").includes("KiB/s");
}"""


@contextmanager
def keeper(connect: str) -> Iterator[Any]:
    client = KazooClient(hosts=connect, timeout=10)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def replica_counts(cluster: LocalCluster) -> dict[int, tuple[int, int]]:
    """broker -> (replicas, leaders), as Metadata tells it."""
    counts = {b: [0, 0] for b in cluster.metadata().brokers}
    for topic in cluster.metadata().topics.values():
        for p in topic.partitions.values():
            for replica in p.replicas:
                counts[replica][0] += 1
            if p.leader in counts:
                counts[p.leader][1] += 1
    return {b: (r, lead) for b, (r, lead) in counts.items()}


def test_the_balancer_page_shows_the_load_model_an_executions_moves_with_their_goals_and_a_dry_run(
        page: Any, console: ConsoleProcess, console_cluster: LocalCluster) -> None:
    topic = f"skewed-{uuid.uuid4().hex[:8]}"
    admin = console_cluster.admin()
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1, 2], [2, 1], [1, 2]])])[topic].result(30)
    console_cluster.wait_for_isr(topic)
    # Batches well under the fetch bound, so that the throttle holds each fetch back (a larger
    # batch is sent whole: tests/broker/balance/test_balance_cluster.py).
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap, "acks": "all", "batch.size": 16_384})
    for index in range(90):
        producer.produce(topic, value=b"x" * 10_000, partition=index % 3)
    assert producer.flush(30) == 0

    stop = threading.Event()
    trickle = threading.Thread(target=keep_producing, args=(console_cluster.bootstrap, topic, stop), daemon=True)
    trickle.start()
    try:
        check_the_page(page, console, console_cluster, topic)
    finally:
        stop.set()
        trickle.join(30)


def keep_producing(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """About 20 kB/s into the topic, so that the load model shows bytes in per broker."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    while not stop.wait(0.1):
        for index in range(3):
            producer.produce(topic, value=b"t" * 700, partition=index)
        producer.poll(0)
    producer.flush(10)


def check_the_page(page: Any, console: ConsoleProcess, console_cluster: LocalCluster, topic: str) -> None:
    page.goto(console.url + "/balancer")
    expect(page.locator("#balancer-mode")).to_have_text("off", timeout=WAIT_MS)  # the pytest clusters' default
    expect(page.locator("#balancer-decision tbody")).to_contain_text("no broker has published one")
    counts = replica_counts(console_cluster)
    for broker, (replicas, leaders) in counts.items():
        row = page.locator(f"#balancer-brokers tr[data-broker='{broker}']")
        expect(row.locator("td.replicas")).to_have_text(str(replicas), timeout=WAIT_MS)
        expect(row.locator("td.leaders")).to_have_text(str(leaders))
        expect(row).to_contain_text("windows", timeout=WAIT_MS)  # its load sample has arrived
        expect(row).to_contain_text("up")

    # A real plan for this topic alone (the other tests' topics stay where they are), carried out
    # throttled, in a thread, as `roost balance run` would.
    ops = ClusterOps(console_cluster.bootstrap)
    with keeper(console_cluster.zookeeper) as zk:
        brokers, partitions = cluster_model(ops.view(), read_loads(zk), topics=[topic])
        the_plan = plan(brokers, partitions)
        moving = [p for p in the_plan.proposals if p.moves_data]
        assert moving and all(3 in p.new_replicas for p in moving), the_plan.proposals
        done: list[Executor] = []
        runner = threading.Thread(target=lambda: done.append(execute(ops, zk, the_plan, throttle=RATE, poll_s=0.2)),
                                  daemon=True)
        runner.start()
        try:
            first = "{}-{}".format(*moving[0].partition)
            # One rendering shows it all while the move runs (the page redraws every 3 s; a later
            # one may already show the move done).
            try:
                page.wait_for_function(IN_PROGRESS, arg=[first, Phase.INTER_BROKER_REPLICA_MOVEMENT.value],
                                       timeout=WAIT_MS)
            except PlaywrightTimeout:
                shown = {s: page.locator(s).inner_text() for s in ("#status", ".cards", "#execution-note",
                                                                   "#execution-moving", "#plan-proposals")}
                raise AssertionError(f"{first} never showed in progress: the page showed {shown}; "
                                     f"the execution: {done[0].status() if done else 'running'}") from None
            screenshots.shoot(page, "balancer")
            # Each proposal beside the goals the planner moved it for (which depend on the load
            # sampled: replica counts, disk, bytes in).
            for proposal, goals in the_plan.goals_of().items():
                assert goals, proposal
                expect(page.locator(f"#plan-proposals tr[data-partition='{proposal[0]}-{proposal[1]}'] td.goals")) \
                    .to_have_text(", ".join(goals))
        finally:
            runner.join(120)
    assert done and done[0].phase == Phase.COMPLETED, done and done[0].status()
    expect(page.locator("#execution-phase-name")).to_have_text("COMPLETED", timeout=WAIT_MS)
    for proposal in the_plan.proposals:
        name = f"{proposal.partition[0]}-{proposal.partition[1]}"
        expect(page.locator(f"#plan-proposals tr[data-partition='{name}'] td.state")).to_have_text("done")
    # The executor's tasks are the replica moves; a leadership-only proposal is its last phase's.
    expect(page.locator("#execution-progress")).to_have_text(f"{len(moving)} / {len(moving)}")
    expect(page.locator("#reassignment-count")).to_have_text("0")

    page.locator("#dry-run").click()
    expect(page.locator("#plan-heading")).to_have_text("Plan (dry run)", timeout=WAIT_MS)
    expect(page.locator("#plan-goals tr[data-goal='RackAwareGoal']")).to_contain_text("hard")
    expect(page.locator("#plan-brokers tr[data-broker='3']")).to_be_visible()
