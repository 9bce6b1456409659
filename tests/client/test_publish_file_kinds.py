"""Publishing a file that is not TFRecord: the refusal names what the file looks like."""

from __future__ import annotations

from pathlib import Path

import pytest

import recordkeeper as rk
from tests.client._riegeli_files import build, simple
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)

pytest.importorskip("fastapi")


@pytest.mark.parametrize(
    ("content", "looks_like", "words"),
    [
        (b"PAR1" + bytes(200) + b"PAR1", "parquet", "it looks like a Parquet file"),
        (b'{"image": "a.jpg", "label": 3}\n' * 4, "jsonl", "it looks like a JSON Lines"),
        (b"\x89HDF\r\n\x1a\n" + bytes(100), "hdf5", "it looks like an HDF5 file"),
    ],
)
def test_publish_in_place_names_what_a_non_tfrecord_file_looks_like(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    content: bytes,
    looks_like: str,
    words: str,
) -> None:
    path = roots[1] / "train.tfrecord"
    path.write_bytes(content)
    with pytest.raises(rk.CorruptShard, match="is not a TFRecord file") as info:
        client.publish(rk.Dataset.from_file(path, name="coco"), progress=False)
    assert words in info.value.detail
    assert info.value.extra["looks_like"] == looks_like
    assert info.value.extra["offset"] == 0


def test_a_riegeli_file_publishes_in_place_with_its_format(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
) -> None:
    """Once refused as "not a TFRecord file", a Riegeli file is now read through the seam."""
    path = roots[1] / "train.riegeli"
    path.write_bytes(build([simple([b"a", b"b"])]).data)
    v = client.publish(rk.Dataset.from_file(path, name="coco"), progress=False)
    (shard,) = v.shards
    assert shard.format == "riegeli" and shard.record_count == 2
    assert v.verify(deep=True).ok
