"""The Game Boy Color's compatibility mode in colour: a DMG line through the Color's palettes.

A DMG-only cartridge on a Color (``GameBoy(rom, model="cgb")``) is drawn by the DMG's rules (the
DMG renderer, or the pixel pipeline for lines with mid-line writes), and BGP, OBP0 and OBP1 then
index the Color's palette memory instead of picking greys (Pan Docs "Compatibility palettes"): a
background or window pixel takes colour ``BGP shade`` of BG palette 0, an object pixel colour
``OBPn shade`` of OBJ palette ``n``. The boot ROM loads those three palettes from its table
(:mod:`~.compat_palettes`).

Both DMG drawing paths leave each pixel as ``shade | source << 2`` in compatibility mode
(:func:`~.render.render_scanline_row` with ``sources``; :func:`~.fifo.fifo_run`);
:func:`colour_line_compat` then writes the line's colours into ``m.rgb`` and leaves the plain
shades in ``m.fb``. The packed2 observation is therefore the DMG's own shades, the same bytes a
DMG shows, and :attr:`~.gameboy.GameBoy.rgb555` the colours the Color shows. The first frame
after the LCD is switched on is white, as in Color mode.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import CGBX_BGPAL, CGBX_OBJPAL
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import R_BGP, R_OBP0, R_OBP1, R_SCX, R_SCY, R_WX, R_WY
from torchrl_dreamer.emulator.render import render_scanline_row
from torchrl_dreamer.emulator.render_cgb import WHITE, palette_colour

__all__ = ["colour_line_compat", "render_line_compat"]

_W = 160


@wp.func(inline=False)
def colour_line_compat(i: int, m: wp.ref[Mem], ly: int, blank: bool):
    """Colour line ``ly`` from its ``shade | source << 2`` pixels (white if ``blank``)."""
    i = console(i)
    for x in range(_W):
        v = int(m.fb[i, ly, x])
        shade = v & 3
        src = (v >> 2) & 3
        colour = int(WHITE)
        if not blank:
            if src == 0:
                colour = palette_colour(i, m, CGBX_BGPAL, 0, shade)
            else:
                colour = palette_colour(i, m, CGBX_OBJPAL, src - 1, shade)
        m.rgb[i, ly, x] = wp.int16(colour)
        m.fb[i, ly, x] = wp.uint8(shade)


@wp.func(inline=False)
def render_line_compat(i: int, m: wp.ref[Mem], ly: int, lcdc: int, win_line: int,
                       blank: bool) -> int:
    """The scanline renderer's line ``ly`` in compatibility mode, coloured (white if ``blank``);
    returns the window state (as :func:`~.render.render_scanline`). Kept out of the DMG's line
    path, which stays the plain renderer."""
    i = console(i)
    wl = render_scanline_row(
        i, ly, ly, m.vram, m.oam, lcdc, int(m.hram[i, R_SCX]), int(m.hram[i, R_SCY]),
        int(m.hram[i, R_WX]), int(m.hram[i, R_WY]), int(m.hram[i, R_BGP]),
        int(m.hram[i, R_OBP0]), int(m.hram[i, R_OBP1]), win_line, m.fb, True)
    colour_line_compat(i, m, ly, blank)
    return wl
