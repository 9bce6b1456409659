"""Writing TFRecords: recordkeeper's TFRecordWriter against tf.io.TFRecordWriter.

    .venv/bin/python bench/bench_writer.py [--records 200000] [--repeat 5]
                                           [--compression none] [--shape varied]

The records (~1 KiB tf.train.Example: a JPEG-sized bytes feature of varying length, a format
string, height/width, 0-4 boxes with labels, a 16-float embedding) are serialized once, up
front.  ``--shape uniform`` gives every record the same layout instead (fixed image size, two
boxes): the best case for schema inference, which recognises repeated layouts.

Each repetition writes the same records to a fresh file on local disk, alternating the two
writers: TensorFlow's (framing only), and recordkeeper's with everything on (sha256 and CRC32C
of the stored bytes, sha256 of the record stream, schema inference).  Prints the median times
and their ratio; recordkeeper without schema inference is shown for reference.  Every
recordkeeper run starts with no learnt record layouts (see forget_layouts).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def make_records(
    n: int, seed: int = 0, image_size: tuple[int, int] = (700, 900), uniform: bool = False
) -> list[bytes]:
    """``n`` serialized tf.train.Example records (about 1 KiB by default), deterministic.

    ``uniform``: every record has the same layout (same lengths, same varint widths).
    """
    import tensorflow as tf

    rng = random.Random(seed)
    side = (128, 2000) if uniform else (100, 2000)  # uniform: always two-byte varints
    if uniform:
        image_size = (image_size[0], image_size[0])

    def feature(**kw: object) -> tf.train.Feature:
        return tf.train.Feature(**kw)

    records = []
    for _ in range(n):
        boxes = 2 if uniform else rng.randint(0, 4)
        features = {
            "image/encoded": feature(
                bytes_list=tf.train.BytesList(value=[rng.randbytes(rng.randint(*image_size))])
            ),
            "image/format": feature(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
            "image/height": feature(int64_list=tf.train.Int64List(value=[rng.randint(*side)])),
            "image/width": feature(int64_list=tf.train.Int64List(value=[rng.randint(*side)])),
            "label": feature(
                int64_list=tf.train.Int64List(value=[rng.randint(0, 90) for _ in range(boxes)])
            ),
            "bbox": feature(
                float_list=tf.train.FloatList(value=[rng.random() for _ in range(4 * boxes)])
            ),
            "embedding": feature(
                float_list=tf.train.FloatList(value=[rng.random() for _ in range(16)])
            ),
        }
        example = tf.train.Example(features=tf.train.Features(feature=features))
        records.append(example.SerializeToString())
    return records


def forget_layouts() -> None:
    """Start schema inference cold: learnt layouts are shared process-wide, so later
    repetitions would otherwise reuse what the first one learnt."""
    from recordkeeper import schema_inference

    schema_inference._LAYOUTS = schema_inference._LayoutStore()
    schema_inference._KEYED_SIGNATURES.clear()


def implementation() -> str:
    """Which record loops run: the C fast paths or the pure-Python reference code."""
    from recordkeeper import _native

    return "C (recordkeeper._speedups)" if _native.speedups else "pure Python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--compression", choices=["none", "gzip", "zlib"], default="none")
    parser.add_argument("--shape", choices=["varied", "uniform"], default="varied")
    args = parser.parse_args()

    import tensorflow as tf

    from recordkeeper.tfrecord import TFRecordWriter

    records = make_records(args.records, uniform=args.shape == "uniform")
    gc.collect()  # the garbage of building the records is the benchmark's, not a writer's
    size = sum(map(len, records))
    print(
        f"{len(records)} records ({args.shape} layouts), {size / len(records):.0f} bytes "
        f"each on average, compression {args.compression}"
    )
    print(f"fast paths: {implementation()}")
    tf_options = "" if args.compression == "none" else args.compression.upper()

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "shard.tfrecord")

        def tf_writer() -> None:
            with tf.io.TFRecordWriter(path, options=tf_options) as writer:
                for record in records:
                    writer.write(record)

        def rk_writer(infer_schema: bool = True) -> None:
            forget_layouts()
            with TFRecordWriter(
                path, compression=args.compression, infer_schema=infer_schema
            ) as writer:
                for record in records:
                    writer.write(record)

        def rk_no_schema() -> None:
            rk_writer(infer_schema=False)

        runs: dict[str, list[float]] = {}
        contenders: list[tuple[str, Callable[[], None]]] = [
            ("tf.io.TFRecordWriter", tf_writer),
            ("recordkeeper (hashes + schema)", rk_writer),
            ("recordkeeper (hashes, no schema)", rk_no_schema),
        ]
        for _ in range(args.repeat):
            for name, run in contenders:
                os.sync()
                start = time.perf_counter()
                run()
                runs.setdefault(name, []).append(time.perf_counter() - start)
                os.remove(path)

    medians = {name: statistics.median(times) for name, times in runs.items()}
    for name, median in medians.items():
        print(
            f"{name:34s} median {median:6.3f} s  ({len(records) / median / 1e3:6.0f}k records/s)"
            f"  runs: {' '.join(f'{t:.3f}' for t in runs[name])}"
        )
    base = medians["tf.io.TFRecordWriter"]
    print(
        f"ratio recordkeeper/tf: {medians['recordkeeper (hashes + schema)'] / base:.2f} "
        f"(no schema: {medians['recordkeeper (hashes, no schema)'] / base:.2f})"
    )


if __name__ == "__main__":
    main()
