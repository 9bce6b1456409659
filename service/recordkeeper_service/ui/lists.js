// Complete lists: every row of a paged REST answer is loaded (with progress), then shown a page
// at a time with "showing N–M of T", a substring search, sortable columns and CSV/JSON export of
// what is shown (all matching rows in the current order, not only the visible page).
import { clear, count, h } from "./dom.js";

const LIST_PAGE = 50;
const FETCH_PAGE = 1000; // the REST API's page limit

/** Every row of a paged answer: `fetchPage(offset, limit)` → {data, count, ...}; `onProgress(n, total)`. */
export async function fetchAll(fetchPage, onProgress) {
  const first = await fetchPage(0, FETCH_PAGE);
  const rows = [...first.data];
  const total = first.count ?? rows.length;
  onProgress(rows.length, total);
  while (rows.length < total) {
    const next = await fetchPage(rows.length, FETCH_PAGE);
    if (!next.data.length) break; // the list shrank while it was read
    rows.push(...next.data);
    onProgress(rows.length, total);
  }
  return { first, rows, total };
}

function csvCell(value) {
  const text = value === null || value === undefined ? "" : String(value);
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/**
 * A complete, paged, sortable, searchable list.
 * columns: [{name, value: row => string|number (sorting, search, export), cell?: row => node}]
 * rows: every row.  Options: testid, filename (export name without extension), label (what a row is).
 */
export function fullTable(columns, rows, { testid, filename = "list", label = "rows" } = {}) {
  const state = { query: "", sort: null, descending: false, offset: 0 };
  const input = h("input", { type: "search", "data-testid": `${testid}-search`, placeholder: "contains…", "aria-label": `search ${label}` });
  const summary = h("span", { class: "muted", "data-testid": `${testid}-showing`, role: "status" });
  const body = h("div", {});
  const nav = h("nav", { class: "pager", "aria-label": `${label} pages` });
  const valueText = (column, row) => {
    const value = column.value(row);
    return value === null || value === undefined ? "" : String(value);
  };
  const searchText = rows.map((row) => columns.map((c) => valueText(c, row)).join("\u0000").toLowerCase());
  const selected = () => {
    const q = state.query.toLowerCase();
    let shown = rows.map((row, i) => i);
    if (q) shown = shown.filter((i) => searchText[i].includes(q));
    if (state.sort !== null) {
      const column = columns[state.sort];
      const key = (i) => column.value(rows[i]);
      shown.sort((a, b) => {
        const x = key(a);
        const y = key(b);
        const order =
          typeof x === "number" && typeof y === "number" ? x - y : String(x ?? "").localeCompare(String(y ?? ""), "en", { numeric: true });
        return state.descending ? -order : order;
      });
    }
    return shown.map((i) => rows[i]);
  };
  const exported = (kind) => {
    const chosen = selected();
    if (kind === "json") {
      const objects = chosen.map((row) => Object.fromEntries(columns.map((c) => [c.name, c.value(row)])));
      download(`${filename}.json`, "application/json", JSON.stringify(objects, null, 2));
    } else {
      const lines = [columns.map((c) => csvCell(c.name)).join(",")];
      for (const row of chosen) lines.push(columns.map((c) => csvCell(c.value(row))).join(","));
      download(`${filename}.csv`, "text/csv", `${lines.join("\r\n")}\r\n`);
    }
  };
  const render = () => {
    const chosen = selected();
    state.offset = Math.min(state.offset, Math.max(0, Math.floor((chosen.length - 1) / LIST_PAGE) * LIST_PAGE));
    const page = chosen.slice(state.offset, state.offset + LIST_PAGE);
    const from = chosen.length ? state.offset + 1 : 0;
    const to = state.offset + page.length;
    summary.textContent = state.query
      ? `showing ${count(from)}–${count(to)} of ${count(chosen.length)} matching “${state.query}” (${count(rows.length)} ${label} in all)`
      : `showing ${count(from)}–${count(to)} of ${count(rows.length)} ${label}`;
    const header = columns.map((c, i) =>
      h(
        "th",
        { scope: "col", "aria-sort": state.sort === i ? (state.descending ? "descending" : "ascending") : "none" },
        h(
          "button",
          {
            type: "button",
            class: "sort-button",
            onclick: () => {
              state.descending = state.sort === i ? !state.descending : false;
              state.sort = i;
              state.offset = 0;
              render();
            },
          },
          c.name,
          state.sort === i ? (state.descending ? " ▼" : " ▲") : "",
        ),
      ),
    );
    clear(
      body,
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { "data-testid": testid },
          h("thead", {}, h("tr", {}, header)),
          h("tbody", {}, page.map((row) => h("tr", {}, columns.map((c) => h("td", {}, c.cell ? c.cell(row) : valueText(c, row)))))),
        ),
      ),
    );
    const go = (to) => () => {
      state.offset = to;
      render();
    };
    clear(
      nav,
      state.offset > 0 ? h("button", { type: "button", class: "link-button", onclick: go(Math.max(0, state.offset - LIST_PAGE)) }, "← previous") : null,
      " ",
      summary,
      " ",
      to < chosen.length ? h("button", { type: "button", class: "link-button", onclick: go(state.offset + LIST_PAGE) }, "next →") : null,
    );
  };
  input.addEventListener("input", () => {
    state.query = input.value.trim();
    state.offset = 0;
    render();
  });
  render();
  return h(
    "div",
    { class: "full-list", "data-testid": `${testid}-list` },
    h(
      "div",
      { class: "list-tools" },
      input,
      " ",
      h("button", { type: "button", "data-testid": `${testid}-csv`, onclick: () => exported("csv") }, "Export CSV"),
      " ",
      h("button", { type: "button", "data-testid": `${testid}-json`, onclick: () => exported("json") }, "Export JSON"),
    ),
    nav,
    body,
  );
}

/** A placeholder that shows "loading N of M…" while `fetchAll` reads, then `build(result)`. */
export function loadingList(fetchPage, build, { testid, label = "rows" } = {}) {
  const progress = h("progress", { max: 1, value: 0 });
  const text = h("span", {}, `loading ${label}…`);
  const holder = h("div", { "data-testid": `${testid}-loading`, role: "status" }, progress, " ", text);
  const done = fetchAll(fetchPage, (n, total) => {
    progress.max = Math.max(total, 1);
    progress.value = n;
    text.textContent = `loading ${label}: ${count(n)} of ${count(total)}`;
  }).then(
    (result) => clear(holder, build(result)),
    (error) => clear(holder, h("p", { class: "error", role: "alert" }, `${error.code || "error"}: ${error.message}`)),
  );
  return { element: holder, done };
}
