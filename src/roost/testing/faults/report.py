"""A run's report in its output directory: report.md (verdicts, counts, faults), timeline.png
(throughput and latency over time with the faults drawn on it), history.jsonl (every operation),
verdicts.json (machine-readable)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from roost.testing.history.model import History, Verdict

CLIENT_FS_SKIPPED = {"watch-event", "expired", "closed", "assign", "rebalance"}
WAITS = {"poll"}  # a poll's duration is mostly its own wait for records: not a latency
FAULT_COLOURS = {"kill": "#d62728", "pause": "#ff7f0e", "partition": "#1f77b4", "powercut": "#7f7f7f"}
HEALS = {"restart": "kill", "resume": "pause", "heal": "partition", "power on": "powercut"}
NOT_FAULTS = {*HEALS, "heal-all"}  # the end of the faults, not one


def counts(history: History) -> dict[str, Any]:
    by_f: dict[str, Counter[str]] = defaultdict(Counter)
    for op in history.client_ops():
        if op.f not in CLIENT_FS_SKIPPED:
            by_f[op.f][op.outcome] += 1
    faults = Counter(op.f for op in history.faults() if op.f not in NOT_FAULTS)
    return {"operations": {f: dict(c) for f, c in sorted(by_f.items())},
            "total": dict(sum(by_f.values(), Counter())), "faults": dict(faults)}


def fault_spans(history: History) -> list[tuple[str, float, float, Any]]:
    """(kind, start, end, detail) per fault, ended by its heal (or the end of the run)."""
    spans, open_spans = [], []
    end = max((op.complete for op in history), default=0.0)
    for op in history.faults():
        if op.f == "heal-all":
            continue
        if op.f in HEALS:
            kind = HEALS[op.f]
            for i, (k, start, detail) in enumerate(open_spans):
                if k == kind:
                    spans.append((kind, start, op.complete, detail))
                    open_spans.pop(i)
                    break
        else:
            open_spans.append((op.f, op.invoke, op.value))
    spans += [(k, start, end, detail) for k, start, detail in open_spans]
    return spans


def plot(history: History, path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ops = [op for op in history.client_ops() if op.f not in CLIENT_FS_SKIPPED]
    if not ops:
        return False
    seconds = int(max(op.complete for op in ops)) + 1
    series: dict[str, list[int]] = {outcome: [0] * seconds for outcome in ("ok", "fail", "unknown")}
    latency: list[list[float]] = [[] for _ in range(seconds)]
    for op in ops:
        second = int(op.complete)
        series[op.outcome][second] += 1
        if op.outcome == "ok" and op.f not in WAITS:
            latency[second].append((op.complete - op.invoke) * 1000)
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(12, 6))
    xs = list(range(seconds))
    for outcome, colour in (("ok", "#2ca02c"), ("fail", "#ff7f0e"), ("unknown", "#d62728")):
        top.plot(xs, series[outcome], label=outcome, color=colour, linewidth=1)
    top.set_ylabel("operations / s")
    top.legend(loc="upper right")
    p50 = [sorted(v)[len(v) // 2] if v else float("nan") for v in latency]
    p99 = [sorted(v)[min(len(v) - 1, int(len(v) * 0.99))] if v else float("nan") for v in latency]
    bottom.plot(xs, p50, label="p50", color="#1f77b4", linewidth=1)
    bottom.plot(xs, p99, label="p99", color="#9467bd", linewidth=1)
    bottom.set_yscale("log")
    bottom.set_ylabel("latency of ok ops, polls aside (ms)")
    bottom.set_xlabel("seconds since the start of the run")
    bottom.legend(loc="upper right")
    for kind, start, end, _ in fault_spans(history):
        for axis in (top, bottom):
            axis.axvspan(start, max(end, start + 0.2), color=FAULT_COLOURS.get(kind, "#bbbbbb"), alpha=0.2)
        top.annotate(kind, (start, 1), xycoords=("data", "axes fraction"), fontsize=7, rotation=90,
                     va="top", ha="right")
    top.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def write(out: Path, history: History, verdicts: list[Verdict], settings: dict[str, Any]) -> Path:
    history.dump(out / "history.jsonl")
    summary = counts(history)
    valid = all(v.valid is True for v in verdicts)
    (out / "verdicts.json").write_text(json.dumps({
        "valid": valid, "settings": settings, "counts": summary,
        "verdicts": [{"checker": v.checker, "valid": v.valid, "stats": v.stats, "problems": v.problems[:50]}
                     for v in verdicts]}, indent=2, default=str))
    pictured = plot(history, out / "timeline.png", f"{settings.get('system')} seed {settings.get('seed')}")
    lines = [f"# Fault run: {settings.get('system')}, seed {settings.get('seed')}", "",
             f"**{'VALID' if valid else 'NOT VALID'}** — " + ", ".join(
                 f"{v.checker}: {({True: 'valid', False: 'INVALID', None: 'unknown'})[v.valid]}" for v in verdicts),
             "", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()), "",
             "## Operations", "", "| f | ok | fail | unknown |", "|---|---|---|---|"]
    for f, c in summary["operations"].items():
        lines.append(f"| {f} | {c.get('ok', 0)} | {c.get('fail', 0)} | {c.get('unknown', 0)} |")
    total = summary["total"]
    lines.append(f"| **all** | {total.get('ok', 0)} | {total.get('fail', 0)} | {total.get('unknown', 0)} |")
    lines += ["", "## Faults", "", ", ".join(f"{k}: {n}" for k, n in sorted(summary["faults"].items())) or "none", ""]
    if pictured:
        lines += ["![throughput, latency and faults](timeline.png)", ""]
    lines += ["| kind | from (s) | to (s) | detail |", "|---|---|---|---|"]
    lines += [f"| {k} | {s:.1f} | {e:.1f} | {d} |" for k, s, e, d in fault_spans(history)]
    lines += ["", "## Verdicts", ""]
    for verdict in verdicts:
        lines += ["```", verdict.explain(limit=20), "```", ""]
    report = out / "report.md"
    report.write_text("\n".join(lines))
    return report
