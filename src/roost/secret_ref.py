"""Secrets in configuration files, by reference: a password setting holds the password itself,
or `${env:NAME}` (an environment variable) or `${file:/path}` (a file's content, a trailing
newline dropped), the forms of Kafka's configuration providers (KIP-297's FileConfigProvider,
KIP-887's EnvVarConfigProvider), so that a config file need not hold the secret.

A reference that cannot be resolved raises ValueError naming the variable or file, never a value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

_REFERENCE = re.compile(r"\$\{(env|file):([^}]+)\}")


def resolve_secret(value: str, environ: Mapping[str, str] | None = None) -> str:
    """The secret `value` stands for (see the module docstring)."""
    match = _REFERENCE.fullmatch(value.strip())
    if match is None:
        return value
    kind, name = match.groups()
    if kind == "env":
        env = os.environ if environ is None else environ
        if name not in env:
            raise ValueError(f"environment variable {name} is not set")
        return env[name]
    try:
        return Path(name).read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise ValueError(f"cannot read secret file {name}: {exc.strerror}") from None
