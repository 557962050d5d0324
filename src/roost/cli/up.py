"""The `roost up` subcommand (being built)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("up", help="(being built)")
    parser.set_defaults(func=lambda args: parser.error("not built yet"))
