import { api, attempt, cell, el, fill, formatBytes, status } from "../util.js";

export default function topic() {
  const name = document.body.dataset.topic;
  const path = `/api/topics/${encodeURIComponent(name)}`;
  const showDefaults = document.getElementById("show-defaults");
  let configs = [];

  const showConfigs = () => {
    const rows = configs.filter((c) => showDefaults.checked || !c.default).map((c) =>
      el("tr", {}, cell(c.name, { class: "mono" }), cell(c.value, { class: "mono" }), cell(c.source)));
    fill(document.querySelector("#configs tbody"), rows.length ? rows
      : [el("tr", {}, cell("no overrides: every config has its default (tick \"show defaults\")", { colspan: 3, class: "muted" }))]);
  };
  const load = async () => {
    const data = await attempt(() => api(path));
    if (!data) return;
    fill(document.querySelector("#partitions tbody"), data.partitions.map((p) => el("tr", { class: p.offline || p.under_replicated ? "bad" : "" },
      cell(p.partition), cell(p.leader < 0 ? "none" : p.leader), cell(p.replicas.join(", ")), cell(p.isr.join(", ")),
      cell(p.start_offset), cell(p.end_offset), cell(p.last_stable_offset, { class: p.last_stable_offset != null && p.last_stable_offset < p.end_offset ? "lso warn" : "lso" }), cell(p.messages), cell(formatBytes(p.size), { class: "num" }),
      cell(p.offline ? "offline" : p.under_replicated ? "under-replicated" : "ok"))));
    configs = data.configs;
    showConfigs();
    const total = document.querySelector("#add-partitions input[name=total]");
    if (total && !total.value) total.value = data.partitions.length + 1;
  };
  showDefaults.addEventListener("change", showConfigs);

  const on = (id, handler) => {
    const form = document.getElementById(id);
    if (form) form.addEventListener("submit", (event) => { event.preventDefault(); handler(new FormData(form), form); });
  };
  on("add-partitions", async (fields) => {
    const total = Number(fields.get("total"));
    if (await attempt(() => api(`${path}/partitions`, { method: "POST", body: { total } }), `${name} has ${total} partitions`)) load();
  });
  on("alter-config", async (fields, form) => {
    const key = String(fields.get("name"));
    const value = String(fields.get("value"));
    const body = value === "" ? { delete: [key] } : { set: { [key]: value } };
    if (await attempt(() => api(`${path}/configs`, { method: "PUT", body }), `config ${key} changed`)) { form.reset(); load(); }
  });
  on("delete-topic", async (fields) => {
    const typed = String(fields.get("confirm"));
    if (typed !== name) { status(`type the topic's name (${name}) to delete it`, "error"); return; }
    if (!window.confirm(`Delete topic ${name} and all its messages? This cannot be undone.`)) return;
    if (await attempt(() => api(path, { method: "DELETE", body: { confirm: typed } }), `deleted ${name}`)) {
      window.location.assign("/topics");
    }
  });
  load();
}
