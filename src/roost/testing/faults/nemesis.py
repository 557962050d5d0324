"""The nemesis: faults on a seeded schedule, each one and its heal recorded on the history's timeline.

Kinds (`--faults`):
- kill:      kill -9 one node, restart it after the hold;
- pause:     SIGSTOP one node, SIGCONT after the hold;
- partition: one of: a node isolated from everyone (clients too); a majority/minority split of the
             nodes (clients reach all); one node cut from its peers only (clients still reach it —
             for a leader: the one that still hears clients but not its followers); packets dropped,
             never rejected (no RST); and, drawn at random later, *one-way*: a node that hears
             nothing from its peers while they still hear it. The first three partitions take
             the first three shapes in turn;
- powercut:  every faulted node killed at once and its unsynced writes lost (see durability.py),
             then all restarted.

When the run knows which node leads (keepers: the four-letter word srvr), the first kill, the
first cut from peers and the first isolation hit the leader, the first pause and the first split's
minority a follower (a lagging member clients still read from), and later ones the leader half of
the time.

The first faults go through the mix in order, so that a short run still has each kind once; then
the kinds are drawn at random. Between faults the cluster is left healthy for a while.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from roost.testing.faults.netns import Network
from roost.testing.faults.nodes import Node
from roost.testing.faults.recorder import Recorder

KINDS = ("kill", "pause", "partition", "powercut")


@dataclass
class Nemesis:
    network: Network
    nodes: list[Node]  # the nodes faults hit
    recorder: Recorder
    rng: random.Random
    kinds: tuple[str, ...] = KINDS
    hold_s: tuple[float, float] = (2.0, 6.0)
    quiet_s: tuple[float, float] = (2.0, 5.0)
    bystanders: list[int] = field(default_factory=list)  # namespaces on the majority side of splits (keepers)
    counts: Counter[str] = field(default_factory=Counter)
    torn: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    on_restart: Callable[[Node], None] | None = None
    leader: Callable[[], int | None] | None = None  # the index of the node that leads now, if known
    _partitions: int = 0
    _picked: set[str] = field(default_factory=set)

    def run(self, until: float) -> None:
        """Faults until `recorder.t()` reaches `until` and every kind has happened once (each fault
        healed before the next)."""
        n = 0
        self.stop.wait(self.rng.uniform(*self.quiet_s))
        while (self.recorder.t() < until or n < len(self.kinds)) and not self.stop.is_set():
            kind = self.kinds[n] if n < len(self.kinds) else self.rng.choice(self.kinds)
            n += 1
            getattr(self, f"_{kind}")()
            self.counts[kind] += 1
            self.stop.wait(self.rng.uniform(*self.quiet_s))

    def _hold(self) -> None:
        self.stop.wait(self.rng.uniform(*self.hold_s))

    def _pick(self, kind: str) -> Node:
        """A node: the leader for the first fault of each kind and half of the time after, when the
        run knows which node leads (faults on a leader test elections and commit rules); else any."""
        first = kind not in self._picked
        self._picked.add(kind)
        if self.leader is not None and (first or self.rng.random() < 0.5):
            index = self.leader()
            for node in self.nodes:
                if node.index == index:
                    return node
        return self.rng.choice(self.nodes)

    def _follower(self) -> Node:
        """A node that does not lead (when known): a lagging member clients still read from."""
        index = self.leader() if self.leader is not None else None
        return self.rng.choice([node for node in self.nodes if node.index != index] or self.nodes)

    def _restart(self, node: Node) -> None:
        node.start(wait=True)
        if self.on_restart:
            self.on_restart(node)

    def _kill(self) -> None:
        rec, node = self.recorder, self._pick("kill")
        t = rec.t()
        node.kill()
        rec.fault("kill", t, {"node": node.index})
        self._hold()
        t = rec.t()
        self._restart(node)
        rec.fault("restart", t, {"node": node.index})

    def _pause(self) -> None:
        rec, node = self.recorder, self._follower() if "pause" not in self._picked else self._pick("pause")
        self._picked.add("pause")
        t = rec.t()
        node.pause()
        rec.fault("pause", t, {"node": node.index})
        self._hold()
        t = rec.t()
        node.resume()
        rec.fault("resume", t, {"node": node.index})

    def _partition(self) -> None:
        rec, net = self.recorder, self.network
        indexes = [node.index for node in self.nodes]
        shapes = ("peers-cut", "split", "isolate", "one-way")
        shape = shapes[self._partitions] if self._partitions < 3 else self.rng.choice(shapes)
        self._partitions += 1
        t = rec.t()
        if shape == "isolate":
            victim = self._pick("isolate").index
            net.isolate(victim)
            detail = {"shape": shape, "node": victim}
        elif shape == "split":
            shuffled = self.rng.sample(indexes, len(indexes))
            if "split" not in self._picked and self.leader is not None:  # first: a follower in the minority
                follower = self._follower().index
                shuffled = [follower] + [i for i in shuffled if i != follower]
            self._picked.add("split")
            minority = shuffled[: max(1, (len(indexes) - 1) // 2)]
            majority = [i for i in shuffled if i not in minority] + self.bystanders
            net.split([minority, majority])
            detail = {"shape": shape, "minority": sorted(minority), "majority": sorted(majority)}
        elif shape == "one-way":  # hears nothing from its peers, while they still hear it
            victim = self._pick("one-way").index
            peers = [i for i in indexes if i != victim] + self.bystanders
            net.drop_between(victim, [net.address(i) for i in peers], inbound=True, outbound=False)
            detail = {"shape": shape, "node": victim}
        else:  # cut from its peers (and the keepers, for a broker), still heard by clients
            victim = self._pick("peers-cut").index
            peers = [i for i in indexes if i != victim] + self.bystanders
            net.split([[victim], peers])
            detail = {"shape": shape, "node": victim}
        rec.fault("partition", t, detail)
        self._hold()
        t = rec.t()
        net.heal()
        rec.fault("heal", t, detail)

    def _powercut(self) -> None:
        rec = self.recorder
        t = rec.t()
        lost: dict[int, int] = {}
        for node in self.nodes:
            node.kill()
        for node in self.nodes:
            changed = node.tracker.cut(self.rng, self.torn) if node.tracker else {}
            lost[node.index] = sum(size - keep for size, keep in changed.values())
        rec.fault("powercut", t, {"bytes lost": lost})
        self.stop.wait(self.rng.uniform(0.5, 1.5))
        t = rec.t()
        for node in self.nodes:
            node.start(wait=False)
        for node in self.nodes:
            node.wait_ready()
            if self.on_restart:
                self.on_restart(node)
        rec.fault("power on", t, {"nodes": [node.index for node in self.nodes]})

    def heal_all(self) -> None:
        """Everything back: network healed, paused nodes resumed, dead ones started."""
        self.network.heal()
        for node in self.nodes:
            node.resume()
        for node in self.nodes:
            if not node.running:
                node.start(wait=False)
        for node in self.nodes:
            node.wait_ready()
