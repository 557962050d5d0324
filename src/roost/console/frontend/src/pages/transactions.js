import { api, attempt, cell, el, every, fill } from "../util.js";

const seconds = (ms) => (ms == null ? null : `${(ms / 1000).toFixed(1)} s`);

export default function transactions() {
  every(3000, async () => {
    const data = await attempt(() => api("/api/transactions"));
    if (!data) return;
    fill(document.querySelector("#transactions tbody"), data.transactions.length ? data.transactions.map((t) =>
      el("tr", { "data-transactional-id": t.transactional_id, class: t.age_ms > t.timeout_ms ? "bad" : "" },
        cell(t.transactional_id, { class: "mono" }), cell(t.producer_id), cell(t.producer_epoch), cell(t.state),
        cell(t.partitions.join(", "), { class: "mono" }), cell(seconds(t.age_ms), { class: "num" }),
        cell(seconds(t.timeout_ms), { class: "num" }), cell(t.coordinator)))
      : [el("tr", {}, cell("no open transactions", { colspan: 8, class: "muted" }))]);
  });
}
