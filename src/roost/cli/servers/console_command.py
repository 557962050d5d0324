"""`roost console`: the web console, alone, against any cluster.

    roost console -b 10.0.0.5:9092 --zookeeper 10.0.0.5:2181 --port 8080 --read-only

It listens on 127.0.0.1 unless --host says otherwise, prints `roost: console listening on HOST:PORT`,
and runs until SIGINT or SIGTERM. The web server is imported only when the command runs.
"""

from __future__ import annotations

import asyncio
import signal

import click

from roost.cli.servers.up_console import announce
from roost.console.settings import DEFAULT_CONSOLE_PORT, ConsoleSettings


@click.command("console")
@click.option("-b", "--bootstrap", "--bootstrap-server", "bootstrap", required=True, metavar="HOST:PORT[,...]",
              envvar="ROOST_BOOTSTRAP", help="the cluster's brokers (env ROOST_BOOTSTRAP)")
@click.option("--zookeeper", metavar="HOST:PORT[,...]", envvar="ROOST_ZOOKEEPER",
              help="the keeper (ZooKeeper) ensemble, for the keeper page and member roles (env ROOST_ZOOKEEPER)")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_CONSOLE_PORT, show_default=True,
              help="port to listen on (0: a free one)")
@click.option("--read-only", is_flag=True, help="refuse every change (create, produce, reset, delete, ...)")
def command(bootstrap: str, zookeeper: str | None, host: str, port: int, read_only: bool) -> int:
    """Serve the web console: overview, topics, messages, consumer groups, keeper."""
    settings = ConsoleSettings(bootstrap=bootstrap, zookeeper=zookeeper, host=host, port=port, read_only=read_only)
    return asyncio.run(serve(settings))


async def serve(settings: ConsoleSettings) -> int:
    from roost.console.server import start_console

    try:
        running = await start_console(settings)
    except OSError as error:
        click.echo(f"roost console: cannot listen on {settings.host}:{settings.port}: {error}", err=True)
        return 1
    announce(running.address, settings.read_only)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await running.stop()
    click.echo("roost: console stopped")
    return 0
