"""What people read: sizes in binary units, counts with their noun in the right number."""

from __future__ import annotations

from recordkeeper.core.display import binary_size, counted


def test_a_count_takes_its_noun_in_the_right_number() -> None:
    """``publish``, ``verify``, ``pull`` and ``which-checkpoints`` printed ``1 shards`` and
    ``1 copies``."""
    assert [counted(n, "shard") for n in (0, 1, 2)] == ["0 shards", "1 shard", "2 shards"]
    assert counted(1, "copy", "copies") == "1 copy"
    assert counted(3, "copy", "copies") == "3 copies"


def test_sizes_are_binary() -> None:
    assert (binary_size(512), binary_size(1536)) == ("512 B", "1.5 KiB")
