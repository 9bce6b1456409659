"""Every image README.md and docs/ show exists (issue 26, item 7b: img/compare-loss.png was
linked but missing).  scripts/doc_compare_plot.py draws that one with the real compare."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)")


def test_every_linked_image_exists() -> None:
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in IMAGE.findall(doc.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (doc.parent / target.split("#")[0]).is_file():
                missing.append(f"{doc.relative_to(ROOT)}: {target}")
    assert missing == []
