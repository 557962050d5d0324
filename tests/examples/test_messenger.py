"""The messenger: N sends -> N notifications, emails only to users idle for 24 h, matching
analytics; a failing mail service delays emails but neither sends nor the other tasks."""

from __future__ import annotations

from collections import Counter

from examples.messenger.events import DAY_MS, MessageSent, MessagesRead
from examples.messenger.scenario import START_MS, run_messenger

from tests.support.procs import RoostProcess


def expected_emails(events: list) -> list[tuple[str, int]]:
    """Recipients to email, counted independently: walk the events in order; a message to a
    user whose last read is at least a day old earns one email until the user reads again."""
    last_read: dict[str, int] = {}
    owed: list[tuple[str, int]] = []
    emailed: set[str] = set()
    for event in events:
        if isinstance(event, MessagesRead):
            last_read[event.user] = event.at
            emailed.discard(event.user)
        elif event.at - last_read.get(event.recipient, START_MS) >= DAY_MS and event.recipient not in emailed:
            owed.append((event.recipient, event.at))
            emailed.add(event.recipient)
    return sorted(owed)


def test_messenger_tasks_with_a_mail_outage(roost_node: RoostProcess) -> None:
    result = run_messenger(roost_node.address("kafka"), users=20, messages=250, seed=5)
    sent = [e for e in result.events if isinstance(e, MessageSent)]
    assert result.sent == len(sent) == 250
    assert result.publish_failures == 0
    # Every send was answered while the mail service was down, and the other tasks finished.
    assert result.notifications_during_outage == 250
    assert result.emails_during_outage == 0
    want = expected_emails(result.events)
    assert want, "the scenario should have idle users to email"
    assert result.email_retries > 0 and result.emails_refused_while_down > 0
    # After recovery: each owed email exactly once, to the right user for the right message time.
    assert result.email_recipients == want
    assert result.notifications == 250
    assert result.analytics_messages == 250
    assert result.analytics_reads == len(result.events) - 250
    assert result.analytics_by_recipient == dict(Counter(e.recipient for e in sent))
