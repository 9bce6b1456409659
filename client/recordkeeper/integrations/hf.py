"""A version's split as a Hugging Face ``datasets`` dataset (extra ``hf``).

``DatasetVersion.to_hf_dataset(split, streaming=False)`` calls :func:`to_hf_dataset`: every
shard of the split is read whole, its sha256 and size checked against what the version
registered (:class:`~recordkeeper.errors.CorruptShard` otherwise) and its TFRecord CRCs checked
(:func:`recordkeeper.tfrecord.iter_records`); each ``tf.train.Example`` is decoded from the
protobuf wire format here (no TensorFlow, no ``protobuf``) by the version's schema:

=======================  =================================  ===============================
schema feature           Hugging Face feature               value of a record without it
=======================  =================================  ===============================
always 1 value           ``Value("int64"|"float32"|"binary")``  —
otherwise                ``List(Value(...))``               ``[]``
=======================  =================================  ===============================

``streaming=True`` answers an ``IterableDataset`` that reads the shards as it is iterated;
otherwise a ``Dataset`` (Arrow, in the ``datasets`` cache).  SequenceExamples (and opaque
records) are refused with :class:`~recordkeeper.errors.UnsupportedFormat`.
"""

from __future__ import annotations

import hashlib
import io
import struct
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import datasets

from recordkeeper.core.errors import CorruptShard, UnsupportedFormat
from recordkeeper.storage import open_read
from recordkeeper.tfrecord import iter_records

if TYPE_CHECKING:
    from recordkeeper.core.schema import Feature
    from recordkeeper.values import DatasetVersion, Shard

__all__ = ["decode_example", "hf_features", "iter_examples", "to_hf_dataset"]

_VALUE = {"int64": "int64", "float": "float32", "bytes": "binary"}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a message: varints as ints, others as bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated field")
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def _signed(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


def _feature_values(buf: bytes) -> tuple[str, list[Any]] | None:
    for number, _, inner in _fields(buf):  # oneof: the last one set wins
        values: list[Any] = []
        if number == 1:
            values = [bytes(v) for n, w, v in _fields(inner) if n == 1 and w == 2]
            last: tuple[str, list[Any]] | None = ("bytes", values)
        elif number == 2:
            for n, w, v in _fields(inner):
                if n == 1 and w == 2:
                    values += struct.unpack(f"<{len(v) // 4}f", v)
                elif n == 1 and w == 5:
                    values += struct.unpack("<f", v)
            last = ("float", values)
        elif number == 3:
            for n, w, v in _fields(inner):
                if n == 1 and w == 2:
                    pos = 0
                    while pos < len(v):
                        x, pos = _varint(v, pos)
                        values.append(_signed(x))
                elif n == 1 and w == 0:
                    values.append(_signed(v))
            last = ("int64", values)
        else:
            continue
        return last
    return None


def decode_example(record: bytes) -> dict[str, tuple[str, list[Any]]]:
    """A serialized ``tf.train.Example`` as feature name → (kind, values)."""
    features: dict[str, tuple[str, list[Any]]] = {}
    for number, wire, value in _fields(record):
        if number == 2:
            raise UnsupportedFormat("a SequenceExample cannot be decoded into a flat row")
        if number != 1 or wire != 2:
            continue
        for n, w, entry in _fields(value):
            if n != 1 or w != 2:
                continue
            key, feature = b"", b""
            for en, ew, ev in _fields(entry):
                if en == 1 and ew == 2:
                    key = ev
                elif en == 2 and ew == 2:
                    feature = ev
            decoded = _feature_values(feature)
            if decoded is not None:
                features[key.decode("utf-8")] = decoded
    return features


def _scalar(f: Feature, record_count: int) -> bool:
    return f.min_count == 1 and f.max_count == 1 and f.present_count == record_count


def hf_features(version: DatasetVersion) -> datasets.Features:
    """The Hugging Face features of ``version``'s schema (see the module's table)."""
    schema = version.schema
    if schema.record_type not in ("example", "empty"):
        raise UnsupportedFormat(
            f"{version.name}: {schema.record_type} records cannot be read as a Hugging Face "
            "dataset (tf.train.Example only)"
        )
    out: dict[str, Any] = {}
    for f in schema.features:
        value = datasets.Value(_VALUE[str(f.kind)])
        out[f.name] = value if _scalar(f, schema.record_count) else datasets.List(value)
    return datasets.Features(out)


def _shard_bytes(shard: Shard, storage_options: Mapping[str, Any]) -> bytes:
    with open_read(shard.uri, storage_options, size=shard.size) as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    expected = str(shard.sha256).split(":", 1)[-1]
    if len(data) != shard.size or (expected and digest != expected):
        raise CorruptShard(
            f"{shard.uri}: its content is not what was registered (size {len(data)}, sha256 "
            f"{digest}; registered {shard.size}, {expected})",
            uri=shard.uri,
        )
    return data


def iter_examples(version: DatasetVersion, split: str) -> Iterator[dict[str, Any]]:
    """The records of ``split`` as rows (feature name → value), shard by shard, verified."""
    version.ensure_readable()
    features = version.schema.features
    count = version.schema.record_count
    scalar = {f.name: _scalar(f, count) for f in features}
    for shard in version.split(split).shards:
        data = _shard_bytes(shard, version.storage_options)
        for record in iter_records(io.BytesIO(data), shard.compression, size=len(data)):
            decoded = decode_example(record)
            row: dict[str, Any] = {}
            for name, is_scalar in scalar.items():
                values = decoded.get(name, ("", []))[1]
                row[name] = values[0] if is_scalar else list(values)
            yield row


#: Versions being read, by (name, content digest): the generator's arguments must be plain
#: values (``datasets`` hashes them to name its cache), so the version is looked up here.
_READING: dict[tuple[str, str], DatasetVersion] = {}


def _generate(name: str, digest: str, split: str) -> Iterator[dict[str, Any]]:
    yield from iter_examples(_READING[(name, digest)], split)


def to_hf_dataset(version: DatasetVersion, split: str, *, streaming: bool = False) -> Any:
    """``split`` of ``version`` as a ``datasets.Dataset`` (``IterableDataset`` when
    ``streaming``); see the module docstring.  The Arrow cache of a non-streaming dataset is
    named by the content digest and split: the same content is read once."""
    version.split(split)  # SplitNotFound (a KeyError) naming the splits
    features = hf_features(version)
    digest = version.content_digest or version.name
    _READING[(version.name, digest)] = version
    kwargs = {"name": version.name, "digest": digest, "split": split}
    if streaming:
        return datasets.IterableDataset.from_generator(
            _generate, features=features, gen_kwargs=kwargs, split=datasets.NamedSplit(split)
        )
    fingerprint = hashlib.sha256(f"{digest}\0{split}".encode()).hexdigest()[:32]
    return datasets.Dataset.from_generator(
        _generate,
        features=features,
        gen_kwargs=kwargs,
        split=datasets.NamedSplit(split),
        fingerprint=fingerprint,
    )
