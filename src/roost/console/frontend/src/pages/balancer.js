import { api, attempt, cell, el, every, fill, formatBytes, formatRate, formatTime, status } from "../util.js";

const STATES = { done: "", "in progress": "moving", pending: "muted", proposed: "", refused: "bad", "not done": "bad" };
const arrow = (before, after) => (before === after ? String(before) : `${before} → ${after}`);
const list = (xs) => `[${xs.join(", ")}]`;
const percent = (x) => (x === null || x === undefined ? "—" : `${Math.round(x * 100)} %`);
const cores = (x) => (x === null || x === undefined ? "—" : x.toFixed(3));
// The executor's phases (Cruise Control's names) in words; the name itself shows beneath.
const PHASES = {
  NO_TASK_IN_PROGRESS: "idle", INTER_BROKER_REPLICA_MOVEMENT_TASK_IN_PROGRESS: "moving replicas",
  LEADER_MOVEMENT_TASK_IN_PROGRESS: "moving leaders", STOPPING_EXECUTION: "stopping", COMPLETED: "completed",
  STOPPED: "stopped",
};
// A violation in the goal's own measure: bytes run to millions, replicas to a few.
const compact = new Intl.NumberFormat("en", { notation: "compact", maximumSignificantDigits: 3 });
const words = (key) => key.replaceAll("_", " ");
const at = (seconds) => (seconds ? formatTime(seconds * 1000) : "—");

function shareBar(share) {
  const bar = el("span", { class: "bar" }, el("span", { class: "fill" }));
  bar.firstChild.style.width = `${Math.round((share || 0) * 100)}%`;
  return el("span", { class: "share" }, bar, ` ${percent(share)}`);
}

function brokerState(b) {
  if (!b.live) return el("span", { class: "down", text: "down" });
  if (b.excluded) return el("span", { class: "bad", text: "draining" });
  return el("span", { class: "up", text: "up" });
}

function renderDecision(data) {
  const auto = data.automatic;
  const rows = auto ? [
    ["decided", data.decision ? `${data.decision.kind}: ${data.decision.reason}` : "—"],
    ["at", data.decision ? at(data.decision.at) : "—"],
    ["last action", data.last_action ? `${data.last_action.kind}: ${data.last_action.reason}` : "none yet"],
    ["outcome", data.last_action ? `${data.last_action.outcome} (${formatTime(data.last_action.at * 1000)})` : "—"],
    ["threshold", auto.threshold === undefined ? "—" : String(auto.threshold)],
    ["brokers seen down", Object.keys(auto.brokers_down_since_ms || {}).join(", ") || "none"],
  ] : [["status", "no broker has published one: balancer.mode is off on every broker (or none ran it yet)"]];
  fill(document.querySelector("#balancer-decision tbody"), rows.map(([k, v]) => el("tr", {}, el("th", { text: k }),
    cell(v, { class: "wrap" }))));
}

function renderExecution(data) {
  const ex = data.execution;
  const phase = document.getElementById("execution-phase");
  phase.textContent = ex ? (PHASES[ex.phase] || ex.phase) + (ex.stale ? " (no update: its runner may be gone)" : "") : "none yet";
  phase.className = `figure${ex && (ex.stale || ex.phase === "STOPPED") ? " bad" : ""}`;
  document.getElementById("execution-phase-name").textContent = ex ? ex.phase : "";
  document.getElementById("execution-progress").textContent = ex ? `${ex.finished} / ${ex.total}` : "—";
  document.getElementById("execution-bar").value = ex ? ex.progress : 0;
  document.getElementById("execution-throttle").textContent = ex && ex.throttle ? formatRate(ex.throttle, "B") : "none";
  document.getElementById("reassignment-count").textContent = String(data.reassignments.length);
  const note = document.getElementById("execution-note");
  note.textContent = ex
    ? `${ex.owner}'s execution, started ${at(ex.started)}, updated ${at(ex.updated)}; tasks ${Object.entries(ex.tasks)
      .map(([k, v]) => `${words(k)} ${v}`).join(", ") || "none"}; at most ${ex.moves_per_broker} moves per broker`
      + (ex.stop_reason ? `; stopped: ${ex.stop_reason}` : "") + (ex.refused.length ? `; refused: ${ex.refused.join("; ")}` : "")
    : "No execution yet: roost balance run (or balancer.mode) starts one.";
  fill(document.querySelector("#execution-moving tbody"), data.reassignments.length ? data.reassignments.map((r) =>
    el("tr", { "data-partition": `${r.topic}-${r.partition}` }, cell(`${r.topic}-${r.partition}`, { class: "mono" }),
      cell(list(r.replicas), { class: "mono" }), cell(list(r.adding), { class: "mono" }), cell(list(r.removing), { class: "mono" })))
    : [el("tr", {}, cell("no reassignment in progress", { colspan: 4, class: "muted" }))]);
}

function renderPlan(plan, heading, note) {
  document.getElementById("plan-heading").textContent = heading;
  document.getElementById("plan-note").textContent = note;
  if (!plan) {
    for (const id of ["plan-goals", "plan-brokers", "plan-proposals"]) {
      fill(document.querySelector(`#${id} tbody`), [el("tr", {}, cell("no plan yet", { colspan: 6, class: "muted" }))]);
    }
    return;
  }
  fill(document.querySelector("#plan-goals tbody"), plan.goals.map((g) => el("tr", { "data-goal": g.goal, class: g.after > 0 && g.hard ? "bad" : "" },
    cell(g.goal, { class: "mono" }), cell(g.hard ? "hard" : "soft"), cell(compact.format(g.before), { class: "num" }),
    cell(compact.format(g.after), { class: `num${g.after > 0 ? "" : " met"}` }), cell(g.proposals, { class: "num" }))));
  fill(document.querySelector("#plan-brokers tbody"), plan.brokers.map(({ broker, before, after }) => el("tr", { "data-broker": broker },
    cell(broker, { class: "num" }), cell(arrow(before.replicas, after.replicas), { class: "num" }),
    cell(arrow(before.leaders, after.leaders), { class: "num" }),
    cell(arrow(formatBytes(before.disk_bytes), formatBytes(after.disk_bytes)), { class: "num" }),
    cell(arrow(formatRate(before.bytes_in_per_s, "B"), formatRate(after.bytes_in_per_s, "B")), { class: "num" }),
    cell(arrow(formatRate(before.bytes_out_per_s, "B"), formatRate(after.bytes_out_per_s, "B")), { class: "num" }))));
  const more = plan.proposals_total > plan.proposals.length ? [el("tr", {}, cell(`… and ${plan.proposals_total - plan.proposals.length} more`, { colspan: 5, class: "muted" }))] : [];
  fill(document.querySelector("#plan-proposals tbody"), plan.proposals.length ? plan.proposals.map((p) =>
    el("tr", { "data-partition": `${p.topic}-${p.partition}` }, cell(`${p.topic}-${p.partition}`, { class: "mono" }),
      cell(p.moves_data ? `${list(p.old_replicas)} → ${list(p.new_replicas)}` : `${list(p.new_replicas)} (leadership only)`, { class: "mono" }),
      cell(arrow(p.old_leader, p.new_leader), { class: "num" }), cell(p.goals.join(", "), { class: "goals" }),
      cell(p.state, { class: `state ${STATES[p.state] ?? ""}` }))).concat(more)
    : [el("tr", {}, cell("nothing to move: every goal is met, or cannot be met better", { colspan: 5, class: "muted" }))]);
}

export default function balancer() {
  let dryRun = null;
  document.getElementById("dry-run").addEventListener("click", async () => {
    status("planning…");
    const plan = await attempt(() => api("/api/balancer/plan"), "");
    if (plan) {
      dryRun = plan;
      renderPlan(plan, "Plan (dry run)", `made ${at(plan.computed_at)}: ${plan.proposals_total} partitions to change, `
        + `${formatBytes(plan.bytes_to_move)} to copy${plan.truncated ? " (cut at the action budget)" : ""}; nothing is carried out`);
    }
  });
  every(3000, async () => {
    const data = await api("/api/balancer");
    status("");
    document.getElementById("balancer-mode").textContent = data.mode;
    document.getElementById("balancer-controller").textContent = String(data.controller);
    renderDecision(data);
    fill(document.querySelector("#balancer-brokers tbody"), data.brokers.map((b) => el("tr", { "data-broker": b.broker },
      cell(b.broker, { class: "num" }), cell(b.rack), cell(brokerState(b)), cell(b.replicas, { class: "num replicas" }),
      cell(b.leaders, { class: "num leaders" }), cell(formatBytes(b.disk_bytes), { class: "num" }),
      cell(formatRate(b.bytes_in_per_s, "B"), { class: "num bytes-in" }), cell(shareBar(b.share.bytes_in_per_s)),
      cell(formatRate(b.bytes_out_per_s, "B"), { class: "num" }), cell(cores(b.cpu_cores), { class: "num" }),
      cell(b.sampled ? `${b.sample_age_s.toFixed(0)} s (${b.windows} windows)` : "no sample", { class: "num" }))));
    renderExecution(data);
    if (dryRun === null) {
      const plan = data.plan;
      const ex = data.execution;
      renderPlan(plan, "Plan of the last execution", plan
        ? `${plan.proposals_total} partitions to change, ${formatBytes(plan.bytes_to_move)} to copy; `
          + Object.entries(plan.states).map(([k, v]) => `${k} ${v}`).join(", ")
          + (ex && ex.running ? "" : " (the execution has ended)")
        : "No execution has published a plan yet.");
    }
  });
}
