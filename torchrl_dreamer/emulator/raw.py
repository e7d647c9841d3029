"""Array loads and stores without Warp's negative-index wrap, for the kernel's hottest accesses.

Warp's ``a[k]`` accepts negative indices (``k += shape`` when ``k < 0``), which costs a shape load
and three integer operations on every access, on the dependency chain from the program counter
to the dispatch jump when the access is the opcode fetch. The bus never forms a negative index,
so the in-place paths of :mod:`.bus` (opcode and operand fetches from ROM, WRAM and HRAM reads and
writes) and the idle loop pre-filter use these native snippets instead: the same address
arithmetic (byte strides, so the address-major CUDA layout works unchanged) without the wrap.
Why: ``docs/decisions/kernel_shape.md``, "Unchecked array loads".

Bounds are not checked, exactly like Warp's own release-mode indexing: callers pass in-range,
non-negative indices.

Why our own: Warp has no unchecked indexing; ``wp.func_native`` snippets are its documented escape
hatch and compile for both the CPU and CUDA devices.

Example:
    >>> import numpy as np, warp as wp
    >>> @wp.kernel
    ... def first_and_set(rom: wp.array(dtype=wp.uint8), ram: wp.array2d(dtype=wp.uint8),
    ...                   out: wp.array(dtype=int)):
    ...     i = wp.tid()
    ...     out[i] = rom_at(rom, 2) + u8_at(ram, i, 1)
    ...     u8_set(ram, i, 0, 0x1FF)
    ...     u8_copy(ram, i, 2, ram, 0, 2)
    >>> rom = wp.array(np.array([5, 6, 7], dtype=np.uint8), device="cpu")
    >>> ram = wp.array(np.array([[0, 10, 0, 0], [0, 20, 0, 0]], dtype=np.uint8), device="cpu")
    >>> out = wp.zeros(2, dtype=int, device="cpu")
    >>> wp.launch(first_and_set, 2, inputs=[rom, ram, out], device="cpu")
    >>> out.numpy().tolist(), ram.numpy().tolist()
    ([17, 27], [[255, 10, 255, 10], [255, 20, 255, 20]])
"""

from __future__ import annotations

import warp as wp

__all__ = ["rom_at", "u8_at", "u8_copy", "u8_set"]

_AT2 = "((char*)a.data + (long long)i * a.strides[0] + (long long)j * a.strides[1])"


@wp.func_native("return (wp::int32)a.data[k];")
def rom_at(a: wp.array(dtype=wp.uint8), k: int) -> int:
    """``int(a[k])`` of a contiguous 1-D byte array (the ROM, the loop-head table), ``k >= 0``."""
    ...


@wp.func_native(f"return (wp::int32)*(const wp::uint8*){_AT2};")
def u8_at(a: wp.array2d(dtype=wp.uint8), i: int, j: int) -> int:
    """``int(a[i, j])`` of a 2-D byte array (any strides), ``i, j >= 0``."""
    ...


@wp.func_native(f"*(wp::uint8*){_AT2} = (wp::uint8)v;")
def u8_set(a: wp.array2d(dtype=wp.uint8), i: int, j: int, v: int):
    """``a[i, j] = v & 0xFF`` on a 2-D byte array (any strides), ``i, j >= 0``."""
    ...


@wp.func_native(
    "const long long ds = dst.strides[1], ss = src.strides[1];\n"
    "char* d = (char*)dst.data + (long long)i * dst.strides[0] + (long long)dj * ds;\n"
    "const char* s = (const char*)src.data + (long long)i * src.strides[0]"
    " + (long long)sj * ss;\n"
    "for (int k = 0; k < n; ++k) d[k * ds] = s[k * ss];"
)
def u8_copy(dst: wp.array2d(dtype=wp.uint8), i: int, dj: int, src: wp.array2d(dtype=wp.uint8),
            sj: int, n: int):
    """``dst[i, dj:dj+n] = src[i, sj:sj+n]`` for one console's rows of two 2-D byte arrays (any
    strides; the ranges must not overlap), ``i, dj, sj >= 0``.

    Why native: a byte store may alias anything, so a loop of :func:`u8_set` reloads both
    arrays' data pointers and strides after every byte (a 160-byte OAM DMA cost about 20 host
    instructions a byte); here they are read once."""
    ...
