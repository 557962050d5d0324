import { api, cell, el, every, fill } from "../util.js";

export default function links() {
  every(3000, async () => {
    const data = await api("/api/links");
    fill(document.querySelector("#links tbody"), data.links.length ? data.links.map((l) => el("tr", { "data-link": l.link },
      cell(el("a", { href: `/links/${encodeURIComponent(l.link)}`, text: l.link, class: "mono" })),
      cell(l.source, { class: "mono" }), cell(l.state, { class: l.state === "ACTIVE" ? "" : "bad" }),
      cell(l.mirrors, { class: "num" })))
      : [el("tr", {}, cell("no cluster links (roost link create defines one)", { colspan: 4, class: "muted" }))]);
  });
}
