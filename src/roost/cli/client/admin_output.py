"""How the Kafka client commands (`roost topic`, `roost group`, `roost cluster`) print what the
admin library (roost.admin.kafka_client) answers: one row per awaited request with one error
line for the failures, and documents (several tables) as text, JSON or YAML."""

from __future__ import annotations

import concurrent.futures
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from roost.admin.errors import AdminError
from roost.admin.kafka_client import await_result
from roost.admin.target import Target
from roost.cli.client.client_options import CliError, emit


def report_each(futures: Mapping[str, concurrent.futures.Future[Any]], target: Target, column: str, action: str,
                done: str, output_format: str, settled: Callable[[str], str | None] | None = None) -> None:
    """Await one admin future per name (`action NAME` in errors): a row (`column`, status `done`)
    per success, then one error line naming every failure. `settled(message)` may turn a failure
    into a status instead (`topic create --if-not-exists`: "exists")."""
    rows, failures = [], []
    for name, future in futures.items():
        try:
            await_result(future, target, f"{action} {name}")
            rows.append({column: name, "status": done})
        except AdminError as error:
            status = settled(error.message) if settled is not None else None
            if status is None:
                failures.append(error.message)
            else:
                rows.append({column: name, "status": status})
    if rows or not failures:
        emit(rows, [column, "status"], output_format)
    if failures:
        raise CliError("; ".join(failures))


def compile_regex(pattern: str | None, option: str = "--regex") -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as error:
        raise click.BadParameter(f"not a regular expression: {error}", param_hint=option) from None


def emit_document(document: Mapping[str, Any], sections: Sequence[tuple[str, str | None, Sequence[str]]],
                  output_format: str) -> None:
    """Print `document` whole as JSON or YAML, or as text: for each (key, title, columns) of
    `sections`, the rows under document[key] as a table titled `title`."""
    if output_format == "json":
        click.echo(json.dumps(document, indent=2, default=str))
    elif output_format == "yaml":
        import yaml

        click.echo(yaml.safe_dump(json.loads(json.dumps(document, default=str)), sort_keys=False), nl=False)
    else:
        for key, title, columns in sections:
            if document[key] or title is None:
                emit(document[key], columns, "text", title=title)
            else:
                click.echo(f"{title}: none")
