"""Notebook display (``_repr_html_``) of versions, diffs and lineage answers; no dependency.

Every value shown is escaped (:func:`html.escape`): names, descriptions and metadata come from
whoever published them.
"""

from __future__ import annotations

from typing import Any

from recordkeeper.core.display import binary_size, diff_html, table

__all__ = ["diff_html", "lineage_html", "table", "version_html"]


_size = binary_size


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
