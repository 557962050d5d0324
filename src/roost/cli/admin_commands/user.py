"""`roost user`: SCRAM users of a Kafka-protocol cluster, through AlterUserScramCredentials and
DescribeUserScramCredentials (kafka-configs --entity-type users --add-config 'SCRAM-SHA-256=...').

    roost user create alice --password-stdin            # SCRAM-SHA-256 and SCRAM-SHA-512
    roost user create alice --mechanism SCRAM-SHA-512 --iterations 8192 --password-file pw.txt
    roost user list
    roost user delete alice

The password is read from stdin, a file, an environment variable or a prompt; it is never taken as
a command-line argument (where `ps` and shell history would see it) and never printed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from roost.admin.kafka_client import await_result, open_admin
from roost.admin.target import Target
from roost.cli.client.admin_output import report_each
from roost.cli.client.client_options import CliError, emit, format_option, kafka_target_options

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


@click.group("user")
def command() -> None:
    """Create, list and delete SCRAM users (credentials kept in ZooKeeper, as Kafka does)."""


def read_password(password_stdin: bool, password_file: Path | None, password_env: str | None) -> str:
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    elif password_file is not None:
        try:
            password = password_file.read_text().strip()
        except OSError as error:
            raise CliError(f"cannot read the password file {password_file}: {error.strerror}") from None
    elif password_env is not None:
        if password_env not in os.environ:
            raise CliError(f"environment variable {password_env} is not set")
        password = os.environ[password_env]
    else:
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise CliError("the password must not be empty")
    return password


@command.command("create")
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(sorted(MECHANISMS)),
              help="SCRAM mechanism (repeatable; default both)")
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True)
@click.option("--password-stdin", is_flag=True, help="read the password from the first line of stdin")
@click.option("--password-file", type=Path, help="read the password from this file")
@click.option("--password-env", metavar="VAR", help="read the password from this environment variable")
@format_option
@kafka_target_options
def create(name: str, mechanisms: tuple[str, ...], iterations: int, password_stdin: bool,
           password_file: Path | None, password_env: str | None, output_format: str, target: Target) -> None:
    """Create NAME's SCRAM credentials, or replace them (a new password)."""
    password = read_password(password_stdin, password_file, password_env).encode()
    upserts = [UserScramCredentialUpsertion(name, ScramCredentialInfo(MECHANISMS[m], iterations), password)
               for m in (mechanisms or sorted(MECHANISMS))]
    admin = open_admin(target)  # kept until the futures are done: librdkafka fails them when it goes
    futures = admin.alter_user_scram_credentials(upserts)
    report_each(futures, target, "user", "create user", "created", output_format)


@command.command("delete")
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(sorted(MECHANISMS)),
              help="only this mechanism's credential (repeatable; default every one the user has)")
@format_option
@kafka_target_options
def delete(name: str, mechanisms: tuple[str, ...], output_format: str, target: Target) -> None:
    """Delete NAME's SCRAM credentials."""
    admin = open_admin(target)
    if not mechanisms:
        described = await_result(admin.describe_user_scram_credentials([name])[name], target, f"describe user {name}")
        mechanisms = tuple(m for m, code in MECHANISMS.items()
                           if any(info.mechanism == code for info in described.scram_credential_infos))
    futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion(name, MECHANISMS[m]) for m in mechanisms])
    report_each(futures, target, "user", "delete user", "deleted", output_format)


@command.command("list")
@format_option
@kafka_target_options
def list_users(output_format: str, target: Target) -> None:
    """Every user with SCRAM credentials, with its mechanisms and iterations."""
    admin = open_admin(target)
    described = await_result(admin.describe_user_scram_credentials(), target, "list users")
    rows = [{"user": name, "mechanisms": ", ".join(
                f"{info.mechanism.name.replace('_', '-')} ({info.iterations})" for info in d.scram_credential_infos)}
            for name, d in sorted(described.items())]
    emit(rows, ["user", "mechanisms"], output_format)
