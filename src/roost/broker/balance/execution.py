"""The balancer's shell, used by the operator's side (`roost balance`, `roost broker decommission`,
through roost.admin.balancer) and by the active controller's automatic balancer (`balancer.mode`,
roost.broker.balance.auto): read the cluster and its load, plan (roost.broker.balance.planner), and
carry a plan out with the pure executor (roost.broker.balance.executor) over the Kafka protocol, as
Cruise Control does from outside the brokers: Metadata, DescribeConfigs, AlterPartitionReassignments,
ListPartitionReassignments, IncrementalAlterConfigs (the KIP-73 throttles) and ElectLeaders.

The requests go over plain sockets with Roost's own codec (confluent-kafka 2.16 has no partition
reassignment calls): plaintext listeners only. The load comes from the brokers' samples at
/roost/balancer/load/<id> in ZooKeeper (roost.broker.balance.sampler), and the execution's state
is kept at /roost/balancer/execution so that `roost balance status` and `stop` work from another
shell, and a stop asked there (/roost/balancer/stop) is seen by the running execution.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from roost.broker.balance.executor import Executor, Observed, Phase, TaskState
from roost.broker.balance.load import Placement, model_from_loads
from roost.broker.balance.model import BrokerInfo, PartitionInfo
from roost.broker.balance.planner import BrokerLoad, OptimizationFailure, Plan, broker_loads, plan  # noqa: F401 (OptimizationFailure: re-exported)
from roost.broker.balance.report import model_document, plan_document
from roost.wire.kafka import ApiKey, KafkaCodecError, RequestHeader, decode_response, encode_request

log = logging.getLogger("roost.broker.balance")

LOAD_PATH = "/roost/balancer/load"
EXECUTION_PATH = "/roost/balancer/execution"
AUTO_PATH = "/roost/balancer/auto"  # the automatic balancer's status (roost.broker.balance.auto)
STOP_PATH = "/roost/balancer/stop"
PLAN_PATH = "/roost/balancer/plan"  # the plan the last execution carries out (its readers: the console)
MAX_ANSWER_BYTES = 64 << 20
# Kafka's KIP-73 configs (roost.broker.replica.throttle has them on the broker's side).
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
ELECTION_NOT_NEEDED = 84
UNANSWERED = (OSError, KafkaCodecError, struct.error)


class BalanceError(Exception):
    """A request the cluster refused or did not answer (roost.admin.balancer's callers see it as
    AdminError's sibling; the CLI reports either in one line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining > 0:
        chunk = sock.recv(min(remaining, 65536))
        if not chunk:
            raise OSError("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def no_node_errors() -> tuple[type[Exception], ...]:
    """A missing znode, as kazoo (the CLI's client) or roost.zkclient (the broker's) says it."""
    from kazoo.exceptions import NoNodeError as KazooNoNode

    from roost.zkclient.errors import NoNodeError

    return (KazooNoNode, NoNodeError)


def ask(address: tuple[str, int], api: ApiKey, version: int, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One request to one broker, its decoded answer (raises one of UNANSWERED)."""
    header = RequestHeader(api, version, 1, "roost-balance")
    request = b"".join(bytes(part) for part in encode_request(header, body))
    with socket.create_connection((address[0].strip("[]"), address[1]), timeout=timeout_s) as sock:
        sock.sendall(request)
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        if not 0 < size <= MAX_ANSWER_BYTES:
            raise OSError(f"implausible answer size {size}")
        _correlation, answer = decode_response(api, version, bytearray(read_exactly(sock, size)))
    return answer


@dataclass(frozen=True)
class ClusterView:
    brokers: dict[int, tuple[str, int, str | None]]  # id -> host, port, rack
    controller: int
    partitions: dict[tuple[str, int], Observed]
    leaders: dict[tuple[str, int], int]


class ClusterOps:
    """The requests the balancer makes, to the brokers listed in `bootstrap`."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0) -> None:
        self.seeds = [(h, int(p)) for h, _, p in (a.strip().rpartition(":") for a in bootstrap.split(",") if a.strip())]
        self.timeout_s = timeout_s
        self.known: dict[int, tuple[str, int]] = {}

    def _any(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        last: BaseException | None = None
        for address in [*self.known.values(), *self.seeds]:
            try:
                return ask(address, api, version, body, self.timeout_s)
            except UNANSWERED as error:
                last = error
        raise BalanceError(f"{api.name}: no broker answered ({last})")

    def view(self) -> ClusterView:
        answer = self._any(ApiKey.METADATA, 1, {"topics": None})
        brokers = {b["node_id"]: (b["host"], b["port"], b["rack"]) for b in answer["brokers"]}
        self.known = {b: (h, p) for b, (h, p, _r) in brokers.items()}
        names = [t["name"] for t in answer["topics"] if not t["error_code"]]
        min_isr = self.topic_configs(names, "min.insync.replicas")
        moving = self.list_reassignments(answer["controller_id"])
        partitions: dict[tuple[str, int], Observed] = {}
        leaders: dict[tuple[str, int], int] = {}
        for topic in answer["topics"]:
            if topic["error_code"]:
                continue
            for p in topic["partitions"]:
                key = (topic["name"], p["partition_index"])
                partitions[key] = Observed(tuple(p["replica_nodes"]), tuple(p["isr_nodes"]), p["leader_id"],
                                           key in moving, int(min_isr.get(topic["name"]) or 1))
                leaders[key] = p["leader_id"]
        return ClusterView(brokers, answer["controller_id"], partitions, leaders)

    def topic_configs(self, topics: list[str], name: str) -> dict[str, str | None]:
        if not topics:
            return {}
        answer = self._any(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": t, "configuration_keys": [name]} for t in topics]})
        found: dict[str, str | None] = {}
        for result in answer["results"]:
            for entry in result["configs"]:
                if entry["name"] == name:
                    found[result["resource_name"]] = entry["value"]
        return found

    def _controller(self, controller: int | None) -> tuple[str, int]:
        if controller is None or controller not in self.known:
            view = self._any(ApiKey.METADATA, 1, {"topics": []})
            self.known = {b["node_id"]: (b["host"], b["port"]) for b in view["brokers"]}
            controller = view["controller_id"]
        if controller not in self.known:
            raise BalanceError("the cluster has no controller now")
        return self.known[controller]

    def list_reassignments(self, controller: int | None = None) -> dict[tuple[str, int], dict[str, list[int]]]:
        answer = ask(self._controller(controller), ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                     {"timeout_ms": int(self.timeout_s * 1000), "topics": None}, self.timeout_s)
        if answer["error_code"]:
            raise BalanceError(f"ListPartitionReassignments: error {answer['error_code']} {answer['error_message']}")
        return {(t["name"], p["partition_index"]): {"replicas": p["replicas"], "adding": p["adding_replicas"],
                                                    "removing": p["removing_replicas"]}
                for t in answer["topics"] for p in t["partitions"]}

    def reassign(self, targets: Mapping[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], str]:
        """AlterPartitionReassignments (None: cancel); the partitions refused, with why."""
        if not targets:
            return {}
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), replicas in sorted(targets.items()):
            topics.setdefault(topic, []).append({"partition_index": index, "replicas": replicas})
        answer = ask(self._controller(None), ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
            "timeout_ms": int(self.timeout_s * 1000),
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, self.timeout_s)
        if answer["error_code"]:
            return dict.fromkeys(targets, f"error {answer['error_code']}: {answer['error_message']}")
        return {(t["name"], p["partition_index"]): f"error {p['error_code']}: {p['error_message']}"
                for t in answer["responses"] for p in t["partitions"] if p["error_code"]}

    def elect_preferred(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """ElectLeaders(PREFERRED); the partitions whose election failed, with the error code
        (ELECTION_NOT_NEEDED is success)."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(partitions):
            by_topic.setdefault(topic, []).append(index)
        if not by_topic:
            return {}
        answer = ask(self._controller(None), ApiKey.ELECT_LEADERS, 1, {
            "election_type": 0, "timeout_ms": int(self.timeout_s * 1000),
            "topic_partitions": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}, self.timeout_s)
        return {(r["topic"], p["partition_id"]): p["error_code"] for r in answer["replica_election_results"]
                for p in r["partition_result"] if p["error_code"] not in (0, ELECTION_NOT_NEEDED)}

    def alter_configs(self, resource_type: int, name: str, changes: Mapping[str, str | None],
                      broker: int | None = None) -> str | None:
        """IncrementalAlterConfigs: SET each value, DELETE each None; sent to `broker` (a broker's
        own configs must be asked of it) or any. The error, or None."""
        body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": [
            {"name": k, "config_operation": DELETE if v is None else SET, "value": v} for k, v in changes.items()]}],
            "validate_only": False}
        if broker is not None and broker not in self.known:
            with contextlib.suppress(BalanceError):
                self._controller(None)  # learns the brokers' addresses
        try:
            answer = ask(self.known[broker], ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body, self.timeout_s) \
                if broker is not None else self._any(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)
        except (*UNANSWERED, KeyError, BalanceError) as error:
            return f"no answer ({error!r})"
        for response in answer["responses"]:
            if response["error_code"]:
                return f"error {response['error_code']}: {response['error_message']}"
        return None


# the model ------------------------------------------------------------------------------------
def cluster_model(view: ClusterView, loads: Mapping[int, Mapping[str, Any]], *, excluded: Iterable[int] = (),
                  topics: Iterable[str] | None = None) -> tuple[list[BrokerInfo], list[PartitionInfo]]:
    """The planner's model of the cluster now (internal topics included: their replicas weigh
    like any other's). Replicas on brokers that are not registered are on dead brokers."""
    wanted = set(topics) if topics is not None else None
    placements = [Placement(t, p, o.replicas, o.leader, o.isr, o.min_insync_replicas)
                  for (t, p), o in view.partitions.items() if wanted is None or t in wanted]
    racks = {b: (loads.get(b, {}).get("rack") or rack) for b, (_h, _p, rack) in view.brokers.items()}
    dead = {r for p in placements for r in p.replicas} - set(view.brokers)
    return model_from_loads(racks, placements, loads, excluded=excluded, dead=dead)


def read_loads(zk: Any) -> dict[int, dict[str, Any]]:
    """Every broker's published load document (a broker that has none yet is left out)."""
    missing = no_node_errors()
    unreadable: tuple[type[Exception], ...] = (*missing, ValueError)
    found: dict[int, dict[str, Any]] = {}
    try:
        children = zk.get_children(LOAD_PATH)
    except missing:
        return found
    for child in children:
        try:
            data, _ = zk.get(f"{LOAD_PATH}/{child}")
            found[int(child)] = json.loads(data)
        except unreadable:
            continue
    return found


def make_plan(ops: ClusterOps, zk: Any, *, excluded: Iterable[int] = (), max_actions: int = 1000) -> Plan:
    view = ops.view()
    if view.partitions and any(o.reassigning for o in view.partitions.values()):
        raise BalanceError("a reassignment is in progress: the balancer plans only once it is done "
                         "(roost balance status shows it)")
    brokers, partitions = cluster_model(view, read_loads(zk), excluded=excluded)
    return plan(brokers, partitions, max_actions=max_actions)


def load_model(view: ClusterView, loads: Mapping[int, Mapping[str, Any]]) -> tuple[dict[int, BrokerInfo],
                                                                             dict[int, BrokerLoad]]:
    """The planner's model of each broker now (its info, its load) without planning."""
    brokers, partitions = cluster_model(view, loads)
    return {b.broker_id: b for b in brokers}, broker_loads(brokers, partitions)


def model_rows(view: ClusterView, loads: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    return model_document(*load_model(view, loads))


# executing ------------------------------------------------------------------------------------
def write_plan(zk: Any, the_plan: Plan, started: float) -> None:
    """Publish the plan an execution carries out, once at its start. It is for readers only, so
    a failure to write it is logged and the execution goes on."""
    data = json.dumps({"started": started, **plan_document(the_plan)}, sort_keys=True).encode()
    try:
        if zk.exists(PLAN_PATH) is None:
            zk.ensure_path(PLAN_PATH)
        zk.set(PLAN_PATH, data)
    except Exception as error:  # kazoo's and roost.zkclient's errors have no common base
        log.warning("balance: the plan was not published at %s: %r", PLAN_PATH, error)


def read_plan(zk: Any) -> dict[str, Any] | None:
    """The plan the last execution published (None: none has)."""
    try:
        data, _ = zk.get(PLAN_PATH)
    except no_node_errors():
        return None
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


def write_state(zk: Any, document: Mapping[str, Any]) -> None:
    data = json.dumps(document, sort_keys=True).encode()
    if zk.exists(EXECUTION_PATH) is None:
        zk.ensure_path(EXECUTION_PATH)
    zk.set(EXECUTION_PATH, data)


def read_state(zk: Any) -> dict[str, Any] | None:
    missing = no_node_errors()
    try:
        data, _ = zk.get(EXECUTION_PATH)
    except missing:
        return None
    return json.loads(data) if data else None


@dataclass
class Throttles:
    """The throttles an execution set, so they can be removed whatever happens (Cruise
    Control's ReplicationThrottleHelper): the rate on every broker a move touches, both replica
    lists on every topic moved (merged with what the topic had, which is put back after)."""

    rate: int | None
    brokers: list[int]
    topics: dict[str, dict[str, str | None]]  # topic -> config -> the value it had before (None: unset)

    def document(self) -> dict[str, Any]:
        return {"rate": self.rate, "brokers": self.brokers, "topics": self.topics}


def apply_throttles(ops: ClusterOps, executor: Executor, rate: int | None) -> Throttles:
    if rate is None:
        return Throttles(None, [], {})
    brokers = sorted(executor.throttled_brokers())
    wanted = executor.throttled_replicas()
    before = {name: {LEADER_THROTTLED_REPLICAS: ops.topic_configs([name], LEADER_THROTTLED_REPLICAS).get(name),
                     FOLLOWER_THROTTLED_REPLICAS: ops.topic_configs([name], FOLLOWER_THROTTLED_REPLICAS).get(name)}
              for name in wanted}
    throttles = Throttles(rate, brokers, before)
    for broker in brokers:
        error = ops.alter_configs(BROKER_RESOURCE, str(broker), dict.fromkeys(RATE_CONFIGS, str(rate)), broker)
        if error:
            raise BalanceError(f"setting the replication throttle on broker {broker}: {error}")
    for topic, pairs in wanted.items():
        changes: dict[str, str | None] = {}
        for name in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS):
            had = before[topic][name] or ""
            merged = "*" if had.strip() == "*" else ",".join(x for x in (had, pairs) if x)
            changes[name] = merged
        error = ops.alter_configs(TOPIC_RESOURCE, topic, changes)
        if error:
            raise BalanceError(f"setting the throttled replicas of {topic}: {error}")
    return throttles


def remove_throttles(ops: ClusterOps, throttles: Mapping[str, Any]) -> list[str]:
    """Put every throttle an execution set back as it was; the failures (a dead broker keeps
    its rate until it is asked again: `roost balance stop` does)."""
    failures: list[str] = []
    if throttles.get("rate") is None:
        return failures
    for broker in throttles.get("brokers", []):
        error = ops.alter_configs(BROKER_RESOURCE, str(broker), dict.fromkeys(RATE_CONFIGS), broker)
        if error:
            failures.append(f"broker {broker}: {error}")
    for topic, before in throttles.get("topics", {}).items():
        error = ops.alter_configs(TOPIC_RESOURCE, topic, {name: (value or None) for name, value in before.items()})
        if error:
            failures.append(f"topic {topic}: {error}")
    return failures


def execute(ops: ClusterOps, zk: Any, the_plan: Plan, *, moves_per_broker: int = 5, throttle: int | None = None,
            poll_s: float = 1.0, timeout_s: float = 3600.0, report: Callable[[Executor], None] = lambda e: None,
            clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
            in_charge: Callable[[], bool] = lambda: True, owner: Mapping[str, Any] | None = None,
            dead_at_start: Iterable[int] = ()) -> Executor:
    """Carry `the_plan` out; returns the executor in its final phase (COMPLETED or STOPPED).

    `in_charge` is asked before every step: once it says no (the automatic balancer's broker is
    no longer the active controller), the execution is abandoned as it is: nothing more is
    submitted, cancelled or written, the moves in progress go on (Kafka's controller finishes
    them) and the throttles and the state are the new controller's to take over (`owner`, in
    the state, says whose execution it is)."""
    executor = Executor(the_plan.proposals, moves_per_broker=moves_per_broker,
                        dead_at_start=frozenset(dead_at_start))
    if zk.exists(STOP_PATH) is not None:
        zk.delete(STOP_PATH)
    throttles = apply_throttles(ops, executor, throttle)
    started, started_at = clock(), time.time()
    abandoned = False

    def save() -> None:
        write_state(zk, {"executor": executor.status(), "throttles": throttles.document(), "started": started_at,
                         "updated": time.time(), "owner": dict(owner) if owner is not None else None})

    save()
    write_plan(zk, the_plan, started_at)
    elections_tried = 0
    try:
        while not executor.finished:
            if not in_charge():
                abandoned = True
                break
            if zk.exists(STOP_PATH) is not None:
                _cancel(ops, executor.stop("stop asked (roost balance stop)"))
            elif clock() - started > timeout_s:
                _cancel(ops, executor.stop(f"not done within {timeout_s:g} s"))
            if executor.phase == Phase.STOPPING:
                break
            try:
                view = ops.view()
            except BalanceError as error:
                log.warning("balance: cannot read the cluster (%s); trying again", error)
                sleep(poll_s)
                continue
            live = set(view.brokers)
            executor.observe(view.partitions, live)
            if executor.phase == Phase.STOPPING:
                _cancel(ops, [t for t in executor.tasks if t.state == TaskState.CANCELLED])
                break
            batch = executor.next_batch(view.partitions, live)
            if batch:
                refused = ops.reassign({t.key: list(t.proposal.new_replicas) for t in batch})
                for task in batch:
                    if task.key in refused:
                        task.state, task.reason = TaskState.REFUSED, refused[task.key]
            if executor.phase == Phase.LEADER_MOVEMENT:
                elections_tried += 1
                if _move_leaders(ops, executor, view) or elections_tried > 30:
                    executor.leadership_done()
            save()
            report(executor)
            if not executor.finished:
                sleep(poll_s)
    finally:
        if not abandoned:
            _finish(ops, executor, throttles, save, report)
    if abandoned:
        executor.stop("no longer the active controller: the new one takes the execution over")
        executor.stopped()
        report(executor)
    return executor


def _finish(ops: ClusterOps, executor: Executor, throttles: Throttles, save: Callable[[], None],
            report: Callable[[Executor], None]) -> None:
    """However an execution ends (done, stopped, an exception): its throttles removed, its final
    phase saved."""
    failures = remove_throttles(ops, throttles.document())
    if failures:
        log.warning("balance: throttles not removed: %s (roost balance stop removes them)", failures)
    else:
        throttles.rate, throttles.brokers, throttles.topics = None, [], {}
    if executor.phase == Phase.STOPPING:
        executor.stopped()
    elif not executor.finished:  # an exception: what was in progress goes on; say so
        executor.stop("the execution was interrupted")
        executor.stopped()
    save()
    report(executor)


def _cancel(ops: ClusterOps, tasks: Iterable[Any]) -> None:
    """Roll the in-progress moves back (Kafka's null-target reassignment). Roost's controller
    refuses while none of the old replicas is in sync; such a move is left to finish."""
    keys = [t.key for t in tasks]
    try:
        refused = ops.reassign(dict.fromkeys(keys))
    except (BalanceError, *UNANSWERED) as error:
        log.warning("balance: cancelling %d moves failed: %s", len(keys), error)
        return
    for key, why in refused.items():
        log.warning("balance: the move of %s-%d was not cancelled: %s", *key, why)


def _move_leaders(ops: ClusterOps, executor: Executor, view: ClusterView) -> bool:
    """The leadership phase: replica order first (a reassignment that moves no data), then
    preferred elections. True when every leader is where the plan puts it."""
    reorder = {p.partition: list(p.new_replicas) for p in executor.leadership
               if p.partition in view.partitions and view.partitions[p.partition].replicas != p.new_replicas
               and set(view.partitions[p.partition].replicas) == set(p.new_replicas)}
    if reorder:
        ops.reassign(reorder)
        return False
    wrong = [p.partition for p in executor.leadership if view.leaders.get(p.partition) != p.new_replicas[0]
             and p.partition in view.partitions]
    if not wrong:
        return True
    ops.elect_preferred(wrong)
    return False


def stop(ops: ClusterOps, zk: Any) -> dict[str, Any]:
    """`roost balance stop`: ask a running execution to stop; and, whoever runs it, cancel the
    moves its state names as in progress and remove the throttles it set."""
    zk.ensure_path(STOP_PATH)
    zk.set(STOP_PATH, str(time.time()).encode())  # its mtime: when the last stop was asked
    state = read_state(zk) or {}
    moving = ops.list_reassignments()
    in_progress = []
    for entry in state.get("executor", {}).get("in_progress", []):
        name = entry.split(":", 1)[0]
        topic, _, index = name.rpartition("-")
        if (topic, int(index)) in moving:
            in_progress.append((topic, int(index)))
    refused = ops.reassign(dict.fromkeys(in_progress)) if in_progress else {}
    failures = remove_throttles(ops, state.get("throttles", {}))
    if state:
        state["throttles"] = {"rate": None, "brokers": [], "topics": {}} if not failures else state["throttles"]
        write_state(zk, state)
    return {"cancelled": [f"{t}-{p}" for t, p in in_progress if (t, p) not in refused],
            "not_cancelled": {f"{t}-{p}": why for (t, p), why in refused.items()}, "throttle_failures": failures}


def read_auto(zk: Any) -> dict[str, Any] | None:
    """The automatic balancer's last published status (None: no broker ran it)."""
    try:
        data, _ = zk.get(AUTO_PATH)
    except no_node_errors():
        return None
    return json.loads(data) if data else None
