"""PPU micro test ROM builders and the pure-numpy DMG reference renderer used to check them.

The reference renderer is written pixel by pixel straight from the Pan Docs rules (no code shared
with the Warp renderer in ``torchrl_dreamer/emulator/render.py``), so the two check each other;
it also computes the expected frame of every micro test ROM built here.
"""

from __future__ import annotations

import numpy as np

W, H = 160, 144


def encode_tile(pixels) -> bytes:
    """2bpp bytes of a tile given as rows of colour indices (8 wide, 8 or 16 rows)."""
    out = bytearray()
    for row in pixels:
        lo = hi = 0
        for x, c in enumerate(row):
            lo |= (c & 1) << (7 - x)
            hi |= ((c >> 1) & 1) << (7 - x)
        out += bytes((lo, hi))
    return bytes(out)


def put_tile(vram: np.ndarray, offset: int, pixels) -> None:
    """Write a tile's 2bpp bytes at VRAM offset ``offset`` (0 = 0x8000)."""
    data = encode_tile(pixels)
    vram[offset : offset + len(data)] = np.frombuffer(data, dtype=np.uint8)


def tile_color(vram: np.ndarray, addr: int, x: int, y: int) -> int:
    """Colour index of pixel (x, y) of the tile whose data starts at VRAM offset ``addr``."""
    lo = int(vram[addr + 2 * y])
    hi = int(vram[addr + 2 * y + 1])
    return ((lo >> (7 - x)) & 1) | (((hi >> (7 - x)) & 1) << 1)


def bg_tile_addr(index: int, lcdc: int) -> int:
    """VRAM offset of BG/window tile ``index`` under LCDC.4 (8000 unsigned / 8800 signed)."""
    if lcdc & 0x10:
        return 0x0000 + 16 * index
    signed = index - 256 if index >= 128 else index
    return 0x1000 + 16 * signed


def map_color(vram: np.ndarray, map_base: int, lcdc: int, px: int, py: int) -> int:
    """Colour index at pixel (px, py) of the 256x256 tile map at ``map_base`` (0x1800/0x1C00)."""
    index = int(vram[map_base + (py // 8) * 32 + (px // 8)])
    return tile_color(vram, bg_tile_addr(index, lcdc), px % 8, py % 8)


def shade(palette: int, color: int) -> int:
    return (palette >> (2 * color)) & 3


def reference_frame(vram: np.ndarray, oam: np.ndarray, regs: np.ndarray) -> np.ndarray:
    """Render one frame: ``vram`` uint8[0x2000], ``oam`` uint8[0xA0], ``regs`` int[144, 8]
    (lcdc, scx, scy, wx, wy, bgp, obp0, obp1 per line). Returns shades uint8[144, 160]."""
    out = np.zeros((H, W), dtype=np.uint8)
    wy_seen = False
    win_y = 0
    for ly in range(H):
        lcdc, scx, scy, wx, wy, bgp, obp0, obp1 = (int(v) for v in regs[ly])
        if not lcdc & 0x80:
            continue  # LCD off: shade 0
        wy_seen = wy_seen or ly == wy
        bg_on = bool(lcdc & 0x01)
        win_here = bg_on and bool(lcdc & 0x20) and wy_seen and wx <= 166
        bg_map = 0x1C00 if lcdc & 0x08 else 0x1800
        win_map = 0x1C00 if lcdc & 0x40 else 0x1800
        bg = [0] * W
        for x in range(W):
            if not bg_on:
                bg[x] = 0
            elif win_here and x >= wx - 7:
                bg[x] = map_color(vram, win_map, lcdc, x - (wx - 7), win_y)
            else:
                bg[x] = map_color(vram, bg_map, lcdc, (x + scx) % 256, (ly + scy) % 256)
        if win_here:
            win_y += 1
        line = [shade(bgp, c) for c in bg]
        if lcdc & 0x02:
            height = 16 if lcdc & 0x04 else 8
            chosen = []
            for n in range(40):
                y = int(oam[4 * n]) - 16
                if y <= ly < y + height and len(chosen) < 10:
                    chosen.append(n)
            chosen.sort(key=lambda n: (int(oam[4 * n + 1]), n))  # X, then OAM index
            for x in range(W):
                for n in chosen:  # first opaque object pixel in priority order decides
                    sy, sx = int(oam[4 * n]) - 16, int(oam[4 * n + 1]) - 8
                    tile, attr = int(oam[4 * n + 2]), int(oam[4 * n + 3])
                    if not sx <= x < sx + 8:
                        continue
                    if height == 16:
                        tile &= 0xFE
                    ty = ly - sy
                    tx = x - sx
                    if attr & 0x40:
                        ty = height - 1 - ty
                    if attr & 0x20:
                        tx = 7 - tx
                    c = tile_color(vram, 16 * tile, tx, ty)  # ty >= 8 runs into the next tile
                    if c == 0:
                        continue
                    if not (attr & 0x80 and bg[x] != 0):
                        line[x] = shade(obp1 if attr & 0x10 else obp0, c)
                    break
        out[ly] = line
    return out
