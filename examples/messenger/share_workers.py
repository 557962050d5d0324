"""Notify workers as a share group (KIP-932): a pool of confluent-kafka ShareConsumers that read
the same partitions together, so the pool scales past the partition count and one slow or
failing notification holds back nothing else.

Each event is acknowledged explicitly:

- ACCEPT when the handler succeeded;
- RELEASE on a transient failure (the push service is down): the broker hands the event out
  again, to this worker or another, with its delivery count raised;
- REJECT for a poison event (it cannot be decoded or handled at all): it is never delivered
  again and, with the group's `roost.share.dead.letter.topic` set, is copied there for
  inspection and replay (`roost share-group replay`).

Unlike the notifier, the emailer stays a consumer group: its rule (email a user idle for 24 h,
once until the user reads) depends on seeing a user's events in order, which a share group does
not promise.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from examples.messenger.events import Event, MessageSent, decode
from examples.messenger.workers import BackgroundWorker, Notification, TransientError

log = logging.getLogger("messenger")


def configure_share_group(bootstrap: str, group: str, dead_letter_topic: str | None = None,
                          timeout: float = 30.0) -> None:
    """Set the share group's configs before its workers join: read from the earliest offset
    (events sent before the pool started are handled) and, optionally, the dead-letter topic."""
    configs = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
    if dead_letter_topic is not None:
        configs.append(ConfigEntry("roost.share.dead.letter.topic", dead_letter_topic,
                                   incremental_operation=AlterConfigOpType.SET))
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=configs)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout)


@dataclass
class PushService:
    """A push-notification service that refuses its first `refuse_first` pushes (it is down)
    and takes `seconds` per push; what it delivered, by worker."""

    refuse_first: int = 0
    seconds: float = 0.0
    delivered: list[tuple[str, Notification]] = field(default_factory=list)
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def push(self, worker: str, notification: Notification) -> None:
        with self._lock:
            if self.refused < self.refuse_first:
                self.refused += 1
                raise TransientError("push service unavailable")
        time.sleep(self.seconds)  # the call to the service, outside the lock: workers overlap
        with self._lock:
            self.delivered.append((worker, notification))


class ShareNotifier(BackgroundWorker):
    """One worker of the notify pool: a ShareConsumer with explicit acknowledgement."""

    def __init__(self, bootstrap: str, group: str, topic: str, push: PushService, name: str,
                 max_poll_records: int = 5, is_poison: Callable[[Event], bool] = lambda event: False) -> None:
        super().__init__(f"share-notifier-{name}")
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.push = push
        self.name = name
        self.is_poison = is_poison
        self.max_poll_records = max_poll_records
        self.accepted = 0
        self.released = 0
        self.rejected = 0

    def verdict(self, value: bytes | None) -> AcknowledgeType:
        """Handle one event and say how to acknowledge it."""
        try:
            event = decode(value or b"")
        except Exception:  # cannot even be read: retrying will not help
            return AcknowledgeType.REJECT
        if self.is_poison(event):
            return AcknowledgeType.REJECT
        if isinstance(event, MessageSent):
            try:
                self.push.push(self.name, Notification(event.recipient, event.message_id))
            except TransientError as error:
                log.info("%s: %s; releasing for redelivery", self.name, error)
                return AcknowledgeType.RELEASE
        return AcknowledgeType.ACCEPT

    def _work(self) -> None:
        consumer = ShareConsumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                  "share.acknowledgement.mode": "explicit",
                                  # a few records a poll, so the pool's workers split the work
                                  "max.poll.records": self.max_poll_records})
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                for message in consumer.poll(0.2) or []:
                    if message.error() is not None:
                        continue
                    verdict = self.verdict(message.value())
                    consumer.acknowledge(message, verdict)
                    if verdict == AcknowledgeType.ACCEPT:
                        self.accepted += 1
                    elif verdict == AcknowledgeType.RELEASE:
                        self.released += 1
                    else:
                        self.rejected += 1
                # Acknowledgements also ride on the next poll; committing makes them durable now.
                consumer.commit_async()
        finally:
            consumer.close()
