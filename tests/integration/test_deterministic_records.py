"""Issue 21, 6b: the same ``tf.train.Example`` data has the same content digest in every process.

An Example's ``features.feature`` is a protobuf map; its default serialization order changes from
one process to the next, so identical data written by two training jobs made two versions
instead of a ``DuplicateWarning``.  Each run here is a fresh Python process (another
``PYTHONHASHSEED``, another protobuf map seed) writing the same Examples through ``client.writer``
to the live service over its socket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.integration.conftest import LiveService

pytestmark = [pytest.mark.tf]

WRITE = r"""
import json, sys, warnings
import recordkeeper as rk
from tensorflow.core.example import example_pb2

def example(i):
    ex = example_pb2.Example()
    for f in range(24):  # enough map entries that two insertion orders rarely agree
        ex.features.feature[f"feature_{f}"].int64_list.value.append(i * 100 + f)
    return ex

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with rk.Client(sys.argv[1]).writer("same_data", desc=sys.argv[2]) as w:
        for i in range(8):
            w.write(example(i), split="train")
print(json.dumps({
    "name": w.version.name,
    "digest": w.version.content_digest,
    "duplicate": any(issubclass(c.category, rk.DuplicateWarning) for c in caught),
}))
"""


def test_identical_examples_have_one_digest_across_processes(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path
) -> None:
    script = tmp_path / "write.py"
    script.write_text(WRITE)
    runs = []
    for seed in ("0", "1"):  # each process imports TensorFlow: two are enough to differ
        env = {**os.environ, "PYTHONHASHSEED": seed, "TF_CPP_MIN_LOG_LEVEL": "2"}
        done = subprocess.run(
            [sys.executable, str(script), live_service.url, f"seed_{seed}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert len({run["digest"] for run in runs}) == 1, runs
    assert [run["duplicate"] for run in runs] == [False, True], runs
    assert len({run["name"] for run in runs}) == 1, runs  # the first version is kept


def test_bytes_are_hashed_as_given(tensorflow: ModuleType) -> None:
    """A record given as bytes is never re-encoded; a message is serialized deterministically."""
    from tensorflow.core.example import example_pb2

    from recordkeeper.tfrecord import record_bytes

    example = example_pb2.Example()
    for f in range(24):
        example.features.feature[f"feature_{f}"].int64_list.value.append(f)
    canonical = example.SerializeToString(deterministic=True)
    assert record_bytes(example) == canonical
    own = example.SerializeToString()
    assert record_bytes(own) == own  # whatever order the caller's bytes have
