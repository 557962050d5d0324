import { api, attempt, cell, download, el, fill, formatTime, status } from "../util.js";

// One key or value as the server described it (text, hex, json; size, truncated, utf8).
// A value in Confluent's wire format (magic byte 0, schema id) says its id, linked to the subject
// it is registered under, and shows as decoded by that schema unless hex is asked for.
function schemaNote(shown) {
  if (shown.schema_id === undefined) return null;
  const decoded = shown.decoded;
  const said = decoded === undefined ? " (start the console with --schema-registry to decode it)"
    : decoded.error ? `: ${decoded.error}` : ` (${decoded.schema_type})`;
  return el("div", { class: "schema-id" }, "schema id ",
    el("a", { href: `/schemas/id/${shown.schema_id}`, text: String(shown.schema_id) }), said);
}

function payloadCell(shown, mode) {
  if (!shown) return cell(el("span", { class: "muted", text: "null" }), { class: "payload" });
  const decoded = shown.decoded && shown.decoded.json !== undefined && mode !== "hex" ? shown.decoded.json : undefined;
  const text = decoded !== undefined ? decoded : mode === "hex" ? shown.hex
    : mode === "json" && shown.json !== undefined ? shown.json : shown.text;
  const notes = [];
  if (shown.truncated) notes.push(`showing ${mode === "hex" ? "the first" : "the start of"} ${shown.size} bytes`);
  if (!shown.utf8 && decoded === undefined) notes.push("not valid UTF-8");
  return el("td", { class: "payload" }, schemaNote(shown), el("pre", { text }),
    notes.length ? el("div", { class: "cut", text: notes.join("; ") }) : null);
}

function headersCell(headers) {
  return cell(headers.map((h) => `${h.key}=${h.value ? h.value.text : "null"}`).join("\n") || "—", { class: "mono lines" });
}

function parseTime(text) {
  if (/^\d+$/.test(text)) return Number(text);
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new Error(`not a time: ${text} (ISO 8601 or Unix ms)`);
  return ms;
}

export default function messages() {
  const topic = document.body.dataset.topic;
  const base = `/api/topics/${encodeURIComponent(topic)}`;
  const form = document.getElementById("browse");
  const decode = document.getElementById("decode");
  const live = document.getElementById("live");
  const tbody = document.querySelector("#messages tbody");
  const bounds = document.getElementById("bounds");
  let shown = [];
  let tail = null;

  const row = (m) => el("tr", { "data-offset": m.offset, "data-partition": m.partition },
    cell(m.partition), cell(m.offset), cell(formatTime(m.timestamp), { class: "mono" }),
    payloadCell(m.key, decode.value), payloadCell(m.value, decode.value), headersCell(m.headers),
    cell(document.getElementById("produce") ? el("button", { type: "button", class: "reproduce", text: "re-produce", onclick: () => reproduce(m) }) : ""));
  const render = () => fill(tbody, shown.map(row));
  const showBounds = (data) => {
    const hit = data.bounds_hit || [];
    bounds.hidden = hit.length === 0;
    bounds.textContent = hit.length ? `partial result: stopped at ${hit.join(", ")} after reading ${data.scanned} records (${data.scanned_bytes ?? 0} bytes)` : "";
  };

  // The partitions to choose from, from the first browse of all of them (its answer names each
  // partition with its offsets), so the page asks nothing else before its first messages.
  const partitionSelect = document.getElementById("partition");
  const listPartitions = (partitions) => {
    if (partitionSelect.options.length > 1 || new FormData(form).get("partition") !== "all") return;
    for (const p of Object.keys(partitions).map(Number).sort((a, b) => a - b)) {
      partitionSelect.append(el("option", { value: p, text: `${p}` }));
    }
  };

  const browse = async () => {
    const fields = new FormData(form);
    const start = String(fields.get("start"));
    let position = String(fields.get("position") || "").trim();
    try {
      if (start === "timestamp") position = String(parseTime(position));
    } catch (error) { status(error.message, "error"); return; }
    const query = new URLSearchParams({ partition: fields.get("partition"), start, limit: fields.get("limit"),
      search: fields.get("search") || "" });
    if (start === "offset" || start === "timestamp") query.set("position", position);
    const data = await attempt(() => api(`${base}/messages?${query}`));
    if (!data) return;
    shown = data.messages;
    render();
    showBounds(data);
    listPartitions(data.partitions);
    status(`${shown.length} message(s); read ${data.scanned} record(s)`);
  };

  form.addEventListener("submit", (event) => { event.preventDefault(); stopTail(); browse(); });
  decode.addEventListener("change", render);

  // Live tail: poll for what came after the last positions; newest on top; a bounded list.
  const stopTail = () => { if (tail) { clearTimeout(tail); tail = null; } live.checked = false; };
  const startTail = async () => {
    const partition = new FormData(form).get("partition");
    let next = null;
    const poll = async () => {
      if (!live.checked) return;
      const query = new URLSearchParams({ partition });
      if (next) query.set("after", JSON.stringify(next));
      try {
        const data = await api(`${base}/tail?${query}`);
        next = data.next;
        if (data.messages.length) {
          shown = [...data.messages.reverse(), ...shown].slice(0, 500);
          render();
        }
        status(`live: ${shown.length} message(s) shown`);
      } catch (error) { status(error.message, "error"); }
      if (live.checked) tail = setTimeout(poll, 500);
    };
    shown = [];
    render();
    bounds.hidden = true;
    poll();
  };
  live.addEventListener("change", () => { if (live.checked) startTail(); else stopTail(); });

  const exportRows = () => shown.map((m) => ({ partition: m.partition, offset: m.offset, timestamp: m.timestamp,
    key: m.key ? m.key.text : null, value: m.value ? m.value.text : null,
    key_truncated: Boolean(m.key && m.key.truncated), value_truncated: Boolean(m.value && m.value.truncated),
    headers: Object.fromEntries(m.headers.map((h) => [h.key, h.value ? h.value.text : null])) }));
  document.getElementById("export-json").addEventListener("click", () =>
    download(`${topic}.json`, "application/json", JSON.stringify(exportRows(), null, 2)));
  document.getElementById("export-csv").addEventListener("click", () => {
    const quote = (v) => `"${String(v ?? "").replaceAll('"', '""')}"`;
    const columns = ["partition", "offset", "timestamp", "key", "value", "headers"];
    const lines = exportRows().map((r) => columns.map((c) => quote(c === "headers" ? JSON.stringify(r.headers) : r[c])).join(","));
    download(`${topic}.csv`, "text/csv", [columns.join(","), ...lines].join("\n"));
  });

  const produce = document.getElementById("produce");
  const reproduce = (m) => {
    produce.elements.key.value = m.key ? m.key.text : "";
    produce.elements.value.value = m.value ? m.value.text : "";
    produce.elements.headers.value = m.headers.map((h) => `${h.key}=${h.value ? h.value.text : ""}`).join("\n");
    produce.elements.partition.value = m.partition;
    produce.scrollIntoView();
    status(`message ${m.partition}/${m.offset} copied into the produce form${m.value && m.value.truncated ? " (its value was cut for display: only the shown part)" : ""}`);
  };
  if (produce) {
    produce.addEventListener("submit", async (event) => {
      event.preventDefault();
      const fields = new FormData(produce);
      const headers = String(fields.get("headers") || "").split(/[\n,]/).map((h) => h.trim()).filter(Boolean).map((h) => {
        const at = h.indexOf("=");
        return at < 0 ? { key: h, value: "" } : { key: h.slice(0, at), value: h.slice(at + 1) };
      });
      const partitionText = String(fields.get("partition") || "").trim();
      const keyText = String(fields.get("key") || "");
      const body = { key: keyText === "" ? null : keyText, value: String(fields.get("value") || ""), headers,
        partition: partitionText === "" ? null : Number(partitionText) };
      await attempt(() => api(`${base}/messages`, { method: "POST", body }),
        (answer) => `produced to partition ${answer.partition} at offset ${answer.offset}`);
    });
  }
  browse();
  return render;
}
