"""`roost check-logs`: verify log directories and keeper data directories offline, without a
server (as Kafka's `kafka-dump-log --verify` / DumpLogSegments, over every file kind Roost keeps).

    roost check-logs /var/lib/roost/logs                 # every partition under a log directory
    roost check-logs /var/lib/roost/logs/orders-3        # one partition
    roost check-logs /var/lib/roost/keeper               # a keeper's Raft log and snapshots
    roost check-logs --quiet DIR                         # only the damage, and the summary

Each damage is printed as `FILE at position N: what` (the byte where it starts). Exit status 0
when nothing is damaged, 1 when something is, 2 for a path that does not exist. Run it on a
stopped server's files (a live broker's last batch may be half-written). Reads, never writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from roost.log.check import check_partition, has_segments
from roost.raft.check import check_raft_dir, is_raft_dir

MAX_DIRECTORIES = 1_000_000  # a bound on the walk


def _directories(root: Path) -> Iterator[Path]:
    yield root
    for count, path in enumerate(sorted(root.rglob("*"))):
        if count >= MAX_DIRECTORIES:
            raise click.ClickException(f"more than {MAX_DIRECTORIES} entries under {root}")
        if path.is_dir() and not path.is_symlink():
            yield path


@click.command("check-logs")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--quiet", "-q", is_flag=True, help="print only damage and the summary")
def command(paths: tuple[Path, ...], quiet: bool) -> None:
    """Verify partition logs and keeper storage offline; exit 1 if anything is damaged."""
    damaged = checked = 0
    for root in paths:
        for directory in _directories(root):
            if has_segments(directory):
                report = check_partition(directory)
                lines = [str(damage) for damage in report.damages]
                what = f"{report.batches} batches, log end {report.log_end_offset}, {report.files} files"
            elif is_raft_dir(directory):
                found, entries = check_raft_dir(directory)
                lines = [f"{path}{f' at position {at}' if at >= 0 else ''}: {why}" for path, at, why in found]
                what = f"raft storage, {entries} entries"
            else:
                continue
            checked += 1
            damaged += bool(lines)
            if not quiet or lines:
                click.echo(f"{directory}: {'DAMAGED' if lines else 'ok'} ({what})")
            for line in lines:
                click.echo(f"  {line}")
    click.echo(f"{checked} checked, {damaged} damaged")
    if damaged:
        raise SystemExit(1)
