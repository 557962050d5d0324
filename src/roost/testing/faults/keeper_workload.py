"""The keeper workload: kazoo sessions doing register reads, writes and versioned sets, watches,
ephemeral nodes and a sequential-node queue, every operation recorded with its outcome.

Outcomes: a reply is ok; an error that says the server did nothing (BadVersion, NoNode, NodeExists)
is fail; a timeout, a lost connection or an expired session is unknown for anything that writes
(it may have been applied) and fail for a read (a read that returned nothing changed nothing).

Registers are used for `KEY_LIFETIME_S` seconds each, then replaced by fresh ones (Jepsen's
"independent keys"): register i of generation g is `/fault/reg/g<g>-<i>`, made by the first session
that needs it. Linearizability is checked per key (P-compositionality), so each search sees a few
seconds of one register instead of the whole run: an unknown write nobody read stays open only
until its register's history ends, not for the rest of a 30-minute run (which made the search of
one ever-used register give up). The final drain reads every register ever made, so a write lost
after its register went out of use is still seen missing.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from roost.testing.faults.recorder import Recorder
from roost.testing.history.model import FAIL, OK, UNKNOWN

OP_TIMEOUT_S = 5.0
SESSION_TIMEOUT_S = 6.0
REGISTERS = 5  # in use at once
KEY_LIFETIME_S = 15.0  # then each register is replaced by a fresh one
REGISTER_PARENT = "/fault/reg"
DEFINITE = (BadVersionError, NoNodeError, NodeExistsError)


def register_path(i: int, generation: int = 0) -> str:
    return f"{REGISTER_PARENT}/g{generation}-{i}"


INITIAL = "init"


@dataclass
class KeeperWorkload:
    hosts: str
    recorder: Recorder
    workers: int = 4
    seed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    expired_ephemerals: list[str] = field(default_factory=list)  # paths of sessions seen expired
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    key_lifetime_s: float = KEY_LIFETIME_S
    _registrations: list[int] = field(default_factory=lambda: [0])

    def generation(self) -> int:
        """Which registers are in use now (the same for every session: the run's shared clock)."""
        return int(self.recorder.t() // self.key_lifetime_s)

    def client(self) -> KazooClient:
        client = KazooClient(hosts=self.hosts, timeout=SESSION_TIMEOUT_S,
                             connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0})
        client.start(timeout=30)
        return client

    def setup(self) -> None:
        client = self.client()
        try:
            for path in ("/fault/eph", "/fault/queue", REGISTER_PARENT):
                client.ensure_path(path)
            for i in range(REGISTERS):
                if not client.exists(register_path(i, self.generation())):
                    client.create(register_path(i, self.generation()), INITIAL.encode())
        finally:
            client.stop()
            client.close()

    def start(self) -> None:
        self.setup()
        for worker in range(self.workers):
            thread = threading.Thread(target=self._run, args=(worker,), name=f"keeper-worker-{worker}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def join(self, timeout: float) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout)

    # one worker: sessions one after another (a new one when the last expired) ---------------
    def _run(self, worker: int) -> None:
        rng = random.Random(self.seed * 1000 + worker)
        generation = 0
        while not self.stop.is_set():
            generation += 1
            try:
                self._session(worker, generation, rng)
            except Exception as error:
                self.errors.append(f"worker {worker}: {error!r}")
                self.stop.wait(0.5)

    def _session(self, worker: int, generation: int, rng: random.Random) -> None:
        process = f"c{worker}s{generation}"
        rec = self.recorder
        try:
            client = self.client()
        except (KazooTimeoutError, KazooException):
            self.stop.wait(0.5)
            return
        lost = threading.Event()

        def on_state(state: KazooState) -> None:
            if state == KazooState.LOST:
                lost.set()

        client.add_listener(on_state)
        ephemeral = f"/fault/eph/{process}"
        versions: dict[str, int] = {}
        made: set[str] = set()  # registers this session knows exist
        try:
            self._call(process, "create-ephemeral", ephemeral, None,
                       lambda: client.create_async(ephemeral, b"", ephemeral=True), writes=True)
            n = 0
            while not self.stop.is_set() and not lost.is_set():
                n += 1
                self._one(client, process, rng, n, versions, made)
        finally:
            if lost.is_set():
                rec.record(process, "expired", rec.t(), rec.t())
                self.expired_ephemerals.append(ephemeral)
            else:
                rec.record(process, "closed", rec.t(), rec.t())
            try:
                client.stop()
                client.close()
            except Exception:
                pass

    def _call(self, process: str, f: str, key: Any, value: Any, start: Any, writes: bool,
              result_of: Any = lambda r: None, record: bool = True) -> tuple[str, Any, float, float]:
        """Run one request (`start()` returns kazoo's async result) and record it: reads keep what
        they saw as their value, writes what they returned as their result."""
        rec = self.recorder
        invoke = rec.t()
        try:
            reply = start().get(timeout=OP_TIMEOUT_S)
            outcome, result = OK, result_of(reply)
        except DEFINITE:
            outcome, result = FAIL, None
        except (KazooTimeoutError, KazooException):
            outcome, result = (UNKNOWN if writes else FAIL), None
        complete = rec.t()
        if record:
            if f in ("read", "read-seq"):
                rec.record(process, f, invoke, complete, outcome, key, result)
            else:
                rec.record(process, f, invoke, complete, outcome, key, value, result)
        return outcome, result, invoke, complete

    def _register(self, client: KazooClient, rng: random.Random, made: set[str]) -> str:
        """A register of the current generation, made (with the initial data, version 0) if this
        session has not seen it yet. Not recorded: the model starts every key at (INITIAL, 0), and
        operations before the create fail with NoNode, a definite answer (dropped by the search)."""
        path = register_path(rng.randrange(REGISTERS), self.generation())
        if path not in made:
            try:
                client.create(path, INITIAL.encode())
                made.add(path)
            except NodeExistsError:
                made.add(path)
            except (KazooTimeoutError, KazooException):
                pass  # the operation below will fail or be unknown; the next one tries again
        return path

    def _one(self, client: KazooClient, process: str, rng: random.Random, n: int, versions: dict[str, int],
             made: set[str]) -> None:
        path = self._register(client, rng, made)
        roll = rng.random()
        if roll < 0.3:  # a linearizable read: sync, then read
            def synced_read() -> Any:
                client.sync(path)
                return client.get_async(path)
            outcome, seen, _, _ = self._call(process, "read", path, None, synced_read, writes=False,
                                       result_of=lambda r: (r[0].decode(), r[1].version))
            if outcome == OK:
                versions[path] = seen[1]
        elif roll < 0.45:  # a plain read (sequentially consistent only)
            outcome, seen, _, _ = self._call(process, "read-seq", path, None, lambda: client.get_async(path),
                                       writes=False, result_of=lambda r: (r[0].decode(), r[1].version))
            if outcome == OK:
                versions[path] = seen[1]
        elif roll < 0.65:
            data = f"{process}-{n}"
            self._call(process, "write", path, data, lambda: client.set_async(path, data.encode()),
                       writes=True, result_of=lambda stat: stat.version)
        elif roll < 0.85:
            expected = versions.get(path, 0)
            data = f"{process}-{n}"
            self._call(process, "cas", path, (expected, data),
                       lambda: client.set_async(path, data.encode(), version=expected), writes=True,
                       result_of=lambda stat: stat.version)
        elif roll < 0.9:
            self._watch(client, process, path)
        elif roll < 0.95:
            self._queue(client, process, rng, n)
        elif self.expired_ephemerals:
            gone = rng.choice(self.expired_ephemerals)

            def synced_exists() -> Any:
                client.sync(gone)
                return client.exists_async(gone)
            self._call(process, "exists-synced", gone, None, synced_exists, writes=False,
                       result_of=lambda stat: stat is not None)
        else:
            self.stop.wait(0.01)

    def _watch(self, client: KazooClient, process: str, path: str) -> None:
        rec = self.recorder
        self._registrations[0] += 1
        registration = f"{process}-w{self._registrations[0]}"

        def fired(event: Any) -> None:  # kazoo's callback thread: one list append, no lock
            rec.record(process, "watch-event", rec.t(), rec.t(), OK, path, registration)

        outcome, seen, invoke, complete = self._call(
            process, "watch-set", path, None, lambda: client.get_async(path, watch=fired), writes=False,
            result_of=lambda r: (r[0].decode(), r[1].version), record=False)
        if outcome == OK:  # value: the version watched; result: the registration
            rec.record(process, "watch-set", invoke, complete, OK, path, seen[1], registration)

    def _queue(self, client: KazooClient, process: str, rng: random.Random, n: int) -> None:
        if rng.random() < 0.6:
            value = f"{process}-q{n}"
            self._call(process, "enqueue", "/fault/queue", value,
                       lambda: client.create_async("/fault/queue/item-", value.encode(), sequence=True),
                       writes=True, result_of=lambda created: created)
            return
        rec = self.recorder
        invoke = rec.t()
        head, data = None, None
        try:
            children = sorted(client.get_children("/fault/queue"))
            if not children:
                return
            head = f"/fault/queue/{children[0]}"
            data = client.get(head)[0].decode()
            client.delete(head)
            rec.record(process, "dequeue", invoke, rec.t(), OK, "/fault/queue", head, data)
        except NoNodeError:
            rec.record(process, "dequeue", invoke, rec.t(), FAIL, "/fault/queue", head, data)
        except (KazooTimeoutError, KazooException):  # the delete may have happened: that item may be gone
            rec.record(process, "dequeue", invoke, rec.t(), UNKNOWN, "/fault/queue", head, data)

    def drain(self) -> None:
        """After the faults: every queued item still there, as one op (the queue check's end)."""
        client = self.client()
        rec = self.recorder
        invoke = rec.t()
        try:
            client.sync("/fault/queue")
            left = []
            for child in sorted(client.get_children("/fault/queue")):
                try:
                    left.append(client.get(f"/fault/queue/{child}")[0].decode())
                except NoNodeError:
                    pass
            rec.record("final", "queue-drain", invoke, rec.t(), OK, "/fault/queue", None, tuple(left))
            client.sync(REGISTER_PARENT)
            # A last linearizable read of every register ever made (a write lost after its
            # register went out of use shows here).
            for name in sorted(client.get_children(REGISTER_PARENT)):
                path = f"{REGISTER_PARENT}/{name}"
                start = rec.t()
                client.sync(path)
                data, stat = client.get(path)
                rec.record("final", "read", start, rec.t(), OK, path, (data.decode(), stat.version))
        finally:
            client.stop()
            client.close()
