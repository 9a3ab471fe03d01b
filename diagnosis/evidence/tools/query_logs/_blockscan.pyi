"""Types of the C module ``_blockscan.c`` (the byte-level half of the counting scan)."""

from collections.abc import Sequence

from numpy.typing import NDArray

ABI_VERSION: int
FLAG_CONTROL: int
FLAG_BACKSLASH: int
FLAG_SHORT: int
FLAG_LATER_TS: int
FLAG_HEX: int
FLAG_LEADING_ZERO: int
FLAG_LAYOUT: int
FLAG_STAMP: int
FLAG_ESCAPED: int

def block_index(
    buf: bytes | bytearray, layouts: Sequence[tuple[bytes, bytes, bytes, bytes]], /
) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]: ...
def line_keys(
    buf: bytes | bytearray, quotes: NDArray, ends: NDArray, rows: NDArray, /
) -> tuple[list[bytes], bytes, bytes]: ...
def plain_index(buf: bytes | bytearray, /) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]: ...
def plain_keys(
    buf: bytes | bytearray, rest: NDArray, ends: NDArray, rows: NDArray, /
) -> tuple[list[bytes], bytes, bytes]: ...
