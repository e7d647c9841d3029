"""``Mem``: every per-console array the kernel touches, bundled in one Warp struct.

Helpers take ``(i, m)``: the console index (the Warp thread id) and this struct. ``st`` is the
int32 state table (columns in :mod:`~torchrl_dreamer.emulator.layout`); the uint8 arrays are
indexed ``[env, offset]`` (on CUDA they are address-major storage viewed transposed, so the
indexing is the same); ``rom`` and ``boot`` are shared by all consoles. ``cgbx`` and ``rgb``
hold the Game Boy Color's extra memory and colour frame (a 1-element row on a DMG).
"""

from __future__ import annotations

import warp as wp

__all__ = ["Mem"]


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
