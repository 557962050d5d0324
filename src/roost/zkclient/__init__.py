"""The broker's ZooKeeper client: sessions, reconnects, watches and multi against any ZooKeeper
ensemble (Roost's keepers or Apache ZooKeeper 3.8), on the broker's asyncio (uvloop) event loop.

    zk = ZkClient("zk1:2181,zk2:2181,zk3:2181/kafka", session_timeout=6.0)
    zk.add_listener(on_session)          # SessionEvent: CONNECTED / SUSPENDED / EXPIRED / CLOSED
    await zk.start()
    await zk.ensure_chroot()
    path, stat = await zk.create_with_stat("/brokers/ids/1", info, ephemeral=True, makepath=True)
    data, stat = await zk.get("/controller", watch=on_change)   # one-shot, run on the loop
    await zk.multi([Check("/controller_epoch", epoch_zk_version), SetData(state_path, state, v)])

Security (docs/keeper-security.md): `auth_data=[("digest", b"user:password")]` (addAuth on every
connection), `sasl=SaslCredentials(user, password)` (DIGEST-MD5 before any request, as ZooKeeper's
Java client), `ssl_context=` (TLS), `acl_provider=` (the ACL of a node created without one, from
its path: the broker's `zookeeper.set.acl`). A refused authentication is final (AuthFailedError).

What the broker reacts to: SUSPENDED (connection lost, the session may live: stop acting on
what needs the session to be certain), EXPIRED (the session and its ephemerals are gone, watches
were told with an EXPIRED event; give up controllership), then CONNECTED with
`new_session=True` (a new session is up: register the ephemerals and watches again). See
`client.py` for the session rules, `ops.py` for multi, `errors.py` for the error classes.

Why this client and not kazoo: chosen by measurement (bench/zkclient_bench.py). (A) kazoo with
its results and callbacks handed to the loop by call_soon_threadsafe, against (B) this package,
asyncio on Roost's sans-IO jute codec (roost.wire.zk). Same process, uvloop 0.23, CPython 3.11,
kazoo 2.11, servers on loopback (tickTime 500 ms, no fsync), on this 2-core machine shared with
other work (load average 2-3); two rounds in alternating order, ranges are over the rounds:

                                           keeper                 Apache ZooKeeper 3.8
                                      A kazoo      B asyncio     A kazoo      B asyncio
  watch-to-action p50 (ms)            0.64         0.37          0.59-0.66    0.43-0.48
  watch-to-action p99 (ms)            0.78-1.43    0.50-0.62     1.7-5.9      2.1-4.2
  get p50 / p99 (ms)                  0.33/0.4-0.9 0.115/0.15-0.4 0.40-0.49/0.6-4.2 0.19-0.22/0.35-2.2
  create p50 (ms)                     0.61-0.63    0.34          0.65-0.70    0.42-0.45
  multi(check+set) p50 (ms)           0.60         0.35          0.66-0.70    0.42
  CPU per sequential get (µs)         270-290      65            290-320      77-80
  CPU per watch round trip (µs)       610-650      245           670          230-250
  gets/s, 64 in flight                3,600-4,300  26,000-31,000 3,200-3,500  14,000-15,000
  loop lag at 1,500 gets/s, p99 (ms)  1.0-2.1      1.1-2.1       1.0          1.0
  expiry, connection blackholed       EXPIRED only after a server is reachable again (4.0-4.1 s,
    (2 s session): cut -> EXPIRED      healed at 3.5 s) for A; 2.00 s, while still cut off, for B
  heal -> new session (s)             0.08-0.12    0.03-0.04     0.08-0.11    0.03-0.04
  kill -9 of the member the client is on, same session kept, median first write (s):
    follower                          0.009        0.009         0.034        0.029
    leader (an election)              0.43         0.52          0.65         0.56

Decision: (B). A watch reaches the broker's loop in 55-75 % of kazoo's time, a request takes
35-65 % of it, and costs a quarter of the CPU (kazoo's threads and the bridge spend ~270 µs of
CPU per request; three brokers share two cores here). Neither client blocks the loop
measurably: at the same offered load the loop's lag is the same, within the machine's noise (the
worst stalls, 2-20 ms, came in both and follow the load of the machine). On a partition, (B)
reports EXPIRED when the session timeout has passed since the newest answered request (after
which the server may have expired the session), whereas kazoo stays SUSPENDED until it reaches
a server again: a broker cut off from ZooKeeper must learn by itself that it may have lost its
registration and controllership. Member kills are a tie: the servers' election dominates.
kazoo stays a test and bench dependency only.
"""

from roost.zkclient.client import (
    OPEN_ACL_UNSAFE,
    SaslCredentials,
    SessionEvent,
    SessionListener,
    SessionState,
    ZkClient,
)
from roost.zkclient.connect_string import ConnectString, parse_connect_string
from roost.zkclient.errors import (
    ApiError,
    AuthFailedError,
    BadArgumentsError,
    BadVersionError,
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RequestTooLargeError,
    RolledBackError,
    RuntimeInconsistencyError,
    SessionExpiredError,
    SessionMovedError,
    ZkError,
    error_for,
)
from roost.zkclient.ops import Check, Create, Delete, Op, OpOutcome, SetData
from roost.zkclient.watches import WatchedEvent, Watcher

__all__ = [
    "OPEN_ACL_UNSAFE",
    "ApiError",
    "AuthFailedError",
    "BadArgumentsError",
    "BadVersionError",
    "Check",
    "ClientClosedError",
    "ConnectString",
    "ConnectionLossError",
    "Create",
    "Delete",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "OpOutcome",
    "RequestTooLargeError",
    "RolledBackError",
    "RuntimeInconsistencyError",
    "SaslCredentials",
    "SessionEvent",
    "SessionExpiredError",
    "SessionListener",
    "SessionMovedError",
    "SessionState",
    "SetData",
    "WatchedEvent",
    "Watcher",
    "ZkClient",
    "ZkError",
    "error_for",
    "parse_connect_string",
]
