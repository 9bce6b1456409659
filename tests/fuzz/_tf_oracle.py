"""TensorFlow as the fuzz oracle, in its own process (it can crash on hostile files).

Reads one JSON request per line on stdin, ``{"path": ..., "compression": "none|gzip|zlib"}``,
and answers one JSON line: the sha256 of every record ``tf.data.TFRecordDataset`` yielded, in
order, and the class of the error that stopped it (None when the file read to its end).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf

TF_COMPRESSION = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}


def read(path: str, compression: str) -> dict[str, object]:
    digests: list[str] = []
    error = None
    try:
        dataset = tf.data.TFRecordDataset(path, compression_type=TF_COMPRESSION[compression])
        for tensor in dataset:
            digests.append(hashlib.sha256(tensor.numpy()).hexdigest())
    except tf.errors.OpError as exc:
        error = type(exc).__name__
    return {"records": digests, "error": error}


def main() -> None:
    print(json.dumps({"ready": tf.__version__}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(read(request["path"], request["compression"])), flush=True)


if __name__ == "__main__":
    main()
