"""``Mem``: every per-console array the kernel touches, bundled in one Warp struct.

Helpers take ``(i, m)``: the console index (the Warp thread id) and this struct. ``st`` is the
int32 state table (columns in :mod:`~torchrl_dreamer.emulator.layout`); the uint8 arrays are
indexed ``[env, offset]`` (on CUDA they are address-major storage viewed transposed, so the
indexing is the same); ``rom`` and ``boot`` are shared by all consoles. ``cgbx`` and ``rgb``
hold the Game Boy Color's extra memory and colour frame (a 1-element row on a DMG).
"""

from __future__ import annotations

import warp as wp

__all__ = ["Mem", "console"]


@wp.struct
class Mem:
    """Per-console state arrays (see the module docstring)."""

    st: wp.array2d(dtype=wp.int32)
    vram: wp.array2d(dtype=wp.uint8)
    oam: wp.array2d(dtype=wp.uint8)
    wram: wp.array2d(dtype=wp.uint8)
    hram: wp.array2d(dtype=wp.uint8)
    cram: wp.array2d(dtype=wp.uint8)
    ser: wp.array2d(dtype=wp.uint8)
    rom: wp.array(dtype=wp.uint8)
    boot: wp.array(dtype=wp.uint8)
    fb: wp.array3d(dtype=wp.uint8)
    obs: wp.array4d(dtype=wp.uint8)
    cgbx: wp.array2d(dtype=wp.uint8)  # the Color's extra memory (layout.CGBX_*); DMG: [N, 1]
    rgb: wp.array3d(dtype=wp.int16)  # Color frame, RGB555 per pixel; DMG: [N, 1, 1]


@wp.func
def console(i: int) -> int:
    """The console index ``i`` (never negative) in a form the C++ compiler can see is not.

    Warp's ``a[i, j]`` also takes negative indices: each access adds ``a.shape[0]`` when
    ``i < 0``, a shape load and three integer operations, and the compiler keeps that test
    unless it can prove ``i >= 0``, which it cannot for a function's parameter. So every
    ``@wp.func`` taking ``(i, m)`` starts with ``i = console(i)`` and every kernel takes
    ``i = console(wp.tid())``: one AND, after which the test goes from each ``m.<array>[i, ...]``
    of that function and of the code inlined into it (where ``i`` is already known not to be
    negative, the AND goes too). Why: ``docs/decisions/kernel_shape.md``, "The console index
    the compiler can see".

    Example:
        >>> import numpy as np, warp as wp
        >>> @wp.kernel
        ... def double(a: wp.array2d(dtype=int)):
        ...     i = console(wp.tid())
        ...     a[i, 0] = 2 * a[i, 0]
        >>> a = wp.array(np.array([[1], [5]]), dtype=int, device="cpu")
        >>> wp.launch(double, 2, inputs=[a], device="cpu")
        >>> a.numpy()[:, 0].tolist()
        [2, 10]
    """
    return i & 0x7FFFFFFF
