"""Messenger events on the topic `messenger.events`, keyed by the user they concern.

"message sent" is keyed by the recipient and "messages read" (a read receipt) by the reader, so a
user's events share a partition and every consumer sees them in the order they happened.
Times are simulated milliseconds (`at`), never the wall clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

EVENTS_TOPIC = "messenger.events"
DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True)
class MessageSent:
    message_id: str
    sender: str
    recipient: str
    at: int

    @property
    def key(self) -> str:
        return self.recipient


@dataclass(frozen=True)
class MessagesRead:
    user: str
    at: int

    @property
    def key(self) -> str:
        return self.user


Event = MessageSent | MessagesRead


def encode(event: Event) -> bytes:
    if isinstance(event, MessageSent):
        body = {"type": "sent", "id": event.message_id, "from": event.sender, "to": event.recipient,
                "at": event.at}
    else:
        body = {"type": "read", "user": event.user, "at": event.at}
    return json.dumps(body).encode()


def decode(data: bytes) -> Event:
    body = json.loads(data)
    if body["type"] == "sent":
        return MessageSent(body["id"], body["from"], body["to"], int(body["at"]))
    if body["type"] == "read":
        return MessagesRead(body["user"], int(body["at"]))
    raise ValueError(f"unknown messenger event type {body['type']!r}")


class SimulatedClock:
    """The example's clock: moves only when told to."""

    def __init__(self, start_ms: int) -> None:
        self.now_ms = start_ms

    def advance(self, ms: int) -> int:
        assert ms >= 0, "simulated time never goes back"
        self.now_ms += ms
        return self.now_ms
