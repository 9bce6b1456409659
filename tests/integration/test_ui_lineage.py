"""The web UI's checkpoint page names the end of a chain as the CLI does (Chromium)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration._browser import browser, chromium_path, page
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below

pytestmark = pytest.mark.slow


def test_a_chain_cut_at_an_unregistered_parent_says_so(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    """A checkpoint recording a parent the service never got (metadata.unregistered_parent,
    as the offline queue registers it) ends its chain with 'parent not registered: <ref>', on
    its own page and on its children's; a checkpoint trained from scratch ends at 'root'."""
    from playwright.sync_api import expect

    service = live_service_factory()
    client = service.client()
    client.register_checkpoint(
        model="det",
        checkpoint="ckpt-2",
        step=2,
        run="r1",
        metadata={"unregistered_parent": "det@r1/ckpt-1"},
    )
    client.register_checkpoint(
        model="det", checkpoint="ckpt-3", step=3, run="r1", parent="det@r1/ckpt-2"
    )
    client.register_checkpoint(model="scratch", checkpoint="ckpt-1", step=1, run="r1")

    for checkpoint in ("ckpt-2", "ckpt-3"):
        page.goto(f"{service.url}/#/models/det/checkpoints/{checkpoint}?run=r1")
        chain = page.get_by_test_id("chain")
        last = chain.locator("tbody tr").last
        expect(last).to_contain_text("det@r1/ckpt-2")
        expect(last.get_by_test_id("unregistered-parent")).to_have_text(
            "parent not registered: det@r1/ckpt-1"
        )
        assert "root" not in last.inner_text()
    page.goto(f"{service.url}/#/models/scratch/checkpoints/ckpt-1?run=r1")
    last = page.get_by_test_id("chain").locator("tbody tr").last
    expect(last).to_contain_text("root")
    assert last.get_by_test_id("unregistered-parent").count() == 0


def test_the_graph_draws_the_data_chain_left_of_the_checkpoints(
    live_service_factory: Callable[..., LiveService], page: Any
) -> None:
    """A checkpoint trained on coco@v3 (a change of v2, a change of v1, made from a raw
    source): the graph opens one hop deep (collapsed), expanding the version brings its parent
    and raw source in, to the left, with the producer's commit on the version; the panel lists
    producer and params; a source opens its own graph."""
    from playwright.sync_api import expect

    from tests.integration._browser import shot

    service = live_service_factory()
    client = service.client()
    producer = {"vcs": "git", "commit": "3f2a9c1" + "0" * 33, "branch": "main", "entry": "prep.py"}
    names = []
    for n in range(1, 4):
        body = {
            "parents": [{"ref": f"coco@v{n - 1}", "role": "base"}] if n > 1 else [],
            "sources": [{"uri": f"gs://raw/coco/annotations-{n}.json"}],
            "producer": producer,
            "params": {"n": n},
        }
        with client.writer("coco", desc=f"change_{n}", provenance=body) as w:
            for i in range(4):
                w.write(f"{n}-{i}".encode(), split="train")
        names.append(w.version.name)
    client.register_checkpoint(
        model="det", checkpoint="ckpt-1", step=1, run="r1", data={"train": names[-1]}
    )

    page.goto(f"{service.url}/#/graph?checkpoint=det@r1/ckpt-1")
    expect(page.get_by_test_id("graph-canvas")).to_have_attribute("data-ready", "true")
    loaded = "() => [...window.recordkeeperGraph.nodes.keys()].sort()"
    # collapsed: one hop, the version but neither its parent nor its source
    assert page.evaluate(loaded) == ["checkpoint:det@r1/ckpt-1", f"version:{names[2]}"]
    page.evaluate(f"() => window.recordkeeperGraph.expand('version:{names[2]}')")
    page.wait_for_function(f"() => window.recordkeeperGraph.nodes.has('version:{names[1]}')")
    assert "source:gs://raw/coco/annotations-3.json" in page.evaluate(loaded)
    panel = page.get_by_test_id("graph-panel")
    expect(panel).to_contain_text("3f2a9c1 main prep.py")
    expect(panel).to_contain_text("change_3")
    positions = page.evaluate(
        "() => Object.fromEntries(window.recordkeeperGraph.cy.nodes().map("
        "(n) => [n.id(), n.position('x')]))"
    )
    x = {key.split(":", 1)[1]: value for key, value in positions.items()}
    assert x["gs://raw/coco/annotations-3.json"] < x[names[2]] < x["det@r1/ckpt-1"]
    assert x[names[1]] < x[names[2]]
    label = page.evaluate(
        f"() => window.recordkeeperGraph.cy.getElementById('version:{names[2]}').data('label')"
    )
    # the producer's commit ends it; a long name is cut after its number (the full one: panel)
    assert label == f"{names[2]} @ 3f2a9c1" or (
        label.endswith("… @ 3f2a9c1") and label.startswith(names[2].rsplit("_change", 1)[0])
    ), label
    shot(page, "graph-data-chain")
    # a raw source's own graph: the version made from it
    page.goto(f"{service.url}/#/graph?source=gs://raw/coco/annotations-1.json")
    expect(page.get_by_test_id("graph-canvas")).to_have_attribute("data-ready", "true")
    assert f"version:{names[0]}" in page.evaluate(loaded)
    expect(panel).to_contain_text("Raw source")
    shot(page, "graph-source")
