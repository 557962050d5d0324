"""What a handler receives and may answer: the shared vocabulary of connections, the dispatcher
and the handlers (so none of them imports another)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.principal import ANONYMOUS, KafkaPrincipal
from roost.wire.kafka import RequestHeader

if TYPE_CHECKING:
    from roost.broker.quotas.throttle import FetchAllowance

NO_RESPONSE = object()  # a handler's answer when the request gets no response (acks=0)


class Deferred:
    """A response still to come: once `future` is done, its result is the response body (or
    NO_RESPONSE), to be encoded for `header`. Handlers that wait (a parked fetch, a produce
    waiting for replication or fsync) answer with a future rather than a coroutine: no task per
    request, a callback when it is done."""

    __slots__ = ("future", "header")

    def __init__(self, header: RequestHeader, future: asyncio.Future[Any]) -> None:
        self.header = header
        self.future = future


class Request:
    """One decoded request and where it came from."""

    __slots__ = ("body", "client_host", "connection", "fetch_allowance", "header", "listener", "principal")

    def __init__(self, header: RequestHeader, body: dict[str, Any], client_host: str,
                 principal: KafkaPrincipal = ANONYMOUS, listener: str = "", connection: object = None,
                 fetch_allowance: FetchAllowance | None = None) -> None:
        self.header = header
        self.body = body
        self.client_host = client_host
        self.principal = principal  # who sent it: ANONYMOUS until TLS or SASL proves otherwise
        self.listener = listener  # the listener it came in on ("": an in-process call)
        # The connection it came on (None in-process): state tied to a connection, such as a
        # share session, is dropped when it closes (Broker._connection_closed).
        self.connection = connection
        # What a consumer's fetch may read under its fetch quota (None: no quota applies).
        self.fetch_allowance = fetch_allowance

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def member_host(self) -> str:
        """The client's address as a group member's `client_host`: Kafka's text for it."""
        return java_address_text(self.client_host)


def java_address_text(host: str) -> str:
    """`host` (an IP address as the socket gives it) written as Java's InetAddress.toString writes
    it, which is what Kafka reports as a group member's client host (DescribeGroups,
    ConsumerGroupDescribe, ShareGroupDescribe; `kafka-consumer-groups --describe` prints it):
    "/127.0.0.1"; IPv6 with every group and no "::" ("/0:0:0:0:0:0:0:1"); a v4-mapped IPv6
    address as its IPv4 one, since Java makes an Inet4Address of it. Anything that is no address
    is kept as it is."""
    address, _, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"/{ip.ipv4_mapped}"
        text = ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
        return f"/{text}%{scope}" if scope else f"/{text}"
    return f"/{ip}"


# A handler returns a response body (dict), NO_RESPONSE, or a future (or other awaitable) of either.
Handler = Callable[[Request], Any]
