"""Apache Beam transforms (extra ``beam``): write, publish, verify and read versions in a job.

* :class:`WriteVersionedTFRecords` — records → a new version, committed once after all writes.
* :class:`PublishExisting` — existing TFRecord files scanned by workers, published.
* :class:`VerifyVersion` — a version's shards verified by workers; one report.
* :class:`ReadVersion` — the records of a pinned, verified version.

Workers reach the service and the store through a :class:`ServiceConfig` (URL, token,
``storage_options``), see docs/beam.md.  Importing this package imports ``apache_beam``;
``import recordkeeper`` does not.
"""

from recordkeeper.beam._service import ServiceConfig
from recordkeeper.beam.publish import PublishExisting
from recordkeeper.beam.read import ReadVersion
from recordkeeper.beam.verify import VerifyVersion
from recordkeeper.beam.write import WriteVersionedTFRecords, WrittenShard

__all__ = [
    "PublishExisting",
    "ReadVersion",
    "ServiceConfig",
    "VerifyVersion",
    "WriteVersionedTFRecords",
    "WrittenShard",
]
