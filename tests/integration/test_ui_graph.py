"""The lineage graph's labels, legend and progress while drawing, in Chromium (issue 26, item 6).

The service runs under uvicorn on a real socket (SQLite); every checkpoint is registered
through the Python client.  Screenshots go to ``artifacts/ui/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.client._records import example_bytes
from tests.integration._browser import WIDE, browser, chromium_path, expect, page, shot
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below

pytestmark = pytest.mark.slow

LONG_MODEL = "coco_detection_resnet101_fpn"
LONG_RUN = "sweep-lr0.0003-bs64-seed17"
LABEL = "id => window.recordkeeperGraph.cy.getElementById(id).data('label')"
# a node label's width in the canvas font, and the most Cytoscape draws before cutting it
MEASURE = """id => {
  const n = window.recordkeeperGraph.cy.getElementById(id);
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${n.pstyle('font-style').strValue} ${n.pstyle('font-weight').strValue} `
    + `${n.pstyle('font-size').pfValue}px ${n.pstyle('font-family').strValue}`;
  return [ctx.measureText(n.data('label')).width, n.pstyle('text-max-width').pfValue];
}"""


def _version(service: LiveService, dataset: str) -> str:
    with service.client() as client, client.writer(dataset, shard_size="2kB") as writer:
        for i in range(8):
            writer.write(example_bytes({"label": [i]}), split="train")
    return writer.version.name


def test_checkpoint_labels_carry_the_run(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    """Three runs each have a ckpt-200: every label names its run (`det@run-a/ckpt-200`); a
    long model and run are shortened with an ellipsis on the canvas, and the tooltip and the
    side panel give the full reference."""
    service = live_service_factory()
    version = _version(service, "coco")
    with service.client() as client:
        for run in ("run-a", "run-b", "run-c"):
            client.register_checkpoint(
                model="det", checkpoint="ckpt-200", step=200, run=run, data={"train": version}
            )
        client.register_checkpoint(
            model=LONG_MODEL,
            checkpoint="ckpt-120000",
            step=120000,
            run=LONG_RUN,
            data={"train": version},
        )
    page.set_viewport_size(WIDE)
    page.goto(f"{service.url}/#/graph?version={version}")
    expect(page.get_by_test_id("graph-canvas")).to_have_attribute("data-ready", "true")
    for run in ("run-a", "run-b", "run-c"):
        assert page.evaluate(LABEL, f"checkpoint:det@{run}/ckpt-200") == f"det@{run}/ckpt-200"
    long_id = f"checkpoint:{LONG_MODEL}@{LONG_RUN}/ckpt-120000"
    label = page.evaluate(LABEL, long_id)
    # shortened in the middle of the model and of the run; the checkpoint's name is whole
    assert "…" in label and label.endswith("/ckpt-120000") and "@" in label, label
    model, run = label.removesuffix("/ckpt-120000").split("@")
    assert model.startswith("coc") and model.endswith("fpn"), label
    assert run.startswith("swe") and run.endswith("17"), label
    assert len(label) <= 28, label
    # ... short enough that Cytoscape draws it whole (it would cut a wider one at the end)
    width, room = page.evaluate(MEASURE, long_id)
    assert width <= room, (label, width, room)
    # the pointer over the node: the tooltip has the full reference
    spot = page.evaluate(
        "id => window.recordkeeperGraph.cy.getElementById(id).renderedPosition()", long_id
    )
    box = page.get_by_test_id("graph-canvas").bounding_box()
    page.mouse.move(box["x"] + spot["x"], box["y"] + spot["y"])
    tooltip = page.get_by_test_id("graph-tooltip")
    expect(tooltip).to_be_visible()
    expect(tooltip).to_have_text(f"{LONG_MODEL}@{LONG_RUN}/ckpt-120000")
    shot(page, "graph-labels-tooltip")
    # ... and the side panel, once selected (its neighbour list names every run too)
    page.mouse.click(box["x"] + spot["x"], box["y"] + spot["y"])
    panel = page.get_by_test_id("graph-panel")
    expect(panel.get_by_test_id("selected-node")).to_have_text(
        f"{LONG_MODEL}@{LONG_RUN}/ckpt-120000"
    )
    expect(panel.get_by_test_id("selected-ref")).to_have_text(
        f"{LONG_MODEL}@{LONG_RUN}/ckpt-120000"
    )
    panel.get_by_role("button", name=f"← {version}").click()
    neighbours = panel.get_by_test_id("neighbours")
    for run in ("run-a", "run-b", "run-c"):
        expect(neighbours).to_contain_text(f"→ det@{run}/ckpt-200")
    shot(page, "graph-labels")


def test_the_legend_lists_the_kinds_and_toggles(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    """The legend is shown beside the drawing, names every node kind, edge kind and mark, and
    the toolbar's *Legend* button hides it (remembered on reload) and shows it again."""
    service = live_service_factory()
    version = _version(service, "coco")
    with service.client() as client:
        client.register_checkpoint(
            model="det", checkpoint="ckpt-1", step=1, run="r1", data={"train": version}
        )
        client.register_checkpoint(
            model="ft",
            checkpoint="ckpt-1",
            step=1,
            run="f1",
            parent="det@r1/ckpt-1",
            parent_kind="initialized_from",
        )
    page.goto(f"{service.url}/#/graph?checkpoint=det@r1/ckpt-1")
    expect(page.get_by_test_id("graph-canvas")).to_have_attribute("data-ready", "true")
    legend = page.get_by_test_id("graph-legend")
    expect(legend).to_be_visible()
    kinds = legend.locator("li").evaluate_all("items => items.map((li) => li.dataset.kind)")
    for kind in (
        "checkpoint",
        "version",
        "source",
        "producer",
        "cluster",
        "trained_on",
        "restored_from",
        "initialized_from",
        "derived_from",
        "source_of",
        "deprecated",
        "data-deleted",
        "hidden-neighbours",
    ):
        assert kind in kinds, (kind, kinds)
    for text in (
        "checkpoint",
        "data version",
        "raw source",
        "producer",
        "trained on",
        "restored from",
        "initialised from",
        "derived from",
        "source of",
        "deprecated",
        "data deleted",
        "checkpoint deleted",
    ):
        expect(legend).to_contain_text(text)
    # each entry is drawn in the colours of the graph: the checkpoint swatch is the node's green
    fill = legend.locator("li[data-kind=checkpoint] ellipse").get_attribute("fill")
    node = page.evaluate(
        "() => window.recordkeeperGraph.cy.getElementById('checkpoint:det@r1/ckpt-1')"
        ".style('background-color')"
    )
    assert fill is not None
    rgb = tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
    assert node == f"rgb({rgb[0]},{rgb[1]},{rgb[2]})", (fill, node)
    shot(page, "graph-legend")
    toggle = page.get_by_test_id("legend-toggle")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    toggle.click()
    expect(legend).to_be_hidden()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    page.reload()
    expect(page.get_by_test_id("graph-canvas")).to_have_attribute("data-ready", "true")
    expect(page.get_by_test_id("graph-legend")).to_be_hidden()  # remembered
    shot(page, "graph-legend-hidden")
    page.get_by_test_id("legend-toggle").click()
    expect(page.get_by_test_id("graph-legend")).to_be_visible()


def _register(client: Any, version: str, i: int) -> None:
    client.register_checkpoint(
        model="big",
        checkpoint=f"ckpt-{i}",
        step=i % 100,
        run=f"run{i // 100:02d}",
        data={"train": version},
    )


# a record of the progress indicator, kept by the page itself while the test waits
WATCH_PROGRESS = """() => {
  const progress = document.querySelector('[data-testid=graph-progress]');
  const seen = (window.progressSeen = { texts: [], values: [], frames: 0, shown: false });
  new MutationObserver(() => {
    if (progress.hidden) return;
    seen.shown = true;
    const text = progress.textContent;
    if (seen.texts[seen.texts.length - 1] !== text) seen.texts.push(text);
    seen.values.push(Number(progress.querySelector('progress').value));
  }).observe(progress, { attributes: true, childList: true, subtree: true, characterData: true });
  const frame = () => {
    if (!progress.hidden) seen.frames += 1;
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}"""


def test_progress_while_drawing_a_large_graph(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    """3,000 checkpoints in 30 runs trained on one version: the graph opens as 30 clusters
    (no progress needed); *Open all clusters* shows "Laying out 3,001 nodes…", then how many
    are drawn, with a bar that only moves forward, while the page keeps painting frames; the
    indicator is gone once every node is drawn."""
    service = live_service_factory()
    version = _version(service, "big")
    clients = [service.client() for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        jobs = [pool.submit(_register, clients[i % 8], version, i) for i in range(3000)]
        for job in jobs:
            job.result()
    for client in clients:
        client.close()
    page.set_viewport_size(WIDE)
    page.goto(f"{service.url}/#/graph?version={version}")
    status = page.get_by_test_id("graph-status")
    expect(status).to_have_text(re.compile(r"^3,001 nodes loaded, 31 drawn"))
    progress = page.get_by_test_id("graph-progress")
    expect(progress).to_be_hidden()
    page.evaluate(WATCH_PROGRESS)
    page.get_by_test_id("open-all").click()
    # a picture while it draws, if the drawing is still under way when the browser answers
    page.wait_for_function(
        "() => window.progressSeen.shown || document.querySelector('[data-testid=graph-status]')"
        ".textContent.includes('3,001 drawn')"
    )
    if progress.is_visible():
        shot(page, "graph-progress")
    expect(status).to_contain_text("3,001 drawn", timeout=120_000)
    expect(progress).to_be_hidden()
    assert page.get_by_test_id("graph-canvas").get_attribute("aria-busy") is None
    seen = page.evaluate("() => window.progressSeen")
    assert seen["shown"], seen
    assert seen["texts"][0] == "Laying out 3,001 nodes…", seen["texts"]
    drawing = [t for t in seen["texts"] if re.fullmatch(r"Drawing [\d,]+ of 3,001 nodes…", t)]
    assert len(drawing) >= 3, seen["texts"]  # chunk after chunk, each in its own task
    assert any(t.startswith("Drawing ") and t.endswith(" edges…") for t in seen["texts"])
    assert seen["values"] == sorted(seen["values"]), seen["values"]
    assert seen["frames"] >= 3, seen  # the page painted while it drew: it did not freeze
    shot(page, "graph-progress-done")
    # the drawn graph answers as before
    page.evaluate("window.recordkeeperGraph.select('checkpoint:big@run29/ckpt-2999')")
    expect(page.get_by_test_id("selected-node")).to_have_text("big@run29/ckpt-2999")
    # every node and every edge is still drawn: 3,000 edges are more than Cytoscape draws
    # itself (FAST_EDGES), so they are on the edge layer, each between two drawn nodes
    expect(status).to_contain_text("3,001 drawn, 3,000 edges")
    drawn = page.evaluate(DRAWN)
    assert drawn["nodes"] == 3001 and drawn["cyEdges"] == 0, drawn
    assert drawn["layerEdges"] == 3000 and drawn["dangling"] == 0, drawn
    assert drawn["kinds"] == {"trained_on": 3000}, drawn
    # once the view stands still the layer strokes the edges in view (all of them: the whole
    # graph shown), beneath the nodes
    page.evaluate("window.recordkeeperGraph.cy.fit(undefined, 30)")
    page.wait_for_function("() => window.recordkeeperGraph.edgeLayer.drawn === 3000")
    assert page.evaluate(EDGE_PIXELS) > 1000
    shot(page, "graph-all-edges")


DRAWN = """() => {
  const view = window.recordkeeperGraph;
  const layer = view.edgeLayer;
  return {
    nodes: view.cy.nodes().length,
    cyEdges: view.cy.edges().length,
    layerEdges: layer.size,
    dangling: layer.edges.filter(([a, b]) => a.empty() || b.empty() || a.removed() || b.removed())
      .length,
    kinds: layer.edges.reduce((out, [, , kind]) => ({ ...out, [kind]: (out[kind] || 0) + 1 }), {}),
  };
}"""

# pixels of the edge layer's canvas that are not transparent
EDGE_PIXELS = """() => {
  const canvas = document.querySelector('[data-testid=graph-edges]');
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i]) painted += 1;
  return painted;
}"""
