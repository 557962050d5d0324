import { api, cell, el, every, fill } from "../util.js";

const subjectHref = (subject) => `/schemas/subjects/${encodeURIComponent(subject)}`;

export default function schemas() {
  every(5000, async () => {
    const data = await api("/api/schemas");
    document.getElementById("subject-count").textContent = data.total > data.subjects.length
      ? `${data.subjects.length} of ${data.total}` : String(data.total);
    document.getElementById("global-compatibility").textContent = data.compatibility.level || "—";
    fill(document.querySelector("#subjects tbody"), data.subjects.length ? data.subjects.map((s) => el("tr", { "data-subject": s.subject },
      cell(el("a", { href: subjectHref(s.subject), text: s.subject, class: "mono" })), cell(s.version, { class: "num" }),
      cell(s.id, { class: "num" }), cell(s.schema_type)))
      : [el("tr", {}, cell("no subjects registered", { colspan: 4, class: "muted" }))]);
  });
}
