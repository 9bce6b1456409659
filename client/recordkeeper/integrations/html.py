"""Notebook display (``_repr_html_``) of versions, diffs and lineage answers; no dependency.

Every value shown is escaped (:func:`html.escape`): names, descriptions and metadata come from
whoever published them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

__all__ = ["diff_html", "lineage_html", "table", "version_html"]

_STYLE = "border-collapse:collapse;text-align:left"


def _cell(value: Any, tag: str = "td") -> str:
    text = "" if value is None else str(value)
    return f"<{tag} style='padding:2px 8px'>{escape(text)}</{tag}>"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], caption: str | None = None) -> str:
    """An HTML table (every cell escaped)."""
    head = "".join(_cell(h, "th") for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    cap = f"<caption style='text-align:left'>{escape(caption)}</caption>" if caption else ""
    return (
        f"<table style='{_STYLE}'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def version_html(v: Any) -> str:
    """A version: its identity, state, digests, and one row per split."""
    facts = [
        ("dataset", v.dataset),
        ("number", v.number),
        ("state", v.state + (f" ({v.deprecated_reason})" if v.deprecated_reason else "")),
        ("description", v.desc),
        ("records", v.record_count),
        ("shards", v.shard_count),
        ("size", _size(v.size)),
        ("content digest", v.content_digest),
        ("schema digest", v.schema_digest),
        ("storage", v.storage_prefix),
        ("created", v.created_at),
        ("by", v.created_by),
    ]
    if v.data_state != "stored":
        facts.append(("data", v.data_state))
    top = table(["", ""], [(k, val) for k, val in facts if val not in (None, "")], v.name)
    splits = table(
        ["split", "records", "shards", "size"],
        [
            (name, s.record_count, s.shard_count, _size(s.size))
            for name, s in sorted(v.splits.items())
        ],
    )
    return f"<div class='recordkeeper-version'>{top}{splits if v.splits else ''}</div>"


def diff_html(d: Any) -> str:
    """A version diff: split counts, shard changes (the first 200), schema changes."""
    title = f"{d.old} → {d.new}" + (" (same content)" if d.same_content else "")
    counts = table(
        ["split", "old records", "new records", "old shards", "new shards"],
        [(s.split, s.old_records, s.new_records, s.old_shards, s.new_shards) for s in d.splits],
        title,
    )
    shards = table(
        ["change", "split", "index", "old", "new"],
        [
            (
                c.change,
                c.split,
                c.index,
                c.old.uri if c.old is not None else "",
                c.new.uri if c.new is not None else "",
            )
            for c in d.shards[:200]
        ],
        f"{len(d.shards)} shard changes, {d.unchanged_shards} unchanged"
        + (" (showing 200)" if len(d.shards) > 200 else ""),
    )
    rows = [[str(v) for v in c.to_dict().values()] for c in d.schema]
    header = list(d.schema[0].to_dict()) if d.schema else ["schema"]
    schema = table(header, rows, "schema changes")
    return f"<div class='recordkeeper-diff'>{counts}{shards}{schema}</div>"


def lineage_html(lineage: Any) -> str:
    """A lineage answer: the checkpoint, its chain and the data along it."""
    chain = table(
        ["checkpoint", "relation"],
        [
            (link.get("checkpoint"), link.get("parent_kind") or link.get("kind"))
            for link in lineage.chain
        ],
        f"lineage of {lineage.checkpoint.ref}",
    )
    data = table(
        ["version", "role", "splits", "state", "content digest"],
        [
            (e.version, e.role, ",".join(e.splits or ()), e.state, e.content_digest)
            for e in lineage.data
        ],
    )
    return f"<div class='recordkeeper-lineage'>{chain}{data}</div>"
