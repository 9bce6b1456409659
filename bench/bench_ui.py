#!/usr/bin/env python3
"""The web UI's lineage graph in a real browser: load, draw, pan/zoom frames and selection.

Everything runs against the real service under uvicorn on a free loopback port (SQLite), with
the lineage made through the public client: one version trained by ``runs x per_run``
checkpoints (``runs`` runs), so the graph around the version holds exactly ``nodes`` nodes.
Debian's Chromium (headless, software rendering: ``--disable-gpu``) opens
``/#/graph?version=…`` through Playwright and the page's own performance probe
(``window.recordkeeperGraph.measureFrames``) zooms and pans for a number of animation frames.

Measured per graph size, medians over ``--rounds`` page loads:

* **open**: navigation → the first view drawn (clusters) with the node count shown;
* **draw all**: "Open all clusters" → every node drawn;
* **first sign**: "Open all clusters" → the progress indicator shown (drawn in one task: the
  drawing itself, the only sign there was before the chunked drawing);
* **longest task**: the longest main-thread task from "Open all clusters" until the page has
  painted the drawn graph and stood still for half a second (``PerformanceObserver``
  ``longtask`` entries: tasks of 50 ms and more; 0 when there was none), and how many took
  more than 200 ms;
* **frame**: the time between animation frames while zooming and panning (median and p95);
* **select**: a node selected → the side panel describes it, including the next frame.

Peers in the same run: the big graph drawn in one task (``progressMin = Infinity``: no chunks, no
progress, as before), the same page with a graph of ``--peer-nodes`` nodes, and the frame time
of an empty page in the same browser (the display's frame budget).  Ratios are printed.

    .venv/bin/python bench/bench_ui.py [--nodes 5000] [--peer-nodes 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.client._records import example_bytes  # noqa: E402
from tests.integration._browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.integration.conftest import LiveService, start_live_service  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
PER_RUN = 100


def build_graph(service: LiveService, dataset: str, nodes: int) -> str:
    """A version trained by ``nodes - 1`` checkpoints in runs of 100; returns its name."""
    with service.client() as client, client.writer(dataset, shard_size="2kB") as writer:
        for i in range(20):
            writer.write(example_bytes({"label": [i]}), split="train")
    version = writer.version.name
    clients = [service.client() for _ in range(8)]

    def register(i: int) -> None:
        clients[i % 8].register_checkpoint(
            model=dataset,
            checkpoint=f"ckpt-{i}",
            step=i % PER_RUN,
            run=f"run{i // PER_RUN}",
            data={"train": version},
        )

    with ThreadPoolExecutor(8) as pool:
        for job in [pool.submit(register, i) for i in range(nodes - 1)]:
            job.result()
    for client in clients:
        client.close()
    return version


def _wait_text(page: Any, test_id: str, text: str, *, start: bool = False) -> None:
    test = "startsWith" if start else "includes"
    page.wait_for_function(
        f"() => (document.querySelector('[data-testid={test_id}]')?.textContent || '')"
        f".{test}({json.dumps(text)})",
        timeout=120_000,
    )


WATCH_LONG_TASKS = """() => {
    window.benchLongTasks = [];
    window.benchLongTaskObserver?.disconnect();
    window.benchLongTaskObserver = new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) window.benchLongTasks.push(entry.duration);
    });
    window.benchLongTaskObserver.observe({ type: "longtask" });
}"""

# after the drawing: two frames (the fit's render), then half a second for what follows it
# (the edge layer draws once the viewport stood still); longtask entries arrive after the task
LONG_TASKS = """() => new Promise((resolve) => requestAnimationFrame(() =>
  requestAnimationFrame(() => setTimeout(() => {
        const observer = window.benchLongTaskObserver;
        observer.takeRecords().forEach((e) => window.benchLongTasks.push(e.duration));
        observer.disconnect();
        resolve(window.benchLongTasks);
    }, 500))))"""


def measure_graph(
    page: Any, url: str, version: str, nodes: int, frames: int, progress_min: str = "500"
) -> dict[str, Any]:
    """One page load; ``progress_min="Infinity"`` draws "Open all clusters" in one task with no
    progress indicator (the peer of the chunked drawing)."""
    shown = f"{nodes:,}"
    started = time.perf_counter()
    page.goto(f"{url}/#/graph?version={version}")
    _wait_text(page, "graph-status", f"{shown} nodes loaded", start=True)
    opened = time.perf_counter() - started
    page.evaluate(f"() => {{ window.recordkeeperGraph.progressMin = {progress_min}; }}")
    page.evaluate(WATCH_LONG_TASKS)
    started = time.perf_counter()
    page.get_by_test_id("open-all").click()
    # the first sign of life: the progress indicator (or, drawn in one task, the drawing)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=graph-progress]').hidden"
        f" || document.querySelector('[data-testid=graph-status]').textContent.includes("
        f"{json.dumps(shown + ' drawn')})",
        timeout=120_000,
    )
    first_sign = time.perf_counter() - started
    _wait_text(page, "graph-status", f"{shown} drawn")
    drawn = time.perf_counter() - started
    tasks = page.evaluate(LONG_TASKS)
    gaps = page.evaluate(f"window.recordkeeperGraph.measureFrames({frames})")
    select_ms = page.evaluate(
        """async (ids) => {
            const out = [];
            for (const id of ids) {
                const t0 = performance.now();
                window.recordkeeperGraph.select(id);
                await new Promise((r) => requestAnimationFrame(() => r()));
                if (!document.querySelector('[data-testid=selected-node]')) throw new Error(id);
                out.push(performance.now() - t0);
            }
            return out;
        }""",
        [
            f"checkpoint:{version.split('_')[0]}@run{i // PER_RUN}/ckpt-{i}"
            for i in range(0, nodes - 1, 97)
        ][:40],
    )
    return {
        "open_s": opened,
        "first_sign_s": first_sign,
        "draw_all_s": drawn,
        "longest_task_ms": max(tasks, default=0.0),
        "tasks_over_200ms": sum(1 for t in tasks if t > 200),
        "frame_ms_median": statistics.median(gaps),
        "frame_ms_p95": sorted(gaps)[int(len(gaps) * 0.95) - 1],
        "select_ms_median": statistics.median(select_ms),
    }


def empty_frames(page: Any, frames: int) -> float:
    page.goto("about:blank")
    gaps = page.evaluate(
        """(n) => new Promise((resolve) => {
            const gaps = []; let last = performance.now();
            const step = (now) => { gaps.push(now - last); last = now;
              if (gaps.length < n) requestAnimationFrame(step); else resolve(gaps.slice(1)); };
            requestAnimationFrame(step);
        })""",
        frames,
    )
    return float(statistics.median(gaps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--peer-nodes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=240)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="rk-bench-ui-") as tmp:
        store = Path(tmp, "store")
        store.mkdir()
        service = start_live_service(
            storage_root=store.as_uri(),
            allowed_roots=[store.as_uri()],
            database_url=f"sqlite:///{tmp}/registry.db",
        )
        try:
            started = time.perf_counter()
            sizes = {"peer": args.peer_nodes, "big": args.nodes}
            versions = {name: build_graph(service, name, n) for name, n in sizes.items()}
            print(f"built {sum(sizes.values()):,} nodes in {time.perf_counter() - started:.0f} s")
            sizes["onetask"] = args.nodes  # the big graph drawn in one task: no progress
            versions["onetask"] = versions["big"]
            results: dict[str, list[dict[str, Any]]] = {name: [] for name in sizes}
            blank: list[float] = []
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                for _ in range(args.rounds):
                    blank.append(empty_frames(page, args.frames))
                    for name, n in sizes.items():
                        results[name].append(
                            measure_graph(
                                page,
                                service.url,
                                versions[name],
                                n,
                                args.frames,
                                "Infinity" if name == "onetask" else "500",
                            )
                        )
                browser.close()
        finally:
            service.stop()
    summary: dict[str, Any] = {"empty_page_frame_ms": statistics.median(blank)}
    for name, rounds in results.items():
        summary[name] = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]} | {
            "nodes": sizes[name]
        }
    big, peer, onetask = summary["big"], summary["peer"], summary["onetask"]
    print(f"empty page: frame {summary['empty_page_frame_ms']:.1f} ms")
    for name in ("peer", "big", "onetask"):
        s = summary[name]
        print(
            f"{name:>8} {s['nodes']:>6,} nodes: open {s['open_s'] * 1000:.0f} ms, first sign "
            f"{s['first_sign_s'] * 1000:.0f} ms, draw all "
            f"{s['draw_all_s'] * 1000:.0f} ms, longest task {s['longest_task_ms']:.0f} ms "
            f"({s['tasks_over_200ms']:.0f} over 200 ms), "
            f"frame median {s['frame_ms_median']:.1f} ms "
            f"(p95 {s['frame_ms_p95']:.1f} ms), select {s['select_ms_median']:.1f} ms"
        )
    print(
        f"ratios {big['nodes']:,} vs {peer['nodes']:,} nodes: frame "
        f"{big['frame_ms_median'] / peer['frame_ms_median']:.2f}x, select "
        f"{big['select_ms_median'] / peer['select_ms_median']:.2f}x; "
        f"frame vs empty page {big['frame_ms_median'] / summary['empty_page_frame_ms']:.2f}x; "
        f"chunked draw all vs one task {big['draw_all_s'] / onetask['draw_all_s']:.2f}x, "
        f"first sign {big['first_sign_s'] / onetask['first_sign_s']:.2f}x"
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "ui.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
