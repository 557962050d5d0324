"""The one error the admin library raises: a failure a person can act on, told in one line."""

from __future__ import annotations


class AdminError(Exception):
    """A request the cluster refused or did not answer, or input that does not parse."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SeekTargetError(AdminError):
    """A consumer-group seek target (`--to`, the console's `to`) that does not parse."""
