"""A cluster link's decisions, pure: no I/O, the clock passed in (the shell, `service.py`, does
what these say).

The mirror of a partition keeps the source's batches byte for byte at the source's offsets,
including the leader epoch each batch carries. Its leader-epoch cache is therefore the source's
own history, and the follower's rules of KIP-101/KIP-279 (roost.broker.replica.follower) decide
where the two logs part:

- before the first fetch, after a source leader change, after the source fenced us and after an
  OFFSET_OUT_OF_RANGE past the source's end, the mirror asks the source's leader where its latest
  epoch ends (OffsetForLeaderEpoch, as a consumer: DESCRIBE on the topic is enough) and cuts its
  own log there (`truncation_for`); an epoch the source does not know any more (retention moved
  past it) cuts nothing: what was mirrored stays;
- it then fetches from its log end as a consumer (READ on the topic; read_uncommitted, so
  transactional batches and control batches come too; up to the source's high watermark, so only
  records the source's ISR holds are mirrored), naming the source leader epoch it believes in so
  that a source leader change fences it (FENCED_LEADER_EPOCH) and it validates again;
- a fetch offset before the source's log start (retention, DeleteRecords) starts the mirror over
  at the source's log start, as a follower does.

Writes: a mirror takes writes only from its link, and a promoted topic only from clients
(`write_allowed`). Promotion gives the partition a new leader epoch above every mirrored one
(`promotion_epoch`), so that a later failback finds by epoch where the two logs diverged: the old
source's epochs end, on the promoted side, where the promotion began.

Open transactions (`transactions_to_abort`): a mirror holds the source's transactional batches,
but a transaction's commit or abort marker comes only if the source wrote it before the link
stopped. On the promoted topic no coordinator of this cluster knows that transaction, so nothing
would ever end it and it would hold the last stable offset (read_committed consumers) at its first
record for ever. Promotion therefore aborts every transaction still open on the mirror: an ABORT
marker per producer, in the order the transactions began. Its records stay at their offsets
(offsets are what a mirror keeps: cutting the log back to the LSO, as KIP-1279 proposes, would
also drop every committed record after the open transaction's first one, and offsets consumers
may already have read) and read_committed consumers skip them, as any aborted transaction.

Group offsets (`group_offsets_to_sync`): only groups absent or empty on the destination, only
mirrored partitions, never past what the mirror holds, never backwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from roost.broker.replica.follower import EpochHistory, truncation_offset
from roost.wire.kafka.errors import ErrorCode

UNDEFINED = -1
BACKOFF_BASE_MS = 100
BACKOFF_MAX_MS = 10_000
SILENT_MS = 5_000  # a source that has not answered for this long may hold records the mirror lacks

TopicPartition = tuple[str, int]


class WriteOrigin(Enum):
    CLIENT = "client"  # producers, and the destination's own coordinators
    LINK = "link"  # the link's mirror appends


def write_allowed(mirror_link: str, origin: WriteOrigin, link: str | None = None) -> bool:
    """May `origin` write to a partition whose topic has `roost.mirror.link` = `mirror_link`
    ("" for a normal or promoted topic)? A mirror is read-only for clients; a promoted (or normal)
    topic takes no mirror writes; a link writes only into its own mirrors."""
    if origin is WriteOrigin.CLIENT:
        return not mirror_link
    return bool(mirror_link) and (link is None or mirror_link == link)


# The error a client producing to a mirror gets. Confluent's Cluster Linking documents only that
# a produce to a mirror topic fails; Roost answers INVALID_REQUEST with a message naming the link
# (docs/cluster-links.md), which clients treat as not retriable.
MIRROR_PRODUCE_ERROR = ErrorCode.INVALID_REQUEST


def promotion_epoch(leader_epoch: int, latest_log_epoch: int) -> int:
    """The leader epoch a promoted partition writes in: above every epoch it mirrored, and not
    below its own leader's epoch."""
    return max(leader_epoch, latest_log_epoch + 1)


def leader_log_epoch(leader_epoch: int, latest_log_epoch: int) -> int:
    """The epoch a new leader of a non-mirror partition starts at its log end: its controller's
    epoch, unless the log already holds a later one (a promoted mirror's epochs came from the
    source's history), then one past it, so that epochs only grow along the log. (For a normal
    topic the controller's epoch is never below the log's: this is Kafka's rule there.)"""
    return leader_epoch if leader_epoch >= latest_log_epoch else latest_log_epoch + 1


def truncation_for(epochs: EpochHistory, log_end_offset: int, source_epoch: int, source_end_offset: int) -> int:
    """Where the mirror's log must end given the source's OffsetForLeaderEpoch answer for our
    latest epoch. An answer the source cannot give (UNDEFINED: it no longer has our epochs) keeps
    everything: what was mirrored was the source's at the time."""
    if source_epoch == UNDEFINED or source_end_offset == UNDEFINED:
        return log_end_offset
    end = truncation_offset(epochs, log_end_offset, log_end_offset, source_epoch, source_end_offset)
    assert 0 <= end <= log_end_offset, (end, log_end_offset)
    return end


def source_recreated(recorded_topic_id: str, seen_topic_id: str | None) -> bool:
    """Is the source topic a different one from the topic the mirror was made from? Only known
    when both ids are (a source older than Metadata v10 gives none; a mirror made before ids were
    recorded has none until its link records it)."""
    return bool(recorded_topic_id) and seen_topic_id is not None and seen_topic_id != recorded_topic_id


def backoff_ms(failures: int) -> int:
    """Exponential backoff after `failures` failures in a row (100 ms doubling, at most 10 s)."""
    if failures <= 0:
        return 0
    return min(BACKOFF_MAX_MS, BACKOFF_BASE_MS << min(failures - 1, 20))


# -- one mirrored partition ------------------------------------------------------------------------
@dataclass(frozen=True)
class AskEpoch:
    """Send OffsetForLeaderEpoch for `epoch` to the source leader."""

    epoch: int


@dataclass(frozen=True)
class FetchFrom:
    offset: int


@dataclass(frozen=True)
class Hold:
    """Nothing to do before `until_ms` (backing off, or the source leader is not known)."""

    until_ms: int


Step = AskEpoch | FetchFrom | Hold


@dataclass(frozen=True)
class Truncate:
    offset: int


@dataclass(frozen=True)
class StartOver:
    """The source's log starts past ours: empty the mirror and start at `offset`."""

    offset: int


@dataclass(frozen=True)
class Append:
    """Append the answer's records as they are."""


@dataclass(frozen=True)
class Refresh:
    """The source leader moved: learn it from Metadata before fetching again."""


@dataclass(frozen=True)
class Failed:
    """Not retriable without an operator (authorization, a recreated source topic)."""

    reason: str


Action = Truncate | StartOver | Append | Refresh | Failed | None

FENCING = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                     ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.LEADER_NOT_AVAILABLE,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})
AUTHORIZATION = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                           ErrorCode.SASL_AUTHENTICATION_FAILED})


@dataclass
class PartitionMirror:
    """What the link knows of one mirrored partition (on the destination broker leading it)."""

    topic: str
    partition: int
    source_leader: int = UNDEFINED
    source_leader_epoch: int = UNDEFINED
    validated: bool = False  # the log was checked against the source's epochs since the last change
    source_high_watermark: int = UNDEFINED
    source_log_start: int = UNDEFINED
    mirrored_end: int = 0  # our log end after the last answer
    caught_up_at_ms: int | None = None  # the last time we held everything the source had
    failures: int = 0
    backoff_until_ms: int = 0
    error: str | None = None
    failed: bool = False
    records_mirrored: int = 0
    bytes_mirrored: int = 0
    truncations: list[tuple[int, int]] = field(default_factory=list)  # (from, to), newest last, bounded
    source_topic_id: str | None = None  # the source topic's id in the last metadata (None: not given)
    # An answer hinted that the source may have changed (fenced, out of range, unreachable): its
    # metadata is read again before the mirror is validated, so that a recreated source topic is
    # seen (by its id) before any truncation or append could mix the two topics' offsets.
    needs_metadata: bool = False

    # -- lag ------------------------------------------------------------------------------------
    def lag_records(self) -> int:
        """Records the source holds (below its high watermark) that we do not; -1 unknown."""
        if self.source_high_watermark < 0:
            return UNDEFINED
        return max(0, self.source_high_watermark - self.mirrored_end)

    def lag_ms(self, now_ms: int) -> int:
        """An upper bound of the age of the oldest record not mirrored: the time since we last
        held all the source had (0 when caught up; -1 before the first answer). While the source
        does not answer (a cut link) the records lag is stale, and this bound grows."""
        if self.caught_up_at_ms is None:
            return UNDEFINED
        since = max(0, now_ms - self.caught_up_at_ms)
        # A cut link often fails no request for a while (a fetch waits out its timeout): an answer
        # older than SILENT_MS (the link's long polls answer within fetch.max.wait.ms) counts too.
        return 0 if self.lag_records() == 0 and self.failures == 0 and since <= SILENT_MS else since

    # -- what to do next ------------------------------------------------------------------------
    def next_step(self, log_end_offset: int, latest_epoch: int, now_ms: int) -> Step:
        if self.failed:
            return Hold(now_ms + BACKOFF_MAX_MS)
        if now_ms < self.backoff_until_ms:
            return Hold(self.backoff_until_ms)
        if self.source_leader < 0:
            return Hold(now_ms + BACKOFF_BASE_MS)
        if not self.validated:
            if self.needs_metadata:
                return Hold(now_ms + BACKOFF_BASE_MS)
            if latest_epoch == UNDEFINED:
                # Nothing mirrored yet (or a log with no epochs: nothing to check it by).
                self.validated = True
                return FetchFrom(log_end_offset)
            return AskEpoch(latest_epoch)
        return FetchFrom(log_end_offset)

    def source_moved(self, leader: int, leader_epoch: int, topic_id: str | None = None,
                     recorded_topic_id: str = "") -> Failed | None:
        """Metadata named the source leader (maybe a new one): validate again if it changed.
        `topic_id` is the source topic's id in that metadata, `recorded_topic_id` the one the
        mirror was made from: if they differ the source topic was deleted and recreated, and the
        mirror stops (Failed) rather than mixing two topics' offsets."""
        self.needs_metadata = False
        self.source_topic_id = topic_id
        if source_recreated(recorded_topic_id, topic_id):
            if self.failed:
                return None
            self.failed = True
            self.error = (f"the source topic was deleted and recreated (its topic id is now {topic_id}, the mirror "
                          f"copies {recorded_topic_id}): mirroring stopped; promote the mirror, or delete it to "
                          "mirror the new topic")
            return Failed(self.error)
        if (leader, leader_epoch) != (self.source_leader, self.source_leader_epoch):
            self.source_leader, self.source_leader_epoch = leader, leader_epoch
            self.validated = False
        return None

    def on_epoch_answer(self, error: int, epoch: int, end_offset: int, epochs: EpochHistory,
                        log_end_offset: int, now_ms: int) -> Action:
        if error != ErrorCode.NONE:
            return self._on_error(error, now_ms, "OffsetForLeaderEpoch")
        self._succeeded()
        end = truncation_for(epochs, log_end_offset, epoch, end_offset)
        # Validated once an answer cuts nothing. A follower needs one round because one controller
        # numbers every epoch of its partition; a mirror's epochs after the point where the two
        # clusters parted were numbered by two controllers. An old source that elected leaders
        # and wrote (transaction markers) in epochs the promoted side never had asks first about
        # such an epoch, is told of the promoted side's nearest lower epoch, and cuts only back
        # to where its own next epoch began; asked again, about the epoch now last, it is told
        # where that epoch really ends. Each round cuts, so the rounds are at most the log's
        # epochs.
        self.validated = end >= log_end_offset
        if end < log_end_offset:
            self._note_truncation(log_end_offset, end)
            return Truncate(end)
        return None

    def on_fetch_answer(self, error: int, high_watermark: int, log_start_offset: int, has_records: bool,
                        log_end_offset: int, now_ms: int) -> Action:
        """A fetch answer for this partition: what to do with it (Append its records, or not)."""
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._succeeded()
            if log_start_offset >= 0 and log_end_offset < log_start_offset:
                return StartOver(log_start_offset)
            # Past the source's end: the source lost records we hold (an unclean election there),
            # or the topic was recreated: its metadata (the topic id) first, then its epochs.
            self.validated = False
            self.needs_metadata = True
            return Refresh()
        if error != ErrorCode.NONE:
            return self._on_error(error, now_ms, "Fetch")
        self._succeeded()
        self.source_high_watermark = high_watermark
        self.source_log_start = log_start_offset
        if has_records:
            return Append()
        self.appended(log_end_offset, now_ms, 0, 0)
        return None

    def appended(self, log_end_offset: int, now_ms: int, records: int, size: int) -> None:
        """The mirror's log now ends at `log_end_offset`."""
        self.mirrored_end = log_end_offset
        self.records_mirrored += records
        self.bytes_mirrored += size
        if self.source_high_watermark >= 0 and log_end_offset >= self.source_high_watermark:
            self.caught_up_at_ms = now_ms
        elif self.caught_up_at_ms is None:
            self.caught_up_at_ms = now_ms  # the first answer: the lag is counted from here

    def unreachable(self, reason: str, now_ms: int) -> None:
        self.failures += 1
        self.error = reason
        self.backoff_until_ms = now_ms + backoff_ms(self.failures)
        self.validated = False  # the source may have changed meanwhile
        self.needs_metadata = True

    def _on_error(self, error: int, now_ms: int, what: str) -> Action:
        name = ErrorCode(error).name if error in ErrorCode._value2member_map_ else str(error)
        if error in AUTHORIZATION:
            self.failed = True
            self.error = f"{what}: {name}: the link's principal needs READ and DESCRIBE on the source topic"
            return Failed(self.error)
        self.failures += 1
        self.error = f"{what}: {name}"
        self.backoff_until_ms = now_ms + backoff_ms(self.failures)
        if error in FENCING:
            self.validated = False
            self.needs_metadata = True
            return Refresh()
        return None

    def _succeeded(self) -> None:
        self.failures = 0
        self.error = None

    def _note_truncation(self, start: int, end: int) -> None:
        self.truncations.append((start, end))
        del self.truncations[:-10]

    def retry(self) -> None:
        """An operator asked again (a changed ACL, a fixed setting)."""
        self.failed = False
        self.error = None
        self.failures = 0
        self.backoff_until_ms = 0
        self.validated = False
        self.needs_metadata = True  # a recreated source topic is checked again before anything else


# -- the link as a whole --------------------------------------------------------------------------
class LinkState(Enum):
    ACTIVE = "ACTIVE"  # every mirror fetching
    SOURCE_UNAVAILABLE = "SOURCE_UNAVAILABLE"  # the source cannot be reached (retrying with backoff)
    FAILED = "FAILED"  # a mirror needs an operator (authorization, recreated source topic)
    PAUSED = "PAUSED"


def link_state(source_reachable: bool, mirrors: list[PartitionMirror], paused: bool = False) -> LinkState:
    if paused:
        return LinkState.PAUSED
    if any(m.failed for m in mirrors):
        return LinkState.FAILED
    if not source_reachable:
        return LinkState.SOURCE_UNAVAILABLE
    return LinkState.ACTIVE


class Throttle:
    """A token bucket of `rate` bytes per second (-1: unlimited), at most one second's burst."""

    def __init__(self, rate: int, now_ms: int) -> None:
        self.rate = rate
        self._tokens = float(max(rate, 0))
        self._at_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        if now_ms > self._at_ms:
            self._tokens = min(float(self.rate), self._tokens + self.rate * (now_ms - self._at_ms) / 1000)
            self._at_ms = now_ms

    def wait_ms(self, now_ms: int) -> int:
        """How long to wait before fetching again (0: now)."""
        if self.rate < 0:
            return 0
        self._refill(now_ms)
        if self._tokens > 0:
            return 0
        return max(1, int(-self._tokens * 1000 / max(self.rate, 1)) + 1)

    def spend(self, size: int, now_ms: int) -> None:
        """`size` bytes came: the bucket may go negative (a fetch is not cut), later fetches wait."""
        if self.rate < 0:
            return
        self._refill(now_ms)
        self._tokens -= size

    def fetch_max_bytes(self, wanted: int) -> int:
        """What one fetch may ask for under the throttle (at least one byte: whole batches come)."""
        return wanted if self.rate < 0 else max(1, min(wanted, self.rate))


# -- group offsets ----------------------------------------------------------------------------------
SYNCABLE_GROUP_STATES = frozenset({"", "Empty", "Dead"})  # "" : the group does not exist here


def group_offsets_to_sync(source: Mapping[TopicPartition, int], destination: Mapping[TopicPartition, int],
                          destination_state: str, mirrored_ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The offsets to commit for one group on the destination. Only a group absent, empty or
    dead there (an active group owns its offsets: MM2's rule); only partitions still mirrored
    (`mirrored_ends`: what each mirror holds, its high watermark); clamped to what the mirror
    holds (an offset past it would send a resumed consumer out of range); never backwards."""
    if destination_state not in SYNCABLE_GROUP_STATES:
        return {}
    out: dict[TopicPartition, int] = {}
    for tp, offset in source.items():
        if offset < 0 or tp not in mirrored_ends:
            continue
        target = min(offset, mirrored_ends[tp])
        current = destination.get(tp, UNDEFINED)
        if target > current:
            out[tp] = target
    return out


# -- promotion ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PromotionReport:
    """What promotion left behind: per partition, the source records never mirrored (the data
    lost if the source is gone: the RPO) as last seen, -1 unknown."""

    topic: str
    lag_records: dict[int, int]

    @property
    def total_lag(self) -> int:
        known = [lag for lag in self.lag_records.values() if lag >= 0]
        return sum(known) if known else UNDEFINED


def topics_to_promote(mirrors: Mapping[str, str], link: str, topics: list[str] | None = None,
                      prefix: str | None = None) -> list[str]:
    """The mirror topics of `link` (`mirrors`: topic -> its roost.mirror.link) named by
    `topics`, or starting with `prefix`, or all of them."""
    own = sorted(t for t, owner in mirrors.items() if owner == link)
    if topics is not None:
        return [t for t in own if t in set(topics)]
    if prefix is not None:
        return [t for t in own if t.startswith(prefix)]
    return own


# -- open transactions at promotion -------------------------------------------------------------------
@dataclass(frozen=True)
class OpenTransaction:
    """A transaction open on a partition (its data there, no marker yet), as the producer state
    has it: the producer's id and latest epoch, the highest coordinator epoch of its markers
    seen on this partition, and the transaction's first offset."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int


def transactions_to_abort(open_transactions: Iterable[OpenTransaction]) -> list[OpenTransaction]:
    """What promotion ends with an ABORT marker: every transaction open on the mirror (each is
    the source's: a mirror takes no other writes, so no coordinator here can end it), oldest
    first. Each marker carries the producer's own epoch and the coordinator epoch it last saw,
    which the partition's marker checks accept (a marker of an older epoch would be refused)."""
    return sorted(open_transactions, key=lambda txn: (txn.first_offset, txn.producer_id))
