"""A listing the client answers (versions, shards, checkpoints): a plain ``list`` that also
converts to a ``pandas.DataFrame`` (:meth:`Listing.to_pandas`, extra ``hf`` or pandas alone)
and displays as a table in notebooks (``_repr_html_``)."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["Listing"]

T = TypeVar("T")

_COLUMNS = 12  # the columns a notebook table shows (the DataFrame has every field)
_ROWS = 200


class Listing(list[T]):
    """A ``list`` of versions, shards or checkpoints (equal to the same plain list)."""

    __slots__ = ()

    def to_pandas(self) -> Any:
        """One row per item (:mod:`recordkeeper.integrations.pandas`)."""
        from recordkeeper.integrations.pandas import to_pandas

        return to_pandas(list(self))

    def _repr_html_(self) -> str:
        from recordkeeper.core.display import table
        from recordkeeper.integrations.pandas import rows

        found = rows(list(self[:_ROWS]))
        header = list(found[0])[:_COLUMNS] if found else ["(empty)"]
        shown = f"showing {len(found)} of {len(self)}" if len(self) > _ROWS else f"{len(self)}"
        return table(header, ([r.get(k) for k in header] for r in found), shown)
