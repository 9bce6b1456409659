// The edges of a large lineage graph, drawn on a canvas of their own beneath Cytoscape's.
//
// Cytoscape draws each edge as its own element: it computes a style, a bounding box and a
// path per edge and strokes them one by one, which made the first frame of a 5,000-node graph
// ("Open all clusters") one task of more than a second.  Above FAST_EDGES edges the view
// draws them as straight lines without arrows anyway, so this layer draws them itself, from the
// centres of the nodes Cytoscape places: one-pixel lines (which the browser rasterises far
// faster than wider ones: 5,000 long lines in about 50 ms instead of 450 ms in software), one
// stroke per STROKE_BATCH lines of a kind (one path of thousands of overlapping lines is slow
// to fill).  Like Cytoscape's own edges (hideEdgesOnViewport), they are hidden while the
// viewport moves and drawn again when it has stood still for REST_MS.

const STROKE_BATCH = 100;
const REST_MS = 150;

/** How each kind of edge is drawn: `color`, `width` and `dash` in screen pixels. */
export function edgeKinds(colors) {
  return {
    trained_on: { color: colors.trained_on, width: 1, dash: [] },
    restored_from: { color: colors.edge, width: 1, dash: [] },
    initialized_from: { color: colors.edge, width: 1, dash: [5, 3] },
    derived_from: { color: colors.derived_from, width: 2, dash: [] },
    source_of: { color: colors.source_of, width: 1, dash: [1, 3] },
  };
}

export class EdgeLayer {
  /** `cy`: the Cytoscape instance (its container holds the layer); `kinds`: see edgeKinds. */
  constructor(cy, kinds) {
    this.cy = cy;
    this.kinds = kinds;
    this.edges = []; // [source node, target node, kind]
    this.drawn = 0; // segments stroked by the last draw (inside the viewport)
    this.pending = false;
    this.resting = null; // the timer that draws again once the viewport stood still
    this.canvas = document.createElement("canvas");
    this.canvas.className = "graph-edges";
    this.canvas.dataset.testid = "graph-edges";
    this.canvas.setAttribute("aria-hidden", "true");
    const container = cy.container();
    container.insertBefore(this.canvas, container.firstChild); // beneath Cytoscape's canvases
    this.redraw = () => this.schedule();
    this.moved = () => this.hideWhileMoving();
    cy.on("resize position", this.redraw);
    cy.on("viewport", this.moved);
  }

  /** How many edges the layer holds. */
  get size() {
    return this.edges.length;
  }

  /** Draw these edges (`[{source, target, kind}]`, ids of nodes in Cytoscape) from now on. */
  set(edges) {
    const cy = this.cy;
    this.edges = edges.map(({ source, target, kind }) => [cy.getElementById(source), cy.getElementById(target), kind]);
    this.draw();
  }

  clear() {
    if (!this.edges.length) return;
    this.edges = [];
    this.draw();
  }

  /** Draw in the next frame (once however many changes came before it). */
  schedule() {
    if (this.pending || !this.edges.length) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
    this.resting = null; // the timer that draws again once the viewport stood still
      this.draw();
    });
  }

  hideWhileMoving() {
    if (!this.edges.length) return;
    if (this.drawn) {
      this.canvas.getContext("2d").clearRect(0, 0, this.canvas.width, this.canvas.height);
      this.drawn = 0;
    }
    clearTimeout(this.resting);
    this.resting = setTimeout(() => {
      this.resting = null;
      this.schedule();
    }, REST_MS);
  }

  draw() {
    if (this.resting !== null) return; // still moving: drawn when it rests
    const { canvas, cy } = this;
    const container = cy.container();
    const [width, height] = [container.clientWidth, container.clientHeight];
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width; // clears it too
      canvas.height = height;
    }
    const context = canvas.getContext("2d");
    context.setTransform(1, 0, 0, 1, 0, 0);
    context.clearRect(0, 0, width, height);
    this.drawn = 0;
    if (!this.edges.length) return;
    const zoom = cy.zoom();
    const pan = cy.pan();
    const kinds = new Map(); // kind → [[x1, y1, x2, y2] on screen]
    for (const [source, target, kind] of this.edges) {
      if (source.removed() || target.removed()) continue;
      const a = source.position();
      const b = target.position();
      const line = [a.x * zoom + pan.x, a.y * zoom + pan.y, b.x * zoom + pan.x, b.y * zoom + pan.y];
      // wholly outside the canvas: skipped
      if ((line[0] < 0 && line[2] < 0) || (line[0] > width && line[2] > width)) continue;
      if ((line[1] < 0 && line[3] < 0) || (line[1] > height && line[3] > height)) continue;
      if (!kinds.has(kind)) kinds.set(kind, []);
      kinds.get(kind).push(line);
    }
    for (const [kind, lines] of kinds) {
      const style = this.kinds[kind] || this.kinds.restored_from;
      context.strokeStyle = style.color;
      context.lineWidth = style.width;
      context.setLineDash(style.dash);
      for (let i = 0; i < lines.length; i += STROKE_BATCH) {
        context.beginPath();
        for (const [x1, y1, x2, y2] of lines.slice(i, i + STROKE_BATCH)) {
          context.moveTo(x1, y1);
          context.lineTo(x2, y2);
        }
        context.stroke();
      }
      this.drawn += lines.length;
    }
  }

  destroy() {
    clearTimeout(this.resting);
    this.cy.off("resize position", this.redraw);
    this.cy.off("viewport", this.moved);
    this.canvas.remove();
  }
}
