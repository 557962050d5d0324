"""The client commands' arguments: a bad one is refused before any round trip to the cluster,
and the options that mean the same thing have the same names in every command."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import click
import pytest

from roost.cli.main import cli
from tests.cli.kafka_cli import run_in_process


@pytest.fixture
def listening_address() -> Iterator[tuple[str, socket.socket]]:
    """A loopback port that accepts connections, so a test can tell whether a command tried it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        yield f"127.0.0.1:{server.getsockname()[1]}", server


def connections(server: socket.socket) -> int:
    count = 0
    while True:
        try:
            accepted, _ = server.accept()
        except BlockingIOError:
            return count
        accepted.close()
        count += 1


@pytest.mark.parametrize("bad", [["-p", "-1"], ["-p", "0"], ["-r", "-1"], ["-r", "0"], ["-c", "retention.ms"]])
def test_topic_create_refuses_a_bad_argument_before_reaching_the_cluster(
        capsys: pytest.CaptureFixture[str], listening_address: tuple[str, socket.socket], bad: list[str]) -> None:
    address, server = listening_address
    done = run_in_process(capsys, "topic", "create", "t", *bad, "-b", address, "--timeout", "30")
    assert done.returncode == 2, done.stderr
    assert bad[0] in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert connections(server) == 0, "the command reached for the cluster before checking its arguments"


def walk(command: click.Command, path: str = "roost") -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None
            yield from walk(sub, f"{path} {name}")


def options() -> Iterator[tuple[str, click.Option]]:
    for path, command in walk(cli):
        for param in command.params:
            if isinstance(param, click.Option):
                yield path, param


def test_the_ensemble_option_is_named_zookeeper_in_every_command() -> None:
    """One name for the keeper ensemble across commands (`--server`, zkCli's, is an alias where
    zkCli users look for it), and ROOST_ZOOKEEPER behind it."""
    found = [(path, opt) for path, opt in options()
             if {"--zookeeper", "--server"} & set(opt.opts) or opt.envvar == "ROOST_ZOOKEEPER"]
    assert {path for path, _ in found} >= {"roost zk", "roost cluster status", "roost console"}
    for path, opt in found:
        assert opt.opts[0] == "--zookeeper", f"{path}: the ensemble option is {opt.opts}"
        assert opt.metavar == "HOST:PORT[,...]", path


def test_shared_options_mean_one_thing_everywhere() -> None:
    """-b is --bootstrap, --timeout is seconds as a float, --format is text|json|yaml, -X is a
    client setting: wherever a command has one of them."""
    seen: dict[str, set[str]] = {}
    for path, opt in options():
        for name in opt.opts:
            seen.setdefault(name, set()).add(path)
        if "-b" in opt.opts:
            assert opt.opts[:2] == ["-b", "--bootstrap"], f"{path}: -b is {opt.opts}"
        if "--bootstrap" in opt.opts:
            assert "-b" in opt.opts, f"{path}: --bootstrap without -b"
        if "--timeout" in opt.opts:
            assert isinstance(opt.type, click.FloatRange | click.types.FloatParamType), path
        if "--format" in opt.opts and path != "roost produce" and path != "roost consume":
            assert isinstance(opt.type, click.Choice) and set(opt.type.choices) == {"text", "json", "yaml"}, path
    assert len(seen["--bootstrap"]) > 10
