"""A broker's machine cut off (no RST): how long a client's acknowledgements stay silent.

Three `roost broker` processes and one keeper, each in its own network namespace
(`roost.testing.faults.netns`, needs root, iproute2 and nftables). A producer in the root
namespace (`--producer`: confluent-kafka with enable.idempotence, kafka-python or aiokafka, each
otherwise at its defaults; client_streams.py) streams keyed records (acks=all) to a 6-partition
RF 3 topic; the broker
leading the most partitions is isolated (nftables drops everything in and out: silence, no RST)
for `--cut` seconds, then healed. The figure per trial: the longest gap between two
acknowledgements on the partitions it led, from the cut on. Each trial runs once per client
variant (the defaults, then each `--variant NAME=VALUE[,NAME=VALUE]`), alternating.

    python bench/cut_failover_bench.py --trials 3 --cut 15 --variant request.timeout.ms=3000
    python bench/cut_failover_bench.py --trials 3 --cut 12 --producer aiokafka

Prints figures and never passes or fails. Brokers use the fault runs' settings (session 4 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_streams import STREAMS, Plan, Stream
from confluent_kafka.admin import AdminClient, NewTopic

from roost.testing.faults.netns import Network, why_unavailable
from roost.testing.faults.nodes import BROKER_PORT, KEEPER_CLIENT_PORT, broker_nodes, keeper_nodes

TOPIC = "cut"
PARTITIONS = 6


def leaders(admin: AdminClient) -> dict[int, tuple[int, int]]:
    """partition -> (leader, ISR size)."""
    meta = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return {p: (m.leader, len(m.isrs)) for p, m in meta.partitions.items()}


def wait_healthy(admin: AdminClient, timeout: float = 120) -> dict[int, tuple[int, int]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = leaders(admin)
            if len(state) == PARTITIONS and all(leader > 0 and isr == 3 for leader, isr in state.values()):
                return state
        except Exception:
            pass
        time.sleep(0.5)
    raise RuntimeError("the topic did not get back a leader and a full ISR on every partition")


def trial(network: Network, bootstrap: str, admin: AdminClient, producer: str, extra: dict[str, str], cut: float,
          rate: int = 200) -> tuple[int, float, int]:
    state = wait_healthy(admin)
    counts: dict[int, int] = {}
    for leader, _ in state.values():
        counts[leader] = counts.get(leader, 0) + 1
    victim = max(counts, key=lambda b: counts[b])
    led = {p for p, (leader, _) in state.items() if leader == victim}
    cut_at: list[float] = []
    healed: list[bool] = []

    def isolate() -> None:
        cut_at.append(time.monotonic())
        network.isolate(victim)  # broker id i runs in namespace i

    def heal() -> None:
        network.heal_node(victim)
        healed.append(True)

    stream = Stream(PARTITIONS)
    plan = Plan(TOPIC, rate, 4.0 + cut + 12.0, actions=[(4.0, isolate), (4.0 + cut, heal)])
    try:
        STREAMS[producer](bootstrap, plan, stream, extra)
    finally:
        if not healed:
            network.heal_node(victim)
    return victim, stream.longest_silence(led, cut_at[0]), stream.failed


def parse_variant(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if item)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--cut", type=float, default=15.0, help="seconds the leader's machine stays cut off")
    parser.add_argument("--variant", action="append", default=[], help="NAME=VALUE[,NAME=VALUE]: client settings")
    parser.add_argument("--producer", choices=sorted(STREAMS), default="confluent-kafka",
                        help="the client library (its defaults, acks=all; confluent-kafka with idempotence)")
    args = parser.parse_args()
    problem = why_unavailable()
    if problem:
        print(f"network namespaces unavailable: {problem}")
        return 1
    variants = {"defaults": {}, **{v: parse_variant(v) for v in args.variant}}
    results: dict[str, list[float]] = {name: [] for name in variants}
    print(f"conditions: 3 brokers + 1 keeper in namespaces, {args.producer}, keyed acks=all at 200 msg/s, "
          f"cut {args.cut:.0f} s, "
          f"{os.cpu_count()} CPUs shared, load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="cut-failover-") as scratch, Network(4) as network:
        out = Path(scratch)
        nodes = keeper_nodes(network, [4], out)
        nodes[0].start()
        brokers = broker_nodes(network, [1, 2, 3], f"{network.address(4)}:{KEEPER_CLIENT_PORT}", out)
        try:
            for broker in brokers:
                broker.start()
            bootstrap = ",".join(f"{network.address(i)}:{BROKER_PORT}" for i in (1, 2, 3))
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
            for number in range(args.trials):
                for name, extra in variants.items():
                    victim, silence, failed = trial(network, bootstrap, admin, args.producer, extra, args.cut)
                    results[name].append(silence)
                    print(f"  trial {number + 1}, {name}: cut broker {victim}, longest silence on its partitions "
                          f"{silence:.2f} s, failed deliveries {failed}", flush=True)
        finally:
            for node in [*brokers, *nodes]:
                node.stop()
    for name, values in results.items():
        print(f"{name:>40}: longest silence min {min(values):.2f}  median {statistics.median(values):.2f}  "
              f"max {max(values):.2f} s over {len(values)} cuts of {args.cut:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
