"""roost.testing.history: operation histories and the checkers that judge them.

A fault run (scripts/fault_run.py) records every client operation with its invocation, its
completion and its outcome (ok, fail, unknown) into a `History`; the checkers here decide whether
that history is allowed by the consistency model Roost claims:

- `linearizable.check` — registers with read, write and compare-and-set (Wing-Gong / Lowe search,
  memoised, split per key), unknown outcomes treated as may-have-happened, with a step budget and
  a clear "too hard" verdict instead of running forever;
- `zookeeper.check` — ZooKeeper's own guarantees: sequential consistency per session (versions
  never go back, a session reads its own writes, one value per version), watches that fire once
  per registration and before the data they announce, ephemeral nodes gone once their session expired;
- `broker.check` — lost acknowledged writes, duplicates, reordered offsets, consumers skipping or
  going back, committed offsets going back, aborted records visible to read_committed;
- `share.check` — share groups (KIP-932): no record delivered again after its accept or reject
  was answered, none acknowledged-produced that never ends (accepted, or archived by a reject or
  at the delivery limit), delivery counts that never go down.

Pure Python, no I/O beyond reading and writing a history file: users can run the checkers on
histories recorded against their own build.
"""

from roost.testing.history.model import FAIL, OK, UNKNOWN, History, Op, Verdict

__all__ = ["FAIL", "OK", "UNKNOWN", "History", "Op", "Verdict"]
