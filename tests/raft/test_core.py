"""Scripted scenarios for the sans-IO core: we deliver every message by hand."""

from __future__ import annotations

import random
from collections.abc import Callable

from roost.raft.core import RaftConfig, RaftCore, Role
from roost.raft.messages import Entry, EntryKind, HardState, Message, MessageType

CONFIG = RaftConfig(election_ticks=10, heartbeat_ticks=1, max_append_entries=1)


class Net:
    """Cores with instant persistence; messages wait in `pending` until delivered."""

    def __init__(self, size: int = 3, config: RaftConfig = CONFIG,
                 logs: dict[int, tuple[HardState, list[Entry]]] | None = None) -> None:
        ids = list(range(1, size + 1))
        logs = logs or {}
        self.cores = {
            i: RaftCore(i, ids, config, random.Random(i), hard_state=logs.get(i, (HardState(), []))[0],
                        entries=logs.get(i, (HardState(), []))[1])
            for i in ids
        }
        self.pending: list[Message] = []
        self.results: dict[int, list[object]] = {i: [] for i in ids}
        self.cut: set[int] = set()

    def flush(self) -> None:
        for i, core in self.cores.items():
            for _ in range(50):
                if not core.has_ready():
                    break
                rd = core.ready()
                core.advance(rd)
                for m in [*rd.early_messages, *rd.messages]:
                    if m.src not in self.cut and m.dst not in self.cut:
                        self.pending.append(m)
                self.results[i] += [*rd.proposal_results, *rd.read_states]

    def deliver(self, keep: Callable[[Message], bool] = lambda m: True, rounds: int = 50) -> None:
        """Deliver pending messages that `keep` accepts (others are dropped) until quiet."""
        for _ in range(rounds):
            self.flush()
            if not self.pending:
                return
            batch, self.pending = self.pending, []
            for m in batch:
                if keep(m):
                    self.cores[m.dst].step(m)

    def elect(self, i: int) -> None:
        self.cores[i].campaign()
        self.deliver()
        assert self.cores[i].role is Role.LEADER

    def tick_all(self, times: int, keep: Callable[[Message], bool] = lambda m: True) -> None:
        for _ in range(times):
            for core in self.cores.values():
                core.tick()
            self.deliver(keep)


def test_election_and_replication() -> None:
    net = Net()
    net.elect(1)
    leader = net.cores[1]
    assert leader.term == 1 and all(c.leader == 1 for c in net.cores.values())
    assert leader.propose(b"x", request_id=7)
    net.deliver()
    assert all(c.commit == 2 for c in net.cores.values())  # the no-op at 1, then x
    assert net.cores[2].log.entry(2).data == b"x" and net.cores[2].log.entry(1).kind is EntryKind.NOOP
    assert net.results[1][0].index == 2 and net.results[1][0].term == 1


def test_prevote_keeps_an_isolated_member_from_inflating_its_term() -> None:
    net = Net()
    net.elect(1)
    net.cut = {3}
    net.tick_all(100)
    assert net.cores[3].term == 1 and net.cores[3].role is Role.PRE_CANDIDATE
    net.cut = set()
    net.tick_all(5)
    assert net.cores[1].role is Role.LEADER and net.cores[1].term == 1
    assert net.cores[3].leader == 1


def test_check_quorum_leader_steps_down_when_cut_off() -> None:
    net = Net()
    net.elect(1)
    net.cut = {1}
    net.tick_all(CONFIG.election_ticks * 2 + 1)
    assert net.cores[1].role is not Role.LEADER
    assert net.cores[1].leader is None
    assert {net.cores[2].role, net.cores[3].role} >= {Role.LEADER} or net.cores[2].leader == net.cores[3].leader


def test_old_term_entry_is_not_committed_by_counting() -> None:
    """Raft §5.4.2 (Figure 8): a leader commits an older term's entry only via one of its own."""
    hs = HardState(term=2, vote=0, commit=1)
    logs = {
        1: (hs, [Entry(1, 1), Entry(2, 2, b"old")]),
        2: (hs, [Entry(1, 1)]),
        3: (hs, [Entry(1, 1)]),
    }
    net = Net(logs=logs)
    net.cores[1].campaign()
    net.deliver(lambda m: m.type not in (MessageType.APPEND, MessageType.HEARTBEAT))
    leader = net.cores[1]
    assert leader.role is Role.LEADER and leader.term == 3
    net.pending.clear()
    # Member 2 gets index 2 (term 2) but not yet the term-3 no-op at index 3.
    leader.step(Message(MessageType.APPEND_RESP, 2, 1, term=3, index=1))
    net.flush()
    append = next(m for m in net.pending if m.dst == 2 and m.type is MessageType.APPEND)
    assert [e.index for e in append.entries] == [2]
    held_back = [m for m in net.pending if m is not append]  # the no-op's append, pipelined
    net.pending.clear()
    net.cores[2].step(append)
    net.flush()
    for m in net.pending:
        if m.dst == 1 and m.type is MessageType.APPEND_RESP:
            leader.step(m)
    assert leader.progress[2].match == 2
    assert leader.commit == 1, "an entry of an older term must not commit by counting replicas"
    net.pending = held_back
    net.deliver()
    assert leader.commit == 3 and net.cores[2].commit == 3


def test_fast_backoff_skips_a_divergent_suffix() -> None:
    hs = HardState(term=2, vote=0, commit=1)
    stale = [Entry(1, 1)] + [Entry(2, i, b"stale") for i in range(2, 60)]
    logs = {1: (hs, [Entry(1, 1), Entry(2, 2)]), 2: (hs, [Entry(1, 1), Entry(2, 2)]), 3: (hs, stale)}
    config = RaftConfig(election_ticks=10, heartbeat_ticks=1, max_append_entries=100)
    net = Net(config=config, logs=logs)
    net.cores[1].campaign()
    net.deliver(lambda m: not (m.type is MessageType.VOTE_RESP and m.src == 3))
    leader = net.cores[1]
    rejects = []
    net.deliver(lambda m: not (m.type is MessageType.APPEND_RESP and m.reject and rejects.append(m)))
    net.deliver()
    assert leader.progress[3].match == leader.log.last_index == 3
    assert net.cores[3].log.last_index == 3 and net.cores[3].log.entry(3).kind is EntryKind.NOOP
    assert len(rejects) <= 2, f"back-off took {len(rejects)} rejections"


def test_read_index_waits_for_the_new_leaders_own_commit() -> None:
    net = Net()
    net.cores[1].campaign()
    net.deliver(lambda m: m.type is not MessageType.APPEND)  # the no-op does not commit yet
    leader = net.cores[1]
    assert leader.role is Role.LEADER and leader.commit == 0
    assert leader.read_index(41)
    net.deliver(lambda m: m.type is not MessageType.APPEND)
    assert net.results[1] == []
    net.deliver()  # no-op commits; then a heartbeat round confirms leadership
    net.tick_all(1)
    reads = [r for r in net.results[1] if getattr(r, "request_id", None) == 41]
    assert len(reads) == 1 and reads[0].index == leader.commit >= 1


def test_follower_forwards_proposals_and_reads() -> None:
    net = Net()
    net.elect(1)
    follower = net.cores[2]
    assert follower.propose(b"a", 1) and follower.propose(b"b", 2)
    assert follower.read_index(3)
    net.deliver()
    net.tick_all(1)
    results = {r.request_id: r for r in net.results[2]}
    assert results[1].index == 2 and results[2].index == 3 and results[1].term == 1
    assert results[3].index >= 1 and not results[3].refused
    assert net.cores[3].log.entry(3).data == b"b"


def test_no_leader_refuses() -> None:
    net = Net()
    assert not net.cores[1].propose(b"x", 1)
    assert not net.cores[1].read_index(2)


def test_leader_transfer() -> None:
    net = Net()
    net.elect(1)
    net.deliver()
    assert net.cores[1].transfer_leadership(3)
    net.deliver()
    assert net.cores[3].role is Role.LEADER and net.cores[3].term == 2
    assert net.cores[1].leader == 3


def test_messages_from_strangers_are_ignored() -> None:
    net = Net()
    net.cores[1].step(Message(MessageType.VOTE, 9, 1, term=5, index=10, log_term=5))
    assert net.cores[1].term == 0 and not net.cores[1].has_ready()


def test_forwarded_proposals_travel_in_bounded_batches() -> None:
    config = RaftConfig(election_ticks=10, heartbeat_ticks=1, max_append_bytes=1000)
    net = Net(config=config)
    net.elect(1)
    follower = net.cores[2]
    for k in range(10):
        assert follower.propose(bytes(300), k)
    net.flush()
    batches = [m for m in net.pending if m.type is MessageType.PROPOSE]
    assert len(batches) > 1 and sum(len(m.entries) for m in batches) == 10
    assert all(sum(len(e.data) for e in m.entries) <= 1000 for m in batches)
    net.deliver()
    assert sorted(r.index for r in net.results[2]) == list(range(2, 12))


def test_commit_notices_are_quiet_and_answered_only_on_a_mismatch() -> None:
    net = Net()
    net.elect(1)
    leader = net.cores[1]
    leader.propose(b"x", 1)
    seen: list[Message] = []

    def record(m: Message) -> bool:
        seen.append(m)
        return True

    net.deliver(record)
    assert leader.commit == leader.log.last_index
    notices = [(at, m) for at, m in enumerate(seen)
               if m.type is MessageType.APPEND and not m.entries and m.quiet]
    assert {m.dst for _, m in notices} == {2, 3}, "each follower got a quiet commit notice"
    assert all(net.cores[i].commit == leader.commit for i in (2, 3)), "the notices taught the commit"
    # (Positions, not seen.index(): an answer to a notice equals the earlier answer to the append.)
    answers_after = [m for at, m in enumerate(seen) if m.type is MessageType.APPEND_RESP
                     and any(at > notice_at and m.src == notice.dst for notice_at, notice in notices)]
    assert answers_after == [], "a matching notice is not answered"
    # A notice that does not match the follower's log is answered (with a rejection), so that
    # the leader learns it must probe.
    mismatch = Message(MessageType.APPEND, 1, 2, term=leader.term, index=leader.log.last_index + 5,
                       log_term=leader.term, commit=leader.commit, quiet=True)
    net.cores[2].step(mismatch)
    rd = net.cores[2].ready()
    net.cores[2].advance(rd)
    assert [(m.type, m.reject) for m in rd.messages] == [(MessageType.APPEND_RESP, True)]


def test_answer_to_a_forwarded_proposal_leaves_with_the_appends_before_the_fsync() -> None:
    net = Net()
    net.elect(1)
    leader = net.cores[1]
    leader.step(Message(MessageType.PROPOSE, 2, 1, entries=(Entry(0, 0, b"fwd"),), request_ids=(7,)))
    rd = leader.ready()
    assert rd.must_sync and [e.data for e in rd.entries] == [b"fwd"]
    early = [(m.type, m.dst) for m in rd.early_messages]
    assert (MessageType.PROPOSE_RESP, 2) in early, "the index is told before the leader's fsync"
    assert (MessageType.APPEND, 2) in early and (MessageType.APPEND, 3) in early
    assert not any(m.type is MessageType.PROPOSE_RESP for m in rd.messages)
    leader.advance(rd)


def test_followers_told_the_leader_is_gone_elect_within_a_few_ticks() -> None:
    net = Net()
    net.elect(1)
    net.cut = {1}  # the leader's process is gone: it neither sends nor receives
    for follower in (2, 3):
        net.cores[follower].leader_unreachable(1)
    for _ in range(CONFIG.unreachable_campaign_ticks):  # far less than an election timeout
        net.tick_all(1)
    leaders = [i for i, core in net.cores.items() if i != 1 and core.role is Role.LEADER]
    assert len(leaders) == 1 and net.cores[leaders[0]].term == 2


def test_a_false_gone_signal_neither_disrupts_a_live_leader_nor_sticks() -> None:
    net = Net()
    net.elect(1)
    net.cores[2].leader_unreachable(1)  # false: the leader lives, and 3 still hears from it
    net.tick_all(CONFIG.unreachable_campaign_ticks)
    assert net.cores[1].role is Role.LEADER and all(core.term == 1 for core in net.cores.values())
    assert net.cores[2].leader == 1 and net.cores[2].role is Role.FOLLOWER
    # Back to a full election timeout once the leader was heard again.
    assert net.cores[2].randomized_election_timeout >= CONFIG.election_ticks


def test_a_gone_signal_about_a_member_that_is_not_the_leader_changes_nothing() -> None:
    net = Net()
    net.elect(1)
    before = net.cores[2].randomized_election_timeout
    net.cores[2].leader_unreachable(3)
    assert net.cores[2].leader == 1 and net.cores[2].randomized_election_timeout == before
