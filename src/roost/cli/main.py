"""The `roost` command: one subcommand per module under roost.cli."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes `register(subparsers)`, which adds its subcommand and sets `func` on it.
SUBCOMMAND_MODULES = ("roost.cli.up", "roost.cli.broker", "roost.cli.keeper", "roost.cli.zk", "roost.cli.demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="roost", description="Roost messaging platform")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
