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

from torchrl_dreamer.emulator.bits import lowest_bit
from torchrl_dreamer.emulator.dma import dma_ran_since, dma_recent
from torchrl_dreamer.emulator.fifo import (
    fifo_abandon_object,
    fifo_dry_end,
    fifo_run,
    fifo_start,
    window_rows,
)
from torchrl_dreamer.emulator.hdma import hdma_hblank
from torchrl_dreamer.emulator.interrupts import raise_irq
from torchrl_dreamer.emulator.layout import (
    MODEL_CGB,
    MODEL_CGB_COMPAT,
    MODEL_DMG,
    S_CGB,
    S_FIFO_LINE,
    S_FIFO_WIN,
    S_FRAME_DONE,
    S_HALTED,
    S_HDMA,
    S_LINE,
    S_MODE,
    S_PACK,
    S_PPU_DOT,
    S_PPU_FIFO,
    S_PPU_M0,
    S_PPU_NEXT,
    S_PYBOY_TIMING,
    S_SPEED,
    S_STAT_EN,
    S_STAT_LINE,
    S_STOPPED,
    S_VBK,
    S_VRAM_OPEN,
    S_WIN_LINE,
)
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.oam_view import (
    hidden_mask,
    latch_x,
    latch_y,
    scan_hidden,
)
from torchrl_dreamer.emulator.raw import u8_at
from torchrl_dreamer.emulator.registers import (
    IRQ_STAT,
    IRQ_VBLANK,
    LCDC_BG_ON,
    LCDC_OBJ_ON,
    LCDC_OBJ_TALL,
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
    STAT_LYC_FLAG,
    STAT_OAM,
    STAT_SOURCES,
    STAT_VBLANK,
)
from torchrl_dreamer.emulator.render import (
    WIN_COUNT_MASK,
    obj_on_line,
    pack_line_packed2,
    render_scanline,
    window_enabled,
    window_line,
    window_state,
)
from torchrl_dreamer.emulator.render_cgb import (
    STOP_VRAM_LOCKED,
    clear_line_cgb,
    render_line_cgb,
    stopped_line,
)
from torchrl_dreamer.emulator.render_compat import colour_line_compat, render_line_compat
from torchrl_dreamer.emulator.speed import cpu_cycles, dots

__all__ = [
    "WIN_BLANK", "ppu_advance", "ppu_next_event", "ppu_read", "ppu_write", "ppu_poll", "lcd_on",
    "vram_blocked", "oam_read_blocked", "oam_write_blocked", "mode3_end", "ppu_fifo_write",
    "lcd_register", "at_vblank_point", "vram_open_seen", "stat_read", "lcd_write_is_plain",
]

# WIN_LINE bit set from LCD on until the next frame starts: that first frame is blank (shade 0)
# on hardware. It lives above the renderer's window state bits and is cleared at LY 0.
WIN_BLANK = wp.constant(0x10000)

LINE_DOTS = wp.constant(456)
VBLANK_LINE = wp.constant(144)
FRAME_LINES = wp.constant(154)
LAST_LINE = wp.constant(153)

# Hardware line timing (DMG), in dots from the start of a line (where LY changes), in the frame
# of the dot counter: a CPU access that ends its M-cycle at dot ``t`` sees every change at a dot
# <= ``t`` (accesses fall on every 4th dot). Facts from the mooneye acceptance/ppu tests
# (lcdon_timing, lcdon_write_timing, intr_2_*, intr_2_mode0_timing_sprites, hblank_ly_scx_timing,
# intr_1_2_timing, vblank_stat_intr) and Pan Docs "Rendering": STAT shows mode 2 (and LY=LYC
# compares the new LY) from dot 1, mode 3 from dot 81 for 172 dots plus penalties; every STAT
# interrupt source rises 2 dots after the STAT bits change in this frame (intr_2_0_timing and
# hblank_ly_scx_timing against intr_2_mode0_timing(_sprites)), so the mode 2 point (dot 3) and the
# mode 0 point fall strictly inside an M-cycle, where a halted CPU wakes in that same M-cycle.
MODE2_DOT = wp.constant(1)  # STAT reads mode 2 (and LY=LYC compares the new LY) from here
IRQ_LAG = wp.constant(2)  # STAT interrupt sources change this many dots after the STAT bits
LINE_IRQ_DOT = wp.constant(3)  # MODE2_DOT + IRQ_LAG: the mode 2 / LY=LYC interrupt point
MODE3_DOT = wp.constant(81)  # mode 3 (drawing) starts
MODE3_DOTS = wp.constant(172)  # shortest mode 3: no fine scroll, window or objects
VRAM_READ_LEAD = wp.constant(4)  # CPU reads of VRAM are blocked this many dots before mode 3
LCD_ON_DOT = wp.constant(4)  # dot counter when the LCD is switched on: line 0 is 4 dots short
LY153_DOTS = wp.constant(1)  # line 153 reads LY 153 until here, then LY 0 (one M-cycle's read)
LYC153_END = wp.constant(5)  # line 153 compares LYC with 153 on dots 1-4 ...
LYC0_DOT = wp.constant(9)  # ... and with 0 from dot 9 on
LYC0_IRQ_DOT = wp.constant(11)  # LYC0_DOT + IRQ_LAG
OBJ_LIMIT = wp.constant(10)  # objects per line
# ppu="fifo": a CPU write whose M-cycle ends at dot ``t`` (the dot counter after catch_up) is
# seen by the pixel pipeline from dot ``t + WRITE_LAG`` on (calibrated on the mealybug tests)
WRITE_LAG = wp.constant(-6)
WX_WRITE_LAG = wp.constant(-5)  # the window comparator sees a WX write one dot later
# ppu="fifo": the pixel pipeline runs this many dots (one M-cycle) ahead of the line's STAT
# timing (the mode flags and the mode-3 length are unchanged), on every line. See OAM_LEAD_DOT for
# the sources: with the OAM STAT source's early rise, it puts a mid-line write on the hardware's
# pixel for both anchors the tests use (a running CPU woken by the mode 2 interrupt, mealybug; a
# halted CPU woken by LY=LYC, daid ppu_scanline_bgp)
PIPE_LEAD = wp.constant(4)
# DMG: the OAM (mode 2) STAT source of lines 1-143 rises one M-cycle before the line's interrupt
# point (dot 455 of the line before, not dot 3), for a running CPU; a halted CPU wakes at the
# point itself. Line 0 has no early rise (line 153 scans no OAM). Facts: mealybug's handlers note
# "line 0 timing is different by 4 cycles" (its mode 2 interrupt comes one M-cycle later there);
# mooneye intr_2_* (halted) pin the interrupt point; daid ppu_scanline_bgp's hardware screens pin
# the pipeline's phase from an LY=LYC wake (docs/accuracy.md, "Mid-line PPU rules")
OAM_LEAD_DOT = wp.constant(455)

# PyBoy's timing (``PYBOY_TIMING``): modes 2/3/0 at dots 0/80/252 and interrupts with the bits.
PYBOY_MODE3_DOT = wp.constant(80)
PYBOY_MODE0_DOT = wp.constant(252)

# PPU phases (``S_MODE``): which event comes next. 0-3 are the STAT modes themselves.
PH_HBLANK = wp.constant(0)  # until the end of the line
PH_VBLANK = wp.constant(1)  # VBlank line(s)
PH_OAM = wp.constant(2)  # OAM scan, until mode 3 starts
PH_DRAW = wp.constant(3)  # mode 3, until the mode 0 interrupt point (the line is drawn there)
PH_COARSE = wp.constant(4)  # visible lines skipped as one event (nothing observes their modes)
PH_START = wp.constant(5)  # dots 0-2 of a line, until the mode 2 / LY=LYC interrupt point
PH_LCDON = wp.constant(6)  # line 0 after LCD on, until mode 3: STAT mode 0, no mode 2 interrupt


@wp.func
def lcd_on(i: int, m: wp.ref[Mem]) -> bool:
    """LCDC bit 7, and the console not a DMG in STOP mode (STOP leaves the DMG's LCD dark; a
    Color's PPU runs on, see :func:`~.render_cgb.stopped_line`)."""
    i = console(i)
    return (int(m.hram[i, R_LCDC]) & LCDC_ON) != 0 and (
        m.st[i, S_STOPPED] == 0 or m.st[i, S_CGB] != MODEL_DMG)


@wp.func
def pyboy(i: int, m: wp.ref[Mem]) -> bool:
    """Whether this console follows PyBoy's PPU timing (``PYBOY_TIMING``) instead of hardware's."""
    i = console(i)
    return m.st[i, S_PYBOY_TIMING] != 0


@wp.func
def line_time(i: int, m: wp.ref[Mem], line: int) -> int:
    """Lazy time (CPU T-cycles from ``CLK`` = 0, where the dot counter is) of dot 0 of ``line``:
    the current line, a later one, or (``line`` below the current one) the next frame's."""
    i = console(i)
    d = (line - m.st[i, S_LINE]) * LINE_DOTS - m.st[i, S_PPU_DOT]
    if line < m.st[i, S_LINE]:
        d = d + FRAME_LINES * LINE_DOTS
    return cpu_cycles(i, m, d)


@wp.func
def obj_penalty(i: int, m: wp.ref[Mem], line: int, scx: int) -> int:
    """Dots objects add to mode 3 on ``line`` (Pan Docs "Mode 3 length").

    The OAM scan picks the first 10 objects covering the line; each one with X < 168 costs 6 dots,
    plus ``5 - min(5, offset)`` for the first object on a background tile, where ``offset`` is
    the object's position within that tile (``(X + SCX) mod 8``; 0 for an object at X = 0).
    This fits every case of mooneye intr_2_mode0_timing_sprites.
    Mask ``m<k>`` holds the tiles having an object at offset <= k, so a tile's extra cost
    ``5 - min offset`` is the number of masks it enters (counted as it enters them). Entries the
    scan reads while an OAM DMA runs are judged with its latch (:func:`~.oam_view.scan_hidden`).
    """
    i = console(i)
    lcdc = int(m.hram[i, R_LCDC])
    if (lcdc & LCDC_OBJ_ON) == 0:
        return 0
    h = 8
    if (lcdc & LCDC_OBJ_TALL) != 0:
        h = 16
    n = int(0)  # noqa: UP018 (a dynamic Warp variable)
    pen = int(0)  # noqa: UP018 (a dynamic Warp variable)
    m0 = int(0)  # noqa: UP018 (a dynamic Warp variable)
    m1 = int(0)  # noqa: UP018 (a dynamic Warp variable)
    m2 = int(0)  # noqa: UP018 (a dynamic Warp variable)
    m3 = int(0)  # noqa: UP018 (a dynamic Warp variable)
    m4 = int(0)  # noqa: UP018 (a dynamic Warp variable)
    # the entries on the line as a mask, in one pass with no branch (where a STAT read on a new
    # line spends its time: all 40 entries are tested), then only those visited, in index order
    oam = m.oam
    on = wp.int64(0)
    for k in range(40):
        hit = wp.where(obj_on_line(u8_at(oam, i, 4 * k), line, h), wp.int64(1), wp.int64(0))
        on = on | (hit << wp.int64(k))
    hidden = int(0)  # noqa: UP018 (a dynamic Warp variable)
    if dma_recent(i, m):
        hidden = scan_hidden(i, m, line_time(i, m, line), line)
        on = on & (hidden_mask(hidden) ^ wp.int64(-1))
    while on != wp.int64(0) and n < OBJ_LIMIT:
        k = lowest_bit(on)
        on = on & (on - wp.int64(1))
        n = n + 1
        x = u8_at(oam, i, 4 * k + 1)
        if x < 168:
            pen = pen + 6
            px = x + (scx & 7)
            if x == 0:
                px = 0  # 8 pixels off-screen: always the full 5-dot tile wait
            bit = 1 << (px >> 3)
            off = px & 7
            if off <= 0 and (m0 & bit) == 0:
                m0 = m0 | bit
                pen = pen + 1
            if off <= 1 and (m1 & bit) == 0:
                m1 = m1 | bit
                pen = pen + 1
            if off <= 2 and (m2 & bit) == 0:
                m2 = m2 | bit
                pen = pen + 1
            if off <= 3 and (m3 & bit) == 0:
                m3 = m3 | bit
                pen = pen + 1
            if off <= 4 and (m4 & bit) == 0:
                m4 = m4 | bit
                pen = pen + 1
    if hidden != 0:
        # the hidden entries (the scan's tail, when a latch is kept) judged with the latch
        pen = pen + latched_penalty(hidden, line, h, scx, OBJ_LIMIT - n, m0, m1, m2, m3, m4)
    return pen


@wp.func(inline=False)
def latched_penalty(hidden: int, line: int, h: int, scx: int, room: int, m0: int, m1: int,
                    m2: int, m3: int, m4: int) -> int:
    """:func:`obj_penalty`'s dots for the copies of the scan's latch (:func:`~.oam_view.latch_y`)
    that fill the hidden entries ``hidden`` (at most ``room``), given the tiles the entries
    before them put in the masks ``m0``-``m4``."""
    k = wp.min(room, ((hidden >> 8) & 0xFF) - (hidden & 0xFF))
    x = latch_x(hidden)
    if k <= 0 or x >= 168 or not obj_on_line(latch_y(hidden), line, h):
        return 0
    pen = 6 * k
    px = x + (scx & 7)
    if x == 0:
        px = 0
    bit = 1 << (px >> 3)
    off = px & 7
    for j in range(5):  # the masks the first copy enters (as in obj_penalty's loop)
        mask = m0
        if j == 1:
            mask = m1
        if j == 2:
            mask = m2
        if j == 3:
            mask = m3
        if j == 4:
            mask = m4
        if off <= j and (mask & bit) == 0:
            pen = pen + 1
    return pen


@wp.func(inline=True)
def mode3_end(i: int, m: wp.ref[Mem], line: int) -> int:
    """Dot at which mode 3 ends (STAT reads mode 0) on visible ``line`` (hardware timing).

    Mode 3 is 172 dots plus the SCX fine scroll (dots spent discarding pixels), 6 dots when the
    window starts on the line (7 for WX = 0 with SCX & 7 > 0; with LCDC.5 set, and on a DMG or in
    the compatibility mode LCDC.0 too) and the object fetch penalties (:func:`obj_penalty`), from the
    registers when first asked on that line (mode 3 start, or the first STAT read of a line the
    coarse clock skipped); cached in ``PPU_M0``. A pixel-FIFO PPU would return its own count here.
    The cached value is read in line; a new line's count is made out of line
    (:func:`mode3_end_new`).
    """
    i = console(i)
    c = m.st[i, S_PPU_M0]
    if c >> 9 == line + 1:
        return c & 511
    return mode3_end_new(i, m, line)


@wp.func(inline=False)
def mode3_end_new(i: int, m: wp.ref[Mem], line: int) -> int:
    """:func:`mode3_end` for a line not yet in the ``PPU_M0`` cache: count it and cache it."""
    i = console(i)
    scx = int(m.hram[i, R_SCX]) & 7
    n = MODE3_DOT + MODE3_DOTS + scx
    wx = int(m.hram[i, R_WX])
    if (window_enabled(int(m.hram[i, R_LCDC]), m.st[i, S_CGB] == MODEL_CGB)
            and int(m.hram[i, R_WY]) <= line and wx < 167):
        n = n + 6  # the fetcher restarts for the window
        if wx == 0 and scx != 0:
            n = n + 1  # one dot later for WX = 0 with SCX & 7 > 0 (fifo.py, window)
    n = n + obj_penalty(i, m, line, scx)
    m.st[i, S_PPU_M0] = ((line + 1) << 9) | n
    return n


@wp.func
def stat_mode_at(i: int, m: wp.ref[Mem], line: int, dot: int) -> int:
    """STAT mode bits at (``line``, ``dot``) of the current frame (LCD on)."""
    i = console(i)
    if pyboy(i, m):
        if line >= VBLANK_LINE:
            return 1
        if dot < PYBOY_MODE3_DOT:
            return 2
        if dot < PYBOY_MODE0_DOT:
            return 3
        return 0
    if line >= VBLANK_LINE:
        if line == VBLANK_LINE and dot < MODE2_DOT:
            return 0
        return 1
    if dot < MODE2_DOT:
        return 0
    if dot < MODE3_DOT:
        if m.st[i, S_MODE] == PH_LCDON:
            return 0
        return 2
    if dot < mode3_end(i, m, line):
        return 3
    return 0


@wp.func
def ly_at(i: int, m: wp.ref[Mem], line: int, dot: int) -> int:
    """LY at (``line``, ``dot``): line 153 reads 0 from dot 1 (a read in its first M-cycle still
    sees 153; PyBoy: LY counts up 4 dots before a visible line ends)."""
    i = console(i)
    if pyboy(i, m):
        if line < VBLANK_LINE and dot >= LINE_DOTS - 4:
            return line + 1
        return line
    if line == LAST_LINE and dot >= LY153_DOTS:
        return 0
    return line


@wp.func
def lyc_cmp_at(i: int, m: wp.ref[Mem], line: int, dot: int) -> int:
    """The LY value the LY=LYC flag compares at (``line``, ``dot``); -1: no match possible.

    The comparison uses the new LY only from dot 1 of a line (line 0: at once), so a read in a
    line's first M-cycle sees no match; on line 153 it sees 153 on dots 1-4 and 0 from dot 9
    (LY=LYC matches 0 on line 153 and on line 0).
    """
    i = console(i)
    if pyboy(i, m):
        return line
    if line == 0:
        return 0
    if dot < MODE2_DOT:
        return -1
    if line == LAST_LINE:
        if dot < LYC153_END:
            return LAST_LINE
        if dot < LYC0_DOT:
            return -1
        return 0
    return line


@wp.func
def pipe_t0(line: int) -> int:
    """ppu="fifo": the dot at which ``line``'s pixel pipeline starts (t = 0): mode 3's start
    less :data:`PIPE_LEAD` (the same on every line)."""
    return MODE3_DOT - PIPE_LEAD


@wp.func
def at_vblank_point(i: int, m: wp.ref[Mem]) -> bool:
    """The PPU stands at the VBlank point (line 144, dot 0) with the LCD on: the VBlank interrupt
    and the line-144 mode 2 STAT interrupt are requested here, in the same M-cycle."""
    i = console(i)
    return lcd_on(i, m) and m.st[i, S_LINE] == VBLANK_LINE and m.st[i, S_PPU_DOT] == 0


@wp.func
def stable_dots(i: int, m: wp.ref[Mem], line: int, dot: int) -> int:
    """Dots from (``line``, ``dot``) until LY or STAT may next change (at least 1)."""
    i = console(i)
    end = LINE_DOTS
    if pyboy(i, m):
        if line < VBLANK_LINE:
            if dot < PYBOY_MODE3_DOT:
                end = PYBOY_MODE3_DOT
            elif dot < PYBOY_MODE0_DOT:
                end = PYBOY_MODE0_DOT
            elif dot < LINE_DOTS - 4:
                end = LINE_DOTS - 4
        return end - dot
    if dot < MODE2_DOT:
        end = MODE2_DOT
    elif line == LAST_LINE and dot < LYC0_DOT:
        end = LYC153_END
        if dot >= LYC153_END:
            end = LYC0_DOT
    elif line < VBLANK_LINE:
        if dot < MODE3_DOT:
            end = MODE3_DOT
        else:
            e3 = mode3_end(i, m, line)
            if dot < e3:
                end = e3
    return end - dot


@wp.func
def ly_stable_dots(i: int, m: wp.ref[Mem], line: int, dot: int) -> int:
    """Dots from (``line``, ``dot``) until LY may next change (at least 1): the line's end, or
    the dot where line 153's LY turns 0 (PyBoy: 4 dots before a visible line ends). A poll of
    LY alone need not stop where only STAT changes, so a wait for a line walks one span a
    line, not one per mode with an OAM scan for mode 3's end."""
    i = console(i)
    end = LINE_DOTS
    if pyboy(i, m):
        if line < VBLANK_LINE and dot < LINE_DOTS - 4:
            end = LINE_DOTS - 4
    elif line == LAST_LINE and dot < LY153_DOTS:
        end = LY153_DOTS
    return end - dot


@wp.func
def stat_off_value(i: int, m: wp.ref[Mem]) -> int:
    """STAT with the LCD off: mode 0 and the LY=LYC flag as it was when the LCD went off."""
    i = console(i)
    v = 0x80 | m.st[i, S_STAT_EN]
    if pyboy(i, m):
        v = (v & 0xFB) | wp.where(int(m.hram[i, R_LYC]) == 0, 4, 0)
    return v


@wp.func
def ppu_value_at(i: int, m: wp.ref[Mem], r: int, line: int, dot: int) -> int:
    """LY or STAT (``r``) at (``line``, ``dot``) with the LCD on."""
    i = console(i)
    if r == R_LY:
        return ly_at(i, m, line, dot)
    v = 0x80 | (m.st[i, S_STAT_EN] & STAT_SOURCES) | stat_mode_at(i, m, line, dot)
    if lyc_cmp_at(i, m, line, dot) == int(m.hram[i, R_LYC]):
        v = v | STAT_LYC_FLAG
    return v


@wp.func
def line_dot_at(i: int, m: wp.ref[Mem], ahead: int) -> wp.vec2i:
    """(line, dot within it) ``ahead`` dots from now (the line may run past 153 in the coarse
    phase, which the callers fold)."""
    i = console(i)
    dot = m.st[i, S_PPU_DOT] + ahead
    return wp.vec2i(m.st[i, S_LINE] + dot // LINE_DOTS, dot % LINE_DOTS)


@wp.func
def ppu_value(i: int, m: wp.ref[Mem], r: int, ahead: int) -> int:
    """LY or STAT (``r``) as read ``ahead`` dots from now (a read that needs the value only)."""
    i = console(i)
    if not lcd_on(i, m):
        v = 0
        if r == R_STAT:
            v = stat_off_value(i, m)
        return v
    at = line_dot_at(i, m, ahead)
    return ppu_value_at(i, m, r, at[0], at[1])


@wp.func
def ppu_poll(i: int, m: wp.ref[Mem], r: int, ahead: int) -> int:
    """LY or STAT (``r``) as read ``ahead`` dots from now, and for how long it keeps that value:
    ``value | dots << 8`` (LCD off: ``1 << 20`` dots). LY's span runs to the line's end
    (:func:`ly_stable_dots`), STAT's to its next change (:func:`stable_dots`). Used by the
    idle-loop fast-forward, so that a skipped poll loop reads exactly what running it would (no
    PPU event may fall within ``ahead``, except whole lines in the coarse phase, which this
    folds)."""
    i = console(i)
    if not lcd_on(i, m):
        return ppu_value(i, m, r, ahead) | (1 << 28)
    at = line_dot_at(i, m, ahead)
    v = ppu_value_at(i, m, r, at[0], at[1])
    if r == R_LY:
        return v | (ly_stable_dots(i, m, at[0], at[1]) << 8)
    return v | (stable_dots(i, m, at[0], at[1]) << 8)


@wp.func
def visible_at(i: int, m: wp.ref[Mem], ahead: int) -> int:
    """Dot within the line ``ahead`` dots from now if that is a visible line with the LCD on and
    hardware timing (where VRAM/OAM access is restricted), else -1."""
    i = console(i)
    if not lcd_on(i, m) or pyboy(i, m):
        return -1
    dot = m.st[i, S_PPU_DOT] + ahead
    line = m.st[i, S_LINE] + dot // LINE_DOTS
    if line >= VBLANK_LINE:
        return -1
    return dot % LINE_DOTS


@wp.func
def vram_blocked(i: int, m: wp.ref[Mem], ahead: int, read: bool) -> bool:
    """The CPU cannot access VRAM ``ahead`` dots from now (reads give FF, writes are dropped):
    mode 3, and for reads already the last M-cycle of mode 2 (lcdon_timing); on the line the LCD
    was switched on, mode 3 only."""
    i = console(i)
    dot = visible_at(i, m, ahead)
    if dot < MODE3_DOT - VRAM_READ_LEAD:
        return False
    if dot < MODE3_DOT:
        return read and m.st[i, S_MODE] != PH_LCDON
    line = m.st[i, S_LINE] + (m.st[i, S_PPU_DOT] + ahead) // LINE_DOTS
    return dot < mode3_end(i, m, line)


VRAM_OPEN_LCD_OFF = wp.constant(1 << 30)
""":func:`vram_write_open_until` with the LCD off: no write is blocked until an IO write (the
LCDC write that switches it on) clears the bound."""


@wp.func
def vram_write_open_until(i: int, m: wp.ref[Mem], t: int) -> int:
    """For a CPU write to VRAM at CPU T-cycle ``t`` (from the last catch-up) that was not
    blocked: the T-cycle before which no VRAM write can be blocked (:func:`vram_blocked`, writes:
    mode 3 of a visible line), i.e. dot 81 of this line or of the next visible one. 0 (no
    bound) in double speed, with VRAM bank 1 mapped and with PyBoy's timing."""
    i = console(i)
    if vram_unbounded(i, m):
        return 0
    if not lcd_on(i, m):
        return VRAM_OPEN_LCD_OFF
    at = line_dot_at(i, m, t)
    return vram_open_from(t, at[0], at[1])


@wp.func
def vram_unbounded(i: int, m: wp.ref[Mem]) -> bool:
    """No VRAM bound is kept (:func:`vram_write_open_until` gives 0): double speed, VRAM bank 1
    mapped, PyBoy's timing."""
    i = console(i)
    return m.st[i, S_SPEED] != 0 or m.st[i, S_VBK] != 0 or pyboy(i, m)


@wp.func
def vram_open_from(t: int, line: int, x: int) -> int:
    """The VRAM bound for a write that was not blocked at CPU T-cycle ``t``, on ``line`` at dot
    ``x`` (single speed, LCD on): dot 81 of this line or of the next visible one."""
    if line < VBLANK_LINE and x < MODE3_DOT:
        return t + MODE3_DOT - x
    if line + 1 < VBLANK_LINE:
        return t + LINE_DOTS - x + MODE3_DOT
    return t + (FRAME_LINES - line) * LINE_DOTS - x + MODE3_DOT


@wp.func
def stat_read(i: int, m: wp.ref[Mem], t: int) -> int:
    """STAT as the CPU reads it at CPU T-cycle ``t`` (:func:`ppu_value`), storing the VRAM bound
    a mode other than 3 gives (:func:`vram_open_seen_at`) from the same line and dot."""
    i = console(i)
    if not lcd_on(i, m):
        return ppu_value(i, m, R_STAT, dots(i, m, t))
    at = line_dot_at(i, m, dots(i, m, t))
    v = ppu_value_at(i, m, R_STAT, at[0], at[1])
    vram_open_seen_at(i, m, t, v, at[0], at[1])
    return v


@wp.func
def vram_open_seen(i: int, m: wp.ref[Mem], t: int, stat: int):
    """The CPU read STAT as ``stat`` at CPU T-cycle ``t`` with the LCD on: a mode other than 3
    says that a VRAM write would not be blocked there, so the bus's VRAM bound (``VRAM_OPEN``)
    is what such a write stores (:func:`vram_write_open_until`). The usual wait before a tile
    write (poll STAT until mode 0 or 1, then write VRAM) then writes in place, not out of line.
    Used at the exit of a STAT wait the fast-forward skipped; :func:`stat_read` calls
    :func:`vram_open_seen_at` with the line and dot it already has."""
    i = console(i)
    if lcd_on(i, m):
        at = line_dot_at(i, m, dots(i, m, t))
        vram_open_seen_at(i, m, t, stat, at[0], at[1])


@wp.func
def vram_open_seen_at(i: int, m: wp.ref[Mem], t: int, stat: int, line: int, x: int):
    """:func:`vram_open_seen` with the LCD on, at ``line`` and dot ``x`` (those of ``t``)."""
    i = console(i)
    if (stat & 3) != 3 and not vram_unbounded(i, m):
        m.st[i, S_VRAM_OPEN] = vram_open_from(t, line, x)


@wp.func
def oam_read_blocked(i: int, m: wp.ref[Mem], ahead: int) -> bool:
    """OAM reads give FF from the start of a line (mode 2, and its first M-cycle, where STAT
    still shows mode 0) to the end of mode 3; on the line the LCD was switched on, in mode 3 only."""
    i = console(i)
    dot = visible_at(i, m, ahead)
    if dot < 0:
        return False
    if dot < MODE3_DOT:
        return m.st[i, S_MODE] != PH_LCDON
    line = m.st[i, S_LINE] + (m.st[i, S_PPU_DOT] + ahead) // LINE_DOTS
    return dot < mode3_end(i, m, line)


@wp.func
def oam_write_blocked(i: int, m: wp.ref[Mem], ahead: int) -> bool:
    """OAM writes are dropped in mode 2 and mode 3, but pass in the first M-cycle of a line and
    in the last M-cycle before mode 3 (lcdon_write_timing); on the line the LCD was switched on, in mode 3 only."""
    i = console(i)
    dot = visible_at(i, m, ahead)
    if dot < MODE2_DOT:
        return False
    if dot < MODE3_DOT - VRAM_READ_LEAD:
        return m.st[i, S_MODE] != PH_LCDON
    if dot < MODE3_DOT:
        return False
    line = m.st[i, S_LINE] + (m.st[i, S_PPU_DOT] + ahead) // LINE_DOTS
    return dot < mode3_end(i, m, line)


@wp.func
def irq_mode(i: int, m: wp.ref[Mem]) -> int:
    """The mode the STAT interrupt sources see in the current phase (-1: none, after LCD on)."""
    i = console(i)
    ph = m.st[i, S_MODE]
    line = m.st[i, S_LINE]
    if ph == PH_START:
        if line == 0 or line > VBLANK_LINE:
            return 1
        return 0
    if ph == PH_LCDON:
        return -1
    if ph == PH_COARSE:
        return 3  # refined before any STAT source could see it (see ppu_refine)
    return ph


@wp.func
def irq_lyc(i: int, m: wp.ref[Mem]) -> int:
    """The LY value the LY=LYC interrupt source compares now (-1: none), IRQ_LAG behind
    :func:`lyc_cmp_at`."""
    i = console(i)
    line = m.st[i, S_LINE]
    if pyboy(i, m) or line == 0:
        return line
    if m.st[i, S_MODE] == PH_START:
        return -1
    if line == LAST_LINE and m.st[i, S_PPU_DOT] >= LYC0_IRQ_DOT:
        return 0
    return line


@wp.func
def oam_lead(i: int, m: wp.ref[Mem]) -> bool:
    """DMG, CPU running: the OAM STAT source of lines 1-143 is already up, from dot
    :data:`OAM_LEAD_DOT` of the line before to the line's interrupt point (a halted CPU does not
    see the early rise; the Color and PyBoy timings have none)."""
    i = console(i)
    if pyboy(i, m) or m.st[i, S_CGB] == MODEL_CGB or m.st[i, S_HALTED] != 0:
        return False
    ph = m.st[i, S_MODE]
    line = m.st[i, S_LINE]
    if ph == PH_HBLANK:
        return line + 1 < VBLANK_LINE and m.st[i, S_PPU_DOT] >= OAM_LEAD_DOT
    if ph == PH_START:
        return line > 0 and line < VBLANK_LINE
    return False


@wp.func
def hblank_next(i: int, m: wp.ref[Mem], line: int) -> int:
    """Dot of the next event in ``line``'s HBlank: the OAM source's early point
    (:func:`oam_lead`) when that source is on and the next line is visible, else the line's
    end."""
    i = console(i)
    if (line + 1 < VBLANK_LINE and (m.st[i, S_STAT_EN] & STAT_OAM) != 0 and not pyboy(i, m)
            and m.st[i, S_CGB] != MODEL_CGB and m.st[i, S_PPU_DOT] < OAM_LEAD_DOT):
        return OAM_LEAD_DOT
    return LINE_DOTS


@wp.func(inline=False)
def stat_update(i: int, m: wp.ref[Mem], oam_quirk: int):
    """Recompute the STAT interrupt line; its rising edge requests the LCD STAT interrupt.

    The line is the OR of the enabled sources, so a source rising while another holds the line
    high requests nothing ("STAT blocking"). ``oam_quirk``: line 144 also raises the mode 2
    source at the VBlank point, with the VBlank interrupt (vblank_stat_intr). With the LCD off
    the line keeps its level.
    """
    i = console(i)
    if not lcd_on(i, m):
        return
    sig = stat_signal(i, m, oam_quirk)
    if sig == 1 and m.st[i, S_STAT_LINE] == 0:
        raise_irq(i, m, IRQ_STAT)
    m.st[i, S_STAT_LINE] = sig


@wp.func
def stat_signal(i: int, m: wp.ref[Mem], oam_quirk: int) -> int:
    """The STAT interrupt line's level in the current phase (LCD on): 1 if an enabled source is
    active (see :func:`stat_update`)."""
    i = console(i)
    sig = 0
    en = m.st[i, S_STAT_EN]
    mode = irq_mode(i, m)
    if (en & STAT_HBLANK) != 0 and mode == 0:
        sig = 1
    if (en & STAT_VBLANK) != 0 and mode == 1:
        sig = 1
    if (en & STAT_OAM) != 0 and (mode == 2 or oam_quirk != 0 or oam_lead(i, m)):
        sig = 1
    if (en & STAT_LYC) != 0 and irq_lyc(i, m) == int(m.hram[i, R_LYC]):
        sig = 1
    return sig


@wp.func(inline=False)
def clear_obs(i: int, m: wp.ref[Mem]):
    """Blank the env's packed2 observation and framebuffer (LCD off shows shade 0; white in
    the Color's RGB555 frame).

    With ``PYBOY_TIMING`` the blank is BGP colour 0, as PyBoy paints it (not hardware).
    """
    i = console(i)
    shade = 0
    if m.st[i, S_PYBOY_TIMING] != 0:
        shade = int(m.hram[i, R_BGP]) & 3
    for y in range(72):
        for x in range(20):
            m.obs[i, 0, y, x] = wp.uint8(shade * 0x55)
    for y in range(144):
        for x in range(160):
            m.fb[i, y, x] = wp.uint8(shade)
    if m.st[i, S_CGB] != MODEL_DMG:
        for y in range(144):
            clear_line_cgb(i, m, y)


@wp.func
def next_ppu_line(i: int, m: wp.ref[Mem], line: int, limit: int) -> int:
    """Next line (<= ``limit``) whose start must be an event: ``limit`` or the LYC line (and the
    line after it, where the LY=LYC signal drops) when the LYC STAT interrupt is enabled.

    LYC = 0 makes line 153 an event: LY=LYC matches 0 there already (LY reads 0 from its dot
    1, see :func:`lyc_cmp_at`), so the interrupt comes on line 153, not at the frame wrap."""
    i = console(i)
    target = limit
    if (m.st[i, S_STAT_EN] & STAT_LYC) != 0:
        lyc = int(m.hram[i, R_LYC])
        if lyc == line:
            target = line + 1
        elif lyc > line and lyc < limit:
            target = lyc
        elif lyc == 0 and limit == FRAME_LINES and line < LAST_LINE and not pyboy(i, m):
            target = LAST_LINE
    return target


@wp.func
def run_end(i: int, m: wp.ref[Mem], line: int, limit: int) -> int:
    """Dot (from the start of ``line``) where a run of lines from ``line`` ends: the start of
    the next line that matters (:func:`next_ppu_line`), at most line ``limit`` (VBlank's for a
    coarse run of visible lines, the frame's end for VBlank lines)."""
    i = console(i)
    return LINE_DOTS * (next_ppu_line(i, m, line, limit) - line)


@wp.func
def observed(i: int, m: wp.ref[Mem]) -> bool:
    """Whether anything watches the modes of visible lines (a packed frame is drawn, an
    HBlank / OAM STAT source is on, or a Color HBlank HDMA runs): if not, they are skipped a run of lines at a time."""
    i = console(i)
    return (m.st[i, S_PACK] != 0 or (m.st[i, S_STAT_EN] & (STAT_HBLANK | STAT_OAM)) != 0
            or m.st[i, S_HDMA] != 0)


@wp.func
def mode0_irq_dot(i: int, m: wp.ref[Mem], line: int) -> int:
    """Dot of the mode 0 interrupt (and of drawing the line): IRQ_LAG after mode 0 shows.

    PyBoy: 252, or 256 with a fine scroll (mid-line SCX writes then land as in PyBoy).
    """
    i = console(i)
    if pyboy(i, m):
        if (int(m.hram[i, R_SCX]) & 7) != 0:
            return PYBOY_MODE0_DOT + 4
        return PYBOY_MODE0_DOT
    return mode3_end(i, m, line) + IRQ_LAG


@wp.func
def vblank_next(i: int, m: wp.ref[Mem], line: int) -> int:
    """Dot of the next event on VBlank ``line``: line 153's second LY=LYC compare point when
    it matters, else the end of the line (or of a run of lines up to the next LYC line)."""
    i = console(i)
    if (not pyboy(i, m) and line == LAST_LINE and m.st[i, S_PPU_DOT] < LYC0_IRQ_DOT
            and (m.st[i, S_STAT_EN] & STAT_LYC) != 0):
        return LYC0_IRQ_DOT
    return run_end(i, m, line, FRAME_LINES)


@wp.func
def line_start_restored(i: int, m: wp.ref[Mem]) -> bool:
    """Before dot 3 of a line whose line-start point was handled at dot 0 as quiet
    (:func:`quiet_line_start`): restore that point as an event, and the STAT line's level
    before it (the HBlank source still high), so a STAT, LYC or LCDC write in between sees
    the line as the hardware has it. Returns whether it did."""
    i = console(i)
    ph = m.st[i, S_MODE]
    if (not pyboy(i, m) and lcd_on(i, m) and m.st[i, S_PPU_DOT] < LINE_IRQ_DOT
            and ph != PH_LCDON and ph != PH_START):
        m.st[i, S_MODE] = PH_START
        m.st[i, S_PPU_NEXT] = LINE_IRQ_DOT
        m.st[i, S_STAT_LINE] = stat_signal(i, m, 0)
        return True
    return False


@wp.func(inline=False)
def ppu_refine(i: int, m: wp.ref[Mem]):
    """Switch a coarse run of lines to per-mode events at the current dot (after a STAT or LYC
    write, which may make the modes or the LYC line observable)."""
    i = console(i)
    line = m.st[i, S_LINE]
    ph = m.st[i, S_MODE]
    dot = m.st[i, S_PPU_DOT]
    if line_start_restored(i, m):
        return
    if line >= VBLANK_LINE:
        if pyboy(i, m) or ph == PH_VBLANK:
            m.st[i, S_PPU_NEXT] = wp.min(vblank_next(i, m, line), LINE_DOTS)
    elif pyboy(i, m):
        if lcd_on(i, m):
            # PyBoy timing: back to the mode's own event (mode 3 ends at 252 here)
            if dot < PYBOY_MODE3_DOT:
                m.st[i, S_MODE] = PH_OAM
                m.st[i, S_PPU_NEXT] = PYBOY_MODE3_DOT
            elif dot < PYBOY_MODE0_DOT:
                m.st[i, S_MODE] = PH_DRAW
                m.st[i, S_PPU_NEXT] = PYBOY_MODE0_DOT
            else:
                m.st[i, S_MODE] = PH_HBLANK
                m.st[i, S_PPU_NEXT] = LINE_DOTS
    elif ph == PH_COARSE and lcd_on(i, m):
        if dot < MODE3_DOT:
            m.st[i, S_MODE] = PH_OAM
            m.st[i, S_PPU_NEXT] = MODE3_DOT
        else:
            e0 = mode0_irq_dot(i, m, line)
            if dot < e0:
                m.st[i, S_MODE] = PH_DRAW
                m.st[i, S_PPU_NEXT] = e0
            else:
                m.st[i, S_MODE] = PH_HBLANK
                m.st[i, S_PPU_NEXT] = hblank_next(i, m, line)
    elif ph == PH_HBLANK and lcd_on(i, m):
        m.st[i, S_PPU_NEXT] = hblank_next(i, m, line)


@wp.func(inline=False)
def lyc_refine(i: int, m: wp.ref[Mem]):
    """After an LYC write: a coarse run of lines that nothing observes (:func:`observed`) past
    their line-start point only has to stop at the next line whose start matters for the new
    LYC (:func:`next_ppu_line`), so it goes on to that line; elsewhere :func:`ppu_refine`. (A
    raster handler that moves LYC on a few lines each time, in HBlank, then costs no events
    until the new LYC line.)"""
    i = console(i)
    if (m.st[i, S_MODE] == PH_COARSE and m.st[i, S_PPU_DOT] >= LINE_IRQ_DOT and lcd_on(i, m)
            and not pyboy(i, m) and not observed(i, m)):
        line = m.st[i, S_LINE]
        m.st[i, S_PPU_NEXT] = run_end(i, m, line, VBLANK_LINE)
        return
    ppu_refine(i, m)


@wp.func
def quiet_line_start(i: int, m: wp.ref[Mem], line: int) -> bool:
    """No STAT interrupt source can rise at the line-start point (dot 3) of ``line``: the mode 2
    and VBlank sources are off, and the LY=LYC source is off or LYC is neither this line nor
    the one before. The point is then handled at once at dot 0, saving an event. The HBlank
    source may be on: it only falls at that point, which moves to dot 0; a STAT, LYC or LCDC
    write before dot 3 brings the point and the level back (:func:`line_start_restored`)."""
    i = console(i)
    en = m.st[i, S_STAT_EN]
    if (en & (STAT_VBLANK | STAT_OAM)) != 0:
        return False
    if (en & STAT_LYC) == 0:
        return True
    lyc = int(m.hram[i, R_LYC])
    return lyc != line and lyc + 1 != line and not (line == 0 and lyc == LAST_LINE)


@wp.func
def pipe_run(i: int, m: wp.ref[Mem], line: int, to_dot: int, draw: bool):
    """ppu="fifo": run ``line``'s pixel pipeline up to ``to_dot`` (drawing if ``draw``) with the
    window state as it stands (the first frame after LCD on draws shade 0)."""
    i = console(i)
    wl = m.st[i, S_WIN_LINE]
    fifo_run(i, m, line, pipe_t0(line), to_dot, draw, (wl & WIN_BLANK) != 0, window_line(wl))


@wp.func(inline=False)
def fifo_finish(i: int, m: wp.ref[Mem], line: int):
    """ppu="fifo": draw the rest of ``line``'s pipeline (when one runs on it), advance the window
    line counter by what it drew and pack the line into the observation."""
    i = console(i)
    if m.st[i, S_FIFO_LINE] != line + 1:
        return
    m.st[i, S_FIFO_LINE] = 0
    if lcd_on(i, m) and m.st[i, S_PACK] != 0:
        wl = m.st[i, S_WIN_LINE]
        pipe_run(i, m, line, 1 << 20, True)
        win = m.st[i, S_FIFO_WIN]  # bit 1: the WY latch
        m.st[i, S_WIN_LINE] = (wl & WIN_BLANK) | window_state(window_line(wl) + window_rows(win),
                                                              (win & 2) != 0)
        if m.st[i, S_CGB] == MODEL_CGB_COMPAT:
            colour_line_compat(i, m, line, (wl & WIN_BLANK) != 0)
        if (line & 1) == 0:
            pack_line_packed2(i, line, m.fb, m.obs)


@wp.func(inline=False)
def end_of_mode3(i: int, m: wp.ref[Mem], line: int):
    """Mode 3 -> 0: render the line (if this frame is packed) and pack it into the observation."""
    i = console(i)
    m.st[i, S_MODE] = PH_HBLANK
    m.st[i, S_PPU_NEXT] = hblank_next(i, m, line)
    on = lcd_on(i, m)
    if m.st[i, S_FIFO_LINE] == line + 1:
        # ppu="fifo" and a register write landed in this line's mode 3: the pipeline's last
        # pixels leave after this point as a CPU write sees it (WRITE_LAG), so it is finished
        # at the end of the line (fifo_finish); writes until then still reach it
        if on and m.st[i, S_PACK] != 0:
            pipe_run(i, m, line, m.st[i, S_PPU_DOT] + WRITE_LAG, True)
    elif (on and m.st[i, S_PACK] != 0 and m.st[i, S_CGB] != MODEL_CGB and not pyboy(i, m)
          and dma_recent(i, m) and dma_ran_since(i, m, line_time(i, m, line))):
        # an OAM DMA ran in this line's OAM scan or mode 3: the pixel pipeline draws the line
        # (the entries the scan did not see, the byte pairs its object fetches read; oam_view)
        fifo_start(i, m, line, pipe_t0(line), m.st[i, S_WIN_LINE])
        fifo_finish(i, m, line)
    elif on and m.st[i, S_PACK] != 0:
        lcdc = int(m.hram[i, R_LCDC])
        if (m.st[i, S_WIN_LINE] & WIN_BLANK) != 0:
            lcdc = lcdc & 0x7F  # first frame after LCD on: the renderer draws shade 0
        wl = m.st[i, S_WIN_LINE]
        if m.st[i, S_STOPPED] == STOP_VRAM_LOCKED and m.st[i, S_CGB] != MODEL_DMG:
            stopped_line(i, m, line)  # a Color in STOP: VRAM reads FF for the PPU
        elif m.st[i, S_CGB] == MODEL_CGB:
            wl = render_line_cgb(i, m, line, lcdc, int(m.hram[i, R_SCX]), int(m.hram[i, R_SCY]),
                                 int(m.hram[i, R_WX]), int(m.hram[i, R_WY]), wl)
        elif m.st[i, S_CGB] == MODEL_CGB_COMPAT:
            wl = render_line_compat(i, m, line, lcdc, wl, (wl & WIN_BLANK) != 0)
        else:
            wl = render_scanline(
                i, line, m.vram, m.oam, lcdc, int(m.hram[i, R_SCX]),
                int(m.hram[i, R_SCY]), int(m.hram[i, R_WX]), int(m.hram[i, R_WY]),
                int(m.hram[i, R_BGP]), int(m.hram[i, R_OBP0]), int(m.hram[i, R_OBP1]),
                wl, m.fb,
            )
        m.st[i, S_WIN_LINE] = wl
        if (line & 1) == 0:
            pack_line_packed2(i, line, m.fb, m.obs)
    if on:
        if m.st[i, S_HDMA] != 0:
            hdma_hblank(i, m)  # Color: an HBlank HDMA copies a block at each HBlank
        stat_update(i, m, 0)


@wp.func(inline=False)
def line_irq_point(i: int, m: wp.ref[Mem], line: int):
    """Dot 3 of a line (hardware timing): the mode 2 (or 1) and LY=LYC interrupt sources switch
    to the new line; then schedule the rest of the line, or a coarse run of lines."""
    i = console(i)
    if line < VBLANK_LINE:
        m.st[i, S_MODE] = PH_OAM
        m.st[i, S_PPU_NEXT] = MODE3_DOT
        stat_update(i, m, 0)
        if not observed(i, m):
            m.st[i, S_MODE] = PH_COARSE
            m.st[i, S_PPU_NEXT] = run_end(i, m, line, VBLANK_LINE)
        return
    m.st[i, S_MODE] = PH_VBLANK
    m.st[i, S_PPU_NEXT] = vblank_next(i, m, line)
    stat_update(i, m, 0)


@wp.func(inline=False)
def ppu_event(i: int, m: wp.ref[Mem]):
    """Advance the PPU state machine to its next phase (see the ``PH_*`` phases).

    Hardware timing, visible line: dot 0 LY changes (PH_START), dot 3 mode 2 / LY=LYC
    interrupt point (PH_OAM), dot 81 mode 3 (PH_DRAW), :func:`mode0_irq_dot` mode 0 interrupt and
    the line is drawn (PH_HBLANK), dot 456 next line. The internal line counter keeps running
    while the LCD is off (so frames still end every 70224 T-cycles), but LY then reads 0 and no
    interrupts or pixels are produced.
    """
    i = console(i)
    on = lcd_on(i, m)
    mode = m.st[i, S_MODE]
    line = m.st[i, S_LINE]
    if mode == PH_START:
        if on:
            line_irq_point(i, m, line)
        else:
            # LCD off: nothing to observe until the frame ends (VBlank start, frame wrap)
            m.st[i, S_MODE] = PH_VBLANK
            m.st[i, S_PPU_NEXT] = LINE_DOTS * (FRAME_LINES - line)
            if line < VBLANK_LINE:
                m.st[i, S_MODE] = PH_COARSE
                m.st[i, S_PPU_NEXT] = LINE_DOTS * (VBLANK_LINE - line)
        return
    if mode == PH_OAM or mode == PH_LCDON:
        m.st[i, S_MODE] = PH_DRAW
        m.st[i, S_PPU_NEXT] = mode0_irq_dot(i, m, line)
        return
    if mode == PH_DRAW:
        end_of_mode3(i, m, line)
        return
    if mode == PH_HBLANK and m.st[i, S_PPU_NEXT] < LINE_DOTS:
        # the OAM source's early point (oam_lead), then the end of the line
        m.st[i, S_PPU_NEXT] = LINE_DOTS
        if on:
            stat_update(i, m, 0)
        return
    if mode == PH_VBLANK and m.st[i, S_PPU_DOT] < LINE_DOTS:
        # line 153's LY=LYC point for LY 0 (vblank_next)
        m.st[i, S_PPU_NEXT] = run_end(i, m, line, FRAME_LINES)
        if on:
            stat_update(i, m, 0)
        return
    # end of one or more lines (coarse scheduling may have skipped lines with nothing to observe)
    fifo_finish(i, m, line)
    dot = m.st[i, S_PPU_DOT]
    k = int(1)  # noqa: UP018 (Warp: a dynamic variable; one line ended, the usual case)
    if dot < LINE_DOTS or dot >= 2 * LINE_DOTS:
        k = dot // LINE_DOTS
    m.st[i, S_PPU_DOT] = dot - LINE_DOTS * k
    line = line + k
    if line >= FRAME_LINES:
        line = 0
        m.st[i, S_WIN_LINE] = 0
        m.st[i, S_PPU_M0] = 0
        m.st[i, S_FIFO_LINE] = 0
        if pyboy(i, m):
            m.st[i, S_FRAME_DONE] = 1  # PyBoy's tick() ends a frame here
    m.st[i, S_LINE] = line
    if line == VBLANK_LINE:
        if not pyboy(i, m):
            m.st[i, S_FRAME_DONE] = 1
        if on:
            raise_irq(i, m, IRQ_VBLANK)
            if (pyboy(i, m) and m.st[i, S_PACK] != 0
                    and (m.st[i, S_WIN_LINE] & WIN_BLANK) != 0):
                clear_obs(i, m)  # PyBoy blanks the first frame after LCD on with BGP colour 0
        elif m.st[i, S_PACK] != 0:
            clear_obs(i, m)
    if not pyboy(i, m):
        if on and quiet_line_start(i, m, line):
            line_irq_point(i, m, line)
        else:
            m.st[i, S_MODE] = PH_START
            m.st[i, S_PPU_NEXT] = LINE_IRQ_DOT
            if on and line == VBLANK_LINE:
                # the mode 2 source also fires at the VBlank point, with the VBlank interrupt
                # (mooneye vblank_stat_intr); its level drops at the line-start point (dot 3)
                stat_update(i, m, 1)
        return
    if line < VBLANK_LINE:
        m.st[i, S_MODE] = PH_OAM
        m.st[i, S_PPU_NEXT] = PYBOY_MODE3_DOT
        if not observed(i, m):
            m.st[i, S_MODE] = PH_COARSE
            m.st[i, S_PPU_NEXT] = run_end(i, m, line, VBLANK_LINE)
    else:
        m.st[i, S_MODE] = PH_VBLANK
        m.st[i, S_PPU_NEXT] = run_end(i, m, line, FRAME_LINES)
    if on:
        stat_update(i, m, 0)


@wp.func
def ppu_normalize(i: int, m: wp.ref[Mem]):
    """Fold whole lines of a coarse skip into LINE so LINE / PPU_DOT are the current LY / dot."""
    i = console(i)
    dot = m.st[i, S_PPU_DOT]
    if dot < LINE_DOTS:
        return  # (the usual case: no division)
    k = dot // LINE_DOTS
    m.st[i, S_LINE] = m.st[i, S_LINE] + k
    m.st[i, S_PPU_DOT] = dot - LINE_DOTS * k
    m.st[i, S_PPU_NEXT] = m.st[i, S_PPU_NEXT] - LINE_DOTS * k


@wp.func(inline=True)
def ppu_advance(i: int, m: wp.ref[Mem], c: int):
    """Advance the dot counter by ``c`` T-cycles, handling every PPU event due."""
    i = console(i)
    m.st[i, S_PPU_DOT] = m.st[i, S_PPU_DOT] + c
    while m.st[i, S_PPU_DOT] >= m.st[i, S_PPU_NEXT]:
        ppu_event(i, m)
    ppu_normalize(i, m)


@wp.func
def ppu_next_event(i: int, m: wp.ref[Mem]) -> int:
    """T-cycles to the next PPU event."""
    i = console(i)
    return m.st[i, S_PPU_NEXT] - m.st[i, S_PPU_DOT]


@wp.func
def ppu_read(i: int, m: wp.ref[Mem], r: int) -> int:
    """Read STAT or LY (``r`` = offset from FF00; the PPU already caught up)."""
    i = console(i)
    if not lcd_on(i, m):
        if r == R_STAT:
            return stat_off_value(i, m)
        return 0
    return ppu_value_at(i, m, r, m.st[i, S_LINE], m.st[i, S_PPU_DOT])


@wp.func(inline=False)
def lcdc_write(i: int, m: wp.ref[Mem], v: int):
    """LCDC: switching the LCD on starts line 0 (4 dots short, no mode 2: PH_LCDON); switching it
    off freezes the LY=LYC flag and the STAT interrupt line as they are."""
    i = console(i)
    line_start_restored(i, m)  # (switching off freezes the STAT line: its level before dot 3)
    old = int(m.hram[i, R_LCDC])
    m.hram[i, R_LCDC] = wp.uint8(v)
    if ((old ^ v) & LCDC_ON) != 0:
        m.st[i, S_FIFO_LINE] = 0
    if (old & LCDC_ON) == 0 and (v & LCDC_ON) != 0:
        m.st[i, S_LINE] = 0
        m.st[i, S_WIN_LINE] = WIN_BLANK
        m.st[i, S_PPU_M0] = 0
        if pyboy(i, m):
            m.st[i, S_PPU_DOT] = 0
            m.st[i, S_MODE] = PH_OAM
            m.st[i, S_PPU_NEXT] = PYBOY_MODE3_DOT
            m.st[i, S_STAT_LINE] = 0
        else:
            m.st[i, S_PPU_DOT] = LCD_ON_DOT
            m.st[i, S_MODE] = PH_LCDON
            m.st[i, S_PPU_NEXT] = MODE3_DOT
            m.st[i, S_STAT_EN] = m.st[i, S_STAT_EN] & STAT_SOURCES
        stat_update(i, m, 0)
    if (old & LCDC_ON) != 0 and (v & LCDC_ON) == 0:
        if pyboy(i, m):
            m.st[i, S_STAT_LINE] = 0
            # PyBoy's frame protocol: LCD off ends the frame (blank) and restarts the frame
            # clock, so later frames end every 70224 T-cycles from here
            m.st[i, S_LINE] = 0
            m.st[i, S_PPU_DOT] = 0
            m.st[i, S_MODE] = PH_OAM
            m.st[i, S_PPU_NEXT] = PYBOY_MODE3_DOT
            m.st[i, S_FRAME_DONE] = 1
            if m.st[i, S_PACK] != 0:
                clear_obs(i, m)
        else:
            # the LY=LYC flag keeps its value while the LCD is off (stat_lyc_onoff)
            flag = 0
            if lyc_cmp_at(i, m, m.st[i, S_LINE], m.st[i, S_PPU_DOT]) == int(m.hram[i, R_LYC]):
                flag = STAT_LYC_FLAG
            m.st[i, S_STAT_EN] = (m.st[i, S_STAT_EN] & STAT_SOURCES) | flag
            # no mode events while the LCD is off: on to the end of the line
            m.st[i, S_MODE] = PH_VBLANK
            if m.st[i, S_LINE] < VBLANK_LINE:
                m.st[i, S_MODE] = PH_COARSE
            m.st[i, S_PPU_NEXT] = LINE_DOTS


@wp.func(inline=False)
def ppu_write(i: int, m: wp.ref[Mem], r: int, v: int):
    """Write LCDC, STAT or LYC (LY is read-only); other PPU registers are plain ``hram`` bytes."""
    i = console(i)
    if r == R_LCDC:
        lcdc_write(i, m, v)
    elif r == R_STAT:
        ppu_refine(i, m)
        if m.st[i, S_CGB] == MODEL_DMG and lcd_on(i, m):
            # the DMG's STAT write bug: for one cycle every source is enabled, so a write in
            # mode 0, 1 or 2 or with LY = LYC requests the interrupt unless the line was high
            # (Pan Docs "STAT modes"; SameSuite ppu/stat_lcd_off: not with the LCD off, nor on
            # the Color)
            m.st[i, S_STAT_EN] = STAT_SOURCES | (m.st[i, S_STAT_EN] & STAT_LYC_FLAG)
            stat_update(i, m, 0)
        m.st[i, S_STAT_EN] = (v & STAT_SOURCES) | (m.st[i, S_STAT_EN] & STAT_LYC_FLAG)
        stat_update(i, m, 0)
    elif r == R_LYC:
        m.hram[i, r] = wp.uint8(v)
        lyc_refine(i, m)
        stat_update(i, m, 0)


@wp.func
def lcd_register(r: int) -> bool:
    """Whether IO register ``r`` is read by the pixel pipeline (LCDC, SCY, SCX, BGP, OBP0, OBP1,
    WY, WX)."""
    return r == R_LCDC or r == R_SCY or r == R_SCX or (r >= R_BGP and r <= R_WX)


@wp.func
def lcd_write_is_plain(i: int, m: wp.ref[Mem]) -> bool:
    """Whether a write to an LCD register other than LCDC (SCY, SCX, BGP, OBP0, OBP1, WY, WX) is
    a plain store now, so the console need not catch up for it.

    No catch-up reads these registers: the PPU reads them at its events (mode 3's count, the
    line's drawing) and no event is due before ``NEXT``. What makes such a write more than a
    store is where it lands: in mode 3, or in HBlank while a pixel pipeline still has the line's
    last pixels to draw (:func:`ppu_fifo_write`). The phase rules those out: every phase but
    ``PH_DRAW``, and ``PH_HBLANK`` with no pipeline running on the line and none that a write
    could start (no packed frame, or the whole-line renderer).
    """
    i = console(i)
    ph = m.st[i, S_MODE]
    if ph == PH_DRAW:
        return False
    if ph == PH_HBLANK:
        return (m.st[i, S_FIFO_LINE] != m.st[i, S_LINE] + 1
                and (m.st[i, S_PACK] == 0 or m.st[i, S_PPU_FIFO] == 0))
    return True


@wp.func
def write_lag(r: int) -> int:
    """Dots from a write to LCD register ``r`` to the first pipeline dot that sees it."""
    if r == R_WX:
        return WX_WRITE_LAG
    return WRITE_LAG


@wp.func(inline=False)
def redo_with_pipeline(i: int, m: wp.ref[Mem], line: int):
    """ppu="fifo": take back the whole-line renderer's window line count for ``line`` (it is
    redrawn through the pipeline, whose end, :func:`fifo_finish`, counts it again). Whether the
    window was drawn is the pipeline's own answer for the registers as they are (unchanged since
    mode 3 ended: this is the line's first such write)."""
    i = console(i)
    wl = m.st[i, S_WIN_LINE]
    fifo_start(i, m, line, pipe_t0(line), wl)
    fifo_run(i, m, line, pipe_t0(line), 1 << 20, False, False, window_line(wl))
    drew = m.st[i, S_FIFO_WIN] & 1
    m.st[i, S_WIN_LINE] = (wl & ~WIN_COUNT_MASK) | ((window_line(wl) - drew) & WIN_COUNT_MASK)
    m.st[i, S_FIFO_LINE] = 0


LCDC_LATE_BITS = wp.constant(LCDC_OBJ_ON | LCDC_BG_ON)
"""LCDC bits that a mode-3 write changes one dot after the others: LCDC.1 (mealybug
m3_lcdc_obj_en_change_variant's reference) and LCDC.0 (m3_lcdc_bg_en_change's: the background
blanks and returns one pixel later than a same-dot read, in every band of its objects)."""


@wp.func(inline=False)
def ppu_fifo_write(i: int, m: wp.ref[Mem], r: int, v: int):
    """ppu="fifo": write LCD register ``r`` (:func:`lcd_register`) so that it takes effect on the
    right pixel when it lands in mode 3 of a visible line (hardware timing), or after it while
    the pipeline's last pixels are still to leave (see :func:`fifo_finish`).

    The pixel pipeline (:mod:`~.fifo`, started at mode-3 start on this line's first such write)
    first runs up to the write's dot with the old value; then the write applies and this line's
    mode-3 end is re-derived from the pipeline with the new registers (``PPU_M0``, and the mode 0
    event). Elsewhere it is a plain write.
    """
    i = console(i)
    line = m.st[i, S_LINE]
    dot = m.st[i, S_PPU_DOT]
    active = False
    dmg_palette = r >= R_BGP and r <= R_OBP1
    if (lcd_on(i, m) and not pyboy(i, m) and line < VBLANK_LINE and dot >= MODE3_DOT
            and not (dmg_palette and m.st[i, S_CGB] == MODEL_CGB)):
        # (Color mode draws from palette memory: BGP, OBP0 and OBP1 change no pixel)
        # in mode 3, or after it while the pipeline's last pixels are still to leave
        if m.st[i, S_MODE] == PH_DRAW:
            active = True
        elif m.st[i, S_MODE] == PH_HBLANK and m.st[i, S_FIFO_LINE] == line + 1:
            active = True
        elif (m.st[i, S_MODE] == PH_HBLANK and m.st[i, S_PACK] != 0
              and dot + write_lag(r) < mode3_end(i, m, line) - MODE3_DOT + pipe_t0(line)):
            # the whole-line renderer drew this line, but the write reaches its last pixels:
            # the line is redrawn through the pipeline (and finished at the end of the line)
            active = True
            redo_with_pipeline(i, m, line)
    wl = m.st[i, S_WIN_LINE]
    if active:
        if m.st[i, S_FIFO_LINE] != line + 1:
            fifo_start(i, m, line, pipe_t0(line), wl)
        draw = m.st[i, S_PACK] != 0
        pipe_run(i, m, line, dot + write_lag(r), draw)
        if dmg_palette and m.st[i, S_CGB] == MODEL_DMG:
            # DMG: on the dot of a palette write the pixel sees the old and new values ORed (a
            # Color, running a DMG cartridge, shows the new value there: daid ppu_scanline_bgp)
            m.hram[i, r] = wp.uint8(int(m.hram[i, r]) | v)
            pipe_run(i, m, line, dot + WRITE_LAG + 1, draw)
        late = (int(m.hram[i, r]) ^ v) & LCDC_LATE_BITS
        if r == R_LCDC and late != 0:
            # the object and background enable bits reach the pixel mixer (and the object
            # trigger) one dot after the other LCDC bits; an object fetch in progress is
            # abandoned on the write's dot
            m.hram[i, r] = wp.uint8((v & ~late) | (int(m.hram[i, r]) & late))
            if (late & LCDC_OBJ_ON) != 0 and (v & LCDC_OBJ_ON) == 0:
                fifo_abandon_object(i, m)
            pipe_run(i, m, line, dot + WRITE_LAG + 1, draw)
    if r == R_LCDC:
        lcdc_write(i, m, v)
    else:
        m.hram[i, r] = wp.uint8(v)
    if active and lcd_on(i, m) and m.st[i, S_MODE] == PH_DRAW and dot < mode3_end(i, m, line):
        e = fifo_dry_end(i, m, line, pipe_t0(line), window_line(wl)) + MODE3_DOT - pipe_t0(line)
        m.st[i, S_PPU_M0] = ((line + 1) << 9) | e
        m.st[i, S_PPU_NEXT] = e + IRQ_LAG
