"""`roost txn`: the transactions of a Kafka-protocol cluster, as kafka-transactions.sh shows and
repairs them.

    roost txn list                      # every transactional id, its producer and state
    roost txn list --state Ongoing      # Kafka's state names; repeatable
    roost txn describe my-app-0         # the coordinator's view: epoch, timeout, partitions
    roost txn describe-producers --topic t --partition 0   # a partition's producers, open transactions
    roost txn find-hanging --topic t    # open transactions no coordinator will finish
    roost txn abort --topic t --partition 0 --start-offset 1234             # write their ABORT marker
    roost txn abort --topic t --partition 0 --producer-id 7 --producer-epoch 0 --coordinator-epoch 0
"""

from __future__ import annotations

import click

from roost.admin.errors import AdminError
from roost.admin.hanging_transactions import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    abort_at_offset,
    abort_transaction,
    describe_producers,
    find_hanging,
)
from roost.admin.target import Target
from roost.admin.transactions import describe_transaction, list_transactions
from roost.cli.client.client_options import emit, format_option, kafka_target_options

PRODUCER_COLUMNS = ["producer_id", "producer_epoch", "coordinator_epoch", "last_sequence", "last_timestamp",
                    "current_txn_start_offset"]
HANGING_COLUMNS = ["topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch", "start_offset",
                   "last_timestamp", "duration_min"]


@click.group("txn")
def command() -> None:
    """List, describe, find and abort transactions (kafka-transactions.sh's commands)."""


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


@command.command("describe-producers")
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--broker-id", type=int, default=None, help="ask this replica instead of the leader")
@format_option
@kafka_target_options
def describe_producers_command(topic: str, partition: int, broker_id: int | None, output_format: str,
                               target: Target) -> None:
    """The active producers of a partition and the first offset of each one's open transaction
    (-1: none)."""
    emit(describe_producers(target, [(topic, partition)], broker_id)[(topic, partition)], PRODUCER_COLUMNS,
         output_format)


@command.command("find-hanging")
@click.option("--topic", default=None, help="search this topic's partitions")
@click.option("--partition", type=int, default=None, help="only this partition of --topic")
@click.option("--broker-id", type=int, default=None, help="search the partitions with a replica on this broker")
@click.option("--max-transaction-timeout", "max_timeout_min", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
              show_default=True, help="minutes (the cluster's transaction.max.timeout.ms): older open "
              "transactions are candidates")
@format_option
@kafka_target_options
def find_hanging_command(topic: str | None, partition: int | None, broker_id: int | None, max_timeout_min: int,
                         output_format: str, target: Target) -> None:
    """Open transactions older than the maximum transaction timeout that no coordinator will
    finish (unknown producer, or a transaction that does not list the partition)."""
    emit(find_hanging(target, broker_id, topic, partition, max_timeout_min), HANGING_COLUMNS, output_format)


@command.command("abort")
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--start-offset", type=int, default=None, help="the first offset of the transaction to abort")
@click.option("--producer-id", type=int, default=None)
@click.option("--producer-epoch", type=int, default=None)
@click.option("--coordinator-epoch", type=int, default=None)
@format_option
@kafka_target_options
def abort_command(topic: str, partition: int, start_offset: int | None, producer_id: int | None,
                  producer_epoch: int | None, coordinator_epoch: int | None, output_format: str,
                  target: Target) -> None:
    """Abort a hanging transaction on one partition: its ABORT marker, written by the partition's
    leader (needs CLUSTER_ACTION or ALTER on the cluster). Name it by --start-offset, or by
    --producer-id, --producer-epoch and --coordinator-epoch."""
    if start_offset is not None:
        if producer_id is not None:
            raise AdminError("give --start-offset or --producer-id, not both")
        done = abort_at_offset(target, topic, partition, start_offset)
    elif producer_id is None:
        raise AdminError("name the transaction with --start-offset, or with --producer-id, --producer-epoch "
                         "and --coordinator-epoch")
    elif producer_epoch is None or coordinator_epoch is None:
        raise AdminError("--producer-id needs --producer-epoch and --coordinator-epoch")
    else:
        done = abort_transaction(target, topic, partition, producer_id, producer_epoch, coordinator_epoch)
    emit([done], ["topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch", "leader"],
         output_format)
