"""The fault table of docs/reliability.md: store x operation x fault -> outcome, time, data.

    PYTHONPATH=client:service:. .venv/bin/python bench/fault_table.py [--stores s3,gcs]
        [--operations "deep verify,tf_dataset"] [--faults "503 always,flip once"]

Starts SeaweedFS (S3) and fake-gcs-server (GCS) with the test fixtures' code
(``tests/servers``), a recordkeeper service on SQLite on a free loopback port, and one
:class:`tests.servers.faults.FaultProxy` in front of each store.  Each cell runs one public
operation with ``storage_options`` pointing at the proxy and one fault rule on the requests it
makes, then checks the data through the clean endpoint:

* ``ok`` cells: the writer's version deep-verifies with every record; publish registered the
  hashes of the stored bytes; verify reports ``ok`` (the data is intact: any problem reported
  is wrong); ``tf_dataset`` yields exactly the records written;
* failed cells: the error is typed (a ``RecordkeeperError``; the reason is shown), nothing was
  committed (writer, publish), and intact data was not called corrupt (verify, ``tf_dataset``).

"time" is wall time from the operation's start to its outcome.  Prints a Markdown table.
Every loop is bounded: one run per cell, the proxy caps delays at 5 s, the retry policy bounds
each request.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import recordkeeper as rk
from tests.client._records import sample_examples
from tests.integration import _scenarios as sc
from tests.integration.conftest import start_live_service
from tests.servers.faults import FaultProxy

#: fault label -> (proxy fault, times it fires; None: every matching request)
FAULTS: dict[str, tuple[str, int | None]] = {
    "503 once": ("503", 1),
    "503 always": ("503", None),
    "reset x2": ("reset", 2),
    "truncate x2": ("truncate", 2),
    "flip once": ("flip", 1),
    "slow x2": ("slow", 2),
}
OPERATIONS = ("writer", "publish", "fast verify", "deep verify", "tf_dataset")
#: which requests each operation's fault hits: store -> operation -> (method, path regex)
TARGETS: dict[str, dict[str, tuple[str | None, str]]] = {
    "s3": {
        "writer": ("PUT", r"/_incomplete/"),
        "publish": (None, r"/raw/"),
        "fast verify": ("HEAD", r"/raw/"),
        "deep verify": ("GET", r"/raw/"),
        "tf_dataset": ("GET", r"/raw/"),
    },
    "gcs": {
        "writer": ("POST", r"^/upload/"),
        "publish": ("GET", r"raw"),
        "fast verify": ("GET", r"raw"),
        "deep verify": ("GET", r"raw.*alt=media"),
        "tf_dataset": ("GET", r"raw.*alt=media"),
    },
}


class Store:
    def __init__(self, kind: str, bucket: str, clean: dict[str, Any], proxy: FaultProxy) -> None:
        self.kind, self.bucket, self.clean, self.proxy = kind, bucket, clean, proxy
        if kind == "s3":
            self.faulty = {
                **clean,
                "client_kwargs": {**clean["client_kwargs"], "endpoint_url": proxy.endpoint_url},
            }
        else:
            self.faulty = {**clean, "endpoint_url": proxy.endpoint_url}


def _outcome(exc: BaseException) -> str:
    reason = getattr(exc, "extra", {}).get("reason")
    return f"{type(exc).__name__}({reason})" if reason else type(exc).__name__


def _cell(
    store: Store, client: rk.Client, operation: str, fault: str, times: int | None, n: int
) -> tuple[str, float, str]:
    """(outcome, seconds, data correct) of one cell; ``n`` makes names unique."""
    method, path = TARGETS[store.kind][operation]
    records = sample_examples(40)
    version = None
    if operation not in ("writer", "publish"):
        raw = f"{store.bucket}/raw/c{n}"
        sc.make_raw_dataset(raw, store.clean, shards=2, per_shard=20)
        version = client.publish(
            rk.Dataset.from_directory(raw, name=f"c{n}", storage_options=store.clean),
            progress=False,
        ).with_storage_options(store.faulty)
    elif operation == "publish":
        raw = f"{store.bucket}/raw/p{n}"
        sc.make_raw_dataset(raw, store.clean, shards=2, per_shard=20)
    store.proxy.clear()
    rule = store.proxy.inject(fault, method=method, path=path, times=times, delay=0.5)
    started = time.monotonic()
    result: Any = None
    error: BaseException | None = None
    try:
        if operation == "writer":
            with client.writer(
                f"w{n}",
                root=f"{store.bucket}/datasets",
                shard_size="4KB",
                storage_options=store.faulty,
            ) as w:
                for rec in records:
                    w.write(rec)
            result = w.version
        elif operation == "publish":
            result = client.publish(
                rk.Dataset.from_directory(raw, name=f"p{n}", storage_options=store.faulty),
                progress=False,
            )
        elif operation in ("fast verify", "deep verify"):
            assert version is not None
            result = version.verify(deep=operation == "deep verify")
        else:
            assert version is not None
            import recordkeeper.tf

            with recordkeeper.tf.typed_errors():  # TensorFlow's errors as recordkeeper's
                result = sorted(version.tf_dataset("train").as_numpy_iterator())
    except Exception as exc:
        error = exc
    seconds = time.monotonic() - started
    store.proxy.clear()
    fired = "" if rule.fired else " (fault never fired)"
    if error is not None:
        typed = isinstance(error, rk.RecordkeeperError)
        correct = typed and not isinstance(error, rk.CorruptShard)
        if operation in ("writer", "publish"):
            name = f"w{n}" if operation == "writer" else f"p{n}"
            try:
                client.resolve(f"{name}@latest")
                correct = False  # committed although the operation failed
            except rk.NotFound:
                pass
        detail = "yes (nothing committed)" if operation in ("writer", "publish") else "yes"
        return _outcome(error) + fired, seconds, detail if correct else "**no**"
    if operation == "writer":
        clean = result.with_storage_options(store.clean)
        good = clean.record_count == len(records) and clean.verify(deep=True).ok
    elif operation == "publish":
        good = all(
            s.sha256 == hashlib.sha256(sc.get_bytes(s.uri, store.clean)).hexdigest()
            for split in result.splits.values()
            for s in split.shards
        )
    elif operation in ("fast verify", "deep verify"):
        good = result.ok
    else:
        good = result == sorted(sample_examples(20) + sample_examples(20, 20))
    outcome = "ok" if operation not in ("fast verify", "deep verify") or good else "problems"
    return outcome + fired, seconds, "yes" if good else "**no**"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="s3,gcs")
    parser.add_argument("--operations", default=",".join(OPERATIONS))
    parser.add_argument("--faults", default=",".join(FAULTS), help="labels, comma-separated")
    args = parser.parse_args()
    import tensorflow  # noqa: F401  (loaded once, before the timed cells)

    from tests.servers.gcs import start_gcs_server
    from tests.servers.s3 import start_s3_server

    rows: list[str] = []
    stops: list[Callable[[], None]] = []
    try:
        for kind in args.stores.split(","):
            if kind == "s3":
                server: Any = start_s3_server()
                bucket = server.make_bucket()
            else:
                server = start_gcs_server()
                os.environ.update(server.env)
                bucket = server.make_bucket()
            stops.append(server.stop)
            proxy = FaultProxy(server.endpoint_url, kind)
            stops.append(proxy.stop)
            store = Store(kind, bucket, dict(server.storage_options), proxy)
            database = tempfile.mkdtemp(prefix="rk-faults-")
            service = start_live_service(
                storage_root=f"{bucket}/datasets",
                allowed_roots=[bucket],
                database_url=f"sqlite:///{database}/rk.sqlite",
            )
            stops.append(service.stop)
            client = service.client(storage_options=store.clean)
            n = 0
            for operation in args.operations.split(","):
                for label in args.faults.split(","):
                    fault, times = FAULTS[label]
                    n += 1
                    outcome, seconds, correct = _cell(store, client, operation, fault, times, n)
                    row = f"| {kind} | {operation} | {label} | {outcome} | {seconds:.1f} s "
                    row += f"| {correct} |"
                    rows.append(row)
                    print(row, file=sys.stderr, flush=True)
    finally:
        for stop in reversed(stops):
            try:
                stop()
            except Exception as exc:  # report, go on stopping the others
                print(f"stopping: {exc}", file=sys.stderr)
    print("| store | operation | fault | outcome | time to outcome | data correct |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
