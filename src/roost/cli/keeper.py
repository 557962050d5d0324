"""The `roost keeper` subcommand (not built yet)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("keeper", help="(not built yet)")
    parser.set_defaults(func=lambda args: parser.error("not built yet"))
