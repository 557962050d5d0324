import { api, cell, el, every, fill, status } from "../util.js";

// A list of addresses may wrap after each comma (a zero-width space), never inside an address.
const breakable = (text) => String(text).replaceAll(",", ",\u200b");
const seconds = (ms) => (ms == null ? null : `${(ms / 1000).toFixed(1)}`);

export default function link() {
  const name = document.body.dataset.link;
  every(2000, async () => {
    const data = await api(`/api/links/${encodeURIComponent(name)}`);
    status("");
    const state = document.getElementById("link-state");
    state.textContent = data.state;
    state.className = `figure${data.state === "ACTIVE" ? "" : " bad"}`;
    document.getElementById("link-source").textContent = breakable(data.source);
    document.getElementById("link-topics").textContent = String(data.topics.length);
    document.getElementById("link-lag").textContent = data.lag_records === null ? "—" : String(data.lag_records);
    document.getElementById("link-lag-ms").textContent = data.max_lag_ms === null ? "—" : `${seconds(data.max_lag_ms)} s`;
    fill(document.querySelector("#link-errors tbody"), data.errors.length ? data.errors.map((e) => el("tr", { class: "bad" },
      cell(e.broker), cell(e.error, { class: "mono wrap" })))
      : [el("tr", {}, cell("none", { colspan: 2, class: "muted" }))]);
    fill(document.querySelector("#link-partitions tbody"), data.partitions.length ? data.partitions.map((p) =>
      el("tr", { "data-partition": `${p.topic}:${p.partition}`, class: p.state === "failed" ? "bad" : "" },
        cell(p.topic, { class: "mono" }), cell(p.partition, { class: "num" }), cell(p.state, { class: "state" }),
        cell(p.broker, { class: "num" }), cell(p.source_high_watermark, { class: "num source-hw" }),
        cell(p.mirrored_end, { class: "num mirrored" }), cell(p.lag_records, { class: `num lag${p.lag_records ? " bad" : ""}` }),
        cell(seconds(p.lag_ms), { class: "num lag-s" }), cell(p.error, { class: "mono wrap" })))
      : [el("tr", {}, cell("no mirror partitions reported yet", { colspan: 9, class: "muted" }))]);
    fill(document.querySelector("#link-settings tbody"), Object.entries(data.settings).map(([key, value]) => el("tr", {},
      cell(key, { class: "mono" }), cell(breakable(value), { class: "mono wrap" }))));
  });
}
