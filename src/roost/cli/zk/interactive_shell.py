"""`roost zk shell`: an interactive loop over the same click commands as one-shot `roost zk`,
on one session (so `addauth`, ephemerals and watches last until `quit`).

On a terminal it has a prompt, line editing, history (~/.roost_zk_history, or the file named by
ROOST_ZK_HISTORY) and tab completion of command names and znode paths (readline). With commands
piped on stdin it reads them without a prompt, which makes it scriptable:

    printf 'addauth digest bob:pw\\ncreate /x v auth::cdrwa\\ngetAcl /x\\n' | roost zk shell

Like zkCli, its exit status is that of the last command.
"""

from __future__ import annotations

import cmd
import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from roost.cli.client.client_options import CliError
from roost.cli.zk.kazoo_session import ZkSession

HISTORY_LENGTH = 1000
QUIT_WORDS = ("quit", "exit", "EOF")


def history_file() -> Path:
    return Path(os.environ.get("ROOST_ZK_HISTORY", Path.home() / ".roost_zk_history"))


class ZkShell(cmd.Cmd):
    def __init__(self, group: click.Group, session: ZkSession, interactive: bool):
        super().__init__(stdin=sys.stdin, stdout=sys.stdout)
        self.group = group
        self.session = session
        self.use_rawinput = interactive
        self.prompt = f"[zk: {session.server}] " if interactive else ""
        self.intro = "roost zk shell: `help` lists the commands, `quit` leaves" if interactive else None
        self.status = 0

    def command_names(self) -> list[str]:
        ctx = click.Context(self.group)
        return [name for name in self.group.list_commands(ctx) if name != "shell"]

    # --------------------------------------------------------------------------- running

    def emptyline(self) -> bool:
        return False  # cmd's default repeats the last command

    def onecmd(self, line: str) -> bool:
        try:
            words = shlex.split(line, comments=True)
        except ValueError as error:
            click.echo(f"roost: cannot parse the line: {error}", err=True)
            self.status = 1
            return False
        if not words:
            return False
        if words[0] in QUIT_WORDS:
            return True
        if words[0] in ("help", "?"):
            self.show_help(words[1:])
            return False
        if words[0] == "shell":
            click.echo("roost: already in the shell", err=True)
            self.status = 1
            return False
        with self.session.command_running():
            self.status = self.run(words)
        return False

    def run(self, words: list[str]) -> int:
        """Run one command line as `roost zk WORDS` would, on this shell's session."""
        try:
            self.group.main(args=words, prog_name="roost zk", obj=self.session, standalone_mode=False)
        except CliError as error:
            error.show()
            return 1
        except click.UsageError as error:
            where = f"{error.ctx.info_name}: " if error.ctx is not None and error.ctx.info_name != "roost zk" else ""
            click.echo(f"roost: {where}{error.format_message()}", err=True)
            return 2
        except click.ClickException as error:
            error.show()
            return error.exit_code
        except click.exceptions.Exit as stop:
            return stop.exit_code
        except click.exceptions.Abort:
            return 1
        except SystemExit as stop:
            return stop.code if isinstance(stop.code, int) else 0
        return 0

    def show_help(self, topics: list[str]) -> None:
        if topics:
            self.run([*topics[:1], "--help"])
            return
        ctx = click.Context(self.group)
        for name in self.command_names():
            found = self.group.get_command(ctx, name)
            summary = found.get_short_help_str(70) if found else ""
            click.echo(f"  {name:<15} {summary}")
        click.echo("  help [COMMAND], quit")

    # ------------------------------------------------------------------------- completion

    def completenames(self, text: str, *ignored: Any) -> list[str]:
        return [name for name in [*self.command_names(), "help", "quit"] if name.startswith(text)]

    def completedefault(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self.complete_path(text)

    def complete_path(self, text: str) -> list[str]:
        """Znode paths that start with `text` (children of the node `text` is in); a path with
        children gets a trailing '/' so that completion goes on into it."""
        if not text.startswith("/"):
            return []
        parent, _, prefix = text.rpartition("/")
        parent = parent or "/"
        client = self.session.client
        try:
            names = client.get_children_async(parent).get(timeout=self.session.timeout)
        except Exception:  # completion never fails loudly: no node, no permission, no reply
            return []
        base = "" if parent == "/" else parent
        return sorted(f"{base}/{name}" for name in names if name.startswith(prefix))


def _setup_readline(shell: ZkShell) -> Any:
    try:
        import readline
    except ImportError:  # pragma: no cover - readline is part of CPython on Linux
        return None
    readline.set_completer_delims(" \t\n\"'")  # a path is one word, '/' and '-' included
    with contextlib.suppress(OSError):
        readline.read_history_file(history_file())
    readline.set_history_length(HISTORY_LENGTH)
    return readline


def run_shell(group: click.Group, session: ZkSession) -> int:
    """Read and run commands until quit or end of input; returns the last command's status."""
    interactive = sys.stdin.isatty()
    session.interactive = True
    shell = ZkShell(group, session, interactive)
    readline = _setup_readline(shell) if interactive else None
    try:
        session.client  # connect now: an unreachable server ends the shell with its error  # noqa: B018
        shell.cmdloop()
    except KeyboardInterrupt:
        click.echo("")
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(history_file())
    return shell.status
