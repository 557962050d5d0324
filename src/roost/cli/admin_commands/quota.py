"""`roost quota`: Kafka's client quotas (kafka-configs --entity-type users/clients/ips), through
AlterClientQuotas and DescribeClientQuotas.

    roost quota set --user alice producer_byte_rate=1048576 consumer_byte_rate=2097152
    roost quota set --user alice --client-id app request_percentage=50
    roost quota set --user-default producer_byte_rate=10485760     # every user without its own
    roost quota set --ip 10.0.0.7 connection_creation_rate=20
    roost quota describe                    # every entity with a quota
    roost quota describe --user alice       # alice's own quotas (and with any client id)
    roost quota delete --user alice producer_byte_rate

Byte rates are bytes per second per broker, request_percentage percent of one thread, as in Kafka.
"""

from __future__ import annotations

import click

from roost.admin.client_quotas import Entity, alter_quotas, describe_quotas
from roost.admin.target import Target
from roost.cli.client.client_options import CliError, emit, format_option, kafka_target_options


def _entity_options(command):
    for option in reversed((
        click.option("--user", help="the user (principal name) the quota is for"),
        click.option("--user-default", is_flag=True, help="the default of every user"),
        click.option("--client-id", help="the client id the quota is for"),
        click.option("--client-default", is_flag=True, help="the default of every client id"),
        click.option("--ip", help="the client address (connection_creation_rate only)"),
        click.option("--ip-default", is_flag=True, help="the default of every address"),
    )):
        command = option(command)
    return command


def _entity(user: str | None, user_default: bool, client_id: str | None, client_default: bool, ip: str | None,
            ip_default: bool, required: bool = True) -> Entity:
    entity: Entity = []
    for kind, name, default in (("user", user, user_default), ("client-id", client_id, client_default),
                                ("ip", ip, ip_default)):
        if name is not None and default:
            raise CliError(f"give --{kind.split('-')[0]} or its --...-default, not both")
        if name is not None or default:
            entity.append((kind, name))
    if required and not entity:
        raise CliError("name the entity: --user, --client-id (or both), --ip, or their --...-default")
    return entity


def _show(entity: Entity) -> str:
    return ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in entity)


@click.group("quota")
def command() -> None:
    """Set, describe and delete client quotas (kept in ZooKeeper, as Kafka does)."""


@command.command("set")
@_entity_options
@click.argument("quotas", nargs=-1, required=True)
@click.option("--validate-only", is_flag=True, help="let the broker check the change without making it")
@kafka_target_options
def set_quotas(quotas: tuple[str, ...], validate_only: bool, target: Target, **names: object) -> None:
    """Set QUOTAS (key=value ...) on the entity."""
    entity = _entity(**names)  # type: ignore[arg-type]
    upserts = {}
    for item in quotas:
        key, sep, value = item.partition("=")
        try:
            upserts[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise CliError(f"{item!r} is not key=number (for example producer_byte_rate=1048576)")
    alter_quotas(target, entity, upserts, [], validate_only)
    click.echo(f"{'validated' if validate_only else 'set'} {', '.join(quotas)} for {_show(entity)}")


@command.command("delete")
@_entity_options
@click.argument("keys", nargs=-1, required=True)
@kafka_target_options
def delete_quotas(keys: tuple[str, ...], target: Target, **names: object) -> None:
    """Remove the quotas KEYS from the entity."""
    entity = _entity(**names)  # type: ignore[arg-type]
    alter_quotas(target, entity, {}, list(keys))
    click.echo(f"deleted {', '.join(keys)} for {_show(entity)}")


@command.command("describe")
@_entity_options
@click.option("--strict", is_flag=True, help="only entities with exactly the parts named")
@format_option
@kafka_target_options
def describe(strict: bool, output_format: str, target: Target, **names: object) -> None:
    """The quotas of every entity matching the parts named (all entities when none is)."""
    entity = _entity(**names, required=False)  # type: ignore[arg-type]
    components = [(kind, 1 if name is None else 0, name) for kind, name in entity]
    rows = [{"entity": _show(found), "quotas": ", ".join(f"{k}={int(v) if v.is_integer() else v}" for k, v in sorted(quotas.items()))}
            for found, quotas in describe_quotas(target, components, strict)]
    emit(rows, ["entity", "quotas"], output_format)
