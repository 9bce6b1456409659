"""recordkeeper.file_kinds: real files of each format, named by their content."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest

from recordkeeper.file_kinds import describe_bytes, describe_file
from recordkeeper.tfrecord import TFRecordWriter
from tests.client._riegeli_files import Chunk, build, simple


def _kind(path: Path) -> tuple[str, str]:
    with path.open("rb") as f:
        found = describe_file(f)
    return found.kind, found.description


def test_tfrecord_files_plain_and_gzip(tmp_path: Path) -> None:
    with TFRecordWriter(tmp_path / "a.tfrecord", infer_schema=False) as writer:
        writer.write(b"hello")
    assert _kind(tmp_path / "a.tfrecord") == ("tfrecord", "a TFRecord file")
    with TFRecordWriter(tmp_path / "a.tfrecord.gz", "gzip", infer_schema=False) as writer:
        writer.write(b"hello")
    assert _kind(tmp_path / "a.tfrecord.gz")[0] == "gzip"


@pytest.mark.parametrize("compression", ["none", "brotli", "zstd", "snappy"])
def test_riegeli_files_name_their_compression(compression: str) -> None:
    data = build([simple([b"a", b"b"], compression)]).data
    found = describe_file(io.BytesIO(data))
    name = "uncompressed" if compression == "none" else compression
    assert (found.kind, found.description) == ("riegeli", f"a Riegeli file ({name} simple chunks)")


def test_riegeli_files_with_transposed_chunks_after_metadata() -> None:
    data = build([Chunk(0x6D, b"meta", 0, 4), Chunk(0x74, b"\x00cols", 3, 9)]).data
    found = describe_bytes(data)
    assert found.description == "a Riegeli file with transposed chunks"


def test_numpy_files(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(10))
    np.savez(tmp_path / "b.npz", x=np.arange(3))
    assert _kind(tmp_path / "a.npy")[0] == "npy"
    assert _kind(tmp_path / "b.npz") == ("npz", "a NumPy .npz archive")


def test_parquet_and_arrow_files(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    feather = pytest.importorskip("pyarrow.feather")
    table = pa.table({"x": [1, 2, 3]})
    pq.write_table(table, tmp_path / "t.parquet")
    feather.write_feather(table, tmp_path / "t.feather")
    assert _kind(tmp_path / "t.parquet") == ("parquet", "a Parquet file")
    assert _kind(tmp_path / "t.feather")[0] == "arrow"


def test_hdf5_files(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f["x"] = np.arange(3)
    assert _kind(tmp_path / "t.h5") == ("hdf5", "an HDF5 file")


def test_text_files(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([{"a": 1}]))
    (tmp_path / "a.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "a.gz").write_bytes(gzip.compress(b"x" * 100))
    assert _kind(tmp_path / "a.json")[0] == "json"
    assert _kind(tmp_path / "a.csv")[0] == "csv"
    assert _kind(tmp_path / "a.gz")[0] == "gzip"


def test_describe_file_leaves_a_seekable_file_after_the_head(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(3 * 65536))
    with path.open("rb") as f:
        describe_file(f)
        assert f.tell() == 65536
