"""A page of a version's shards in the compact form, rendered straight from the rows.

``GET /versions/{ref}/shards?form=compact`` answers the :class:`~recordkeeper_service.domain.
ShardPage` object with ``compact`` columns (:mod:`recordkeeper.core.shard_columns`).  Built the
general way — a :class:`~recordkeeper.core.shards.ShardRecord` per row (each row's
``storage_identity`` parsed from JSON and its registration time from text), then columns, then
validated by the response model — a page of 10,000 shards costs ~300 ms of a worker's CPU, which
a client fetching a 100,000-shard version pays ten times (after a derive commit, a diff, a cold
resolve that the rendered-page cache does not hold).

Here the page's columns are selected as they go on the wire (``storage_identity`` as its stored
JSON text, spliced into the answer unparsed with :class:`orjson.Fragment`; no registration
time), transposed into columns and serialised once: the same JSON value
(``tests/service/test_shard_pages.py`` compares both renderings), about a third of the cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from sqlalchemy import Text, cast

from recordkeeper.core.shard_columns import COLUMNS, common_uri_prefix, pack_columns
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import VersionRecord
from recordkeeper_service.repository.common import shard_page_statements

__all__ = ["compact_page"]

_SELECTED = [
    cast(m.Shard.storage_identity, Text) if name == "storage_identity" else getattr(m.Shard, name)
    for name in COLUMNS
]
_FIRST, _NEXT = shard_page_statements(*_SELECTED)
_SPLIT = COLUMNS.index("split")
_INDEX = COLUMNS.index("index")


def compact_page(
    db: Database,
    version: VersionRecord,
    *,
    after: tuple[str, int] | None,
    limit: int,
    format_cursor: Callable[[str, int], str],
    packed: bool = False,
) -> bytes:
    """The ``ShardPage`` JSON (compact form, or with ``packed`` the packed form) of up to
    ``limit`` shards of ``version`` after the parsed cursor ``after`` (``format_cursor``: the
    ``next`` cursor of a last shard)."""
    params: dict[str, Any] = {"rk_version": version.id, "rk_limit": limit + 1}
    stmt = _FIRST
    if after is not None:
        params["rk_split"], params["rk_index"] = after
        stmt = _NEXT
    rows = db.read(lambda conn: conn.execute(stmt, params).all())
    more = len(rows) > limit
    rows = rows[:limit]
    transposed = list(zip(*rows, strict=True)) if rows else [() for _ in COLUMNS]
    columns: dict[str, Any] = {
        name: list(values) for name, values in zip(COLUMNS, transposed, strict=True)
    }
    uris = columns["uri"]
    prefix = common_uri_prefix(uris)
    if prefix:
        cut = len(prefix)
        columns["uri"] = [u[cut:] for u in uris]
    page: dict[str, Any] = {
        "version": version.name,
        "content_digest": version.content_digest,
        "shard_count": version.shard_count,
        "limit": limit,
        "next": format_cursor(rows[-1][_SPLIT], rows[-1][_INDEX]) if more else None,
        "shards": None,
        "compact": None,
        "packed": None,
    }
    if packed:
        page["packed"] = {
            "uri_prefix": prefix,
            "length": len(rows),
            "columns": pack_columns(columns),
        }
    else:
        columns["storage_identity"] = [
            None if text is None else orjson.Fragment(text) for text in columns["storage_identity"]
        ]
        page["compact"] = {"uri_prefix": prefix, "columns": columns}
    return orjson.dumps(page)
