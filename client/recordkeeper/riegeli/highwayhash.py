"""HighwayHash-64, the checksum of Riegeli block headers, chunk headers and chunk data.

HighwayHash (github.com/google/highwayhash) is a keyed hash over 32-byte packets: four 64-bit
lanes of state ``v0``, ``v1``, ``mul0``, ``mul1``, updated with 32x32-bit multiplications and
a byte permutation ("zipper merge"); a last partial packet is padded in a fixed way, and four
permute-and-update rounds finish a 64-bit result.  Riegeli hashes with the key
``'Riegeli/' 'records\\n' 'Riegeli/' 'records\\n'`` (:data:`RIEGELI_KEY`).

:func:`highwayhash64` uses the C extension (``recordkeeper._speedups.highwayhash64``: about
1.3 GB/s in portable code, ~13 GB/s with AVX2, chosen at run time) when it is built and not
switched off (see :mod:`recordkeeper._native`); the Python
code here is the reference and the fallback (a few MB/s: fine for headers, slow for data).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from recordkeeper import _native

__all__ = ["RIEGELI_KEY", "highwayhash64", "highwayhash64_python", "riegeli_hasher"]

_M64 = (1 << 64) - 1
_M32 = 0xFFFFFFFF
#: Riegeli's key, as four little-endian 64-bit words ('Riegeli/', 'records\n', twice).
RIEGELI_KEY: tuple[int, int, int, int] = (
    0x2F696C6567656952,
    0x0A7364726F636572,
    0x2F696C6567656952,
    0x0A7364726F636572,
)
_KEY_BYTES = struct.pack("<4Q", *RIEGELI_KEY)
_INIT_MUL0 = (0xDBE6D5D5FE4CCE2F, 0xA4093822299F31D0, 0x13198A2E03707344, 0x243F6A8885A308D3)
_INIT_MUL1 = (0x3BD39E10CB0EF593, 0xC0ACF169B5F18A8C, 0xBE5466CF34E90C6C, 0x452821E638D01377)
# The zipper merge of a lane pair read as 16 little-endian bytes (low lane first): the bytes
# that make up the 8-byte addend of the low lane, then those of the high lane.
_ZIPPER = (3, 12, 2, 5, 14, 1, 15, 0, 11, 4, 10, 13, 9, 6, 8, 7)
_LANES = struct.Struct("<4Q")
_PAIR = struct.Struct("<2Q")


def _swap_halves(x: int) -> int:
    return ((x >> 32) | (x << 32)) & _M64


def _rotate_halves(x: int, count: int) -> int:
    lo, hi = x & _M32, x >> 32
    lo = ((lo << count) | (lo >> (32 - count))) & _M32
    hi = ((hi << count) | (hi >> (32 - count))) & _M32
    return lo | (hi << 32)


class _State:
    __slots__ = ("mul0", "mul1", "v0", "v1")

    def __init__(self, key: tuple[int, int, int, int]) -> None:
        self.mul0 = list(_INIT_MUL0)
        self.mul1 = list(_INIT_MUL1)
        self.v0 = [m ^ k for m, k in zip(_INIT_MUL0, key, strict=True)]
        self.v1 = [m ^ _swap_halves(k) for m, k in zip(_INIT_MUL1, key, strict=True)]

    def update(self, lanes: tuple[int, ...] | list[int]) -> None:
        v0, v1, mul0, mul1 = self.v0, self.v1, self.mul0, self.mul1
        for i in range(4):
            v1[i] = (v1[i] + mul0[i] + lanes[i]) & _M64
            mul0[i] ^= (v1[i] & _M32) * (v0[i] >> 32)
            v0[i] = (v0[i] + mul1[i]) & _M64
            mul1[i] ^= (v0[i] & _M32) * (v1[i] >> 32)
        self._merge_into(v0, v1)
        self._merge_into(v1, v0)

    @staticmethod
    def _merge_into(dst: list[int], src: list[int]) -> None:
        for lo in (0, 2):
            pair = _PAIR.pack(src[lo], src[lo + 1])
            add_lo, add_hi = _PAIR.unpack(bytes(pair[i] for i in _ZIPPER))
            dst[lo] = (dst[lo] + add_lo) & _M64
            dst[lo + 1] = (dst[lo + 1] + add_hi) & _M64

    def update_remainder(self, rest: bytes) -> None:
        size = len(rest)  # 1..31
        for i in range(4):
            self.v0[i] = (self.v0[i] + (size << 32) + size) & _M64
        self.v1 = [_rotate_halves(x, size) for x in self.v1]
        whole = size & ~3
        packet = bytearray(32)
        packet[:whole] = rest[:whole]
        tail = size & 3
        if size & 16:
            packet[28:32] = rest[size - 4 : size]
        elif tail:
            packet[16] = rest[whole]
            packet[17] = rest[whole + (tail >> 1)]
            packet[18] = rest[whole + tail - 1]
        self.update(_LANES.unpack(packet))

    def finish64(self) -> int:
        for _ in range(4):
            v0 = self.v0
            self.update(
                [_swap_halves(v0[2]), _swap_halves(v0[3]), _swap_halves(v0[0]), _swap_halves(v0[1])]
            )
        return (self.v0[0] + self.v1[0] + self.mul0[0] + self.mul1[0]) & _M64


def highwayhash64_python(
    data: bytes | bytearray | memoryview, key: tuple[int, int, int, int] = RIEGELI_KEY
) -> int:
    """HighwayHash-64 of ``data`` in pure Python (the reference for the C version)."""
    view = memoryview(data).cast("B")
    state = _State(key)
    end = len(view) & ~31
    unpack = _LANES.unpack_from
    for pos in range(0, end, 32):
        state.update(unpack(view, pos))
    if len(view) & 31:
        state.update_remainder(bytes(view[end:]))
    return state.finish64()


def highwayhash64(
    data: bytes | bytearray | memoryview, key: tuple[int, int, int, int] = RIEGELI_KEY
) -> int:
    """HighwayHash-64 of ``data`` with ``key`` (by default Riegeli's), as an unsigned int."""
    speedups = _native.speedups
    native = None if speedups is None else getattr(speedups, "highwayhash64", None)
    if native is not None:
        return int(native(data, _KEY_BYTES if key == RIEGELI_KEY else struct.pack("<4Q", *key)))
    return highwayhash64_python(data, key)


def riegeli_hasher() -> Callable[[bytes | bytearray | memoryview], int]:
    """:func:`highwayhash64` with Riegeli's key as a one-argument function, the implementation
    chosen once (for loops that hash every header)."""
    speedups = _native.speedups
    native = None if speedups is None else getattr(speedups, "highwayhash64", None)
    if native is not None:
        return _bound(native)
    return highwayhash64_python


Buffer = bytes | bytearray | memoryview


def _bound(native: Callable[[Buffer, bytes], int]) -> Callable[[Buffer], int]:
    def riegeli_hash(data: Buffer) -> int:
        return native(data, _KEY_BYTES)

    return riegeli_hash
