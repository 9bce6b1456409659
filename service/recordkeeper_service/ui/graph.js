// The lineage graph: raw sources → data versions (and the versions derived from them) →
// checkpoints → fine-tuned models, and back.  Columns follow the data flow, so a version's
// chain of parents and its raw sources sit to the left of the checkpoints trained on it; each
// version shows its producer's commit.
//
// Large lineage graphs freeze or turn to clutter when drawn whole, so this view:
// * opens one hop deep around the node asked for (GET /lineage/graph?depth=1), and shows on
//   every node how many of its neighbours are not loaded yet ("+N", from the service's
//   upstream_count / downstream_count);
// * expands a node on demand (double click, Enter, or the side panel's button), merging one
//   more hop around it;
// * draws more than CLUSTER_MIN checkpoints of one run (same model and run) as one cluster node
//   until the user opens it;
// * places nodes itself (columns by distance along the data flow, rows by run and step), which
//   costs O(n log n) instead of a force layout's O(n²), and tells Cytoscape to skip labels and
//   edges while the viewport moves, so pan and zoom stay fluid with thousands of nodes.
import cytoscape from "./vendor/cytoscape/cytoscape.esm.min.js";
import { api } from "./api.js";
import { EdgeLayer, edgeKinds } from "./graph-edges.js";

export const GRAPH_LIMIT = 5000; // nodes per graph answer: the service's maximum
export const CLUSTER_MIN = 21; // a run with more checkpoints than 20 becomes one cluster node
const ROWS_PER_COLUMN = 40;
const COLUMN_WIDTH = 230;
const SUB_COLUMN_WIDTH = 210;
const ROW_HEIGHT = 46;
const FAST_EDGES = 1500; // above this many edges, the EdgeLayer draws them (straight, no arrows)
const MAX_FIT_ZOOM = 1.8; // a handful of nodes is not blown up to fill a wide screen
const FIT_ALL_MAX = 400; // after a change, graphs up to this many drawn nodes are shown whole
export const PROGRESS_MIN = 500; // views of more nodes are drawn in chunks, with a progress bar
// a large view is drawn in slices of about SLICE_MS of work each, one slice per task, added
// SLICE_STEP elements at a time
const SLICE_MS = 50;
const SLICE_STEP = 100;

/** Resolve in a new task after the next frame was painted (or after 100 ms, in a tab the
 * browser does not paint), so the progress bar moves and input is handled between chunks. */
function nextTask() {
  return new Promise((resolve) => {
    let done = false;
    const finish = () => {
      if (!done) {
        done = true;
        resolve();
      }
    };
    requestAnimationFrame(() => setTimeout(finish, 0));
    setTimeout(finish, 100);
  });
}

function apiParams(id) {
  if (id.startsWith("checkpoint:")) return { checkpoint: id.slice("checkpoint:".length) };
  if (id.startsWith("version:")) return { version: id.slice("version:".length) };
  if (id.startsWith("source:")) return { source: id.slice("source:".length) };
  throw new Error(`not a graph node: ${id}`);
}

/** The producer's commit, abbreviated ("3f2a9c1", "+dirty"), or "". */
export function shortCommit(producer) {
  if (!producer || !producer.commit) return "";
  return producer.commit.slice(0, 7) + (producer.dirty ? "+dirty" : "");
}

/** The page of a checkpoint; `run` (null: none) keeps it unambiguous when several runs of
 * the model have a checkpoint of that name. */
export function checkpointHref(model, checkpoint, run) {
  const path = `#/models/${encodeURIComponent(model)}/checkpoints/${encodeURIComponent(checkpoint)}`;
  return run ? `${path}?run=${encodeURIComponent(run)}` : path;
}

/** `model@run/checkpoint` (or `model/checkpoint`) → its parts; run is null when absent. */
export function splitCheckpointRef(ref) {
  const slash = ref.indexOf("/");
  const head = ref.slice(0, slash);
  const at = head.indexOf("@");
  return {
    model: at < 0 ? head : head.slice(0, at),
    run: at < 0 ? null : head.slice(at + 1),
    checkpoint: ref.slice(slash + 1),
  };
}

/** The page of a node (checkpoint or version) in this UI. */
export function nodeHref(node) {
  if (node.kind === "checkpoint") return checkpointHref(node.model, node.checkpoint, node.run);
  if (node.kind === "version") return `#/versions/${encodeURIComponent(node.name)}`;
  return null;
}

function groupKey(node) {
  return `${node.model}/${node.run ?? "(no run)"}`;
}

/** `text` cut to `max` characters with an ellipsis in the middle (the start and the end of
 * names tell them apart: `coco_det…ion`, `sweep-…seed3`). */
export function shorten(text, max) {
  const value = String(text);
  if (value.length <= max) return value;
  if (max <= 1) return "…";
  const head = Math.ceil((max - 1) / 2);
  return `${value.slice(0, head)}…${value.slice(value.length - (max - 1 - head))}`;
}

export const LABEL_CHARS = 28; // a label on the canvas: about the width of a column (text-max-width)

/** A checkpoint's full reference: `model@run/checkpoint` (`model/checkpoint` without a run). */
export function checkpointRef(node) {
  return node.run ? `${node.model}@${node.run}/${node.checkpoint}` : `${node.model}/${node.checkpoint}`;
}

/** `model@run/checkpoint` in at most `budget` characters: the checkpoint's name keeps up to 12,
 * the rest is shared by the model and the run; each long part is shortened in its middle. */
export function shortCheckpointRef(node, budget = LABEL_CHARS) {
  const full = checkpointRef(node);
  if (full.length <= budget) return full;
  const head = full.length - node.checkpoint.length; // "model@run/"
  const name = shorten(node.checkpoint, Math.max(6, Math.min(node.checkpoint.length, 12, budget - 10), budget - head));
  const room = budget - name.length - (node.run ? 2 : 1);
  if (!node.run) return `${shorten(node.model, Math.max(4, room))}/${name}`;
  let [model, run] = [node.model.length, node.run.length];
  const half = Math.floor(room / 2);
  if (model <= half) run = room - model;
  else if (run <= room - half) model = room - run;
  else [model, run] = [half, room - half];
  return `${shorten(node.model, Math.max(4, model))}@${shorten(node.run, Math.max(4, run))}/${name}`;
}

/** A version's name in at most `max` characters, its number kept: `coco_20261201_v3_chan…`
 * (the change's description is cut first, then the dataset's name in its middle). */
export function shortVersionName(name, max) {
  if (name.length <= max) return name;
  const match = /^(.*_v\d+)(_.*)?$/.exec(name);
  if (!match) return shorten(name, max);
  const [, base, desc = ""] = match;
  if (base.length + 2 <= max && desc) return `${base}${desc.slice(0, max - base.length - 1)}…`;
  const number = base.slice(base.lastIndexOf("_v"));
  return `${shorten(base.slice(0, base.length - number.length), max - number.length - (desc ? 1 : 0))}${number}${desc ? "…" : ""}`;
}

const DATA_MARKS = { deleted: " (data deleted)", deleting: " (data being deleted)" };

/** A node's full name, as the side panel and the tooltip show it. */
export function nodeLabel(node) {
  if (node.kind === "checkpoint") return `${checkpointRef(node)}${node.state === "deleted" ? " (deleted)" : ""}`;
  if (node.kind === "version") {
    const commit = shortCommit(node.producer);
    return `${node.name}${commit ? ` @ ${commit}` : ""}${DATA_MARKS[node.data_state] || ""}`;
  }
  if (node.kind === "source") return node.uri;
  return node.label;
}

/** A node's label on the canvas: short enough to read in its column (the full name is in the
 * tooltip and the side panel); `budget` characters at most. */
export function canvasLabel(node, budget = LABEL_CHARS) {
  if (node.kind === "checkpoint") {
    const mark = node.state === "deleted" ? " (deleted)" : "";
    return `${shortCheckpointRef(node, budget - mark.length)}${mark}`;
  }
  if (node.kind === "version") {
    const commit = shortCommit(node.producer);
    const tail = `${commit ? ` @ ${commit}` : ""}${DATA_MARKS[node.data_state] || ""}`;
    return `${shortVersionName(node.name, Math.max(16, budget - tail.length))}${tail}`;
  }
  if (node.kind === "source") {
    const parts = node.uri.replace(/\/+$/, "").split("/");
    return shorten(`${parts[parts.length - 1] || node.uri}${node.uri.endsWith("/") ? "/" : ""}`, budget);
  }
  if (node.kind === "cluster") return `${shorten(node.model, 10)} · ${shorten(node.run, 10)}: ${node.size} checkpoints`;
  return shorten(node.label, budget);
}

/** The colours and marks of the drawing, once: the style sheet below and the legend use them. */
export const COLORS = {
  version: "#3b7dd8",
  deprecated: "#b06a6a",
  dataDeleted: "#5a5a5a",
  checkpoint: "#3aa66b",
  source: "#8a6d3b",
  cluster: "#e39b2d",
  edge: "#9aa3b5",
  trained_on: "#6b8fd0",
  derived_from: "#8e5bc4",
  source_of: "#b08a4a",
};

/** What the legend lists: node kinds, edge kinds and marks, each with how it is drawn (`title`:
 * the longer explanation, in the entry's tooltip). */
export const LEGEND = {
  nodes: [
    { kind: "checkpoint", label: "checkpoint (model@run/ckpt)", shape: "ellipse", fill: COLORS.checkpoint },
    { kind: "version", label: "data version", shape: "round-rectangle", fill: COLORS.version },
    { kind: "source", label: "raw source", shape: "diamond", fill: COLORS.source },
    { kind: "cluster", label: "run cluster", shape: "hexagon", fill: COLORS.cluster, title: "a run with more than 20 checkpoints, drawn as one node until opened" },
    { kind: "producer", label: "producer commit", shape: "text", title: "a version's label ends with its producer's commit: name @ 3f2a9c1" },
  ],
  edges: [
    { kind: "trained_on", label: "trained on", color: COLORS.trained_on, dash: "", title: "version → the checkpoint trained on it" },
    { kind: "restored_from", label: "restored from", color: COLORS.edge, dash: "", title: "checkpoint → the checkpoint restored from it" },
    { kind: "initialized_from", label: "initialised from", color: COLORS.edge, dash: "5 3", title: "checkpoint → the model fine-tuned (initialised) from it" },
    { kind: "derived_from", label: "derived from", color: COLORS.derived_from, dash: "", title: "parent version → the version derived from it" },
    { kind: "source_of", label: "source of", color: COLORS.source_of, dash: "1 3", title: "raw source → the version made from it" },
  ],
  marks: [
    { kind: "deprecated", label: "deprecated", shape: "round-rectangle", fill: COLORS.deprecated, title: "a deprecated version" },
    { kind: "data-deleted", label: "data deleted · checkpoint deleted", shape: "round-rectangle", fill: COLORS.dataDeleted, dash: "1 2", title: "a version whose data retention deleted, or a checkpoint whose files are gone (label ends “(deleted)”)" },
    { kind: "hidden-neighbours", label: "+N not loaded", shape: "ellipse", fill: COLORS.checkpoint, dash: "3 2", stroke: "#555", title: "N neighbours not loaded yet: double-click or Enter expands" },
    { kind: "root", label: "opened here", shape: "ellipse", fill: COLORS.checkpoint, stroke: "#111", double: true, title: "the node the graph was opened at" },
  ],
};

const STYLE = [
  {
    selector: "node",
    style: {
      label: "data(label)",
      "font-size": 11,
      "min-zoomed-font-size": 7,
      "text-valign": "bottom",
      "text-margin-y": 3,
      "text-max-width": 200,
      "text-wrap": "ellipsis",
      width: 22,
      height: 22,
      "border-width": 1,
      "border-color": "#334",
      color: "#223",
    },
  },
  { selector: "node.version", style: { shape: "round-rectangle", "background-color": COLORS.version, width: 30 } },
  { selector: "node.deprecated", style: { "background-color": COLORS.deprecated } },
  // a version whose data retention deleted: the colours of the deleted badge (.badge-data-deleted)
  { selector: "node.data-deleted", style: { "background-color": COLORS.dataDeleted, "border-style": "dotted" } },
  { selector: "node.checkpoint.deleted", style: { "background-color": COLORS.dataDeleted, "border-style": "dotted" } },
  { selector: "node.checkpoint", style: { shape: "ellipse", "background-color": COLORS.checkpoint } },
  // the data's own history: raw sources (left of the versions made from them)
  { selector: "node.source", style: { shape: "diamond", "background-color": COLORS.source, width: 24, height: 24 } },
  {
    selector: "node.cluster",
    style: { shape: "hexagon", "background-color": COLORS.cluster, width: 40, height: 34, "font-weight": "bold" },
  },
  { selector: "node.hidden-neighbours", style: { "border-width": 3, "border-style": "dashed", "border-color": "#555" } },
  { selector: "node.root", style: { "border-width": 4, "border-color": "#111", "border-style": "double" } },
  { selector: "node:selected", style: { "overlay-color": "#f5d000", "overlay-opacity": 0.45, "overlay-padding": 6 } },
  {
    selector: "edge",
    style: {
      width: 1.5,
      "line-color": COLORS.edge,
      "target-arrow-color": COLORS.edge,
      "target-arrow-shape": "triangle",
      "curve-style": "straight",
      "arrow-scale": 0.8,
    },
  },
  { selector: "edge.trained_on", style: { "line-color": COLORS.trained_on, "target-arrow-color": COLORS.trained_on } },
  { selector: "edge.initialized_from", style: { "line-style": "dashed" } },
  { selector: "edge.derived_from", style: { "line-color": COLORS.derived_from, "target-arrow-color": COLORS.derived_from, width: 2 } },
  { selector: "edge.source_of", style: { "line-color": COLORS.source_of, "target-arrow-color": COLORS.source_of, "line-style": "dotted" } },
];

/**
 * The loaded part of the registry's lineage graph and its view.
 * `onSelect(info)` is called with the selected view node's description.
 */
export class LineageView {
  constructor(container, { onSelect, onProgress } = {}) {
    this.nodes = new Map(); // id → node as answered by the service
    this.edges = new Map(); // "source|target|kind|role" → edge
    this.expanded = new Set(); // nodes whose one-hop neighbourhood is loaded
    this.openGroups = new Set(); // clusters the user opened
    this.root = null;
    this.selected = null;
    this.onSelect = onSelect || (() => {});
    this.onProgress = onProgress || (() => {});
    this.progressMin = PROGRESS_MIN; // bench/bench_ui.py sets Infinity for its one-task peer
    this.cy = cytoscape({
      container,
      style: STYLE,
      layout: { name: "preset" },
      minZoom: 0.02,
      maxZoom: 4,
      wheelSensitivity: 0.3,
      textureOnViewport: true,
      hideEdgesOnViewport: true,
      hideLabelsOnViewport: true,
      motionBlur: false,
      pixelRatio: 1,
      boxSelectionEnabled: false,
    });
    this.edgeLayer = new EdgeLayer(this.cy, edgeKinds(COLORS));
    this.cy.on("tap", "node", (event) => this.select(event.target.id()));
    this.cy.on("dbltap", "node", (event) => this.activate(event.target.id()));
    // the full name of the node under the pointer (canvas labels are shortened)
    this.tooltip = document.createElement("div");
    this.tooltip.className = "graph-tooltip";
    this.tooltip.setAttribute("role", "tooltip");
    this.tooltip.dataset.testid = "graph-tooltip";
    this.tooltip.hidden = true;
    container.append(this.tooltip);
    this.cy.on("mouseover", "node", (event) => this.showTooltip(event.target));
    this.cy.on("mouseout", "node", () => {
      this.tooltip.hidden = true;
    });
    this.cy.on("viewport", () => {
      this.tooltip.hidden = true;
    });
  }

  /** The full name of a view node (as the side panel shows it). */
  fullLabel(viewId) {
    const entry = this.viewNodes && this.viewNodes.get(viewId);
    return entry ? nodeLabel(entry.node) : viewId;
  }

  showTooltip(element) {
    const at = element.renderedPosition();
    this.tooltip.textContent = this.fullLabel(element.id());
    this.tooltip.style.left = `${Math.round(at.x + 14)}px`;
    this.tooltip.style.top = `${Math.round(at.y - 30)}px`;
    this.tooltip.hidden = false;
  }

  destroy() {
    this.edgeLayer.destroy();
    this.cy.destroy();
  }

  /** Load one hop around `id` ("checkpoint:model@run/ckpt" or "version:name") and make it the root. */
  async open(id) {
    this.root = null;
    const answer = await this.fetchAround(id);
    this.root = answer.root;
    await this.render();
    this.select(answer.root);
    this.fit();
  }

  async fetchAround(id) {
    // The most one answer holds (the service's default is 500): the graph draws runs as clusters.
    const answer = await api("/lineage/graph", { params: { ...apiParams(id), depth: 1, direction: "both", limit: GRAPH_LIMIT } });
    this.merge(answer);
    this.truncated = this.truncated || answer.truncated;
    this.expanded.add(answer.root);
    return answer;
  }

  merge(answer) {
    for (const node of answer.nodes) this.nodes.set(node.id, node);
    for (const edge of answer.edges) {
      this.edges.set(`${edge.source}|${edge.target}|${edge.kind}|${edge.role ?? ""}`, edge);
    }
  }

  /** Double click / Enter: expand a node, or open a cluster. */
  async activate(viewId) {
    if (viewId.startsWith("cluster:")) {
      this.openGroups.add(viewId.slice("cluster:".length));
      await this.render();
      this.select(viewId.replace(/^cluster:/, "group:"));
      this.refit();
      return;
    }
    await this.expand(viewId);
  }

  async expand(id) {
    await this.fetchAround(id);
    await this.render();
    this.select(id);
    this.refit();
  }

  /** After the graph changed: show it whole while it is small; large ones keep the view. */
  refit() {
    if (this.cy.nodes().length <= FIT_ALL_MAX) this.fit();
  }

  /** Open every cluster: all loaded nodes drawn one by one. */
  async openAllClusters() {
    for (const node of this.nodes.values()) {
      if (node.kind === "checkpoint") this.openGroups.add(groupKey(node));
    }
    if (!(await this.render())) return;
    // the selection again (an opened cluster: its run's first checkpoint), with a fresh panel;
    // a large graph is shown around it at 1:1, where labels are readable
    const selected = this.selected && this.selected.startsWith("cluster:") ? this.selected.replace(/^cluster:/, "group:") : this.selected;
    this.select(selected);
    this.fit();
  }

  async collapseGroup(key) {
    this.openGroups.delete(key);
    await this.render();
    const cluster = `cluster:${key}`;
    this.select(this.viewNodes.has(cluster) ? cluster : `group:${key}`);
    this.refit();
  }

  // ------------------------------------------------------------------ view

  /** Neighbours of each loaded node among the loaded edges: {up: Set, down: Set}. */
  loadedNeighbours() {
    const out = new Map();
    const entry = (id) => {
      if (!out.has(id)) out.set(id, { up: new Set(), down: new Set() });
      return out.get(id);
    };
    for (const edge of this.edges.values()) {
      entry(edge.target).up.add(edge.source);
      entry(edge.source).down.add(edge.target);
    }
    return out;
  }

  hiddenCounts(id, neighbours = this.loadedNeighbours()) {
    const node = this.nodes.get(id);
    const seen = neighbours.get(id) || { up: new Set(), down: new Set() };
    return {
      up: Math.max(0, (node.upstream_count ?? 0) - seen.up.size),
      down: Math.max(0, (node.downstream_count ?? 0) - seen.down.size),
    };
  }

  /** View nodes and edges: clusters replace large sibling sets. */
  view() {
    const groups = new Map();
    for (const node of this.nodes.values()) {
      if (node.kind !== "checkpoint") continue;
      const key = groupKey(node);
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(node);
    }
    const rep = new Map(); // node id → view id
    const clusters = new Map();
    for (const [key, members] of groups) {
      const pinned = members.some((n) => n.id === this.root);
      if (members.length >= CLUSTER_MIN && !this.openGroups.has(key) && !pinned) {
        clusters.set(key, members);
        for (const member of members) rep.set(member.id, `cluster:${key}`);
      }
    }
    const neighbours = this.loadedNeighbours();
    const viewNodes = new Map();
    for (const node of this.nodes.values()) {
      if (rep.has(node.id)) continue;
      const hidden = this.hiddenCounts(node.id, neighbours);
      viewNodes.set(node.id, { node, hidden, members: null });
    }
    for (const [key, members] of clusters) {
      const hidden = { up: 0, down: 0 };
      for (const member of members) {
        const h = this.hiddenCounts(member.id, neighbours);
        hidden.up += h.up;
        hidden.down += h.down;
      }
      const [model, run] = [members[0].model, members[0].run ?? "(no run)"];
      viewNodes.set(`cluster:${key}`, {
        node: { id: `cluster:${key}`, kind: "cluster", model, run, size: members.length, label: `${model} · ${run}: ${members.length} checkpoints` },
        hidden,
        members,
      });
    }
    const viewEdges = new Map();
    for (const edge of this.edges.values()) {
      const source = rep.get(edge.source) ?? edge.source;
      const target = rep.get(edge.target) ?? edge.target;
      if (source === target) continue;
      const key = `${source}|${target}|${edge.kind}`;
      const existing = viewEdges.get(key);
      if (existing) existing.count += 1;
      else viewEdges.set(key, { source, target, kind: edge.kind, count: 1 });
    }
    return { viewNodes, viewEdges, rep };
  }

  /** Columns by signed distance from the root along the data flow; rows by group and step. */
  layout(viewNodes, viewEdges, rootView) {
    const rank = new Map([[rootView, 0]]);
    const adjacency = new Map();
    const link = (a, b, delta) => {
      if (!adjacency.has(a)) adjacency.set(a, []);
      adjacency.get(a).push([b, delta]);
    };
    for (const edge of viewEdges.values()) {
      link(edge.source, edge.target, 1);
      link(edge.target, edge.source, -1);
    }
    const queue = [rootView];
    for (let i = 0; i < queue.length; i += 1) {
      const current = queue[i];
      for (const [next, delta] of adjacency.get(current) || []) {
        if (!rank.has(next)) {
          rank.set(next, rank.get(current) + delta);
          queue.push(next);
        }
      }
    }
    const columns = new Map();
    for (const id of viewNodes.keys()) {
      const r = rank.get(id) ?? 0;
      if (!columns.has(r)) columns.set(r, []);
      columns.get(r).push(id);
    }
    const order = (id) => {
      const { node } = viewNodes.get(id);
      return [node.kind, node.model ?? node.dataset ?? "", node.run ?? "", node.step ?? node.number ?? 0, id];
    };
    const compare = (a, b) => {
      const [x, y] = [order(a), order(b)];
      for (let i = 0; i < x.length; i += 1) {
        if (x[i] < y[i]) return -1;
        if (x[i] > y[i]) return 1;
      }
      return 0;
    };
    const positions = new Map();
    const ranks = [...columns.keys()].sort((a, b) => a - b);
    // x of each rank: the root's column at 0, others pushed out by the sub-columns they need
    const widths = new Map(ranks.map((r) => [r, Math.ceil(columns.get(r).length / ROWS_PER_COLUMN)]));
    const start = new Map([[0, 0]]);
    for (const r of ranks.filter((r) => r > 0)) {
      start.set(r, start.get(r - 1) + ((widths.get(r - 1) || 1) - 1) * SUB_COLUMN_WIDTH + COLUMN_WIDTH);
    }
    for (const r of ranks.filter((r) => r < 0).reverse()) {
      start.set(r, start.get(r + 1) - ((widths.get(r) || 1) - 1) * SUB_COLUMN_WIDTH - COLUMN_WIDTH);
    }
    for (const r of ranks) {
      const ids = columns.get(r).sort(compare);
      const rows = Math.min(ids.length, ROWS_PER_COLUMN);
      ids.forEach((id, i) => {
        const sub = Math.floor(i / ROWS_PER_COLUMN);
        const row = i % ROWS_PER_COLUMN;
        positions.set(id, { x: start.get(r) + sub * SUB_COLUMN_WIDTH, y: (row - (rows - 1) / 2) * ROW_HEIGHT });
      });
    }
    return positions;
  }

  /**
   * Bring Cytoscape in line with the view: remove, update and add elements.  A view of more
   * than PROGRESS_MIN nodes is drawn in slices of at most SLICE_MS of work, one slice per task,
   * so the page stays responsive and `onProgress({phase, done, total})` can show how far it got
   * (`null` when done).  Each slice also computes its elements' styles and label sizes (what
   * Cytoscape would otherwise do for every element in the first frame that shows them), and
   * above FAST_EDGES edges the edges are drawn by this view's EdgeLayer instead of Cytoscape.
   * A newer render supersedes one still under way.
   */
  async render() {
    const ticket = (this.renderTicket = (this.renderTicket || 0) + 1);
    const { viewNodes, viewEdges, rep } = this.view();
    const large = viewNodes.size > this.progressMin;
    const total = viewNodes.size;
    const report = (phase, done) => {
      if (large && ticket === this.renderTicket) this.onProgress({ phase, done, total, edges: viewEdges.size });
    };
    const yieldToPage = async () => {
      if (large) await nextTask();
      return ticket === this.renderTicket; // false: a newer render took over
    };
    report("layout", 0);
    if (!(await yieldToPage())) return false;
    this.rep = rep;
    this.viewNodes = viewNodes;
    this.viewEdges = viewEdges;
    this.neighbourIndex = null;
    const rootView = rep.get(this.root) ?? this.root;
    const positions = this.layout(viewNodes, viewEdges, rootView);
    const fast = viewEdges.size > FAST_EDGES;
    const cy = this.cy;
    const wanted = new Set(viewNodes.keys());
    if (!fast) for (const key of viewEdges.keys()) wanted.add(`e:${key}`);
    cy.batch(() => cy.elements().filter((el) => !wanted.has(el.id())).remove());
    this.edgeLayer.clear();
    // one slice: its elements added in one Cytoscape batch, then their styles and sizes
    // computed (boundingBox), so no frame has to do that for thousands of them at once
    const slices = async (entries, phase, addOne) => {
      let i = 0;
      while (i < entries.length) {
        report(phase, i);
        if (i > 0 && !(await yieldToPage())) return false;
        const until = performance.now() + SLICE_MS;
        do {
          const part = entries.slice(i, i + SLICE_STEP);
          i += part.length;
          const added = [];
          const touched = [];
          cy.batch(() => {
            for (const entry of part) addOne(entry, added, touched);
            touched.push(...cy.add(added));
          });
          if (large) for (const element of touched) element.boundingBox();
        } while (i < entries.length && (!large || performance.now() < until));
      }
      return true;
    };
    const addNode = ([id, { node, hidden }], added, touched) => {
      const more = hidden.up + hidden.down;
      const suffix = more ? `  +${more}` : "";
      const label = `${canvasLabel(node, LABEL_CHARS - suffix.length)}${suffix}`;
      const classes = [node.kind];
      if (node.state === "deprecated") classes.push("deprecated");
      if (node.kind === "checkpoint" && node.state === "deleted") classes.push("deleted");
      if (node.data_state && node.data_state !== "stored") classes.push("data-deleted");
      if (more) classes.push("hidden-neighbours");
      if (id === rootView) classes.push("root");
      const existing = cy.getElementById(id);
      if (existing.nonempty()) {
        existing.data("label", label);
        existing.classes(classes);
        existing.position(positions.get(id));
        touched.push(existing);
      } else {
        added.push({ group: "nodes", data: { id, label }, classes, position: positions.get(id) });
      }
    };
    if (!(await slices([...viewNodes], "nodes", addNode))) return false;
    report("edges", total);
    if (!(await yieldToPage())) return false;
    if (fast) {
      this.edgeLayer.set([...viewEdges.values()]);
    } else {
      const addEdge = ([key, edge], added) => {
        const id = `e:${key}`;
        const existing = cy.getElementById(id);
        if (existing.nonempty()) existing.classes([edge.kind]);
        else added.push({ group: "edges", data: { id, source: edge.source, target: edge.target }, classes: [edge.kind] });
      };
      if (!(await slices([...viewEdges], "edges", addEdge))) return false;
    }
    if (large) {
      report("drawing", total);
      // the first frame with every element: the canvas is drawn when it has painted
      await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
      if (ticket !== this.renderTicket) return false;
      this.onProgress(null);
    }
    return true;
  }

  /** Show everything (small graphs, magnified at most MAX_FIT_ZOOM) or the selection at 1:1. */
  fit() {
    const selected = this.selected ? this.cy.getElementById(this.selected) : null;
    if (this.cy.nodes().length > FIT_ALL_MAX && selected && selected.nonempty()) {
      this.cy.zoom(1);
      this.cy.center(selected);
      return;
    }
    this.cy.fit(undefined, 30);
    if (this.cy.zoom() > MAX_FIT_ZOOM) {
      this.cy.zoom(MAX_FIT_ZOOM);
      this.cy.center();
    }
  }

  zoomBy(factor) {
    const extent = this.cy.extent();
    this.cy.zoom({
      level: this.cy.zoom() * factor,
      position: { x: (extent.x1 + extent.x2) / 2, y: (extent.y1 + extent.y2) / 2 },
    });
  }

  /** Select a view node (or "group:<key>" for the checkpoints of an opened cluster). */
  select(viewId) {
    let id = viewId;
    if (id && id.startsWith("group:")) {
      const key = id.slice("group:".length);
      const first = [...this.nodes.values()].find((n) => n.kind === "checkpoint" && groupKey(n) === key);
      id = first ? first.id : this.root;
    }
    if (id && !this.viewNodes.has(id) && this.rep.has(id)) id = this.rep.get(id);
    this.selected = id;
    this.cy.$(":selected").unselect();
    const element = this.cy.getElementById(id);
    if (element.nonempty()) element.select();
    this.onSelect(this.describe(id));
  }

  /** What the side panel shows about a view node. */
  describe(id) {
    const entry = this.viewNodes.get(id);
    if (!entry) return null;
    const neighbours = [];
    const seen = new Set();
    for (const [other, side] of this.neighboursOf(id)) {
      if (seen.has(other)) continue;
      seen.add(other);
      const target = this.viewNodes.get(other);
      if (target) neighbours.push({ id: other, label: nodeLabel(target.node), side });
    }
    neighbours.sort((a, b) => (a.side + a.label < b.side + b.label ? -1 : 1));
    return {
      id,
      node: entry.node,
      hidden: entry.hidden,
      members: entry.members,
      groupKey: entry.node.kind === "checkpoint" ? groupKey(entry.node) : null,
      groupOpen: entry.node.kind === "checkpoint" && this.openGroups.has(groupKey(entry.node)),
      expanded: this.expanded.has(id),
      neighbours,
      href: nodeHref(entry.node),
    };
  }

  /** The drawn neighbours of a view node: [[view id, "upstream" | "downstream"]], from the
   * view's edges (indexed once per render: large views do not hand their edges to Cytoscape). */
  neighboursOf(id) {
    if (!this.neighbourIndex) {
      const index = new Map();
      const add = (a, b, side) => {
        if (!index.has(a)) index.set(a, []);
        index.get(a).push([b, side]);
      };
      for (const edge of (this.viewEdges || new Map()).values()) {
        add(edge.source, edge.target, "downstream");
        add(edge.target, edge.source, "upstream");
      }
      this.neighbourIndex = index;
    }
    return this.neighbourIndex.get(id) || [];
  }

  /** What is drawn: `edges` counts Cytoscape's edges and the EdgeLayer's. */
  status() {
    return {
      loaded: this.nodes.size,
      shown: this.cy.nodes().length,
      edges: this.cy.edges().length + this.edgeLayer.size,
      truncated: Boolean(this.truncated),
    };
  }

  /**
   * Performance probe (docs/performance.md, bench/bench_ui.py): zoom and pan for `frames`
   * animation frames and answer the time between frames, in milliseconds.
   */
  measureFrames(frames = 120) {
    const cy = this.cy;
    return new Promise((resolve) => {
      const gaps = [];
      let last = performance.now();
      let i = 0;
      const step = (now) => {
        gaps.push(now - last);
        last = now;
        const phase = i % 40;
        if (phase < 20) cy.zoom({ level: cy.zoom() * (phase < 10 ? 1.04 : 1 / 1.04), renderedPosition: { x: 300, y: 200 } });
        else cy.panBy({ x: phase < 30 ? 12 : -12, y: phase < 30 ? 6 : -6 });
        i += 1;
        if (i < frames) requestAnimationFrame(step);
        else resolve(gaps.slice(1));
      };
      requestAnimationFrame(step);
    });
  }
}
