"""The one exception type the ZooKeeper codec raises for malformed input."""

from __future__ import annotations


class ZkCodecError(Exception):
    """The peer sent bytes that are not a valid ZooKeeper (jute) message, or broke a limit.

    Every decoding failure of the codec raises this type and no other, so a server can catch it,
    log why, and close that one connection.
    """
