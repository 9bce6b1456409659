"""Helpers for the Beam integration tests: runner options and records that fail on cue.

Multi-processing DirectRunner workers are separate processes: they import this module (and
``recordkeeper``) through ``PYTHONPATH``, and anything they report goes to files or the registry.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

REPO = Path(__file__).resolve().parents[2]

#: Two SDK worker processes; this runner does not retry a failed bundle (the job fails).
MULTI_PROCESS = [
    "--runner=DirectRunner",
    "--direct_num_workers=2",
    "--direct_running_mode=multi_processing",
]
#: The DirectRunner's bundle executor: retries a failed bundle (4 attempts), like Dataflow.
RETRYING = ["--runner=BundleBasedDirectRunner"]


def worker_pythonpath() -> str:
    """Absolute source roots and the repository (for ``tests.*``), for worker processes."""
    roots = [str(REPO / "client"), str(REPO / "service"), str(REPO)]
    current = os.environ.get("PYTHONPATH")
    return os.pathsep.join([*roots, current] if current else roots)


def options(args: list[str]) -> PipelineOptions:
    return PipelineOptions(args)


def digest(record: bytes) -> str:
    return hashlib.sha256(record).hexdigest()


class FailsOnce:
    """A record whose first ``SerializeToString`` raises (a marker file remembers the attempt).

    The keying step passes records through untouched, so the first serialization happens in the
    worker writing the shard, after the records before it were written: the bundle fails
    half-way through a shard and the runner retries it.
    """

    def __init__(self, payload: bytes, marker: str) -> None:
        self.payload = payload
        self.marker = marker

    def SerializeToString(self) -> bytes:
        if not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError(f"injected worker failure ({self.marker})")
        return self.payload


def write_json_lines(pcoll: beam.PCollection, path: Path, label: str) -> None:
    """Each element as one JSON line in ``path``-NNNNN-of-NNNNN files (see :func:`read_lines`)."""
    _ = (
        pcoll
        | f"{label}Json" >> beam.Map(json.dumps)
        | f"{label}Write" >> beam.io.WriteToText(str(path))
    )


def read_lines(path: Path) -> list[Any]:
    out: list[Any] = []
    for part in sorted(path.parent.glob(path.name + "*")):
        out += [json.loads(line) for line in part.read_text().splitlines() if line]
    return out
