"""End-to-end client scenarios shared by the local, S3 and GCS integration tests.

Each takes a live service (real uvicorn socket), a storage root URL on the backend under test
and the ``storage_options`` a user would pass, and drives the public API only.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import fsspec
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from tests.client._records import frame, sample_examples
from tests.integration.conftest import LiveService


def put_bytes(uri: str, data: bytes, storage_options: dict[str, Any]) -> None:
    fs, path = fsspec.core.url_to_fs(uri, **({} if uri.startswith("file://") else storage_options))
    if uri.startswith("file://"):
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as fh:
        fh.write(data)


def get_bytes(uri: str, storage_options: dict[str, Any]) -> bytes:
    fs, path = fsspec.core.url_to_fs(uri, **({} if uri.startswith("file://") else storage_options))
    with fs.open(path, "rb") as fh:
        return fh.read()  # type: ignore[no-any-return]


def make_raw_dataset(
    raw: str, storage_options: dict[str, Any], shards: int = 3, per_shard: int = 40
) -> list[bytes]:
    """TFDS-style shards plus a gzip validation file under ``raw``; returns the train records."""
    records = []
    for i in range(shards):
        recs = sample_examples(per_shard, i * per_shard)
        records += recs
        put_bytes(
            f"{raw}/coco-train.tfrecord-{i:05d}-of-{shards:05d}", frame(recs), storage_options
        )
    import gzip

    put_bytes(
        f"{raw}/coco-validation.tfrecord.gz",
        gzip.compress(frame(sample_examples(7, 900))),
        storage_options,
    )
    put_bytes(f"{raw}/README.md", b"not a shard", storage_options)
    return records


def publish_resolve_verify(service: LiveService, root: str, opts: dict[str, Any]) -> None:
    """Publish in place, resolve by every ref form, fast + deep verify, duplicate handling."""
    client = service.client(storage_options=opts)
    raw = f"{root}/raw/coco"
    make_raw_dataset(raw, opts)
    ds = rk.Dataset.from_directory(raw, name="coco", storage_options=opts)
    v = client.publish(ds, desc="raw_import", progress=False)
    assert v.name.endswith("_v1_raw_import")
    assert (v.splits["train"].shard_count, v.splits["train"].record_count) == (3, 120)
    assert v.splits["validation"].shards[0].compression == "gzip"
    identity = dict(v.splits["train"].shards[0].storage_identity)
    assert identity["backend"] in ("file", "s3", "gcs")
    latest = client.resolve("coco@latest")
    assert latest.name == v.name and latest.ref == "coco@latest"
    assert client.resolve(f"coco@{v.content_digest}").name == v.name
    assert latest.verify().ok
    deep = latest.verify(deep=True)
    assert deep.ok and deep.bytes_read == v.size
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert client.publish(ds, progress=False).name == v.name
    assert any(issubclass(w.category, rk.DuplicateWarning) for w in caught)


def writer_and_diff(service: LiveService, root: str, opts: dict[str, Any]) -> rk.DatasetVersion:
    """Write two versions with the writer under ``root``; check layout, cleanup and diff."""
    client = service.client()
    with client.writer(
        "coco", root=f"{root}/datasets", shard_size="20KB", storage_options=opts
    ) as w:
        for i, rec in enumerate(sample_examples(600)):
            w.write(rec, split="train" if i % 10 else "validation")
    v1 = w.version
    # stored under the committed name (the writer reserves the number when it stages)
    assert v1.storage_prefix == f"{root}/datasets/coco/{v1.name}/"
    assert v1.name.endswith("_v1") and v1.staged_name is not None and "_staged" in v1.staged_name
    fs, prefix = fsspec.core.url_to_fs(
        v1.storage_prefix, **({} if root.startswith("file://") else opts)
    )
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.find(prefix))
    count = v1.splits["train"].shard_count
    assert count > 1
    shards = [f"train-{i:05d}-of-{count:05d}.tfrecord" for i in range(count)]
    assert [n for n in names if n.startswith("train") and not n.endswith(".rkidx")] == shards
    # each shard's record index beside it (the writer's record_index default)
    assert [n for n in names if n.startswith("train") and n.endswith(".rkidx")] == [
        f"{n}.rkidx" for n in shards
    ]
    assert not [n for n in fs.find(prefix) if "_incomplete" in n]
    assert v1.with_storage_options(opts).verify(deep=True).ok
    with client.writer(
        "coco", root=f"{root}/datasets", compression="gzip", storage_options=opts
    ) as w:
        for i, rec in enumerate(sample_examples(700)):
            w.write(rec, split="train" if i % 10 else "validation")
    v2 = w.version
    assert v2.files("validation")[0].endswith("validation-00000-of-00001.tfrecord.gz")
    d = client.diff(v1.name, "coco@latest")
    counts = {s.split: (s.old_records, s.new_records) for s in d.splits}
    assert counts == {"train": (540, 630), "validation": (60, 70)}
    assert not d.schema and not d.same_content
    return v2


def _listing(uri: str, root: str, opts: dict[str, Any]) -> list[str]:
    """Every object under ``uri`` but record indexes (``.recordkeeper/index/``, stored beside
    the shards by the writer and publish), as paths relative to it."""
    fs, path = fsspec.core.url_to_fs(uri, **({} if root.startswith("file://") else opts))
    fs.invalidate_cache()
    below = path.rstrip("/") + "/"
    found = fs.find(path) if fs.exists(path) else []
    return sorted(
        p[len(below) :] for p in found if p.startswith(below) and "/.recordkeeper/" not in p
    )


def copies_under_committed_names(service: LiveService, root: str, opts: dict[str, Any]) -> None:
    """publish --copy stores a version under its committed name; a duplicate is neither copied
    nor numbered; a version staged the old way (staged-named prefix) still resolves and
    verifies."""
    client = service.client(storage_options=opts)
    raw = f"{root}/raw/coco"
    make_raw_dataset(raw, opts)
    ds = rk.Dataset.from_directory(raw, name="coco", storage_options=opts)
    store = f"{root}/datasets"
    v1 = client.publish(ds, desc="first_import", copy_to=store, progress=False)
    assert v1.name.endswith("_v1_first_import"), v1.name
    assert v1.storage_prefix == f"{store}/coco/{v1.name}/"
    assert _listing(f"{store}/coco", root, opts) == [
        f"{v1.name}/train-0000{i}-of-00003.tfrecord" for i in range(3)
    ] + [f"{v1.name}/validation-00000-of-00001.tfrecord.gz"]
    assert all(u.startswith(v1.storage_prefix) for s in v1.splits for u in v1.files(s))
    assert v1.with_storage_options(opts).verify(deep=True).ok
    with pytest.warns(rk.DuplicateWarning, match=v1.name):
        again = client.publish(ds, desc="again", copy_to=store, progress=False)
    assert again.name == v1.name
    assert len({p.split("/")[0] for p in _listing(f"{store}/coco", root, opts)}) == 1  # no copy
    put_bytes(f"{raw}/coco-test.tfrecord", frame(sample_examples(3, 5000)), opts)
    changed = rk.Dataset.from_directory(raw, name="coco", storage_options=opts)
    v2 = client.publish(changed, copy_to=store, progress=False)
    assert v2.number == v1.number + 1  # the duplicate consumed no number
    assert v2.storage_prefix == f"{store}/coco/{v2.name}/"
    # a version laid out the way earlier releases did: shards under the staged name
    old = client.stage("coco", desc="old_layout", root=store)
    assert old.storage_prefix == f"{store}/coco/{old.name}/" and "_staged" in old.name
    uri = f"{old.storage_prefix}train-00000-of-00001.tfrecord"
    put_bytes(uri, frame(sample_examples(4, 7000)), opts)
    from recordkeeper.dataset import ShardFile
    from recordkeeper.publish import scan_file

    client.register_shards(old, [scan_file(ShardFile("train", 0, 1, uri, "none"), opts)])
    committed = client.commit(old)
    assert committed.number == v2.number + 1 and committed.storage_prefix == old.storage_prefix
    for ref in (committed.name, old.name, f"coco@v{committed.number}"):
        resolved = client.resolve(ref)
        assert resolved.name == committed.name and resolved.files("train") == [uri]
        assert resolved.with_storage_options(opts).verify(deep=True).ok


def writer_failure_cleans_up(service: LiveService, root: str, opts: dict[str, Any]) -> None:
    client = service.client()
    with (
        pytest.raises(ValueError, match="bad record"),
        client.writer(
            "broken", root=f"{root}/datasets", shard_size="10KB", storage_options=opts
        ) as w,
    ):
        for rec in sample_examples(300):
            w.write(rec)
        staged = w.staged
        raise ValueError("bad record")
    assert staged is not None
    fs, prefix = fsspec.core.url_to_fs(
        staged.storage_prefix, **({} if root.startswith("file://") else opts)
    )
    fs.invalidate_cache()
    below = prefix.rstrip("/") + "/"
    left = [p for p in fs.find(prefix) if p.startswith(below)] if fs.exists(prefix) else []
    assert left == [], left  # (SeaweedFS may keep an empty directory entry for the prefix)
    with pytest.raises(rk.NotFound):
        client.resolve("broken@latest")


def corruption_is_reported(
    service: LiveService, root: str, opts: dict[str, Any], keep_mtime: Any = None
) -> None:
    """Overwrite a shard with a same-size bit flip, delete another: verify names both."""
    client = service.client(storage_options=opts)
    raw = f"{root}/raw/corrupt"
    for i in range(3):
        put_bytes(
            f"{raw}/train-{i:05d}-of-00003.tfrecord", frame(sample_examples(30, i * 30)), opts
        )
    v = client.publish(
        rk.Dataset.from_directory(raw, name="corrupt", storage_options=opts), progress=False
    )
    victim, gone = v.splits["train"].shards[1], v.splits["train"].shards[2]
    data = bytearray(get_bytes(victim.uri, opts))
    data[500] ^= 0x04
    if keep_mtime is not None:
        keep_mtime(victim.uri, bytes(data))
    else:
        put_bytes(victim.uri, bytes(data), opts)
    fs, path = fsspec.core.url_to_fs(gone.uri, **({} if root.startswith("file://") else opts))
    fs.rm(path)
    fast = {p.shard.name: p.reason for p in v.verify().problems}
    deep = v.verify(deep=True)
    deep_reasons = {p.shard.name: p.reason for p in deep.problems}
    assert deep_reasons == {"train-00001-of-00003": "corrupt", "train-00002-of-00003": "missing"}
    offset = next(p.offset for p in deep.problems if p.reason == "corrupt")
    assert offset is not None and offset <= 500
    if keep_mtime is not None:
        assert fast == {"train-00002-of-00003": "missing"}  # only deep sees the flip
    else:
        assert fast["train-00002-of-00003"] == "missing"
        assert fast["train-00001-of-00003"] in ("identity_changed", "checksum_mismatch")
    with pytest.raises(rk.CorruptShard, match="train-00001-of-00003"):
        deep.raise_for_problems()


def tf_dataset_parses(service: LiveService, root: str, opts: dict[str, Any], tf: Any) -> None:
    """Records written by the writer come back through tf.data and parse with feature_spec()."""
    client = service.client(storage_options=opts)
    records = sample_examples(333)
    with client.writer("tfread", root=f"{root}/datasets", shard_size="8KB") as w:
        for rec in records:
            w.write(rec)
    v = client.resolve("tfread@latest")
    assert v.splits["train"].shard_count > 2
    got = [t.numpy() for t in v.tf_dataset("train", verify="fast", num_parallel_reads=4)]
    assert sorted(got) == sorted(records) and len(got) == len(records)
    again = [t.numpy() for t in v.tf_dataset("train", verify=None, num_parallel_reads=4)]
    assert again == got  # deterministic interleave
    serial = [t.numpy() for t in v.tf_dataset("train", verify="deep", num_parallel_reads=1)]
    assert serial == records  # one reader: exactly the written order
    batch = next(iter(v.tf_dataset("train", verify=None).batch(64)))
    parsed = tf.io.parse_example(batch, v.feature_spec())
    assert parsed["label"].shape[0] == 64
    assert sorted(parsed) == ["image", "label", "score"]


def cli_roundtrip(service: LiveService, root: str, opts: dict[str, Any]) -> None:
    """The CLI as a user runs it: publish with -o, resolve, show, ls, verify, diff, alias."""
    raw = f"{root}/raw/cli"
    for i in range(2):
        put_bytes(
            f"{raw}/train-{i:05d}-of-00002.tfrecord", frame(sample_examples(10, i * 10)), opts
        )
    runner = CliRunner()
    option_args: list[str] = []
    for key, value in opts.items():
        if isinstance(value, dict):
            for sub, subvalue in value.items():
                option_args += ["-o", f"{key}.{sub}={subvalue}"]
        else:
            option_args += ["-o", f"{key}={value}"]
    base = ["--url", service.url]

    def run(*args: str) -> Any:
        result = runner.invoke(app, [*base, *args])
        return result

    r = run("publish", raw, "--name", "clids", "--desc", "first", *option_args, "--json")
    assert r.exit_code == 0, r.output
    name = json.loads(r.stdout)["name"]
    r = run("resolve", "clids@latest")
    assert r.exit_code == 0 and r.stdout.startswith(name)
    r = run("show", "clids@latest")
    assert r.exit_code == 0 and "label" in r.stdout and "int64" in r.stdout
    r = run("ls", "--json")
    assert "clids" in [d["name"] for d in json.loads(r.stdout)]
    r = run("ls", "clids")
    assert name in r.stdout
    r = run("verify", "clids@latest", "--deep", *option_args, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["ok"] is True
    r = run("alias", "set", "clids", "prod", "clids@v1")
    assert r.exit_code == 0 and name in r.stdout
    r = run("alias", "ls", "clids", "--json")
    assert {a["alias"] for a in json.loads(r.stdout)} >= {"prod", "latest"}
    r = run("diff", "clids@prod", "clids@latest", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["same_content"] is True
    r = run("resolve", "clids@v7")
    assert r.exit_code == 3 and "[version_not_found]" in r.stderr and "Traceback" not in r.output
    r = run("resolve", "Bad Ref")
    assert r.exit_code == 1 and "[invalid_reference]" in r.stderr
    # Corrupt a shard: verify --deep exits 1 and names it.
    uri = f"{raw}/train-00001-of-00002.tfrecord"
    data = bytearray(get_bytes(uri, opts))
    data[100] ^= 1
    put_bytes(uri, bytes(data), opts)
    r = run("verify", "clids@latest", "--deep", *option_args)
    assert r.exit_code == 4 and "train-00001-of-00002" in r.stdout and "corrupt" in r.stdout
