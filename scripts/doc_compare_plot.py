"""Draw docs/img/compare-loss.png, the figure docs/workflow.md shows for
``recordkeeper compare detection --metric loss --plot loss.png``.

It runs the real thing: an in-process service (SQLite, local storage) gets two data versions and
three runs of checkpoints with a loss that falls faster on the second version, then
``Client.compare(...).plot()`` (matplotlib) draws the file.  Run from the repository root:

    python scripts/doc_compare_plot.py [OUT.png]
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client"), str(ROOT / "service")]

import recordkeeper as rk  # noqa: E402
from tests.apps import sqlite_app  # noqa: E402
from tests.client._records import example_bytes  # noqa: E402


def main(out: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp, sqlite_app(Path(tmp)) as http:
        client = rk.Client(http_client=http)
        versions = []
        for k, desc in enumerate(("first_import", "add_person")):
            with client.writer("coco", desc=desc) as w:
                for i in range(50 + 25 * k):
                    w.write(example_bytes({"label": [i % 10], "v": [k]}), split="train")
            versions.append(w.version.name)
        runs = [
            ("baseline", versions[0], 0.0),
            ("person", versions[1], 0.0),
            ("person-lr2", versions[1], 0.06),
        ]
        for run, version, offset in runs:
            rate = 0.9 if version == versions[0] else 1.4
            for step in range(100, 2100, 100):
                loss = 0.35 + offset + 1.6 * math.exp(-rate * step / 1000)
                client.register_checkpoint(
                    model="detection",
                    checkpoint=f"ckpt-{step}",
                    step=step,
                    run=run,
                    data={"train": version},
                    metrics={"loss": round(loss, 4)},
                )
        written = client.compare("detection", metric="loss").plot(out)
        client.close()
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "img" / "compare-loss.png"
    print(main(target))
