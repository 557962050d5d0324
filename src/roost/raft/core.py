"""Raft as a pure state machine (sans-IO), in the style of etcd-io/raft.

Inputs: `step(message)`, `tick()`, `propose(data, request_id)`, `read_index(request_id)`, and
`advance(ready)` once the caller has made a Ready durable. Outputs: `ready()` returns what to
persist, what to send and what to apply. No clock, no sockets, no disk: the caller owns time (ticks),
randomness (a seeded `random.Random`), storage and transport.

The caller's loop, for each Ready:
  1. send `ready.early_messages` (a leader's appends may go out before its own fsync, Raft thesis
     §10.2.1);
  2. persist `ready.snapshot`, `ready.entries` (overwriting from their first index) and
     `ready.hard_state`; fsync if `ready.must_sync`;
  3. `advance(ready)`;
  4. send `ready.messages` (votes and acknowledgements promise what is now durable);
  5. restore `ready.snapshot` into the state machine, then apply `ready.committed_entries`.

Features: pre-vote, randomised election timeouts, check-quorum with a leader lease (members that
heard from a leader recently ignore vote requests), fast log back-off with (index, term) hints,
commit by counting only entries of the current term with a no-op entry opening each term,
snapshots (InstallSnapshot) for members behind the compaction point, ReadIndex read barriers, and
forwarding of proposals and reads from followers to the leader.

Membership: voters and learners (ZooKeeper's observers: they replicate and apply the log but never
vote, campaign or count toward a quorum). It changes one member at a time (Raft thesis §4.1,
single-server change) through CONFIG entries, each taking effect on a member as soon as it is in
its log (committed or not); a truncated CONFIG entry reverts to the one before it. Any two
majorities of configurations that differ by one voter overlap, so no joint consensus is needed.
A leader starts a change only once its previous one is committed and an entry of its own term is
(the fix to the thesis' single-server algorithm, raft-dev, 2015); a leader that removes itself
keeps leading until the change commits, not counting itself, and then steps down.
"""

from __future__ import annotations

import enum
import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from roost.raft.log import RaftLog
from roost.raft.messages import (
    TERMLESS,
    Entry,
    EntryKind,
    HardState,
    Membership,
    Message,
    MessageType,
    Snapshot,
)

# Why a leader refused a membership change; a PROPOSE_RESP carries the position in `context`.
_REFUSALS = ("", "not-leader", "in-progress", "too-many", "no-voter", "catching-up")


# A leader's messages count whether or not our configuration lists it (Raft thesis §4.1): a
# leader that removed itself keeps leading until the change commits, and a member may not yet
# have the entry that added a new leader. Anything else from a stranger is ignored.
_FROM_ANY_LEADER = frozenset({MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT})


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_ticks: int = 10  # a follower campaigns after [election_ticks, 2 * election_ticks) quiet ticks
    heartbeat_ticks: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_append_entries: int = 512
    max_append_bytes: int = 1 << 20
    max_inflight_appends: int = 64
    snapshot_retry_ticks: int = 30  # resend a snapshot that got no answer after this many ticks
    max_pending_forwards: int = 4096  # proposals queued on a follower before it refuses more
    # A follower told its leader's process is gone (`leader_unreachable`) campaigns after a random
    # 1..this many ticks instead of a full election timeout: the spread keeps the followers that
    # all got the same signal from splitting their votes.
    unreachable_campaign_ticks: int = 4

    def __post_init__(self) -> None:
        assert self.election_ticks > self.heartbeat_ticks >= 1
        assert self.max_append_entries >= 1 and self.max_inflight_appends >= 1
        assert self.unreachable_campaign_ticks >= 1


@dataclass(frozen=True, slots=True)
class ProposalResult:
    """Where a proposal landed in the log (term, index), or `index == 0` if it was refused."""

    request_id: int
    term: int
    index: int
    reason: str = ""  # a refused membership change: why (see `RaftCore.propose_membership`)

    @property
    def refused(self) -> bool:
        return self.index == 0


@dataclass(frozen=True, slots=True)
class ReadState:
    """A read barrier: once applied >= `index` a read sees every write committed before the
    request. `index == -1` means refused (no leader, or leadership lost)."""

    request_id: int
    index: int

    @property
    def refused(self) -> bool:
        return self.index < 0


@dataclass(slots=True)
class Ready:
    hard_state: HardState | None = None
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None
    early_messages: list[Message] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    committed_entries: list[Entry] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)
    proposal_results: list[ProposalResult] = field(default_factory=list)
    must_sync: bool = False


class ProgressState(enum.Enum):
    PROBE = "probe"  # one append at a time until we find where the follower's log matches
    REPLICATE = "replicate"  # pipelined appends, up to max_inflight_appends
    SNAPSHOT = "snapshot"  # a snapshot is on its way; wait for its acknowledgement


@dataclass(slots=True)
class Progress:
    """The leader's view of one follower."""

    next: int
    match: int = 0
    state: ProgressState = ProgressState.PROBE
    probe_sent: bool = False
    inflight: deque[int] = field(default_factory=deque)
    pending_snapshot: int = 0
    snapshot_ticks: int = 0
    recent_active: bool = False
    read_ack: int = 0  # highest read-index round this follower acknowledged

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            self.next = max(self.match + 1, self.pending_snapshot + 1)
        else:
            self.next = self.match + 1
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.inflight.clear()
        self.pending_snapshot = 0

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.probe_sent = False
        self.inflight.clear()

    def become_snapshot(self, index: int) -> None:
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = index
        self.snapshot_ticks = 0
        self.inflight.clear()

    def paused(self, max_inflight: int) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= max_inflight
        return True

    def update(self, index: int) -> bool:
        """An acknowledgement up to `index`; False if it told us nothing new."""
        updated = index > self.match
        if updated:
            self.match = index
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()
        return updated

    def decrease_to(self, rejected: int, match_hint: int) -> bool:
        """A rejected append at `rejected`; False if the rejection is stale."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.probe_sent = False
        return True


@dataclass(slots=True)
class _PendingRead:
    round: int  # heartbeat round whose quorum acknowledgement confirms our leadership
    index: int  # commit index at the time of the request
    requester: int
    request_id: int


class RaftCore:
    def __init__(
        self,
        node_id: int,
        members: Iterable[int],
        config: RaftConfig,
        rng: random.Random,
        *,
        hard_state: HardState | None = None,
        snapshot: Snapshot | None = None,
        entries: Sequence[Entry] = (),
        learners: Iterable[int] = (),
        context: bytes = b"",
    ) -> None:
        """`members` are the initial voters and `learners` the initial learners (with `context`,
        the application's description of them): the configuration until the log or a snapshot
        holds another."""
        assert node_id > 0
        self.id = node_id
        self._initial = Membership(frozenset(members), frozenset(learners), context)
        assert self._initial.voters, "an ensemble needs a voter"
        # The configuration as of the log's first entry, and the CONFIG entries after it.
        self._base = snapshot.membership if snapshot is not None and snapshot.membership else self._initial
        self._config_entries: list[tuple[int, Membership]] = []
        self.membership = self._base
        self.members: tuple[int, ...] = ()
        self.voters: frozenset[int] = frozenset()
        self.peers: tuple[int, ...] = ()
        self.voter_peers: tuple[int, ...] = ()
        self.quorum = 1
        self.config = config
        self.rng = rng
        hard_state = hard_state or HardState()
        self.term = hard_state.term
        self.vote = hard_state.vote
        self.log = RaftLog(snapshot, entries, hard_state.commit)
        self.snapshot: Snapshot | None = snapshot  # the latest, to send to members behind the log
        self.role = Role.FOLLOWER
        self.leader: int | None = None
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = 0
        self._hastened = False  # the election timer was cut short by `leader_unreachable`
        self._reset_election_timeout()
        self.votes: dict[int, bool] = {}
        self.progress: dict[int, Progress] = {}
        self._msgs: list[Message] = []
        self._early_msgs: list[Message] = []
        self._prev_hard_state = HardState(self.term, self.vote, self.log.commit)
        self._pending_snapshot: Snapshot | None = None
        self._read_states: list[ReadState] = []
        self._proposal_results: list[ProposalResult] = []
        self._forwards: list[tuple[int, bytes]] = []  # follower: proposals to forward to the leader
        self._forward_reads: list[int] = []  # follower: read requests to forward
        self._broadcast_needed = False
        self._commit_broadcast_needed = False  # followers learn a new commit index promptly
        self._read_round = 0
        self._read_round_sent = 0
        self._pending_reads: deque[_PendingRead] = deque()
        self._deferred_reads: list[_PendingRead] = []  # until a current-term entry commits
        self._step_down_removed = False  # a leader whose removal just committed
        self._config_rescan(self.log.offset)

    # --- membership --------------------------------------------------------------------------

    def _set_membership(self, membership: Membership) -> None:
        self.membership = membership
        self.members = tuple(sorted(membership.members))
        self.voters = membership.voters
        self.peers = tuple(m for m in self.members if m != self.id)
        self.voter_peers = tuple(m for m in sorted(self.voters) if m != self.id)
        self.quorum = membership.quorum
        if self.role is Role.LEADER:
            for peer in self.peers:
                if peer not in self.progress:
                    pr = Progress(next=self.log.last_index + 1)
                    pr.recent_active = True  # a full election timeout to answer
                    self.progress[peer] = pr
                    self._broadcast_needed = True
            for gone in [p for p in self.progress if p not in self.peers]:
                del self.progress[gone]

    def _config_rescan(self, after: int) -> None:
        """Re-read the CONFIG entries after index `after` (entries there were appended or
        replaced) and take the newest configuration."""
        self._config_entries = [(i, m) for i, m in self._config_entries if i <= after]
        lo = max(after, self.log.offset) + 1
        for index in range(lo, self.log.last_index + 1):
            entry = self.log.entry(index)
            if entry.kind is EntryKind.CONFIG:
                self._config_entries.append((index, Membership.decode(entry.data)))
        self._set_membership(self._config_entries[-1][1] if self._config_entries else self._base)

    def membership_at(self, index: int) -> Membership:
        """The configuration in force at log index `index` (for a snapshot taken there)."""
        assert index >= self.log.offset
        newest = self._base
        for at, membership in self._config_entries:
            if at > index:
                break
            newest = membership
        return newest

    @property
    def is_voter(self) -> bool:
        return self.id in self.voters

    @property
    def config_change_pending(self) -> bool:
        """True while the newest CONFIG entry is not committed: no other change may start."""
        return bool(self._config_entries) and self._config_entries[-1][0] > self.log.commit

    def propose_membership(self, membership: Membership, request_id: int) -> str | None:
        """Append a configuration that differs from the current one by at most one voter
        (learners may come and go freely). On the leader, returns None when appended (its
        ProposalResult comes in a later Ready) or why it was refused: 'not-leader', 'in-progress'
        (the previous change, or this term's first entry, is not committed yet), 'too-many' (more
        than one voter added or removed), 'no-voter', 'catching-up' (a new voter's log is not yet
        as far as the commit index). A follower forwards it to the leader (None: the answer,
        refused with a reason or not, comes as a ProposalResult), or says 'not-leader'."""
        if self.role is not Role.LEADER:
            if self.leader is None:
                return "not-leader"
            self._send(Message(MessageType.PROPOSE, self.id, self.leader, request_ids=(request_id,),
                               entries=(Entry(0, 0, membership.encode(), EntryKind.CONFIG),)))
            return None
        refusal = self._membership_refusal(membership)
        if refusal is not None:
            return refusal
        index = self._append_local([membership.encode()], kind=EntryKind.CONFIG)
        self._proposal_results.append(ProposalResult(request_id, self.term, index))
        return None

    def _membership_refusal(self, membership: Membership) -> str | None:
        if self.config_change_pending or self.log.term(self.log.commit) != self.term:
            return "in-progress"
        if not membership.voters:
            return "no-voter"
        if len(membership.voters ^ self.voters) > 1:
            return "too-many"
        for new in membership.voters - self.voters:
            # A new voter counts toward the commit quorum at once: if it were far behind, commits
            # would stall until it caught up (thesis §4.2.1). It must have caught up as a learner.
            pr = self.progress.get(new)
            if new != self.id and (pr is None or pr.match < self.log.commit):
                return "catching-up"
        return None

    # --- status ------------------------------------------------------------------------------

    @property
    def commit(self) -> int:
        return self.log.commit

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.commit)

    # --- inputs ------------------------------------------------------------------------------

    def tick(self) -> None:
        if self.role is Role.LEADER:
            self._tick_leader()
        else:
            self.election_elapsed += 1
            if not self.is_voter:
                return  # a learner never campaigns (it still counts the time since the leader spoke)
            if self.election_elapsed >= self.randomized_election_timeout:
                self.election_elapsed = 0
                self.campaign()

    def campaign(self, transfer: bool = False) -> None:
        """Start an election: a pre-vote round first, unless this is a leader transfer (which
        also asks voters to ignore their lease)."""
        if self.role is Role.LEADER or not self.is_voter:
            return
        self._start_election(pre=self.config.pre_vote and not transfer, transfer=transfer)

    def _start_election(self, pre: bool, transfer: bool) -> None:
        if pre:
            self._become_pre_candidate()
            vote_type, term = MessageType.PREVOTE, self.term + 1
        else:
            self._become_candidate()
            vote_type, term = MessageType.VOTE, self.term
        if self._tally(self.id, True) is True:
            self._win_round()
            return
        for peer in self.voter_peers:
            self._send(Message(vote_type, self.id, peer, term=term, index=self.log.last_index,
                               log_term=self.log.last_term, context=1 if transfer else 0))

    def propose(self, data: bytes, request_id: int) -> bool:
        """Propose `data`; its ProposalResult comes in a later Ready. False if no leader is known
        (the caller may wait for one and retry)."""
        if self.role is Role.LEADER:
            index = self._append_local([data])
            self._proposal_results.append(ProposalResult(request_id, self.term, index))
            return True
        if self.leader is None or len(self._forwards) >= self.config.max_pending_forwards:
            return False
        self._forwards.append((request_id, data))
        return True

    def read_index(self, request_id: int) -> bool:
        """Ask for a read barrier; its ReadState comes in a later Ready. False if no leader."""
        if self.role is Role.LEADER:
            self._leader_read(self.id, request_id)
            return True
        if self.leader is None:
            return False
        self._forward_reads.append(request_id)
        return True

    def leader_unreachable(self, peer: int) -> None:
        """The transport met a signal that only a dead process explains (its peer port refused a
        connection, or a connection to it was reset): if `peer` is our leader, stop honouring its
        lease and campaign after 1..`unreachable_campaign_ticks` ticks, not a full timeout.

        Safety never rests on the signal: votes are still one per term and granted only to an
        up-to-date log, the campaign still opens with a pre-vote, and a member that did not get the
        signal still keeps the lease of a leader it hears from. A false signal (the leader lives)
        costs at most a refused pre-vote; the leader's next heartbeat restores the usual timeout."""
        if self.role is not Role.FOLLOWER or self.leader != peer or not self.is_voter:
            return
        self.leader = None
        self._hastened = True
        self.randomized_election_timeout = (self.election_elapsed + 1
                                            + self.rng.randrange(self.config.unreachable_campaign_ticks))

    def transfer_leadership(self, to: int) -> bool:
        """Ask an up-to-date follower to campaign at once (it skips pre-vote and the lease)."""
        if self.role is not Role.LEADER or to not in self.voter_peers:
            return False
        if self.progress[to].match != self.log.last_index:
            self._send_append(to)
            return False
        self._send(Message(MessageType.TIMEOUT_NOW, self.id, to, term=self.term))
        return True

    def step(self, m: Message) -> None:
        assert m.dst == self.id, f"message for {m.dst} stepped into {self.id}"
        if m.src not in self.peers and m.type not in _FROM_ANY_LEADER:
            return  # not a member of this ensemble (as far as our log goes)
        if m.type in TERMLESS:
            self._step_termless(m)
            return
        if m.term > self.term:
            if m.type in (MessageType.VOTE, MessageType.PREVOTE):
                transfer = m.type is MessageType.VOTE and m.context == 1
                in_lease = (self.config.check_quorum and self.leader is not None
                            and self.election_elapsed < self.config.election_ticks)
                if in_lease and not transfer:
                    return  # we heard from a live leader recently: do not let a straggler disrupt it
            if m.type is MessageType.PREVOTE or (m.type is MessageType.PREVOTE_RESP and not m.reject):
                pass  # a pre-vote never changes anyone's term
            elif m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
                self._become_follower(m.term, m.src)
            else:
                self._become_follower(m.term, None)
        elif m.term < self.term:
            if m.type in (MessageType.APPEND, MessageType.HEARTBEAT):
                # A stale leader (e.g. back from a partition): tell it our term so that it steps down.
                self._send(Message(MessageType.APPEND_RESP, self.id, m.src, term=self.term))
            elif m.type is MessageType.PREVOTE:
                self._send(Message(MessageType.PREVOTE_RESP, self.id, m.src, term=self.term, reject=True))
            return
        if m.type in (MessageType.VOTE, MessageType.PREVOTE):
            self._handle_vote_request(m)
        elif self.role is Role.LEADER:
            self._step_leader(m)
        elif self.role in (Role.CANDIDATE, Role.PRE_CANDIDATE):
            self._step_candidate(m)
        else:
            self._step_follower(m)

    def compact(self, snapshot: Snapshot, compact_to: int) -> None:
        """The caller took (and made durable) a snapshot of the applied state at `snapshot.index`:
        remember it for lagging members and forget log entries up to `compact_to` (at most the
        snapshot's index; keeping some entries lets slightly lagging members catch up from the log)."""
        assert snapshot.index <= self.log.applied_handed
        assert compact_to <= snapshot.index
        assert self.log.term(snapshot.index) in (snapshot.term, None)
        if self.snapshot is not None and snapshot.index <= self.snapshot.index:
            return
        self.snapshot = snapshot
        cut = max(0, min(compact_to, self.log.persisted))
        if cut > self.log.offset:
            self._base = self.membership_at(cut)
            self._config_entries = [(i, m) for i, m in self._config_entries if i > cut]
        self.log.compact(cut)

    def compaction_point(self, snapshot_index: int, keep_entries: int) -> int:
        """Where to cut the log for a snapshot at `snapshot_index`, keeping `keep_entries`."""
        return max(self.log.offset, min(snapshot_index - keep_entries, self.log.persisted))

    # --- outputs -----------------------------------------------------------------------------

    def has_ready(self) -> bool:
        log = self.log
        return bool(
            self._msgs or self._early_msgs or self._pending_snapshot or self._read_states
            or self._proposal_results or self._forwards or self._forward_reads or self._broadcast_needed
            or self._commit_broadcast_needed
            or self._read_round_sent < self._read_round
            or log.handed < log.last_index or min(log.commit, log.handed) > log.applied_handed
            or self.hard_state() != self._prev_hard_state
        )

    def ready(self) -> Ready:
        self._flush()
        hard_state = self.hard_state()
        rd = Ready()
        if hard_state != self._prev_hard_state:
            rd.hard_state = hard_state
            prev = self._prev_hard_state
            rd.must_sync = (hard_state.term, hard_state.vote) != (prev.term, prev.vote)
        rd.snapshot, self._pending_snapshot = self._pending_snapshot, None
        rd.entries = self.log.take_unstable()
        rd.must_sync = rd.must_sync or bool(rd.entries) or rd.snapshot is not None
        rd.committed_entries = self.log.take_committed()
        rd.early_messages, self._early_msgs = self._early_msgs, []
        rd.messages, self._msgs = self._msgs, []
        rd.read_states, self._read_states = self._read_states, []
        rd.proposal_results, self._proposal_results = self._proposal_results, []
        return rd

    def advance(self, rd: Ready) -> None:
        """The caller made `rd` durable (and is about to send and apply it)."""
        if rd.hard_state is not None:
            self._prev_hard_state = rd.hard_state
        if rd.entries:
            last = rd.entries[-1]
            self.log.stable_to(last.index, last.term)
        if self.role is Role.LEADER and self._maybe_commit():
            self._commit_broadcast_needed = True

    # --- roles -------------------------------------------------------------------------------

    def _reset(self, term: int) -> None:
        if term != self.term:
            assert term > self.term, f"term went back from {self.term} to {term}"
            self.term = term
            self.vote = 0
        self.leader = None
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self._reset_election_timeout()
        self._hastened = False
        self.votes = {}
        self._fail_leader_reads()

    def _reset_election_timeout(self) -> None:
        ticks = self.config.election_ticks
        self.randomized_election_timeout = ticks + self.rng.randrange(ticks)

    def _become_follower(self, term: int, leader: int | None) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.leader = leader

    def _become_pre_candidate(self) -> None:
        self.role = Role.PRE_CANDIDATE
        self.votes = {}
        self.leader = None
        self._reset_election_timeout()  # a fresh draw per round, so that rivals drift apart

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.role = Role.CANDIDATE
        self.vote = self.id

    def _become_leader(self) -> None:
        assert self.role is Role.CANDIDATE
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader = self.id
        last = self.log.last_index
        self.progress = {p: Progress(next=last + 1) for p in self.peers}
        for pr in self.progress.values():
            pr.recent_active = True  # give every follower a full election timeout to answer
        self._append_local([b""], kind=EntryKind.NOOP)

    def _win_round(self) -> None:
        if self.role is Role.PRE_CANDIDATE:
            self._start_election(pre=False, transfer=False)
        else:
            self._become_leader()

    def _tally(self, voter: int, granted: bool) -> bool | None:
        """Record a vote; True once won, False once lost, None while undecided."""
        if voter not in self.voters:
            return None  # only voters of our configuration count
        self.votes.setdefault(voter, granted)
        yes = sum(1 for v in self.votes.values() if v)
        if yes >= self.quorum:
            return True
        if len(self.votes) - yes >= self.quorum:
            return False
        return None

    # --- message handling --------------------------------------------------------------------

    def _handle_vote_request(self, m: Message) -> None:
        is_pre = m.type is MessageType.PREVOTE
        resp_type = MessageType.PREVOTE_RESP if is_pre else MessageType.VOTE_RESP
        can_vote = (
            self.vote == m.src
            or (self.vote == 0 and self.leader is None)
            or (is_pre and m.term > self.term)
        )
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            self._send(Message(resp_type, self.id, m.src, term=m.term))
            if not is_pre:
                assert m.term == self.term
                assert self.vote in (0, m.src), "two votes in one term"
                self.vote = m.src
                self.election_elapsed = 0
        else:
            self._send(Message(resp_type, self.id, m.src, term=self.term, reject=True))

    def _step_follower(self, m: Message) -> None:
        if m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
            self.election_elapsed = 0
            if self._hastened:  # the signal was false (or late): back to a full election timeout
                self._hastened = False
                self._reset_election_timeout()
            self.leader = m.src
            if m.type is MessageType.APPEND:
                self._handle_append(m)
            elif m.type is MessageType.HEARTBEAT:
                self._handle_heartbeat(m)
            else:
                self._handle_snapshot(m)
        elif m.type is MessageType.TIMEOUT_NOW:
            self.campaign(transfer=True)

    def _step_candidate(self, m: Message) -> None:
        if m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
            self._become_follower(m.term, m.src)
            self._step_follower(m)
            return
        expected = MessageType.PREVOTE_RESP if self.role is Role.PRE_CANDIDATE else MessageType.VOTE_RESP
        if m.type is not expected:
            return
        outcome = self._tally(m.src, not m.reject)
        if outcome is True:
            self._win_round()
        elif outcome is False:
            self._become_follower(self.term, None)

    def _handle_append(self, m: Message) -> None:
        log = self.log
        if m.index < log.commit:
            self._send(Message(MessageType.APPEND_RESP, self.id, m.src, term=self.term, index=log.commit))
            return
        if log.match_term(m.index, m.log_term):
            log.append_from_leader(m.index, m.entries)
            last_new = m.index + len(m.entries)
            # A CONFIG entry appended, or one replaced or truncated away (even by as many entries,
            # leaving the length as it was), changes the configuration now.
            if m.entries and (any(e.kind is EntryKind.CONFIG for e in m.entries)
                              or (self._config_entries and self._config_entries[-1][0] > m.index)):
                self._config_rescan(m.index)
            log.commit_to(min(m.commit, last_new))
            if not (m.quiet and not m.entries):
                self._send(Message(MessageType.APPEND_RESP, self.id, m.src, term=self.term, index=last_new))
            return
        hint_index = log.find_conflict_by_term(min(m.index, log.last_index), m.log_term)
        hint_term = log.term(hint_index)
        assert hint_term is not None
        self._send(Message(MessageType.APPEND_RESP, self.id, m.src, term=self.term, index=m.index,
                           reject=True, hint_index=hint_index, hint_term=hint_term))

    def _handle_heartbeat(self, m: Message) -> None:
        self.log.commit_to(min(m.commit, self.log.last_index))
        self._send(Message(MessageType.HEARTBEAT_RESP, self.id, m.src, term=self.term, context=m.context))

    def _handle_snapshot(self, m: Message) -> None:
        snap = m.snapshot
        assert snap is not None
        log = self.log
        if snap.index <= log.commit:
            self._send(Message(MessageType.APPEND_RESP, self.id, m.src, term=self.term, index=log.commit))
            return
        if log.match_term(snap.index, snap.term):
            # We have the snapshot's last entry, so everything up to it: just commit that far.
            log.commit_to(snap.index)
            self._send(Message(MessageType.APPEND_RESP, self.id, m.src, term=self.term, index=log.commit))
            return
        log.restore(snap)
        self.snapshot = snap
        self._base = snap.membership or self._initial
        self._config_rescan(snap.index)
        self._pending_snapshot = snap
        self._send(Message(MessageType.APPEND_RESP, self.id, m.src, term=self.term, index=snap.index))

    def _step_termless(self, m: Message) -> None:
        if m.type is MessageType.PROPOSE:
            if self.role is not Role.LEADER:
                self._send(Message(MessageType.PROPOSE_RESP, self.id, m.src, reject=True,
                                   request_ids=m.request_ids))
                return
            if len(m.entries) == 1 and m.entries[0].kind is EntryKind.CONFIG:
                self._step_forwarded_membership(m)
                return
            first = self._append_local([e.data for e in m.entries])
            self._send(Message(MessageType.PROPOSE_RESP, self.id, m.src, index=first, log_term=self.term,
                               request_ids=m.request_ids))
        elif m.type is MessageType.PROPOSE_RESP:
            for k, request_id in enumerate(m.request_ids):
                if m.reject:
                    reason = _REFUSALS[m.context] if 0 < m.context < len(_REFUSALS) else ""
                    self._proposal_results.append(ProposalResult(request_id, 0, 0, reason))
                else:
                    self._proposal_results.append(ProposalResult(request_id, m.log_term, m.index + k))
        elif m.type is MessageType.READ_INDEX:
            if self.role is Role.LEADER:
                self._leader_read(m.src, m.context)
            else:
                self._send(Message(MessageType.READ_INDEX_RESP, self.id, m.src, context=m.context, reject=True))
        elif m.type is MessageType.READ_INDEX_RESP:
            self._read_states.append(ReadState(m.context, -1 if m.reject else m.index))

    def _step_forwarded_membership(self, m: Message) -> None:
        try:
            membership = Membership.decode(m.entries[0].data)
        except (ValueError, AssertionError):
            refusal: str | None = "no-voter"
        else:
            refusal = self._membership_refusal(membership)
        if refusal is not None:
            self._send(Message(MessageType.PROPOSE_RESP, self.id, m.src, reject=True,
                               request_ids=m.request_ids, context=_REFUSALS.index(refusal)))
            return
        index = self._append_local([m.entries[0].data], kind=EntryKind.CONFIG)
        self._send(Message(MessageType.PROPOSE_RESP, self.id, m.src, index=index, log_term=self.term,
                           request_ids=m.request_ids))

    # --- leader ------------------------------------------------------------------------------

    def _append_local(self, datas: Sequence[bytes], kind: EntryKind = EntryKind.NORMAL) -> int:
        """Append entries at our term; returns the first one's index."""
        assert self.role is Role.LEADER
        first = self.log.last_index + 1
        self.log.append(Entry(self.term, first + k, data, kind) for k, data in enumerate(datas))
        self._broadcast_needed = True
        if kind is EntryKind.CONFIG:
            self._config_rescan(first - 1)
        if not self.peers:
            pass  # a lone member commits on advance(), once the entries are durable
        return first

    def _tick_leader(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.config.election_ticks:
            self.election_elapsed = 0
            if self.config.check_quorum:
                active = (self.is_voter) + sum(
                    1 for peer, pr in self.progress.items() if pr.recent_active and peer in self.voters)
                for pr in self.progress.values():
                    pr.recent_active = False
                if active < self.quorum:
                    self._become_follower(self.term, None)  # lease lost: stop serving reads/writes
                    return
        for peer, pr in self.progress.items():
            if pr.state is ProgressState.SNAPSHOT:
                pr.snapshot_ticks += 1
                if pr.snapshot_ticks > self.config.snapshot_retry_ticks:
                    pr.become_probe()
                    self._send_append(peer)
        if self.heartbeat_elapsed >= self.config.heartbeat_ticks:
            self.heartbeat_elapsed = 0
            self._broadcast_heartbeat()

    def _broadcast_heartbeat(self) -> None:
        self._read_round_sent = self._read_round
        for peer, pr in self.progress.items():
            commit = min(pr.match, self.log.commit)
            self._send(Message(MessageType.HEARTBEAT, self.id, peer, term=self.term, commit=commit,
                               context=self._read_round))

    def _send_append(self, peer: int, send_if_empty: bool = True, commit_notice: bool = False) -> bool:
        pr = self.progress[peer]
        if pr.paused(self.config.max_inflight_appends):
            return False
        log = self.log
        prev = pr.next - 1
        prev_term = log.term(prev)
        if prev_term is None:
            return self._send_snapshot(peer, pr)
        entries: list[Entry] = []
        if pr.next <= log.last_index:
            entries = log.slice(pr.next, self.config.max_append_entries, self.config.max_append_bytes)
        if not entries and not send_if_empty:
            return False
        # A commit notice to a follower in REPLICATE state with nothing new to send needs no
        # answer: a match changes nothing here (a probe, by contrast, waits for its answer).
        quiet = commit_notice and not entries and pr.state is ProgressState.REPLICATE
        self._send(Message(MessageType.APPEND, self.id, peer, term=self.term, index=prev, log_term=prev_term,
                           entries=tuple(entries), commit=log.commit, quiet=quiet))
        if pr.state is ProgressState.REPLICATE:
            if entries:
                pr.next = entries[-1].index + 1
                pr.inflight.append(entries[-1].index)
        else:
            pr.probe_sent = True
        return True

    def _send_snapshot(self, peer: int, pr: Progress) -> bool:
        snap = self.snapshot
        assert snap is not None and snap.index >= self.log.offset, "entries compacted without a snapshot"
        self._send(Message(MessageType.SNAPSHOT, self.id, peer, term=self.term, snapshot=snap))
        pr.become_snapshot(snap.index)
        return True

    def _step_leader(self, m: Message) -> None:
        pr = self.progress.get(m.src)
        if pr is None:
            return
        if m.type is MessageType.APPEND_RESP:
            pr.recent_active = True
            if m.reject:
                match_hint = m.hint_index
                if m.hint_term > 0:
                    match_hint = self.log.find_conflict_by_term(m.hint_index, m.hint_term)
                if pr.decrease_to(m.index, match_hint):
                    if pr.state is ProgressState.REPLICATE:
                        pr.become_probe()
                    self._send_append(m.src)
                return
            was_paused = pr.paused(self.config.max_inflight_appends)
            if not pr.update(m.index):
                return
            if pr.state is ProgressState.PROBE:
                pr.become_replicate()
            elif pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
                pr.become_probe()
                pr.become_replicate()
            if self._maybe_commit():
                self._commit_broadcast_needed = True
            elif was_paused:
                self._send_append(m.src)
            for _ in range(self.config.max_inflight_appends):
                if not self._send_append(m.src, send_if_empty=False):
                    break
        elif m.type is MessageType.HEARTBEAT_RESP:
            pr.recent_active = True
            pr.probe_sent = False
            if pr.match < self.log.last_index and pr.state is not ProgressState.SNAPSHOT:
                if pr.paused(self.config.max_inflight_appends) and pr.inflight:
                    pr.inflight.popleft()
                self._send_append(m.src)
            if m.context > pr.read_ack:
                pr.read_ack = m.context
                self._release_reads()

    def _maybe_commit(self) -> bool:
        # Only voters count; a leader that removed itself does not count its own log.
        matches = [pr.match for peer, pr in self.progress.items() if peer in self.voters]
        if self.is_voter:
            matches.append(self.log.persisted)
        matches.sort(reverse=True)
        candidate = matches[self.quorum - 1]
        # Raft §5.4.2: only an entry of the current term commits by counting replicas.
        if candidate > self.log.commit and self.log.term(candidate) == self.term:
            self.log.commit_to(candidate)
            self._on_commit_advanced()
            if not self.is_voter and not self.config_change_pending:
                # We removed ourselves and the change is committed: hand over (thesis §4.2.2).
                # Followers learn the commit index from the next appends of whoever leads next.
                self._commit_broadcast_needed = True
                self._step_down_removed = True
            return True
        return False

    def _on_commit_advanced(self) -> None:
        if self._deferred_reads and self.log.term(self.log.commit) == self.term:
            deferred, self._deferred_reads = self._deferred_reads, []
            for read in deferred:
                self._leader_read(read.requester, read.request_id)

    def _leader_read(self, requester: int, request_id: int) -> None:
        read = _PendingRead(0, self.log.commit, requester, request_id)
        if self.log.term(self.log.commit) != self.term:
            # Our commit index may lag the true one until an entry of our term commits (§6.4).
            self._deferred_reads.append(read)
            return
        if not self.voter_peers and self.is_voter:
            self._answer_read(read)
            return
        self._read_round += 1
        read.round = self._read_round
        self._pending_reads.append(read)

    def _release_reads(self) -> None:
        while self._pending_reads:
            read = self._pending_reads[0]
            acks = self.is_voter + sum(1 for peer, pr in self.progress.items()
                                       if pr.read_ack >= read.round and peer in self.voters)
            if acks < self.quorum:
                return
            self._pending_reads.popleft()
            self._answer_read(read)

    def _answer_read(self, read: _PendingRead) -> None:
        if read.requester == self.id:
            self._read_states.append(ReadState(read.request_id, read.index))
        else:
            self._send(Message(MessageType.READ_INDEX_RESP, self.id, read.requester, context=read.request_id,
                               index=read.index))

    def _fail_leader_reads(self) -> None:
        reads = [*self._pending_reads, *self._deferred_reads]
        self._pending_reads.clear()
        self._deferred_reads = []
        for read in reads:
            if read.requester == self.id:
                self._read_states.append(ReadState(read.request_id, -1))
            else:
                self._send(Message(MessageType.READ_INDEX_RESP, self.id, read.requester,
                                   context=read.request_id, reject=True))

    # --- plumbing ----------------------------------------------------------------------------

    def _send(self, m: Message) -> None:
        # A leader's answer to a forwarded proposal promises nothing durable (if the entry is lost,
        # another one takes its index and the proposer learns that at apply time), so it leaves
        # with the appends, before the fsync: often in the same read as the append at the follower.
        if self.role is Role.LEADER and m.type in (MessageType.APPEND, MessageType.HEARTBEAT,
                                                   MessageType.SNAPSHOT, MessageType.PROPOSE_RESP):
            self._early_msgs.append(m)
        else:
            self._msgs.append(m)

    def _send_forward(self, batch: list[tuple[int, bytes]]) -> None:
        assert self.leader is not None
        self._send(Message(MessageType.PROPOSE, self.id, self.leader,
                           entries=tuple(Entry(0, 0, data) for _, data in batch),
                           request_ids=tuple(rid for rid, _ in batch)))

    def _flush(self) -> None:
        """Work deferred to Ready time so that many proposals in one loop iteration share messages."""
        if self._forwards:
            forwards, self._forwards = self._forwards, []
            if self.role is Role.LEADER:
                index = self._append_local([data for _, data in forwards])
                for k, (request_id, _) in enumerate(forwards):
                    self._proposal_results.append(ProposalResult(request_id, self.term, index + k))
            elif self.leader is None:
                self._proposal_results.extend(ProposalResult(rid, 0, 0) for rid, _ in forwards)
            else:
                # Batches bounded like appends, so that a frame never outgrows the peer's limit.
                batch: list[tuple[int, bytes]] = []
                size = 0
                for item in forwards:
                    if batch and size + len(item[1]) > self.config.max_append_bytes:
                        self._send_forward(batch)
                        batch, size = [], 0
                    batch.append(item)
                    size += len(item[1]) + 32
                self._send_forward(batch)
        if self._forward_reads:
            reads, self._forward_reads = self._forward_reads, []
            for request_id in reads:
                if self.role is Role.LEADER:
                    self._leader_read(self.id, request_id)
                elif self.leader is None:
                    self._read_states.append(ReadState(request_id, -1))
                else:
                    self._send(Message(MessageType.READ_INDEX, self.id, self.leader, context=request_id))
        if self._broadcast_needed or self._commit_broadcast_needed:
            send_if_empty = self._commit_broadcast_needed
            self._broadcast_needed = self._commit_broadcast_needed = False
            if self.role is Role.LEADER:
                for peer in self.peers:
                    self._send_append(peer, send_if_empty=send_if_empty, commit_notice=send_if_empty)
        if self.role is Role.LEADER and self._read_round_sent < self._read_round:
            self._broadcast_heartbeat()
        elif self.role is not Role.LEADER:
            self._read_round_sent = self._read_round
        if self._step_down_removed:
            self._step_down_removed = False
            if self.role is Role.LEADER:
                self._hand_over()

    def _hand_over(self) -> None:
        """A leader whose own removal committed: the commit notices are out; ask the most
        up-to-date voter to campaign at once, and stop leading."""
        best = max(self.voter_peers, key=lambda p: self.progress[p].match, default=None)
        if best is not None and self.progress[best].match == self.log.last_index:
            self._send(Message(MessageType.TIMEOUT_NOW, self.id, best, term=self.term))
        self._become_follower(self.term, None)
