import { api, attempt, cell, clockTime, el, every, fill, lazyCharts, readOnly, status } from "../util.js";

export default function group() {
  const name = document.body.dataset.group;
  const path = `/api/groups/${encodeURIComponent(name)}`;
  const drawChart = lazyCharts(({ lineChart }) => {
    const lag = lineChart(document.getElementById("lag-chart"), "total lag", clockTime);
    return (data) => lag(data.lag_history);
  });
  every(2000, async () => {
    const data = await api(path);
    document.getElementById("group-state").textContent = data.state;
    document.getElementById("member-count").textContent = String(data.members.length);
    document.getElementById("total-lag").textContent = String(data.total_lag);
    fill(document.querySelector("#offsets tbody"), data.offsets.map((o) => el("tr", {},
      cell(o.topic, { class: "mono" }), cell(o.partition), cell(o.committed), cell(o.end_offset),
      cell(o.lag, { class: o.lag ? "bad" : "" }), cell(o.client_id))));
    fill(document.querySelector("#members tbody"), data.members.map((m) => el("tr", {},
      cell(m.client_id), cell(m.host), cell(m.member_id, { class: "mono" }),
      cell(m.assignment.map((a) => `${a.topic}[${a.partition}]`).join(" ")))));
    await drawChart(data);
  });

  const form = document.getElementById("reset");
  const plan = document.getElementById("reset-plan");
  const apply = document.getElementById("reset-apply");
  let previewed = null;
  const request = () => {
    const fields = new FormData(form);
    const topics = String(fields.get("topics") || "").split(",").map((t) => t.trim()).filter(Boolean);
    return { to: String(fields.get("to")), topics: topics.length ? topics : null };
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    previewed = null;
    if (apply) apply.hidden = true;
    const body = request();
    const data = await attempt(() => api(`${path}/reset-preview`, { method: "POST", body }));
    if (!data) { plan.hidden = true; return; }
    fill(plan.querySelector("tbody"), data.plan.map((row) => el("tr", {},
      cell(row.topic, { class: "mono" }), cell(row.partition), cell(row.current), cell(row.new, { class: "new-offset" }))));
    plan.hidden = false;
    previewed = body;
    status(readOnly() ? "preview only: this console is read-only" : "preview: nothing changed yet; apply to commit these offsets");
    if (apply) apply.hidden = false;
  });
  if (apply) {
    apply.addEventListener("click", async () => {
      if (!previewed) return;
      if (!window.confirm(`Commit these offsets for group ${name}?`)) return;
      const done = await attempt(() => api(`${path}/reset`, { method: "POST", body: { ...previewed, confirm: true } }),
        (answer) => `committed ${answer.plan.length} offset(s) for ${name}`);
      if (done) { apply.hidden = true; previewed = null; }
    });
  }
}
