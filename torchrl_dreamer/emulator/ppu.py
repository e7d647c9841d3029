"""PPU timing: modes, LY, STAT and its interrupt, and when scanlines are rendered.

A line is 456 dots: mode 2 (OAM scan, 80 dots), mode 3 (drawing, 172), mode 0 (HBlank, 204);
lines 144-153 are VBlank (mode 1). The state machine moves from event to event
(:func:`ppu_event`); the lazy clock (:mod:`~torchrl_dreamer.emulator.scheduler`) calls it when
the dot counter reaches ``PPU_NEXT``. When nothing observes modes 2/3/0 (no packing for this
frame, no HBlank/OAM STAT source) whole runs of lines are skipped as one event (``MODE`` 4), and
LY/STAT reads derive the line and mode from the dot counter (:func:`ppu_normalize`).

Pixels are drawn a whole line at a time at the end of mode 3 (:mod:`~.render`), from the
registers as they are then. Facts: Pan Docs "LCD Status Registers", "Rendering".
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.interrupts import raise_irq
from torchrl_dreamer.emulator.layout import (
    S_FRAME_DONE,
    S_LINE,
    S_MODE,
    S_PACK,
    S_PPU_DOT,
    S_PPU_NEXT,
    S_PYBOY_TIMING,
    S_STAT_EN,
    S_STAT_LINE,
    S_WIN_LINE,
)
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.registers import (
    IRQ_STAT,
    IRQ_VBLANK,
    LCDC_ON,
    R_BGP,
    R_LCDC,
    R_LY,
    R_LYC,
    R_OBP0,
    R_OBP1,
    R_SCX,
    R_SCY,
    R_STAT,
    R_WX,
    R_WY,
    STAT_HBLANK,
    STAT_LYC,
    STAT_OAM,
    STAT_SOURCES,
    STAT_VBLANK,
)
from torchrl_dreamer.emulator.render import pack_line_packed2, render_scanline

__all__ = ["WIN_BLANK", "ly_stat_at", "ppu_advance", "ppu_next_event", "ppu_read", "ppu_write",
           "lcd_on"]

# WIN_LINE bit set from LCD on until the next frame starts: that first frame is blank (shade 0)
# on hardware. It lives above the renderer's window state bits and is cleared at LY 0.
WIN_BLANK = wp.constant(0x10000)

LINE_DOTS = wp.constant(456)
MODE2_END = wp.constant(80)  # dot at which mode 3 starts
MODE3_END = wp.constant(252)  # dot at which HBlank starts
VBLANK_LINE = wp.constant(144)
FRAME_LINES = wp.constant(154)


@wp.func
def lcd_on(i: int, m: Mem) -> bool:
    """LCDC bit 7."""
    return (int(m.hram[i, R_LCDC]) & LCDC_ON) != 0


@wp.func(inline=False)
def stat_update(i: int, m: Mem):
    """Recompute the STAT interrupt line; its rising edge requests the LCD STAT interrupt."""
    sig = 0
    if lcd_on(i, m):
        en = m.st[i, S_STAT_EN]
        mode = m.st[i, S_MODE]
        if (en & STAT_HBLANK) != 0 and mode == 0:
            sig = 1
        if (en & STAT_VBLANK) != 0 and mode == 1:
            sig = 1
        if (en & STAT_OAM) != 0 and mode == 2:
            sig = 1
        if (en & STAT_LYC) != 0 and m.st[i, S_LINE] == int(m.hram[i, R_LYC]):
            sig = 1
    if sig == 1 and m.st[i, S_STAT_LINE] == 0:
        raise_irq(i, m, IRQ_STAT)
    m.st[i, S_STAT_LINE] = sig


@wp.func(inline=False)
def clear_obs(i: int, m: Mem):
    """Blank the env's packed2 observation and framebuffer (LCD off shows shade 0).

    With ``PYBOY_TIMING`` the blank is BGP colour 0, as PyBoy paints it (not hardware).
    """
    shade = 0
    if m.st[i, S_PYBOY_TIMING] != 0:
        shade = int(m.hram[i, R_BGP]) & 3
    for y in range(72):
        for x in range(20):
            m.obs[i, 0, y, x] = wp.uint8(shade * 0x55)
    for y in range(144):
        for x in range(160):
            m.fb[i, y, x] = wp.uint8(shade)


@wp.func
def cur_mode(i: int, m: Mem) -> int:
    """PPU mode at the current (caught-up) dot: 2 OAM scan, 3 drawing, 0 HBlank, 1 VBlank."""
    if m.st[i, S_LINE] >= VBLANK_LINE:
        return 1
    dot = m.st[i, S_PPU_DOT]
    if dot < MODE2_END:
        return 2
    if dot < MODE3_END:
        return 3
    return 0


@wp.func(inline=False)
def ppu_refine(i: int, m: Mem):
    """Switch to per-mode events on the current line (after a STAT or LYC write)."""
    if m.st[i, S_LINE] >= VBLANK_LINE:
        m.st[i, S_PPU_NEXT] = LINE_DOTS
    elif lcd_on(i, m):
        mode = cur_mode(i, m)
        m.st[i, S_MODE] = mode
        if mode == 2:
            m.st[i, S_PPU_NEXT] = MODE2_END
        elif mode == 3:
            m.st[i, S_PPU_NEXT] = MODE3_END
        else:
            m.st[i, S_PPU_NEXT] = LINE_DOTS


@wp.func
def next_ppu_line(i: int, m: Mem, line: int, limit: int) -> int:
    """Next line (<= ``limit``) whose start must be an event: ``limit`` or the LYC line (and the
    line after it, where the LY=LYC signal drops) when the LYC STAT interrupt is enabled."""
    target = limit
    if (m.st[i, S_STAT_EN] & STAT_LYC) != 0:
        lyc = int(m.hram[i, R_LYC])
        if lyc == line:
            target = line + 1
        elif lyc > line and lyc < limit:
            target = lyc
    return target


@wp.func(inline=False)
def end_of_mode3(i: int, m: Mem, line: int):
    """Mode 3 -> 0: render the line (if this frame is packed) and pack it into the observation."""
    m.st[i, S_MODE] = 0
    m.st[i, S_PPU_NEXT] = LINE_DOTS
    on = lcd_on(i, m)
    if on and m.st[i, S_PACK] != 0:
        lcdc = int(m.hram[i, R_LCDC])
        if (m.st[i, S_WIN_LINE] & WIN_BLANK) != 0:
            lcdc = lcdc & 0x7F  # first frame after LCD on: the renderer draws shade 0
        wl = render_scanline(
            i, line, m.vram, m.oam, lcdc, int(m.hram[i, R_SCX]),
            int(m.hram[i, R_SCY]), int(m.hram[i, R_WX]), int(m.hram[i, R_WY]),
            int(m.hram[i, R_BGP]), int(m.hram[i, R_OBP0]), int(m.hram[i, R_OBP1]),
            m.st[i, S_WIN_LINE], m.fb,
        )
        m.st[i, S_WIN_LINE] = wl
        if (line & 1) == 0:
            pack_line_packed2(i, line, m.fb, m.obs)
    if on:
        stat_update(i, m)


@wp.func(inline=False)
def ppu_event(i: int, m: Mem):
    """Advance the PPU state machine: mode 2 (80 dots) -> 3 (172) -> 0 (204); VBlank lines 144-153.

    The internal line counter keeps running while the LCD is off (so frames still end every
    70224 T-cycles), but LY then reads 0 and no interrupts or pixels are produced.
    """
    on = lcd_on(i, m)
    mode = m.st[i, S_MODE]
    line = m.st[i, S_LINE]
    if mode == 2:
        m.st[i, S_MODE] = 3
        m.st[i, S_PPU_NEXT] = MODE3_END
        if m.st[i, S_PYBOY_TIMING] != 0 and (int(m.hram[i, R_SCX]) & 7) != 0:
            # PyBoy lengthens mode 3 by the fine scroll rounded up to an M-cycle (4 dots) and
            # draws the line when mode 3 ends: mid-line SCX writes land as in PyBoy
            m.st[i, S_PPU_NEXT] = MODE3_END + 4
        return
    if mode == 3:
        end_of_mode3(i, m, line)
        return
    # end of one or more lines (coarse scheduling may have skipped lines with nothing to observe)
    k = m.st[i, S_PPU_DOT] // LINE_DOTS
    m.st[i, S_PPU_DOT] = m.st[i, S_PPU_DOT] - LINE_DOTS * k
    line = line + k
    if line >= FRAME_LINES:
        line = 0
        m.st[i, S_WIN_LINE] = 0
        if m.st[i, S_PYBOY_TIMING] != 0:
            m.st[i, S_FRAME_DONE] = 1  # PyBoy's tick() ends a frame here
    m.st[i, S_LINE] = line
    if line < VBLANK_LINE:
        m.st[i, S_MODE] = 2
        m.st[i, S_PPU_NEXT] = MODE2_END
        if m.st[i, S_PACK] == 0 and (m.st[i, S_STAT_EN] & (STAT_HBLANK | STAT_OAM)) == 0:
            # nothing observes modes 2/3/0 before the next interesting line: skip to it (LY and
            # STAT reads derive the line and mode from the dot counter, see ppu_normalize)
            m.st[i, S_MODE] = 4
            m.st[i, S_PPU_NEXT] = LINE_DOTS * (next_ppu_line(i, m, line, VBLANK_LINE) - line)
    else:
        m.st[i, S_MODE] = 1
        m.st[i, S_PPU_NEXT] = LINE_DOTS * (next_ppu_line(i, m, line, FRAME_LINES) - line)
        if line == VBLANK_LINE:
            if m.st[i, S_PYBOY_TIMING] == 0:
                m.st[i, S_FRAME_DONE] = 1
            if on:
                raise_irq(i, m, IRQ_VBLANK)
                if (m.st[i, S_PYBOY_TIMING] != 0 and m.st[i, S_PACK] != 0
                        and (m.st[i, S_WIN_LINE] & WIN_BLANK) != 0):
                    clear_obs(i, m)  # PyBoy blanks the first frame after LCD on with BGP colour 0
            elif m.st[i, S_PACK] != 0:
                clear_obs(i, m)
    if on:
        stat_update(i, m)


@wp.func
def ppu_normalize(i: int, m: Mem):
    """Fold whole lines of a coarse skip into LINE so LINE / PPU_DOT are the current LY / dot."""
    k = m.st[i, S_PPU_DOT] // LINE_DOTS
    if k > 0:
        m.st[i, S_LINE] = m.st[i, S_LINE] + k
        m.st[i, S_PPU_DOT] = m.st[i, S_PPU_DOT] - LINE_DOTS * k
        m.st[i, S_PPU_NEXT] = m.st[i, S_PPU_NEXT] - LINE_DOTS * k


@wp.func(inline=True)
def ppu_advance(i: int, m: Mem, c: int):
    """Advance the dot counter by ``c`` T-cycles, handling every PPU event due."""
    m.st[i, S_PPU_DOT] = m.st[i, S_PPU_DOT] + c
    while m.st[i, S_PPU_DOT] >= m.st[i, S_PPU_NEXT]:
        ppu_event(i, m)
    ppu_normalize(i, m)


@wp.func
def ppu_next_event(i: int, m: Mem) -> int:
    """T-cycles to the next PPU event."""
    return m.st[i, S_PPU_NEXT] - m.st[i, S_PPU_DOT]


@wp.func
def ppu_read(i: int, m: Mem, r: int) -> int:
    """Read STAT or LY (``r`` = offset from FF00; the PPU already caught up)."""
    if r == R_STAT:
        v = 0x80 | m.st[i, S_STAT_EN]
        if lcd_on(i, m):
            v = v | cur_mode(i, m)
            if m.st[i, S_LINE] == int(m.hram[i, R_LYC]):
                v = v | 4
        elif int(m.hram[i, R_LYC]) == 0:
            v = v | 4
        return v
    # LY
    if lcd_on(i, m):
        line = m.st[i, S_LINE]
        if m.st[i, S_PYBOY_TIMING] != 0 and line < VBLANK_LINE and m.st[i, S_PPU_DOT] >= LINE_DOTS - 4:
            return line + 1  # PyBoy increments LY 4 dots before a visible line ends
        return line
    return 0


@wp.func(inline=False)
def lcdc_write(i: int, m: Mem, v: int):
    """LCDC: switching the LCD on restarts line 0 in mode 2; off drops the STAT line."""
    old = int(m.hram[i, R_LCDC])
    m.hram[i, R_LCDC] = wp.uint8(v)
    if (old & LCDC_ON) == 0 and (v & LCDC_ON) != 0:
        m.st[i, S_LINE] = 0
        m.st[i, S_PPU_DOT] = 0
        m.st[i, S_MODE] = 2
        m.st[i, S_PPU_NEXT] = MODE2_END
        m.st[i, S_WIN_LINE] = WIN_BLANK
        m.st[i, S_STAT_LINE] = 0
        stat_update(i, m)
    if (old & LCDC_ON) != 0 and (v & LCDC_ON) == 0:
        m.st[i, S_STAT_LINE] = 0
        if m.st[i, S_PYBOY_TIMING] != 0:
            # PyBoy's frame protocol: LCD off ends the frame (blank) and restarts the frame
            # clock, so later frames end every 70224 T-cycles from here
            m.st[i, S_LINE] = 0
            m.st[i, S_PPU_DOT] = 0
            m.st[i, S_MODE] = 2
            m.st[i, S_PPU_NEXT] = MODE2_END
            m.st[i, S_FRAME_DONE] = 1
            if m.st[i, S_PACK] != 0:
                clear_obs(i, m)


@wp.func(inline=False)
def ppu_write(i: int, m: Mem, r: int, v: int):
    """Write LCDC, STAT or LYC (LY is read-only); other PPU registers are plain ``hram`` bytes."""
    if r == R_LCDC:
        lcdc_write(i, m, v)
    elif r == R_STAT:
        m.st[i, S_STAT_EN] = v & STAT_SOURCES
        ppu_refine(i, m)
        stat_update(i, m)
    elif r == R_LYC:
        m.hram[i, r] = wp.uint8(v)
        ppu_refine(i, m)
        stat_update(i, m)


_FOREVER = wp.constant(1 << 22)  # "does not change before the next event" (T-cycles)


@wp.func
def ly_stat_at(i: int, m: Mem, r: int, t: int) -> int:
    """LY or STAT (``r``) as read ``t`` T-cycles after the last sync, packed with how long it
    keeps that value: ``value | left << 8`` (``left`` >= 1 T-cycles); -1 if not predictable.

    The one home of the "LY / STAT as a function of the dot counter" derivation: IO reads of
    LY/STAT use it instead of catching up (no event is due before the next scheduled one, so
    it equals :func:`ppu_read` after :func:`~.scheduler.catch_up`), and the idle-loop
    fast-forward uses it to know how long a poll reads the same value. It must follow
    :func:`cur_mode` (line = ``LINE + dot // 456``; mode boundaries ``MODE2_END``,
    ``MODE3_END``) if mode timing changes.
    """
    if m.st[i, S_PYBOY_TIMING] != 0:
        return -1  # PyBoy's LY-early quirk is not modelled here
    dt = m.st[i, S_PPU_DOT] + t
    lx = m.st[i, S_LINE] + dt // LINE_DOTS
    dx = dt % LINE_DOTS
    lcd = (int(m.hram[i, R_LCDC]) & LCDC_ON) != 0
    lyc = int(m.hram[i, R_LYC])
    v = 0
    end = int(LINE_DOTS)
    if r == R_LY:
        if lcd:
            v = lx
    else:
        v = 0x80 | m.st[i, S_STAT_EN]
        if lcd:
            if lx >= VBLANK_LINE:
                v = v | 1
            elif dx < MODE2_END:
                v = v | 2
                end = MODE2_END
            elif dx < MODE3_END:
                v = v | 3
                end = MODE3_END
            if lx == lyc:
                v = v | 4
        elif lyc == 0:
            v = v | 4
    left = end - dx
    if not lcd:
        left = _FOREVER
    return v | (left << 8)
