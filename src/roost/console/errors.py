"""The one error the console's layers raise for a request they refuse or cannot answer: it carries
the HTTP status the API answers with, and a message meant for the person at the page."""

from __future__ import annotations


class ConsoleError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(what: str) -> ConsoleError:
    return ConsoleError(404, f"not found: {what}")


def bad_request(message: str) -> ConsoleError:
    return ConsoleError(400, message)
