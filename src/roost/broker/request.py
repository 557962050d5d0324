"""What a handler receives and may answer: the shared vocabulary of connections, the dispatcher
and the handlers (so none of them imports another)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.wire.kafka import RequestHeader

NO_RESPONSE = object()  # a handler's answer when the request gets no response (acks=0)


class Request:
    """One decoded request and where it came from."""

    __slots__ = ("body", "client_host", "header")

    def __init__(self, header: RequestHeader, body: dict[str, Any], client_host: str) -> None:
        self.header = header
        self.body = body
        self.client_host = client_host

    @property
    def version(self) -> int:
        return self.header.api_version


# A handler returns a response body (dict), NO_RESPONSE, or an awaitable of either.
Handler = Callable[[Request], Any]
