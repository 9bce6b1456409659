"""The web UI in a real browser (Debian Chromium via Playwright) against a live service.

The service runs under uvicorn on a real socket with PostgreSQL; every piece of data is created
through the Python client (datasets written with ``client.writer``, checkpoints registered with
``client.register_checkpoint``), tokens through the REST API.  The tests click through the pages
as a user would and look at what is drawn; screenshots go to ``artifacts/ui/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

import recordkeeper as rk
from tests.client._records import example_bytes
from tests.integration._browser import WIDE, browser, chromium_path, expect, page, shot
from tests.integration.conftest import LiveService

__all__ = ["browser", "chromium_path", "page"]  # fixtures used by the tests below

pytestmark = pytest.mark.slow


@dataclass
class Scenario:
    service: LiveService
    v1: str
    v2: str
    bad_shard_sha256: str


def _examples(n: int, *, person: bool, start: int = 0) -> list[bytes]:
    out = []
    for i in range(start, start + n):
        features: dict[str, Any] = {"label": [i % 10], "image/encoded": [b"img-%d" % i]}
        if person:
            features["person/boxes"] = [0.1 * (i % 5), 0.5, 0.25, 0.75]
        out.append(example_bytes(features))
    return out


def _write(
    client: rk.Client,
    *,
    desc: str,
    compression: str,
    train: list[bytes],
    validation: list[bytes],
    **provenance: Any,
) -> str:
    with client.writer(
        "coco", desc=desc, compression=compression, shard_size="1kB", **provenance
    ) as writer:
        for record in train:
            writer.write(record, split="train")
        for record in validation:
            writer.write(record, split="validation")
    return writer.version.name


@pytest.fixture
def scenario(
    live_service_factory: Callable[..., LiveService], postgres_database_url: str
) -> Scenario:
    """coco v1 and v2 (v2 changes one train shard, adds records and a feature), an alias moved
    once, a model trained on v1 then resumed on v2, a fine-tuned model, and a 30-checkpoint
    sweep run (drawn as a cluster)."""
    service = live_service_factory(database_url=postgres_database_url)
    client = service.client()
    train = _examples(60, person=False)
    v1 = _write(
        client,
        desc="first_import",
        compression="gzip",
        train=train,
        validation=_examples(10, person=False),
    )
    v2 = _write(
        client,
        desc="add_person",
        compression="none",  # gzip shards close only every ~MiB: these are small
        train=_examples(90, person=True),
        validation=_examples(10, person=True),
        parents=[v1],
        params={"categories": ["person"], "min_area": 32},
        note="adds person boxes",
    )
    client.set_alias("coco", "prod", v1)
    client.set_alias("coco", "prod", v2)
    client.register_checkpoint(
        model="det",
        checkpoint="ckpt-100",
        step=100,
        run="r1",
        uri="file:///m/det/ckpt-100",
        data={"train": v1},
        metrics={"loss": 0.9},
    )
    client.register_checkpoint(
        model="det",
        checkpoint="ckpt-200",
        step=200,
        run="r1",
        uri="file:///m/det/ckpt-200",
        parent="det/ckpt-100",
        data={"train": v2},
        metrics={"loss": 0.5},
        saved_models=[{"name": "serving", "uri": "file:///m/det/ckpt-200_saved_modules/serving"}],
    )
    client.register_checkpoint(
        model="ft",
        checkpoint="ckpt-10",
        step=10,
        run="ft1",
        parent="det/ckpt-200",
        parent_kind="initialized_from",
        data={"train": v2},
    )
    for step in range(1, 31):
        client.register_checkpoint(
            model="det", checkpoint=f"sweep-{step}", step=step, run="sweep", data={"train": v2}
        )
    bad = client.resolve(v1).splits["train"].shards[0].sha256
    client.close()
    return Scenario(service=service, v1=v1, v2=v2, bad_shard_sha256=bad)


def _token(service: LiveService, scope: str) -> str:
    answer = httpx.post(
        f"{service.url}/api/v1/tokens", json={"name": f"ui-{scope}", "scope": scope}, timeout=30
    )
    answer.raise_for_status()
    return str(answer.json()["token"])


def _sign_in(page: Any, service: LiveService, secret: str) -> None:
    """Sign in through the login form (a token carried by a request is always checked)."""
    page.goto(service.url + "/")
    page.evaluate("s => sessionStorage.setItem('recordkeeper.token', s)", "not-a-token")
    page.reload()
    page.get_by_label("API token").fill(secret)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_test_id("who").wait_for()


def test_dataset_to_version_to_shards_and_schema(scenario: Scenario, page: Any) -> None:
    page.goto(scenario.service.url + "/")
    page.get_by_test_id("datasets").get_by_role("link", name="coco", exact=True).click()
    versions = page.get_by_test_id("versions")
    versions.get_by_role("link", name=scenario.v1).wait_for()
    # records per split arrive with one request per row
    page.get_by_test_id("versions").locator("ul.splits").first.wait_for()
    row = versions.locator("tr", has_text=scenario.v2)
    expect(row).to_contain_text("train")  # the records per split load after the row
    expect(row).to_contain_text("90")
    aliases = page.get_by_test_id("aliases")
    expect(aliases.locator("tr", has_text="prod")).to_contain_text(scenario.v2)
    aliases.locator("tr", has_text="prod").get_by_role("button", name="show history").click()
    history = aliases.locator("ol.history li")
    expect(history).to_have_count(2)
    shot(page, "dataset")

    versions.get_by_role("link", name=scenario.v2).click()
    expect(page.get_by_test_id("version-name")).to_have_text(scenario.v2)
    shards = page.get_by_test_id("shards-train")
    rows = shards.locator("tbody tr")
    rows.nth(1).wait_for()  # at least two
    for part in ("none", ".tfrecord", "backend=file"):  # backend: the storage identity
        expect(rows.first).to_contain_text(part)
    schema = page.get_by_test_id("schema")
    expect(schema).to_contain_text("person/boxes")
    expect(schema.locator("tr", has_text="person/boxes")).to_contain_text("float")
    consumers = page.get_by_test_id("consumers")
    # the service names checkpoints in full
    expect(consumers).to_contain_text("det@r1/ckpt-200")
    shot(page, "version")


def test_version_page_shows_provenance_and_links_parents(scenario: Scenario, page: Any) -> None:
    page.goto(scenario.service.url + f"/#/versions/{scenario.v2}")
    provenance = page.get_by_test_id("provenance")
    expect(provenance).to_contain_text("Parent (base)")
    expect(provenance).to_contain_text("adds person boxes")
    expect(provenance).to_contain_text("min_area")
    expect(provenance).to_contain_text("Python")
    shot(page, "version-provenance")
    provenance.get_by_role("link", name=scenario.v1).click()
    expect(page.get_by_test_id("version-name")).to_have_text(scenario.v1)
    expect(page.get_by_test_id("provenance")).to_contain_text("Environment")  # code + versions


def test_compare_two_versions(scenario: Scenario, page: Any) -> None:
    page.goto(scenario.service.url + "/#/datasets/coco")
    form = page.get_by_test_id("compare-form")
    form.get_by_label("from").select_option(scenario.v1)
    form.get_by_label("to").select_option(scenario.v2)
    form.get_by_role("button", name="Compare").click()
    expect(page.get_by_test_id("diff-summary")).to_contain_text("changed")
    splits = page.get_by_test_id("diff-splits").locator("tr", has_text="train")
    expect(splits).to_contain_text("+30")  # 60 → 90 train records
    expect(page.get_by_test_id("diff-schema")).to_contain_text("+ person/boxes (float")
    page.get_by_test_id("diff-shards").locator("tbody tr").first.wait_for()
    shot(page, "compare")


def _version_label(name: str) -> re.Pattern[str]:
    """A version's name in the graph: with its producer's commit when the test runs in a git
    checkout (the writer records it), `coco_…_v2 @ 3f2a9c1`."""
    return re.compile(rf"^{re.escape(name)}( @ [0-9a-f]{{7}}(\+dirty)?)?$")


def test_checkpoint_graph_expand_and_click_through(scenario: Scenario, page: Any) -> None:
    page.set_viewport_size(WIDE)
    page.goto(scenario.service.url + "/")
    page.get_by_role("navigation", name="main").get_by_role("link", name="Models").click()
    # a model's latest checkpoint comes as model@run/checkpoint; its link opens that checkpoint
    latest = page.get_by_test_id("models").locator("tr", has_text="det").get_by_role("link").nth(1)
    latest_ref = latest.inner_text()
    assert latest_ref.startswith("det@")
    latest.click()
    expect(page.get_by_test_id("checkpoint-ref")).to_have_text(latest_ref)  # waits for the page
    page.go_back()
    page.get_by_test_id("models").get_by_role("link", name="det", exact=True).click()
    run = page.get_by_test_id("run-r1")
    expect(run.locator("tr", has_text="ckpt-200")).to_contain_text("loss=0.5")
    expect(page.get_by_test_id("run-sweep").locator("tbody tr")).to_have_count(30)
    run.get_by_role("link", name="ckpt-200", exact=True).click()
    expect(page.get_by_test_id("checkpoint-ref")).to_have_text(
        "det@r1/ckpt-200"
    )  # waits for the page
    expect(page.get_by_test_id("exports")).to_contain_text("ckpt-200_saved_modules/serving")
    data = page.get_by_test_id("lineage-data")
    for version in (scenario.v1, scenario.v2):  # the union along the chain
        expect(data).to_contain_text(version)
    # the parent and the chain are named in full (model@run/checkpoint) and their links open them
    page.get_by_role("link", name="det@r1/ckpt-100").first.click()
    expect(page.get_by_test_id("checkpoint-ref")).to_have_text(
        "det@r1/ckpt-100"
    )  # waits for the page
    assert "run=r1" in page.url
    page.go_back()
    expect(page.get_by_test_id("checkpoint-ref")).to_have_text(
        "det@r1/ckpt-200"
    )  # waits for the page
    page.get_by_test_id("graph-link").click()
    panel = page.get_by_test_id("graph-panel")
    expect(panel.get_by_test_id("selected-node")).to_have_text("det@r1/ckpt-200")
    status = page.get_by_test_id("graph-status")
    # one hop: itself, its parent, v2 and the fine-tuned checkpoint
    expect(status).to_have_text(re.compile(r"^4 nodes loaded"))
    # by keyboard: select the parent from the panel's list, expand it with Enter on the graph
    panel.get_by_role("button", name="← det@r1/ckpt-100").focus()
    page.keyboard.press("Enter")
    expect(panel.get_by_test_id("selected-node")).to_have_text("det@r1/ckpt-100")
    expect(panel.get_by_test_id("expand")).to_contain_text("1 more (1 upstream, 0 downstream)")
    page.get_by_test_id("graph-canvas").focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-status]').textContent"
        ".startsWith('5 nodes loaded')"
    )
    expect(panel.get_by_role("button", name=f"← {scenario.v1}")).to_be_visible()  # loaded now
    panel.get_by_role("button", name="→ det@r1/ckpt-200").click()
    # v2 has hidden neighbours (the sweep, ft) : select it from the panel and expand it
    panel.get_by_role("button", name=f"← {scenario.v2}").click()
    expect(panel.get_by_test_id("selected-node")).to_have_text(_version_label(scenario.v2))
    expand = panel.get_by_test_id("expand")
    # the 30 sweep checkpoints and ft/ckpt-10 (drawn, but not yet as its neighbour), and
    # upstream its parent v1 (derived from: drawn, but not yet as its neighbour)
    expect(expand).to_contain_text("32 more (1 upstream, 31 downstream)")
    expand.click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-status]').textContent"
        ".startsWith('35 nodes loaded')"
    )
    # 30 sweep checkpoints of one run → one cluster node; 6 nodes drawn
    expect(status).to_contain_text("6 drawn")
    shot(page, "graph-clustered")
    cluster = panel.get_by_role("button", name="→ det · sweep: 30 checkpoints")
    cluster.click()
    panel.get_by_test_id("open-cluster").click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-status]').textContent"
        ".includes('35 drawn')"
    )
    shot(page, "graph")
    # the opened run collapses back into its cluster
    panel.get_by_role("button", name="Collapse this run").click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-status]').textContent"
        ".includes(' 6 drawn')"
    )
    expect(panel.get_by_test_id("selected-node")).to_have_text("det · sweep: 30 checkpoints")
    # click the version node on the canvas, then through to its page
    spot = page.evaluate(
        "id => window.recordkeeperGraph.cy.getElementById(id).renderedPosition()",
        f"version:{scenario.v2}",
    )
    box = page.get_by_test_id("graph-canvas").bounding_box()
    page.mouse.click(box["x"] + spot["x"], box["y"] + spot["y"])
    expect(panel.get_by_test_id("selected-node")).to_have_text(_version_label(scenario.v2))
    panel.get_by_test_id("open-page").click()
    expect(page.get_by_test_id("version-name")).to_have_text(scenario.v2)


def test_shard_impact(scenario: Scenario, page: Any) -> None:
    page.goto(scenario.service.url + "/#/impact")
    page.get_by_label("Shard URI or sha256").fill(scenario.bad_shard_sha256)
    page.get_by_role("button", name="Find checkpoints").click()
    checkpoints = page.get_by_test_id("impact-checkpoints")
    # ckpt-100 trained on v1's train split; ckpt-200 and ft/ckpt-10 descend from it
    for ref in ("det@r1/ckpt-100", "det@r1/ckpt-200", "ft@ft1/ckpt-10"):
        expect(checkpoints).to_contain_text(ref)
    assert "sweep" not in checkpoints.inner_text()  # (all of the answer is drawn by now)


def test_read_token_sees_no_write_actions(scenario: Scenario, page: Any) -> None:
    service = scenario.service
    _sign_in(page, service, _token(service, "read"))
    expect(page.get_by_test_id("who")).to_contain_text("read")
    page.goto(f"{service.url}/#/versions/{scenario.v2}")
    page.get_by_test_id("version-name").wait_for()
    assert page.get_by_test_id("deprecate-form").count() == 0
    page.goto(f"{service.url}/#/datasets/coco")
    page.get_by_test_id("aliases").wait_for()
    assert page.get_by_test_id("alias-form").count() == 0
    assert page.locator(".write-action").count() == 0
    shot(page, "read-token")


def test_write_token_deprecates_a_version(scenario: Scenario, page: Any) -> None:
    service = scenario.service
    _sign_in(page, service, _token(service, "write"))
    # v1 trained checkpoints: the service refuses, and the page says why
    page.goto(f"{service.url}/#/versions/{scenario.v1}")
    form = page.get_by_test_id("deprecate-form")
    form.get_by_label("Deprecate this version:").fill("labels were wrong")
    form.get_by_role("button", name="Deprecate").click()
    expect(form.get_by_test_id("error")).to_contain_text("version_in_use")
    page.problems.clear()  # the refused request is logged by the browser, as expected


def test_login_refuses_a_bad_token(scenario: Scenario, page: Any) -> None:
    page.goto(scenario.service.url + "/")
    page.evaluate("sessionStorage.setItem('recordkeeper.token', 'rk_' + 'x'.repeat(40))")
    page.reload()
    status = page.get_by_test_id("login-status")
    expect(status).to_have_text("That token was refused; sign in again.")
    page.get_by_label("API token").fill("rk_" + "y" * 40)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("the token is not valid").wait_for()
    assert page.get_by_test_id("who").count() == 0
    page.problems.clear()  # the browser logs the refused requests


def _register(client: rk.Client, run: int, step: int, version: str) -> None:
    client.register_checkpoint(
        model="big",
        checkpoint=f"r{run}-{step}",
        step=step,
        run=f"run{run}",
        data={"train": version},
    )


def test_five_thousand_nodes_load_and_respond(
    live_service_factory: Callable[..., LiveService], postgres_database_url: str, page: Any
) -> None:
    """50 runs of 100 checkpoints (one left out) trained on one version: 5,000 nodes, the most
    one graph answer holds.  The graph opens as 50 clusters, then draws all 5,000 nodes and
    still pans, zooms and selects."""
    service = live_service_factory(database_url=postgres_database_url)
    with service.client() as client:
        with client.writer("big", shard_size="2kB") as writer:
            for record in _examples(20, person=False):
                writer.write(record, split="train")
        version = writer.version.name
    with ThreadPoolExecutor(8) as pool:
        clients = [service.client() for _ in range(8)]
        jobs = [
            pool.submit(_register, clients[(run * 100 + step) % 8], run, step, version)
            for run in range(50)
            for step in range(100)
            if (run, step) != (49, 99)
        ]
        for job in jobs:
            job.result()
        for client in clients:
            client.close()
    page.set_viewport_size(WIDE)
    page.goto(f"{service.url}/#/graph?version={version}")
    status = page.get_by_test_id("graph-status")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-status]')?.textContent"
        ".startsWith('5,000 nodes loaded')"
    )
    expect(status).to_contain_text("51 drawn")  # the version and 50 run clusters
    page.get_by_test_id("open-all").click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-status]').textContent"
        ".includes('5,000 drawn')"
    )
    frames = page.evaluate("window.recordkeeperGraph.measureFrames(60)")
    assert len(frames) == 59  # every requested frame was drawn
    page.evaluate("window.recordkeeperGraph.select('checkpoint:big@run49/r49-98')")
    expect(page.get_by_test_id("selected-node")).to_have_text("big@run49/r49-98")
    shot(page, "graph-5000")
    # the model's checkpoints come a page at a time
    page.goto(f"{service.url}/#/models/big")
    pager = page.get_by_role("navigation", name="pages")
    expect(pager).to_contain_text("1\u2013200 of 4,999")  # an en dash, as the page writes it
    pager.get_by_role("link", name="next →").click()
    page.wait_for_function(
        "() => document.querySelector('nav.pager')?.textContent.includes('201\u2013400 of 4,999')"
    )
