// Shared helpers of the console's pages. Data from the cluster (topic names, keys, values,
// headers, znode data) is attacker-controlled: it reaches the page through textContent and
// attribute setters only, never through innerHTML.

export const readOnly = () => document.body.dataset.readOnly === "true";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

export function cell(value, attrs = {}) {
  return el("td", attrs, value === null || value === undefined ? "—" : value);
}

export function status(message, kind = "") {
  const box = document.getElementById("status");
  box.className = `status ${kind}`;
  box.textContent = message || "";
}

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// A page's shell (the overview, the topic list, a topic's messages) carries the answer to its
// first API request (a JSON data block the console writes with the path it answers), so its first
// figures need no request of their own. It is taken by the page's first GET, and used only if
// that GET is for the same path.
function shellAnswer(path) {
  const block = document.getElementById("first-answer");
  if (block === null) return undefined;
  block.remove();
  const carried = JSON.parse(block.textContent);
  return carried.path === path ? carried.answer : undefined;
}

export async function api(path, options = {}) {
  if (options.method === undefined) {
    const carried = shellAnswer(path);
    if (carried !== undefined) return carried;
  }
  const init = { method: options.method || "GET", headers: { Accept: "application/json" } };
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch(path, init);
  let answer = null;
  try { answer = await response.json(); } catch { answer = null; }
  if (!response.ok) throw new ApiError(response.status, (answer && answer.error) || `${response.status} ${response.statusText}`);
  return answer;
}

// Runs `action`, showing its error (or `done`) in the status line.
export async function attempt(action, done) {
  try {
    const result = await action();
    if (done) status(typeof done === "function" ? done(result) : done, "ok");
    return result;
  } catch (error) {
    status(error.message, "error");
    return undefined;
  }
}

// Polls `refresh` every `ms` while the page is visible; the first run is immediate.
export function every(ms, refresh) {
  let timer = null;
  const tick = async () => {
    try { await refresh(); } catch (error) { status(error.message, "error"); }
    timer = setTimeout(tick, ms);
  };
  tick();
  return () => clearTimeout(timer);
}

const zoneKey = "roost-console-timezone";
export const timeZone = () => localStorage.getItem(zoneKey) || "utc";

export function formatTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  const date = new Date(ms);
  if (timeZone() === "utc") return date.toISOString().replace("T", " ").replace("Z", " UTC");
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

// The chart module (uPlot: most of the console's script) is a chunk of its own, loaded once per
// page and only when a page first draws, which it does after its tables are filled, so the first
// figures never wait on it. A failed load is forgotten and the next refresh tries again.
let chartModule = null;
function loadCharts() {
  if (chartModule === null) chartModule = import("./charts.js").catch((error) => { chartModule = null; throw error; });
  return chartModule;
}

// `make(chartModule)` sets a page's charts up and returns the function that draws an answer into
// them; the returned function waits for the module the first time.
export function lazyCharts(make) {
  let draw = null;
  return async (data) => {
    if (draw === null) draw = make(await loadCharts());
    draw(data);
  };
}

// HH:MM:SS in the chosen zone (the charts' time ticks).
export function clockTime(ms) {
  const date = new Date(ms);
  const pad = (n) => String(n).padStart(2, "0");
  return timeZone() === "utc"
    ? `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}`
    : `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

// 1536 -> "1.5 KiB"; null (unknown, e.g. a cluster without DescribeLogDirs) -> "—".
export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${unit > 0 && value < 10 ? Number(value.toFixed(1)) : Math.round(value)} ${units[unit]}`;
}

export function formatRate(perSecond, unit = "") {
  if (perSecond === null || perSecond === undefined) return "—";
  if (unit === "B") return `${formatBytes(perSecond)}/s`;
  return `${perSecond === 0 || perSecond >= 10 ? Math.round(perSecond) : perSecond.toFixed(1)}/s`;
}

export function setupTimeZone(onChange) {
  const select = document.getElementById("timezone");
  select.value = timeZone();
  select.addEventListener("change", () => { localStorage.setItem(zoneKey, select.value); onChange(); });
}

export function confirmTyped(expected, message) {
  const typed = window.prompt(`${message}\nType "${expected}" to confirm.`);
  return typed === expected;
}

export function download(name, type, text) {
  const link = el("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}
