import { cell, el, fill } from "../util.js";

export function keeperRows(members) {
  return members.map((m) => el("tr", { class: ["leader", "follower", "standalone", "observer"].includes(m.role) ? "" : "bad" },
    cell(m.address, { class: "mono" }), cell(m.role, { class: m.role === "down" ? "down" : "" }),
    cell(m.zxid), cell(m.nodes), cell(m.detail)));
}

export function showKeepers(tbody, members) {
  fill(tbody, members.length ? keeperRows(members) : [el("tr", {}, cell("no keeper configured (--zookeeper)", { colspan: 5 }))]);
}
