"""The invariants, checked on every ZooKeeper write and after every simulation step.

In ZooKeeper (on each write, `on_zk_write`):
- the controller epoch only grows;
- every partition-state write is fenced: its multi checks /controller_epoch, and the state
  carries the epoch that /controller_epoch holds (a deposed controller's writes never apply);
- a partition's leader epoch never goes back; an epoch names one leader; the ISR is never
  empty; the leader is in the ISR (or -1, or RECOVERING after an unclean election).

On the brokers (after each step, `check`):
- at most one leader per partition and leader epoch (one broker, and one process of it: a
  restarted broker never leads again in an epoch it led before), and only the broker ZooKeeper
  named for that epoch;
- per broker incarnation and partition, the leader epoch never goes back; the HW never goes
  back while it stays leader, and on a follower only a truncation lowers it; HW <= LEO;
- every ISR member (ZooKeeper's ISR, brokers up with the partition open) holds the committed
  prefix: the same batches as the leader below the leader's HW;
- no acknowledged acks=all write is lost: the current leader's log, and every ISR member's,
  holds each acknowledged write at its offset (the same batches up to its end).

The data checks compare the logs' shadows (logs.py): a digest of every prefix, so "holds the
same batches below offset H" is one lookup per log.

These are stronger than the guarantee "while at most RF - min.insync.replicas brokers fail":
with unclean election off, a kill -9 keeping the page cache, and a power loss only where the
topic fsyncs before acknowledging, Kafka's rules lose no acknowledged write however many brokers
fail (availability suffers, not safety), so the simulation checks that. A power loss on a topic
without fsync can lose acknowledged writes in Kafka's ZooKeeper mode (KIP-966's "last replica
standing"); the `power_loss_without_fsync` mode shows the checker finding it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from roost.broker.zk import layout
from roost.broker.zk.layout import NO_LEADER, RECOVERING, LeaderAndIsr
from roost.zkclient import Check, Create, SetData
from roost.zkclient.ops import Op

if TYPE_CHECKING:
    from tests.sim.replication.cluster import Cluster

TopicPartition = tuple[str, int]


class Seen(NamedTuple):
    """What the checker saw of one broker incarnation's partition at the previous step (a tuple:
    made for every replica at every step)."""

    is_leader: bool
    leader_epoch: int
    high_watermark: int
    log_id: int
    truncations: int
    log_end_offset: int


@dataclass
class Ack:
    end: int  # the offset after the acknowledged batch
    digest: int  # the leader's log digest at `end` when it answered
    broker: int
    leader_epoch: int
    value: bytes


class Checker:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.controller_epoch = 0
        self.zk_epoch: dict[TopicPartition, int] = {}
        self.zk_leader_of: dict[tuple[TopicPartition, int], int] = {}
        self.leader_of: dict[tuple[TopicPartition, int], tuple[int, int]] = {}  # -> (broker, incarnation)
        self.seen: dict[tuple[int, int, TopicPartition], Seen] = {}
        self.acks: dict[TopicPartition, dict[int, Ack]] = {}
        self.max_ack: dict[TopicPartition, Ack] = {}
        self.checked_leaders: set[tuple[TopicPartition, int, int, int]] = set()
        self.states: dict[TopicPartition, LeaderAndIsr] = {}  # what ZooKeeper holds, decoded once per write
        self.acknowledged = 0
        self.last_ack_time: dict[TopicPartition, int] = {}
        self.state_writes = 0

    def fail(self, message: str) -> None:
        self.cluster.fail(message)

    # ZooKeeper ----------------------------------------------------------------------------------
    def on_zk_write(self, session: int, ops: list[Op], zxid: int) -> None:
        tree = self.cluster.zk.tree
        for op in ops:
            if isinstance(op, Create | SetData) and op.path == layout.CONTROLLER_EPOCH:
                epoch = layout.decode_controller_epoch(op.data)
                if epoch < self.controller_epoch or (epoch == self.controller_epoch and epoch != 0):
                    self.fail(f"controller epoch went from {self.controller_epoch} to {epoch}")
                self.controller_epoch = epoch
            elif isinstance(op, Create | SetData) and op.path.endswith("/state"):
                self._state_written(session, ops, op)
        del tree

    def _state_written(self, session: int, ops: list[Op], op: Create | SetData) -> None:
        parts = op.path.split("/")  # ['', 'brokers', 'topics', t, 'partitions', p, 'state']
        tp = (parts[3], int(parts[5]))
        state = LeaderAndIsr.decode(op.path, op.data)
        self.states[tp] = state
        self.state_writes += 1
        writer = self.cluster.zk.owners.get(session, -1)
        if not any(isinstance(o, Check) and o.path == layout.CONTROLLER_EPOCH for o in ops):
            self.fail(f"{tp}: state {state} written by broker {writer} without the controller-epoch check")
        current = layout.decode_controller_epoch(self.cluster.zk.tree.get(layout.CONTROLLER_EPOCH).data)
        if state.controller_epoch != current:
            self.fail(f"{tp}: state {state} written by broker {writer} under controller epoch "
                      f"{state.controller_epoch} while /controller_epoch is {current}: a deposed controller wrote")
        previous = self.zk_epoch.get(tp, -1)
        if state.leader_epoch < previous:
            self.fail(f"{tp}: leader epoch went back from {previous} to {state.leader_epoch} ({state})")
        self.zk_epoch[tp] = state.leader_epoch
        if not state.isr:
            self.fail(f"{tp}: empty ISR written ({state})")
        if state.leader != NO_LEADER and state.leader not in state.isr and state.recovery_state != RECOVERING:
            self.fail(f"{tp}: leader {state.leader} outside the ISR {state.isr}")
        if state.leader >= 0:
            named = self.zk_leader_of.setdefault((tp, state.leader_epoch), state.leader)
            if named != state.leader:
                self.fail(f"{tp}: leader epoch {state.leader_epoch} given to {named} and then to {state.leader}")
        self.cluster.note(f"zk {tp[0]}-{tp[1]} leader {state.leader} epoch {state.leader_epoch} "
                          f"isr {list(state.isr)} (by b{writer}, controller epoch {state.controller_epoch})")

    def zk_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        return self.states.get(tp)

    # acknowledgements ------------------------------------------------------------------------------
    def acknowledged_write(self, tp: TopicPartition, ack: Ack) -> None:
        """A producer got NONE for an acks=all write (the ack was computed when the leader answered)."""
        self.acknowledged += 1
        self.last_ack_time[tp] = self.cluster.world.now
        acks = self.acks.setdefault(tp, {})
        known = acks.get(ack.end)
        if known is not None and known.digest != ack.digest:
            self.fail(f"{tp}: two different logs acknowledged up to offset {ack.end}: {known} and {ack}")
        acks[ack.end] = ack
        best = self.max_ack.get(tp)
        if best is None or ack.end > best.end:
            self.max_ack[tp] = ack
        leader = self._current_leader(tp)
        if leader is not None:
            self._holds(tp, leader[0], leader[1], ack, "the current leader")

    def _holds(self, tp: TopicPartition, broker: int, partition: Any, ack: Ack, role: str) -> None:
        digest = partition.log.shadow.digest_at(ack.end)
        if digest != ack.digest:
            batch = partition.log.shadow.batch_at(ack.end - 1)
            self.fail(f"{tp}: acknowledged write {ack.value!r} (offsets below {ack.end}, acked by broker "
                      f"{ack.broker} in epoch {ack.leader_epoch}) is not in the log of broker {broker}, {role} "
                      f"(its LEO {partition.log.log_end_offset}, batch there {batch})")

    def _current_leader(self, tp: TopicPartition) -> tuple[int, Any, LeaderAndIsr, Any] | None:
        """(leader id, its partition, the state ZooKeeper holds, its process), if it leads now."""
        state = self.zk_state(tp)
        if state is None or state.leader < 0:
            return None
        proc = self.cluster.process(state.leader)
        partition = proc.replicas.partitions.get(tp) if proc is not None else None
        if partition is None or not partition.is_leader or partition.leader_epoch != state.leader_epoch:
            return None
        return state.leader, partition, state, proc

    # every step ------------------------------------------------------------------------------------
    def check(self) -> None:
        for tp in self.cluster.partitions:
            self._check_partition(tp)
        for proc in self.cluster.live_processes():
            for tp, partition in proc.replicas.partitions.items():
                self._check_replica(proc, tp, partition)

    def _check_partition(self, tp: TopicPartition) -> None:
        current = self._current_leader(tp)
        if current is None:
            return
        leader, partition, state, proc = current
        key = (tp, leader, proc.incarnation, partition.leader_epoch)
        if key not in self.checked_leaders:
            # A new leader: every acknowledged write must be in its log.
            self.checked_leaders.add(key)
            for ack in self.acks.get(tp, {}).values():
                self._holds(tp, leader, partition, ack, f"the new leader (epoch {partition.leader_epoch})")
        best = self.max_ack.get(tp)
        if best is not None:
            self._holds(tp, leader, partition, best, "the leader")
        hw = partition.high_watermark
        committed = partition.log.shadow.digest_at(hw)
        if committed is None:
            self.fail(f"{tp}: leader {leader}'s HW {hw} is not a batch boundary of its own log "
                      f"(LEO {partition.log.log_end_offset})")
        for member in state.isr:
            if member == leader:
                continue
            proc = self.cluster.process(member)
            replica = proc.replicas.partitions.get(tp) if proc is not None else None
            if replica is None or replica.closed:
                continue
            if replica.log.shadow.digest_at(hw) != committed:
                self.fail(f"{tp}: ISR member {member} lacks the committed prefix: leader {leader} (epoch "
                          f"{partition.leader_epoch}) has HW {hw}, the member's LEO is {replica.log.log_end_offset}"
                          f" (HW {replica.high_watermark}) and its batches below {hw} differ or end elsewhere")
            if best is not None:
                self._holds(tp, member, replica, best, f"an ISR member (ISR {list(state.isr)})")

    def _check_replica(self, proc: Any, tp: TopicPartition, partition: Any) -> None:
        if partition.closed:
            return
        state = partition.state
        plog = partition.log
        is_leader = partition.is_leader
        key = (proc.broker_id, proc.incarnation, tp)
        seen = self.seen.get(key)
        now = Seen(is_leader, state.leader_epoch, state.high_watermark, id(plog), plog.truncations,
                   plog.log_end_offset)
        if now == seen and not is_leader:
            return  # a follower that did not move since the last step: every check below holds as it did
        if not 0 <= state.high_watermark <= plog.log_end_offset:
            self.fail(f"b{proc.broker_id} {tp}: HW {state.high_watermark} outside [0, LEO {plog.log_end_offset}]")
        if is_leader:
            epoch = state.leader_epoch
            holder = self.leader_of.setdefault((tp, epoch), (proc.broker_id, proc.incarnation))
            if holder[0] != proc.broker_id:
                self.fail(f"{tp}: brokers {holder[0]} and {proc.broker_id} both led in epoch {epoch}")
            if holder[1] != proc.incarnation:
                # An epoch names one log history; a restarted process may have lost part of it.
                self.fail(f"{tp}: broker {proc.broker_id} leads again in epoch {epoch} after a restart (incarnation "
                          f"{proc.incarnation}; incarnation {holder[1]} led in it): its log may lack what it wrote "
                          f"then, and followers would not see the difference")
            named = self.zk_leader_of.get((tp, epoch))
            if named != proc.broker_id:
                self.fail(f"{tp}: broker {proc.broker_id} leads in epoch {epoch}, which ZooKeeper gave to {named}")
            if proc.broker_id not in state.isr:
                self.fail(f"{tp}: leader {proc.broker_id} is not in its own ISR {sorted(state.isr)}")
        if seen is not None:
            if now.leader_epoch < seen.leader_epoch:
                self.fail(f"b{proc.broker_id} {tp}: leader epoch went back from {seen.leader_epoch} to "
                          f"{now.leader_epoch}")
            if now.high_watermark < seen.high_watermark:
                same_log = now.log_id == seen.log_id
                if seen.is_leader and is_leader and same_log:
                    self.fail(f"b{proc.broker_id} {tp}: the leader's HW went back from {seen.high_watermark} to "
                              f"{now.high_watermark}")
                if same_log and now.truncations == seen.truncations:
                    self.fail(f"b{proc.broker_id} {tp}: HW went back from {seen.high_watermark} to "
                              f"{now.high_watermark} without a truncation")
        self.seen[key] = now
