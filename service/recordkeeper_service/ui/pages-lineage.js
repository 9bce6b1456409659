// Pages about training: models, runs and checkpoints; shard impact; the lineage graph.
import { api, seg } from "./api.js";
import { badge, clear, count, dataStatus, errorBox, h, hash, json, link, table, when } from "./dom.js";
import { LEGEND, LineageView, checkpointHref, nodeLabel, shortCommit, splitCheckpointRef } from "./graph.js";
import { fetchAll, fullTable } from "./lists.js";
import { runHref } from "./pages-runs.js";
import { consumerColumns } from "./pages-data.js";

/** The page of a checkpoint named in full by the service (`model@run/checkpoint`). */
const refHref = (ref) => {
  const { model, run, checkpoint } = splitCheckpointRef(ref);
  return checkpointHref(model, checkpoint, run);
};
const versionHref = (name) => `#/versions/${encodeURIComponent(name)}`;
const MODEL_PAGE = 200;
const graphHref = (kind, value) => `#/graph?${kind}=${encodeURIComponent(value)}`;

/** A "deprecated" badge (the reason in its tooltip and text) for a data entry whose version was
 * deprecated; null otherwise. */
function deprecatedBadge(d) {
  if (d.state !== "deprecated") return null;
  return h(
    "span",
    { class: "badge badge-deprecated", "data-testid": "deprecated-data", title: d.deprecated_reason || "deprecated" },
    d.deprecated_reason ? `deprecated: ${d.deprecated_reason}` : "deprecated",
  );
}

/** "deleted 2026-12-01 (max_to_keep)" for a checkpoint whose files are gone; null while present. */
function deletedBadge(c) {
  if (c.state !== "deleted") return null;
  const why = c.deleted_reason ? ` (${c.deleted_reason})` : "";
  return h("span", { class: "badge badge-checkpoint-deleted", "data-testid": "checkpoint-deleted" }, `deleted ${(c.deleted_at || "").slice(0, 10)}${why}`);
}

function metrics(values) {
  const entries = Object.entries(values || {});
  if (!entries.length) return "—";
  return entries.map(([k, v]) => `${k}=${typeof v === "number" ? Number(v.toPrecision(4)) : JSON.stringify(v)}`).join(" ");
}

// ------------------------------------------------------------------------- models

export async function modelsPage(main, _args, query) {
  const prefix = query.get("q") || "";
  const models = await api("/models", { params: { prefix, limit: 200 } });
  const input = h("input", { id: "model-search", type: "search", value: prefix, placeholder: "name prefix" });
  clear(
    main,
    h("h1", {}, "Models"),
    h(
      "form",
      {
        class: "search",
        role: "search",
        onsubmit: (event) => {
          event.preventDefault();
          window.location.hash = `#/models?q=${encodeURIComponent(input.value.trim())}`;
        },
      },
      h("label", { for: "model-search" }, "Search models"),
      input,
      h("button", { type: "submit" }, "Search"),
    ),
    h("p", {}, `${count(models.count)} models`),
    table(
      [
        ["Model", (m) => link(`#/models/${encodeURIComponent(m.name)}`, m.name)],
        ["Checkpoints", (m) => count(m.checkpoint_count)],
        ["Latest", (m) => (m.latest_checkpoint ? link(refHref(m.latest_checkpoint), m.latest_checkpoint) : "—")],
        ["Created", (m) => when(m.created_at)],
      ],
      models.data,
      { testid: "models" },
    ),
  );
}

export async function modelPage(main, [model], query) {
  const offset = Number(query.get("offset") || 0);
  const page = await api(`/models/${seg(model)}/checkpoints`, { params: { limit: MODEL_PAGE, offset } });
  const runs = new Map();
  for (const c of page.data) {
    const run = c.run ?? "(no run)";
    if (!runs.has(run)) runs.set(run, []);
    runs.get(run).push(c);
  }
  clear(
    main,
    h("p", { class: "crumbs" }, link("#/models", "Models"), " / ", model),
    h("h1", {}, model),
    h("p", { class: "muted" }, `${count(page.count)} checkpoints; ${runs.size} run${runs.size === 1 ? "" : "s"} on this page (highest step first)`),
    h(
      "nav",
      { class: "pager", "aria-label": "pages" },
      offset > 0 ? link(`#/models/${encodeURIComponent(model)}?offset=${Math.max(0, offset - MODEL_PAGE)}`, "← previous") : null,
      h("span", { class: "muted" }, ` ${page.count ? offset + 1 : 0}–${offset + page.data.length} of ${count(page.count)} `),
      offset + MODEL_PAGE < page.count ? link(`#/models/${encodeURIComponent(model)}?offset=${offset + MODEL_PAGE}`, "next →") : null,
    ),
    [...runs].map(([run, checkpoints]) => [
      h("h2", {}, `Run ${run}`, checkpoints[0].run ? [" ", h("small", {}, link(runHref(model, checkpoints[0].run), "metrics by step", { "data-testid": `run-page-${run}` }))] : null),
      table(
        [
          ["Checkpoint", (c) => [link(checkpointHref(c.model, c.checkpoint, c.run), c.checkpoint), deletedBadge(c) ? " " : null, deletedBadge(c)]],
          ["Step", (c) => count(c.step)],
          ["Parent", (c) => (c.parent ? `${c.parent} (${c.parent_kind})` : "—")],
          [
            "Data",
            (c) =>
              c.data.map((d, i) => [
                i ? ", " : "",
                link(versionHref(d.version), d.version),
                ` (${d.role})`,
                dataStatus(d) ? " " : null,
                dataStatus(d),
                deprecatedBadge(d) ? " " : null,
                deprecatedBadge(d),
              ]),
          ],
          ["Metrics", (c) => metrics(c.metrics)],
          [
            "Exports",
            (c) =>
              c.saved_models.length
                ? h("span", { class: c.state === "deleted" ? "gone" : "" }, c.saved_models.map((s) => s.name).join(", "), c.state === "deleted" ? " (deleted with the checkpoint)" : "")
                : "—",
          ],
        ],
        checkpoints,
        { testid: `run-${run}` },
      ),
    ]),
  );
}

export async function checkpointPage(main, [model, checkpoint], query) {
  const run = query.get("run"); // absent: the service finds the one run with this checkpoint
  const lineage = await api(`/models/${seg(model)}/checkpoints/${seg(checkpoint)}/lineage`, { params: run ? { run } : {} });
  const c = lineage.checkpoint;
  const ref = c.ref; // model@run/checkpoint
  // The chain's end without a parent link is a root, unless it records a parent the service
  // never got (metadata.unregistered_parent, as the CLI's tree says): its chain is cut there.
  const end = lineage.chain[lineage.chain.length - 1];
  let unregistered = null;
  if (end && !end.parent_kind) {
    const metadata =
      end.ref === ref ? c.metadata : (await api(`/models/${seg(end.model)}/checkpoints/${seg(end.checkpoint)}`, { params: { run: end.run } })).metadata;
    unregistered = (metadata || {}).unregistered_parent || null;
  }
  const linkToNext = (l) => {
    if (l.parent_kind) return l.parent_kind;
    if (l === end && unregistered) return h("span", { "data-testid": "unregistered-parent" }, `parent not registered: ${unregistered}`);
    return "root";
  };
  clear(
    main,
    h("p", { class: "crumbs" }, link("#/models", "Models"), " / ", link(`#/models/${encodeURIComponent(model)}`, model), " / ", checkpoint),
    h("h1", { "data-testid": "checkpoint-ref" }, ref),
    h(
      "dl",
      { class: "facts" },
      [
        ["State", c.state === "deleted" ? h("span", {}, deletedBadge(c), " — its files are gone; its lineage is kept") : "present"],
        ["Step", count(c.step)],
        ["Run", c.run || "—"],
        ["URI", c.uri ? h("code", {}, c.uri) : "—"],
        ["Parent", c.parent ? [link(refHref(c.parent), c.parent), ` (${c.parent_kind})`] : "—"],
        ["Metrics", metrics(c.metrics)],
        ["Created", `${when(c.created_at)} by ${c.created_by}`],
      ].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
    ),
    h("p", { class: "actions" }, link(graphHref("checkpoint", ref), "Lineage graph", { "data-testid": "graph-link" })),
    h("h2", {}, "Exports (SavedModels)"),
    c.saved_models.length
      ? table(
          [
            ["Name", (s) => s.name],
            ["URI", (s) => h("code", { class: c.state === "deleted" ? "gone" : "" }, s.uri)],
            ["State", () => (c.state === "deleted" ? h("span", { class: "badge badge-checkpoint-deleted", "data-testid": "export-deleted" }, "deleted with the checkpoint") : "present")],
          ],
          c.saved_models,
          { testid: "exports" },
        )
      : h("p", { class: "muted" }, "None registered."),
    h("h2", {}, "Which data trained it"),
    h("p", { class: "muted" }, `The union along the parent chain (${lineage.chain.length} checkpoint${lineage.chain.length === 1 ? "" : "s"}).`),
    table(
      [
        ["Version", (d) => link(versionHref(d.version), d.version)],
        ["State", (d) => [d.state === "deprecated" ? badge("deprecated") : d.state, dataStatus(d) ? " " : null, dataStatus(d)]],
        ["Role", (d) => d.role],
        ["Splits", (d) => d.splits.join(", ")],
        ["Content digest", (d) => hash(d.content_digest)],
        ["Used by", (d) => d.segments.map((s) => `${s.model}/${s.checkpoint}`).join(", ")],
      ],
      lineage.data,
      { testid: "lineage-data" },
    ),
    h("h2", {}, "Chain"),
    table(
      [
        ["Depth", (l) => l.depth],
        ["Checkpoint", (l) => [link(checkpointHref(l.model, l.checkpoint, l.run), l.ref), l.state === "deleted" ? [" ", badge("deleted")] : null]],
        ["Step", (l) => count(l.step)],
        ["Link to next", linkToNext],
      ],
      lineage.chain,
      { testid: "chain" },
    ),
    Object.keys(c.metadata || {}).length ? [h("h2", {}, "Metadata"), json(c.metadata)] : null,
  );
}

// ------------------------------------------------------------------------- shard impact

export async function impactPage(main, _args, query) {
  const value = query.get("sha256") || query.get("uri") || "";
  const input = h("input", { id: "shard", value, size: 70, placeholder: "s3://bucket/…/train-00003-of-00016.tfrecord or a sha256" });
  clear(
    main,
    h("h1", {}, "Shard impact"),
    h("p", {}, "This shard is bad — which checkpoints trained on it (directly, or restored / fine-tuned from one that did)?"),
    h(
      "form",
      {
        class: "search",
        onsubmit: (event) => {
          event.preventDefault();
          const text = input.value.trim();
          const key = text.includes("://") ? "uri" : "sha256";
          window.location.hash = `#/impact?${key}=${encodeURIComponent(text)}`;
        },
      },
      h("label", { for: "shard" }, "Shard URI or sha256"),
      input,
      h("button", { type: "submit" }, "Find checkpoints"),
    ),
  );
  if (!value) return;
  const params = query.get("sha256") ? { sha256: value } : { uri: value };
  const fetchPage = (offset, limit) => api("/shards/consumers", { params: { ...params, limit, offset } });
  const { first: answer, rows } = await fetchAll(fetchPage, () => {});
  main.append(
    h("h2", {}, "Registrations of this shard"),
    answer.shards && answer.shards.length
      ? table(
          [
            ["Version", (s) => link(versionHref(s.version), s.version)],
            ["Split / index", (s) => `${s.split} ${s.index}/${s.count}`],
            ["URI", (s) => h("code", {}, s.uri)],
          ],
          answer.shards,
          { testid: "impact-shards" },
        )
      : h("p", { class: "muted" }, "No version holds this shard."),
    h("h2", {}, `Affected checkpoints: ${count(answer.count)}`),
    h("p", {}, answer.models.map((m) => `${m.model}: ${count(m.checkpoints)} (${count(m.direct)} direct)`).join(" · ")),
    rows.length
      ? fullTable(consumerColumns("trained on its split"), rows, { testid: "impact-checkpoints", filename: "shard-impact", label: "checkpoints" })
      : h("p", { class: "muted" }, "No checkpoint trained on it."),
  );
}

// ------------------------------------------------------------------------- graph

const SVG = "http://www.w3.org/2000/svg";
const LEGEND_KEY = "recordkeeper.graphLegend"; // "hidden" once the user closed the legend

function svg(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null && v !== "") el.setAttribute(k, String(v));
  return el;
}

/** A small drawing of a node shape or an edge line, in the graph's own colours. */
function swatch(item, edge) {
  const box = svg("svg", { width: 26, height: 16, viewBox: "0 0 26 16", class: "swatch", "aria-hidden": "true" });
  if (edge) {
    box.append(
      svg("line", { x1: 2, y1: 8, x2: 19, y2: 8, stroke: item.color, "stroke-width": 2, "stroke-dasharray": item.dash }),
      svg("path", { d: "M18 4 L25 8 L18 12 Z", fill: item.color }),
    );
    return box;
  }
  const paint = { fill: item.fill, stroke: item.stroke || "#334", "stroke-width": item.dash || item.double ? 2 : 1, "stroke-dasharray": item.dash };
  if (item.shape === "text") {
    const text = svg("text", { x: 13, y: 12, "text-anchor": "middle", class: "swatch-text" });
    text.textContent = "@ c1";
    box.append(text);
  } else if (item.shape === "ellipse") box.append(svg("ellipse", { cx: 13, cy: 8, rx: 6.5, ry: 6.5, ...paint }));
  else if (item.shape === "diamond") box.append(svg("path", { d: "M13 1 L20 8 L13 15 L6 8 Z", ...paint }));
  else if (item.shape === "hexagon") box.append(svg("path", { d: "M7 2 L19 2 L24 8 L19 14 L7 14 L2 8 Z", ...paint }));
  else box.append(svg("rect", { x: 4, y: 3, width: 18, height: 10, rx: 3, ...paint }));
  if (item.double) box.append(svg("ellipse", { cx: 13, cy: 8, rx: 4, ry: 4, fill: "none", stroke: item.stroke, "stroke-width": 1 }));
  return box;
}

/** The graph's legend: what each node shape, edge line and mark means, in one strip above it. */
function graphLegend() {
  const section = (title, items, edge) =>
    h(
      "div",
      { class: "legend-group" },
      h("h3", {}, title),
      h(
        "ul",
        {},
        items.map((item) => h("li", { "data-kind": item.kind, title: item.title }, swatch(item, edge), h("span", {}, item.label))),
      ),
    );
  return h(
    "section",
    { class: "graph-legend", id: "graph-legend", "data-testid": "graph-legend", "aria-label": "legend" },
    section("Nodes", LEGEND.nodes, false),
    section("Edges →", LEGEND.edges, true),
    section("Marks", LEGEND.marks, false),
  );
}

/** The progress of a large drawing, as text: "Laying out 5,000 nodes…". */
function progressText({ phase, done, total, edges }) {
  if (phase === "layout") return `Laying out ${count(total)} nodes…`;
  if (phase === "nodes") return `Drawing ${count(done)} of ${count(total)} nodes…`;
  if (phase === "edges") return `Drawing ${count(edges)} edges…`;
  return `Painting ${count(total)} nodes…`;
}

function progressValue({ phase, done, total }) {
  if (phase === "layout") return 2;
  if (phase === "nodes") return 5 + Math.round((75 * done) / Math.max(1, total));
  if (phase === "edges") return 85;
  return 95;
}

export async function graphPage(main, _args, query) {
  const checkpoint = query.get("checkpoint");
  const version = query.get("version");
  const source = query.get("source");
  const rootId = checkpoint ? `checkpoint:${checkpoint}` : version ? `version:${version}` : source ? `source:${source}` : null;
  if (!rootId) {
    clear(main, h("h1", {}, "Lineage graph"), h("p", {}, "Open it from a version or a checkpoint page."));
    return undefined;
  }
  const canvas = h("div", { class: "graph-canvas", "data-testid": "graph-canvas", role: "img", "aria-label": "lineage graph; the panel beside it lists the same nodes" });
  const panel = h("aside", { class: "graph-panel", "data-testid": "graph-panel", "aria-live": "polite" });
  const status = h("p", { class: "muted", "data-testid": "graph-status" });
  const legend = graphLegend();
  const legendShown = () => window.localStorage.getItem(LEGEND_KEY) !== "hidden";
  legend.hidden = !legendShown();
  const legendButton = h(
    "button",
    {
      type: "button",
      "data-testid": "legend-toggle",
      "aria-controls": "graph-legend",
      "aria-pressed": String(!legend.hidden),
      onclick: () => {
        legend.hidden = !legend.hidden;
        legendButton.setAttribute("aria-pressed", String(!legend.hidden));
        window.localStorage.setItem(LEGEND_KEY, legend.hidden ? "hidden" : "shown");
      },
    },
    "Legend",
  );
  const progressBar = h("progress", { max: 100, value: 0, "aria-label": "drawing the graph" });
  const progressLabel = h("span", {});
  const progress = h("div", { class: "graph-progress", "data-testid": "graph-progress", role: "status", "aria-live": "polite" }, progressLabel, progressBar);
  progress.hidden = true;
  const onProgress = (state) => {
    if (!state) {
      progress.hidden = true;
      canvas.removeAttribute("aria-busy");
      return;
    }
    progressLabel.textContent = progressText(state);
    progressBar.value = progressValue(state);
    progress.dataset.phase = state.phase;
    progress.hidden = false;
    canvas.setAttribute("aria-busy", "true");
  };
  let view = null;
  const showStatus = () => {
    const s = view.status();
    status.textContent =
      `${count(s.loaded)} nodes loaded, ${count(s.shown)} drawn, ${count(s.edges)} edges` +
      (s.truncated ? " — the service stopped at its 5,000-node limit: some neighbours are missing" : "");
  };
  const act = async (work) => {
    panel.setAttribute("aria-busy", "true");
    try {
      await work();
    } catch (error) {
      panel.prepend(errorBox(error));
    } finally {
      panel.removeAttribute("aria-busy");
      showStatus();
    }
  };
  const describe = (info) => {
    if (!info) return clear(panel);
    const { node, hidden } = info;
    const more = hidden.up + hidden.down;
    const buttons = [];
    if (node.kind === "cluster") {
      buttons.push(h("button", { type: "button", "data-testid": "open-cluster", onclick: () => act(() => view.activate(info.id)) }, `Show the ${info.members.length} checkpoints`));
    } else {
      buttons.push(
        h(
          "button",
          { type: "button", "data-testid": "expand", disabled: more === 0 && info.expanded, onclick: () => act(() => view.expand(info.id)) },
          more ? `Expand: ${more} more (${hidden.up} upstream, ${hidden.down} downstream)` : "Expand",
        ),
      );
      if (info.href) buttons.push(link(info.href, `Open ${node.kind} page`, { class: "button", "data-testid": "open-page" }));
      if (info.groupOpen) buttons.push(h("button", { type: "button", onclick: () => act(() => view.collapseGroup(info.groupKey)) }, "Collapse this run"));
    }
    const facts =
      node.kind === "version"
        ? [
            ["Dataset", node.dataset],
            ["Number", `v${node.number}`],
            ["State", node.state],
            ["Data", dataStatus(node) || "stored"],
            ["Content digest", hash(node.content_digest)],
            ...(node.desc ? [["Change", node.desc]] : []),
            ...(node.producer
              ? [["Producer", [shortCommit(node.producer) || node.producer.vcs, node.producer.branch, node.producer.entry].filter(Boolean).join(" ")]]
              : []),
            ...(node.params_digest ? [["Params", hash(node.params_digest)]] : []),
          ]
        : node.kind === "source"
        ? [["Raw source", node.uri], ["Versions made from it", count(node.downstream_count)]]
        : node.kind === "checkpoint"
          ? [
              ["Reference", h("code", { "data-testid": "selected-ref" }, nodeLabel(node).replace(/ \(deleted\)$/, ""))],
              ["Model", node.model],
              ["Run", node.run || "—"],
              ["Step", count(node.step)],
              ["State", node.state === "deleted" ? badge("deleted") : node.state || "present"],
              ["URI", node.uri ? h("code", {}, node.uri) : "—"],
            ]
          : [["Model", node.model], ["Run", node.run], ["Checkpoints", count(info.members.length)]];
    clear(
      panel,
      h("h2", { "data-testid": "selected-node" }, nodeLabel(node)),
      h("p", { class: "muted" }, node.kind),
      h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("div", { class: "actions" }, buttons),
      info.neighbours.length
        ? [
            h("h3", {}, "Neighbours drawn"),
            h(
              "ul",
              { class: "neighbours", "data-testid": "neighbours" },
              info.neighbours.slice(0, 200).map((n) =>
                h("li", {}, h("button", { type: "button", class: "link-button", onclick: () => view.select(n.id) }, `${n.side === "upstream" ? "←" : "→"} ${n.label}`)),
              ),
            ),
            info.neighbours.length > 200 ? h("p", { class: "muted" }, `and ${count(info.neighbours.length - 200)} more`) : null,
          ]
        : null,
    );
    return undefined;
  };
  const toolbar = h(
    "div",
    { class: "toolbar", role: "toolbar", "aria-label": "graph" },
    h("button", { type: "button", onclick: () => view.fit() }, "Fit"),
    h("button", { type: "button", "aria-label": "zoom in", onclick: () => view.zoomBy(1.4) }, "+"),
    h("button", { type: "button", "aria-label": "zoom out", onclick: () => view.zoomBy(1 / 1.4) }, "−"),
    h("button", { type: "button", "data-testid": "open-all", onclick: () => act(async () => view.openAllClusters()) }, "Open all clusters"),
    h("button", { type: "button", "data-testid": "expand-selected", onclick: () => act(() => view.activate(view.selected)) }, "Expand selected (Enter)"),
    legendButton,
  );
  clear(
    main,
    h("h1", {}, "Lineage: ", rootId.replace(/^[a-z]+:/, "")),
    h("p", { class: "muted" }, "Data flows left to right: raw sources → versions → versions derived from them → checkpoints → checkpoints restored or fine-tuned from them (each version shows its producer's commit). “+N” counts neighbours not loaded yet; double-click (or Enter) expands; runs with more than 20 checkpoints are drawn as one cluster."),
    toolbar,
    status,
    h("div", { class: "graph-layout" }, h("div", { class: "graph-stage" }, legend, h("div", { class: "graph-frame" }, canvas, progress)), panel),
  );
  view = new LineageView(canvas, { onSelect: describe, onProgress });
  window.recordkeeperGraph = view; // performance probe (bench/bench_ui.py) and debugging
  canvas.tabIndex = 0;
  canvas.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && view.selected) act(() => view.activate(view.selected));
    else if (event.key === "+" || event.key === "=") view.zoomBy(1.25);
    else if (event.key === "-") view.zoomBy(0.8);
    else if (event.key.startsWith("Arrow")) {
      const d = 60;
      const delta = { ArrowLeft: [d, 0], ArrowRight: [-d, 0], ArrowUp: [0, d], ArrowDown: [0, -d] }[event.key];
      view.cy.panBy({ x: delta[0], y: delta[1] });
      event.preventDefault();
    }
  });
  await act(() => view.open(rootId));
  canvas.dataset.ready = "true";
  return () => {
    if (window.recordkeeperGraph === view) delete window.recordkeeperGraph;
    view.destroy();
  };
}
