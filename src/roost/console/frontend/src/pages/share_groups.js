import { api, cell, el, every, fill } from "../util.js";

export default function shareGroups() {
  every(5000, async () => {
    const data = await api("/api/share-groups");
    fill(document.querySelector("#share-groups tbody"), data.groups.length ? data.groups.map((g) => el("tr", { "data-group": g.group },
      cell(el("a", { href: `/share-groups/${encodeURIComponent(g.group)}`, text: g.group, class: "mono" })), cell(g.state)))
      : [el("tr", {}, cell("no share groups", { colspan: 2, class: "muted" }))]);
  });
}
