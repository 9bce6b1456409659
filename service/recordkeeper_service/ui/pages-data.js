// Pages about data: datasets, a dataset's versions and aliases, one version, compare two.
import { api, seg } from "./api.js";
import { badge, bytes, clear, count, counted, dataStatus, errorBox, h, hash, json, link, shellJoin, table, when } from "./dom.js";
import { checkpointHref } from "./graph.js";
import { fullTable, loadingList } from "./lists.js";
import { fetchRecords, recordDiffSection, recordsSection } from "./compare-records.js";
import { fetchSample, sampleSection } from "./sample.js";

const PAGE = 50;
const SHARDS_SHOWN = 200;

export const versionHref = (name) => `#/versions/${encodeURIComponent(name)}`;
export const datasetHref = (name) => `#/datasets/${encodeURIComponent(name)}`;
export const compareHref = (a, b) => `#/compare?old=${encodeURIComponent(a)}&new=${encodeURIComponent(b)}`;

function pager(query, total, base) {
  const offset = Number(query.get("offset") || 0);
  const go = (to) => {
    const next = new URLSearchParams(query);
    next.set("offset", String(to));
    return `${base}?${next}`;
  };
  return h(
    "nav",
    { class: "pager", "aria-label": "pages" },
    offset > 0 ? link(go(Math.max(0, offset - PAGE)), "← previous") : null,
    h("span", { class: "muted" }, ` ${total ? offset + 1 : 0}–${Math.min(offset + PAGE, total)} of ${count(total)} `),
    offset + PAGE < total ? link(go(offset + PAGE), "next →") : null,
  );
}

// ------------------------------------------------------------------------- datasets

export async function datasetsPage(main, _args, query) {
  const prefix = query.get("q") || "";
  const offset = Number(query.get("offset") || 0);
  const page = await api("/datasets", { params: { prefix, limit: PAGE, offset } });
  const input = h("input", { id: "dataset-search", type: "search", name: "q", value: prefix, placeholder: "name prefix" });
  const form = h(
    "form",
    {
      class: "search",
      role: "search",
      onsubmit: (event) => {
        event.preventDefault();
        window.location.hash = `#/?q=${encodeURIComponent(input.value.trim())}`;
      },
    },
    h("label", { for: "dataset-search" }, "Search datasets"),
    input,
    h("button", { type: "submit" }, "Search"),
  );
  clear(
    main,
    h("h1", {}, "Datasets"),
    form,
    h("p", { "data-testid": "dataset-count" }, `${count(page.count)} dataset${page.count === 1 ? "" : "s"}${prefix ? ` starting with “${prefix}”` : ""}`),
    table(
      [
        ["Name", (d) => link(datasetHref(d.name), d.name)],
        ["Versions", (d) => count(d.version_count)],
        ["Latest", (d) => (d.latest ? link(versionHref(d.latest), d.latest) : "—")],
        ["Description", (d) => d.description || ""],
        ["Created", (d) => `${when(d.created_at)} by ${d.created_by}`],
      ],
      page.data,
      { testid: "datasets" },
    ),
    pager(query, page.count, "#/"),
  );
}

// ------------------------------------------------------------------------- one dataset

function splitCells(splits) {
  if (!splits) return "…";
  const names = Object.keys(splits);
  if (!names.length) return "—";
  return h("ul", { class: "splits" }, names.map((name) => h("li", {}, h("span", { class: "split" }, name), " ", count(splits[name].record_count))));
}

export async function datasetPage(main, [name], query, ctx) {
  const state = query.get("state") || "";
  const offset = Number(query.get("offset") || 0);
  const [dataset, versions, aliases] = await Promise.all([
    api(`/datasets/${seg(name)}`),
    api(`/datasets/${seg(name)}/versions`, { params: { state, limit: PAGE, offset } }),
    api(`/datasets/${seg(name)}/aliases`),
  ]);
  const splitCellsByName = new Map();
  const aliasesOf = new Map();
  for (const a of aliases.data) {
    if (!aliasesOf.has(a.version)) aliasesOf.set(a.version, []);
    aliasesOf.get(a.version).push(a.alias);
  }
  const stateSelect = h(
    "select",
    {
      id: "state-filter",
      onchange: (event) => {
        const value = event.target.value;
        window.location.hash = `${datasetHref(name)}${value ? `?state=${value}` : ""}`;
      },
    },
    ["", "committed", "deprecated", "staged", "abandoned"].map((s) => h("option", { value: s, selected: s === state }, s || "every state")),
  );
  const compareForm = compareFormFor(versions.data);
  clear(
    main,
    h("p", { class: "crumbs" }, link("#/", "Datasets"), " / ", name),
    h("h1", {}, name),
    dataset.description ? h("p", {}, dataset.description) : null,
    h("p", { class: "muted" }, `${count(dataset.version_count)} published versions · created ${when(dataset.created_at)} by ${dataset.created_by}`),
    h("h2", {}, "Versions"),
    h("p", {}, h("label", { for: "state-filter" }, "Show "), stateSelect),
    table(
      [
        ["Version", (v) => link(versionHref(v.name), v.name)],
        ["Aliases", (v) => h("span", { class: "version-aliases", "data-testid": "version-aliases" }, (aliasesOf.get(v.name) || []).map((a, i) => [i ? " " : null, h("span", { class: "badge" }, a)]))],
        ["State", (v) => h("span", {}, badge(v.state), v.deprecated_reason ? h("span", { class: "reason" }, ` ${v.deprecated_reason}`) : null, dataStatus(v) ? [" ", dataStatus(v)] : null)],
        ["Date", (v) => v.date],
        ["Desc", (v) => v.desc || "—"],
        ["Records per split", (v) => {
          const cell = h("div", {}, "…");
          splitCellsByName.set(v.name, cell);
          return cell;
        }],
        ["Records", (v) => count(v.record_count)],
        ["Shards", (v) => count(v.shard_count)],
        ["Size", (v) => bytes(v.size)],
        ["Created", (v) => `${when(v.created_at)} by ${v.created_by}`],
      ],
      versions.data,
      { testid: "versions" },
    ),
    pager(query, versions.count, datasetHref(name)),
    compareForm,
    h("h2", {}, "Aliases"),
    aliasesTable(name, aliases.data),
    ctx.canWrite ? aliasForm(name, versions.data) : null,
  );
  // records per split: one small request per listed version, filled in as they arrive
  await Promise.all(
    versions.data.map(async (v) => {
      const cell = splitCellsByName.get(v.name);
      try {
        const answer = await api(`/versions/${seg(v.name)}/splits`);
        clear(cell, splitCells(answer.splits));
      } catch (error) {
        clear(cell, error.code || "error");
      }
    }),
  );
}

function compareFormFor(versions) {
  const usable = versions.filter((v) => v.state === "committed" || v.state === "deprecated");
  if (usable.length < 2) return null;
  const pick = (id, label, selected) =>
    h(
      "span",
      {},
      h("label", { for: id }, label),
      " ",
      h("select", { id }, usable.map((v) => h("option", { value: v.name, selected: v.name === selected }, v.name))),
    );
  return h(
    "form",
    {
      class: "inline-form",
      "data-testid": "compare-form",
      onsubmit: (event) => {
        event.preventDefault();
        const form = event.target;
        window.location.hash = compareHref(form.querySelector("#compare-old").value, form.querySelector("#compare-new").value);
      },
    },
    h("h2", {}, "Compare two versions"),
    pick("compare-old", "from", usable[1].name),
    " ",
    pick("compare-new", "to", usable[0].name),
    " ",
    h("button", { type: "submit" }, "Compare"),
  );
}

function aliasesTable(dataset, aliases) {
  return table(
    [
      ["Alias", (a) => a.alias],
      ["Version", (a) => link(versionHref(a.version), a.version)],
      ["Moved", (a) => `${when(a.updated_at)}${a.updated_by ? ` by ${a.updated_by}` : ""}`],
      [
        "History",
        (a) => {
          if (a.alias === "latest") return h("span", { class: "muted" }, "computed: highest committed");
          const holder = h("div", {});
          const button = h(
            "button",
            {
              type: "button",
              class: "link-button",
              "aria-expanded": "false",
              onclick: async () => {
                button.setAttribute("aria-expanded", "true");
                try {
                  const history = await api(`/datasets/${seg(dataset)}/aliases/${seg(a.alias)}/history`);
                  clear(
                    holder,
                    h("ol", { class: "history" }, history.data.map((m) => h("li", {}, `${when(m.at)} ${m.by}: ${m.from_version ?? "∅"} → ${m.to_version ?? "deleted"}`))),
                  );
                } catch (error) {
                  clear(holder, errorBox(error));
                }
              },
            },
            "show history",
          );
          return h("div", {}, button, holder);
        },
      ],
    ],
    aliases,
    { testid: "aliases" },
  );
}

function aliasForm(dataset, versions) {
  const committed = versions.filter((v) => v.state === "committed");
  if (!committed.length) return null;
  const nameInput = h("input", { id: "alias-name", required: true, placeholder: "prod", pattern: "[a-z][a-z0-9_\\-]*" });
  const versionSelect = h("select", { id: "alias-version" }, committed.map((v) => h("option", { value: v.name }, v.name)));
  const status = h("p", { role: "status" });
  return h(
    "form",
    {
      class: "inline-form write-action",
      "data-testid": "alias-form",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          await api(`/datasets/${seg(dataset)}/aliases/${seg(nameInput.value.trim())}`, { method: "PUT", body: { version: versionSelect.value } });
          window.dispatchEvent(new HashChangeEvent("hashchange"));
        } catch (error) {
          clear(status, errorBox(error));
        }
      },
    },
    h("h3", {}, "Set or move an alias"),
    h("label", { for: "alias-name" }, "alias"),
    " ",
    nameInput,
    " ",
    h("label", { for: "alias-version" }, "→ version"),
    " ",
    versionSelect,
    " ",
    h("button", { type: "submit" }, "Set alias"),
    status,
  );
}

// ------------------------------------------------------------------------- one version

function identity(shard) {
  const id = shard.storage_identity || {};
  const parts = Object.entries(id)
    .filter(([, value]) => value !== null && value !== undefined && value !== "")
    .map(([key, value]) => `${key}=${value}`);
  return parts.length ? h("code", { class: "identity" }, parts.join(" ")) : "—";
}

function shardsTable(split, entry) {
  const shards = entry.shards;
  const body = h("div", {});
  const render = (n) => {
    clear(
      body,
      table(
        [
          ["#", (s) => `${s.index}/${s.count}`],
          ["URI", (s) => h("code", { class: "uri" }, s.uri)],
          ["Compression", (s) => s.compression],
          ["Records", (s) => count(s.record_count)],
          ["Size", (s) => bytes(s.size)],
          ["sha256", (s) => hash(s.sha256)],
          ["crc32c", (s) => hash(s.crc32c)],
          ["records sha256", (s) => hash(s.records_sha256)],
          ["Storage identity", identity],
          ["Impact", (s) => link(`#/impact?sha256=${s.sha256}`, "who used it?")],
        ],
        shards.slice(0, n),
        { testid: `shards-${split}` },
      ),
      n < shards.length
        ? h("button", { type: "button", onclick: () => render(n + SHARDS_SHOWN * 5) }, `show more (${count(shards.length - n)} not shown)`)
        : null,
    );
  };
  render(SHARDS_SHOWN);
  return h(
    "section",
    { class: "split-section" },
    h("h3", {}, `Split ${split}: ${counted(entry.shard_count, "shard")}, ${counted(entry.record_count, "record")}, ${bytes(entry.size)}`),
    body,
  );
}

function schemaTable(schema) {
  const present = (f) => {
    if (!schema.record_count) return "—";
    const fraction = (f.present_count ?? schema.record_count) / schema.record_count;
    return `${(fraction * 100).toFixed(fraction === 1 ? 0 : 1)} %`;
  };
  const shape = (f) => {
    const values = f.min_count === f.max_count ? `${f.min_count}` : `${f.min_count}..${f.max_count}`;
    const steps = f.min_steps !== undefined && f.min_steps !== null ? ` × steps ${f.min_steps}..${f.max_steps}` : "";
    return `${values} per record${steps}`;
  };
  const inferred = `${schema.record_type} records, inferred from ${counted(schema.record_count, "record")}`;
  if (!schema.features.length) {
    // an empty table (its header alone) read as "the schema did not load"
    const why = {
      opaque: "the records are not tf.train.Example protos, so there is no feature schema",
      empty: "there are no records",
    }[schema.record_type] ?? "the records carry no features";
    return h("p", { class: "muted", "data-testid": "schema-none" }, `${inferred}: no features (${why}).`);
  }
  return h(
    "div",
    {},
    h("p", { class: "muted" }, inferred),
    table(
      [
        ["Feature", (f) => h("code", {}, f.name)],
        ["Scope", (f) => f.scope],
        ["Kind", (f) => f.kind],
        ["Shape (values)", shape],
        ["Presence", present],
      ],
      schema.features,
      { testid: "schema" },
    ),
  );
}

/** The checkpoints trained on a version, every one of them (paged, searchable, exportable). */
function consumersSection(versionName) {
  const fetchPage = (offset, limit) => api(`/versions/${seg(versionName)}/consumers`, { params: { limit, offset } });
  return loadingList(
    fetchPage,
    ({ first, rows }) => {
      if (!rows.length) return h("p", { class: "muted", "data-testid": "consumers-none" }, "No checkpoint has trained on this version.");
      return h(
        "div",
        {},
        h("p", {}, first.models.map((m) => `${m.model}: ${count(m.checkpoints)} checkpoints (${count(m.direct)} direct)`).join(" · ")),
        fullTable(consumerColumns("trained on it"), rows, { testid: "consumers", filename: `${versionName}-consumers`, label: "checkpoints" }),
      );
    },
    { testid: "consumers", label: "checkpoints" },
  ).element;
}

/** The columns of a consumers answer's checkpoints (version page, shard impact page). */
export function consumerColumns(directly) {
  return [
    {
      name: "Checkpoint",
      value: (c) => c.ref,
      cell: (c) => link(checkpointHref(c.model, c.checkpoint, c.run), c.ref),
    },
    { name: "Model", value: (c) => c.model },
    { name: "Run", value: (c) => c.run ?? "" },
    { name: "Step", value: (c) => c.step, cell: (c) => count(c.step) },
    { name: "State", value: (c) => c.state, cell: (c) => (c.state === "deleted" ? badge("deleted") : c.state) },
    {
      name: "How",
      value: (c) => (c.direct ? `${directly} (${(c.roles || []).join(", ")}: ${c.splits.join(", ")})` : `from ${c.parent}`),
    },
  ];
}

function provenanceSection(version) {
  const p = version.provenance || {};
  const facts = [];
  for (const parent of p.parents || []) {
    facts.push([`Parent (${parent.role})`, link(versionHref(parent.name), parent.name)]);
  }
  for (const source of p.sources || []) {
    const id = source.identity;
    facts.push([
      "Source",
      h(
        "span",
        {},
        h("code", { class: "uri" }, source.uri),
        id ? ` — ${id.method} ${id.digest.slice(0, 19)}… · ${count(id.files)} files · ${bytes(id.size)}` : " — identity not recorded",
      ),
    ]);
  }
  const producer = p.producer;
  if (producer && producer.vcs === "git" && producer.commit) {
    const dirty = producer.dirty ? ` + uncommitted changes ${producer.diff_digest ? producer.diff_digest.slice(0, 19) + "…" : ""}` : "";
    facts.push([
      "Code",
      h(
        "span",
        { "data-testid": "provenance-commit" },
        h("code", {}, producer.commit.slice(0, 12)),
        producer.branch ? ` on ${producer.branch}` : "",
        dirty,
        producer.remote ? [" · ", h("code", {}, producer.remote)] : "",
        producer.entry ? [" · ", h("code", {}, producer.entry)] : "",
      ),
    ]);
  } else if (producer) {
    facts.push(["Code", "unknown (not produced in a git work tree)"]);
  }
  if (p.params) facts.push(["Parameters", h("span", {}, hash(p.params_digest, 71), json(p.params))]);
  if (p.command) facts.push(["Command", h("code", { "data-testid": "provenance-command" }, shellJoin(p.command))]);
  if (p.environment) {
    const env = p.environment;
    facts.push(["Environment", `Python ${env.python || "?"} · TensorFlow ${env.tensorflow || "—"} · recordkeeper ${env.recordkeeper || "?"}`]);
  }
  if (p.note) facts.push(["Note", p.note]);
  if (!facts.length) return h("p", { class: "muted", "data-testid": "provenance-none" }, "No provenance was recorded for this version.");
  return h("dl", { class: "facts", "data-testid": "provenance" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/** Where the shards are: the storage prefix, or — published in place — the shards' common
 * directory (the prefix was never written to); recordkeeper.core.shards.shard_location is the
 * same rule. */
function shardLocation(version) {
  const uris = Object.values(version.splits || {}).flatMap((s) => s.shards.map((x) => x.uri));
  const base = version.storage_prefix.replace(/\/+$/, "") + "/";
  if (!uris.length || uris.every((u) => u.startsWith(base))) return ["Storage prefix", h("code", {}, version.storage_prefix)];
  const dirs = uris.map((u) => u.slice(0, u.lastIndexOf("/")));
  let common = dirs[0];
  for (const d of dirs.slice(1)) {
    while (common && !(d === common || d.startsWith(`${common}/`))) common = common.slice(0, Math.max(0, common.lastIndexOf("/")));
  }
  if (!common || common.endsWith(":/") || common.endsWith(":")) common = dirs[0];
  return ["Shards", h("span", { "data-testid": "shard-location" }, h("code", {}, `${common}/`), " — registered in place, not copied")];
}

export async function versionPage(main, [ref], _query, ctx) {
  const version = await api(`/versions/${seg(ref)}`);
  const [schema, sample] = await Promise.all([
    version.schema_digest ? api(`/versions/${seg(version.name)}/schema`).then((s) => s.schema) : null,
    fetchSample(version.name),
  ]);
  const previous = version.number > 1 ? `${version.dataset}@v${version.number - 1}` : null;
  const facts = [
    ["State", h("span", {}, badge(version.state), version.deprecated_reason ? ` — ${version.deprecated_reason}` : "")],
    ...(dataStatus(version) ? [["Data", h("span", {}, dataStatus(version), " — its digests, schema and lineage are kept; its records cannot be read")]] : []),
    ["Number / date / desc", `v${version.number} · ${version.date} · ${version.desc || "—"}`],
    ["Content digest", hash(version.content_digest, 64)],
    ["Schema digest", hash(version.schema_digest, 64)],
    ["Records / shards / size", `${count(version.record_count)} · ${count(version.shard_count)} · ${bytes(version.size)}`],
    shardLocation(version),
    ["Created", `${when(version.created_at)} by ${version.created_by}`],
    ["Committed", when(version.committed_at)],
    ["Convention", version.convention],
  ];
  if (version.duplicate_of) facts.push(["Duplicate of", link(versionHref(version.duplicate_of), version.duplicate_of)]);
  clear(
    main,
    h("p", { class: "crumbs" }, link("#/", "Datasets"), " / ", link(datasetHref(version.dataset), version.dataset), " / ", version.name),
    h("h1", { "data-testid": "version-name" }, version.name),
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h(
      "p",
      { class: "actions" },
      link(`#/graph?version=${encodeURIComponent(version.name)}`, "Lineage graph"),
      previous ? [" · ", link(compareHref(previous, version.name), `Compare with v${version.number - 1}`)] : null,
    ),
    ctx.canWrite && version.state === "committed" ? deprecateForm(version) : null,
    h("h2", {}, "Provenance"),
    provenanceSection(version),
    Object.keys(version.metadata || {}).length ? [h("h2", {}, "Metadata"), json(version.metadata)] : null,
    h("h2", {}, "Splits and shards"),
    Object.entries(version.splits || {}).map(([split, entry]) => shardsTable(split, entry)),
    h("h2", {}, "Schema"),
    schema ? schemaTable(schema) : h("p", { class: "muted" }, "No merged schema (not committed, or some shard was registered without one)."),
    h("h2", {}, "Sample records"),
    sampleSection(version.name, sample),
    h("h2", {}, "Consumers"),
    consumersSection(version.name),
  );
}

function deprecateForm(version) {
  const reason = h("input", { id: "deprecate-reason", placeholder: "why (kept in the audit log)", size: 40 });
  const status = h("div", { role: "status" });
  return h(
    "form",
    {
      class: "inline-form write-action",
      "data-testid": "deprecate-form",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          await api(`/versions/${seg(version.name)}/deprecate`, { method: "POST", body: { reason: reason.value.trim() || null } });
          window.dispatchEvent(new HashChangeEvent("hashchange"));
        } catch (error) {
          clear(status, errorBox(error));
        }
      },
    },
    h("label", { for: "deprecate-reason" }, "Deprecate this version: "),
    reason,
    " ",
    h("button", { type: "submit", class: "danger" }, "Deprecate"),
    status,
  );
}

// ------------------------------------------------------------------------- compare

export async function comparePage(main, _args, query) {
  const oldRef = query.get("old") || "";
  const newRef = query.get("new") || "";
  const oldInput = h("input", { id: "old-ref", name: "old", value: oldRef, required: true, placeholder: "coco@v3" });
  const newInput = h("input", { id: "new-ref", name: "new", value: newRef, required: true, placeholder: "coco@latest" });
  const form = h(
    "form",
    {
      class: "inline-form",
      onsubmit: (event) => {
        event.preventDefault();
        window.location.hash = compareHref(oldInput.value.trim(), newInput.value.trim());
      },
    },
    h("label", { for: "old-ref" }, "from "),
    oldInput,
    h("label", { for: "new-ref" }, " to "),
    newInput,
    " ",
    h("button", { type: "submit" }, "Compare"),
  );
  clear(main, h("h1", {}, "Compare two versions"), form);
  if (!oldRef || !newRef) return;
  const [diff, records] = await Promise.all([api(`/versions/${seg(oldRef)}/diff/${seg(newRef)}`), fetchRecords(oldRef, newRef)]);
  const changes = [...diff.shards.added, ...diff.shards.removed, ...diff.shards.changed].sort((a, b) =>
    a.split === b.split ? a.index - b.index : a.split < b.split ? -1 : 1,
  );
  main.append(
    h("h2", { "data-testid": "diff-title" }, link(versionHref(diff.old), diff.old), " → ", link(versionHref(diff.new), diff.new)),
    h(
      "p",
      { "data-testid": "diff-summary", class: diff.same_content ? "ok" : "" },
      diff.same_content
        ? "Same content (equal content digests)."
        : `${count(diff.shards.counts.added)} shards added, ${count(diff.shards.counts.removed)} removed, ${count(diff.shards.counts.changed)} changed, ${count(diff.shards.unchanged)} unchanged.` +
            (diff.shards.more ? ` The table lists the first ${count(changes.length)} changes.` : ""),
    ),
    h("h3", {}, "Records per split"),
    table(
      [
        ["Split", ([s]) => s],
        ["From", ([, c]) => `${count(c.old_records)} (${c.old_shards} shards)`],
        ["To", ([, c]) => `${count(c.new_records)} (${c.new_shards} shards)`],
        ["Δ records", ([, c]) => h("span", { class: c.record_delta > 0 ? "plus" : c.record_delta < 0 ? "minus" : "" }, `${c.record_delta > 0 ? "+" : ""}${count(c.record_delta)}`)],
      ],
      Object.entries(diff.splits),
      { testid: "diff-splits" },
    ),
    h("h3", {}, "Records"),
    recordsSection(diff, records, changes),
    h("h3", {}, "Record diff"),
    recordDiffSection(diff, records),
    h("h3", {}, "Shards"),
    changes.length
      ? table(
          [
            ["Shard", (c) => `${c.split}/${c.index}`],
            ["Change", (c) => h("span", { class: `change-${c.change}` }, c.change)],
            ["From", (c) => (c.old ? [hash(c.old.records_sha256), ` ${count(c.old.record_count)} records`] : "—")],
            ["To", (c) => (c.new ? [hash(c.new.records_sha256), ` ${count(c.new.record_count)} records`] : "—")],
          ],
          changes,
          { testid: "diff-shards" },
        )
      : h("p", { class: "muted" }, "No shard changed."),
    h("h3", {}, "Schema"),
    diff.schema.length
      ? h("ul", { "data-testid": "diff-schema" }, diff.schema.map((c) => h("li", { class: `change-${c.change}` }, h("code", {}, c.description))))
      : h("p", { class: "muted", "data-testid": "diff-schema-none" }, "No schema change."),
  );
}
