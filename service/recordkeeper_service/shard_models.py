"""The REST models of a shard, derived from the core's shard record.

:class:`ShardIn` (a registration) and :class:`ShardOut` (an answer) are built from
:func:`recordkeeper.core.shards.wire_fields`, so a field added to
:class:`~recordkeeper.core.shards.ShardRecord` appears here, in the OpenAPI document and in
validation without editing this module.  Request models check only JSON *types* (wrong types →
``422 invalid_request``); the rules with their own codes are checked by
:func:`recordkeeper.core.shards.validate_shard`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from recordkeeper.core.shards import INPUT_FIELDS, wire_fields

__all__ = ["ShardIn", "ShardOut"]


class _ShardInBase(BaseModel):
    """A shard registration: the record's input fields plus its ``schema`` body."""

    model_config = ConfigDict(extra="ignore")

    schema_: dict[str, Any] | None = Field(default=None, alias="schema")

    def as_mapping(self) -> dict[str, Any]:
        """The fields as the repository takes them (``schema`` under its wire name)."""
        out = {name: getattr(self, name) for name in INPUT_FIELDS}
        out["schema"] = self.schema_
        return out


class _ShardOutBase(BaseModel):
    """A registered shard: every field of the record plus ``registered_at``."""


def _fields(*, output: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for f in wire_fields():
        if not (output or f.input):
            continue
        extra: dict[str, Any] = {"description": f.doc}
        if f.example is not None:
            extra["examples"] = [f.example]
        if f.required or output:
            fields[f.name] = (f.type, Field(**extra))
        else:
            fields[f.name] = (f.type, Field(default=None, **extra))
    if output:
        fields["registered_at"] = (str, Field(description="ISO 8601 UTC timestamp"))
    return fields


if TYPE_CHECKING:
    ShardIn = _ShardInBase
    ShardOut = _ShardOutBase
else:
    ShardIn = create_model("ShardIn", __base__=_ShardInBase, **_fields(output=False))
    ShardOut = create_model("ShardOut", __base__=_ShardOutBase, **_fields(output=True))
