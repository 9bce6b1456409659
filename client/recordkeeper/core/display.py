"""HTML tables for notebook display (``_repr_html_``), standard library only.

Every value shown is escaped (:func:`html.escape`): names, descriptions and metadata come from
whoever published them.  :mod:`recordkeeper.integrations.html` builds on this for the client's
values; :func:`diff_html` is here because version diffs are core values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

__all__ = ["binary_size", "counted", "diff_html", "table"]

_STYLE = "border-collapse:collapse;text-align:left"

#: The units of every size shown to people (CLI, notebook tables, and the web UI's ``bytes()``
#: in ui/dom.js, which follows the same rule): binary, 1 KiB = 1024 B.
SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def binary_size(n: int) -> str:
    """``1536`` → ``1.5 KiB``; ``512`` → ``512 B`` (binary units, one decimal)."""
    value = float(n)
    for unit in SIZE_UNITS:
        if abs(value) < 1024 or unit == SIZE_UNITS[-1]:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 shard``, ``2 shards``, ``0 shards``; ``plural`` for the irregular ones
    (``counted(1, "copy", "copies")``): a count with its noun, as the CLI prints them."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


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
