"""The `roost` command: a click group of subcommands.

Two kinds of subcommand live under it:
- the servers (`up`, `broker`, `keeper`, `demo`), whose many Kafka-style settings are parsed
  by argparse in their own modules (each exposes `register(subparsers)`): the group hands their
  arguments on untouched, so their grammar, help and errors are unchanged;
- the everyday client commands (each module in CLICK_COMMAND_MODULES exposes a click command
  or group named `command`), built with click and rich.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import click

from roost.admin.errors import AdminError
from roost.cli.client.client_options import CliError

# The server subcommands: name -> (module, one-line summary). Each module exposes
# `register(subparsers)`, which adds its subcommand and sets `func` on it. A module is imported
# only when its command runs: they import the broker and the keeper, which a client command
# does not need (half a second of CPU at every start).
SERVER_COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("roost.cli.servers.up_command", "Run a Roost node in this process, or a local cluster with --brokers N."),
    "broker": ("roost.cli.servers.broker_command", "Run one broker of a multi-machine cluster (Kafka-style config)."),
    "keeper": ("roost.cli.servers.keeper_command", "Run a ZooKeeper-compatible keeper."),
    "schema-registry": ("roost.cli.servers.registry_command",
                        "Run the Confluent-compatible schema registry and REST proxy against a cluster."),
    "demo": ("roost.cli.servers.demo_command", "Start a Roost node and run the messenger and trending-hashtags scenarios."),
}
# Each module exposes `command`, a click command or group.
CLICK_COMMAND_MODULES: tuple[str, ...] = (
    "roost.cli.admin_commands.topic", "roost.cli.records.produce", "roost.cli.records.consume",
    "roost.cli.admin_commands.group", "roost.cli.admin_commands.cluster_status", "roost.cli.zk.command_group",
    "roost.cli.servers.console_command", "roost.cli.admin_commands.acl", "roost.cli.admin_commands.user",
    "roost.cli.admin_commands.txn", "roost.cli.admin_commands.schema", "roost.cli.admin_commands.link",
    "roost.cli.admin_commands.quota", "roost.cli.admin_commands.share_group", "roost.cli.check_logs",
    "roost.cli.admin_commands.balance")


def build_parser(*names: str) -> argparse.ArgumentParser:
    """The argparse parser of the server subcommands `names` (default: all of them)."""
    parser = argparse.ArgumentParser(prog="roost", description="Roost messaging platform")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in names or SERVER_COMMANDS:
        importlib.import_module(SERVER_COMMANDS[name][0]).register(subparsers)
    return parser


def _argparse_command(name: str, summary: str) -> click.Command:
    """A click command that hands its arguments to the argparse subcommand `name`."""

    @click.command(name, help=summary, short_help=summary, add_help_option=False,
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
    def run(arguments: tuple[str, ...]) -> None:
        if name == "broker" and arguments[:1] == ("decommission",):
            # `roost broker decommission N` drains a broker: the balancer's command, under the
            # name an operator looks for (the server command takes --config, never this word).
            from roost.cli.admin_commands.balance import decommission_command

            raise SystemExit(decommission_command.main(list(arguments[1:]), prog_name="roost broker decommission",
                                                       standalone_mode=False) or 0)
        args = build_parser(name).parse_args([name, *arguments])
        raise SystemExit(int(args.func(args) or 0))

    return run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Roost messaging platform: a Kafka-protocol broker cluster, a ZooKeeper-protocol keeper,
    and the tools around them."""


for _name, (_, _summary) in SERVER_COMMANDS.items():
    cli.add_command(_argparse_command(_name, _summary))
for _module_name in CLICK_COMMAND_MODULES:
    cli.add_command(importlib.import_module(_module_name).command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `roost` with `argv` (default: the process's arguments); returns the exit status.
    Every failure a user can cause is one line on stderr and a non-zero status, never a traceback."""
    try:
        result = cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="roost",
                          standalone_mode=False)
    except SystemExit as stop:  # the server subcommands' status, and argparse's usage errors
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except click.UsageError as error:  # unknown command or option, bad value: one line, status 2
        where = error.ctx.command_path if error.ctx is not None else "roost"
        click.echo(f"{where}: {error.format_message()} (see '{where} --help')", err=True)
        return error.exit_code
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except AdminError as error:  # the admin library's one-line failures, shown as the CLI's own
        CliError(error.message).show()
        return 1
    except click.exceptions.Abort:  # Ctrl-C at a prompt
        click.echo("roost: aborted", err=True)
        return 130
    # A command's return value, or the status click.Context.exit gave (standalone_mode=False
    # returns it instead of exiting).
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
