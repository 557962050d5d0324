"""What every client command of `roost` shares: where the cluster is, client settings, output
formats and errors.

    roost topic list -b 127.0.0.1:9092 -X client.id=me --format json
    ROOST_BOOTSTRAP=host:9092 roost topic list
    roost --profile staging topic list      # (or ROOST_PROFILE) bootstrap and settings from a file

Profiles live in `~/.config/roost/profiles.toml` (or the file named by ROOST_PROFILES_FILE):

    [staging]
    bootstrap = "10.0.0.5:9092,10.0.0.6:9092"
    zookeeper = "10.0.0.5:2181"
    [staging.settings]                      # any confluent-kafka (librdkafka) setting
    "client.id" = "roost-cli"
    "security.protocol" = "sasl_ssl"
    "sasl.password" = "${file:/home/me/.config/roost/staging.password}"   # or ${env:NAME}

Precedence: `-b`/`-X` on the command line, then ROOST_BOOTSTRAP, then the profile, then the
default 127.0.0.1:9092. Errors are one line on stderr (`roost: ...`) and a non-zero exit status;
never a traceback.
"""

from __future__ import annotations

import functools
import json
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from roost.admin.target import DEFAULT_ZOOKEEPER, Target

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
FORMATS = ("text", "json", "yaml")

F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A user-facing failure: printed as one line, exit status 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"roost: {self.message}", err=True)


def profiles_file() -> Path:
    return Path(os.environ.get("ROOST_PROFILES_FILE", Path.home() / ".config" / "roost" / "profiles.toml"))


def load_profile(name: str) -> dict[str, Any]:
    path = profiles_file()
    try:
        profiles = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"profile {name!r}: no profiles file at {path}") from None
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CliError(f"profiles file {path}: {error}") from None
    profile = profiles.get(name)
    if not isinstance(profile, dict):
        raise CliError(f"profile {name!r} is not in {path} (profiles there: {', '.join(sorted(profiles)) or 'none'})")
    return profile


def parse_settings(pairs: Iterable[str], option: str = "-X") -> dict[str, str]:
    """`key=value` strings into a dict; a string without '=' is a usage error."""
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint=option)
        settings[key] = value
    return settings


def resolve_target(bootstrap: str | None, settings: Sequence[str], profile: str | None, timeout_s: float) -> Target:
    from roost.config import ConfigError, resolve_secret_reference

    chosen = load_profile(profile) if profile else {}
    merged = {str(k): str(v) for k, v in dict(chosen.get("settings", {})).items()}
    merged.update(parse_settings(settings))
    try:
        # A profile (or -X) may name where a secret is: ${env:NAME} or ${file:/path}.
        merged = {key: resolve_secret_reference(value, key, f"profile {profile}" if profile else "-X")
                  for key, value in merged.items()}
    except ConfigError as error:
        raise CliError(str(error)) from None
    return Target(
        bootstrap=bootstrap or os.environ.get("ROOST_BOOTSTRAP") or str(chosen.get("bootstrap", DEFAULT_BOOTSTRAP)),
        settings=merged,
        zookeeper=os.environ.get("ROOST_ZOOKEEPER") or str(chosen.get("zookeeper", DEFAULT_ZOOKEEPER)),
        timeout_s=timeout_s,
    )


def kafka_target_options(command: F) -> F:
    """Adds -b/--bootstrap, -X, --profile and --timeout, and passes `target: Target` instead."""

    @functools.wraps(command)  # keeps the options decorators below this one attached
    def wrapper(*args: Any, bootstrap: str | None, setting: tuple[str, ...], profile: str | None,
                timeout: float, **kwargs: Any) -> Any:
        return command(*args, target=resolve_target(bootstrap, setting, profile, timeout), **kwargs)

    decorated: Any = wrapper
    for option in reversed((
        click.option("-b", "--bootstrap", metavar="HOST:PORT[,...]",
                     help=f"brokers to bootstrap from (env ROOST_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})"),
        click.option("-X", "setting", multiple=True, metavar="KEY=VALUE",
                     help="any confluent-kafka client setting (repeatable)"),
        click.option("--profile", envvar="ROOST_PROFILE", metavar="NAME",
                     help="bootstrap and settings from the profiles file (env ROOST_PROFILE)"),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
                     metavar="SECONDS", help="how long to wait for the cluster before giving up"),
    )):
        decorated = option(decorated)
    return decorated


def format_option(command: F) -> F:
    """Adds --format text|json|yaml (as `output_format`)."""
    return click.option("--format", "output_format", type=click.Choice(FORMATS), default="text",
                        show_default=True, help="output format")(command)


def emit(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], output_format: str,
         title: str | None = None) -> None:
    """Print rows as a rich table (text), a JSON array, or a YAML list; `columns` order the
    table and name the keys shown in it (JSON and YAML carry every key)."""
    if output_format == "json":
        click.echo(json.dumps(list(rows), indent=2, default=str))
    elif output_format == "yaml":
        import yaml

        click.echo(yaml.safe_dump([dict(row) for row in rows], sort_keys=False, allow_unicode=True), nl=False)
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, box=None, header_style="bold", pad_edge=False)
        for column in columns:
            table.add_column(column.upper().replace("_", "-"))
        for row in rows:
            table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
        Console(soft_wrap=True).print(table)
