"""Canonical manifest and content digest."""

from __future__ import annotations

import hashlib

from recordkeeper.core.manifest import ManifestEntry, canonical_manifest, content_digest

H = [hashlib.sha256(bytes([i])).hexdigest() for i in range(4)]


def entries() -> list[ManifestEntry]:
    return [
        ManifestEntry("train", 0, 2, H[0], 10),
        ManifestEntry("train", 1, 2, H[1], 11),
        ManifestEntry("validation", 0, 1, H[2], 5),
    ]


def test_digest_ignores_input_order_but_not_shard_order() -> None:
    base = content_digest(entries())
    assert base.startswith("sha256:") and len(base) == 7 + 64
    assert content_digest(list(reversed(entries()))) == base
    swapped = entries()
    swapped[0], swapped[1] = (
        ManifestEntry("train", 0, 2, H[1], 11),
        ManifestEntry("train", 1, 2, H[0], 10),
    )
    assert content_digest(swapped) != base


def test_digest_changes_with_content_counts_and_split_names() -> None:
    base = content_digest(entries())
    changed = entries()
    changed[2] = ManifestEntry("validation", 0, 1, H[3], 5)
    assert content_digest(changed) != base
    recount = entries()
    recount[2] = ManifestEntry("validation", 0, 1, H[2], 6)
    assert content_digest(recount) != base
    renamed = entries()
    renamed[2] = ManifestEntry("test", 0, 1, H[2], 5)
    assert content_digest(renamed) != base


def test_canonical_form_is_documented_shape() -> None:
    body = canonical_manifest([ManifestEntry("train", 0, 1, H[0], 3)])
    assert body == (b'{"format":"rk-manifest-1","splits":{"train":[["' + H[0].encode() + b'",3]]}}')


def test_mapping_input() -> None:
    by_split = {"train": entries()[:2], "validation": entries()[2:]}
    assert content_digest(by_split) == content_digest(entries())
