"""The differential fuzz harness for the TFRecord engine (issue 14).

Records are built on the protobuf wire format (Examples, SequenceExamples, every feature kind,
packed and unpacked numbers, odd keys) or are arbitrary bytes; they are framed and compressed
by the engine's own writer, then mutated (bits flipped, bytes inserted, streams cut, frames
claiming huge lengths with valid CRCs, garbage after the stream).  Each case runs through

* both implementations in this process: the C fast paths (``recordkeeper._native``) and the
  pure-Python code (``_native.speedups = None``, what ``RECORDKEEPER_PURE_PYTHON`` selects),
  which must give identical records, hashes, schemas and errors (type, message, offsets);
* a seekable and an unseekable source (with and without the size bound on claimed lengths),
  and several read sizes (frames split across reads anywhere);
* TensorFlow, in a subprocess (:mod:`tests.fuzz._tf_oracle`): every record the engine yields
  is one TensorFlow yields at the same place, and a file TensorFlow refuses is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import select
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import recordkeeper.tfrecord as tfrecord
from recordkeeper import _native
from recordkeeper.core.errors import CorruptShard, SchemaConflict
from recordkeeper.schema_inference import infer_schema
from recordkeeper.tfrecord import TFRecordWriter, iter_records, masked_crc32c, scan_shard

SPEEDUPS = _native.speedups
EXAMPLES = int(os.environ.get("RECORDKEEPER_FUZZ_EXAMPLES", "120"))
"""Cases per property: the CI budget (see docs/development.md for the long run)."""


def fuzz_settings(scale: int = 1) -> settings:
    """hypothesis settings for ``scale * EXAMPLES`` cases.  Up to 1000 cases (CI) the run is
    derandomized, so a failure in CI reproduces anywhere; longer runs draw fresh seeds."""
    return settings(
        max_examples=EXAMPLES * scale,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,  # minimal failures are kept by hand in regressions.py, not in a cache
        derandomize=EXAMPLES <= 1000,
        print_blob=True,
    )


COMPRESSIONS = ("none", "gzip", "zlib")
READ_SIZES = (1, 5, 12, 13, 16, 64, 1000, 8 << 20)

# --------------------------------------------------------------------------- wire format


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 values take ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + varint(len(payload)) + payload


KEYS = st.one_of(
    st.sampled_from(["a", "b", "label", "image/encoded", "é", ""]),
    st.text(max_size=4),
    st.binary(max_size=4).map(lambda b: b.decode("latin-1")),
)
INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
FLOAT32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


@st.composite
def feature(draw: st.DrawFn) -> bytes:
    """A Feature message: one of the three lists (packed or not), none, or two merged."""
    kind = draw(st.sampled_from(["bytes", "float", "int64", "none", "two"]))
    if kind == "none":
        return b""
    if kind == "two":
        return draw(feature()) + draw(feature())
    packed = draw(st.booleans())
    if kind == "bytes":
        values = draw(st.lists(st.binary(max_size=12), max_size=4))
        return field(0x0A, b"".join(field(0x0A, v) for v in values))
    if kind == "float":
        floats = [struct.pack("<f", v) for v in draw(st.lists(FLOAT32, max_size=5))]
        body = field(0x0A, b"".join(floats)) if packed else b"".join(b"\x0d" + f for f in floats)
        return field(0x12, body)
    ints = draw(st.lists(INT64, max_size=5))
    body = (
        field(0x0A, b"".join(map(varint, ints)))
        if packed
        else b"".join(b"\x08" + varint(i) for i in ints)
    )
    return field(0x1A, body)


def entry(key: str, value: bytes) -> bytes:
    return field(0x0A, field(0x0A, key.encode("utf-8", "surrogatepass")) + field(0x12, value))


@st.composite
def features(draw: st.DrawFn) -> bytes:
    items = draw(st.lists(st.tuples(KEYS, feature()), max_size=4))
    return b"".join(entry(k, v) for k, v in items)


@st.composite
def feature_lists(draw: st.DrawFn) -> bytes:
    items = draw(st.lists(st.tuples(KEYS, st.lists(feature(), max_size=3)), max_size=3))
    return b"".join(entry(k, b"".join(field(0x0A, f) for f in steps)) for k, steps in items)


@st.composite
def example(draw: st.DrawFn) -> bytes:
    return field(0x0A, draw(features()))


@st.composite
def sequence_example(draw: st.DrawFn) -> bytes:
    context = field(0x0A, draw(features())) if draw(st.booleans()) else b""
    return context + field(0x12, draw(feature_lists()))


@st.composite
def mutated(draw: st.DrawFn, records: st.SearchStrategy[bytes]) -> bytes:
    """A record, maybe with a byte changed, inserted or cut off (malformed protobuf)."""
    record = draw(records)
    how = draw(st.sampled_from(["keep", "keep", "keep", "flip", "insert", "cut"]))
    if how == "keep" or (not record and how != "insert"):
        return record
    at = draw(st.integers(0, max(len(record) - 1, 0)))
    if how == "flip":
        return record[:at] + bytes([record[at] ^ draw(st.integers(1, 255))]) + record[at + 1 :]
    if how == "insert":
        return record[:at] + draw(st.binary(min_size=1, max_size=11)) + record[at:]
    return record[:at]


RECORD = st.one_of(example(), sequence_example(), st.binary(max_size=40), st.just(b""))


@st.composite
def record_sets(draw: st.DrawFn) -> list[bytes]:
    """Records for one shard: often many alike (one template), sometimes anything."""
    if draw(st.booleans()):
        template = draw(st.one_of(example(), sequence_example()))
        others = draw(st.lists(mutated(st.just(template) | RECORD), max_size=8))
        return [template, *others]
    return draw(st.lists(mutated(RECORD), max_size=12))


# --------------------------------------------------------------------------- stored files


def frame_header(length: int, *, valid_crc: bool = True) -> bytes:
    raw = length.to_bytes(8, "little")
    crc = masked_crc32c(raw) ^ (0 if valid_crc else 1)
    return raw + crc.to_bytes(4, "little")


def write(records: list[bytes], compression: str) -> bytes:
    buf = io.BytesIO()
    with TFRecordWriter(buf, compression, infer_schema=False) as writer:
        for record in records:
            writer.write(record)
    return buf.getvalue()


@st.composite
def file_mutations(draw: st.DrawFn, data: bytes, compression: str) -> bytes:
    """The stored bytes, maybe damaged once or twice."""
    for _ in range(draw(st.integers(0, 2))):
        how = draw(
            st.sampled_from(["flip", "cut", "append", "insert", "claim", "length", "recompress"])
        )
        at = draw(st.integers(0, len(data)))
        if how == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
        elif how == "cut":
            data = data[:at]
        elif how == "append":
            data += draw(st.binary(min_size=1, max_size=16))
        elif how == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
        elif how == "claim":  # a frame header with a valid CRC and a (usually) huge length
            claim = draw(st.sampled_from([1 << 40, (1 << 64) - 1, 1 << 31, 100, 0]))
            tail = draw(st.binary(max_size=4))
            data = data + frame_header(claim, valid_crc=draw(st.booleans())) + tail
        elif how == "length" and compression == "none" and len(data) >= 8:
            # rewrite the first frame's length (and its CRC, sometimes)
            length = draw(st.integers(0, (1 << 64) - 1))
            data = frame_header(length, valid_crc=draw(st.booleans())) + data[12:]
        elif how == "recompress" and compression != "none":
            extra = draw(st.binary(max_size=64))  # a second gzip member, or a zlib tail
            data += zlib.compress(extra) if compression == "zlib" else _gzip(extra)
    return data


def _gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


# --------------------------------------------------------------------------- the engine


class Pipe:
    """A source that cannot seek: the engine cannot know how much it holds."""

    def __init__(self, data: bytes) -> None:
        self._raw = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._raw.read(size)


@contextlib.contextmanager
def implementation(name: str) -> Iterator[None]:
    """Run with the C fast paths (``native``) or the pure-Python code (``python``)."""
    saved = _native.speedups
    _native.speedups = SPEEDUPS if name == "native" else None
    try:
        yield
    finally:
        _native.speedups = saved


@contextlib.contextmanager
def read_size(size: int) -> Iterator[None]:
    saved = tfrecord._READ_SIZE
    tfrecord._READ_SIZE = size
    try:
        yield
    finally:
        tfrecord._READ_SIZE = saved


def _error(exc: CorruptShard | SchemaConflict) -> tuple[str, str, dict[str, Any]]:
    return type(exc).__name__, exc.detail, dict(exc.extra)


def engine(data: bytes, compression: str, *, seekable: bool = True) -> dict[str, Any]:
    """Everything the engine says about one stored file.  Any exception other than
    ``CorruptShard`` / ``SchemaConflict`` (an IndexError, a MemoryError) escapes: a bug."""

    def source() -> Any:
        return io.BytesIO(data) if seekable else Pipe(data)

    records: list[bytes] = []
    error = None
    try:
        records.extend(iter_records(source(), compression))
    except CorruptShard as exc:
        error = _error(exc)
    out: dict[str, Any] = {"records": records, "error": error}
    for infer in (True, False):
        try:
            out[f"scan_{infer}"] = scan_shard(source(), compression, infer_schema=infer).to_dict()
        except (CorruptShard, SchemaConflict) as exc:
            out[f"scan_{infer}"] = _error(exc)
    try:
        out["schema"] = infer_schema(records).to_dict()
    except SchemaConflict as exc:
        out["schema"] = _error(exc)
    return out


def framed(records: list[bytes]) -> bytes:
    return b"".join(
        frame_header(len(r)) + r + masked_crc32c(r).to_bytes(4, "little") for r in records
    )


def check_consistency(result: dict[str, Any], data: bytes) -> None:
    """What one implementation says must hang together."""
    records, error = result["records"], result["error"]
    for infer in (True, False):
        scan = result[f"scan_{infer}"]
        if error is None:
            assert isinstance(scan, dict) or scan[0] == "SchemaConflict", scan
            if isinstance(scan, dict):
                assert scan["record_count"] == len(records)
                assert scan["records_sha256"] == hashlib.sha256(framed(records)).hexdigest()
                assert scan["sha256"] == hashlib.sha256(data).hexdigest()
                assert scan["size"] == len(data)
                if infer and not isinstance(result["schema"], tuple):
                    assert scan["schema"] == result["schema"]
        else:
            assert isinstance(scan, tuple) and scan[0] == "CorruptShard", scan
            assert scan[2] == error[2]  # the same offsets as iter_records


def differential(data: bytes, compression: str, chunk: int) -> dict[str, Any]:
    """Run one case on both implementations and both kinds of source; return the result."""
    with read_size(chunk):
        results = {}
        for name in ("native", "python") if SPEEDUPS is not None else ("python",):
            with implementation(name):
                results[name] = engine(data, compression)
                unseekable = engine(data, compression, seekable=False)
            check_consistency(results[name], data)
            assert unseekable["records"] == results[name]["records"]
            assert (unseekable["error"] is None) == (results[name]["error"] is None)
            if unseekable["error"] is not None:
                assert unseekable["error"][2] == results[name]["error"][2]
        if len(results) == 2:
            assert results["native"] == results["python"]
    return results["python"]


# --------------------------------------------------------------------------- the oracle


SANITIZER_ENV = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")  # TensorFlow runs without


class TensorFlowOracle:
    """A TensorFlow process that reads files on request; restarted when a file crashes it."""

    TIMEOUT = 60.0

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.crashes = 0
        self.asked = 0
        self._proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if k not in SANITIZER_ENV}
        env.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_tf_oracle.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        ready = proc.stdout.readline()  # TensorFlow imported
        assert "ready" in ready, f"the TensorFlow oracle did not start: {ready!r}"
        return proc

    def read(self, data: bytes, compression: str) -> dict[str, Any] | None:
        """TensorFlow's reading of ``data``: record digests and error, or None if it crashed."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        path = self.workdir / f"case-{self.asked}.tfrecord"
        self.asked += 1
        path.write_bytes(data)
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps({"path": str(path), "compression": compression}) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], self.TIMEOUT)
            line = proc.stdout.readline() if ready else ""
        except BrokenPipeError:
            line = ""
        finally:
            path.unlink()
        if not line:  # it died (TensorFlow segfaults on some headers) or hung
            self.crashes += 1
            self.close()
            return None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


def agree_with_tensorflow(
    ours: dict[str, Any], theirs: dict[str, Any] | None, compression: str
) -> None:
    """The engine and TensorFlow yield the same records in the same order as far as both read;
    a file TensorFlow refuses the engine refuses too.

    Where they stop may differ in two ways, both by design: the engine also refuses a
    compressed stream that does not end properly (a cut or garbage after the last record),
    which TensorFlow reads as a clean end; and TensorFlow drops what it decompressed in its
    buffer when decompression fails, while the engine yields every record decoded before the
    bad byte (each record still passes its own CRCs).  On an uncompressed file both stop at the
    same record.
    """
    if theirs is None:
        return  # TensorFlow crashed: no oracle for this file
    digests = [hashlib.sha256(r).hexdigest() for r in ours["records"]]
    common = min(len(digests), len(theirs["records"]))
    assert digests[:common] == theirs["records"][:common], "the records differ"
    if theirs["error"] is not None:
        assert ours["error"] is not None, f"TensorFlow refuses the file: {theirs['error']}"
        assert len(digests) >= len(theirs["records"]), "records before the error were lost"
    if compression == "none" or ours["error"] is None:
        assert len(digests) == len(theirs["records"]), (len(digests), len(theirs["records"]))
