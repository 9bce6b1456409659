"""The shard record: one definition of a shard's fields, their validation and their wire form.

A shard is one record file of a version (TFRecord, ArrayRecord, Riegeli: its ``format``).
:class:`ShardRecord` lists its fields once; every other place derives from it:

* the client's :class:`recordkeeper.Shard` is this record (its storage identity a read-only
  mapping, never ``None``);
* the writer and publish build one and send :meth:`ShardRecord.to_wire` (the REST ``Shard``
  input form, plus the shard's ``schema`` body);
* the service validates a registration with :func:`validate_shard`, builds its request and
  response models from :func:`wire_fields`, and maps the record to database columns by field
  name (``dataclasses.fields``).

So adding a field touches this module and the database (ORM column + migration), nothing else.

Each field's ``metadata`` says how it travels:

``wire``
    its JSON type in requests and responses (what the service's request model checks; the
    rules with their own error codes are checked by :func:`validate_shard`);
``input``
    False for fields the service derives (``schema_digest`` comes from the ``schema`` body);
``content``
    True for fields that say *which bytes* the shard is: a re-registration with equal content
    fields is a no-op, a different one a conflict (:meth:`ShardRecord.same_content`);
``check``
    the function that validates its wire value (``check(value, name)``, raising
    :class:`~recordkeeper.core.errors.InvalidShard` or ``InvalidHash``): :func:`validate_shard`
    runs every input field's, so no field can be dropped by validation;
``doc``, ``example``
    what the OpenAPI document shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self, cast

from recordkeeper.core.digests import validate_crc32c, validate_sha256
from recordkeeper.core.errors import InvalidShard
from recordkeeper.core.limits import MAX_INT64, MAX_SHARD_COUNT
from recordkeeper.core.roots import AllowedRoots, UriError, check_object_uri, normalize_uri
from recordkeeper.core.splits import shard_file_name, validate_split_name

__all__ = [
    "COMPRESSIONS",
    "CONTENT_FIELDS",
    "FIELDS",
    "INPUT_FIELDS",
    "RECORD_FORMATS",
    "SUMMED_FIELDS",
    "Compression",
    "ShardRecord",
    "WireField",
    "check_totals",
    "shard_location",
    "validate_shard",
    "wire_fields",
]

Compression = Literal["none", "gzip", "zlib"]
COMPRESSIONS: tuple[str, ...] = ("none", "gzip", "zlib")
#: The record formats a shard may be stored in (``recordkeeper.formats`` has one adapter each).
#: Formats other than TFRecord compress inside the file: their ``compression`` is ``none``.
RECORD_FORMATS: tuple[str, ...] = ("tfrecord", "array_record", "riegeli")


def _integer(value: object, name: str) -> int:
    # A JSON integer only: 0.0, false and "0" are not positions or sizes.
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidShard(f"{name} must be an integer, got {type(value).__name__}")
    return value


def _count(value: object, name: str) -> int:
    value = _integer(value, name)
    if not 0 <= value <= MAX_INT64:
        raise InvalidShard(f"{name} {value} must be a non-negative 64-bit integer")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[object, str], str]:
    def check(value: object, name: str) -> str:
        if value not in choices:
            raise InvalidShard(f"{name} {value!r} is not one of {', '.join(choices)}")
        return str(value)  # one of the choices: a str already

    return check


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidShard(f"{name} must be a string, got {type(value).__name__}")
    return value


def _identity(value: object, name: str) -> object:
    if value is not None and not isinstance(value, dict):
        raise InvalidShard(f"{name} must be an object or null")
    return value


def _derived(value: object, name: str) -> object:
    return value  # not an input: the service sets it


def _meta(
    wire: object,
    doc: str,
    check: Callable[[Any, str], Any],
    *,
    content: bool = False,
    input: bool = True,
    example: object = None,
) -> dict[str, Any]:
    return {
        "wire": wire,
        "doc": doc,
        "check": check,
        "content": content,
        "input": input,
        "example": example,
    }


@dataclass(frozen=True, slots=True)
class ShardRecord:
    """One registered record file of a version (TFRecord, ArrayRecord or Riegeli: ``format``).

    ``size``, ``sha256`` and ``crc32c`` describe the stored bytes; ``records_sha256`` and
    ``record_count`` the uncompressed framed records (stable across compression);
    ``storage_identity`` is what the object store said at registration time.
    """

    split: str = field(
        metadata=_meta(str, "split name", lambda v, n: validate_split_name(v), example="train")
    )
    index: int = field(metadata=_meta(int, "position of the shard in its split, from 0", _integer))
    count: int = field(metadata=_meta(int, "number of shards of the split", _integer, content=True))
    uri: str = field(metadata=_meta(str, "where the shard is stored", _text, content=True))
    compression: Compression = field(
        metadata=_meta(
            str,
            "none, gzip or zlib (of the whole file: TFRecord only)",
            _one_of(COMPRESSIONS),
            content=True,
            example="gzip",
        )
    )
    size: int = field(metadata=_meta(int, "stored size in bytes", _count, content=True))
    sha256: str = field(
        metadata=_meta(
            str,
            "sha256 of the stored bytes, 64 lowercase hex digits",
            validate_sha256,
            content=True,
        )
    )
    crc32c: str = field(
        metadata=_meta(
            str,
            "CRC32C of the stored bytes, 8 lowercase hex digits",
            validate_crc32c,
            content=True,
        )
    )
    records_sha256: str = field(
        metadata=_meta(
            str,
            "sha256 of the records in TFRecord framing, whatever the shard's format and "
            "compression",
            validate_sha256,
            content=True,
        )
    )
    record_count: int = field(metadata=_meta(int, "number of records", _count, content=True))
    format: str = field(
        default="tfrecord",
        metadata=_meta(
            str,
            "record format of the file: tfrecord, array_record or riegeli",
            _one_of(RECORD_FORMATS),
            content=True,
            example="tfrecord",
        ),
    )
    storage_identity: Mapping[str, Any] | None = field(
        default=None,
        metadata=_meta(
            dict[str, Any] | None, "what the object store said at registration time", _identity
        ),
    )
    schema_digest: str | None = field(
        default=None,
        metadata=_meta(
            str | None,
            "digest of the shard's schema (registered as 'schema')",
            _derived,
            input=False,
        ),
    )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A read-only MappingProxyType (rk.Shard's storage identity) does not pickle, and
        # shards travel to worker processes: rebuild from plain values.
        values = [getattr(self, f.name) for f in dataclasses.fields(self)]
        return (type(self), tuple(_plain(v) for v in values))

    @property
    def name(self) -> str:
        """``train-00003-of-00016``: the shard's position, whatever its file is called."""
        return shard_file_name(self.split, self.index, self.count, suffix="")

    @property
    def key(self) -> tuple[str, int]:
        """``(split, index)``: a shard's place in its version."""
        return (self.split, self.index)

    def same_content(self, other: ShardRecord | Mapping[str, Any]) -> bool:
        """True if ``other`` (a record, or a mapping of stored columns) has the same bytes."""
        get = other.__getitem__ if isinstance(other, Mapping) else other.__getattribute__
        return all(getattr(self, name) == get(name) for name in CONTENT_FIELDS)

    def to_wire(self, *, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The REST ``Shard`` input form; ``schema`` is the shard's schema body (or None)."""
        out = _input_dict(self)
        out["schema"] = schema
        return out

    def to_json(self) -> dict[str, Any]:
        """Every field, JSON-ready (what the service answers, without ``registered_at``)."""
        return _all_dict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Build from a service answer or a wire form, without validating (trusted input).

        Fields the answer lacks take their defaults (``compression`` is ``none``); unknown keys
        (``schema``, ``registered_at``) are ignored.
        """
        return cast("Self", _from_json(cls, data))


def _plain(value: object) -> object:
    return value if type(value) is dict or not isinstance(value, Mapping) else dict(value)


#: Every field, in order.
FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ShardRecord))
#: Fields sent when registering (all but the ones the service derives).
INPUT_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(ShardRecord) if f.metadata["input"]
)
#: Fields that identify the stored bytes (compared on re-registration).
CONTENT_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(ShardRecord) if f.metadata["content"]
)


# Shards are converted by the ten thousand (a version's answer, a bulk registration), so the
# conversions are compiled once from the field list, as ``dataclasses`` compiles ``__init__``:
# a dict display per call instead of a loop over fields.
def _compile(name: str, body: str) -> Callable[..., dict[str, Any]]:
    namespace: dict[str, Any] = {"_plain": _plain, "int": int}
    exec(f"def {name}(x):\n    return {{{body}}}\n", namespace)
    return cast("Callable[..., dict[str, Any]]", namespace[name])


def _compile_call(name: str, arguments: str) -> Callable[[type[Any], Mapping[str, Any]], Any]:
    namespace: dict[str, Any] = {"int": int}
    exec(f"def {name}(cls, x):\n    return cls({arguments})\n", namespace)
    return cast("Callable[[type[Any], Mapping[str, Any]], Any]", namespace[name])


def _getter(f: dataclasses.Field[Any]) -> str:
    mapping = f.metadata["wire"] not in (int, str, str | None)
    return f"_plain(x.{f.name})" if mapping else f"x.{f.name}"


def _reader(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        value = f"x.get({f.name!r}, {f.default!r})"
    elif f.name == "compression":
        value = f"x.get({f.name!r}, 'none')"
    else:
        value = f"x[{f.name!r}]"
    return f"int({value})" if f.metadata["wire"] is int else value


_FIELDS = dataclasses.fields(ShardRecord)
_all_dict = _compile("to_json", ", ".join(f"{f.name!r}: {_getter(f)}" for f in _FIELDS))
_input_dict = _compile(
    "to_wire", ", ".join(f"{f.name!r}: {_getter(f)}" for f in _FIELDS if f.metadata["input"])
)
_from_json = _compile_call("from_json", ", ".join(f"{f.name}={_reader(f)}" for f in _FIELDS))


@dataclass(frozen=True)
class WireField:
    """One field of the wire form, for building request/response models."""

    name: str
    type: object
    required: bool
    doc: str
    example: object
    input: bool
    default: object = None  # what an optional field is when a registration leaves it out


def wire_fields() -> tuple[WireField, ...]:
    """The record's fields with their JSON types, in order."""
    return tuple(
        WireField(
            name=f.name,
            type=f.metadata["wire"],
            required=f.default is dataclasses.MISSING,
            doc=f.metadata["doc"],
            example=f.metadata["example"],
            input=f.metadata["input"],
            default=None if f.default is dataclasses.MISSING else f.default,
        )
        for f in dataclasses.fields(ShardRecord)
    )


_InputCheck = tuple[str, Any, Callable[[Any, str], Any]]
_INPUT_CHECKS: dict[type[ShardRecord], tuple[_InputCheck, ...]] = {}


def _input_checks(record_type: type[ShardRecord]) -> tuple[_InputCheck, ...]:
    """Each input field of ``record_type``, in order: its name, its default
    (``dataclasses.MISSING`` when it has none) and its check; read from the field definitions
    once per record type, not for each of a request's 10,000 shards."""
    found = _INPUT_CHECKS.get(record_type)
    if found is None:
        found = tuple(
            (f.name, f.default, f.metadata["check"])
            for f in dataclasses.fields(record_type)
            if f.metadata["input"]
        )
        _INPUT_CHECKS[record_type] = found
    return found


def validate_shard(
    raw: Mapping[str, Any],
    roots: AllowedRoots | None = None,
    *,
    uri_what: str = "shard URI",
    record_type: type[ShardRecord] = ShardRecord,
) -> ShardRecord:
    """Check one shard registration (the wire form) and return the record.

    Derived from the record's field definitions: every input field is read from ``raw`` (a
    missing one takes its default, or is refused when it has none) and checked by the
    ``check`` of its metadata, so a field added to :class:`ShardRecord` is validated and kept
    without touching this function (``record_type``: a record class with more fields, for
    the test that proves it).  Then the rules across fields: index within count, a count in
    range, the URI inside ``roots``, compression ``none`` for the formats that compress inside
    the file.  ``schema`` is not looked at (the service parses it once per distinct body).

    Raises:
        InvalidShard: bad split, index/count, compression, format, size, record count, URI or
            storage identity, or a missing field.
        InvalidHash: sha256/records_sha256/crc32c not in lowercase hex form.
        StorageRootNotAllowed: a URI outside ``roots`` (or climbing out with ``..``).
    """
    values: dict[str, Any] = {}
    for name, default, check in _input_checks(record_type):
        if name in raw:
            value = raw[name]
        elif default is not dataclasses.MISSING:
            value = default
        else:
            raise InvalidShard(f"{name} is missing")
        values[name] = check(value, name)
    index, count = values["index"], values["count"]
    if index < 0:
        raise InvalidShard(f"index {index} is negative")
    if not 1 <= count <= MAX_SHARD_COUNT:
        raise InvalidShard(f"count {count} must be between 1 and {MAX_SHARD_COUNT}")
    if index >= count:
        raise InvalidShard(
            f"index {index} is out of range for count {count} (indices are 0..{count - 1})"
        )
    if values["format"] != "tfrecord" and values["compression"] != "none":
        raise InvalidShard(
            f"compression {values['compression']!r} does not apply to {values['format']} "
            "shards (they compress inside the file): it must be 'none'"
        )
    try:
        uri = values["uri"]
        if roots is not None:
            uri = roots.check_object(uri, uri_what, "a shard file")
        else:
            uri = check_object_uri(normalize_uri(uri), (), "a shard file")
    except UriError as exc:
        raise InvalidShard(f"uri: {exc}") from None
    values["uri"] = uri
    return record_type(**values)


#: The fields the service adds up over a version's shards (the version's ``size`` and
#: ``record_count``, each split's): every such total is stored and answered as a 64-bit integer.
SUMMED_FIELDS: tuple[str, ...] = ("size", "record_count")


def check_totals(stored: Mapping[str, int], added: Iterable[tuple[int, ShardRecord]]) -> None:
    """Refuse shards that would take a version's total of a summed field past 2^63-1.

    ``stored`` holds the version's totals (:data:`SUMMED_FIELDS`) over the shards registered
    so far, ``added`` the new shards with their position in the request.  A split's total is
    part of its version's (sizes and counts are non-negative), so the version's bound is also
    every split's, and a merged schema's counts (bounded by the records: see
    :func:`recordkeeper.core.schema.check_shard_schema`) are bounded with it.

    Raises:
        InvalidShard: naming the first shard that takes a total past the limit.
    """
    totals = {name: stored.get(name, 0) for name in SUMMED_FIELDS}
    for position, record in added:
        for name in SUMMED_FIELDS:
            total = totals[name] + getattr(record, name)
            if total > MAX_INT64:
                raise InvalidShard(
                    f"shard {position}: the version's total {name} would be {total}, over the "
                    f"limit of {MAX_INT64} (2^63-1): the {name} of a version's shards "
                    f"(registered: {stored.get(name, 0)}, plus this request's) must add up to "
                    "at most that",
                    shard=position,
                )
            totals[name] = total


def shard_location(storage_prefix: str, uris: Sequence[str]) -> tuple[str, bool]:
    """Where a version's shards are: ``(storage_prefix, True)`` when every shard lies under it
    (written or copied there), else ``(the shards' deepest common directory, False)`` — a
    version published in place keeps its shards where they were, and its storage prefix (the
    place a copy would have gone) may not exist.  No shards: ``(storage_prefix, True)``."""
    base = storage_prefix.rstrip("/") + "/"
    if not uris or all(u.startswith(base) for u in uris):
        return storage_prefix, True
    directories = [u.rpartition("/")[0] for u in uris]
    common = directories[0]
    for d in directories[1:]:
        while common and not (d == common or d.startswith(common + "/")):
            common = common.rpartition("/")[0]
    if not common or common.endswith(":/") or common.endswith(":"):
        common = directories[0]
    return common + "/", False
