// Small DOM helpers: elements are built with textContent (never innerHTML), so names, URIs and
// metadata coming from the registry cannot inject markup.

/** h("a", {href: "#/x", class: "c"}, "text", child, ...) → an element. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A table: `columns` = [[header, row => cell]], rows = objects. */
export function table(columns, rows, { caption, testid } = {}) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { "data-testid": testid },
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, columns.map(([name]) => h("th", { scope: "col" }, name)))),
      h(
        "tbody",
        {},
        rows.map((row) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(row))))),
      ),
    ),
  );
}

export function link(href, text, attrs = {}) {
  return h("a", { href, ...attrs }, text);
}

/** 1234567 → "1.2 MiB": binary units, as the CLI and notebooks show sizes
 * (recordkeeper.core.display.binary_size is the same rule). */
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = n;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function count(n) {
  return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US");
}

/** 1 → "1 shard", 2 → "2 shards" (recordkeeper.core.display.counted is the same rule). */
export function counted(n, noun, plural = `${noun}s`) {
  return `${count(n)} ${n === 1 ? noun : plural}`;
}

export function when(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "—";
}

/** A hash shortened for tables, the whole value in the tooltip and for copying. */
export function hash(value, keep = 12) {
  if (!value) return "—";
  const text = String(value);
  const shown = text.length > keep + 7 ? `${text.slice(0, keep + (text.startsWith("sha256:") ? 7 : 0))}…` : text;
  return h("code", { class: "hash", title: text }, shown);
}

export function badge(state) {
  return h("span", { class: `badge badge-${state}` }, state);
}

/** "data deleted 2026-12-01 (retention)" for a version whose storage was deleted (or is being
 * deleted); null while its data is stored.  Its row, digests, schema and lineage stay. */
export function dataStatus(version) {
  const state = version.data_state || "stored";
  if (state === "stored") return null;
  const why = version.data_deleted_reason || "retention";
  const text =
    state === "deleted"
      ? `data deleted ${(version.data_deleted_at || "").slice(0, 10)} (${why})`
      : `data being deleted (${why})`;
  return h("span", { class: "badge badge-data-deleted", "data-testid": "data-status" }, text);
}

// A command line as a POSIX shell reads it (Python's shlex.join, as `recordkeeper show`
// prints it): an argument with spaces or shell characters is single-quoted.
export function shellJoin(args) {
  return args
    .map((arg) => {
      const text = String(arg);
      if (text === "") return "''";
      return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\"'\"'")}'`;
    })
    .join(" ");
}

export function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

export function errorBox(error) {
  const code = error && error.code ? error.code : "error";
  return h(
    "div",
    { class: "error", role: "alert", "data-testid": "error" },
    h("strong", {}, code),
    ": ",
    error && error.message ? error.message : String(error),
  );
}
