import { api, attempt, cell, el, every, fill, formatBytes, formatRate, status } from "../util.js";

export default function topics() {
  const search = document.getElementById("topic-search");
  const internal = document.getElementById("show-internal");
  let page = 1;
  let pages = 1;
  let timer = null;

  const load = async () => {
    const query = new URLSearchParams({ search: search.value, page, size: 50, internal: internal.checked });
    const data = await attempt(() => api(`/api/topics?${query}`));
    if (!data) return;
    page = data.page; pages = data.pages;
    document.getElementById("topic-total").textContent = `${data.total} topic${data.total === 1 ? "" : "s"}`;
    document.getElementById("page-label").textContent = ` page ${data.page} of ${data.pages} `;
    const rows = data.topics.map((t) => el("tr", { class: t.offline || t.under_replicated ? "bad" : "" },
      cell(el("a", { href: `/topics/${encodeURIComponent(t.name)}`, text: t.name, class: "mono" })),
      cell(t.partitions), cell(t.replication), cell(t.under_replicated), cell(t.offline),
      cell(formatBytes(t.size), { class: "num" }), cell(formatRate(t.messages_per_second), { class: "num" }),
      cell(formatRate(t.bytes_per_second, "B"), { class: "num" })));
    fill(document.querySelector("#topics tbody"), rows.length ? rows
      : [el("tr", { class: "empty" }, cell(search.value ? "no topic matches" : "no topics yet", { colspan: 8, class: "muted" }))]);
  };
  search.addEventListener("input", () => { clearTimeout(timer); page = 1; timer = setTimeout(load, 200); });
  internal.addEventListener("change", () => { page = 1; load(); });
  document.getElementById("prev-page").addEventListener("click", () => { if (page > 1) { page -= 1; load(); } });
  document.getElementById("next-page").addEventListener("click", () => { if (page < pages) { page += 1; load(); } });

  const form = document.getElementById("create-topic");
  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const fields = new FormData(form);
      const configs = {};
      for (const pair of String(fields.get("configs") || "").split(",").map((s) => s.trim()).filter(Boolean)) {
        const at = pair.indexOf("=");
        if (at < 1) { status(`config ${pair}: expected name=value`, "error"); return; }
        configs[pair.slice(0, at)] = pair.slice(at + 1);
      }
      const name = String(fields.get("name"));
      const done = await attempt(() => api("/api/topics", { method: "POST", body: {
        name, partitions: Number(fields.get("partitions")), replication: Number(fields.get("replication")), configs } }),
      `created topic ${name}`);
      if (done) { form.reset(); load(); }
    });
  }
  // Refreshed while shown, so sizes and rates stay live (the server samples at most once a second).
  every(3000, load);
}
