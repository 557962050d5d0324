"""The messenger scenario, start to finish, with the mail service down for part of it.

    .venv/bin/python -m examples.messenger.scenario --bootstrap 127.0.0.1:9092

Users send each other messages over a few simulated days; most read their inbox often, a few go
quiet for days. The mail service is down while all messages are sent: sends still return at
once, notifications and analytics keep up, the emailer retries; once the mail service is back the
emails go out, each once.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, NewTopic

from examples.messenger.events import DAY_MS, EVENTS_TOPIC, Event, MessageSent, MessagesRead, SimulatedClock
from examples.messenger.service import MessengerService
from examples.messenger.share_workers import PushService, ShareNotifier, configure_share_group
from examples.messenger.workers import Analytics, BackgroundWorker, Emailer, MailService, Worker, wait_for

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, simulated


def create_events_topic(bootstrap: str, topic: str, partitions: int = 4) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
    try:
        future.result(timeout=30)
    except Exception as error:  # already there from an earlier run: fine
        if "already exists" not in str(error).lower():
            raise


@dataclass
class MessengerResult:
    events: list[Event] = field(default_factory=list)
    sent: int = 0
    reads: int = 0
    notifications: int = 0
    notifier_workers_busy: int = 0
    emails: int = 0
    emails_refused_while_down: int = 0
    email_retries: int = 0
    emails_during_outage: int = 0
    notifications_during_outage: int = 0
    analytics_messages: int = 0
    analytics_reads: int = 0
    analytics_by_recipient: dict[str, int] = field(default_factory=dict)
    email_recipients: list[tuple[str, int]] = field(default_factory=list)
    send_ms_median: float = 0.0
    send_ms_max: float = 0.0
    publish_failures: int = 0

    def summary(self) -> str:
        return "\n".join([
            f"messages sent: {self.sent} (read receipts: {self.reads}); "
            f"send latency median {self.send_ms_median:.3f} ms, max {self.send_ms_max:.3f} ms",
            f"  notifier : {self.notifications} notifications "
            f"({self.notifications_during_outage} while the mail service was down), "
            f"shared by {self.notifier_workers_busy} workers of one share group",
            f"  emailer  : {self.emails} emails to users idle for 24 h; {self.emails_during_outage} went out "
            f"during the outage, {self.email_retries} retries while it lasted",
            f"  analytics: {self.analytics_messages} messages, {self.analytics_reads} read receipts counted",
        ])


def emails_owed(events: list[Event], start_ms: int = START_MS) -> list[tuple[str, int]]:
    """(recipient, time) of every email the rule calls for, from the whole event history."""
    last_read: dict[str, int] = {}
    emailed: set[str] = set()
    owed: list[tuple[str, int]] = []
    for event in events:
        if isinstance(event, MessagesRead):
            last_read[event.user] = event.at
            emailed.discard(event.user)
        elif event.at - last_read.get(event.recipient, start_ms) >= DAY_MS and event.recipient not in emailed:
            owed.append((event.recipient, event.at))
            emailed.add(event.recipient)
    return sorted(owed)


def run_messenger(bootstrap: str, users: int = 20, messages: int = 300, seed: int = 3,
                  topic: str = EVENTS_TOPIC, group_suffix: str = "", timeout: float = 120.0,
                  notify_workers: int = 3) -> MessengerResult:
    rng = random.Random(seed)
    create_events_topic(bootstrap, topic)
    clock = SimulatedClock(START_MS)
    mail = MailService(up=False)  # down from the start: the emailer must retry, nobody else waits
    # Notifications are independent of each other and of order: a pool of share-group workers
    # reads every partition together. The emailer and analytics keep per-user state built in
    # event order, so they stay consumer groups.
    push = PushService()
    notify_group = f"notifiers{group_suffix}"
    configure_share_group(bootstrap, notify_group)
    notifiers = [ShareNotifier(bootstrap, notify_group, topic, push, f"notifier-{i}") for i in range(notify_workers)]
    emailer = Emailer(bootstrap, mail, START_MS, topic=topic)
    analytics = Analytics(bootstrap, topic=topic)
    workers: list[Worker] = [emailer, analytics]
    for worker in workers:
        worker.group += group_suffix
        worker.start()
    for notifier in notifiers:
        notifier.start()
    watched: list[BackgroundWorker] = [*workers, *notifiers]
    service = MessengerService(bootstrap, clock, topic)
    result = MessengerResult()
    names = [f"user{i}" for i in range(users)]
    quiet = set(names[: max(1, users // 5)])  # these read only every few days
    try:
        for name in names:  # everyone starts with an empty, read inbox
            service.read_messages(name)
            result.events.append(MessagesRead(name, clock.now_ms))
        for _ in range(messages):
            clock.advance(rng.randint(5, 90) * 60_000)
            sender, recipient = rng.sample(names, 2)
            message_id = service.send(sender, recipient, f"hello from {sender}")
            result.events.append(MessageSent(message_id, sender, recipient, clock.now_ms))
            reader = rng.choice(names)
            if (reader not in quiet and rng.random() < 0.5) or (reader in quiet and rng.random() < 0.02):
                service.read_messages(reader)
                result.events.append(MessagesRead(reader, clock.now_ms))
        service.close()
        result.sent = sum(isinstance(e, MessageSent) for e in result.events)
        result.reads = len(result.events) - result.sent
        total = len(result.events)
        # While the mail service is down, the other tasks still do all their work.
        wait_for(lambda: sum(n.accepted for n in notifiers) == total and analytics.processed == total,
                 "notifiers and analytics to process every event", timeout, watched)
        if emails_owed(result.events):
            # The emailer has reached an email it owes and is retrying it against the dead service.
            wait_for(lambda: mail.refused > 0, "the emailer to hit the outage", timeout, watched)
        result.notifications_during_outage = len(push.delivered)
        result.emails_during_outage = len(mail.delivered)
        result.emails_refused_while_down = mail.refused
        result.email_retries = emailer.retries
        mail.up = True
        wait_for(lambda: emailer.processed == total, "the emailer to catch up", timeout, watched)
    finally:
        for worker in workers:
            worker.stop()
        for notifier in notifiers:
            notifier.stop()
    result.notifications = len(push.delivered)
    result.notifier_workers_busy = len({name for name, _ in push.delivered})
    result.emails = len(mail.delivered)
    result.email_recipients = sorted((e.recipient, e.sent_at) for e in mail.delivered.values())
    result.analytics_messages = analytics.messages
    result.analytics_reads = analytics.reads
    result.analytics_by_recipient = dict(analytics.by_recipient)
    result.send_ms_median = statistics.median(service.send_seconds) * 1000
    result.send_ms_max = max(service.send_seconds) * 1000
    result.publish_failures = len(service.publish_failures)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the messenger scenario against a running Roost node")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    result = run_messenger(args.bootstrap, messages=args.messages, seed=args.seed, group_suffix=f"-{args.seed}",
                           topic=f"{EVENTS_TOPIC}.{args.seed}")
    print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
