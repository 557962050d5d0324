#!/usr/bin/env python3
"""Break Roost on purpose, one claim at a time, and show that the tests of that claim fail.

Issue 12 asks that each test added to prove a README claim is shown, once, to fail against a
deliberately broken build. This script is that demonstration, bounded and repeatable:

- It exports HEAD (`git archive`, tracked files only) into a temporary directory: the tree.
- For each named mutation (an exact snippet of a file replaced by another), it runs the mutation's
  tests on the tree unchanged (they must all pass), then with the mutation applied (each of them
  must fail), then puts the file back. One mutation at a time.
- Tests run with this checkout's virtualenv python, cwd in the tree, and PYTHONPATH naming the
  tree's `src` first, with the flags `make test` uses (`--require-referees`). Processes the tests
  start (`python -m roost.cli.main`, Raft members, Spark's Python workers) inherit PYTHONPATH.
- A canary proves which code ran: the tree's `roost/__init__.py` gets a few lines that, when
  ROOST_BREAK_CANARY names a file, append the importing process's pid, `roost.__file__` and
  command line to it. After each run every entry must point into the tree, and each process kind a mutation
  names (`must_load`, e.g. the broker started by the test) must have imported it there.
- The snippet to replace must occur exactly once, so that a refactor makes this script fail loudly
  instead of passing with a mutation that no longer applies.

It prints a table (mutation, tests, unmutated result, mutated result) and then, per mutated
test, the first line of its failure. Exit status 0 only if every unmutated run passed and every
test of every mutated run failed.

    .venv/bin/python scripts/break_claims.py             # everything (about 7 minutes on 2 cores)
    .venv/bin/python scripts/break_claims.py --list      # the mutations, and whether each applies
    .venv/bin/python scripts/break_claims.py --only idempotence-off --only keeper-force-sync-ignored
    .venv/bin/python scripts/break_claims.py --skip-spark

Not part of the pytest suite: it runs each test set twice and takes long. Only loopback is used
(the tests' own rule). Every subprocess has a timeout; on a timeout its process group is killed,
then any process still carrying this run's canary variable in its environment (processes the
tests started in their own sessions), by pid. The tree is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CANARY_ENV = "ROOST_BREAK_CANARY"
REPORT_ENV = "ROOST_BREAK_REPORT"
PYTEST_FLAGS = ("--require-referees", "-p", "no:cacheprovider", "-q", "-p", "break_claims_report")
GIT_TIMEOUT_S = 120
KILL_GRACE_S = 15
MESSAGE_CHARS = 240  # of a failure's first line, in the report

# Appended to the tree's src/roost/__init__.py (both runs: it changes nothing unless the variable is set).
CANARY = '''

def _break_claims_canary() -> None:  # added by scripts/break_claims.py, never committed
    import os
    target = os.environ.get("ROOST_BREAK_CANARY")
    if target:
        # The command line as the kernel has it (sys.argv is still ["-m", ...] while `python -m
        # roost.cli.main` imports the package).
        with open("/proc/self/cmdline", "rb") as handle:
            command = handle.read().replace(b"\\0", b" ").decode(errors="replace").strip()
        line = "\\t".join([str(os.getpid()), __file__, command[:300].replace("\\n", " ")])
        with open(target, "a") as handle:
            handle.write(line + "\\n")


_break_claims_canary()
'''

# A pytest plugin (loaded with -p from a directory on PYTHONPATH): each test's outcome and the
# first line of its failure, as JSON, to the file named by ROOST_BREAK_REPORT.
REPORT_PLUGIN = '''
import json
import os

_results = {}


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"setup": None, "call": None, "teardown": None, "message": ""})
    entry[report.when] = report.outcome
    if report.failed and not entry["message"]:
        crash = getattr(report.longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(report.longrepr)
        entry["message"] = f"{report.when}: " + " ".join(text.split())[:300]


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["ROOST_BREAK_REPORT"], "w") as handle:
        json.dump({"exitstatus": int(exitstatus), "tests": _results}, handle)
'''


@dataclass(frozen=True)
class Edit:
    path: str  # relative to the repository root
    old: str  # must occur exactly once in the file
    new: str


@dataclass(frozen=True)
class Mutation:
    name: str
    proves: str  # the claim the tests stand for
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]  # pytest node ids; every test they select must fail under the mutation
    # Substrings of the argv of processes that must have imported roost from the tree (beyond
    # pytest itself): where the mutated code runs.
    must_load: tuple[str, ...] = ()
    spark: bool = False
    timeout_s: float = 900.0


def edit(path: str, old: str, new: str) -> Edit:
    return Edit(path, old, new)


BROKER = "-m roost.cli.main"
PYTEST = "-m pytest"  # the test process itself
SPARK_WORKER = "pyspark"
APPEND_DOOR = "tests/broker/test_append_door.py::"
LINK_APPEND = "tests/link/test_mirror_append.py::"
LINK_CORE = "tests/link/test_core.py::"
LINK_CLUSTER = "tests/link/test_link_cluster.py::"
CONSOLE_SECURITY = "tests/console/test_console_security.py::"
CONSUMER_CORE = "tests/broker/test_consumer_group_core.py::"
MIGRATION_CORE = "tests/broker/test_group_migration_core.py::"
SHARE_E2E = "tests/share/test_share_consumer_e2e.py::"
SHARE_WIRE = "tests/share/test_share_group_wire.py::"
SHARE_ADMIN = "tests/share/test_share_group_admin.py::"
FSYNC_BEFORE_ACK = ("tests/broker/test_fsync_before_ack.py::"
                    "test_broker_setting_fsyncs_every_produce_and_offset_commit_before_answering",
                    "tests/broker/test_fsync_before_ack.py::"
                    "test_topic_setting_fsyncs_before_answering_and_the_check_sees_when_it_is_off")
CORRUPTION = "tests/log/test_corruption.py::"
REPAIR_PLAN = "tests/broker/test_replica_repair_plan.py::"
REPAIR_CLUSTER = "tests/cluster/test_replica_repair.py::"
FULL_DISK = "tests/broker/test_full_disk.py::"
FAILING_FSYNC = "tests/broker/test_failing_fsync.py::"
FOLLOWER_FSYNC = ("tests/cluster/test_follower_fsync.py::test_a_follower_fsyncs_before_its_next_fetch_tells_the_leader",)
RAFT_STRACE = ("tests/raft/test_fsync_order.py::"
               "test_acknowledged_only_after_durable_on_the_proposer_a_majority_and_each_acking_follower")
SINK = "tests/spark/test_sink.py::"
READ_COMMITTED = "tests/broker/test_read_committed.py::"
TXN_CORE = "tests/broker/test_txn_core.py::"
TRANSACTIONS = "tests/broker/test_transactions.py::"
TXN_SERVICE = "tests/broker/test_txn_service.py::"
CLEANER_TXN = "tests/log/test_cleaner_transactions.py::"
CLEANER_TXN_RANDOM = CLEANER_TXN + "test_random_histories_keep_the_read_committed_view"

# The fault-injection harness (roost.testing.faults): real processes in network namespaces under
# kill -9, pauses, partitions and power cuts, the history checked (issue 23).
FAULT_RUN = "tests/faults/test_fault_run.py::"
KEEPER_FAULT_RUN = (FAULT_RUN + "test_a_keeper_ensemble_under_every_fault_stays_linearizable",)
ABUSE = "tests/hostile/test_abusive_clients.py::"
KEEPER_ABUSE = "tests/hostile/test_abusive_keeper_clients.py::"
TLS_ABUSE = "tests/hostile/test_abusive_tls_clients.py::"
CONSOLE_ABUSE = "tests/hostile/test_abusive_console_clients.py::"
BROKER_FAULT_RUN = (FAULT_RUN + "test_a_broker_cluster_under_every_fault_loses_duplicates_and_reorders_nothing",)
SHARE_FAULT_RUN = ("tests/faults/test_share_fault_run.py::"
                   "test_share_acknowledgements_survive_kills_of_the_data_leader_and_the_share_coordinator",)
SHARE_SIM = ("tests/sim/test_share_sim.py::test_share_partitions_through_leader_and_coordinator_moves",)

REPLICATION_CORE = "tests/broker/test_replication_core.py::"
FUZZ_CORPUS = "tests/fuzz/test_fuzz.py::"
BALANCE = "tests/broker/balance/test_planner.py::"
BALANCE_EXECUTOR = "tests/broker/balance/test_executor.py::"
BALANCE_CLUSTER = "tests/broker/balance/test_balance_cluster.py::"
BALANCE_AUTO = "tests/broker/balance/test_autocore.py::"
BALANCE_VIEW = "tests/console/test_console_balance_view.py::"
BALANCE_AUTO_CLUSTER = "tests/broker/balance/test_auto_cluster.py::"
SHARE_PARTITION = "tests/broker/test_share_partition.py::"
SHARE_PROPERTIES = ("tests/broker/test_share_partition_properties.py::"
                    "test_random_histories_keep_the_share_partition_promises")
SHARE_COORDINATOR = "tests/cluster/test_share_coordinator.py::"
QUOTAS = "tests/quotas/test_client_quotas.py::"
SIM_FOUND = "tests/sim/test_replication_sim.py::test_a_seed_that_found_a_bug_passes_on_the_real_code"


# The schema registry (issue 34): its compatibility rules and ids unique across writers.
AVRO_RULES = "tests/registry/test_compat_avro.py::"
JSON_RULES = "tests/registry/test_compat_json.py::"
PROTO_RULES = "tests/registry/test_compat_protobuf.py::"
REGISTRY_API = "tests/registry/test_registry_api.py::"
REGISTRY_STORE = "tests/registry/test_store.py::"
REGISTRY_CLUSTER = "tests/registry/test_registry_cluster.py::"
WRITE_BUDGET = "tests/registry/test_write_budget.py::"
MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "topic-compression-type-ignored",
        "a topic's compression.type is the codec its batches are stored in (Kafka recompresses on append)",
        (edit("src/roost/broker/replica/recompression.py",
              "    if codec is None or all(header.compression == codec for _, header in batches):\n",
              "    if True:  # MUTATION: batches are stored as the producer sent them\n"),),
        ("tests/broker/test_topic_compression.py::test_batches_are_stored_in_the_topics_codec_and_read_back_intact"
         "[gzip-lz4-gzip]",
         "tests/broker/test_topic_compression.py::test_the_topics_level_is_used"),
        must_load=(BROKER,)),
    Mutation(
        "timestamp-bounds-ignored",
        "a CreateTime record outside message.timestamp.before/after.max.ms is refused and never appended",
        (edit("src/roost/broker/replica/timestamps.py",
              "    check_bounds = create_time_topic and not bounds.unbounded\n",
              "    check_bounds = False  # MUTATION: every timestamp taken\n"),),
        ("tests/broker/test_record_timestamps.py::test_records_outside_the_topics_bounds_are_refused_and_not_stored",
         "tests/referees/test_kafka_differential_data.py::test_produced_timestamps_are_bounded_as_kafka_bounds_them"),
        must_load=(BROKER,)),
    Mutation(
        "min-compaction-lag-ignored",
        "a compacted record younger than min.compaction.lag.ms is not compacted away",
        (edit("src/roost/log/cleaner.py",
              "        if after.base_offset > limit or young:\n",
              "        if after.base_offset > limit:  # MUTATION: the lag ignored\n"),),
        ("tests/log/test_cleaner.py::test_min_compaction_lag_keeps_young_segments_uncleaned",
         "tests/broker/test_compaction.py::test_min_compaction_lag_keeps_recent_records_as_written"),
        must_load=(BROKER,)),
    Mutation(
        "registry-avro-missing-default-accepted",
        "a new Avro reader field needs a default to read old data (BACKWARD refuses one without)",
        (edit("src/roost/registry/compat_avro.py", "                if \"default\" not in r_field:\n",
              "                if False:  # MUTATION: a missing default is accepted\n"),),
        (AVRO_RULES + "test_rule[field added without a default: new cannot read old]",
         AVRO_RULES + "test_levels[BACKWARD-2-refused]", AVRO_RULES + "test_the_answer_names_where",
         REGISTRY_API + "test_compatibility_endpoint")),
    Mutation(
        "registry-avro-demotion-accepted",
        "Avro promotes only int->long->float->double and string<->bytes, never back",
        (edit("src/roost/registry/compat_avro.py",
              "            if w_type in PROMOTIONS and r_type in PROMOTIONS[w_type]:\n",
              "            if w_type in PROMOTIONS or r_type in PROMOTIONS:  # MUTATION: any numeric change\n"),),
        (AVRO_RULES + "test_rule[no demotion long to int]", AVRO_RULES + "test_rule[no demotion double to float]",
         AVRO_RULES + "test_rule[no int read as string]", AVRO_RULES + "test_levels[BACKWARD_TRANSITIVE-10-refused]")),
    Mutation(
        "registry-transitive-checks-only-the-latest",
        "the _TRANSITIVE levels check every earlier version, not only the latest",
        (edit("src/roost/registry/compatibility.py",
              "    against = earlier if level.endswith(\"_TRANSITIVE\") else earlier[-1:]\n",
              "    against = earlier[-1:]  # MUTATION: transitive like the plain level\n"),),
        (AVRO_RULES + "test_levels[BACKWARD_TRANSITIVE-10-refused]", AVRO_RULES + "test_levels[FORWARD_TRANSITIVE-12-refused]",
         AVRO_RULES + "test_levels[FULL_TRANSITIVE-14-refused]")),
    Mutation(
        "registry-full-skips-forward",
        "FULL checks both directions: the old schema must also read the new one's data",
        (edit("src/roost/registry/compatibility.py",
              "    forward = level.startswith((\"FORWARD\", \"FULL\"))\n",
              "    forward = level.startswith(\"FORWARD\")  # MUTATION: FULL is only BACKWARD\n"),),
        (AVRO_RULES + "test_levels[FULL-8-refused]", AVRO_RULES + "test_levels[FULL_TRANSITIVE-14-refused]",
         JSON_RULES + "test_backward_and_forward_swap_roles")),
    Mutation(
        "registry-json-open-model-accepts-typed-property",
        "JSON Schema (STRICT): a typed property added to an open content model is incompatible",
        (edit("src/roost/registry/compat_json.py",
              "                if after[name] not in ({}, True):\n",
              "                if False:  # MUTATION: any property may be added to an open model\n"),),
        (JSON_RULES + "test_rule[typed property added to an open model]",)),
    Mutation(
        "registry-protobuf-scalar-groups-ignored",
        "Protobuf: a scalar may change only within its wire-compatible group",
        (edit("src/roost/registry/compat_protobuf.py",
              "            if update.type not in _group(original.type):\n",
              "            if False:  # MUTATION: any scalar reads any other\n"),),
        (PROTO_RULES + "test_scalar_groups_both_ways[5-17-False]", PROTO_RULES + "test_scalar_groups_both_ways[5-7-False]",
         PROTO_RULES + "test_scalar_groups_both_ways[2-1-False]", PROTO_RULES + "test_scalar_groups_both_ways[9-5-False]",
         PROTO_RULES + "test_scalar_groups_both_ways[7-6-False]")),
    Mutation(
        "registry-id-rebound-across-writers",
        "a schema id stays bound to one schema across writers and failovers: the replay refuses a record "
        "that rebinds it, so a writer with a stale view retries with a fresh id",
        (edit("src/roost/registry/store.py",
              "        if bound is not None and not _same_schema(bound, record):\n",
              "        if False:  # MUTATION: an id may be rebound\n"),),
        (REGISTRY_STORE + "test_a_writer_with_a_stale_view_does_not_reuse_an_id",
         REGISTRY_STORE + "test_an_id_rebound_to_another_schema_is_refused_on_replay")),
    Mutation(
        "registry-watermark-leader-not-refreshed",
        "after kill -9 of the broker holding the registry's writer and the _schemas leader, registrations "
        "resume within the write budget: the watermark client relearns the partition's leader",
        (edit("src/roost/registry/kafka_log.py",
              "                    self.watermarks.list_topics(self.topic, timeout=max(0.5, min(WATERMARK_TIMEOUT_S, left)))\n",
              "                    pass  # MUTATION: the dead leader stays in this client's metadata\n"),),
        (REGISTRY_CLUSTER + "test_kill_9_of_the_writers_broker_loses_no_registered_schema_and_keeps_ids_unique",),
        must_load=(BROKER,)),
    Mutation(
        "registry-store-failure-bare-500",
        "a store client's failure answers Confluent's 50001 as JSON, not aiohttp's bare 500 text",
        (edit("src/roost/registry/api.py",
              "        except Exception as error:  # a store client's failure (a KafkaException): Confluent's code, not a bare 500\n",
              "        except ZeroDivisionError as error:  # MUTATION: other failures escape to aiohttp\n"),),
        (WRITE_BUDGET + "test_a_store_failure_answers_50001_as_json_and_the_server_keeps_serving",)),
    Mutation(
        "registry-forward-gives-up-on-a-dead-writer",
        "a write forwarded to a writer that refuses connections waits, within its budget, for the next writer",
        (edit("src/roost/registry/api.py",
              "                if loop.time() + ELECTION_POLL_S >= deadline:\n",
              "                if True:  # MUTATION: the first refused connection ends the write\n"),),
        (WRITE_BUDGET + "test_a_forward_to_a_writer_that_refuses_connections_waits_for_the_next_writer",)),
    Mutation(
        "registry-forwarded-budget-ignored",
        "a forwarded write keeps the forwarder's budget: the writer answers 50002 when it runs out",
        (edit("src/roost/registry/api.py",
              "                budget = min(budget, max(0.0, int(given) / 1000))\n",
              "                budget = budget  # MUTATION: a budget of its own\n"),),
        (WRITE_BUDGET + "test_a_stalled_store_answers_50002_within_the_budget_a_forwarder_passed_on",)),
    Mutation(
        "registry-stop-without-deadline",
        "the registry's Kafka side stops within its deadline even when a client's close hangs",
        (edit("src/roost/registry/kafka_log.py",
              "        await asyncio.to_thread(closing.join, deadline_s)\n",
              "        await asyncio.to_thread(closing.join)  # MUTATION: waits for whatever hangs\n"),),
        (WRITE_BUDGET + "test_the_kafka_side_stop_gives_up_at_its_deadline",)),
    Mutation(
        "broker-fsync-skipped",
        "the broker fsyncs before acknowledging (log.flush.interval.messages=1, topic flush.messages=1)",
        (edit("src/roost/storage/flusher.py", "        os.fsync(fd)\n", "        pass  # MUTATION: no fsync\n"),),
        FSYNC_BEFORE_ACK, must_load=(BROKER,)),
    Mutation(
        "broker-failed-fsync-ignored",
        "after a failed fsync the log directory goes offline and nothing more is acknowledged from it "
        "(issue 35): here the group committer counts a failed fsync as done",
        (edit("src/roost/storage/flusher.py",
              """\
                except OSError as failure:
                    error = failure
""",
              """\
                except OSError:
                    pass  # MUTATION: a failed fsync counts as done
"""),),
        (FAILING_FSYNC + "test_after_a_failed_fsync_nothing_more_is_acknowledged_and_nothing_acknowledged_is_lost",),
        must_load=(BROKER,)),
    Mutation(
        "keeper-failed-fsync-ignored",
        "after a failed fsync of its Raft log the keeper stops taking writes and acknowledges none "
        "(issue 35): here the failed fdatasync is swallowed",
        (edit("src/roost/raft/storage.py", "            os.fdatasync(self._fd)\n",
              "            try:\n                os.fdatasync(self._fd)\n            except OSError:\n"
              "                pass  # MUTATION: a failed fsync counts as done\n"),),
        ("tests/keeper/test_failing_fsync.py::"
         "test_after_a_failed_fsync_the_keeper_acknowledges_no_write_and_loses_none",),
        must_load=(BROKER,)),
    Mutation(
        "full-disk-directory-stays-online",
        "an append that fails with ENOSPC takes its log directory offline, as any I/O error does (issue 35): "
        "here a full disk is not counted as a failure (each append is refused, the directory stays online)",
        (edit("src/roost/storage/directories.py",
              "        if not log_dir.online:\n            return\n        log_dir.error =",
              "        if not log_dir.online or getattr(error, \"errno\", None) == 28:  # MUTATION: ENOSPC\n"
              "            return\n        log_dir.error ="),),
        (FULL_DISK + "test_a_full_log_directory_goes_offline_loses_nothing_and_serves_again_after_space_and_a_restart",),
        must_load=(BROKER,)),
    Mutation(
        "free-space-warning-silent",
        "/metrics flags a log directory or keeper data directory before its disk is full (issue 35)",
        (edit("src/roost/metrics/disk_space.py", "    return total > 0 and free < total * warn_ratio\n",
              "    return False  # MUTATION: never low\n"),),
        (FULL_DISK + "test_a_full_log_directory_goes_offline_loses_nothing_and_serves_again_after_space_and_a_restart",
         "tests/keeper/test_full_disk.py::"
         "test_a_full_disk_stops_the_keepers_writes_not_its_reads_and_nothing_acknowledged_is_lost"),
        must_load=(BROKER,)),
    Mutation(
        "read-crc-unchecked",
        "a batch read back from disk is served only if its header and CRC-32C check (issue 35): here "
        "stored batches are served unchecked",
        (edit("src/roost/log/log_reads.py", "        good, next_good, damage = checked_prefix(data)\n",
              "        good, next_good, damage = len(data), next_offset, None  # MUTATION: no CRC check\n"),),
        (CORRUPTION + "test_a_damaged_segment_never_serves_a_changed_byte[middle-batch-flip-after-clean-shutdown]",
         CORRUPTION + "test_a_damaged_segment_never_serves_a_changed_byte[first-batch-flip-after-clean-shutdown]",
         "tests/broker/test_corrupt_segment.py::"
         "test_a_flipped_bit_in_a_segment_is_never_served_and_stops_its_partition"),
        must_load=(BROKER,)),
    Mutation(
        "repair-truncates-sole-copy",
        "a damaged replica that may hold the only copy of its records (RF 1, the only in-sync replica, damage "
        "at or above the high watermark) is refused, nothing cut (issue 35): here it cuts its log anyway",
        (edit("src/roost/broker/replica/repair.py", "        return Plan(Verdict.REFUSE, refused)\n",
              "        return Plan(Verdict.TRUNCATE, refused, damage.offset)  # MUTATION: cut the sole copy\n"),),
        (REPAIR_PLAN + "test_replication_factor_one_is_refused_whatever_the_state",
         REPAIR_PLAN + "test_the_only_in_sync_replica_of_three_is_refused",
         REPAIR_PLAN + "test_damage_at_or_above_the_high_watermark_is_refused",
         REPAIR_CLUSTER + "test_a_damaged_sole_replica_is_refused_naming_file_and_offset_and_nothing_is_cut"),
        must_load=(BROKER,)),
    Mutation(
        "repair-while-in-isr",
        "a damaged replica cuts its log only once it is out of the ISR (issue 35): here it cuts while still "
        "counted in-sync, so it could be elected, or count for acks=all, lacking the records it cut",
        (edit("src/roost/broker/replica/repair.py", "    if broker_id in frozenset(isr):\n",
              "    if False:  # MUTATION: cut while still in the ISR\n"),),
        (REPAIR_PLAN + "test_it_waits_while_it_is_still_counted_in_the_isr",)),
    Mutation(
        "damaged-replica-kept-in-isr",
        "a replica found damaged leaves the ISR before it cuts and refetches, and rejoins only as a follower "
        "that reached the leader's high watermark (issue 35): here the controller keeps it in the ISR when it "
        "moves the leadership away or the replica offline (the replica's own check then refuses to cut: it never "
        "repairs)",
        (edit("src/roost/broker/controller/core.py",
              "            new_isr = tuple(b for b in current.isr if self._serves(tp, b)) or (leader,)\n",
              "            new_isr = tuple(current.isr)  # MUTATION: the offline replica stays in the ISR\n"),
         edit("src/roost/broker/controller/core.py",
              "            if broker in self.states[tp].state.isr:\n                self._remove_from_isr(tp, broker)\n",
              "            if False:  # MUTATION: nor is it taken out as a follower\n"
              "                self._remove_from_isr(tp, broker)\n")),
        (REPAIR_CLUSTER + "test_a_damaged_replica_is_never_served_cuts_its_log_and_refetches_from_the_new_leader",),
        must_load=(BROKER,)),
    Mutation(
        "damaged-leader-epochs-not-rebuilt",
        "a damaged leader-epoch checkpoint is rebuilt from the batches at start-up (issue 35): here only a "
        "missing one is, a damaged one leaves the cache empty",
        (edit("src/roost/log/log_loading.py",
              "        if self.log_end_offset == self.log_start_offset or LeaderEpochCache.readable(self.directory):\n",
              "        if self.log_end_offset == self.log_start_offset or (self.directory / \"leader-epoch-checkpoint\")"
              ".exists():  # MUTATION\n"),),
        tuple(CORRUPTION + f"test_a_damaged_derived_file_is_rebuilt_and_every_batch_is_served[leader-epochs-{how}-{crash}]"
              for crash in ("after-clean-shutdown", "after-crash") for how in ("flip", "zero", "truncate"))),
    Mutation(
        "broker-acks-before-fsync",
        "the acknowledgement waits for the fsync: here the group committer releases the waiting "
        "answers, then fsyncs",
        (edit("src/roost/storage/flusher.py",
              """\
        self._in_flight = True
        self._rounds.put(""",
              """\
        self._in_flight = True
        for _, _, early in entries:  # MUTATION: the answers go before the fsync
            for future in early:
                if not future.done():
                    future.set_result(None)
        self._rounds.put("""),),
        FSYNC_BEFORE_ACK, must_load=(BROKER,)),
    Mutation(
        "produce-does-not-wait-for-fsync",
        "the produce answer waits for its fsync: here the append door starts the fsync and answers at once",
        (edit("src/roost/broker/replica/manager.py",
              "                durable.append(outcome.durable)\n",
              "                pass  # MUTATION: answer without waiting for the fsync\n"),),
        (FSYNC_BEFORE_ACK[0],), must_load=(BROKER,)),
    Mutation(
        "roll-without-fsync",
        "a roll makes the old segment durable before the new one takes a byte (no hole below the log "
        "end after a power cut); here the roll fsyncs only the old segment's indexes",
        (edit("src/roost/log/log_writes.py", "        if old.size:\n            os.fsync(old.log_fd)\n", ""),),
        ("tests/broker/test_fsync_before_ack.py::"
         "test_a_roll_makes_the_old_segment_durable_before_the_new_one_takes_a_byte",),
        must_load=(BROKER,)),
    Mutation(
        "follower-fsync-skipped",
        "a follower fsyncs what it replicated (flush.messages=1) before its next Fetch reports it to the leader",
        (edit("src/roost/broker/replica/fetcher.py", "                sync = True\n",
              "                pass  # MUTATION: the follower never asks for an fsync\n"),),
        FOLLOWER_FSYNC, must_load=(BROKER,)),
    Mutation(
        "follower-fetches-before-fsync",
        "the follower waits for those fsyncs before fetching again (here it starts them and fetches on)",
        (edit("src/roost/broker/activity/effects.py",
              "            outcomes = await asyncio.gather(*(self._committer.request(plog) for plog in effect.logs),\n"
              "                                            return_exceptions=True)\n",
              "            outcomes = [None for _ in [self._committer.request(plog) for plog in effect.logs]]"
              "  # MUTATION: not awaited\n"),),
        FOLLOWER_FSYNC, must_load=(BROKER,)),
    Mutation(
        "keeper-force-sync-ignored",
        "the keeper (forceSync, the default) replies to a write only after its log entry is fsynced",
        (edit("src/roost/keeper/server.py", "ReplicatorConfig(fsync=config.force_sync,",
              "ReplicatorConfig(fsync=False,"),),
        ("tests/keeper/test_fsync_before_reply.py::test_standalone_replies_after_the_fsync",
         "tests/keeper/test_fsync_before_reply.py::"
         "test_ensemble_replies_after_a_majority_and_the_replying_member_fsynced"),
        must_load=(BROKER,)),
    Mutation(
        "keeper-acl-always-allows",
        "the keeper checks znode ACLs on every operation: here every check passes",
        (edit("src/roost/keeper/acl.py", "    if not acls:\n        return True\n",
              "    return True  # MUTATION: every ACL check passes\n"),),
        ("tests/keeper/test_security.py::test_a_stranger_is_refused_every_operation_as_by_zookeeper",
         "tests/keeper/test_security.py::test_digest_and_the_super_digest"),
        must_load=(BROKER,)),
    Mutation(
        "keeper-sasl-proof-not-verified",
        "the keeper's SASL DIGEST-MD5 verifies the client's proof of its password: here any proof "
        "from a known user passes",
        (edit("src/roost/wire/zk/digest_md5.py",
              'if not hmac.compare_digest(expected.encode(), d["response"].encode()) or password is None:',
              "if password is None:  # MUTATION: the proof is not checked"),),
        ("tests/keeper/test_security.py::"
         "test_a_wrong_sasl_password_or_user_is_refused_and_the_keeper_serves_on[kafka-guessed]",
         "tests/wire_zk/test_digest_md5.py::test_a_wrong_password_or_unknown_user_fails_alike[kafka-wrong]"),
        must_load=(BROKER,)),
    Mutation(
        "brokers-znodes-left-open",
        "with zookeeper.set.acl the brokers create their znodes with Kafka's secure ACLs (creator all, "
        "world read): here open to all, on the keepers and on a real ZooKeeper",
        (edit("src/roost/broker/zk/security.py", "    return CREATOR_ALL_ACL + READ_ACL_UNSAFE\n",
              "    return OPEN_ACL_UNSAFE  # MUTATION: anyone may change the brokers' znodes\n"),),
        ("tests/cluster/test_zk_set_acl.py::test_a_stranger_cannot_change_the_brokers_znodes",),
        must_load=(BROKER,)),
    Mutation(
        "keeper-tls-client-auth-ignored",
        "the keeper's TLS port with ssl.clientAuth = need refuses a client without a certificate "
        "signed by its trust store: here client certificates are not asked for",
        (edit("src/roost/keeper/tls.py", '_VERIFY = {"need": ssl.CERT_REQUIRED,',
              '_VERIFY = {"need": ssl.CERT_NONE,  # MUTATION: client certificates ignored\n'
              '           "ignored": ssl.CERT_REQUIRED,'),),
        ("tests/keeper/test_tls.py::test_refusals_and_the_keeper_serves_on",
         "tests/keeper/test_tls.py::test_kazoo_over_mutual_tls_with_x509_acls"),
        must_load=(BROKER,)),
    Mutation(
        "raft-log-fsync-skipped",
        "a Raft member acknowledges (and a follower promises an entry) only after fsyncing its log",
        (edit("src/roost/raft/storage.py", "            os.fdatasync(self._fd)\n",
              "            pass  # MUTATION: no fdatasync\n"),),
        (RAFT_STRACE,), must_load=("-m tests.raft.member_proc",)),
    Mutation(
        "raft-append-resp-before-fsync",
        "a Raft follower's APPEND_RESP leaves after its fsync (here it leaves with the early messages)",
        (edit("src/roost/raft/core.py",
              "        if self.role is Role.LEADER and m.type in (",
              "        if m.type is MessageType.APPEND_RESP or self.role is Role.LEADER and m.type in ("),),
        ("tests/sim/test_raft_sim.py::test_three_members_survive_chaos[1]",
         "tests/sim/test_raft_sim.py::test_five_members_survive_chaos[101]", RAFT_STRACE),
        must_load=(PYTEST, "-m tests.raft.member_proc")),
    Mutation(
        "raft-gone-signal-skips-pre-vote-and-leases",
        "a follower told its leader is gone (a refused peer connection) campaigns early but still with a "
        "pre-vote that members hearing the leader refuse: here it campaigns at once as in a leader "
        "transfer (no pre-vote, leases ignored), so a false signal deposes a live leader",
        (edit("src/roost/raft/core.py", "        self._hastened = True\n",
              "        self._hastened = True\n        self.campaign(transfer=True)  # MUTATION: no pre-vote, no lease\n"),),
        ("tests/raft/test_core.py::test_a_false_gone_signal_neither_disrupts_a_live_leader_nor_sticks",),
        must_load=(PYTEST,)),
    Mutation(
        "keeper-follower-forwards-no-touches",
        "a session whose member died lives on at the member it moved to: here a follower never forwards "
        "its clients' touches to the leader, so the moved session expires",
        (edit("src/roost/keeper/core.py", "            self._touched.add(session_id)\n",
              "            pass  # MUTATION: the leader never hears of this session\n"),),
        ("tests/keeper/test_member_death_sessions.py::"
         "test_client_moves_off_a_killed_member_with_session_ephemeral_and_watches[follower]",),
        must_load=(PYTEST, BROKER)),
    Mutation(
        "idempotence-off",
        "an idempotent producer's retried batch is written once (confluent-kafka, kafka-python, raw wire)",
        (edit("src/roost/broker/replica/append.py",
              "    verdict = partition.producer_verdict(first)\n",
              "    verdict = OK  # MUTATION: every sequence accepted\n"),),
        ("tests/broker/test_idempotence.py::"
         "test_an_idempotent_producer_retrying_a_batch_whose_answer_was_lost_writes_it_once",
         "tests/broker/test_idempotence.py::test_a_batch_resent_on_the_wire_is_not_appended_twice"),
        must_load=(BROKER,)),
    Mutation(
        "acks-all-min-isr-not-checked",
        "acks=all with an ISR below min.insync.replicas is refused before the append "
        "(NOT_ENOUGH_REPLICAS), for produce and offset commits alike: the append door checks it once",
        (edit("src/roost/broker/replica/manager.py", "        if acks == ACKS_ALL and partition.isr_below_min():\n",
              "        if False:  # MUTATION: min.insync.replicas not checked\n"),),
        (APPEND_DOOR + "test_acks_all_below_min_insync_is_refused_before_the_append_for_produce_and_commit",
         "tests/broker/test_group_service.py::test_too_few_in_sync_replicas_answer_coordinator_not_available"),
        must_load=(PYTEST,)),
    Mutation(
        "acks-all-answered-before-the-hw",
        "acks=all is answered only once the high watermark covers the records, for produce and offset "
        "commits alike (here the append door never parks them in the purgatory)",
        (edit("src/roost/broker/replica/manager.py",
              "            if acks == ACKS_ALL and outcome.error == ErrorCode.NONE \\\n",
              "            if False and outcome.error == ErrorCode.NONE \\\n"),),
        (APPEND_DOOR + "test_acks_all_produce_is_answered_once_the_high_watermark_covers_it",
         "tests/broker/test_group_service.py::"
         "test_a_commit_is_answered_and_visible_only_once_the_high_watermark_covers_it"),
        must_load=(PYTEST,)),
    Mutation(
        "acks-all-shrunk-isr-after-append-ignored",
        "an acks=all append the high watermark covers while the ISR is below min.insync.replicas is "
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND (the purgatory's verdict)",
        (edit("src/roost/broker/replica/purgatory.py", "    if partition.committed_below_min_isr():\n",
              "    if False:  # MUTATION: the ISR is not looked at after the append\n"),),
        (APPEND_DOOR + "test_acks_all_produce_times_out_or_learns_the_isr_shrank_after_the_append",
         "tests/broker/test_group_service.py::test_too_few_in_sync_replicas_answer_coordinator_not_available"),
        must_load=(PYTEST,)),
    Mutation(
        "acks-all-wait-dropped-on-same-leader-new-epoch",
        "a new leader epoch of the same leader (an ISR change) keeps an acks=all wait: answering "
        "NOT_LEADER_OR_FOLLOWER for records that then commit makes librdkafka re-send them under a "
        "bumped epoch (duplicates found by the 30-minute fault run)",
        (edit("src/roost/broker/replica/purgatory.py",
              "    if partition.leader_epoch == entry.leader_epoch:\n        return True\n",
              "    if partition.leader_epoch != entry.leader_epoch:  # MUTATION: any new epoch fails the wait\n"
              "        return False\n    if partition.leader_epoch == entry.leader_epoch:\n        return True\n"),),
        (APPEND_DOOR + "test_a_new_epoch_of_the_same_leader_keeps_the_wait_and_acknowledges_the_records",),
        must_load=(PYTEST,)),
    Mutation(
        "peer-keeps-a-connection-closed-as-it-opened",
        "a broker's connection to a peer that closed as it opened is replaced by the next request "
        "(kept, it failed every later request: a controller never reached a healed broker again)",
        (edit("src/roost/broker/net/peer.py", "        if protocol.lost:\n            # Accepted",
              "        if False:  # MUTATION: adopt it anyway\n            # Accepted"),
         edit("src/roost/broker/net/peer.py", "            if protocol is self._protocol:\n                self._broken(",
              "            if False:  # MUTATION: keep it\n                self._broken(")),
        ("tests/broker/test_peer.py::test_a_connection_closed_as_it_opened_is_not_kept",),
        must_load=(PYTEST,)),
    # The reachability hint (metadata/reachability.py): Metadata does not name a leader this
    # broker has just seen go, and a live peer that ends connections quickly is not "gone".
    Mutation(
        "metadata-names-an-unreachable-leader",
        "a broker answers Metadata with no leader (LEADER_NOT_AVAILABLE) for a partition whose leader's endpoint "
        "it has just seen close and refuse, until the leader answers again",
        (edit("src/roost/broker/handlers/metadata.py",
              "    leader = info.leader if info.leader not in cache.unreachable else -1\n",
              "    leader = info.leader  # MUTATION: the hint ignored\n"),),
        ("tests/broker/test_reachability.py::test_a_leader_whose_endpoint_goes_away_is_answered_as_no_leader_until_it_is_back",),
        must_load=(PYTEST,)),
    Mutation(
        "reachability-counts-a-quick-close-as-gone",
        "a live peer that ends the watch's connections at once (a connection limit, a handshake timeout) is "
        "never answered as a missing leader",
        (edit("src/roost/broker/metadata/reachability.py",
              "    return Seen.GONE if held_s >= MIN_HOLD_S else Seen.REACHABLE\n",
              "    return Seen.GONE  # MUTATION: any end is a death\n"),),
        ("tests/broker/test_reachability.py::test_a_live_peer_that_ends_connections_at_once_is_never_counted_as_gone",),
        must_load=(PYTEST,)),
    Mutation(
        "delayed-produce-unwatches-a-waiting-partition",
        "a delayed produce keeps watching a partition while one of its entries there still waits",
        (edit("src/roost/broker/replica/purgatory.py", "            if id(partition) not in waiting_on:\n",
              "            if True:  # MUTATION: unwatched once any entry settles\n"),),
        (APPEND_DOOR + "test_acks_all_produce_is_answered_once_the_high_watermark_covers_it",),
        must_load=(PYTEST,)),
    Mutation(
        "spark-sink-dedup-never-runs",
        "the Spark sink's re-run of a task skips what an earlier attempt wrote (exactly once)",
        (edit("src/roost/spark/sink.py", "        if name in already:\n",
              "        if False:  # MUTATION: never skip what an earlier attempt wrote\n"),),
        (SINK + "test_a_task_rerun_after_a_partial_write_completes_the_batch_once",
         SINK + "test_a_query_that_fails_mid_batch_and_restarts_loses_and_duplicates_nothing"),
        must_load=(PYTEST, BROKER, SPARK_WORKER), spark=True, timeout_s=1500),
    Mutation(
        "spark-sink-txn-replay-rewrites",
        "the transactional Spark sink's replay of a batch an earlier run of the task committed writes nothing",
        (edit("src/roost/spark/sink.py", "        if task.committed_batches() > target.batch_id:\n",
              "        if False:  # MUTATION: never look at the committed progress\n"),),
        (SINK + "test_a_transactional_task_killed_mid_batch_is_never_seen_in_part_by_read_committed",),
        must_load=(PYTEST,), spark=True),
    Mutation(
        "spark-sink-txn-id-per-attempt",
        "the transactional Spark sink's next attempt of a task fences the one before (same transactional.id), "
        "whose open transaction is then aborted",
        (edit("src/roost/spark/sink_txn.py", "        self.id = transactional_id(sink_id, task)\n",
              "        self.id = transactional_id(sink_id, task) + f\"-{__import__('os').getpid()}\"  # MUTATION\n"),),
        (SINK + "test_a_transactional_task_killed_mid_batch_is_never_seen_in_part_by_read_committed",),
        must_load=(PYTEST,), spark=True),
    Mutation(
        "spark-sink-partitioner-not-murmur2",
        "the Spark sink puts a keyed row where the Java clients would (murmur2); here librdkafka's "
        "consistent_random (CRC32)",
        (edit("src/roost/spark/sink_io.py", '"partitioner": "murmur2_random",',
              '"partitioner": "consistent_random",'),),
        (SINK + "test_keys_are_partitioned_like_the_java_clients",),
        must_load=(BROKER, SPARK_WORKER), spark=True, timeout_s=1500),
    Mutation(
        "queued-max-requests-ignored",
        "queued.max.requests: a connection with that many requests in flight is not read further",
        (edit("src/roost/broker/net/connection.py",
              "should_pause = self._writing_paused or len(self._slots) >= self._limits.max_inflight_requests",
              "should_pause = self._writing_paused  # MUTATION: in-flight requests not counted"),),
        ("tests/broker/test_connection_limits.py::test_queued_max_requests_pauses_reading",),
        must_load=(BROKER,)),
    Mutation(
        "buffered-bytes-ignored",
        "connection.max.buffered.bytes: a connection whose answers pile up unsent is not read further",
        (edit("src/roost/broker/net/connection.py",
              "should_pause = self._writing_paused or len(self._slots) >= self._limits.max_inflight_requests",
              "should_pause = len(self._slots) >= self._limits.max_inflight_requests  # MUTATION"),),
        ("tests/broker/test_connection_limits.py::test_connection_max_buffered_bytes_pauses_reading",),
        must_load=(BROKER,)),
    Mutation(
        "paused-connection-handles-read-frames",
        "a paused connection does not handle frames already read in the same read (f19da45)",
        (edit("src/roost/broker/net/connection.py",
              "while waiting and not self._closed and not self._reading_paused:",
              "while waiting and not self._closed:  # MUTATION: pause ignored for frames already read"),),
        ("tests/broker/test_connection_limits.py",), must_load=(BROKER,)),
    # Abusive clients (docs/hostile-input.md, "Abusive clients").
    Mutation(
        "idle-timeout-ignored",
        "connections.max.idle.ms: a connection on which nothing moved for that long is closed "
        "(idle ones, and ones whose answers the client never takes)",
        (edit("src/roost/broker/net/deadlines.py", "    if limits.idle_s <= 0 or clock.waiting_on_broker:\n",
              "    if True:  # MUTATION: never idle\n"),),
        (ABUSE + "test_thousands_of_idle_connections_cost_little_and_are_closed_after_the_idle_timeout",
         ABUSE + "test_a_client_that_never_reads_costs_bounded_memory_and_is_closed_when_idle"),
        must_load=(BROKER,)),
    Mutation(
        "idle-timeout-counts-the-brokers-waits",
        "a connection waiting on the broker (a long-poll fetch) is not idle, however long the wait",
        (edit("src/roost/broker/net/deadlines.py", "    if limits.idle_s <= 0 or clock.waiting_on_broker:\n",
              "    if limits.idle_s <= 0:  # MUTATION: a wait on the broker counts as idling\n"),),
        (ABUSE + "test_a_connection_in_use_or_waiting_on_the_broker_is_not_idle",),
        must_load=(BROKER,)),
    Mutation(
        "receive-timeout-ignored",
        "request.receive.timeout.ms: a request still incomplete that long after its first byte closes "
        "the connection (slow-loris)",
        (edit("src/roost/broker/net/deadlines.py",
              "    if limits.receive_s <= 0 or clock.frame_started is None:\n",
              "    if True:  # MUTATION: a partial request may take forever\n"),),
        (ABUSE + "test_slow_loris_senders_are_cut_off_and_others_served",
         TLS_ABUSE + "test_a_request_trickled_after_the_handshake_is_cut_off_by_the_receive_timeout"),
        must_load=(BROKER,)),
    Mutation(
        "tls-handshake-timeout-ignored",
        "ssl.handshake.timeout.ms: a TLS handshake never begun, stalled in its ClientHello or not TLS at all "
        "is cut off that long after the connection opened",
        (edit("src/roost/broker/broker.py",
              "ssl_handshake_timeout=tls.handshake_timeout_s if tls else None)",
              "ssl_handshake_timeout=None)  # MUTATION: the loop's default (60 s)"),),
        (TLS_ABUSE + "test_handshakes_never_begun_stalled_or_not_tls_are_cut_off_and_others_served",),
        must_load=(BROKER,)),
    Mutation(
        "tls-given-up-handshakes-kept",
        "a TLS connection whose handshake the loop gave up gives back its place under max.connections",
        (edit("src/roost/broker/broker.py",
              "        if connection.made or connection not in self._connections:\n            return\n",
              "        if True:  # MUTATION: the loop said nothing, so it stays counted\n            return\n"),),
        (TLS_ABUSE + "test_given_up_handshakes_give_back_their_places_under_max_connections",),
        must_load=(BROKER,)),
    Mutation(
        "tls-given-up-handshakes-logged-each",
        "TLS handshakes given up are said once a minute per listener, not once per connection",
        (edit("src/roost/broker/net/tls_handshakes.py",
              "        if last is not None and now - last < LOG_EVERY_S:\n",
              "        if False:  # MUTATION: a line per connection\n"),),
        (TLS_ABUSE + "test_handshakes_never_begun_stalled_or_not_tls_are_cut_off_and_others_served",),
        must_load=(BROKER,)),
    Mutation(
        "console-header-timeout-ignored",
        "roost console --header-timeout: a connection sending no whole request head that long after it opened "
        "or after its last answer is closed (slow-loris, silent and idle kept-alive connections)",
        (edit("src/roost/console/slow_clients.py",
              "    if timeout_s <= 0 or clock.requests:\n",
              "    if True:  # MUTATION: a head may take forever\n"),),
        (CONSOLE_ABUSE + "test_slow_and_silent_clients_are_closed_and_pages_still_served",
         CONSOLE_ABUSE + "test_a_kept_alive_connection_in_use_is_not_cut_and_an_idle_one_is"),
        must_load=(BROKER,)),
    Mutation(
        "console-header-bytes-earn-time",
        "the console's header timeout counts from the connection's opening (or last answer), not its last byte: "
        "a head trickled a byte at a time earns no time",
        (edit("src/roost/console/http_guard.py",
              "            self._clock.received += len(data)\n",
              "            self._clock.received += len(data)\n"
              "            self._clock.waiting_since = asyncio.get_running_loop().time()  # MUTATION: each byte earns time\n"),),
        (CONSOLE_ABUSE + "test_slow_and_silent_clients_are_closed_and_pages_still_served",),
        must_load=(BROKER,)),
    Mutation(
        "console-cuts-logged-each",
        "the console says once a minute at most what its header timeout closed, not once per connection",
        (edit("src/roost/console/http_guard.py",
              "        self._guard.cut(kind)\n",
              "        self._guard.cut(kind)\n"
              "        log.warning(\"closed a connection that sent no whole request within the timeout\")  # MUTATION\n"),),
        (CONSOLE_ABUSE + "test_slow_and_silent_clients_are_closed_and_pages_still_served",),
        must_load=(BROKER,)),
    Mutation(
        "console-tls-handshake-unbounded",
        "the HTTPS console cuts a TLS handshake not done within --header-timeout",
        (edit("src/roost/console/server.py",
              "    handshake_s = settings.header_timeout_s if settings.header_timeout_s > 0 else None\n",
              "    handshake_s = None  # MUTATION: asyncio's 60 s\n"),),
        (CONSOLE_ABUSE + "test_https_handshakes_never_finished_are_cut_and_pages_still_served",),
        must_load=(BROKER,)),
    Mutation(
        "receive-timeout-without-size-allowance",
        "request.receive.min.bytes.per.second: a large request arriving steadily gets time for its size",
        (edit("src/roost/broker/net/deadlines.py",
              "    return clock.frame_started + limits.receive_s + allowance\n",
              "    return clock.frame_started + limits.receive_s  # MUTATION: no allowance\n"),),
        (ABUSE + "test_slow_loris_senders_are_cut_off_and_others_served",),
        must_load=(BROKER,)),
    Mutation(
        "expired-connection-closed-with-a-fin",
        "a connection a deadline ends is reset, so a client that never reads learns of it and the "
        "unsent answers are dropped",
        (edit("src/roost/broker/net/connection.py",
              "                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)\n",
              "                    pass  # MUTATION: a FIN queued behind the unsent answers\n"),),
        (ABUSE + "test_a_client_that_never_reads_costs_bounded_memory_and_is_closed_when_idle",),
        must_load=(BROKER,)),
    Mutation(
        "max-connections-per-ip-ignored",
        "max.connections.per.ip (and its overrides): past the cap an address's new connections are refused",
        (edit("src/roost/broker/quotas/connections.py", "        if self.open[ip] >= limit:\n",
              "        if False:  # MUTATION: no per-address cap\n"),),
        (ABUSE + "test_one_address_over_its_connection_cap_does_not_starve_another",
         "tests/quotas/test_client_quotas.py::test_connections_per_address_are_limited_and_logged_once"),
        must_load=(BROKER,)),
    Mutation(
        "queued-max-request-bytes-ignored",
        "queued.max.request.bytes: requests being received hold no more than that, broker-wide; the rest wait unread",
        (edit("src/roost/broker/net/request_memory.py", "        if self.used >= self.limit:\n",
              "        if False:  # MUTATION: no budget\n"),),
        (ABUSE + "test_partial_requests_hold_no_more_than_queued_max_request_bytes",),
        must_load=(BROKER,)),
    Mutation(
        "memory-wait-counts-against-the-receive-deadline",
        "a request waiting for room under queued.max.request.bytes is not cut off by its receive deadline",
        (edit("src/roost/broker/net/connection.py",
              "        self._held_frame_started, self._clock.frame_started = self._clock.frame_started, None\n",
              "        self._held_frame_started = None  # MUTATION: the deadline runs on while waiting\n"),),
        (ABUSE + "test_partial_requests_hold_no_more_than_queued_max_request_bytes",),
        must_load=(BROKER,)),
    Mutation(
        "keeper-sessionless-connections-kept",
        "zookeeper.nio.sessionlessCnxnTimeout: a keeper connection that asks for no session is closed",
        (edit("src/roost/keeper/server.py",
              "        if client is None or client.closed or client.connect is not None:\n",
              "        if True:  # MUTATION: kept however long\n"),),
        (KEEPER_ABUSE + "test_connections_without_a_session_are_closed",),
        must_load=(BROKER,)),
    Mutation(
        "keeper-refusals-logged-each",
        "the keeper logs a flood of connections refused over maxClientCnxns once a minute per address",
        (edit("src/roost/keeper/server.py",
              "        if last is not None and now - last < REFUSAL_LOG_EVERY_S:\n",
              "        if False:  # MUTATION: a line per refused connection\n"),),
        (KEEPER_ABUSE + "test_one_address_over_max_client_cnxns_does_not_starve_another",),
        must_load=(BROKER,)),
    Mutation(
        "offsets-never-expire",
        "offsets.retention.minutes: an empty group's committed offsets expire",
        (edit("src/roost/broker/group/service.py", "            self.expire_offsets(self.clock_ms())\n",
              "            pass  # MUTATION: the expiry check never runs\n"),),
        ("tests/broker/test_offsets_retention.py",), must_load=("-m tests.support.shifted_clock",)),
    Mutation(
        "standalone-commit-needs-empty-member-id",
        "a consumer that never joined (generation -1) commits to an empty or new group whatever "
        "member id it sends, and the next consumer finds the offsets (issue 29)",
        (edit("src/roost/broker/group/classic_protocol.py",
              "        if generation < 0 and (group is None or group.is_empty()):\n",
              "        if generation < 0 and not member_id and (group is None or group.is_empty()):  # MUTATION\n"),),
        ("tests/broker/test_standalone_commits.py::test_a_generation_minus_one_commit_with_a_member_id_on_a_new_group",
         "tests/broker/test_standalone_commits.py::test_manual_assign_commits_are_found_by_the_next_consumer[consumer]"),
        must_load=(BROKER,)),
    Mutation(
        "standalone-commit-overwrites-live-group",
        "a commit with generation -1 is refused while the group has members (issue 29)",
        (edit("src/roost/broker/group/classic_protocol.py",
              "        if generation < 0 and (group is None or group.is_empty()):\n",
              "        if generation < 0:  # MUTATION: a live group's offsets open to anyone\n"),),
        ("tests/broker/test_standalone_commits.py::test_a_standalone_commit_to_a_live_group_is_refused",),
        must_load=(BROKER,)),
    Mutation(
        "group-max-size-ignored",
        "group.max.size: a consumer beyond it gets GROUP_MAX_SIZE_REACHED",
        (edit("src/roost/broker/group/classic_protocol.py",
              "        if len(group.members) + len(group.pending) >= self.limits.max_size:\n",
              "        if False:  # MUTATION: group.max.size not enforced\n"),),
        ("tests/broker/test_membership.py::test_a_member_past_group_max_size_is_refused",),
        must_load=(BROKER,)),
    Mutation(
        "served-versions-not-counted",
        "at shutdown the broker logs which API versions it served, and how often",
        (edit("src/roost/broker/net/dispatcher.py", "        self.request_counts[(key, version)] += 1\n",
              "        pass  # MUTATION: requests not counted\n"),),
        ("tests/broker/test_served_versions.py",), must_load=(BROKER,)),
    Mutation(
        "max-connections-never-frees",
        "max.connections: past it a connection is refused, and a closed one frees its place (the "
        "test's retry must end in its assertion, issue 12 item 3)",
        (edit("src/roost/broker/broker.py",
              "KafkaConnection(self._dispatcher, self._limits, self._connection_closed, security)",
              "KafkaConnection(self._dispatcher, self._limits, lambda _closed: None, security)  # MUTATION"),),
        ("tests/broker/test_config_cli.py::test_connection_cap",), must_load=(BROKER,)),
    Mutation(
        "fetch-never-waits",
        "a fetch without enough data waits (MaxWaitMs) and an append wakes it; shown without a sleep "
        "(issue 12 item 2)",
        (edit("src/roost/broker/replica/manager.py",
              "        if found >= params.min_bytes or errored or params.max_wait_s <= 0 or not plan.partitions():\n",
              "        if True:  # MUTATION: never park a fetch\n"),),
        ("tests/broker/test_fetch_limits.py::test_waiting_fetch_is_woken_by_an_append",
         "tests/broker/test_fetch_limits.py::test_min_bytes_waits_for_enough_data"), must_load=(BROKER,)),
    Mutation(
        "fetch-min-bytes-ignored",
        "a parked fetch is answered only once MinBytes are there",
        (edit("src/roost/broker/replica/purgatory.py",
              "if found >= self._min_bytes or errored or self._waits.time() >= self._deadline:",
              "if found > 0 or errored or self._waits.time() >= self._deadline:  # MUTATION"),),
        ("tests/broker/test_fetch_limits.py::test_min_bytes_waits_for_enough_data",), must_load=(BROKER,)),
    Mutation(
        "log-small-reads-mapped",
        "small reads are plain copies, large ones views of a memory map (the test no longer accepts "
        "the type it excludes, issue 12 item 3)",
        (edit("src/roost/log/segment.py", "        if end - position < MAP_THRESHOLD:\n",
              "        if False:  # MUTATION: every read is a view of the map\n"),),
        ("tests/log/test_mapped_reads.py::test_small_reads_are_plain_bytes",), must_load=(PYTEST,)),
    Mutation(
        "referee-skips-stay-green",
        "under --require-referees or CI=true a missing referee fails the run (both hooks disabled here)",
        (edit("tests/conftest.py", "def pytest_runtest_makereport(", "def _mutation_disabled_runtest_makereport("),
         edit("tests/conftest.py", "def pytest_make_collect_report(", "def _mutation_disabled_make_collect_report(")),
        ("tests/suite/test_referees.py::test_referee_skips_fail_when_required",)),
    Mutation(
        "decoder-producer-snapshot-counts",
        "a checksummed producer-state snapshot with impossible counts is refused (1420424)",
        (edit("src/roost/log/producer_state.py",
              "if not 0 <= batch_count <= BATCHES_KEPT or pid in manager.producers:",
              "if False:  # MUTATION: counts not checked"),),
        ("tests/log/test_on_disk_decoding.py::test_checksummed_snapshot_with_impossible_counts_is_refused",), must_load=(PYTEST,)),
    Mutation(
        "decoder-cleaner-checkpoint-torn",
        "a torn cleaner checkpoint (no final newline) never parses",
        (edit("src/roost/log/cleaner.py", r'_CHECKPOINT_FORMAT = re.compile(rb"(-?[0-9]+) (-?[0-9]+)\n")',
              r'_CHECKPOINT_FORMAT = re.compile(rb"(-?[0-9]+) (-?[0-9]+)\n?")  # MUTATION'),),
        ("tests/log/test_on_disk_decoding.py::test_torn_cleaner_checkpoint_never_parses",), must_load=(PYTEST,)),
    Mutation(
        "decoder-raft-log-crc-unchecked",
        "a corrupted Raft log record is cut, not loaded",
        (edit("src/roost/raft/storage.py", "            if crc32c.crc32c(payload) != crc:\n",
              "            if False:  # MUTATION: CRC not checked\n"),),
        ("tests/raft/test_storage_decoding.py::test_a_corrupted_log_is_cut_before_the_damaged_record",), must_load=(PYTEST,)),
    Mutation(
        "decoder-keeper-batch-trailing-bytes",
        "a keeper command batch with bytes after its end is refused",
        (edit("src/roost/keeper/commands.py", '        r.expect_end("keeper batch")\n',
              "        pass  # MUTATION: trailing bytes accepted\n"),),
        ("tests/keeper/test_persisted_decoding.py::test_a_truncated_batch_is_refused",), must_load=(PYTEST,)),
    Mutation(
        "acl-always-allows",
        "with authorizer.class.name set, a principal without the ACL Kafka's table asks for is refused "
        "(here the authorizer's decision allows everything)",
        (edit("src/roost/broker/security/authorizer.py",
              "        if principal in self.super_users:\n            return True\n        candidates =",
              "        return True  # MUTATION: every check allows\n        candidates ="),),
        ("tests/security/test_authorizer_core.py::test_deny_beats_allow_even_from_a_wildcard",
         "tests/security/test_acl_matrix.py::test_refused_without_the_acl_and_served_with_it[Produce]",
         "tests/security/test_acl_matrix.py::test_refused_without_the_acl_and_served_with_it[LeaderAndIsr]",
         "tests/security/test_acl_matrix.py::test_deny_beats_allow"),
        must_load=(BROKER,)),
    Mutation(
        "acl-refusal-ignored",
        "a refused request is answered with Kafka's error and never reaches its handler (here the "
        "rules' refusals are dropped and every request is served)",
        (edit("src/roost/broker/handlers/api_rules.py",
              "        if type(outcome) is dict or outcome is NO_RESPONSE:\n            return outcome\n",
              "        if type(outcome) is dict or outcome is NO_RESPONSE:\n"
              "            return handler(request)  # MUTATION: refusal ignored\n"),),
        ("tests/security/test_acl_matrix.py::test_refused_without_the_acl_and_served_with_it[DescribeCluster]",
         "tests/security/test_acl_matrix.py::test_refused_without_the_acl_and_served_with_it[CreateTopics]"),
        must_load=(BROKER,)),
    Mutation(
        "fault-run-keeper-sync-without-barrier",
        "sync then read is linearizable: here sync answers at once, without the leader's read barrier, "
        "so a lagging follower serves an old value (caught by a follower cut from the leader's messages; "
        "the fault harness's linearizability check catches it in a 2-minute run, not in CI's 14 s)",
        (edit("src/roost/keeper/server.py", "            await self.replicator.read_barrier(SYNC_TIMEOUT)\n",
              "            pass  # MUTATION: no read barrier\n"),),
        ("tests/keeper/test_ensemble_failures.py::test_sync_on_a_lagging_follower_waits_for_what_the_leader_committed",),
        must_load=(BROKER,), timeout_s=600),
    Mutation(
        "fault-run-raft-commit-without-majority",
        "a Raft leader commits (and the keeper acknowledges) only what a majority holds: here the leader "
        "alone commits, so a leader cut from its followers acknowledges writes the next leader never had",
        (edit("src/roost/raft/core.py", "        candidate = matches[self.quorum - 1]\n",
              "        candidate = matches[0]  # MUTATION: the leader alone commits\n"),),
        KEEPER_FAULT_RUN, must_load=(BROKER,), timeout_s=600),
    Mutation(
        "fault-run-keeper-no-fsync-power-cut",
        "the keeper fsyncs before replying (forceSync): here it never fsyncs, and a power cut of the "
        "ensemble loses acknowledged writes",
        (edit("src/roost/keeper/server.py", "ReplicatorConfig(fsync=config.force_sync,",
              "ReplicatorConfig(fsync=False,"),),
        KEEPER_FAULT_RUN, must_load=(BROKER,), timeout_s=600),
    Mutation(
        "fault-run-broker-hw-ignores-followers",
        "acks=all waits for the in-sync followers: here the leader's high watermark ignores them, so a "
        "leader cut from its followers acknowledges records the next leader never had",
        (edit("src/roost/broker/replica/state.py", "        for replica in self.maximal_isr:\n",
              "        for replica in ():  # MUTATION: the followers do not hold the HW back\n"),),
        BROKER_FAULT_RUN, must_load=(BROKER,), timeout_s=600),
    Mutation(
        "fault-run-broker-fsync-skipped-power-cut",
        "with log.flush.interval.messages=1 the broker fsyncs before acknowledging: here it never does, and "
        "a power cut of the cluster loses acknowledged records",
        (edit("src/roost/storage/flusher.py", "        os.fsync(fd)\n", "        pass  # MUTATION: no fsync\n"),),
        BROKER_FAULT_RUN, must_load=(BROKER,), timeout_s=600),
    Mutation(
        "lso-ignores-open-transactions",
        "the last stable offset stops at the first offset of the earliest open transaction",
        (edit("src/roost/log/producer_state.py",
              "        if self.ongoing:\n            candidates.append(min(self.ongoing.values()))\n",
              "        pass  # MUTATION: open transactions ignored\n"),),
        ("tests/log/test_transactions_log.py::test_lso_follows_open_transactions_and_markers",
         READ_COMMITTED + "test_read_committed_stops_at_the_lso_and_lists_aborted_transactions"),
        must_load=(PYTEST,)),
    Mutation(
        "lso-ignores-unreplicated-markers",
        "a decided transaction stays unstable until the high watermark covers its marker",
        (edit("src/roost/log/producer_state.py",
              "        while unreplicated and unreplicated[0][1] < high_watermark:\n",
              "        while unreplicated:  # MUTATION: decided is stable at once\n"),),
        ("tests/log/test_transactions_log.py::test_lso_follows_open_transactions_and_markers",),
        must_load=(PYTEST,)),
    Mutation(
        "read-committed-without-aborted-list",
        "a read_committed fetch lists the aborted transactions of the range it returns",
        (edit("src/roost/log/transactions.py",
              "        return [entry for entry in self.entries[start:] if entry.first_offset < upper]\n",
              "        return []  # MUTATION: aborted records served as if committed\n"),),
        ("tests/log/test_transactions_log.py::test_lso_follows_open_transactions_and_markers",
         READ_COMMITTED + "test_read_committed_stops_at_the_lso_and_lists_aborted_transactions"),
        must_load=(PYTEST,)),
    Mutation(
        "aborted-index-not-rebuilt-after-crash",
        "recovery's replay puts back aborted-index entries a crash lost",
        (edit("src/roost/log/log_loading.py",
              "                    self._track(state, header, functools.partial(segment.read, pos, header.size))\n",
              "                    state.update(header, header.base_offset)  # MUTATION: markers not read\n"),),
        ("tests/log/test_transactions_log.py::test_crash_losing_index_entries_rebuilds_them_from_the_log",),
        must_load=(PYTEST,)),
    Mutation(
        "txn-fencing-skipped",
        "a producer whose epoch was bumped by a newer instance is fenced (PRODUCER_FENCED) at the coordinator",
        (edit("src/roost/broker/txn/core.py",
              "        if md.producer_epoch != producer_epoch:\n            return ErrorCode.PRODUCER_FENCED\n"
              "        if md.pending is not None or md.state in PREPARE:",
              "        if md.pending is not None or md.state in PREPARE:  # MUTATION: epoch not checked"),),
        (TXN_CORE + "test_a_new_instance_fences_the_ongoing_transaction_by_aborting_it_with_a_bumped_epoch",
         TXN_CORE + "test_wrong_producer_or_epoch",
         TRANSACTIONS + "test_a_second_producer_with_the_same_id_fences_the_first"),
        must_load=(BROKER,)),
    Mutation(
        "txn-marker-without-epoch-check",
        "a marker from an older coordinator epoch (or for an older producer epoch) never enters the log",
        (edit("src/roost/broker/handlers/txn.py",
              "        refused = partition.log.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)\n",
              "        refused = ErrorCode.NONE  # MUTATION: markers not checked\n"),),
        (TRANSACTIONS + "test_markers_from_an_older_coordinator_or_producer_epoch_are_refused",),
        must_load=(BROKER,)),
    Mutation(
        "txn-offsets-visible-before-marker",
        "offsets committed inside a transaction stay invisible (UNSTABLE_OFFSET_COMMIT with require_stable) "
        "until the COMMIT marker",
        (edit("src/roost/broker/group/offsets.py",
              "            held[key] = StoredOffset(value, log_offset)\n",
              "            self._apply(key, StoredOffset(value, log_offset))  # MUTATION: visible at once\n"),),
        (TXN_CORE + "test_transactional_offsets_are_held_until_the_marker",
         TRANSACTIONS + "test_consume_transform_produce_commits_output_and_offsets_together"),
        must_load=(BROKER,)),
    Mutation(
        "txn-timeout-never-aborts",
        "the coordinator aborts a transaction its producer abandoned, after transaction.timeout.ms",
        (edit("src/roost/broker/txn/core.py",
              "                      if md.state == S.ONGOING and md.pending is None and md.start_ms + md.timeout_ms < now)",
              "                      if False)  # MUTATION: never timed out"),),
        (TXN_CORE + "test_timed_out_transactions_are_fenced_and_aborted",
         TRANSACTIONS + "test_an_abandoned_transaction_is_aborted_after_its_timeout"),
        must_load=(BROKER,)),
    Mutation(
        "txn-state-not-reloaded",
        "a new transaction coordinator (after a failover) loads the transactions from __transaction_state",
        (edit("src/roost/broker/txn/service.py",
              "        for transactional_id, value in found.items():\n            self.core.load(transactional_id, value)\n",
              "        found.clear()  # MUTATION: nothing loaded\n"),),
        (TXN_SERVICE + "test_commit_writes_markers_then_complete_and_a_new_leader_reloads_the_state",
         TXN_SERVICE + "test_a_new_leader_finishes_a_prepared_transaction_and_the_old_coordinator_is_fenced",
         "tests/cluster/test_txn_failover.py::test_a_transaction_commits_across_a_kill_of_its_coordinator"),
        must_load=(BROKER,)),
    Mutation(
        "cleaner-passes-an-undecided-transaction",
        "a cleaner pass never reaches the first unstable offset (an undecided transaction's records "
        "and the records after it are neither mapped nor cleaned)",
        (edit("src/roost/log/cleaner.py", "    limit = log.producer_state.last_stable_offset(limit)\n",
              "    pass  # MUTATION: past undecided transactions\n"),),
        (CLEANER_TXN + "test_no_pass_reaches_an_undecided_transaction",
         CLEANER_TXN + "test_a_transaction_decided_past_the_high_watermark_is_not_cleaned", CLEANER_TXN_RANDOM),
        must_load=(PYTEST,)),
    Mutation(
        "cleaner-maps-aborted-records",
        "an aborted record never counts as a key's newer value (it would hide the committed one)",
        (edit("src/roost/log/cleaner.py", "            mapped = not header.is_control and not is_aborted(header, aborted)",
              "            mapped = not header.is_control  # MUTATION: aborted records mapped"),),
        (CLEANER_TXN + "test_an_aborted_record_never_hides_a_committed_one", CLEANER_TXN_RANDOM), must_load=(PYTEST,)),
    Mutation(
        "cleaner-keeps-aborted-records",
        "the cleaner removes the records of aborted transactions",
        (edit("src/roost/log/cleaner_rules.py", "        aborted = is_aborted(header, self.aborted)\n",
              "        aborted = False  # MUTATION: aborted records treated as committed\n"),),
        (CLEANER_TXN + "test_aborted_records_go_committed_ones_are_compacted_markers_go_after_retention",
         CLEANER_TXN + "test_record_filter_core_on_transactions"), must_load=(PYTEST,)),
    Mutation(
        "cleaner-drops-a-marker-with-records-left",
        "a marker stays while a record of its transaction is left (else that record's transaction "
        "never ends for a rebuild, and read_committed consumers stop at it)",
        (edit("src/roost/log/cleaner_rules.py", "        if header.producer_id in self._txn_kept:\n",
              "        if False:  # MUTATION: markers go whatever is left of their transaction\n"),),
        (CLEANER_TXN + "test_aborted_records_go_committed_ones_are_compacted_markers_go_after_retention",
         CLEANER_TXN + "test_record_filter_core_on_transactions", CLEANER_TXN_RANDOM), must_load=(PYTEST,)),
    Mutation(
        "cleaner-removes-an-abort-marker-before-its-entry",
        "an ABORT marker goes only after its aborted-transaction index entry (an entry without its "
        "marker makes read_committed consumers skip the producer's later committed records)",
        (edit("src/roost/log/cleaner_rules.py", "        if header.base_offset in self.aborted.marker_offsets:\n",
              "        if False:  # MUTATION: the marker goes while its entry stays\n"),),
        (CLEANER_TXN + "test_a_producer_writing_on_after_an_abort_stays_visible_across_passes", CLEANER_TXN_RANDOM,
         TRANSACTIONS + "test_the_cleaner_removes_aborted_records_and_compacts_committed_ones"),
        must_load=(PYTEST, BROKER)),
    Mutation(
        "retention-deletes-under-an-undecided-transaction",
        "retention deletes no segment holding a record of an undecided transaction",
        (edit("src/roost/log/log_retention.py", "        bound = self.producer_state.last_stable_offset(\n",
              "        bound = (lambda offset: offset)(  # MUTATION: retention ignores open transactions\n"),),
        (CLEANER_TXN + "test_retention_keeps_segments_with_an_undecided_transaction",), must_load=(PYTEST,)),
    Mutation(
        "delete-records-under-an-undecided-transaction",
        "DeleteRecords never moves the log start past an undecided transaction's first record",
        (edit("src/roost/broker/replica/manager.py", "        bound = partition.last_stable_offset\n",
              "        bound = partition.high_watermark  # MUTATION: Kafka's bound\n"),),
        (TRANSACTIONS + "test_delete_records_never_cuts_under_an_undecided_transaction",), must_load=(BROKER,)),
    Mutation(
        "fetch-parked-answers-a-newer-epoch",
        "a consumer's fetch parked while its partition's leader epoch moves on is answered "
        "FENCED_LEADER_EPOCH, not with the new epoch's records (librdkafka then dropped records)",
        (edit("src/roost/broker/replica/fetch.py",
              "        return not self.follower and epoch != NO_EPOCH and epoch < partition.leader_epoch",
              "        return False  # MUTATION: the parked fetch's epoch not checked again"),),
        ("tests/broker/test_fenced_parked_fetch.py::"
         "test_a_parked_consumer_fetch_is_fenced_when_the_leader_epoch_moves_on",), must_load=(PYTEST,)),
    Mutation(
        "txn-next-transaction-not-waiting",
        "AddPartitionsToTxn right after EndTxn waits for the last transaction's markers and Complete* "
        "record instead of answering CONCURRENT_TRANSACTIONS",
        (edit("src/roost/broker/txn/service.py",
              "        if decided == ErrorCode.CONCURRENT_TRANSACTIONS and await self._settled(transactional_id):",
              "        if False:  # MUTATION: answer CONCURRENT_TRANSACTIONS at once"),),
        (TRANSACTIONS + "test_the_next_transaction_waits_for_the_last_ones_markers_instead_of_concurrent_transactions",),
        must_load=(BROKER,)),
    Mutation(
        "txn-find-hanging-ignores-coordinator",
        "roost txn find-hanging leaves out an open transaction whose coordinator lists the partition",
        (edit("src/roost/admin/hanging_transactions.py",
              "        if description is None or f\"{candidate.topic}-{candidate.partition}\" not in description[\"partitions\"]:",
              "        if True:  # MUTATION: every old open transaction hangs"),),
        (TRANSACTIONS + "test_hanging_transactions_are_found_and_aborted_by_roost_txn",),
        must_load=(BROKER,)),
    Mutation(
        "txn-abort-start-offset-any-producer",
        "roost txn abort --start-offset aborts the transaction that starts at that offset, no other",
        (edit("src/roost/admin/hanging_transactions.py",
              "producer[\"current_txn_start_offset\"] == start_offset:",
              "True:  # MUTATION: the first open transaction"),),
        (TRANSACTIONS + "test_hanging_transactions_are_found_and_aborted_by_roost_txn",),
        must_load=(BROKER,)),
    # The bugs the replication simulation found (docs/cluster.md, "What the simulation found"),
    # each fix reverted in src/ (docs/replication-core.md says which scenario re-finds which).
    Mutation(
        "sim-bug-fetcher-truncates-after-losing-its-role",
        "a follower truncates after its ListOffsets round trips only if it still follows in the same epoch",
        (edit("src/roost/broker/replica/fetcher.py",
              "        if not LeaderFetcher._current(following):\n            # While we asked",
              "        if False:  # MUTATION: no re-check after the round trips\n            # While we asked"),),
        (REPLICATION_CORE + "test_a_follower_that_became_leader_during_its_list_offsets_keeps_its_log",
         REPLICATION_CORE + "test_a_follower_that_follows_a_new_epoch_after_its_list_offsets_keeps_its_log",
         SIM_FOUND + "[fetcher-recheck]"), must_load=(PYTEST,)),
    Mutation(
        "sim-bug-isr-change-forgotten-when-fenced",
        "a fenced AlterPartition answer, or one for another leader epoch, leaves the ISR change pending",
        (edit("src/roost/broker/replica/isr.py",
              "                    elif not partition.is_leader:\n                        state.pending_isr = None\n",
              "                    else:  # MUTATION: forgotten\n                        state.pending_isr = None\n"),
         edit("src/roost/broker/replica/isr.py",
              "                             partition.index, ErrorCode(code).name)\n                else:\n",
              "                             partition.index, ErrorCode(code).name)\n"
              "                    state.pending_isr = None  # MUTATION: forgotten\n                else:\n")),
        (REPLICATION_CORE + "test_a_fenced_isr_expansion_stays_pending_and_holds_the_high_watermark",
         REPLICATION_CORE + "test_an_isr_answer_for_another_leader_epoch_stays_pending",
         SIM_FOUND + "[isr-keep-pending]"), must_load=(PYTEST,)),
    Mutation(
        "sim-bug-lost-registration-reply-given-up",
        "a (re-)registration whose create reply was lost is asked again, so the broker learns its epoch",
        (edit("src/roost/broker/zk/membership.py",
              "            if clock_ms() > deadline:\n                raise\n            yield Pause(REGISTRATION_POLL_MS)\n",
              "            raise  # MUTATION: given up\n"),),
        ("tests/sim/test_replication_sim.py::test_a_lost_reply_to_a_re_registration_is_asked_again",),
        must_load=(PYTEST,)),
    Mutation(
        "sim-bug-lost-election-reply-leaves-no-controller",
        "an election whose reply was lost runs again and gives up its own stale /controller claim",
        (edit("src/roost/broker/controller/election.py",
              "    return not active and controller_id == broker_id and owner_session == session_id\n",
              "    return False  # MUTATION: the claim is kept\n"),),
        ("tests/sim/test_replication_sim.py::test_a_lost_election_reply_still_leaves_a_controller",
         "tests/controller/test_events.py::"
         "test_an_election_whose_reply_was_lost_runs_again_and_gives_up_its_own_stale_claim"),
        must_load=(PYTEST,)),
    Mutation(
        "sim-bug-request-dropped-before-the-epoch-is-learnt",
        "a controller request a broker refused because it has not learnt its new registration's epoch yet "
        "is sent again while that registration lives",
        (edit("src/roost/broker/controller/events.py",
              "                if not self._epoch_not_learnt_yet(broker, request, answer):\n",
              "                if True:  # MUTATION: a stale-epoch refusal is final\n"),),
        ("tests/controller/test_events.py::"
         "test_a_request_refused_because_the_broker_has_not_learnt_its_epoch_is_sent_again",
         SIM_FOUND + "[epoch-not-learnt-yet]"),
        must_load=(PYTEST,)),
    Mutation(
        "sim-bug-bounce-during-failover-unseen",
        "a new controller handles brokers that re-registered while no controller watched as bounced",
        (edit("src/roost/broker/controller/election.py",
              "    return {broker for tp, known in snapshot.states.items()\n",
              "    return set() and {broker for tp, known in snapshot.states.items()  # MUTATION: none\n"),),
        ("tests/sim/test_replication_sim.py::test_a_broker_bouncing_during_controller_failover_gets_new_leader_epochs",),
        must_load=(PYTEST,)),
    Mutation(
        "sim-bug-reassignment-keeps-superseded-replica-in-isr",
        "a reassignment over one in progress takes the superseded added replicas out of the ISR",
        (edit("src/roost/broker/controller/core.py",
              "        isr = tuple(b for b in state.isr if b in replicas) or state.isr\n",
              "        isr = state.isr  # MUTATION: superseded replicas stay in the ISR\n"),),
        ("tests/controller/test_core.py::"
         "test_a_reassignment_over_one_in_progress_keeps_the_isr_within_the_replicas",), must_load=(PYTEST,)),
    Mutation(
        "sim-bug-epoch-cache-untrimmed-at-log-end",
        "truncating at the log end still drops an epoch that holds no batch (else a follower loops on DivergingEpoch)",
        (edit("src/roost/log/log_writes.py",
              "            self.leader_epochs.truncate_from_end(self.log_end_offset)\n            return\n",
              "            return  # MUTATION: the epoch cache is left as it is\n"),),
        ("tests/log/test_leader_epochs.py::test_truncating_at_the_log_end_drops_an_epoch_that_holds_no_batch",
         SIM_FOUND + "[epoch-cache-trim]"), must_load=(PYTEST,)),
    # The fast failure detection (controller/liveness.py): a verdict "dead" may be wrong, so it
    # must change nothing that a session expiry would not (no election outside the ISR).
    Mutation(
        "fast-detection-verdict-trusted",
        "a broker declared dead on a fast signal is handled exactly as an expired session: a partition it "
        "alone was in sync for stays without a leader, never goes to a replica outside the ISR",
        (edit("src/roost/broker/controller/core.py",
              "        self.brokers_changed({b: r for b, r in self.brokers.items() if b != broker})\n"
              "        self.suspected[broker] = epoch\n",
              "        self.brokers_changed({b: r for b, r in self.brokers.items() if b != broker})\n"
              "        self.suspected[broker] = epoch\n"
              "        for tp in self._partitions():  # MUTATION: the verdict trusted, leaderless partitions go unclean\n"
              "            if tp in self.states and tp[0] not in self.deleting and self.states[tp].state.leader == NO_LEADER:\n"
              "                self._elect_one(tp, ELECTION_UNCLEAN)\n"),),
        ("tests/sim/test_replication_sim.py::test_a_seed_where_trusting_a_verdict_loses_acknowledged_writes_passes",),
        must_load=(PYTEST,)),
    Mutation(
        "scram-proof-unverified",
        "a SCRAM login needs a proof made from the right password (unknown user and wrong password alike)",
        (edit("src/roost/broker/security/sasl.py",
              "        return hmac.compare_digest(self._hash(client_key).digest(), stored_key) and self._known\n",
              "        return True  # MUTATION: proof not verified\n"),),
        ("tests/security/test_bad_input.py::test_scram_unknown_user_fails_like_a_wrong_password",
         "tests/security/test_credentials.py::test_a_user_written_into_zookeeper_by_another_client_logs_in_within_a_second"),
        must_load=(BROKER,)),
    Mutation(
        "sasl-request-before-login-served",
        "on a SASL listener a request before the login closes the connection",
        (edit("src/roost/broker/security/sasl.py",
              '        return self._close(f"request api_key={key} v{header.api_version} before SASL authentication "\n',
              '        return Step(Action.ROUTE)  # MUTATION\n        return self._close(f"request api_key={key} v{header.api_version} before SASL authentication "\n'),),
        ("tests/security/test_bad_input.py::test_a_request_before_authentication_closes_the_connection",),
        must_load=(BROKER,)),
    Mutation(
        "tls-client-auth-ignored",
        "ssl.client.auth=required refuses a client without a certificate and names one with it",
        (edit("src/roost/broker/security/tls.py", "        context.verify_mode = CLIENT_AUTH_MODES[mode]\n",
              "        context.verify_mode = ssl.CERT_NONE  # MUTATION: client auth ignored\n"),),
        ("tests/security/test_bad_input.py::test_mutual_tls_refuses_a_client_without_a_certificate",
         "tests/security/test_credentials.py::test_a_client_certificate_becomes_the_principal_by_the_mapping_rule"),
        must_load=(BROKER,)),
    Mutation(
        "console-login-skipped",
        "a console with a login serves nothing but the login form and static files without a session or basic auth",
        (edit("src/roost/console/routes_login.py",
              "    if gate is None or request.path in OPEN_PATHS or request.path.startswith(STATIC):\n",
              "    if True:  # MUTATION: no login asked\n"),),
        (CONSOLE_SECURITY + "test_without_a_login_nothing_but_the_login_form_is_served",
         CONSOLE_SECURITY + "test_a_browser_logs_in_and_sees_the_topics_of_the_sasl_ssl_node"),
        must_load=(BROKER,)),
    Mutation(
        "console-password-unchecked",
        "the console's login needs the configured user and its password (form and basic auth)",
        (edit("src/roost/console/login.py",
              "        return user_ok and password_ok and len(password.encode()) <= MAX_CREDENTIAL_BYTES\n",
              "        return True  # MUTATION: any password\n"),),
        ("tests/console/test_console_login_core.py::test_only_the_user_with_its_password_passes",
         "tests/console/test_console_login_core.py::test_basic_auth_passes_with_the_password_only",
         CONSOLE_SECURITY + "test_a_wrong_password_is_refused_and_logged_without_it"),
        must_load=(PYTEST, BROKER)),
    Mutation(
        "console-guesses-in-parallel",
        "refused console passwords wait their delay one after another (parallel guesses are not faster)",
        (edit("src/roost/console/routes_login.py",
              "    async with console_of(request).login_refusals:\n        await asyncio.sleep(FAILED_LOGIN_DELAY_S)\n",
              "    await asyncio.sleep(FAILED_LOGIN_DELAY_S)  # MUTATION: refusals wait side by side\n"),),
        (CONSOLE_SECURITY + "test_guesses_in_parallel_are_refused_one_after_another",),
        must_load=(BROKER,)),
    Mutation(
        "console-password-on-command-line",
        "roost up --security hands its console the password file's name, never the password (ps shows no secret)",
        (edit("src/roost/cli/servers/up_console.py",
              '    flags = ["--login-user", security.admin_user, "--login-password", password_ref]\n',
              '    flags = ["--login-user", security.admin_user, "--login-password",  # MUTATION\n'
              '             (security.directory / "admin.password").read_text().strip()]\n'),),
        (CONSOLE_SECURITY + "test_the_password_is_not_on_the_consoles_command_line_nor_in_the_output",),
        must_load=(BROKER,)),
    Mutation(
        "metrics-token-unchecked",
        "/metrics with metrics.bearer.token answers 401 and no metric to a scrape without the token",
        (edit("src/roost/metrics/endpoint.py",
              "            if self._token is not None and not token_ok(head, self._token):\n",
              "            if False:  # MUTATION: token not checked\n"),),
        ("tests/security/test_metrics_guard.py::test_without_the_token_a_scrape_gets_401_and_no_metric",
         CONSOLE_SECURITY + "test_metrics_need_tls_and_the_bearer_token",
         "tests/security/test_sasl_ssl_failover.py::test_the_keepers_metrics_need_tls_and_the_token"),
        must_load=(PYTEST, BROKER)),
    Mutation(
        "kip848-revocation-not-awaited",
        "a KIP-848 partition moves to another member only after its previous owner acknowledged the "
        "revocation in a heartbeat (never held by two members at once)",
        (edit("src/roost/broker/group/consumer_protocol.py",
              "            if owned is None or owned & member.revoking:\n                return  # still owns",
              "            if False:  # MUTATION: the revocation counts as done once it is asked\n"
              "                return  # still owns"),),
        (CONSUMER_CORE + "test_a_partition_moves_only_after_its_owner_acknowledged_the_revocation",
         CONSUMER_CORE + "test_random_joins_leaves_and_heartbeats_never_share_a_partition",
         CONSUMER_CORE + "test_a_member_that_never_revokes_is_removed_after_its_rebalance_timeout")),
    Mutation(
        "kip848-group-not-persisted",
        "a KIP-848 group's state is written to __consumer_offsets and a restarted coordinator loads it",
        (edit("src/roost/broker/group/service.py",
              "        records = delta(before, after)\n",
              "        records: list[tuple[bytes, bytes | None]] = []  # MUTATION: nothing written\n"),),
        ("tests/cluster/test_consumer_protocol_failover.py::"
         "test_a_consumer_group_carries_on_when_its_coordinator_is_killed",),
        must_load=(BROKER,)),
    Mutation(
        "kip848-owned-partition-granted",
        "a KIP-848 member is given a partition of its target only once no other member holds it",
        (edit("src/roost/broker/group/consumer_protocol.py",
              "        free = frozenset(tp for tp in wanted if group.owners.get(tp, member.member_id) == member.member_id)\n",
              "        free = wanted  # MUTATION: partitions still held elsewhere are granted too\n"),),
        (CONSUMER_CORE + "test_a_partition_moves_only_after_its_owner_acknowledged_the_revocation",
         CONSUMER_CORE + "test_random_joins_leaves_and_heartbeats_never_share_a_partition")),
    # Online migration between the classic and the consumer protocol (KIP-848).
    Mutation(
        "migration-classic-partitions-forgotten",
        "a live classic group converted to a consumer group keeps its members' partitions theirs: a "
        "consumer-protocol member joining gets none that a classic member still holds",
        (edit("src/roost/broker/group/migration.py",
              "            held = read_assignment(classic.assignment, topics)\n",
              "            held = read_assignment(b\"\", topics)  # MUTATION: what they hold is forgotten\n"),),
        (MIGRATION_CORE + "test_a_consumer_protocol_member_joins_a_converted_group_and_nobody_shares_a_partition",
         MIGRATION_CORE + "test_the_classic_members_keep_their_subscriptions_and_assignments",
         "tests/broker/test_group_migration.py::"
         "test_a_live_classic_group_upgrades_is_stored_and_downgrades"),
        must_load=(BROKER,)),
    # Issue 31, share groups (KIP-932): the share-partition core and the share coordinator.
    Mutation(
        "share-ack-applied-before-durable",
        "a share acknowledgement takes effect (and may be answered) only once its state write is durable",
        (edit("src/roost/broker/share/partition.py",
              "        for first, last, _state, _count in targets:\n            self._mark_pending(first, last, change)\n",
              "        for first, last, _state, _count in targets:\n            self._mark_pending(first, last, change)\n"
              "        self.complete(change)  # MUTATION: applied before the write is durable\n"),),
        (SHARE_PARTITION + "test_accept_moves_the_start_offset_and_nothing_comes_back",
         SHARE_PARTITION + "test_a_pending_ack_is_not_expired_and_a_failed_write_rolls_back")),
    Mutation(
        "share-start-offset-passes-a-pending-ack",
        "a share state write never carries a start offset past records whose acknowledgement may still fail",
        (edit("src/roost/broker/share/partition.py",
              "                yield offset, last, run.state\n",
              "                yield offset, last, run.state if run.pending is None else next(  # MUTATION: other\n"
              "                    s for f, l, s, _c in run.pending.targets if f <= offset <= l)  # pending acks done\n"),),
        (SHARE_PARTITION + "test_a_failed_acknowledgement_is_not_passed_by_a_later_write_s_start_offset",)),
    Mutation(
        "share-record-limit-ignored",
        "a record-limit share fetch (ShareFetch v2 ShareAcquireMode 1) acquires at most MaxRecords, "
        "splitting a log batch",
        (edit("src/roost/broker/share/leader.py",
              "lock_ms=part.settings.lock_duration_ms, mode=mode)",
              "lock_ms=part.settings.lock_duration_ms)  # MUTATION: every fetch batch-optimized"),),
        (SHARE_WIRE + "test_record_limit_acquire_mode_splits_a_batch",),
        must_load=(BROKER,)),
    Mutation(
        "share-state-write-answered-before-replicated",
        "the share coordinator answers a state write only once its record is on min.insync.replicas",
        (edit("src/roost/broker/share/coordinator.py",
              "        if appending.done is not None:\n            await asyncio.shield(appending.done)\n",
              "        pass  # MUTATION: answered without waiting for the replicas\n"),),
        (SHARE_COORDINATOR + "test_a_write_is_not_answered_before_its_record_is_on_the_in_sync_replicas",),
        must_load=("broker",)),
    Mutation(
        "share-lock-never-expires",
        "an acquired record whose lock expires becomes available to every member again",
        (edit("src/roost/broker/share/partition.py",
              "        while self._locks and self._locks[0][0] <= now:\n",
              "        while False:  # MUTATION: locks never expire\n"),),
        (SHARE_PARTITION + "test_lock_expiry_redelivers_with_count_two_to_anyone",
         SHARE_PARTITION + "test_expiry_at_the_limit_archives", SHARE_PROPERTIES)),
    Mutation(
        "share-delivery-count-not-incremented",
        "a share record's delivery count grows by one at each acquisition (the first delivery is 1)",
        (edit("src/roost/broker/share/partition.py",
              "        run.delivery_count += 1\n",
              "        run.delivery_count += 0  # MUTATION: deliveries are not counted\n"),),
        (SHARE_PARTITION + "test_first_delivery_counts_one_and_whole_batches_are_acquired",
         SHARE_PARTITION + "test_release_every_time_archives_at_the_delivery_limit", *SHARE_SIM)),
    Mutation(
        "share-record-acquired-twice",
        "a share record is acquired by one member at a time",
        (edit("src/roost/broker/share/partition.py",
              "        return run.state == RecordState.AVAILABLE and run.pending is None\n",
              "        return run.state in (RecordState.AVAILABLE, RecordState.ACQUIRED) and run.pending is None"
              "  # MUTATION\n"),
         edit("src/roost/broker/share/partition.py",
              "        assert run.state == RecordState.AVAILABLE and run.pending is None\n",
              "        assert run.pending is None  # MUTATION: an acquired record may be taken again\n")),
        (SHARE_PARTITION + "test_an_acquired_record_is_not_acquired_again_until_released", SHARE_PROPERTIES,
         *SHARE_SIM)),
    Mutation(
        "share-read-committed-past-lso",
        "a read_committed share group acquires nothing past the last stable offset",
        (edit("src/roost/broker/share/partition.py",
              "            limit = min(limit, last_stable_offset)\n",
              "            limit = limit  # MUTATION: read_committed reads to the high watermark\n"),),
        (SHARE_PARTITION + "test_read_committed_stops_at_the_lso_and_archives_aborted_records",)),
    # Issue 31, the share groups' offsets admin (AlterShareGroupOffsets and DeleteShareGroupOffsets).
    Mutation(
        "share-offsets-altered-with-members",
        "a share group's offsets are altered or deleted only while it has no members (NON_EMPTY_GROUP)",
        (edit("src/roost/broker/group/share_group.py",
              "        if group.members:\n            return ErrorCode.NON_EMPTY_GROUP\n",
              "        if False:  # MUTATION: members or not\n            return ErrorCode.NON_EMPTY_GROUP\n"),),
        # (reset-offsets checks the group's state itself first, as kafka-share-groups.sh does)
        (SHARE_ADMIN + "test_offsets_are_described_altered_and_deleted",), must_load=(BROKER,)),
    Mutation(
        "share-alter-leader-keeps-old-state",
        "after AlterShareGroupOffsets a share-partition's leader delivers from the new start offset: it "
        "drops the state it held (here neither the coordinator's broker nor a new share session makes it)",
        (edit("src/roost/broker/handlers/share_offsets.py",
              "        if done:\n            self.forget(group_id)\n",
              "        if False:  # MUTATION: the leader keeps what it held\n            self.forget(group_id)\n"),
         edit("src/roost/broker/share/leader.py",
              "        if found == ErrorCode.INVALID_REQUEST or (not isinstance(found, ErrorCode) and found != part.state_epoch):\n",
              "        if False:  # MUTATION: never reloaded\n")),
        (SHARE_ADMIN + "test_offsets_are_described_altered_and_deleted",), must_load=(BROKER,)),
    Mutation(
        "share-alter-remote-leader-not-reloaded",
        "a data partition's leader on another broker than the group coordinator reloads a share-partition "
        "whose offsets were altered when a share session opens on it (here it serves the state it held)",
        (edit("src/roost/broker/share/leader.py",
              "        if found == ErrorCode.INVALID_REQUEST or (not isinstance(found, ErrorCode) and found != part.state_epoch):\n",
              "        if False:  # MUTATION: never reloaded\n"),),
        (SHARE_E2E + "test_altered_offsets_reach_a_leader_on_another_broker",), must_load=(BROKER,)),
    # Issue 31, Roost's dead-letter topic for share groups.
    Mutation(
        "share-archived-before-dead-letter",
        "a share record rejected or at the delivery limit is archived only once its copy is in the group's "
        "dead-letter topic: here the state change goes on while the copy is written (and fails), so a "
        "rejected record is archived with no dead letter",
        (edit("src/roost/broker/share/leader.py",
              "            code = await self._write_dead_letters(part, change, dead_letter_topic)\n",
              "            self._spawn(self._write_dead_letters(part, change, dead_letter_topic))\n"
              "            code = ErrorCode.NONE  # MUTATION: archived before the dead letter is written\n"),),
        (SHARE_ADMIN + "test_rejected_and_exhausted_records_land_in_the_dead_letter_topic",), must_load=(BROKER,)),
    # Issue 31, DeleteGroups of a share group.
    Mutation(
        "share-group-deleted-without-state",
        "DeleteGroups of an empty share group deletes its share-partitions' state in the share coordinator "
        "(DeleteShareGroupState) before the group: here the state stays, so a new group of the same name "
        "starts from the old one's start offset and never sees the records the old group acknowledged",
        (edit("src/roost/broker/handlers/share_offsets.py",
              "        codes = await asyncio.gather(*(self.persister.delete(key) for key in keys))\n",
              "        codes = [ErrorCode.NONE for _key in keys]  # MUTATION: the share state is kept\n"),),
        (SHARE_ADMIN + "test_deleting_a_share_group_deletes_its_share_state",), must_load=(BROKER,)),
    # Issue 31, share consumers with the authorizer on (Metadata by topic id).
    Mutation(
        "metadata-topic-id-checked-without-name",
        "Metadata v12+ asking for a topic by id alone is authorized under the topic's name: here it is checked "
        "under an empty name and refused, so a share consumer allowed to read its topic never learns its "
        "assigned partitions and gets nothing",
        (edit("src/roost/broker/handlers/api_rules.py",
              "        if t.get(\"name\") or not t.get(\"topic_id\"):\n",
              "        if True:  # MUTATION: a topic asked for by id is checked without its name\n"),),
        ("tests/security/test_share_sasl.py::test_share_consumer_needs_read_on_group_and_topic",), must_load=(BROKER,)),
    # Issue 31, share groups under kill -9 (tests/faults/test_share_fault_run.py, the share checker).
    Mutation(
        "share-fault-leader-loads-without-state",
        "a new leader of a data partition rebuilds its share-partitions from the share coordinator's state: "
        "here it keeps only the start offset, so records acknowledged above it come back",
        (edit("src/roost/broker/share/leader.py",
              "        part.core = SharePartition.load(start, batches, config)\n",
              "        part.core = SharePartition.load(start, (), config)  # MUTATION: the batches are ignored\n"),),
        SHARE_FAULT_RUN, must_load=(BROKER,), timeout_s=600),
    Mutation(
        "share-fault-load-skips-in-flight",
        "offsets in a share-partition's persisted window with no terminal state are delivered again by a new "
        "leader: here they are taken as archived, so records in flight at a leader move are never finished "
        "(the simulation's; the real fault run's consumers acknowledge them to the new leader, which answers "
        "NONE for offsets below its start, so its history cannot tell)",
        (edit("src/roost/broker/share/partition.py",
              "            part._runs = [_Run(start_offset, part.end_offset, RecordState.AVAILABLE, 0)]\n",
              "            part._runs = [_Run(start_offset, part.end_offset, RecordState.ARCHIVED, 0)]  # MUTATION\n"),),
        SHARE_SIM),
    Mutation(
        "share-start-only-write-missing",
        "once overlapping acknowledgements complete, the share coordinator's start offset passes them",
        (edit("src/roost/broker/share/partition.py",
              "        self._check()\n        return self.start_change()\n",
              "        self._check()\n        return None  # MUTATION: no start-only write\n"),),
        ("tests/broker/test_share_partition_start.py::"
         "test_overlapping_acknowledgements_end_with_the_start_past_them_all",)),
    Mutation(
        "share-failed-start-not-resent",
        "a start offset whose write failed is carried again by the next write that reaches it",
        (edit("src/roost/broker/share/partition.py",
              "        if projected > self._written_start or (projected == self._written_start and self._start_unsure):\n",
              "        if projected > self._written_start:  # MUTATION: a failed start is never sent again\n"),),
        ("tests/broker/test_share_partition_start.py::test_a_start_whose_write_failed_is_sent_again_when_reached",)),
    Mutation(
        "share-load-start-not-written",
        "a new leader whose load moved the start past terminal batches writes that start",
        (edit("src/roost/broker/share/partition.py",
              "        part._written_start = start_offset\n        part._advance_start()\n",
              "        part._advance_start()\n        part._written_start = part.start_offset  # MUTATION: taken as written\n"),),
        ("tests/broker/test_share_partition_start.py::"
         "test_a_load_past_terminal_batches_owes_the_coordinator_its_start",)),
    # Issue 35, fuzzing: every decoder raises only its module's one error type (tests/fuzz).
    Mutation(
        "kafka-decoder-leaks-struct-error",
        "a Kafka request or response that is cut short raises KafkaCodecError, never struct.error or IndexError",
        (edit("src/roost/wire/kafka/framing.py",
              "_DECODE_FAILURES: Final = (struct.error, IndexError, ValueError, OverflowError)\n",
              "_DECODE_FAILURES: Final = (ValueError,)  # MUTATION: struct.error and IndexError escape\n"),),
        (FUZZ_CORPUS + "test_committed_corpus_decodes_or_raises_the_documented_error[kafka_request]",
         FUZZ_CORPUS + "test_committed_corpus_decodes_or_raises_the_documented_error[kafka_response]")),
    Mutation(
        "codec-errors-leak",
        "damaged gzip, snappy, lz4 or zstd data inside a record batch raises InvalidRecordBatch (CORRUPT_MESSAGE), "
        "never the codec library's own exception",
        (edit("src/roost/wire/kafka/records.py",
              "    except Exception as error:  # every codec library has its own exception types\n",
              "    except zlib.error as error:  # MUTATION: only gzip's errors are turned into InvalidRecordBatch\n"),),
        (FUZZ_CORPUS + "test_committed_corpus_decodes_or_raises_the_documented_error[record_batch]",)),
    Mutation(
        "elr-lists-null",
        "DescribeTopicPartitions sends empty eligible-leader lists, never null (the Java admin client reads "
        "them without a null check); here they are null again",
        (edit("src/roost/broker/handlers/describe.py",
              '"eligible_leader_replicas": [], "last_known_elr": []}',
              '"eligible_leader_replicas": None, "last_known_elr": None}  # MUTATION'),),
        ("tests/broker/test_describe_apis.py::"
         "test_paging_through_many_partitions_gives_each_once_as_metadata_tells_it",
         "tests/jvm/test_java_clients.py::test_admin_client_topics_configs_and_groups"),
        must_load=(BROKER,)),
    Mutation(
        "throttle-configs-refused",
        "Kafka's replication-throttle topic configs are real (issue 33): a SET is taken and described, a DELETE "
        "puts the default back; here they are refused as Roost once did",
        (edit("src/roost/broker/admin/config_alterations.py",
              "ABSENT_TOPIC_CONFIGS: Mapping[str, str] = {}\n",
              "ABSENT_TOPIC_CONFIGS: Mapping[str, str] = {  # MUTATION: the throttles are refused again\n"
              "    \"leader.replication.throttled.replicas\": \"no throttles\",\n"
              "    \"follower.replication.throttled.replicas\": \"no throttles\"}\n"),),
        ("tests/broker/test_alter_configs.py::test_replication_throttles_are_set_described_and_deleted",),
        must_load=(BROKER,)),
    # Issue 32, cluster links: mirrors keep the source's log; promotion, group sync, failback.
    Mutation(
        "link-batch-reencoded",
        "a mirror appends the source's batches byte for byte at their own offsets: here the mirror's leader "
        "renumbers them from its log end and stamps its own leader epoch, as a producer's append would",
        (edit("src/roost/broker/replica/manager.py",
              "            info = partition.log.append(records, batches, assign_offsets=False)\n",
              "            info = partition.log.append(records, batches, leader_epoch=partition.leader_epoch)"
              "  # MUTATION: re-encoded\n"),),
        (LINK_APPEND + "test_link_batches_keep_bytes_offsets_and_epochs",
         LINK_CLUSTER + "test_mirror_same_batches_offsets_groups_then_promote"), must_load=(BROKER,)),
    Mutation(
        "link-promoted-takes-mirror-writes",
        "a promoted topic takes no more mirror writes: here the append door lets a link write to any topic",
        (edit("src/roost/broker/replica/manager.py",
              "        if not write_allowed(partition.mirror_link, WriteOrigin.LINK, link):\n",
              "        if partition.mirror_link and not write_allowed(partition.mirror_link, WriteOrigin.LINK, link):"
              "  # MUTATION\n"),),
        (LINK_APPEND + "test_promoted_mirror_takes_clients_in_a_new_epoch_and_no_mirror_writes",)),
    Mutation(
        "link-group-offsets-backwards",
        "group offsets synced to the destination never move backwards: here any different offset is committed",
        (edit("src/roost/broker/link/core.py", "        if target > current:\n",
              "        if target != current:  # MUTATION: backwards too\n"),),
        (LINK_CORE + "test_group_sync_never_backwards_never_past_the_mirror",
         LINK_CORE + "test_group_sync_keeps_a_later_destination_offset")),
    Mutation(
        "link-shell-skips-truncation",
        "the old source, mirroring the promoted side after a failback, cuts its divergent suffix: here the "
        "link's shell logs the truncation the core decides but does not make it",
        (edit("src/roost/broker/link/service.py", "            replicas.truncate_mirror(partition, action.offset)\n",
              "            pass  # MUTATION: the truncation is not made\n"),),
        (LINK_CLUSTER + "test_mirror_same_batches_offsets_groups_then_promote",), must_load=(BROKER,)),
    Mutation(
        "link-failback-without-truncation",
        "failback truncates the old source's divergent suffix (leader-epoch rules): here the mirror keeps "
        "whatever it holds",
        (edit("src/roost/broker/link/core.py",
              "    end = truncation_offset(epochs, log_end_offset, log_end_offset, source_epoch, source_end_offset)\n",
              "    end = log_end_offset  # MUTATION: never truncate\n"),),
        (LINK_CORE + "test_failback_truncates_exactly_the_divergent_suffix",
         LINK_CORE + "test_steps_validate_then_fetch_then_fenced_revalidates")),
    Mutation(
        "link-recreated-source-mixed",
        "a source topic deleted and recreated (another topic id) stops its mirror: here the ids are never "
        "compared, so the mirror truncates to the new topic's epochs and takes its records",
        (edit("src/roost/broker/link/core.py",
              "    return bool(recorded_topic_id) and seen_topic_id is not None and seen_topic_id != recorded_topic_id\n",
              "    return False  # MUTATION: topic ids never compared\n"),),
        (LINK_CORE + "test_a_recreated_source_topic_stops_the_mirror_before_any_truncation",
         LINK_CLUSTER + "test_a_recreated_source_topic_stops_its_mirror"), must_load=(BROKER,)),
    Mutation(
        "link-failback-ends-at-high-watermark",
        "`roost link failback` hands over everything the promoted side will acknowledge: it waits until each "
        "read-only leader has replicated its whole log; here it takes the high watermark it sees, below a record "
        "appended and acknowledged later",
        (edit("src/roost/cli/admin_commands/link.py",
              '        if entry is not None and entry["high_watermark"] == entry["log_end"] >= highs[(topic, index)]:\n'
              '            found[(topic, index)] = entry["log_end"]\n',
              '        if entry is not None:  # MUTATION: the high watermark as the end\n'
              '            found[(topic, index)] = highs[(topic, index)]\n'),),
        (LINK_CLUSTER + "test_mirror_same_batches_offsets_groups_then_promote",)),
    Mutation(
        "link-new-mirror-acts-on-stale-settings",
        "a topic that becomes a mirror is acted on under its link's settings as they are now (a pause written "
        "before is seen): here under those last polled, so failback's paused link cuts what the promoted side "
        "had acknowledged",
        (edit("src/roost/broker/link/service.py",
              "        if added and await self.service.reread_settings(self.name):\n",
              "        if added and False:  # MUTATION: settings as last polled\n"),),
        (LINK_CLUSTER + "test_mirror_same_batches_offsets_groups_then_promote",)),
    Mutation(
        "link-failback-leaves-destination-writable",
        "`roost link failback` ends with the original roles: the destination's topics are mirrors of the "
        "old source again (read-only); here they stay writable and the link never mirrors them",
        (edit("src/roost/cli/admin_commands/link.py",
              '        _set_mirror_link(target, chosen, name, "making read-only here:")\n',
              "        pass  # MUTATION: this side stays writable\n"),),
        (LINK_CLUSTER + "test_mirror_same_batches_offsets_groups_then_promote",)),
    Mutation(
        "link-promotion-leaves-transactions-open",
        "promotion aborts the source's transactions still open on the mirror (their markers never came): here "
        "none is aborted, so read_committed consumers of the promoted topic stop at the first open one for ever",
        (edit("src/roost/broker/link/core.py",
              "    return sorted(open_transactions, key=lambda txn: (txn.first_offset, txn.producer_id))\n",
              "    return []  # MUTATION: open transactions left open\n"),),
        (LINK_APPEND + "test_promotion_aborts_the_source_transactions_left_open_on_the_mirror",
         LINK_CLUSTER + "test_an_open_transaction_at_the_source_loss_is_aborted_by_failover"), must_load=(BROKER,)),
    Mutation(
        "link-mirror-keeps-empty-epochs",
        "a topic that becomes a mirror (failback's old source) drops the leader epochs it began at its log end "
        "and wrote nothing in (a restart's elections): here it keeps them, so the promoted side's batches append "
        "unrecorded under a higher epoch number and the old source denies the promoted side's epoch",
        (edit("src/roost/broker/replica/manager.py",
              "                    self._became_mirror(partition)\n",
              "                    pass  # MUTATION: empty epochs kept\n"),),
        (LINK_APPEND + "test_a_partition_becoming_a_mirror_drops_the_epochs_it_wrote_nothing_in",
         LINK_CLUSTER + "test_mirror_same_batches_offsets_groups_then_promote"), must_load=(BROKER,)),
    Mutation(
        "link-mirror-cut-below-leadership-start",
        "a mirror's leader cut below where its leadership began knows its high watermark again: here the "
        "leadership start stays above the log end, and ListOffsets answers OFFSET_NOT_AVAILABLE",
        (edit("src/roost/broker/replica/state.py",
              "        self.leader_epoch_start_offset = min(self.leader_epoch_start_offset, local_leo)\n",
              "        pass  # MUTATION: the leadership start kept\n"),),
        (LINK_APPEND + "test_a_mirror_cut_below_where_its_leadership_began_still_knows_its_high_watermark",)),
    Mutation(
        "link-promote-ignores-open-transactions",
        "a planned `roost link promote` waits (within --timeout) for the source's transactions open on the mirror "
        "to end: here it promotes at lag 0, aborting a transaction its producer commits a moment later",
        (edit("src/roost/cli/admin_commands/link.py",
              "                or _open_transactions(client, name, chosen)):\n",
              "                or False):  # MUTATION: open transactions not waited for\n"),),
        (LINK_CLUSTER + "test_a_planned_promotion_waits_for_the_source_transactions_to_end",)),
    Mutation(
        "link-acl-sync-unfiltered",
        "ACL sync copies only the ACLs of the topics the link mirrors: here every topic's literal ACLs are copied",
        (edit("src/roost/broker/link/acls.py",
              "        if not should_mirror_topic(topics, acl.resource_name):\n",
              "        if False:  # MUTATION: the link's topic filter ignored\n"),),
        (LINK_CORE + "test_acl_sync_copies_literal_topic_acls_of_mirrored_topics_renamed_and_only_missing",
         "tests/link/test_link_security.py::test_a_limited_link_principal_mirrors_and_one_without_read_is_refused"),
        must_load=(BROKER,)),
    Mutation(
        "link-mirror-validates-in-one-round",
        "a mirror asks its source about its latest epoch again after each cut, until an answer cuts nothing (two "
        "controllers number the epochs after the clusters part): here one round, so an old source that wrote in "
        "an epoch of its own keeps the records it took that the promoted side never got",
        (edit("src/roost/broker/link/core.py",
              "        self.validated = end >= log_end_offset\n",
              "        self.validated = True  # MUTATION: one round\n"),),
        (LINK_CORE + "test_failback_cuts_an_old_source_that_wrote_in_epochs_the_promoted_side_never_had",
         LINK_CORE + "test_failback_after_the_old_source_wrote_markers_in_a_later_epoch")),
    Mutation(
        "produce-overtakes-a-waiting-produce",
        "a connection's produces reach the append door in the order sent, also behind one waiting for a new "
        "topic: here the later one goes first (an idempotent producer's earlier batch is then refused "
        "OUT_OF_ORDER_SEQUENCE_NUMBER)",
        (edit("src/roost/broker/handlers/produce.py",
              "        earlier = self._waiting.get(connection) if connection is not None else None\n",
              "        earlier = None  # MUTATION: nothing waits for the connection's earlier produce\n"),),
        ("tests/cluster/test_produce_order.py::test_a_produce_behind_one_waiting_for_a_new_topic_is_appended_after_it",)),
    Mutation(
        "heap-never-trimmed",
        "the broker trims its heap once per burst of closed TLS connections: here never",
        (edit("src/roost/broker/net/heap_trim.py",
              "        if self.closed_since < self.after_closes:\n",
              "        if True:  # MUTATION: never due\n"),),
        ("tests/hostile/test_heap_trim.py::test_a_trim_is_due_after_a_burst_of_closes_and_not_more_often_than_the_interval",
         "tests/hostile/test_heap_trim.py::test_the_shell_trims_once_per_burst_on_the_loop")),
    Mutation(
        "link-acl-sync-removes-others",
        "ACL sync removes from the destination only ACLs the link created (and the source dropped): here every "
        "destination topic ACL the source lacks, the administrators' own too",
        (edit("src/roost/broker/link/acls.py",
              "    return AclChanges(sorted(wanted - have), sorted((set(synced) & have) - wanted))\n",
              "    return AclChanges(sorted(wanted - have), sorted(have - wanted))  # MUTATION: not only its own\n"),),
        (LINK_CORE + "test_acl_sync_removes_only_the_acls_it_created_once_the_source_drops_them",
         "tests/link/test_link_security.py::test_a_limited_link_principal_mirrors_and_one_without_read_is_refused"),
        must_load=(BROKER,)),
    Mutation(
        "link-acl-removals-ignored",
        "an ACL removed on the source is removed from the destination: here the sync only adds",
        (edit("src/roost/broker/link/acls.py",
              "    return AclChanges(sorted(wanted - have), sorted((set(synced) & have) - wanted))\n",
              "    return AclChanges(sorted(wanted - have), [])  # MUTATION: additions only\n"),),
        (LINK_CORE + "test_acl_sync_removes_only_the_acls_it_created_once_the_source_drops_them",
         "tests/link/test_link_security.py::test_a_limited_link_principal_mirrors_and_one_without_read_is_refused"),
        must_load=(BROKER,)),
    Mutation(
        "link-chaos-spark-offsets-only",
        "scripts/link_chaos.py's Spark check holds the records the query's checkpoint committed on the source "
        "to the same values at the same offsets on the promoted destination: here only the offsets are "
        "compared, so a mirror that renumbered records would pass",
        (edit("scripts/link_chaos_spark.py",
              "    changed = sorted(k for k, v in below.items() if held_b.get(k) != v)\n",
              "    changed = sorted(k for k in below if k not in held_b)  # MUTATION: offsets only\n"),),
        ("tests/link/test_link_chaos_measures.py::test_spark_resume_checks_values_counts_rereads_losses_and_skips",)),
    Mutation(
        "balance-rack-awareness-ignored",
        "the balancer never places two replicas of a partition on one rack, and fails a plan that cannot avoid it",
        (edit("src/roost/broker/balance/goals.py",
              "        return all(model.duplicate_racks(model.partitions[before.key]) <= model.duplicate_racks(before)\n"
              "                   for before in befores)\n",
              "        return True  # MUTATION: racks ignored\n"),
         edit("src/roost/broker/balance/goals.py", "        return float(model.rack_duplicates)\n",
              "        return 0.0  # MUTATION: racks ignored\n")),
        (BALANCE + "test_rack_awareness_is_kept_and_an_impossible_one_fails_the_plan",
         BALANCE + "test_no_hard_goal_gets_worse_and_a_met_one_stays_met")),
    Mutation(
        "balance-dead-broker-not-healed",
        "replicas on a broker dead past the self-healing time are re-created on living brokers (RF restored), "
        "and a decommissioned broker is drained",
        (edit("src/roost/broker/balance/goals.py",
              "        return {b for b, info in model.brokers.items() if not info.alive or info.excluded}\n",
              "        return set()  # MUTATION: no broker is ever gone\n"),),
        (BALANCE + "test_a_dead_broker_past_the_healing_time_has_its_replicas_recreated_on_the_living",
         BALANCE + "test_a_decommissioned_broker_is_drained_of_replicas_and_leadership")),
    # Issue 33, the balancer's executor and Kafka's replication throttles, against real brokers.
    Mutation(
        "balance-throttle-not-applied",
        "a throttled reassignment moves at most about leader/follower.replication.throttled.rate (KIP-73)",
        (edit("src/roost/broker/replica/manager.py",
              "        quota = self.leader_quota\n        if quota.limited and throttle_names(",
              "        quota = self.leader_quota\n        if False and throttle_names(  # MUTATION: no leader throttle\n"
              "            quota.limited,"),
         edit("src/roost/broker/replica/fetcher.py",
              "        return self.broker_id not in partition.state.isr and self._throttled(partition) \\\n",
              "        return False and self.broker_id not in partition.state.isr and self._throttled(partition) \\\n")),
        (BALANCE_CLUSTER + "test_the_replication_throttle_holds_a_move_to_its_rate",),
        must_load=(BROKER,)),
    Mutation(
        "reassignment-removes-before-isr",
        "a reassignment removes an old replica only once every target replica is in the ISR (never below min ISR)",
        (edit("src/roost/broker/controller/core.py",
              "        if all(b in self.states[tp].state.isr for b in target):\n"
              "            log.info(\"reassignment of %s-%d: %s all in sync; completing\", *tp, target)\n",
              "        if True:  # MUTATION: the old replicas go before the new ones are in sync\n"
              "            log.info(\"reassignment of %s-%d: %s all in sync; completing\", *tp, target)\n"),),
        (BALANCE_CLUSTER + "test_the_replication_throttle_holds_a_move_to_its_rate",),
        must_load=(BROKER,)),
    Mutation(
        "fetchers-share-the-peer-connections",
        "the replica fetchers have their own connections, so no request waiting for replication holds back "
        "the fetch response that replication needs",
        (edit("src/roost/broker/broker.py",
              "        self.fetchers = ReplicaFetchers(self.broker_id, config, self.logs, self.fetch_peers, self.clock_ms)\n",
              "        self.fetchers = ReplicaFetchers(self.broker_id, config, self.logs, self.peers, self.clock_ms)"
              "  # MUTATION: one connection for all\n"),),
        ("tests/cluster/test_admin.py::test_transactions_commit_promptly_beside_acks_all_load",),
        must_load=(BROKER,)),
    Mutation(
        "balance-move-cost-ignored",
        "the planner copies a replica to even out network rates only when the rate it evens pays for the copy",
        (edit("src/roost/broker/balance/goals.py",
              "        return gain * self.payback_s >= copied\n",
              "        return True  # MUTATION: any sliver of rate is worth any copy\n"),),
        (BALANCE + "test_a_replica_is_copied_for_network_rates_only_when_the_rate_pays_for_the_copy[1000000000.0-False]",)),
    Mutation(
        "balance-skew-on-stale-load",
        "after its moves the continuous balancer acts on skew only once the load has been measured afresh",
        (edit("src/roost/broker/balance/autocore.py",
              "            if since is not None and since < settings.remeasure_ms:\n",
              "            if False:  # MUTATION: skew judged on the windows from before the moves\n"),),
        (BALANCE_AUTO + "test_skew_waits_for_the_load_measured_after_the_last_moves_and_node_add_does_not",)),
    Mutation(
        "balance-view-done-while-moving",
        "the console's balancer page shows a proposal done only once its partition holds the target's replicas "
        "and no reassignment of it is in progress",
        (edit("src/roost/console/balance_view.py",
              "    if replicas is not None and key not in moving and set(replicas) == set(proposal[\"new_replicas\"]):\n",
              "    if replicas is not None and set(replicas) == set(proposal[\"new_replicas\"]):  # MUTATION: moving ignored\n"),),
        (BALANCE_VIEW + "test_a_proposal_is_done_only_once_its_partition_holds_the_target_and_is_not_moving",)),
    Mutation(
        "balance-batch-limit-ignored",
        "the executor keeps at most num.concurrent.partition.movements.per.broker moves in progress per broker",
        (edit("src/roost/broker/balance/executor.py",
              "            if any(counts.get(b, 0) >= self.moves_per_broker for b in task.brokers):\n",
              "            if False:  # MUTATION: no per-broker bound\n"),),
        (BALANCE_EXECUTOR + "test_the_per_broker_bound_holds_and_every_task_ends",
         BALANCE_CLUSTER + "test_a_new_broker_takes_its_share_in_bounded_batches")),
    Mutation(
        "balance-throttle-not-removed",
        "an execution removes every throttle it set, however it ends (done, or stopped by a dead broker)",
        (edit("src/roost/broker/balance/execution.py",
              "    failures: list[str] = []\n    if throttles.get(\"rate\") is None:\n",
              "    failures: list[str] = []\n    if True:  # MUTATION: throttles left on\n"),),
        (BALANCE_CLUSTER + "test_a_new_broker_takes_its_share_in_bounded_batches",)),
    Mutation(
        "balance-dead-broker-ignored",
        "a broker dying under a move in progress stops the execution: moves cancelled, throttles removed, state says why",
        (edit("src/roost/broker/balance/executor.py",
              "            if dead:\n                self.stop(",
              "            if False:  # MUTATION: a dead broker goes unnoticed\n                self.stop("),),
        (BALANCE_EXECUTOR + "test_a_dead_broker_stops_the_execution_and_stop_cancels_what_is_in_progress",
         BALANCE_CLUSTER + "test_a_broker_dying_mid_execution_stops_it_cleanly")),
    Mutation(
        "balance-auto-delay-ignored",
        "balancer.mode=continuous moves nothing while a broker is down for less than "
        "balancer.broker.unavailable.delay.ms, and heals it after",
        (edit("src/roost/broker/balance/autocore.py",
              "                   if facts.now_ms - since < settings.unavailable_delay_ms}\n",
              "                   if False}  # MUTATION: heal at once\n"),),
        (BALANCE_AUTO + "test_nothing_moves_while_a_broker_is_down_for_less_than_the_delay",
         BALANCE_AUTO + "test_past_the_delay_continuous_heals_and_node_add_does_not",
         BALANCE_AUTO_CLUSTER + "test_continuous_heals_a_dead_broker_after_the_delay_and_loses_nothing"),
        must_load=(BROKER,)),
    Mutation(
        "balance-auto-any-broker-plans",
        "only the active controller's balancer acts (no two brokers plan and execute at once)",
        (edit("src/roost/broker/balance/autocore.py",
              "    if not facts.in_charge:\n        return Decision(Kind.HOLD, \"not the active controller\")\n",
              "    if False:  # MUTATION: every broker's balancer acts\n"
              "        return Decision(Kind.HOLD, \"not the active controller\")\n"),),
        (BALANCE_AUTO + "test_only_the_active_controller_acts_and_never_while_something_moves",)),
    Mutation(
        "balance-auto-plans-while-moving",
        "the automatic balancer plans nothing while an execution or reassignment is in progress (a controller "
        "taking over never moves alongside the moves of the one before)",
        (edit("src/roost/broker/balance/autocore.py",
              "    if facts.busy:\n        return Decision(Kind.HOLD, facts.busy)\n",
              "    if False:  # MUTATION: busy or not\n        return Decision(Kind.HOLD, facts.busy)\n"),),
        (BALANCE_AUTO + "test_only_the_active_controller_acts_and_never_while_something_moves",
         BALANCE_AUTO_CLUSTER + "test_a_controller_taking_over_finishes_the_old_ones_moves_before_planning"),
        must_load=(BROKER,)),
    Mutation(
        "balance-auto-takeover-keeps-throttles",
        "a controller taking over an execution removes the throttles the old one set",
        (edit("src/roost/broker/balance/auto.py",
              "        failures = remove_throttles(ops, state.get(\"throttles\") or {})\n",
              "        failures: list[str] = []  # MUTATION: the old throttles stay\n"),),
        (BALANCE_AUTO_CLUSTER + "test_a_controller_taking_over_finishes_the_old_ones_moves_before_planning",),
        must_load=(BROKER,)),
    Mutation(
        "balance-auto-stop-ignored",
        "after `roost balance stop` the automatic balancer plans nothing for a while (it does not undo the stop)",
        (edit("src/roost/broker/balance/auto.py", "            if age < STOP_HOLD_S:\n",
              "            if False:  # MUTATION: the stop is forgotten at the next check\n"),),
        (BALANCE_AUTO_CLUSTER + "test_roost_balance_stop_holds_the_automatic_balancer",),
        must_load=(BROKER,)),
    # Issue 35, client quotas: a tenant over its produce quota is told to slow down and held near its rate.
    Mutation(
        "produce-bytes-not-charged",
        "a Produce request's size counts against the client's producer_byte_rate (here nothing is charged)",
        (edit("src/roost/broker/quotas/throttle.py",
              "            throttle = max(throttle, self.quotas.produce.record(user, client, request_bytes, now))\n",
              "            pass  # MUTATION: produce bytes are never charged\n"),),
        (QUOTAS + "test_a_tenant_over_its_produce_quota_is_throttled_near_its_rate_and_another_is_not",),
        must_load=(BROKER,)),
    Mutation(
        "throttle-time-not-answered",
        "a client over its quota is answered with throttle_time_ms (KIP-219), not only muted",
        (edit("src/roost/broker/quotas/throttle.py",
              "                    body[\"throttle_time_ms\"] = max(total, body.get(\"throttle_time_ms\") or 0)\n",
              "                    pass  # MUTATION: the throttle time is not told to the client\n"),),
        (QUOTAS + "test_a_tenant_over_its_produce_quota_is_throttled_near_its_rate_and_another_is_not",),
        must_load=(BROKER,)),
    Mutation(
        "fetch-bytes-not-charged",
        "a consumer's Fetch counts the bytes it reads against its consumer_byte_rate (here nothing is "
        "charged)",
        (edit("src/roost/broker/handlers/fetch.py",
              "            over_ms = allowance.charge_unless_over(sum(outcome.size for outcome in outcomes))\n",
              "            over_ms = 0  # MUTATION: fetched bytes are never charged\n"),),
        (QUOTAS + "test_consumers_over_their_fetch_quota_are_held_near_its_rate",),
        must_load=(BROKER,)),
    Mutation(
        "share-fetch-bytes-not-charged",
        "a ShareFetch counts the bytes it acquires against the client's consumer_byte_rate (here "
        "nothing is charged)",
        (edit("src/roost/broker/handlers/share.py",
              "            response[\"throttle_time_ms\"] = allowance.charge(sum(_size(item[\"records\"]) for item in out.values()))\n",
              "            pass  # MUTATION: acquired bytes are never charged\n"),),
        (QUOTAS + "test_consumers_over_their_fetch_quota_are_held_near_its_rate",),
        must_load=(BROKER,)),
    # Issue 31, share groups: the leader's shell (share/leader.py, handlers/share.py, share/session.py).
    Mutation(
        "share-leader-lock-timer-never-set",
        "a record acquired by a consumer that stops acknowledging returns to the share group when its "
        "acquisition lock expires, with its delivery count raised",
        (edit("src/roost/broker/share/leader.py",
              "        part.timer = asyncio.get_running_loop().call_later(delay, self._expire, part)\n",
              "        part.timer = None  # MUTATION: no lock ever expires\n"),),
        (SHARE_E2E + "test_records_of_a_dead_or_hung_consumer_reach_the_others[stop]",),
        must_load=(BROKER,)),
    Mutation(
        "share-fetch-acks-answered-before-durable",
        "a ShareFetch that acquires while its own acknowledgements are written answers them only once "
        "the write is durable: here the answer goes out with the acquisition",
        (edit("src/roost/broker/handlers/share.py",
              "            await self._acquire_all(session, body, entry, hinted)\n            await acknowledged()\n",
              "            await self._acquire_all(session, body, entry, hinted)\n"
              "            asyncio.ensure_future(acknowledged())  # MUTATION: answered before durable\n"),),
        (SHARE_COORDINATOR + "test_a_share_fetch_answers_its_acknowledgements_only_once_durable",),
        must_load=(BROKER,)),
    Mutation(
        "share-leader-ack-completed-before-written",
        "the share-partition leader completes an acknowledgement (and answers it) only once its state "
        "write is durable",
        (edit("src/roost/broker/share/leader.py",
              "        code = await written\n",
              "        code = ErrorCode.NONE  # MUTATION: completed without waiting for the write\n"),),
        (SHARE_COORDINATOR + "test_a_share_fetch_answers_its_acknowledgements_only_once_durable",),
        must_load=(BROKER,)),
    Mutation(
        "share-disconnect-keeps-records",
        "when a share consumer's connection drops, the records it holds are released at once",
        (edit("src/roost/broker/handlers/share.py",
              "        for session in self.sessions.closed_connection(connection):\n            self._release(session)\n",
              "        self.sessions.closed_connection(connection)  # MUTATION: the records stay acquired\n"),),
        (SHARE_E2E + "test_records_of_a_dead_or_hung_consumer_reach_the_others[kill]",
         SHARE_WIRE + "test_share_sessions_epochs_acknowledgements_and_close"),
        must_load=(BROKER,)),
    Mutation(
        "share-session-epoch-unchecked",
        "a share session answers a request with the wrong epoch INVALID_SHARE_SESSION_EPOCH",
        (edit("src/roost/broker/share/session.py",
              "        if epoch != session.epoch:\n",
              "        if False:  # MUTATION: any epoch is taken\n"),),
        (SHARE_WIRE + "test_share_sessions_epochs_acknowledgements_and_close",),
        must_load=(BROKER,)),
    Mutation(
        "console-link-secret-shown",
        "the console's link pages show a link's settings with its secrets (sasl.password, ssl.key.password) hidden",
        (edit("src/roost/console/link_view.py",
              '    return {str(k): ("(hidden)" if k in SECRETS and v else v) for k, v in sorted(config.items())}\n',
              '    return {str(k): v for k, v in sorted(config.items())}  # MUTATION: secrets shown\n'),),
        ("tests/console/test_console_link_view.py::test_settings_are_shown_with_their_secrets_hidden",),
        must_load=(PYTEST,)),
    Mutation(
        "share-delivery-counts-acquired-missed",
        "a share-partition's delivery counts (the console's distribution) count its acquired records as well as "
        "those available again",
        (edit("src/roost/broker/share/partition.py",
              "            if run.state not in _TERMINAL and run.delivery_count > 0:\n",
              "            if run.state == RecordState.AVAILABLE and run.delivery_count > 0:  # MUTATION\n"),),
        ("tests/broker/test_share_partition.py::test_delivery_counts_are_the_unfinished_records_by_times_delivered",),
        must_load=(PYTEST,)),
    Mutation(
        "share-group-describe-configs-crash",
        "DescribeConfigs of a share group with a dead-letter topic set answers (the handler does not crash)",
        (edit("src/roost/broker/share/group_configs.py",
              "    return [(key, configs[key] if key in configs else defaults[key], key in configs) for key in SHARE_GROUP_KEYS\n",
              "    return [(key, configs.get(key, defaults[key]), key in configs) for key in SHARE_GROUP_KEYS  # MUTATION\n"),),
        ("tests/broker/test_share_dead_letter.py::test_describe_configs_lists_the_dead_letter_topic_once_set",),
        must_load=(PYTEST,)),
)


# ------------------------------------------------------------------------------------ the tree


def run(command: Sequence[str], cwd: Path, timeout: float = GIT_TIMEOUT_S) -> str:
    done = subprocess.run(list(command), cwd=cwd, capture_output=True, timeout=timeout, check=True)
    return done.stdout.decode()


@contextlib.contextmanager
def exported_tree() -> Iterator[Path]:
    """HEAD's tracked files in a temporary directory, plus this checkout's compiled extensions
    (ignored build output: the same accelerator the virtualenv uses), removed afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="roost-break-claims-"))
    try:
        archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=REPO, capture_output=True,
                                 timeout=GIT_TIMEOUT_S, check=True).stdout
        tree = workdir / "tree"
        tree.mkdir()
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        for built in (REPO / "src").rglob("*.so"):
            target = tree / built.relative_to(REPO)
            if target.parent.is_dir() and not target.exists():
                shutil.copy2(built, target)
        init = tree / "src" / "roost" / "__init__.py"
        init.write_text(init.read_text() + CANARY)
        (workdir / "plugins").mkdir()
        (workdir / "plugins" / "break_claims_report.py").write_text(REPORT_PLUGIN)
        yield tree
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class MutationDoesNotApply(Exception):
    pass


@contextlib.contextmanager
def applied(tree: Path, mutation: Mutation) -> Iterator[None]:
    """The tree with `mutation` applied; every file restored byte for byte afterwards."""
    originals: dict[Path, str] = {}
    try:
        for change in mutation.edits:
            path = tree / change.path
            text = path.read_text()
            originals.setdefault(path, text)
            count = text.count(change.old)
            if count != 1:
                raise MutationDoesNotApply(f"{mutation.name}: the snippet to replace occurs {count} times "
                                           f"in {change.path} (must be exactly once):\n{change.old}")
            path.write_text(text.replace(change.old, change.new))
        yield
    finally:
        for path, text in originals.items():
            path.write_text(text)
            assert path.read_text() == text


def check_applies(mutation: Mutation, root: Path = REPO) -> str | None:
    """None if every edit's snippet occurs exactly once in `root`'s files, else what is wrong."""
    for change in mutation.edits:
        path = root / change.path
        if not path.is_file():
            return f"{change.path} does not exist"
        count = path.read_text().count(change.old)
        if count != 1:
            return f"snippet occurs {count} times in {change.path}"
    return None


# ---------------------------------------------------------------------------------- test runs


@dataclass
class RunResult:
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> passed/failed/error/skipped
    messages: dict[str, str] = field(default_factory=dict)  # node id -> first line of its failure
    exitstatus: int | None = None
    problem: str | None = None  # the run itself went wrong (timeout, no report, foreign imports)
    loaded: list[tuple[int, str, str]] = field(default_factory=list)  # canary: (pid, file, command)
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def summary(self) -> str:
        if self.problem:
            return f"PROBLEM: {self.problem}"
        parts = [f"{self.count(o)} {o}" for o in ("passed", "failed", "error", "skipped") if self.count(o)]
        return ", ".join(parts) or "no tests"


def outcome_of(entry: dict[str, str | None]) -> str:
    if entry["setup"] == "skipped" or entry["call"] == "skipped":
        return "skipped"
    if entry["setup"] == "failed":
        return "error"
    if entry["call"] == "failed":
        return "failed"
    if entry["teardown"] == "failed":
        return "error"
    return "passed" if entry["call"] == "passed" else "error"


def marked_processes(canary: Path) -> list[int]:
    """Processes still running with this run's canary file in their environment: started by the
    tests of this run (possibly in their own sessions, out of reach of the group kill)."""
    needle = f"{CANARY_ENV}={canary}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def stop_everything(popen: subprocess.Popen[bytes], canary: Path) -> list[int]:
    """Stop the pytest process group, then every process still marked with this run's canary;
    returns the pids that had to be stopped after pytest ended."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGTERM)
    try:
        popen.wait(KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(KILL_GRACE_S)
    leftovers = marked_processes(canary)
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and marked_processes(canary):
        time.sleep(0.2)
    for pid in marked_processes(canary):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return leftovers


def run_tests(tree: Path, tests: Sequence[str], timeout_s: float, label: str) -> RunResult:
    workdir = tree.parent
    stamp = f"{label}-{time.monotonic_ns()}"
    canary = workdir / f"canary-{stamp}.txt"
    report = workdir / f"report-{stamp}.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update({"PYTHONPATH": os.pathsep.join([str(tree / "src"), str(workdir / "plugins")]),
                CANARY_ENV: str(canary), REPORT_ENV: str(report), "PYTHONDONTWRITEBYTECODE": "1"})
    command = [sys.executable, "-m", "pytest", *PYTEST_FLAGS, *tests]
    result = RunResult()
    started = time.monotonic()
    log_path = workdir / f"pytest-{stamp}.log"
    with log_path.open("wb") as output:
        popen = subprocess.Popen(command, cwd=tree, env=env, stdout=output, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            result.exitstatus = popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            result.problem = f"timed out after {timeout_s:.0f} s"
        finally:
            leftovers = stop_everything(popen, canary)
    result.seconds = time.monotonic() - started
    if leftovers and result.problem is None:
        print(f"    note: stopped {len(leftovers)} process(es) the tests left running: {leftovers}", flush=True)
    if report.exists():
        data = json.loads(report.read_text())
        for node, entry in data["tests"].items():
            result.outcomes[node] = outcome_of(entry)
            if entry["message"]:
                result.messages[node] = entry["message"]
    elif result.problem is None:
        result.problem = f"pytest wrote no report (exit {result.exitstatus})"
    if canary.exists():
        for line in canary.read_text().splitlines():
            pid, file, argv = line.split("\t", 2)
            result.loaded.append((int(pid), file, argv))
    foreign = sorted({file for _, file, _ in result.loaded if not Path(file).is_relative_to(tree)})
    if foreign and result.problem is None:
        result.problem = f"roost imported from outside the tree: {foreign}"
    if result.problem is not None or not result.outcomes:
        tail = log_path.read_text(errors="replace")[-3000:]
        print(textwrap.indent(tail, "    | "), flush=True)
    return result


def missing_loads(result: RunResult, mutation: Mutation) -> list[str]:
    """The process kinds `mutation.must_load` names that no canary entry shows."""
    return [kind for kind in mutation.must_load if not any(kind in argv for _, _, argv in result.loaded)]


# -------------------------------------------------------------------------------------- report


@dataclass
class Row:
    mutation: Mutation
    unmutated: RunResult | None = None
    mutated: RunResult | None = None
    skipped: str | None = None
    verdict: str = ""
    problems: list[str] = field(default_factory=list)


def judge(row: Row) -> None:
    before, after = row.unmutated, row.mutated
    assert before is not None and after is not None
    if before.problem:
        row.problems.append(f"unmutated run: {before.problem}")
    if after.problem:
        row.problems.append(f"mutated run: {after.problem}")
    if not before.outcomes:
        row.problems.append("unmutated run selected no test")
    not_passing = sorted(n for n, o in before.outcomes.items() if o != "passed")
    if not_passing:
        row.problems.append(f"unmutated, not passing: {not_passing}")
    if set(after.outcomes) != set(before.outcomes):
        row.problems.append("the two runs selected different tests")
    still_passing = sorted(n for n, o in after.outcomes.items() if o == "passed")
    if still_passing:
        row.problems.append(f"mutated, STILL PASSING: {still_passing}")
    not_failed = sorted(n for n, o in after.outcomes.items() if o not in ("passed", "failed"))
    if not_failed:
        row.problems.append(f"mutated, not a test failure ({', '.join(after.outcomes[n] for n in not_failed)}): "
                            f"{not_failed}")
    for run_name, run_result in (("unmutated", before), ("mutated", after)):
        missing = missing_loads(run_result, row.mutation)
        if missing:
            row.problems.append(f"{run_name} run: no process of kind {missing} imported roost from the tree")
    row.verdict = "PROVEN" if not row.problems else "NOT PROVEN"


def table(rows: Sequence[Row]) -> str:
    header = ("mutation", "tests", "unmutated", "mutated", "verdict")
    lines = [header]
    for row in rows:
        m = row.mutation
        tests = ", ".join(t.replace("tests/", "").replace(".py::", "::") for t in m.tests)
        if row.skipped:
            lines.append((m.name, tests, "-", "-", f"skipped ({row.skipped})"))
            continue
        if row.mutated is None:
            lines.append((m.name, tests, "-", "-", row.verdict))
            continue
        assert row.unmutated is not None and row.mutated is not None
        lines.append((m.name, tests, f"{row.unmutated.summary()} ({row.unmutated.seconds:.0f} s)",
                      f"{row.mutated.summary()} ({row.mutated.seconds:.0f} s)", row.verdict))
    out = ["| " + " | ".join(cells) + " |" for cells in lines]
    out.insert(1, "|" + "|".join("---" for _ in header) + "|")
    return "\n".join(out)


def loaded_kinds(result: RunResult) -> str:
    """The canary's processes by kind: "2 x -m roost.cli.main, 1 x -m pytest"."""
    kinds = Counter(" ".join(command.split(" ")[1:3]) for _, _, command in result.loaded)
    return ", ".join(f"{n} x {kind}" for kind, n in sorted(kinds.items())) or "none"


def details(rows: Sequence[Row]) -> str:
    out = []
    for row in rows:
        if row.skipped:
            continue
        if row.mutated is None:
            out.extend(f"- {row.mutation.name}: PROBLEM: {p}" for p in row.problems)
            continue
        m = row.mutation
        out.append(f"- {m.name}: {m.proves}")
        for change in m.edits:
            old = " ".join(change.old.split())
            new = " ".join(change.new.split())
            out.append(f"  - edit {change.path}: `{old}` -> `{new}`")
        for node, outcome in sorted(row.mutated.outcomes.items()):
            message = row.mutated.messages.get(node, "")
            if len(message) > MESSAGE_CHARS:
                message = message[:MESSAGE_CHARS] + " ..."
            out.append(f"  - {outcome}: {node}" + (f" -- {message}" if message else ""))
        out.append(f"  - processes that imported roost from the mutated tree: {loaded_kinds(row.mutated)}")
        out.extend(f"  - PROBLEM: {p}" for p in row.problems)
    return "\n".join(out)


def machine() -> str:
    cpus = os.cpu_count()
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{platform.node()}, {platform.system()} {platform.release()}, {cpus} CPUs {model}, Python {platform.python_version()}"


# ---------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run this mutation (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutations and whether each applies to HEAD")
    parser.add_argument("--skip-spark", action="store_true", help="leave out the Spark mutations (slow)")
    args = parser.parse_args(argv)

    names = {m.name for m in MUTATIONS}
    assert len(names) == len(MUTATIONS), "mutation names must be unique"
    unknown = sorted(set(args.only) - names)
    if unknown:
        parser.error(f"unknown mutation(s) {unknown}; --list shows them")
    if args.list:
        head = run(["git", "rev-parse", "--short", "HEAD"], REPO).strip()
        with exported_tree() as tree:
            for m in MUTATIONS:
                problem = check_applies(m, tree)
                print(f"{m.name:40} {'applies to HEAD ' + head if problem is None else 'DOES NOT APPLY: ' + problem}")
                print(f"{'':40} {m.proves}")
                for test in m.tests:
                    print(f"{'':40}   {test}")
        return 0

    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    dirty = run(["git", "status", "--porcelain", "--", "src", "tests"], REPO).strip()
    if dirty:
        print("warning: uncommitted changes under src/ or tests/ are not in the tree (HEAD is used):\n"
              + textwrap.indent(dirty, "  "), flush=True)
    head = run(["git", "log", "-1", "--format=%h %s"], REPO).strip()
    print(f"HEAD {head}\n{machine()}\n{time.strftime('%Y-%m-%d %H:%M:%S %Z')}", flush=True)

    def stop_on_sigterm(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    rows: list[Row] = []
    unmutated_cache: dict[tuple[str, ...], RunResult] = {}
    started = time.monotonic()
    with exported_tree() as tree:
        for mutation in chosen:
            row = Row(mutation)
            rows.append(row)
            if mutation.spark and args.skip_spark:
                row.skipped = "--skip-spark"
                continue
            problem = check_applies(mutation, tree)
            if problem is not None:
                # A refactor moved the code: say so (and fail the run), never skip it quietly.
                row.problems.append(f"does not apply to HEAD: {problem}")
                row.verdict = "DOES NOT APPLY"
                print(f"== {mutation.name}: DOES NOT APPLY: {problem}", flush=True)
                continue
            print(f"== {mutation.name}: {mutation.proves}", flush=True)
            if mutation.tests not in unmutated_cache:
                print(f"   unmutated: {' '.join(mutation.tests)}", flush=True)
                unmutated_cache[mutation.tests] = run_tests(tree, mutation.tests, mutation.timeout_s, "unmutated")
            row.unmutated = dataclasses.replace(unmutated_cache[mutation.tests])
            print(f"   unmutated: {row.unmutated.summary()} in {row.unmutated.seconds:.0f} s", flush=True)
            with applied(tree, mutation):
                row.mutated = run_tests(tree, mutation.tests, mutation.timeout_s, mutation.name)
            print(f"   mutated:   {row.mutated.summary()} in {row.mutated.seconds:.0f} s", flush=True)
            judge(row)
            for p in row.problems:
                print(f"   PROBLEM: {p}", flush=True)
    print(f"\nAll runs took {time.monotonic() - started:.0f} s.\n")
    print(table(rows))
    print()
    print(details(rows))
    failed = [r.mutation.name for r in rows if not r.skipped and r.verdict != "PROVEN"]
    if failed:
        print(f"\nNOT PROVEN: {', '.join(failed)}")
        return 1
    print(f"\nEvery mutation run was caught by its tests ({sum(1 for r in rows if not r.skipped)} mutations).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
