"""The controller's decisions, as a pure state machine (Kafka's ZooKeeper-mode controller).

Inputs are what the controller's shell observes or receives: it became controller (with all the
state it read from ZooKeeper), the set of live brokers changed, topics were created, grew or were
marked for deletion, a leader asks to change an ISR (AlterPartition), a broker asks to shut down
(ControlledShutdown), an operator asks for elections, brokers answered StopReplica, time passed.
Outputs are collected and taken with `ready()`, like RaftCore.ready():

- `writes`: znode writes. The shell makes them in order, every one fenced by a check of
  `/controller_epoch`'s version (so a deposed controller's writes all fail), and only then
- `requests`: LeaderAndIsr, UpdateMetadata and StopReplica bodies for brokers, and
- `replies`: answers to the requests that asked (AlterPartition, ControlledShutdown, ...).

Brokers must never learn a partition state that ZooKeeper does not hold yet (a new controller
would re-elect from ZooKeeper and hand out the same leader epoch twice), hence that order. The
controller is the only writer of partition states (leaders ask it through AlterPartition), so the
version of each state znode is known here: a create makes version 0, each set adds one. A write
that fails anyway means another controller took over or ZooKeeper changed under us: the shell
then resigns and the next controller starts from what ZooKeeper holds.

Rules (Kafka's; see the replication facts sheet):
- Leaders are elected from the live ISR in assignment order; unclean election (a live replica
  outside the ISR) only where the topic allows it. An ISR is never emptied: when its last member
  dies it stays, with leader -1, so that member is the one to come back as leader.
- Every leader change, and every ISR change the controller makes, bumps the leader epoch; every
  write bumps the partition epoch (the znode version). Neither ever goes back.
- A broker that is shutting down is neither elected nor re-added to an ISR.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from roost.broker.zk import layout
from roost.broker.zk.layout import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    RECOVERED,
    RECOVERING,
    SECURITY_PROTOCOL_IDS,
    BrokerRegistration,
    LeaderAndIsr,
    TopicAssignment,
)
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.controller")

TopicPartition = tuple[str, int]

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
TYPE_INCREMENTAL, TYPE_FULL = 1, 2
DELETE_EPOCH = -2  # StopReplica's leader epoch for a topic being deleted
PLAINTEXT = 0

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1


@dataclass(frozen=True)
class ControllerSettings:
    unclean_leader_election: bool = False  # unclean.leader.election.enable (per topic too)
    auto_leader_rebalance: bool = True  # auto.leader.rebalance.enable
    imbalance_percentage: int = 10  # leader.imbalance.per.broker.percentage
    imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds * 1000


@dataclass(frozen=True)
class PartitionState:
    """A partition's /state znode and its version (the partition epoch)."""

    state: LeaderAndIsr
    version: int


@dataclass
class ZkWrite:
    """One znode change; `version` is the expected version (-1: any)."""

    # "create", "set", "delete", "delete_tree" (the node and all below it), "delete_if_present"
    # (made on its own, fenced like the others; a node already gone is no failure)
    op: str
    path: str
    data: bytes = b""
    version: int = -1


@dataclass
class BrokerRequest:
    broker_id: int
    api_key: ApiKey
    version: int
    body: dict[str, Any]


@dataclass
class Reply:
    token: Any  # the shell's handle for whoever waits for it
    body: dict[str, Any]


@dataclass
class Ready:
    ensure_paths: list[str] = field(default_factory=list)  # create if missing, unfenced, first
    writes: list[ZkWrite] = field(default_factory=list)
    requests: list[BrokerRequest] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.ensure_paths or self.writes or self.requests or self.replies)


@dataclass
class ClusterSnapshot:
    """Everything the shell reads from ZooKeeper when it becomes controller."""

    brokers: dict[int, BrokerRegistration]
    topics: dict[str, TopicAssignment]
    states: dict[TopicPartition, PartitionState]
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)


class ControllerCore:
    def __init__(self, broker_id: int, epoch: int, settings: ControllerSettings, snapshot: ClusterSnapshot,
                 now_ms: int) -> None:
        assert epoch >= 1
        self.broker_id = broker_id
        self.epoch = epoch
        self.settings = settings
        self.brokers: dict[int, BrokerRegistration] = dict(snapshot.brokers)
        self.topics: dict[str, TopicAssignment] = {}
        self.states: dict[TopicPartition, PartitionState] = {}
        self.topic_configs: dict[str, dict[str, str]] = dict(snapshot.topic_configs)
        self.shutting_down: set[int] = set()
        # Replicas on a failed log directory (their brokers answered KAFKA_STORAGE_ERROR): they
        # neither lead nor count in the ISR until their broker restarts.
        self.offline_replicas: dict[TopicPartition, set[int]] = {}
        # topic -> (broker, partition) replicas that have not yet confirmed the deletion
        self.deleting: dict[str, set[tuple[int, int]]] = {}
        self._next_rebalance_ms = now_ms + min(5_000, settings.imbalance_check_interval_ms)
        self._ready = Ready()
        self._leader_and_isr: dict[int, dict[TopicPartition, bool]] = {}  # broker -> partition -> is_new
        self._metadata_changed: set[TopicPartition] = set()
        self._metadata_full: set[int] = set()  # brokers that get the whole picture
        self._metadata_all = False  # every live broker gets the (changed part of the) picture
        self._stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = {}
        # Brokers declared dead on a fast signal (broker -> the registration epoch declared dead):
        # that registration counts as gone even if a read still shows it, until it is gone.
        self.suspected: dict[int, int] = {}
        self._activate(snapshot)

    # ---------------------------------------------------------------------------------- output
    def ready(self) -> Ready:
        """Take what the last inputs produced (see the module docstring for the order)."""
        self._flush_requests()
        ready, self._ready = self._ready, Ready()
        return ready

    def reply(self, token: Any, body: dict[str, Any]) -> None:
        """Answer a request that changes nothing (delivered in order with the others)."""
        self._ready.replies.append(Reply(token, body))

    def _write(self, op: str, path: str, data: bytes = b"", version: int = -1) -> None:
        self._ready.writes.append(ZkWrite(op, path, data, version))

    def _set_state(self, tp: TopicPartition, state: LeaderAndIsr, *, new: bool = False) -> PartitionState:
        """Record a partition's new state and the znode write that makes it so."""
        topic, index = tp
        known = self.states.get(tp)
        assert state.leader_epoch >= 0
        if known is None or new:
            assert known is None, f"{tp} already has a state"
            self._ready.ensure_paths.append(layout.partition_path(topic, index))
            self._write("create", layout.partition_state_path(topic, index), state.encode())
            written = PartitionState(state, 0)
        else:
            assert state.leader_epoch >= known.state.leader_epoch, f"{tp}: leader epoch goes back"
            self._write("set", layout.partition_state_path(topic, index), state.encode(), known.version)
            written = PartitionState(state, known.version + 1)
        assert state.leader == NO_LEADER or state.leader in state.isr or state.recovery_state == RECOVERING
        assert state.isr, f"{tp}: an ISR is never emptied"
        self.states[tp] = written
        self._metadata_changed.add(tp)
        return written

    def _send_leader_and_isr(self, tp: TopicPartition, brokers: Iterable[int], *, is_new: bool = False) -> None:
        for broker in brokers:
            if broker in self.brokers:
                pending = self._leader_and_isr.setdefault(broker, {})
                pending[tp] = pending.get(tp, False) or is_new

    # ---------------------------------------------------------------------------- activation
    def _activate(self, snapshot: ClusterSnapshot) -> None:
        log.info("controller %d active in epoch %d: %d brokers, %d topics, %d partition states",
                 self.broker_id, self.epoch, len(self.brokers), len(snapshot.topics), len(snapshot.states))
        self.topics = dict(snapshot.topics)
        self.states = dict(snapshot.states)
        # Brokers first learn who is alive and where every partition stands.
        self._metadata_full.update(self.brokers)
        for name in sorted(snapshot.deleting & set(self.topics)):
            self._start_deletion(name)
        # Replicas on dead brokers leave their ISRs; leaderless partitions get leaders.
        for tp in sorted(self._partitions()):
            if tp[0] in self.deleting:
                continue
            known = self.states.get(tp)
            if known is None:
                self._initialize(tp)
                continue
            self._remove_dead_from_isr(tp)
            if self.states[tp].state.leader not in self.brokers:
                self._elect_offline(tp)
        # Every live replica is told its partitions' state (as Kafka does on failover).
        for tp in self._partitions():
            if tp[0] not in self.deleting and tp in self.states:
                self._send_leader_and_isr(tp, self._replicas(tp))
        # Reassignments in progress carry on where the last controller left them.
        for tp in self._partitions():
            if tp[0] not in self.deleting and tp in self.states and self._reassigning(tp):
                self._maybe_complete_reassignment(tp)

    def _partitions(self) -> list[TopicPartition]:
        return [(name, index) for name, topic in self.topics.items() for index in topic.partitions]

    def _replicas(self, tp: TopicPartition) -> list[int]:
        return self.topics[tp[0]].partitions[tp[1]]

    def _live(self, broker: int) -> bool:
        return broker in self.brokers

    def _serves(self, tp: TopicPartition, broker: int) -> bool:
        """`broker` is alive and its replica of `tp` is not on a failed log directory."""
        return broker in self.brokers and broker not in self.offline_replicas.get(tp, ())

    def _unclean_allowed(self, topic: str) -> bool:
        raw = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return self.settings.unclean_leader_election if raw is None else raw.lower() == "true"

    # ------------------------------------------------------------------------------ elections
    def _initialize(self, tp: TopicPartition) -> bool:
        """A new partition: the first live replica leads, all live replicas are in the ISR."""
        live = [b for b in self._replicas(tp) if self._live(b) and b not in self.shutting_down]
        if not live:
            log.warning("partition %s-%d has no live replica among %s: left without a state until one "
                        "comes back", *tp, self._replicas(tp))
            return False
        self._set_state(tp, LeaderAndIsr(live[0], 0, tuple(live), self.epoch), new=True)
        self._send_leader_and_isr(tp, live, is_new=True)
        return True

    def _elect_offline(self, tp: TopicPartition) -> bool:
        """The leader is gone (or never was): the first live ISR member in assignment order, or
        with unclean election allowed, the first live replica (its log may lack committed data)."""
        current = self.states[tp].state
        isr = set(current.isr)
        candidates = [b for b in self._replicas(tp)
                      if b in isr and self._serves(tp, b) and b not in self.shutting_down]
        recovery = current.recovery_state
        if candidates:
            leader = candidates[0]
            new_isr = tuple(b for b in current.isr if self._serves(tp, b)) or (leader,)
        elif self._unclean_allowed(tp[0]):
            outside = [b for b in self._replicas(tp) if self._serves(tp, b) and b not in self.shutting_down]
            if not outside:
                return self._no_leader(tp)
            leader, new_isr, recovery = outside[0], (outside[0],), RECOVERING
            log.warning("unclean election for %s-%d: %d leads outside the ISR %s; data may be lost",
                        *tp, leader, list(current.isr))
        else:
            return self._no_leader(tp)
        self._set_state(tp, LeaderAndIsr(leader, current.leader_epoch + 1, new_isr, self.epoch, recovery))
        self._send_leader_and_isr(tp, self._replicas(tp))
        return True

    def _no_leader(self, tp: TopicPartition) -> bool:
        current = self.states[tp].state
        if current.leader != NO_LEADER:
            # Leader -1, the ISR kept as it is (never emptied), so the last member returns to lead.
            self._set_state(tp, LeaderAndIsr(NO_LEADER, current.leader_epoch + 1, current.isr, self.epoch,
                                             current.recovery_state))
            self._send_leader_and_isr(tp, self._replicas(tp))
            log.warning("partition %s-%d has no live in-sync replica (ISR %s): offline", *tp, list(current.isr))
        return False

    def _remove_from_isr(self, tp: TopicPartition, broker: int) -> None:
        """Drop `broker` from the ISR (never the last member); a leader leaves leader -1."""
        current = self.states[tp].state
        if broker not in current.isr:
            return
        isr = tuple(b for b in current.isr if b != broker) or current.isr
        leader = NO_LEADER if current.leader == broker else current.leader
        if isr == current.isr and leader == current.leader:
            return
        self._set_state(tp, LeaderAndIsr(leader, current.leader_epoch + 1, isr, self.epoch, current.recovery_state))
        self._send_leader_and_isr(tp, self._replicas(tp))

    def _remove_dead_from_isr(self, tp: TopicPartition) -> None:
        for broker in self.states[tp].state.isr:
            if not self._live(broker):
                self._remove_from_isr(tp, broker)

    def _elect_preferred(self, tp: TopicPartition) -> ErrorCode:
        current = self.states[tp].state
        preferred = self._replicas(tp)[0]
        if current.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED
        if not self._serves(tp, preferred) or preferred in self.shutting_down or preferred not in current.isr:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        self._set_state(tp, LeaderAndIsr(preferred, current.leader_epoch + 1, current.isr, self.epoch,
                                         current.recovery_state))
        self._send_leader_and_isr(tp, self._replicas(tp))
        return ErrorCode.NONE

    # ----------------------------------------------------------------------- brokers come and go
    def broker_suspected_dead(self, broker: int, epoch: int, evidence: str) -> None:
        """A fast, unambiguous sign that the process of `broker` (its registration with broker
        epoch `epoch`) is gone, before its ZooKeeper session expires (see docs/cluster.md, "Fast
        failure detection"): handled exactly as the deletion of its registration, which is made
        so in ZooKeeper first (a fenced delete of /brokers/ids/<id>; the broker, if alive after
        all, sees it and registers again with a new epoch, as after a bounce).

        Safety does not rest on the sign being right: the new leaders get new leader epochs and
        the suspect leaves the ISRs through the same conditional writes as after a session
        expiry, so a suspect that lives on is fenced (its AlterPartition answers
        STALE_BROKER_EPOCH, its followers fetch from the new leader, so its acks=all writes
        cannot complete) and never elected while declared dead; an ISR is still never emptied
        and no replica outside it is elected unless unclean election is allowed."""
        known = self.brokers.get(broker)
        if broker == self.broker_id or known is None or known.epoch != epoch:
            return  # ourselves, already gone, or about an incarnation that is no more
        log.warning("broker %d (epoch %d) declared dead before its session expired: %s", broker, epoch, evidence)
        self._write("delete_if_present", layout.broker_path(broker))
        self.brokers_changed({b: r for b, r in self.brokers.items() if b != broker})
        self.suspected[broker] = epoch

    def brokers_changed(self, brokers: dict[int, BrokerRegistration]) -> None:
        """The children of /brokers/ids (with their epochs) are now `brokers`."""
        # A registration declared dead stays dead even if it is read again before its deletion
        # (or its session's end) shows; a new registration of that broker is a new incarnation.
        self.suspected = {b: e for b, e in self.suspected.items() if b in brokers and brokers[b].epoch == e}
        brokers = {b: r for b, r in brokers.items() if self.suspected.get(b) != r.epoch}
        gone = {b for b in self.brokers if b not in brokers or brokers[b].epoch != self.brokers[b].epoch}
        arrived = {b for b in brokers if b not in self.brokers or brokers[b].epoch != self.brokers[b].epoch}
        if not gone and not arrived:
            self.brokers = dict(brokers)
            return
        log.info("brokers changed: %s joined, %s left (live now %s)", sorted(arrived), sorted(gone), sorted(brokers))
        for broker in gone:
            self.brokers.pop(broker, None)
            self.shutting_down.discard(broker)
        if gone:
            self._on_brokers_failed(gone)
        self.brokers = dict(brokers)
        if arrived:
            self._on_brokers_started(arrived)
        self._metadata_all = True

    def _on_brokers_failed(self, gone: set[int]) -> None:
        for tp in self._partitions():
            if tp[0] in self.deleting or tp not in self.states:
                continue
            state = self.states[tp].state
            if state.leader in gone:
                self._elect_offline(tp)
            for broker in gone:
                if broker in self.states[tp].state.isr:
                    self._remove_from_isr(tp, broker)

    def _on_brokers_started(self, arrived: set[int]) -> None:
        # A restarted broker's failed directories may be back: its LeaderAndIsr answers say.
        for offline in self.offline_replicas.values():
            offline -= arrived
        self._metadata_full.update(arrived)
        for tp in self._partitions():
            if tp[0] in self.deleting:
                continue
            if tp not in self.states:
                self._initialize(tp)
                continue
            replicas = self._replicas(tp)
            if self.states[tp].state.leader == NO_LEADER:
                self._elect_offline(tp)
            # A (re)started replica learns its partitions' state, and follows.
            self._send_leader_and_isr(tp, [b for b in replicas if b in arrived])
        for name, pending in self.deleting.items():
            for broker, index in sorted(pending):
                if broker in arrived:
                    self._stop_replica.setdefault(broker, {})[(name, index)] = (DELETE_EPOCH, True)

    # ----------------------------------------------------------------------------------- topics
    # ------------------------------------------------------------------ failed log directories
    def log_dir_failed(self, broker: int) -> None:
        """A broker's log directory failed (/log_dir_event_notification): ask it about every
        partition it has a replica of; its LeaderAndIsr answer names the offline ones."""
        if broker not in self.brokers:
            return
        log.warning("broker %d reports a failed log directory", broker)
        for tp in self._partitions():
            if tp[0] not in self.deleting and tp in self.states and broker in self._replicas(tp):
                self._send_leader_and_isr(tp, [broker])

    def replicas_offline(self, broker: int, partitions: Iterable[TopicPartition]) -> None:
        """`broker` answered KAFKA_STORAGE_ERROR for these partitions: their replicas there are
        on a failed directory. A leader there is replaced by another in-sync replica; the replica
        leaves the ISR (Kafka's OfflineReplica state)."""
        if broker not in self.brokers:
            return
        for tp in partitions:
            if tp not in self.states or tp[0] in self.deleting or broker not in self._replicas(tp):
                continue
            offline = self.offline_replicas.setdefault(tp, set())
            if broker in offline:
                continue
            offline.add(broker)
            log.warning("partition %s-%d: the replica on broker %d is offline (failed log directory)", *tp, broker)
            if self.states[tp].state.leader == broker:
                self._elect_offline(tp)
            if broker in self.states[tp].state.isr:
                self._remove_from_isr(tp, broker)
            self._metadata_changed.add(tp)

    def replicas_online(self, broker: int, partitions: Iterable[TopicPartition]) -> None:
        """`broker` answered NONE for these partitions: its replicas there are hosted again (a
        damaged replica repaired, roost.broker.replica.repair). It may be elected and, once its
        leader adds it, counted in the ISR again; until then it is an out-of-sync follower."""
        for tp in partitions:
            offline = self.offline_replicas.get(tp)
            if offline is not None and broker in offline:
                offline.discard(broker)
                log.info("partition %s-%d: the replica on broker %d is online again", *tp, broker)
                self._metadata_changed.add(tp)

    def topics_changed(self, topics: dict[str, TopicAssignment]) -> None:
        """The topics in /brokers/topics (with their assignments) are now `topics`."""
        for name in sorted(set(self.topics) - set(topics)):
            self._forget_topic(name)
        for name, assignment in sorted(topics.items()):
            known = self.topics.get(name)
            if known is assignment:
                continue  # the shell passes what it has not re-read as it is: nothing to do
            if known is None:
                self.topics[name] = assignment
                log.info("new topic %s: %d partitions", name, len(assignment.partitions))
                for index in sorted(assignment.partitions):
                    self._initialize((name, index))
                self._metadata_changed.update((name, i) for i in assignment.partitions)
                continue
            if known.topic_id != assignment.topic_id:
                log.warning("topic %s changed its id from %s to %s; treating it as recreated",
                            name, known.topic_id, assignment.topic_id)
                self._forget_topic(name)
                self.topics_changed({name: assignment})
                continue
            added = sorted(set(assignment.partitions) - set(known.partitions))
            self.topics[name] = TopicAssignment(known.topic_id, {**known.partitions, **{
                i: assignment.partitions[i] for i in added}}, known.adding, known.removing,
                max(known.version, assignment.version))
            for index in added:
                log.info("topic %s: new partition %d on %s", name, index, assignment.partitions[index])
                self._initialize((name, index))

    def topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None:
        self.topic_configs[topic] = dict(configs)
        if self._unclean_allowed(topic):
            for tp in self._partitions():
                if tp[0] == topic and tp in self.states and self.states[tp].state.leader == NO_LEADER:
                    self._elect_offline(tp)

    def delete_requested(self, names: Iterable[str]) -> None:
        """Children of /admin/delete_topics."""
        for name in sorted(set(names)):
            if name in self.deleting:
                continue
            if name not in self.topics:
                log.info("deletion of unknown topic %s requested: dropping the request", name)
                self._write("delete_tree", layout.delete_topic_path(name))
                continue
            self._start_deletion(name)

    def _start_deletion(self, name: str) -> None:
        log.info("deleting topic %s", name)
        pending = {(broker, index) for index, replicas in self.topics[name].partitions.items() for broker in replicas}
        self.deleting[name] = pending
        self._metadata_changed.update((name, i) for i in self.topics[name].partitions)
        for broker, index in sorted(pending):
            if self._live(broker):
                self._stop_replica.setdefault(broker, {})[(name, index)] = (DELETE_EPOCH, True)
        self._maybe_finish_deletion(name)

    def stop_replica_answered(self, broker: int, results: list[tuple[str, int, int]]) -> None:
        """A broker's StopReplica answer: (topic, partition, error code) per partition."""
        for topic, index, error in results:
            pending = self.deleting.get(topic)
            if pending is None:
                continue
            if error == ErrorCode.NONE:
                pending.discard((broker, index))
            else:
                log.warning("broker %d could not delete %s-%d: error %d; will retry when it restarts",
                            broker, topic, index, error)
        for topic in list(self.deleting):
            self._maybe_finish_deletion(topic)

    def _maybe_finish_deletion(self, name: str) -> None:
        if self.deleting.get(name):
            return
        log.info("topic %s deleted from every replica; removing its znodes", name)
        self._write("delete_tree", layout.topic_path(name))
        self._write("delete_tree", layout.topic_config_path(name))
        self._write("delete_tree", layout.delete_topic_path(name))
        self._forget_topic(name)

    def _forget_topic(self, name: str) -> None:
        assignment = self.topics.pop(name, None)
        self.deleting.pop(name, None)
        self.topic_configs.pop(name, None)
        if assignment is None:
            return
        for index in assignment.partitions:
            self.states.pop((name, index), None)
            self.offline_replicas.pop((name, index), None)
            self._metadata_changed.add((name, index))
            for pending in self._leader_and_isr.values():
                pending.pop((name, index), None)

    # ----------------------------------------------------------------- requests from brokers
    def alter_partition(self, token: Any, request: dict[str, Any], version: int) -> None:
        """AlterPartition from a leader: validate (Kafka's checks, in Kafka's order), write the
        new ISR, and answer after the write."""
        broker = request["broker_id"]
        registration = self.brokers.get(broker)
        if registration is None or (request["broker_epoch"] != -1 and request["broker_epoch"] != registration.epoch):
            self._ready.replies.append(Reply(token, {"throttle_time_ms": 0,
                                                     "error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}))
            return
        by_id = {topic.topic_id: name for name, topic in self.topics.items()}
        topics_out = []
        for topic in request["topics"]:
            name = topic.get("topic_name") if version < 2 else by_id.get(topic["topic_id"])
            partitions_out = []
            for wanted in topic["partitions"]:
                partitions_out.append(self._alter_one(name, wanted, version))
            entry: dict[str, Any] = {"partitions": partitions_out}
            if version < 2:
                entry["topic_name"] = topic.get("topic_name")
            else:
                entry["topic_id"] = topic["topic_id"]
            topics_out.append(entry)
        self._ready.replies.append(Reply(token, {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                                                 "topics": topics_out}))

    def _alter_one(self, name: str | None, wanted: dict[str, Any], version: int) -> dict[str, Any]:
        index = wanted["partition_index"]

        def answer(error: ErrorCode, known: PartitionState | None = None) -> dict[str, Any]:
            if known is None:
                return {"partition_index": index, "error_code": error, "leader_id": NO_LEADER,
                        "leader_epoch": -1, "isr": [], "leader_recovery_state": RECOVERED, "partition_epoch": -1}
            return {"partition_index": index, "error_code": error, "leader_id": known.state.leader,
                    "leader_epoch": known.state.leader_epoch, "isr": list(known.state.isr),
                    "leader_recovery_state": known.state.recovery_state, "partition_epoch": known.version}

        tp = (name, index)
        known = self.states.get(tp) if name is not None else None  # type: ignore[arg-type]
        if name is None or known is None or name in self.deleting:
            return answer(ErrorCode.UNKNOWN_TOPIC_ID if version >= 2 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = known.state
        if wanted["leader_epoch"] > current.leader_epoch or wanted["partition_epoch"] > known.version:
            return answer(ErrorCode.NOT_CONTROLLER)  # we lag behind: the asker must find the new controller
        if wanted["leader_epoch"] < current.leader_epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH)
        if version >= 3:
            new_isr = [b["broker_id"] for b in wanted["new_isr_with_epochs"]]
            epochs = {b["broker_id"]: b["broker_epoch"] for b in wanted["new_isr_with_epochs"]}
        else:
            new_isr, epochs = list(wanted["new_isr"]), {}
        recovery = wanted.get("leader_recovery_state", RECOVERED)
        if set(new_isr) == set(current.isr) and recovery == current.recovery_state:
            return answer(ErrorCode.NONE, known)  # already so: idempotent
        if wanted["partition_epoch"] < known.version:
            return answer(ErrorCode.INVALID_UPDATE_VERSION)
        if current.leader not in new_isr or len(set(new_isr)) != len(new_isr):
            return answer(ErrorCode.INVALID_REQUEST)
        if recovery == RECOVERING and current.recovery_state == RECOVERED:
            return answer(ErrorCode.INVALID_REQUEST)  # a recovered leader never goes back to recovering
        for replica in new_isr:
            registration = self.brokers.get(replica)
            stale = epochs.get(replica, -1) not in (-1, registration.epoch if registration else -2)
            if registration is None or replica in self.shutting_down or stale \
                    or replica not in self._replicas(tp):
                return answer(ErrorCode.INELIGIBLE_REPLICA)
        written = self._set_state(tp, LeaderAndIsr(current.leader, current.leader_epoch, tuple(new_isr),
                                                   self.epoch, recovery))
        log.info("ISR of %s-%d now %s (partition epoch %d), asked by leader %d", *tp, new_isr, written.version,
                 current.leader)
        self._metadata_all = True
        if self._reassigning(tp):
            self._maybe_complete_reassignment(tp)
            return answer(ErrorCode.NONE, self.states[tp])
        return answer(ErrorCode.NONE, written)

    def controlled_shutdown(self, token: Any, broker: int, broker_epoch: int) -> None:
        """A broker asks to shut down: move its leaderships away and take it out of every ISR;
        answer with the partitions it still leads (those with no other in-sync replica)."""
        registration = self.brokers.get(broker)
        if registration is None:
            self._ready.replies.append(Reply(token, {"error_code": ErrorCode.BROKER_NOT_AVAILABLE,
                                                     "remaining_partitions": []}))
            return
        if broker_epoch != -1 and broker_epoch != registration.epoch:
            self._ready.replies.append(Reply(token, {"error_code": ErrorCode.STALE_BROKER_EPOCH,
                                                     "remaining_partitions": []}))
            return
        if broker not in self.shutting_down:
            log.info("broker %d is shutting down: moving its partitions", broker)
        self.shutting_down.add(broker)
        remaining = []
        for tp in self._partitions():
            replicas = self._replicas(tp)
            if broker not in replicas or tp[0] in self.deleting or tp not in self.states:
                continue
            current = self.states[tp].state
            if current.leader == broker:
                others = [b for b in replicas if b != broker and b in current.isr and self._live(b)
                          and b not in self.shutting_down]
                if not others:
                    remaining.append(tp)
                    continue
                isr = tuple(b for b in current.isr if b != broker)
                self._set_state(tp, LeaderAndIsr(others[0], current.leader_epoch + 1, isr, self.epoch,
                                                 current.recovery_state))
                # Every live replica learns it, the one shutting down too: it must stop leading.
                self._send_leader_and_isr(tp, replicas)
            elif broker in current.isr:
                self._remove_from_isr(tp, broker)
                self._stop_replica.setdefault(broker, {})[tp] = (self.states[tp].state.leader_epoch, False)
        self._metadata_all = True
        self._ready.replies.append(Reply(token, {"error_code": ErrorCode.NONE, "remaining_partitions": [
            {"topic_name": t, "partition_index": p} for t, p in remaining]}))

    def elect_leaders(self, token: Any, election_type: int, partitions: list[TopicPartition] | None) -> None:
        """ElectLeaders (and the preferred-election znode): per partition, Kafka's error codes."""
        wanted = self._partitions() if partitions is None else partitions
        results: dict[str, list[dict[str, Any]]] = {}
        for tp in wanted:
            code, message = self._elect_one(tp, election_type)
            if partitions is None and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            results.setdefault(tp[0], []).append({"partition_id": tp[1], "error_code": code,
                                                  "error_message": message})
        self._ready.replies.append(Reply(token, {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                                                 "replica_election_results": [
                                                     {"topic": t, "partition_result": r}
                                                     for t, r in sorted(results.items())]}))

    def _elect_one(self, tp: TopicPartition, election_type: int) -> tuple[ErrorCode, str | None]:
        if tp[0] not in self.topics or tp[1] not in self.topics[tp[0]].partitions or tp[0] in self.deleting:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if tp not in self.states:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "the partition has no state yet"
        if election_type == ELECTION_PREFERRED:
            code = self._elect_preferred(tp)
            return code, None if code == ErrorCode.NONE else f"preferred replica {self._replicas(tp)[0]}"
        current = self.states[tp].state
        if self._live(current.leader):
            return ErrorCode.ELECTION_NOT_NEEDED, None
        candidates = [b for b in self._replicas(tp) if self._live(b) and b not in self.shutting_down]
        if not candidates:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica"
        in_isr = [b for b in candidates if b in current.isr]
        if in_isr:
            self._elect_offline(tp)
            return ErrorCode.NONE, None
        leader = candidates[0]
        log.warning("unclean election asked for %s-%d: %d leads outside the ISR", *tp, leader)
        self._set_state(tp, LeaderAndIsr(leader, current.leader_epoch + 1, (leader,), self.epoch, RECOVERING))
        self._send_leader_and_isr(tp, self._replicas(tp))
        return ErrorCode.NONE, None

    # --------------------------------------------------------------------------- reassignments
    def _reassigning(self, tp: TopicPartition) -> bool:
        assignment = self.topics[tp[0]]
        return tp[1] in assignment.adding or tp[1] in assignment.removing

    def _write_assignment(self, topic: str) -> None:
        assignment = self.topics[topic]
        self._write("set", layout.topic_path(topic), assignment.encode(), assignment.version)
        assignment.version += 1 if assignment.version >= 0 else 0

    def reassign(self, token: Any, wanted: dict[TopicPartition, list[int] | None]) -> None:
        """AlterPartitionReassignments (KIP-455): move each partition to its target replicas
        (None: cancel). The new replicas are added first and catch up as followers; once all of
        them are in the ISR, leadership moves into the target set if needed and the replicas
        left out are removed and deleted."""
        results: dict[str, list[dict[str, Any]]] = {}
        for tp, target in sorted(wanted.items()):
            code, message = self._reassign_one(tp, target)
            results.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": code,
                                                  "error_message": message})
        self._ready.replies.append(Reply(token, {
            "throttle_time_ms": 0, "allow_replication_factor_change": True, "error_code": ErrorCode.NONE,
            "error_message": None,
            "responses": [{"name": t, "partitions": r} for t, r in sorted(results.items())]}))

    def _reassign_one(self, tp: TopicPartition, target: list[int] | None) -> tuple[ErrorCode, str | None]:
        name, index = tp
        assignment = self.topics.get(name)
        if assignment is None or index not in assignment.partitions or name in self.deleting or tp not in self.states:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        current = assignment.partitions[index]
        adding = assignment.adding.get(index, [])
        original = [b for b in current if b not in adding]
        if target is None:
            if not self._reassigning(tp):
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            if not set(original) & set(self.states[tp].state.isr):
                # Back to the original replicas would leave the ISR outside them (or empty it):
                # only once one of them is in sync again. (Found by the replication simulation.)
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                    f"none of the original replicas {original} is in sync yet: cancel again later"
            log.info("reassignment of %s-%d cancelled: back to %s", *tp, original)
            self._finish_reassignment(tp, original, stop=adding)
            return ErrorCode.NONE, None
        if not target or len(set(target)) != len(target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"replicas {target} are empty or repeat a broker"
        offline = [b for b in target if b not in self.brokers]
        if offline:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {offline} are not live"
        if target == original and not self._reassigning(tp):
            return ErrorCode.NONE, None
        replicas = [*target, *(b for b in original if b not in target)]
        assignment.partitions[index] = replicas
        assignment.adding[index] = [b for b in target if b not in original]
        assignment.removing[index] = [b for b in original if b not in target]
        if not assignment.adding[index]:
            del assignment.adding[index]
        if not assignment.removing[index]:
            del assignment.removing[index]
        log.info("reassigning %s-%d from %s to %s (replicas while moving: %s)", *tp, original, target, replicas)
        self._write_assignment(name)
        # A new reassignment over one in progress: replicas that were being added and are wanted
        # no more leave the ISR and are stopped and deleted (Kafka's KIP-455 does the same), so
        # the ISR stays within the replicas. (Found by the replication simulation.)
        dropped = [b for b in adding if b not in replicas]
        state = self.states[tp].state
        isr = tuple(b for b in state.isr if b in replicas) or state.isr
        leader = state.leader
        if leader not in replicas:
            candidates = [b for b in replicas if b in isr and self._live(b) and b not in self.shutting_down]
            leader = candidates[0] if candidates else NO_LEADER
        # The replicas learn the new set with a new epoch (brokers ignore an epoch they have seen).
        self._set_state(tp, LeaderAndIsr(leader, state.leader_epoch + 1, isr, self.epoch, state.recovery_state))
        self._send_leader_and_isr(tp, replicas)
        for broker in dropped:
            if broker in self.brokers:
                self._stop_replica.setdefault(broker, {})[tp] = (self.states[tp].state.leader_epoch, True)
        if self._reassigning(tp):
            self._maybe_complete_reassignment(tp)
        else:
            assignment.partitions[index] = list(target)
        return ErrorCode.NONE, None

    def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        assignment = self.topics[tp[0]]
        removing = assignment.removing.get(tp[1], [])
        target = [b for b in assignment.partitions[tp[1]] if b not in removing]
        if all(b in self.states[tp].state.isr for b in target):
            log.info("reassignment of %s-%d: %s all in sync; completing", *tp, target)
            self._finish_reassignment(tp, target, stop=removing)

    def _finish_reassignment(self, tp: TopicPartition, final: list[int], stop: list[int]) -> None:
        """Make `final` the partition's replicas: leadership moves into it if needed, the ISR
        keeps only its members, and the `stop` replicas are stopped and deleted."""
        name, index = tp
        state = self.states[tp].state
        isr = tuple(b for b in state.isr if b in final) or state.isr
        leader = state.leader
        if leader not in final or not self._live(leader):
            candidates = [b for b in final if b in isr and self._live(b) and b not in self.shutting_down]
            leader = candidates[0] if candidates else NO_LEADER
        if not set(isr) <= set(final):
            isr = (leader,) if leader != NO_LEADER else isr
        assignment = self.topics[name]
        assignment.partitions[index] = list(final)
        assignment.adding.pop(index, None)
        assignment.removing.pop(index, None)
        self._write_assignment(name)
        self._set_state(tp, LeaderAndIsr(leader, state.leader_epoch + 1, isr, self.epoch, state.recovery_state))
        self._send_leader_and_isr(tp, final)
        for broker in stop:
            if broker in self.brokers:
                self._stop_replica.setdefault(broker, {})[tp] = (self.states[tp].state.leader_epoch, True)

    def list_reassignments(self, partitions: list[TopicPartition] | None) -> dict[str, Any]:
        """ListPartitionReassignments: the partitions being moved (all, or of those asked)."""
        wanted = [tp for tp in self._partitions() if self._reassigning(tp)] if partitions is None else [
            tp for tp in partitions if tp[0] in self.topics and tp[1] in self.topics[tp[0]].partitions
            and self._reassigning(tp)]
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for name, index in sorted(wanted):
            assignment = self.topics[name]
            by_topic.setdefault(name, []).append({
                "partition_index": index, "replicas": list(assignment.partitions[index]),
                "adding_replicas": list(assignment.adding.get(index, [])),
                "removing_replicas": list(assignment.removing.get(index, []))})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "topics": [{"name": t, "partitions": p} for t, p in sorted(by_topic.items())]}

    # ------------------------------------------------------------------------------------ time
    def tick(self, now_ms: int) -> None:
        """Auto leader rebalance: when a broker leads too few of the partitions it prefers, move
        the leadership of those partitions back to it (Kafka's leader.imbalance.* settings)."""
        if not self.settings.auto_leader_rebalance or now_ms < self._next_rebalance_ms:
            return
        self._next_rebalance_ms = now_ms + self.settings.imbalance_check_interval_ms
        preferred_by: dict[int, list[TopicPartition]] = {}
        for tp in self._partitions():
            if tp in self.states and tp[0] not in self.deleting:
                preferred_by.setdefault(self._replicas(tp)[0], []).append(tp)
        for broker, partitions in sorted(preferred_by.items()):
            if not self._live(broker) or broker in self.shutting_down:
                continue
            not_led = [tp for tp in partitions if self.states[tp].state.leader != broker]
            if 100 * len(not_led) > self.settings.imbalance_percentage * len(partitions):
                moved = [tp for tp in not_led if self._elect_preferred(tp) == ErrorCode.NONE]
                if moved:
                    log.info("leader imbalance on broker %d: moved %d partitions back to it", broker, len(moved))

    # ------------------------------------------------------------------- building the requests
    def _flush_requests(self) -> None:
        requests = self._ready.requests
        for broker, partitions in sorted(self._leader_and_isr.items()):
            if broker in self.brokers and partitions:
                requests.append(self._leader_and_isr_request(broker, partitions))
        self._leader_and_isr = {}
        if self._metadata_all or self._metadata_changed or self._metadata_full:
            changed = sorted(self._metadata_changed)
            for broker in sorted(self.brokers):
                if broker in self._metadata_full:
                    requests.append(self._update_metadata_request(broker, None))
                elif self._metadata_all or changed:
                    requests.append(self._update_metadata_request(broker, changed))
        self._metadata_changed, self._metadata_full, self._metadata_all = set(), set(), False
        for broker, stops in sorted(self._stop_replica.items()):
            if broker in self.brokers and stops:
                requests.append(self._stop_replica_request(broker, stops))
        self._stop_replica = {}

    def _leader_and_isr_request(self, broker: int, partitions: dict[TopicPartition, bool]) -> BrokerRequest:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        leaders: set[int] = set()
        for tp, is_new in sorted(partitions.items()):
            if tp not in self.states or tp[0] not in self.topics:
                continue
            known = self.states[tp]
            assignment = self.topics[tp[0]]
            by_topic.setdefault(tp[0], []).append({
                "partition_index": tp[1], "controller_epoch": known.state.controller_epoch,
                "leader": known.state.leader, "leader_epoch": known.state.leader_epoch,
                "isr": list(known.state.isr), "partition_epoch": known.version,
                "replicas": list(assignment.partitions[tp[1]]),
                "adding_replicas": list(assignment.adding.get(tp[1], [])),
                "removing_replicas": list(assignment.removing.get(tp[1], [])),
                "is_new": is_new, "leader_recovery_state": known.state.recovery_state})
            if known.state.leader in self.brokers:
                leaders.add(known.state.leader)
        body = {
            "controller_id": self.broker_id, "controller_epoch": self.epoch,
            "broker_epoch": self.brokers[broker].epoch, "type": TYPE_INCREMENTAL,
            "topic_states": [{"topic_name": t, "topic_id": self.topics[t].topic_id, "partition_states": states}
                             for t, states in sorted(by_topic.items())],
            "live_leaders": [{"broker_id": b, "host_name": self.brokers[b].host, "port": self.brokers[b].port}
                             for b in sorted(leaders)],
        }
        return BrokerRequest(broker, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, body)

    def _update_metadata_request(self, broker: int, partitions: list[TopicPartition] | None) -> BrokerRequest:
        """UpdateMetadata with the live brokers and the given partitions' states (all of them
        when `partitions` is None). A partition that is gone or being deleted is sent with
        leader -2, which tells a broker to forget it."""
        wanted = self._partitions() if partitions is None else partitions
        by_topic: dict[str, list[dict[str, Any]]] = {}
        topic_ids: dict[str, uuid.UUID] = {}
        for tp in sorted(wanted):
            name, index = tp
            assignment = self.topics.get(name)
            known = self.states.get(tp)
            if assignment is None or index not in assignment.partitions or name in self.deleting:
                leader, epoch, isr, version, replicas = LEADER_DURING_DELETE, 0, [], 0, []
                topic_ids.setdefault(name, assignment.topic_id if assignment else uuid.UUID(int=0))
            elif known is None:
                continue  # not initialized yet: nothing to tell
            else:
                leader, epoch = known.state.leader, known.state.leader_epoch
                isr, version, replicas = list(known.state.isr), known.version, assignment.partitions[index]
                topic_ids[name] = assignment.topic_id
            by_topic.setdefault(name, []).append({
                "partition_index": index, "controller_epoch": self.epoch, "leader": leader,
                "leader_epoch": epoch, "isr": isr, "zk_version": version, "replicas": list(replicas),
                "offline_replicas": [b for b in replicas if not self._serves(tp, b)]})
        body = {
            "controller_id": self.broker_id, "controller_epoch": self.epoch,
            "broker_epoch": self.brokers[broker].epoch,
            "topic_states": [{"topic_name": t, "topic_id": topic_ids[t], "partition_states": states}
                             for t, states in sorted(by_topic.items())],
            "live_brokers": [{"id": b.broker_id, "endpoints": [
                {"port": e.port, "host": e.host, "listener": e.listener,
                 "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, PLAINTEXT)}
                for e in b.all_endpoints()],
                "rack": b.rack} for b in sorted(self.brokers.values(), key=lambda r: r.broker_id)],
        }
        return BrokerRequest(broker, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, body)

    def _stop_replica_request(self, broker: int, stops: dict[TopicPartition, tuple[int, bool]]) -> BrokerRequest:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, index), (epoch, delete) in sorted(stops.items()):
            by_topic.setdefault(name, []).append({"partition_index": index, "leader_epoch": epoch,
                                                  "delete_partition": delete})
        body = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                "broker_epoch": self.brokers[broker].epoch,
                "topic_states": [{"topic_name": t, "partition_states": p} for t, p in sorted(by_topic.items())]}
        return BrokerRequest(broker, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body)

    # ----------------------------------------------------------------------------- invariants
    def check(self) -> None:
        for tp, known in self.states.items():
            state = known.state
            assert state.isr, f"{tp}: empty ISR"
            assert tp[0] in self.topics, f"{tp}: state without a topic"
            replicas = self._replicas(tp)
            assert set(state.isr) <= set(replicas), f"{tp}: ISR {state.isr} outside replicas {replicas}"
            assert state.leader == NO_LEADER or state.leader in replicas
