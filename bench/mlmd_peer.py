#!/usr/bin/env python3
"""ML Metadata on the lineage graph of ``bench_lineage.py``: the peer, run in its own venv.

ML Metadata (``ml-metadata``, TFX's lineage store) pins an older protobuf than TensorFlow 2.21,
so it runs in a separate virtual environment::

    python3.11 -m venv /tmp/mlmd-venv && /tmp/mlmd-venv/bin/pip install 'ml-metadata>=1.17,<1.22'

``bench_lineage.py --mlmd /tmp/mlmd-venv/bin/python`` writes the graph it loaded into PostgreSQL
to a text file (one line per checkpoint: ``id parent version...``) and runs this script on it.
The same graph is modelled the way TFX records training: one ``DatasetVersion`` artifact per
version, one ``Checkpoint`` artifact per checkpoint, and per checkpoint one ``TrainSegment``
execution whose INPUT events are the segment's versions and the parent checkpoint and whose
OUTPUT event is the checkpoint.  The store is SQLite (ML Metadata's own embedded backend).

Timed, with ``get_lineage_subgraph`` (its documented lineage query):

* **upstream** from a tip checkpoint (``UPSTREAM``, ``max_num_hops=100``, the API's maximum):
  a chain of 100 checkpoints is 200 hops long, so the answer is incomplete — the script counts
  the checkpoints and distinct dataset versions it returns;
* **downstream** from a dataset version (``DOWNSTREAM``, 2 hops: the checkpoints trained on it
  directly).

Prints one JSON object (figures in milliseconds) on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as pb

BATCH = 5000


def _store(path: Path) -> metadata_store.MetadataStore:
    config = pb.ConnectionConfig()
    config.sqlite.filename_uri = str(path)
    config.sqlite.connection_mode = pb.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    return metadata_store.MetadataStore(config)


def _types(store: metadata_store.MetadataStore) -> tuple[int, int, int]:
    version = store.put_artifact_type(pb.ArtifactType(name="DatasetVersion"))
    checkpoint = store.put_artifact_type(pb.ArtifactType(name="Checkpoint"))
    segment = store.put_execution_type(pb.ExecutionType(name="TrainSegment"))
    return version, checkpoint, segment


def _put(put: Any, items: list[Any]) -> list[int]:
    ids: list[int] = []
    for start in range(0, len(items), BATCH):
        ids.extend(put(items[start : start + BATCH]))
    return ids


def load(store: metadata_store.MetadataStore, graph: Path) -> dict[str, Any]:
    started = time.perf_counter()
    version_type, checkpoint_type, segment_type = _types(store)
    rows = [list(map(int, line.split())) for line in graph.read_text().splitlines()]
    n_versions = max(v for row in rows for v in row[2:])
    version_ids = _put(
        store.put_artifacts,
        [
            pb.Artifact(type_id=version_type, uri=f"file:///v/{v}", name=f"v{v}")
            for v in range(1, n_versions + 1)
        ],
    )
    checkpoint_ids = _put(
        store.put_artifacts,
        [
            pb.Artifact(type_id=checkpoint_type, uri=f"s3://c/{row[0]}", name=f"c{row[0]}")
            for row in rows
        ],
    )
    execution_ids = _put(store.put_executions, [pb.Execution(type_id=segment_type) for _ in rows])
    by_checkpoint = {row[0]: i for i, row in enumerate(rows)}
    events: list[pb.Event] = []
    edges = 0
    for i, row in enumerate(rows):
        parent, versions = row[1], row[2:]
        execution = execution_ids[i]
        for v in versions:
            events.append(
                pb.Event(
                    artifact_id=version_ids[v - 1], execution_id=execution, type=pb.Event.INPUT
                )
            )
            edges += 1
        if parent:
            events.append(
                pb.Event(
                    artifact_id=checkpoint_ids[by_checkpoint[parent]],
                    execution_id=execution,
                    type=pb.Event.INPUT,
                )
            )
        events.append(
            pb.Event(artifact_id=checkpoint_ids[i], execution_id=execution, type=pb.Event.OUTPUT)
        )
    for start in range(0, len(events), BATCH):
        store.put_events(events[start : start + BATCH])
    return {
        "versions": n_versions,
        "checkpoints": len(rows),
        "edges": edges,
        "events": len(events),
        "load_seconds": round(time.perf_counter() - started, 1),
        "_checkpoint_ids": checkpoint_ids,
        "_version_ids": version_ids,
        "_rows": rows,
    }


def subgraph(
    store: metadata_store.MetadataStore, artifact_id: int, direction: int, hops: int
) -> Any:
    options = pb.LineageSubgraphQueryOptions(
        starting_artifacts=pb.LineageSubgraphQueryOptions.StartingNodes(
            filter_query=f"id = {artifact_id}"
        ),
        max_num_hops=hops,
        direction=direction,
    )
    return store.get_lineage_subgraph(options)


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, max(0, round(len(ordered) * 0.99) - 1))]
    return {"p50_ms": round(statistics.median(ordered), 2), "p99_ms": round(p99, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("--tips", required=True, help="comma-separated tip checkpoint ids")
    parser.add_argument("--versions", required=True, help="comma-separated version ids")
    parser.add_argument("--hops", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rk-mlmd-") as tmp:
        store = _store(Path(tmp) / "mlmd.sqlite")
        loaded = load(store, args.graph)
        checkpoint_ids = loaded.pop("_checkpoint_ids")
        version_ids = loaded.pop("_version_ids")
        rows = loaded.pop("_rows")
        index = {row[0]: i for i, row in enumerate(rows)}
        checkpoint_type = store.get_artifact_type("Checkpoint").id
        tips = [int(t) for t in args.tips.split(",")]
        versions = [int(v) for v in args.versions.split(",")]
        # warm up the store's page cache the way the other side is warmed
        for t in tips[:5]:
            subgraph(store, checkpoint_ids[index[t]], pb.LineageSubgraphQueryOptions.UPSTREAM, 4)
        up_times, up_checkpoints, up_versions = [], [], []
        for t in tips:
            start = time.perf_counter()
            graph = subgraph(
                store, checkpoint_ids[index[t]], pb.LineageSubgraphQueryOptions.UPSTREAM, args.hops
            )
            up_times.append((time.perf_counter() - start) * 1000)
            ckpts = sum(1 for a in graph.artifacts if a.type_id == checkpoint_type)
            up_checkpoints.append(ckpts)
            up_versions.append(len(graph.artifacts) - ckpts)
        down_times, down_checkpoints = [], []
        for v in versions:
            start = time.perf_counter()
            graph = subgraph(
                store, version_ids[v - 1], pb.LineageSubgraphQueryOptions.DOWNSTREAM, 2
            )
            down_times.append((time.perf_counter() - start) * 1000)
            down_checkpoints.append(sum(1 for a in graph.artifacts if a.type_id == checkpoint_type))
    result = {
        "ml_metadata": metadata_store.__name__,
        "sizes": loaded,
        "upstream": {
            **summary(up_times),
            "max_num_hops": args.hops,
            "checkpoints_returned_mean": round(statistics.mean(up_checkpoints), 1),
            "distinct_versions_returned_mean": round(statistics.mean(up_versions), 1),
        },
        "downstream_direct": {
            **summary(down_times),
            "checkpoints_mean": round(statistics.mean(down_checkpoints), 1),
        },
    }
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
