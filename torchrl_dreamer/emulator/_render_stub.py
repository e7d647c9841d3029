"""Fallback renderer hooks with the contract's signatures, used only if ``render.py`` is absent.

The real renderer lives in :mod:`torchrl_dreamer.emulator.render` (another module's owner); this
stub keeps the emulator core buildable without it: lines come out blank (shade 0).
"""

from __future__ import annotations

import warp as wp


@wp.func
def render_scanline(
    i: int,
    ly: int,
    vram: wp.array2d(dtype=wp.uint8),
    oam: wp.array2d(dtype=wp.uint8),
    lcdc: int,
    scx: int,
    scy: int,
    wx: int,
    wy: int,
    bgp: int,
    obp0: int,
    obp1: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
) -> int:
    """Blank line ``ly`` of env ``i``; return the window line counter unchanged."""
    for x in range(160):
        fb[i, ly, x] = wp.uint8(0)
    return win_line


@wp.func
def pack_line_packed2(
    i: int, ly: int, fb: wp.array3d(dtype=wp.uint8), obs: wp.array4d(dtype=wp.uint8)
):
    """For even ``ly``: pack ``fb[i, ly, 0:160:2]`` into ``obs[i, 0, ly // 2, 0:20]``."""
    if (ly & 1) == 0:
        for b in range(20):
            v = int(0)  # noqa: UP018 - Warp needs a typed, mutable local
            for k in range(4):
                v = v | ((int(fb[i, ly, b * 8 + k * 2]) & 3) << (k * 2))
            obs[i, 0, ly // 2, b] = wp.uint8(v)
