"""The messenger service: sending stores the message and publishes an event, and returns at once.

The publish is fire-and-forget from the sender's point of view: `produce()` queues the event in
the idempotent producer and returns; delivery happens in the background. No task (notify, email,
analytics) runs on the send path, so none can slow it down or make it fail.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Producer

from examples.messenger.events import EVENTS_TOPIC, Event, MessageSent, MessagesRead, SimulatedClock, encode


@dataclass
class StoredMessage:
    message_id: str
    sender: str
    recipient: str
    text: str
    sent_at: int
    read: bool = False


@dataclass
class MessageStore:
    """Where messages live (a database in real life; memory here)."""

    messages: dict[str, StoredMessage] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, message: StoredMessage) -> None:
        with self.lock:
            assert message.message_id not in self.messages, message.message_id
            self.messages[message.message_id] = message

    def mark_read(self, user: str) -> int:
        with self.lock:
            unread = [m for m in self.messages.values() if m.recipient == user and not m.read]
            for message in unread:
                message.read = True
            return len(unread)


class MessengerService:
    def __init__(self, bootstrap: str, clock: SimulatedClock, topic: str = EVENTS_TOPIC) -> None:
        self.clock = clock
        self.topic = topic
        self.store = MessageStore()
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 300_000})
        self._ids = itertools.count(1)
        self.publish_failures: list[str] = []
        self.send_seconds: list[float] = []

    def _publish(self, event: Event) -> None:
        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:  # would go to an outbox for re-publishing; the send itself stands
                self.publish_failures.append(str(error))

        self.producer.produce(self.topic, encode(event), event.key.encode(), on_delivery=delivered)
        self.producer.poll(0)  # serve delivery callbacks; never waits

    def send(self, sender: str, recipient: str, text: str) -> str:
        """Store the message, publish "message sent", return its id. Does not wait for anyone."""
        began = time.perf_counter()
        message_id = f"m{next(self._ids)}"
        self.store.add(StoredMessage(message_id, sender, recipient, text, self.clock.now_ms))
        self._publish(MessageSent(message_id, sender, recipient, self.clock.now_ms))
        self.send_seconds.append(time.perf_counter() - began)
        return message_id

    def read_messages(self, user: str) -> int:
        """The user opened their inbox: mark messages read and publish the read receipt."""
        count = self.store.mark_read(user)
        self._publish(MessagesRead(user, self.clock.now_ms))
        return count

    def close(self, timeout: float = 60.0) -> None:
        remaining = self.producer.flush(timeout)
        if remaining:
            raise RuntimeError(f"{remaining} events still unpublished after {timeout} s")
