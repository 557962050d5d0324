"""The shell that writes a share group's dead letters (share/dead_letter.py builds them) to its
dead-letter topic (`roost.share.dead.letter.topic`, Roost's own group config) with acks=all.

Called by the share-partition leader (share/leader.py) before the state change that archives the
records is written to the share coordinator: NONE only once the copies are replicated to the
dead-letter partition's ISR. The copies of one share-partition go to one partition of the
dead-letter topic (its index modulo the topic's partition count), so they keep their order. The
topic must exist: a missing one (or any failed write) is an error, and the leader then does not
archive the records (it reloads the share-partition from its durable state, where they are not
archived), so they are delivered again and dead-lettered once the topic can take them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.peer import PeerError, PeerPool
from roost.broker.share.dead_letter import dead_letter_batch, dead_letter_records
from roost.broker.share.partition import DeadLetter
from roost.wire.kafka import ApiKey, KafkaCodecError
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.share")

PRODUCE_VERSION = 9
ACKS_ALL = -1
PRODUCE_TIMEOUT_MS = 10_000
REQUEST_TIMEOUT_S = 15.0


class DeadLetterWriter:
    def __init__(self, metadata: MetadataCache, peers: PeerPool) -> None:
        self.metadata = metadata
        self.peers = peers
        self.written = 0  # records dead-lettered, for the metrics and tests
        self.failed = 0  # writes that failed (their records stay unarchived)

    async def write(self, group_id: str, topic: str, partition: int, dead_letter_topic: str,
                    letters: Sequence[DeadLetter], log_data: Sequence[bytes | memoryview]) -> ErrorCode:
        """NONE once the copies of `letters` (found in `log_data`) are in `dead_letter_topic`."""
        records = dead_letter_records(group_id, topic, partition, letters, log_data)
        if not records:
            return ErrorCode.NONE  # gone from the log (retention) or control records: nothing to copy
        info = self.metadata.get(dead_letter_topic)
        if info is None or info.partitions <= 0:
            return self._failed(group_id, dead_letter_topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                "the topic does not exist (create it)")
        index = partition % info.partitions
        endpoint = self.metadata.coordinator_endpoint(dead_letter_topic, index)  # its leader, if live
        if endpoint is None:
            return self._failed(group_id, dead_letter_topic, ErrorCode.LEADER_NOT_AVAILABLE, f"partition {index}")
        body = {"transactional_id": None, "acks": ACKS_ALL, "timeout_ms": PRODUCE_TIMEOUT_MS, "topic_data": [
            {"name": dead_letter_topic, "partition_data": [
                {"index": index, "records": dead_letter_batch(records, int(time.time() * 1000))}]}]}
        try:
            answer = await self.peers.get(endpoint.node_id, endpoint.host, endpoint.port).request(
                ApiKey.PRODUCE, PRODUCE_VERSION, body, REQUEST_TIMEOUT_S)
        except (PeerError, KafkaCodecError, OSError, TimeoutError) as error:
            return self._failed(group_id, dead_letter_topic, ErrorCode.REQUEST_TIMED_OUT, str(error))
        code = ErrorCode.UNKNOWN_SERVER_ERROR
        for entry in answer.get("responses", []):
            for result in entry["partition_responses"]:
                if result["index"] == index:
                    code = ErrorCode(result["error_code"])
        if code != ErrorCode.NONE:
            return self._failed(group_id, dead_letter_topic, code, f"partition {index}")
        self.written += len(records)
        log.info("share group %s: %d records of %s-%d dead-lettered to %s-%d", group_id, len(records), topic,
                 partition, dead_letter_topic, index)
        return ErrorCode.NONE

    def _failed(self, group_id: str, dead_letter_topic: str, code: ErrorCode, why: str) -> ErrorCode:
        self.failed += 1
        log.warning("share group %s: dead letters not written to %s (%s: %s); the records stay unarchived and "
                    "are delivered again", group_id, dead_letter_topic, code.name, why)
        return code
