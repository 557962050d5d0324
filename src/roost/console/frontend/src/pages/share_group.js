import { api, cell, el, every, fill, status } from "../util.js";

const counts = (rows) => rows.map((r) => `${r.delivery_count}×: ${r.records}`).join(", ");

export default function shareGroup() {
  const name = document.body.dataset.group;
  every(2000, async () => {
    const data = await api(`/api/share-groups/${encodeURIComponent(name)}`);
    status("");
    document.getElementById("share-state").textContent = data.state;
    document.getElementById("share-member-count").textContent = String(data.members.length);
    document.getElementById("share-total-lag").textContent = data.total_lag === null ? "—" : String(data.total_lag);
    document.getElementById("share-epochs").textContent = `${data.group_epoch} / ${data.assignment_epoch}`;
    const dead = data.dead_letter_topic;
    document.getElementById("dead-letter-topic").replaceChildren(dead
      ? el("a", { href: `/topics/${encodeURIComponent(dead)}/messages`, text: dead }) : "none");
    const note = document.getElementById("metrics-note");
    const problems = data.metrics.problems;
    note.hidden = data.metrics.configured && problems.length === 0;
    note.textContent = !data.metrics.configured
      ? "The in-flight figures live only on each partition's leader: start the console with --broker-metrics URL "
        + "(each broker's /metrics) to see start offsets, lag, in-flight and acquired records and delivery counts."
      : `Some brokers' /metrics did not answer (their partitions' figures show —): ${problems.join("; ")}`;
    fill(document.querySelector("#share-partitions tbody"), data.partitions.length ? data.partitions.map((p) =>
      el("tr", { "data-partition": `${p.topic}:${p.partition}` },
        cell(p.topic, { class: "mono" }), cell(p.partition, { class: "num" }), cell(p.start_offset, { class: "num start" }),
        cell(p.end_offset, { class: "num end" }), cell(p.lag, { class: `num lag${p.lag ? " bad" : ""}` }),
        cell(p.in_flight, { class: "num in-flight" }), cell(p.acquired, { class: "num acquired" }),
        cell(p.delivery_counts.length ? counts(p.delivery_counts) : null, { class: "delivery" }),
        cell(p.members.join(", ") || null)))
      : [el("tr", {}, cell("no partitions assigned and none in flight", { colspan: 9, class: "muted" }))]);
    fill(document.querySelector("#delivery-counts tbody"), data.delivery_counts.length ? data.delivery_counts.map((d) =>
      el("tr", { "data-delivery-count": d.delivery_count, class: d.delivery_count > 1 ? "bad" : "" },
        cell(d.delivery_count, { class: "num" }), cell(d.records, { class: "num" })))
      : [el("tr", {}, cell("no unfinished record has been delivered", { colspan: 2, class: "muted" }))]);
    fill(document.querySelector("#share-members tbody"), data.members.length ? data.members.map((m) => el("tr", {},
      cell(m.client_id), cell(m.host), cell(m.member_epoch, { class: "num" }), cell(m.subscribed, { class: "mono" }),
      cell(m.assignment.map((a) => `${a.topic}[${a.partition}]`).join(" "), { class: "mono" }),
      cell(m.member_id, { class: "mono" })))
      : [el("tr", {}, cell("no members", { colspan: 6, class: "muted" }))]);
  });
}
