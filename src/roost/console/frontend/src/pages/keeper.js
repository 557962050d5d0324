import { api, attempt, cell, el, fill, formatTime, status } from "../util.js";
import { showKeepers } from "./members.js";

export default function keeper() {
  const pathInput = document.getElementById("path");
  const watchBox = document.getElementById("watch");
  const watchState = document.getElementById("watch-state");
  let current = null;
  let source = null;

  const child = (path, name) => (path === "/" ? `/${name}` : `${path}/${name}`);
  const parent = (path) => (path.lastIndexOf("/") <= 0 ? "/" : path.slice(0, path.lastIndexOf("/")));

  const show = async (path, flash = false) => {
    const data = await attempt(() => api(`/api/keeper/node?${new URLSearchParams({ path })}`));
    if (!data) return;
    current = data;
    pathInput.value = path;
    document.getElementById("node-path").textContent = path;
    const items = [];
    if (path !== "/") items.push(el("li", {}, el("button", { type: "button", text: "..", onclick: () => open(parent(path)) })));
    for (const name of data.children) {
      items.push(el("li", {}, el("button", { type: "button", text: name, "data-child": name, onclick: () => open(child(path, name)) })));
    }
    fill(document.getElementById("children"), items);
    document.getElementById("children-more").textContent = data.children_total > data.children.length
      ? `showing ${data.children.length} of ${data.children_total} children` : "";
    const dataBox = document.getElementById("node-data");
    const shown = data.data;
    dataBox.textContent = shown === null ? "(no data)" : shown.size === 0 ? "(empty)" : shown.json !== undefined ? shown.json : shown.text;
    if (shown && (shown.truncated || !shown.utf8)) dataBox.append(el("div", { class: "cut", text: `${shown.size} bytes${shown.truncated ? ", cut for display" : ""}${shown.utf8 ? "" : ", not valid UTF-8"}` }));
    if (flash) { dataBox.classList.remove("flash"); void dataBox.offsetWidth; dataBox.classList.add("flash"); }
    fill(document.querySelector("#node-stat tbody"), Object.entries(data.stat).map(([k, v]) =>
      el("tr", {}, cell(k), cell(k.endsWith("time") ? formatTime(v) : v, { class: "mono", "data-stat": k }))));
    fill(document.querySelector("#node-acl tbody"), data.acl.map((a) => el("tr", {}, cell(a.scheme), cell(a.id), cell(a.perms.join(", ")))));
    const setForm = document.getElementById("set-data");
    if (setForm && !flash) setForm.elements.data.value = shown ? shown.text : "";
  };

  const watch = (path) => {
    if (source) { source.close(); source = null; }
    watchState.textContent = "";
    if (!watchBox.checked) return;
    source = new EventSource(`/api/keeper/watch?${new URLSearchParams({ path })}`);
    source.addEventListener("open", () => { watchState.textContent = "watching"; });
    source.addEventListener("change", (event) => { watchState.textContent = `changed (${event.data})`; show(path, true); });
    source.addEventListener("error", () => { watchState.textContent = "watch interrupted; retrying"; });
  };

  const open = async (path) => {
    await show(path);
    if (current && current.path === path) watch(path);
    history.replaceState(null, "", `/keeper?${new URLSearchParams({ path })}`);
  };
  watchBox.addEventListener("change", () => current && watch(current.path));
  document.getElementById("goto").addEventListener("submit", (event) => { event.preventDefault(); open(pathInput.value.trim() || "/"); });

  const setForm = document.getElementById("set-data");
  if (setForm) {
    setForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!current) return;
      const body = { path: current.path, data: setForm.elements.data.value, version: current.stat.version };
      if (!window.confirm(`Overwrite the data of ${current.path} (version ${current.stat.version})?`)) return;
      if (await attempt(() => api("/api/keeper/node", { method: "PUT", body }), `set ${current.path}`)) show(current.path);
    });
    const createForm = document.getElementById("create-node");
    createForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!current) return;
      const path = child(current.path, createForm.elements.name.value.trim());
      if (await attempt(() => api("/api/keeper/node", { method: "POST", body: { path, data: createForm.elements.data.value } }), `created ${path}`)) {
        createForm.reset();
        show(current.path);
      }
    });
    document.getElementById("delete-node").addEventListener("click", async () => {
      if (!current) return;
      const { path } = current;
      if (!window.confirm(`Delete ${path} (version ${current.stat.version})? This cannot be undone.`)) return;
      if (await attempt(() => api("/api/keeper/node", { method: "DELETE", body: { path, version: current.stat.version, confirm: true } }), `deleted ${path}`)) {
        open(parent(path));
      }
    });
  }

  api("/api/keeper/members").then((data) => showKeepers(document.querySelector("#keepers tbody"), data.members))
    .catch((error) => status(error.message, "error"));
  open(new URLSearchParams(window.location.search).get("path") || "/");
}
