"""Two of the three tasks, each its own consumer group: emailer and analytics (the notifier is a
share group, examples/messenger/share_workers.py).

A worker handles one event at a time and commits its offset only after the handler succeeded.
A handler that fails with a transient error (the mail service is down) is retried with backoff,
holding back only that worker: the other groups read the same events independently, and the
senders never wait for any of them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer

from examples.messenger.events import DAY_MS, EVENTS_TOPIC, Event, MessageSent, MessagesRead, decode

log = logging.getLogger("messenger")


class TransientError(Exception):
    """A failure worth retrying (a dependency is down); the event is not lost or skipped."""


class BackgroundWorker:
    """A worker's thread: started, stopped within a bound, and its failure kept for whoever
    watches it (`wait_for`). Subclasses consume in `_work` until `_stop` is set."""

    group: str

    def __init__(self, thread_name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} did not stop"

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as error:  # surfaced to whoever checks the worker
            self.failure = error
            raise

    def _work(self) -> None:
        raise NotImplementedError


class Worker(BackgroundWorker):
    """Consumes EVENTS_TOPIC in its own group and calls `handle` for each event, in order."""

    group = "worker"

    def __init__(self, bootstrap: str, topic: str = EVENTS_TOPIC, max_backoff: float = 1.0) -> None:
        super().__init__(f"{self.group}-worker")
        self.bootstrap = bootstrap
        self.topic = topic
        self.max_backoff = max_backoff
        self.processed = 0
        self.retries = 0

    def handle(self, event: Event) -> None:
        raise NotImplementedError

    def _work(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 10_000})
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                event = decode(message.value())
                backoff = 0.02
                while not self._stop.is_set():
                    try:
                        self.handle(event)
                        break
                    except TransientError as error:
                        self.retries += 1
                        log.info("%s: %s; retrying in %.2f s", self.group, error, backoff)
                        self._stop.wait(backoff)
                        backoff = min(backoff * 2, self.max_backoff)
                else:
                    return  # stopping in the middle of a retry: the offset stays uncommitted
                consumer.commit(message=message, asynchronous=True)
                self.processed += 1
        finally:
            consumer.close()


@dataclass(frozen=True)
class Notification:
    recipient: str
    message_id: str


@dataclass(frozen=True)
class Email:
    recipient: str
    idempotency_key: str
    sent_at: int


@dataclass
class MailService:
    """A mail relay that can be down. Keys make a retried send land once."""

    up: bool = True
    delivered: dict[str, Email] = field(default_factory=dict)
    refused: int = 0

    def send(self, email: Email) -> None:
        if not self.up:
            self.refused += 1
            raise TransientError("mail service unavailable")
        self.delivered.setdefault(email.idempotency_key, email)


class Emailer(Worker):
    """Emails a recipient who has not read messages for 24 hours, once per such stretch.

    Last-read times come from the read receipts on the same partition, so they are up to date
    with respect to each "message sent" event. (State is in memory: a real emailer would keep it
    in a store, or rebuild it from the topic on start.)
    """

    group = "emailer"

    def __init__(self, bootstrap: str, mail: MailService, start_ms: int, **kwargs: object) -> None:
        super().__init__(bootstrap, **kwargs)  # type: ignore[arg-type]
        self.mail = mail
        self.start_ms = start_ms
        self.last_read: dict[str, int] = {}
        self.emailed_since_read: set[str] = set()

    def handle(self, event: Event) -> None:
        if isinstance(event, MessagesRead):
            self.last_read[event.user] = max(event.at, self.last_read.get(event.user, event.at))
            self.emailed_since_read.discard(event.user)
            return
        user = event.recipient
        idle = event.at - self.last_read.get(user, self.start_ms)
        if idle >= DAY_MS and user not in self.emailed_since_read:
            self.mail.send(Email(user, f"inactive:{user}:{event.message_id}", event.at))
            self.emailed_since_read.add(user)


class Analytics(Worker):
    """Counts what happens: messages sent, by sender and by recipient, and read receipts."""

    group = "analytics"

    def __init__(self, bootstrap: str, **kwargs: object) -> None:
        super().__init__(bootstrap, **kwargs)  # type: ignore[arg-type]
        self.messages = 0
        self.reads = 0
        self.by_sender: Counter[str] = Counter()
        self.by_recipient: Counter[str] = Counter()

    def handle(self, event: Event) -> None:
        if isinstance(event, MessageSent):
            self.messages += 1
            self.by_sender[event.sender] += 1
            self.by_recipient[event.recipient] += 1
        else:
            self.reads += 1


def wait_for(predicate: object, what: str, timeout: float, workers: Sequence[BackgroundWorker]) -> None:
    """Poll `predicate` (bounded); stop early if a worker died."""
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        for worker in workers:
            if worker.failure is not None:
                raise RuntimeError(f"{worker.group} worker failed: {worker.failure!r}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
