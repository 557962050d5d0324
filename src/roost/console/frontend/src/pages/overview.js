import { api, cell, clockTime, el, every, fill, formatBytes, lazyCharts } from "../util.js";
import { showKeepers } from "./members.js";

const text = (id, value) => { document.getElementById(id).textContent = value; };

export default function overview() {
  const drawCharts = lazyCharts(({ BYTE_STEPS, lineChart }) => {
    const rates = lineChart(document.getElementById("rate-chart"), "messages/s", clockTime);
    const bytes = lineChart(document.getElementById("bytes-chart"), "bytes/s", clockTime, (v) => `${formatBytes(v)}/s`, BYTE_STEPS);
    return (data) => { rates(data.rate_history); bytes(data.bytes_history); };
  });
  every(2000, async () => {
    const data = await api("/api/overview");
    const up = data.brokers.filter((b) => b.up).length;
    text("brokers-up", `${up} / ${data.brokers.length}`);
    text("controller", data.controller === null ? "none" : `broker ${data.controller}`);
    text("topic-count", `${data.topics} / ${data.partitions}`);
    text("urp-count", String(data.under_replicated.length));
    text("offline-count", String(data.offline.length));
    text("rate", data.messages_per_second === null ? "…" : data.messages_per_second.toFixed(1));
    // "—": no broker answers DescribeLogDirs; "…": waiting for a second sample.
    text("byte-rate", !data.sizes_known ? "—" : data.bytes_per_second === null ? "…" : `${formatBytes(data.bytes_per_second)}/s`);
    text("cluster-size", !data.sizes_known ? "—" : data.size === null ? "…" : formatBytes(data.size));
    document.getElementById("urp-count").className = `figure ${data.under_replicated.length ? "bad" : ""}`;
    document.getElementById("offline-count").className = `figure ${data.offline.length ? "bad" : ""}`;
    fill(document.querySelector("#brokers tbody"), data.brokers.map((b) => el("tr", { class: b.up ? "" : "bad", "data-broker": b.id },
      cell(b.id === data.controller ? `${b.id} (controller)` : b.id), cell(b.address, { class: "mono" }), cell(b.rack),
      cell(b.leader_partitions), cell(b.replicas), cell(b.up ? "up" : "down", { class: b.up ? "up" : "down" }))));
    showKeepers(document.querySelector("#keepers tbody"), data.keepers);
    const unhealthy = [...data.offline, ...data.under_replicated.filter((p) => !p.problem.includes("offline"))];
    fill(document.querySelector("#unhealthy tbody"), unhealthy.length ? unhealthy.map((p) => el("tr", { class: "bad" },
      cell(el("a", { href: `/topics/${encodeURIComponent(p.topic)}`, text: p.topic })), cell(p.partition), cell(p.leader),
      cell(p.replicas.join(", ")), cell(p.isr.join(", ")), cell(p.problem)))
      : [el("tr", {}, cell("none: every partition has a leader and all its replicas in sync", { colspan: 6, class: "up" }))]);
    await drawCharts(data);
  });
}
