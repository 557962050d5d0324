"""The exceptions of the Kafka wire codec.

Decoders raise only `KafkaCodecError` (or a subclass) on bad input, whatever is wrong with the
bytes, so a server can answer or drop a misbehaving peer with one `except` clause.
"""

from __future__ import annotations


class KafkaCodecError(Exception):
    """Bytes that are not a valid Kafka message, or a body that cannot be encoded."""


class UnknownApiError(KafkaCodecError):
    """A request names an API key this codec does not implement."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key


class UnsupportedVersionError(KafkaCodecError):
    """The API is known but the requested version is not implemented."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"api key {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
