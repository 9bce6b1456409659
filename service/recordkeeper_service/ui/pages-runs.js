// A run's page: its checkpoints (complete list) and one chart per recorded metric, value by step.
import { api, seg } from "./api.js";
import { badge, clear, count, h, link } from "./dom.js";
import { checkpointHref } from "./graph.js";
import { fetchAll, fullTable } from "./lists.js";

export const runHref = (model, run) => `#/models/${encodeURIComponent(model)}/runs/${encodeURIComponent(run)}`;

const SVG = "http://www.w3.org/2000/svg";
const W = 560;
const H = 240;
const PAD = { left: 64, right: 16, top: 16, bottom: 40 };

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

const short = (v) => (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : Number(v.toPrecision(4)).toString());

/** One line chart of `points` ([step, value], sorted by step); `name` the metric. */
export function metricChart(name, points) {
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const sx = (x) => PAD.left + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
  const sy = (y) => H - PAD.bottom - ((y - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
  const line = points.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
  const ticks = [y0, (y0 + y1) / 2, y1];
  const chart = svg(
    "svg",
    { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "metric-chart", role: "img", "aria-label": `${name} by step: ${points.length} checkpoints` },
    svg("line", { x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom, class: "axis" }),
    svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom, class: "axis" }),
    ...ticks.map((t) => svg("text", { x: PAD.left - 6, y: sy(t) + 4, "text-anchor": "end", class: "tick" }, short(t))),
    svg("text", { x: PAD.left, y: H - PAD.bottom + 16, "text-anchor": "start", class: "tick" }, count(x0)),
    svg("text", { x: W - PAD.right, y: H - PAD.bottom + 16, "text-anchor": "end", class: "tick" }, count(x1)),
    svg("text", { x: (PAD.left + W - PAD.right) / 2, y: H - 6, "text-anchor": "middle", class: "axis-label" }, "step"),
    svg("polyline", { points: line, class: "series" }),
    ...points.map(([x, y]) => svg("circle", { cx: sx(x).toFixed(1), cy: sy(y).toFixed(1), r: 3, class: "point" }, svg("title", {}, `step ${count(x)}: ${name} = ${short(y)}`))),
  );
  return h("figure", { class: "metric", "data-testid": `chart-${name}` }, h("figcaption", {}, name), chart);
}

export async function runPage(main, [model, run]) {
  const fetchPage = (offset, limit) => api(`/models/${seg(model)}/checkpoints`, { params: { run, limit, offset } });
  const { rows } = await fetchAll(fetchPage, () => {});
  const byStep = [...rows].filter((c) => c.step !== null && c.step !== undefined).sort((a, b) => a.step - b.step);
  const names = [...new Set(rows.flatMap((c) => Object.keys(c.metrics || {})))].sort();
  const charts = names
    .map((name) => [name, byStep.filter((c) => typeof (c.metrics || {})[name] === "number").map((c) => [c.step, c.metrics[name]])])
    .filter(([, points]) => points.length);
  const columns = [
    { name: "Checkpoint", value: (c) => c.checkpoint, cell: (c) => [link(checkpointHref(c.model, c.checkpoint, c.run), c.checkpoint), c.state === "deleted" ? [" ", badge("deleted")] : null] },
    { name: "Step", value: (c) => c.step, cell: (c) => count(c.step) },
    { name: "Data", value: (c) => c.data.map((d) => `${d.version} (${d.role})`).join(", ") },
    ...names.map((name) => ({ name, value: (c) => (c.metrics || {})[name] ?? null })),
  ];
  clear(
    main,
    h("p", { class: "crumbs" }, link("#/models", "Models"), " / ", link(`#/models/${encodeURIComponent(model)}`, model), " / ", `run ${run}`),
    h("h1", {}, `${model} · run ${run}`),
    h("p", { class: "muted" }, `${count(rows.length)} checkpoints; ${names.length ? `metrics: ${names.join(", ")}` : "no metrics recorded"}`),
    charts.length
      ? h("div", { class: "charts", "data-testid": "run-charts" }, charts.map(([name, points]) => metricChart(name, points)))
      : h("p", { class: "muted", "data-testid": "run-charts-none" }, "No numeric metric was recorded with these checkpoints."),
    h("h2", {}, "Checkpoints"),
    rows.length ? fullTable(columns, rows, { testid: "run-checkpoints", filename: `${model}-${run}-checkpoints`, label: "checkpoints" }) : h("p", { class: "muted" }, "No checkpoint."),
  );
}
