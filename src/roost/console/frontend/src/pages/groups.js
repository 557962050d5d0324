import { api, cell, el, every, fill } from "../util.js";

export default function groups() {
  every(5000, async () => {
    const data = await api("/api/groups");
    fill(document.querySelector("#groups tbody"), data.groups.length ? data.groups.map((g) => el("tr", {},
      cell(el("a", { href: `/groups/${encodeURIComponent(g.group)}`, text: g.group, class: "mono" })), cell(g.state)))
      : [el("tr", {}, cell("no consumer groups", { colspan: 2 }))]);
  });
}
