"""The Game Boy Color's scanline renderer (Color mode), shared by the CPU and CUDA kernels.

Called where the DMG renderer (:mod:`~.render`) is, once per visible line at the end of mode 3,
with the registers as they are then. It writes the line's colours as RGB555 into
``m.rgb[i, ly, 0:160]`` and their luminance shades 0..3 (:func:`rgb555_shade`) into
``m.fb[i, ly, 0:160]``, from which the packed2 observation is packed as on a DMG.

What differs from the DMG (Pan Docs "VRAM Background Maps" (BG map attributes), "OAM" (Color
attributes), "Palettes", "Drawing priority"):

* every BG / window map entry has an attribute byte at the same offset in VRAM bank 1: palette
  (bits 0-2), tile data bank (bit 3), X / Y flip (bits 5, 6), BG-to-OBJ priority (bit 7);
* objects: palette bits 0-2 and tile data bank bit 3 of their attribute byte; among the ten
  objects of a line the one with the lower OAM index wins (no ordering by X), unless OPRI
  (FF6C) bit 0 asks for the DMG's order (X first, then OAM index);
* colours come from palette memory: 8 BG and 8 OBJ palettes of 4 RGB555 colours;
* LCDC.0 is the BG's master priority: clear, objects always show above BG and window (which
  still draw); set, an opaque object pixel is hidden behind a BG pixel of colour 1-3 when the
  map attribute's bit 7 or the object's bit 7 is set. The window is enabled by LCDC.5 alone.
* LCD off (or the first frame after LCD on): white.

The luminance quantisation (documented in ``docs/packed2.md``): with the 5-bit channels R, G, B,
``Y = (77 R + 150 G + 29 B) >> 8`` (0..31, ITU-R BT.601 weights in 1/256) and
``shade = 3 - (Y >> 3)``: white is shade 0, black shade 3, like the DMG's lightest and darkest.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import CGBX_BGPAL, CGBX_OBJPAL, CGBX_VRAM1, MODEL_CGB, S_CGB
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.oam_view import hidden_entry, scan_hidden, this_line_time
from torchrl_dreamer.emulator.registers import R_BGP, R_OPRI
from torchrl_dreamer.emulator.render import (
    WIN_COUNT_MASK,
    WIN_TRIGGERED,
    ObjectKeys,
    obj_on_line,
    row_pixel,
    window_enabled,
)

__all__ = ["WHITE", "STOP_VRAM_LOCKED", "STOP_IN_MODE3", "rgb555_shade", "palette_colour",
           "bg_over_object",
           "render_line_cgb", "clear_line_cgb", "stopped_line"]

WHITE = wp.constant(0x7FFF)
_W = 160
_H = 144
_CLAIMED = 0x80  # scratch byte: an object decided this pixel (its colour already in rgb)
_BG_WON = 0x40  # ... and the BG pixel shows (BG-to-OBJ priority)
_BG_PRIO = 0x20  # the BG map attribute's priority bit


@wp.func
def rgb555_shade(c: int) -> int:
    """Luminance shade 0 (lightest) .. 3 (darkest) of an RGB555 colour (see the module docs)."""
    y = ((c & 31) * 77 + ((c >> 5) & 31) * 150 + ((c >> 10) & 31) * 29) >> 8
    return 3 - (y >> 3)


@wp.func
def palette_colour(i: int, m: wp.ref[Mem], base: int, pal: int, c: int) -> int:
    """RGB555 colour ``c`` of palette ``pal`` in the palette memory at ``cgbx`` offset ``base``."""
    i = console(i)
    o = base + pal * 8 + c * 2
    return int(m.cgbx[i, o]) | ((int(m.cgbx[i, o + 1]) & 0x7F) << 8)


@wp.func
def tile_byte(i: int, m: wp.ref[Mem], bank: int, off: int) -> int:
    """VRAM byte at offset ``off`` of bank ``bank`` (0: ``vram``, 1: ``cgbx``)."""
    i = console(i)
    if bank != 0:
        return int(m.cgbx[i, CGBX_VRAM1 + off])
    return int(m.vram[i, off])


@wp.func
def bg_fetch(i: int, m: wp.ref[Mem], map_addr: int, lcdc: int, row: int) -> int:
    """A BG / window tile row: ``lo | hi << 8 | attribute << 16`` (Y flip applied)."""
    i = console(i)
    tile = int(m.vram[i, map_addr])
    attr = int(m.cgbx[i, CGBX_VRAM1 + map_addr])
    r = row
    if (attr & 0x40) != 0:
        r = 7 - r
    base = tile * 16
    if (lcdc & 0x10) == 0:
        base = 0x800 + (tile ^ 0x80) * 16
    bank = (attr >> 3) & 1
    lo = tile_byte(i, m, bank, base + r * 2)
    hi = tile_byte(i, m, bank, base + r * 2 + 1)
    return lo | (hi << 8) | (attr << 16)


@wp.func
def bg_over_object(lcdc: int, c: int, bg_prio: bool, obj_prio: bool) -> bool:
    """Color mode: a BG / window pixel of colour ``c`` hides an opaque object pixel: LCDC.0 (the
    BG's master priority) set, ``c`` not 0, and the map attribute's or the object's priority
    bit set."""
    return (lcdc & 0x01) != 0 and c != 0 and (bg_prio or obj_prio)


@wp.func
def bg_pixel(t: int, px: int) -> int:
    """Scratch byte of pixel ``px`` (0 = leftmost) of a fetched tile row: colour index | palette
    << 2 | the priority bit (X flip applied)."""
    attr = t >> 16
    c = row_pixel(t & 0xFF, (t >> 8) & 0xFF, px, (attr & 0x20) != 0)
    v = c | ((attr & 7) << 2)
    if (attr & 0x80) != 0:
        v = v | _BG_PRIO
    return v


@wp.func
def clear_line_cgb(i: int, m: wp.ref[Mem], ly: int):
    """Paint line ``ly`` white (LCD off)."""
    i = console(i)
    for x in range(_W):
        m.rgb[i, ly, x] = wp.int16(WHITE)
        m.fb[i, ly, x] = wp.uint8(0)


STOP_VRAM_LOCKED = wp.constant(1)
"""``STOPPED`` value of a console in STOP whose PPU cannot read VRAM (a DMG's is dark anyway)."""
STOP_IN_MODE3 = wp.constant(2)
"""``STOPPED`` value of a Color stopped in mode 3: its PPU keeps VRAM and draws as before."""


@wp.func(inline=False)
def stopped_line(i: int, m: wp.ref[Mem], ly: int):
    """Line ``ly`` of a Color in STOP entered outside mode 3 (``STOPPED`` =
    :data:`STOP_VRAM_LOCKED`): its PPU runs on but reads FF from VRAM, so every BG pixel is
    colour 3 of palette 7 (map attribute FF) in Color mode, and of BGP in a DMG cartridge's
    compatibility mode; the screen goes black under the usual palettes (daid's stop_instr, GBC).
    Objects, whose tile rows would read FF too, are left out."""
    i = console(i)
    if ly < 0 or ly >= _H:
        return
    colour = palette_colour(i, m, CGBX_BGPAL, 7, 3)
    shade = rgb555_shade(colour)
    if m.st[i, S_CGB] != MODEL_CGB:
        shade = (int(m.hram[i, R_BGP]) >> 6) & 3
        colour = palette_colour(i, m, CGBX_BGPAL, 0, shade)
    for x in range(_W):
        m.rgb[i, ly, x] = wp.int16(colour)
        m.fb[i, ly, x] = wp.uint8(shade)


@wp.func(inline=False)
def render_line_cgb(i: int, m: wp.ref[Mem], ly: int, lcdc: int, scx: int, scy: int, wx: int,
                    wy: int, win_line: int) -> int:
    """Render visible line ``ly`` in Color mode; returns the window state (as the DMG renderer's
    :func:`~.render.render_scanline`)."""
    i = console(i)
    if ly < 0 or ly >= _H:
        return win_line
    if (lcdc & 0x80) == 0:
        clear_line_cgb(i, m, ly)
        return win_line
    triggered = (win_line & WIN_TRIGGERED) != 0 or ly == wy
    win_count = win_line & WIN_COUNT_MASK
    window_on = window_enabled(lcdc, True) and triggered and wx < 167
    win_x0 = wx - 7
    # pass 1: BG and window scratch bytes
    bg_end = int(_W)
    if window_on:
        bg_end = wp.max(win_x0, 0)
    bg_map = 0x1800
    if (lcdc & 0x08) != 0:
        bg_map = 0x1C00
    y = (ly + scy) & 255
    map_row = bg_map + (y >> 3) * 32
    t = int(0)  # noqa: UP018 (Warp: a dynamic variable)
    for x in range(bg_end):
        bx = (x + scx) & 255
        if x == 0 or (bx & 7) == 0:
            t = bg_fetch(i, m, map_row + (bx >> 3), lcdc, y & 7)
        m.fb[i, ly, x] = wp.uint8(bg_pixel(t, bx & 7))
    if window_on:
        win_map = 0x1800
        if (lcdc & 0x40) != 0:
            win_map = 0x1C00
        wrow = win_map + (win_count >> 3) * 32
        x_start = wp.max(win_x0, 0)
        for x in range(x_start, _W):
            wxp = x - win_x0
            if x == x_start or (wxp & 7) == 0:
                t = bg_fetch(i, m, wrow + (wxp >> 3), lcdc, win_count & 7)
            m.fb[i, ly, x] = wp.uint8(bg_pixel(t, wxp & 7))
        win_count = win_count + 1
    # pass 2: objects in priority order (OAM index, or X with OPRI); the first opaque pixel
    # claims the pixel
    if (lcdc & 0x02) != 0:
        height = 8
        if (lcdc & 0x04) != 0:
            height = 16
        by_x = (int(m.hram[i, R_OPRI]) & 1) != 0
        keys = ObjectKeys()
        n = int(0)  # noqa: UP018
        hidden = scan_hidden(i, m, this_line_time(i, m), ly)  # entries read while an OAM DMA ran
        for s in range(40):
            if n < 10 and not hidden_entry(hidden, s) and obj_on_line(int(m.oam[i, s * 4]), ly, height):
                key = s
                if by_x:
                    key = int(m.oam[i, s * 4 + 1]) * 64 + s  # OPRI bit 0: X first, as a DMG
                k = n
                while k > 0:
                    if keys[k - 1] > key:
                        keys[k] = keys[k - 1]
                        k = k - 1
                    else:
                        break
                keys[k] = key
                n = n + 1
        for t in range(n):
            s = keys[t] & 63
            sx = int(m.oam[i, s * 4 + 1]) - 8
            sy = int(m.oam[i, s * 4]) - 16
            tile = int(m.oam[i, s * 4 + 2])
            attr = int(m.oam[i, s * 4 + 3])
            if height == 16:
                tile = tile & 0xFE
            line = ly - sy
            if (attr & 0x40) != 0:
                line = height - 1 - line
            bank = (attr >> 3) & 1
            lo = tile_byte(i, m, bank, tile * 16 + line * 2)
            hi = tile_byte(i, m, bank, tile * 16 + line * 2 + 1)
            for px in range(8):
                x = sx + px
                if x >= 0 and x < _W:
                    v = int(m.fb[i, ly, x])
                    if (v & _CLAIMED) == 0:
                        c = row_pixel(lo, hi, px, (attr & 0x20) != 0)
                        if c != 0:
                            if bg_over_object(lcdc, v & 3, (v & _BG_PRIO) != 0, (attr & 0x80) != 0):
                                m.fb[i, ly, x] = wp.uint8(v | _CLAIMED | _BG_WON)
                            else:
                                m.fb[i, ly, x] = wp.uint8(v | _CLAIMED)
                                m.rgb[i, ly, x] = wp.int16(
                                    palette_colour(i, m, CGBX_OBJPAL, attr & 7, c))
    # pass 3: BG colours where no object shows; shades from the colours
    for x in range(_W):
        v = int(m.fb[i, ly, x])
        col = int(0)  # noqa: UP018
        if (v & _CLAIMED) != 0 and (v & _BG_WON) == 0:
            col = int(m.rgb[i, ly, x])
        else:
            col = palette_colour(i, m, CGBX_BGPAL, (v >> 2) & 7, v & 3)
            m.rgb[i, ly, x] = wp.int16(col)
        m.fb[i, ly, x] = wp.uint8(rgb555_shade(col))
    state = win_count
    if triggered:
        state = state | WIN_TRIGGERED
    return state
