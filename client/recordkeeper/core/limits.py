"""Text and number limits that client and service must agree on.

Integers the service stores are 64-bit signed (PostgreSQL ``BIGINT``, orjson's range), so every
count, size, step and id is bounded by :data:`MAX_INT64`.
"""

from __future__ import annotations

__all__ = [
    "MAX_CHECKPOINT_NAME_LENGTH",
    "MAX_DATASET_NAME_LENGTH",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_DESC_LENGTH",
    "MAX_INT64",
    "MAX_JSON_OBJECT_BYTES",
    "MAX_MODEL_NAME_LENGTH",
    "MAX_REASON_LENGTH",
    "MAX_SHARDS_PER_REQUEST",
    "MAX_SHARD_COUNT",
    "MAX_URI_LENGTH",
    "MIN_INT64",
]

#: Bounds of a 64-bit signed integer (sizes, record counts, steps, ids).
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
#: Dataset names (``coco``) and version descriptions (``add_person``).
MAX_DATASET_NAME_LENGTH = 64
MAX_DESC_LENGTH = 80
#: Model (``coco_detection``) and checkpoint (``ckpt-1234``) names.
MAX_MODEL_NAME_LENGTH = 128
MAX_CHECKPOINT_NAME_LENGTH = 128
#: A dataset's free-text description, and the reason given when deprecating a version.
MAX_DESCRIPTION_LENGTH = 4000
MAX_REASON_LENGTH = 2000
#: Storage URIs, in UTF-8 bytes.
MAX_URI_LENGTH = 2048
#: Shards in one registration request; clients send more in several requests.
MAX_SHARDS_PER_REQUEST = 10_000
#: Upper bound of a split's shard count (``count``), far above any real dataset.
MAX_SHARD_COUNT = 10_000_000
#: Free-form JSON objects (version ``metadata``, checkpoint ``metrics``), as compact UTF-8 JSON.
#: Every listing answers them, so they stay small: data belongs in shards, not metadata.
MAX_JSON_OBJECT_BYTES = 64 * 1024
