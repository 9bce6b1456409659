"""``recordkeeper.core.data_lineage``: the one-line and tree forms of a data history."""

from __future__ import annotations

from typing import Any

from recordkeeper.core.data_lineage import HistoryEntry, describe, history_lines


def _entry(name: str, depth: int, *parents: tuple[str, str], desc: str = "") -> HistoryEntry:
    dataset, _, number = name.partition("@v")

    def parent(ref: str, role: str) -> dict[str, Any]:
        ds, _, n = ref.partition("@v")
        return {"version": f"{ds}_v{n}", "dataset": ds, "number": int(n), "role": role}

    return HistoryEntry(
        version=f"{dataset}_v{number}",
        dataset=dataset,
        number=int(number),
        desc=desc or None,
        content_digest=None,
        state="committed",
        depth=depth,
        parents=tuple(parent(ref, role) for ref, role in parents),
        sources=(),
        producer=None,
        params_digest=None,
    )


def test_the_base_is_named_first_whatever_order_the_parents_were_given_in() -> None:
    entry = _entry("coco@v7", 0, ("labels@v1", "labels"), ("coco@v4", "base"), desc="relabel")
    assert describe(entry) == "coco@v7 ← coco@v4 + labels@v1 (labels) + relabel"


def test_history_lines_put_each_version_under_the_one_made_from_it() -> None:
    """Sorted by depth alone, coco@v3 followed labels@v1 one step further in, reading as
    labels' parent; each line's parent is now the nearest less indented line above it."""
    history = [
        _entry("coco@v7", 0, ("labels@v1", "labels"), ("coco@v4", "base")),
        _entry("coco@v4", 1, ("coco@v3", "base")),
        _entry("labels@v1", 1),
        _entry("coco@v3", 2),
    ]
    assert history_lines(history) == [
        "coco@v7 ← coco@v4 + labels@v1 (labels)",
        "  coco@v4 ← coco@v3",
        "    coco@v3 (no provenance)",
        "  labels@v1 (no provenance)",
    ]


def test_a_shared_ancestor_is_listed_once_and_a_long_chain_needs_no_recursion() -> None:
    history = [
        _entry("a@v3", 0, ("a@v2", "base"), ("b@v1", "source")),
        _entry("a@v2", 1, ("a@v1", "base")),
        _entry("b@v1", 1, ("a@v1", "base")),
        _entry("a@v1", 2),
    ]
    lines = history_lines(history)
    assert len(lines) == 4 and sum("a@v1 (no provenance)" in line for line in lines) == 1
    chain = [_entry(f"c@v{n}", 5000 - n, (f"c@v{n - 1}", "base")) for n in range(5000, 1, -1)]
    chain.append(_entry("c@v1", 4999))
    lines = history_lines(chain)
    assert len(lines) == 5000 and lines[-1] == "  " * 4999 + "c@v1 (no provenance)"
