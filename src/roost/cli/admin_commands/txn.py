"""`roost txn`: the transactions of a Kafka-protocol cluster (kafka-transactions.sh's list and
describe).

    roost txn list                      # every transactional id, its producer and state
    roost txn list --state Ongoing      # Kafka's state names; repeatable
    roost txn describe my-app-0         # the coordinator's view: epoch, timeout, partitions
"""

from __future__ import annotations

import click

from roost.admin.target import Target
from roost.admin.transactions import describe_transaction, list_transactions
from roost.cli.client.client_options import emit, format_option, kafka_target_options


@click.group("txn")
def command() -> None:
    """List and describe transactions (their coordinators' view)."""


@command.command("list")
@click.option("--state", "states", multiple=True, help="only transactions in this state (e.g. Ongoing; repeatable)")
@format_option
@kafka_target_options
def list_command(states: tuple[str, ...], output_format: str, target: Target) -> None:
    """Every transactional id the brokers coordinate."""
    emit(list_transactions(target, list(states)), ["transactional_id", "producer_id", "state", "coordinator"],
         output_format)


@command.command("describe")
@click.argument("transactional_id")
@format_option
@kafka_target_options
def describe_command(transactional_id: str, output_format: str, target: Target) -> None:
    """TRANSACTIONAL_ID as its coordinator knows it."""
    emit([describe_transaction(target, transactional_id)],
         ["transactional_id", "state", "producer_id", "producer_epoch", "timeout_ms", "partitions"], output_format)
