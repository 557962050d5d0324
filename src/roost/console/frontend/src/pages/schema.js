import { api, attempt, el, status } from "../util.js";

// One subject: a version's schema text and its diff against another (the one before by default).
export default function schema() {
  const subject = document.body.dataset.subject;
  const base = `/api/schemas/subjects/${encodeURIComponent(subject)}`;
  const versionSelect = document.getElementById("version");
  const againstSelect = document.getElementById("against");
  const wanted = new URLSearchParams(window.location.search);

  const options = (select, versions, keepFirst) => {
    const kept = keepFirst ? [select.options[0]] : [];
    select.replaceChildren(...kept, ...versions.map((v) => el("option", { value: v, text: `version ${v}` })));
  };

  const show = async (version, against) => {
    const query = new URLSearchParams();
    if (version) query.set("version", version);
    if (against) query.set("against", against);
    const data = await attempt(() => api(`${base}?${query}`));
    if (!data) return;
    status("");
    if (versionSelect.options.length !== data.versions.length) {
      options(versionSelect, data.versions, false);
      options(againstSelect, data.versions, true);
    }
    versionSelect.value = String(data.version.version);
    againstSelect.value = against || "";
    document.getElementById("compatibility").textContent =
      `${data.compatibility.level || "—"}${data.compatibility.source === "global" ? " (global)" : ""}`;
    document.getElementById("version-count").textContent = String(data.versions.length);
    document.getElementById("shown-version").textContent = String(data.version.version);
    document.getElementById("schema-id").textContent = String(data.version.id);
    document.getElementById("schema-type").textContent = data.version.schema_type;
    document.getElementById("schema-text").textContent = data.version.schema;
    const refs = data.version.references;
    document.getElementById("references").replaceChildren(...(refs.length ? [el("p", { class: "muted",
      text: `references: ${refs.map((r) => `${r.name} (${r.subject} v${r.version})`).join(", ")}` })] : []));
    const diff = document.getElementById("diff");
    if (!data.diff) {
      diff.replaceChildren(el("span", { class: "muted", text: "the first version: nothing to compare" }));
    } else if (data.diff.same) {
      diff.replaceChildren(el("span", { class: "muted", text: `version ${data.diff.from} and ${data.diff.to} are the same text` }));
    } else {
      diff.replaceChildren(...data.diff.lines.map((line) => el("span", {
        class: `line ${line.kind === "+" ? "added" : line.kind === "-" ? "removed" : line.kind === "@" ? "hunk" : line.kind === "=" ? "names" : ""}`,
        text: `${line.text}\n` })), ...(data.diff.truncated ? [el("span", { class: "cut", text: "(diff cut)" })] : []));
    }
  };

  versionSelect.addEventListener("change", () => show(versionSelect.value, againstSelect.value));
  againstSelect.addEventListener("change", () => show(versionSelect.value, againstSelect.value));
  show(wanted.get("version"), wanted.get("against"));
}
