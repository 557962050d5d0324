"""What `roost console` (console_command.py) and the console of `roost up` (up_console.py) share:
the listening line the console prints and the login its options ask for."""

from __future__ import annotations

from typing import Any

from roost.cli.client.client_options import CliError
from roost.console.settings import Login

LISTENING = "roost: console listening on "


def announce(address: str, read_only: bool, url: str | None = None, login: Any = None) -> None:
    """The listening line, in the form of the other listeners' (`roost: NAME listening on HOST:PORT`),
    then how to reach it when it serves HTTPS or asks for a login (the user's name, never the password)."""
    print(f"{LISTENING}{address}", flush=True)
    if read_only:
        print("roost: console is read-only: it refuses every change", flush=True)
    if url is not None and (url.startswith("https:") or login is not None):
        print(f"roost: console at {url}" + (f", log in as {login.username}" if login is not None else ""), flush=True)


def login_of(user: str | None, password: str | None) -> Login | None:
    from roost.secret_ref import resolve_secret

    if not user and not password:
        return None
    if not (user and password):
        raise CliError("--login-user and --login-password go together")
    try:
        resolved = resolve_secret(password)
    except ValueError as error:
        raise CliError(f"--login-password: {error}") from None
    if not resolved:
        raise CliError("--login-password: the password is empty")
    return Login(user, resolved)
