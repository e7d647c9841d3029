"""Mode-3 pixel pipeline (``ppu="fifo"``): background/window fetcher, pixel FIFOs, object fetches.

The whole-line renderer (:mod:`~.render`) draws a line from the registers as they are at the end
of mode 3, so a register write in the middle of mode 3 takes effect on the whole line. This
module draws a line dot by dot as the hardware does, so such a write takes effect from the pixel
it reaches. It is only run on lines where a write to an LCD register lands in mode 3
(:func:`~.ppu.ppu_fifo_write`): the pipeline catches up to the write's dot with the old
registers, then the write applies; at the end of the line it finishes the line. Lines without
such a write use the whole-line renderer, which gives the same pixels and the same mode-3 length for
constant registers (``test/emulator/test_ppu_fifo.py`` checks both on random scenes).

Model (``t`` = dots since mode 3 started; facts: Pan Docs "Pixel FIFO", "Mode 3 length"; the
Cycle-Accurate Game Boy Docs; mattcurrie's mealybug-tearoom tests for the read points):

* ``t`` 0-3: the first (discarded) tile fetch; nothing observable.
* ``t`` = 4: the BG FIFO holds 8 invisible pixels (screen x -8..-1) and the fetcher starts tile 0.
  A fetch is 6 dots of three 2-dot steps, each reading on its first dot: tile number (``TILE_AT``:
  LCDC.3 / LCDC.6, SCX, SCY), data low (``LO_AT``) and high (``HI_AT``: LCDC.4); the 8 pixels are
  pushed as soon as the BG FIFO is empty, and the next fetch starts in the same dot. So the first
  visible pixel leaves at ``t`` = 12, one pixel per dot.
* SCX & 7 (read at ``FINE_AT``) pixels of the first tile are discarded, one per dot.
* Window: checked every dot outside object fetches, after the shifter. When it is enabled (LCDC.5
  and LCDC.0), WY matched LY this frame and the next pixel is screen x = WX - 7 (for WX < 7 among
  the invisible pixels: the window's first 7 - WX pixels are unseen), or WX - 6 (a match missed
  while LCDC.5 was off), the BG FIFO is cleared and the fetcher restarts on window tile 0: 6 dots
  without pixels, 7 for WX = 0 with SCX & 7 > 0 (the window "activating one T-cycle later when WX
  = 0 and SCX > 0", mealybug m3_window_timing_wx_0). LCDC.5 off at a fetch start sends the fetcher
  back to the background. Each start after the first on the same line (LCDC.5 set again, WX ahead
  of the pixel) draws the next window row, and the window line counter advances once per start
  (mealybug m3_lcdc_win_en_change_multiple's source). DMG WX glitch: a WX match that does not
  start the window (it already started on this line, or LCDC.5 is off after the window was drawn
  earlier in the frame), on the dot of a tile-number read with 8 pixels in the BG FIFO (not on the
  window's first fetch), puts a colour-0 pixel in front of the BG FIFO; the match position counts
  the fine-scroll discards from -(SCX & 7).
* Objects: the first 10 objects of the OAM scan, by X then OAM index; one at X (X < 168) is
  fetched when the pixel counter (invisible and discarded pixels included) reaches X + SCX & 7 (X
  = 0: at once), unless LCDC.1 is off then. The shifter stops for 6 dots plus what the BG fetcher
  still needs to finish its tile (``5 - offset`` for the first object on a tile, 0 after); LCDC.1
  cleared before the stall ends abandons the fetch on the write's dot (the shifter resumes, the
  object is not drawn: :func:`fifo_abandon_object`); the object's low data byte is read
  ``OBJ_LO_LEFT`` dots before the end with LCDC.2 (the height) as it is then, the high byte at the
  end with LCDC.2 then (a height change between them mixes two rows), and the row is merged into
  the OBJ FIFO where it is transparent.
* Each pixel leaving: BG colour 0 if LCDC.0 is clear; the object pixel wins if LCDC.1 is set, it
  is opaque, and it is not behind a non-zero BG colour; BGP / OBP0 / OBP1 are read as it leaves,
  except that the object of pixel 0 (the line's head) is mixed ``HEAD_LINGER`` dot later.

State (``S_FIFO_*`` words; ``S_FIFO_LINE`` is line + 1 while valid): ``DOT`` next dot to run,
``KP`` pixels popped (all), ``SX`` screen x of the next pixel (-8 while invisible; 160 when done,
``DOT`` then holds the end dot), ``FETCH`` fetcher dots done (0-6) | window flag << 4 | one idle
dot to come (``FETCH_IDLE``) | tile counter << 8, ``TILE/LO/HI`` the fetched bytes, ``BG`` 2-bit
colours (next in the low bits) | count << 20 (up to 9 pixels), ``OBJ`` 8 x 4-bit object pixels
(colour, palette, behind-BG), ``STALL`` object fetch dots left | 16-high at the low byte << 8,
``OBJN`` objects handled, ``WIN`` window drawn on this line (1) | WY latch (2) | no pixel left
since the window started (4) | starts again << ``WIN_AGAIN_SHIFT`` (2 bits) | pixels to drop << 8,
``FINE`` SCX & 7 | discarded << 4, ``OBJH`` object height at the OAM scan | pixel 0's object
waiting to be mixed again << ``HEAD_SHIFT`` (dots left, object pixel, BG colour, a marker,
LCDC.0 when it left).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    CGBX_BGPAL,
    CGBX_OBJPAL,
    CGBX_VRAM1,
    FIFO_WORDS,
    MODEL_CGB,
    MODEL_CGB_COMPAT,
    S_CGB,
    S_FIFO_BG,
    S_FIFO_DOT,
    S_FIFO_FETCH,
    S_FIFO_FINE,
    S_FIFO_HI,
    S_FIFO_KP,
    S_FIFO_LINE,
    S_FIFO_LO,
    S_FIFO_OBJ,
    S_FIFO_OBJH,
    S_FIFO_OBJN,
    S_FIFO_STALL,
    S_FIFO_SX,
    S_FIFO_TILE,
    S_FIFO_WIN,
    S_PACK,
)
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.oam_view import (
    fetch_byte,
    hidden_entry,
    latch_x,
    latch_y,
    scan_hidden,
    this_line_time,
)
from torchrl_dreamer.emulator.registers import (
    R_BGP,
    R_LCDC,
    R_OBP0,
    R_OBP1,
    R_OPRI,
    R_SCX,
    R_SCY,
    R_WX,
    R_WY,
)
from torchrl_dreamer.emulator.render import ObjectKeys, obj_on_line, row_pixel, window_enabled
from torchrl_dreamer.emulator.render_cgb import (
    WHITE,
    bg_over_object,
    palette_colour,
    rgb555_shade,
    tile_byte,
)
from torchrl_dreamer.emulator.speed import cpu_cycles

__all__ = ["fifo_start", "fifo_run", "fifo_dry_end", "fifo_abandon_object", "window_rows",
           "FIFO_START_T"]

FIFO_START_T = wp.constant(4)  # t at which the invisible pixels sit in the BG FIFO
TILE_AT = wp.constant(0)  # fetcher dot (0-5) that reads the tile number
LO_AT = wp.constant(2)  # ... the tile data low byte
HI_AT = wp.constant(4)  # ... the tile data high byte
FINE_AT = wp.constant(4)  # t at which SCX & 7 is read
FETCH_DOTS = wp.constant(6)
OBJ_FETCH_DOTS = wp.constant(6)
OBJ_LO_LEFT = wp.constant(2)  # stall dots left when an object's low data byte is fetched
SCREEN_W = wp.constant(160)
BG_COUNT = wp.constant(20)  # BG FIFO word: pixel count from this bit, 2-bit colours below
BG_PIXELS = wp.constant(0x3FFFF)
BG_ATTR = wp.constant(24)  # BG FIFO word (Color mode): the tile's palette | priority << 3 from here
BG_ATTR_BITS = wp.constant(0xF000000)
WIN_LATE = wp.constant(6)  # sx + WIN_LATE == WX: a missed window match still triggers
WIN_FRESH = wp.constant(4)  # WIN word: the window started and no pixel has left since
WIN_AGAIN_SHIFT = wp.constant(4)  # WIN word: times the window started again (2 bits from here)
HEAD_LINGER = wp.constant(1)  # dots after pixel 0 leaves at which it is mixed again
KEY_Y_SHIFT = wp.constant(14)  # object key: X * 64 + OAM index | (latched Y + 1) << 14 (0: own Y)
KEY_ORDER = wp.constant((1 << 14) - 1)  # the key's priority part (X, then index)
HEAD_SHIFT = wp.constant(8)  # OBJH word: pixel 0's pending object mix from this bit
FETCH_IDLE = wp.constant(32)  # FETCH word: the fetcher waits one dot before its next step

_vec16i = wp.types.vector(length=16, dtype=wp.int32)


@wp.func
def fifo_start(i: int, m: wp.ref[Mem], line: int, dot: int, win_state: int):
    """Start the pipeline for ``line`` at mode-3 dot ``dot`` (t = 0) with the window state word
    of :mod:`~.render` (its WY latch and line counter)."""
    i = console(i)
    lcdc = int(m.hram[i, R_LCDC])
    m.st[i, S_FIFO_LINE] = line + 1
    m.st[i, S_FIFO_DOT] = dot
    m.st[i, S_FIFO_KP] = 0
    m.st[i, S_FIFO_SX] = -8
    m.st[i, S_FIFO_FETCH] = 0
    m.st[i, S_FIFO_TILE] = 0
    m.st[i, S_FIFO_LO] = 0
    m.st[i, S_FIFO_HI] = 0
    m.st[i, S_FIFO_BG] = 0
    m.st[i, S_FIFO_OBJ] = 0
    m.st[i, S_FIFO_STALL] = 0
    m.st[i, S_FIFO_OBJN] = 0
    latch = 0
    if (win_state & 0x100) != 0 or line == int(m.hram[i, R_WY]):
        latch = 2
    m.st[i, S_FIFO_WIN] = latch
    m.st[i, S_FIFO_FINE] = 0
    h = 8
    if (lcdc & 4) != 0:
        h = 16
    m.st[i, S_FIFO_OBJH] = h
    if m.st[i, S_CGB] == MODEL_CGB and m.st[i, S_PACK] != 0:
        for x in range(SCREEN_W):
            m.rgb[i, line, x] = wp.int16(0)  # Color mode: no object pixel ahead yet (load_object)


@wp.func
def bg_count(bg: int) -> int:
    """Pixels in the BG FIFO word ``bg``."""
    return (bg >> BG_COUNT) & 15


@wp.func
def object_key(i: int, m: wp.ref[Mem], line: int, h: int, s: int) -> int:
    """X * 64 + ``s`` if OAM entry ``s`` covers ``line`` (height ``h``), else -1."""
    i = console(i)
    if obj_on_line(int(m.oam[i, s * 4]), line, h):
        return int(m.oam[i, s * 4 + 1]) * 64 + s
    return -1

@wp.func
def fetch_bg_byte(i: int, m: wp.ref[Mem], line: int, fetch: int, tile: int, hi: int, win_count: int) -> int:
    """A tile data byte (low or high) for the fetcher's current tile, addressed with LCDC.4 and
    SCY (BG) or the window line counter as they are now. ``tile``: the tile number, and in Color
    mode its map attribute << 8 (tile data bank, Y flip)."""
    i = console(i)
    lcdc = int(m.hram[i, R_LCDC])
    row = (line + int(m.hram[i, R_SCY])) & 7
    if ((fetch >> 4) & 1) != 0:
        row = win_count & 7
    t = tile & 0xFF
    base = t * 16
    if (lcdc & 0x10) == 0:
        base = 0x800 + (t ^ 0x80) * 16
    if tile > 0xFF:  # Color mode, an attribute with a bank or a flip
        attr = tile >> 8
        if (attr & 0x40) != 0:
            row = 7 - row
        return tile_byte(i, m, (attr >> 3) & 1, base + row * 2 + hi)
    return int(m.vram[i, base + row * 2 + hi])


@wp.func
def fetch_tile_no(i: int, m: wp.ref[Mem], line: int, fetch: int, win_count: int) -> int:
    """The tile number for the fetcher's next tile (BG map LCDC.3 with SCX/SCY, or the window map
    LCDC.6 with the window line counter), read now; in Color mode with the map entry's attribute
    byte (VRAM bank 1, same offset) << 8."""
    i = console(i)
    lcdc = int(m.hram[i, R_LCDC])
    fx = fetch >> 8
    addr = int(0)  # noqa: UP018 (a dynamic Warp variable)
    if ((fetch >> 4) & 1) != 0:
        wmap = 0x1800
        if (lcdc & 0x40) != 0:
            wmap = 0x1C00
        addr = wmap + (win_count >> 3) * 32 + (fx & 31)
    else:
        bmap = 0x1800
        if (lcdc & 0x08) != 0:
            bmap = 0x1C00
        y = (line + int(m.hram[i, R_SCY])) & 255
        x = ((int(m.hram[i, R_SCX]) >> 3) + fx) & 31
        addr = bmap + (y >> 3) * 32 + x
    tile = int(m.vram[i, addr])
    if m.st[i, S_CGB] == MODEL_CGB:
        tile = tile | (int(m.cgbx[i, CGBX_VRAM1 + addr]) << 8)
    return tile


@wp.func
def object_row_addr(line: int, y: int, h: int, tile: int, attr: int) -> int:
    """VRAM offset of the row of an object at Y byte ``y`` (tile number ``tile``, attributes
    ``attr`` as its fetch read them) that ``line`` shows, for object height ``h``."""
    sy = y - 16
    row = line - sy
    if (attr & 0x40) != 0:
        row = h - 1 - row
    row = row & (h - 1)
    t = tile
    if h == 16:
        t = tile & 0xFE
    return t * 16 + row * 2


@wp.func
def load_object(i: int, m: wp.ref[Mem], line: int, key: int, sx: int, obj: int, h_lo: int,
                dot: int, draw: bool) -> int:
    """Merge the row of object ``key`` (X * 64 + OAM index), fetched on line dot ``dot``, into
    the OBJ FIFO ``obj`` whose entry 0 is screen x ``sx``; returns the new FIFO. The low byte's
    row uses height ``h_lo`` (LCDC.2 as it was at the low-byte fetch), the high byte's LCDC.2 as
    it is now. The tile number and attributes are those an OAM DMA is writing if one runs then
    (:func:`~.oam_view.fetch_byte`).

    Color mode: the FIFO is ``m.rgb[i, line, sx:sx + 8]`` instead (when ``draw``; ``obj`` is
    returned unchanged), one :func:`color_object_pixel` a pixel: the object's tile data bank and
    palette come from its attributes, and an opaque pixel replaces one of an object with a higher
    OAM index (OAM-index priority; with OPRI bit 0 set, the DMG's rule: the first one stays)."""
    i = console(i)
    s = key & 63
    x0 = ((key >> 6) & 0xFF) - 8
    h = 8
    if (int(m.hram[i, R_LCDC]) & 4) != 0:
        h = 16
    t = this_line_time(i, m) + cpu_cycles(i, m, dot)
    tile = fetch_byte(i, m, t, s, 0)
    attr = fetch_byte(i, m, t, s, 1)
    cgb = m.st[i, S_CGB] == MODEL_CGB
    bank = 0
    if cgb:
        bank = (attr >> 3) & 1
    y = int(m.oam[i, s * 4])
    if (key >> KEY_Y_SHIFT) != 0:
        y = (key >> KEY_Y_SHIFT) - 1  # the scan's latch (oam_view)
    lo = tile_byte(i, m, bank, object_row_addr(line, y, h_lo, tile, attr))
    hi = tile_byte(i, m, bank, object_row_addr(line, y, h, tile, attr) + 1)
    if cgb:
        if draw:
            by_index = (int(m.hram[i, R_OPRI]) & 1) == 0
            for j in range(8):
                x = x0 + j
                if x >= sx and x < sx + 8 and x >= 0 and x < SCREEN_W:
                    c = row_pixel(lo, hi, j, (attr & 0x20) != 0)
                    cur = int(m.rgb[i, line, x])
                    if c != 0 and (cur == 0 or (by_index and s < (cur >> 6))):
                        m.rgb[i, line, x] = wp.int16(color_object_pixel(c, attr, s))
        return obj
    flags = ((attr >> 4) & 1) << 2 | ((attr >> 7) & 1) << 3
    out = obj
    for j in range(8):
        e = j + x0 - sx
        if e >= 0 and e < 8:
            c = row_pixel(lo, hi, j, (attr & 0x20) != 0)
            if c != 0 and ((out >> (4 * e)) & 3) == 0:
                out = out | ((c | flags) << (4 * e))  # the entry was transparent (0)
    return out


@wp.func
def color_object_pixel(c: int, attr: int, s: int) -> int:
    """Color mode's OBJ FIFO entry (kept in ``m.rgb`` ahead of the shifter): colour ``c`` (1-3)
    | palette << 2 | BG-to-OBJ priority << 5 | OAM index ``s`` << 6; 0 is no object pixel."""
    return c | ((attr & 7) << 2) | (((attr >> 7) & 1) << 5) | (s << 6)


@wp.func
def color_pixel(i: int, m: wp.ref[Mem], lcdc: int, o: int, c: int, battr: int) -> int:
    """RGB555 colour of a Color-mode pixel: object entry ``o`` (:func:`color_object_pixel`) over
    BG colour ``c`` with palette | priority << 3 ``battr``, under LCDC ``lcdc`` (LCDC.0 is the
    BG's master priority: :mod:`~.render_cgb`)."""
    i = console(i)
    if ((o & 3) != 0 and (lcdc & 2) != 0
            and not bg_over_object(lcdc, c, (battr & 8) != 0, (o & 32) != 0)):
        return palette_colour(i, m, CGBX_OBJPAL, (o >> 2) & 7, o & 3)
    return palette_colour(i, m, CGBX_BGPAL, battr & 7, c)


@wp.func
def object_shade(i: int, m: wp.ref[Mem], lcdc: int, o: int, c: int) -> int:
    """Shade of object pixel ``o`` (colour | OBP1 << 2 | behind-BG << 3) over background colour
    ``c`` with LCDC ``lcdc``, or -1 where the background pixel shows."""
    i = console(i)
    oc = o & 3
    if oc == 0 or (lcdc & 2) == 0 or ((o & 8) != 0 and c != 0):
        return -1
    pal = int(m.hram[i, R_OBP0])
    if (o & 4) != 0:
        pal = int(m.hram[i, R_OBP1])
    return (pal >> (2 * oc)) & 3


@wp.func
def again(win: int) -> int:
    """Times the window started again on this line after its first start (WIN word)."""
    return (win >> WIN_AGAIN_SHIFT) & 3


@wp.func
def window_rows(win: int) -> int:
    """Window rows this line used (WIN word): one per start, the first and each one again."""
    return (win & 1) + again(win)


@wp.func
def push_tile(lo: int, hi: int, drop: int, attr: int) -> int:
    """BG FIFO word for a fetched tile row, its first ``drop`` pixels left out; ``attr``: the
    Color's map attribute (X flip; palette and priority kept in the word), 0 on a DMG."""
    bg = int(0)  # noqa: UP018 (a dynamic Warp variable)
    for j in range(8):
        if j >= drop:
            c = row_pixel(lo, hi, j, (attr & 0x20) != 0)
            bg = bg | (c << (2 * (j - drop)))
    return bg | ((8 - drop) << BG_COUNT) | (((attr & 7) | ((attr >> 4) & 8)) << BG_ATTR)


@wp.func(inline=False)
def fifo_run(i: int, m: wp.ref[Mem], line: int, t0: int, to_dot: int, draw: bool, blank: bool,
             win_count: int) -> int:
    """Run the pipeline of ``line`` (started at dot ``t0``) through the dots before ``to_dot``,
    or until its last pixel; return the dot mode 3 ends (STAT mode 0) or -1 if not there yet.

    ``draw``: write the pixels into ``m.fb[i, line]`` (shade 0 if ``blank``: the first frame
    after LCD on; in the Color's compatibility mode with their source, as
    :func:`~.render.render_scanline_row` with ``sources``); ``win_count``: the window line
    counter of this line.
    """
    i = console(i)
    if m.st[i, S_FIFO_SX] >= SCREEN_W:
        return m.st[i, S_FIFO_DOT]
    keep = 0  # the Color's compatibility mode: pixels say their palette (render_scanline_row)
    if m.st[i, S_CGB] == MODEL_CGB_COMPAT:
        keep = 1
    cgb = m.st[i, S_CGB] == MODEL_CGB  # Color mode: attributes, colours, no DMG glitches
    # OAM scan (OAM cannot change in mode 3): the first 10 objects on the line, by X then index;
    # the entries read while an OAM DMA ran are judged with the scan's latch (oam_view), the Y of
    # a selected one kept in its key
    keys = ObjectKeys()
    nobj = int(0)  # noqa: UP018 (a dynamic Warp variable)
    hidden = scan_hidden(i, m, this_line_time(i, m), line)
    h_scan = m.st[i, S_FIFO_OBJH] & 0xFF  # (the height at the scan)
    for s in range(40):
        if nobj < 10:
            key = int(-1)  # noqa: UP018 (a dynamic Warp variable)
            if hidden != 0 and hidden_entry(hidden, s):
                if obj_on_line(latch_y(hidden), line, h_scan):
                    key = latch_x(hidden) * 64 + s + ((latch_y(hidden) + 1) << KEY_Y_SHIFT)
            else:
                key = object_key(i, m, line, h_scan, s)
            if key >= 0:
                k = nobj
                while k > 0:
                    if (keys[k - 1] & KEY_ORDER) > (key & KEY_ORDER):
                        keys[k] = keys[k - 1]
                        k = k - 1
                    else:
                        break
                keys[k] = key
                nobj = nobj + 1
    d = m.st[i, S_FIFO_DOT]
    kp = m.st[i, S_FIFO_KP]
    sx = m.st[i, S_FIFO_SX]
    fetch = m.st[i, S_FIFO_FETCH]
    tile = m.st[i, S_FIFO_TILE]
    lo = m.st[i, S_FIFO_LO]
    hi = m.st[i, S_FIFO_HI]
    bg = m.st[i, S_FIFO_BG]
    obj = m.st[i, S_FIFO_OBJ]
    stall = m.st[i, S_FIFO_STALL]
    objn = m.st[i, S_FIFO_OBJN]
    win = m.st[i, S_FIFO_WIN]
    fine = m.st[i, S_FIFO_FINE]
    head = m.st[i, S_FIFO_OBJH] >> HEAD_SHIFT  # pixel 0's object, mixed HEAD_LINGER dots late
    end = int(-1)  # noqa: UP018 (a dynamic Warp variable)
    while d < to_dot and end < 0:
        t = d - t0
        if t == FINE_AT:
            fine = int(m.hram[i, R_SCX]) & 7
        if t == FIFO_START_T:
            bg = 8 << BG_COUNT  # the invisible pixels of the first fetch
            fetch = 0
        if t >= FIFO_START_T:
            lcdc = int(m.hram[i, R_LCDC])
            if head != 0:
                head = head - 1
                if (head & 3) == 0:
                    # pixel 0 is mixed again now, with LCDC.0 and LCDC.1 as they are now
                    c0 = (head >> 6) & 3
                    if (lcdc & 1) == 0:
                        c0 = 0
                    shade0 = object_shade(i, m, lcdc, (head >> 2) & 15, c0)
                    src0 = keep * (1 + ((head >> 4) & 1))
                    if shade0 < 0 and ((head >> 9) & 1) != (lcdc & 1):
                        shade0 = (int(m.hram[i, R_BGP]) >> (2 * c0)) & 3  # LCDC.0 changed
                        src0 = 0
                    if shade0 >= 0 and not blank:
                        m.fb[i, line, 0] = wp.uint8(shade0 | (src0 << 2))
                    head = 0
            disc_done = (fine >> 4) >= (fine & 7)
            # (a) fetcher
            fd = fetch & 15
            idle = (fetch & FETCH_IDLE) != 0
            if idle:
                fetch = fetch - FETCH_IDLE  # the WX = 0 window start's extra dot
            elif fd == FETCH_DOTS and bg_count(bg) == 0:
                bg = push_tile(lo, hi, (win >> 8) & 7, tile >> 8)
                win = win & 0xFF
                fetch = fetch - (fetch & 15)
                fd = 0
            if fd < FETCH_DOTS and not idle:
                if fd == 0 and ((fetch >> 4) & 1) != 0 and (lcdc & 0x20) == 0:
                    fetch = fetch - (1 << 4)  # window switched off: back to the background
                if fd == TILE_AT:
                    tile = fetch_tile_no(i, m, line, fetch, win_count + again(win))
                    pos = sx
                    if not disc_done:
                        pos = sx - (fine & 7) + (fine >> 4)
                    if (not cgb and (win & WIN_FRESH) == 0 and bg_count(bg) == 8
                            and ((win & 1) != 0 or (win_count > 0 and (lcdc & 0x20) == 0))
                            and pos + 7 == int(m.hram[i, R_WX])):
                        # DMG: a WX match that does not start the window (it already started
                        # on this line, or it is off after being drawn earlier this frame), on
                        # the dot of a tile number read with a full FIFO (WX lines up with
                        # the tile grid; ``pos`` counts the fine-scroll discards from
                        # -(SCX & 7)): a colour-0 pixel is put before the FIFO (while pixels
                        # are discarded, it is discarded instead of a background pixel)
                        n = bg_count(bg)
                        bg = ((bg & BG_PIXELS) << 2) | ((n + 1) << BG_COUNT)
                if fd == LO_AT:
                    lo = fetch_bg_byte(i, m, line, fetch, tile, 0, win_count + again(win))
                if fd == HI_AT:
                    hi = fetch_bg_byte(i, m, line, fetch, tile, 1, win_count + again(win))
                fd = fd + 1
                fetch = fetch + 1
                if fd == FETCH_DOTS:
                    fetch = fetch + (1 << 8)  # next tile
            # (b) object fetches, the shifter and the window trigger
            if stall > 0 and (lcdc & 0x02) == 0:
                stall = 0  # objects switched off during the fetch: abandoned (fifo_abandon_object)
                objn = objn + 1
            if stall > 0:
                stall = stall - 1
                if (stall & 0xFF) == OBJ_LO_LEFT:
                    stall = (stall & 0xFF) | ((lcdc & 4) << 6)  # object height at the low byte
                if (stall & 0xFF) == 0:
                    h_lo = 8
                    if (stall & 0x100) != 0:
                        h_lo = 16
                    obj = load_object(i, m, line, keys[objn], sx, obj, h_lo, d, draw)
                    objn = objn + 1
                    stall = 0
            else:
                while objn < nobj and stall == 0:
                    ox = (keys[objn] >> 6) & 0xFF
                    trig = ox + (fine & 7)
                    if ox == 0:
                        trig = 0
                    if ox >= 168 or trig > kp:
                        break
                    if (lcdc & 0x02) == 0:
                        objn = objn + 1  # objects off when it is reached: not fetched
                    else:
                        rem = 0
                        if fd < FETCH_DOTS:
                            rem = FETCH_DOTS - fd
                        stall = OBJ_FETCH_DOTS + rem - 1
                if stall == 0 and bg_count(bg) > 0:
                    c = bg & 3
                    battr = bg >> BG_ATTR
                    bg = (((bg & BG_PIXELS) >> 2) | ((bg_count(bg) - 1) << BG_COUNT)
                          | (bg & BG_ATTR_BITS))
                    win = win & ~WIN_FRESH
                    kp = kp + 1
                    if kp > 8 and not disc_done:
                        fine = fine + 16  # fine-scroll discard
                    else:
                        o = obj & 15
                        obj = (obj >> 4) & 0x0FFFFFFF
                        if sx >= 0 and draw and cgb:
                            col = WHITE
                            if not blank:
                                col = color_pixel(i, m, lcdc, int(m.rgb[i, line, sx]), c, battr)
                            m.rgb[i, line, sx] = wp.int16(col)
                            m.fb[i, line, sx] = wp.uint8(rgb555_shade(col))
                        elif sx >= 0 and draw:
                            if sx == 0:  # the BG shade now; mixed again HEAD_LINGER dots later
                                head = (HEAD_LINGER | (o << 2) | (c << 6) | 256
                                        | ((lcdc & 1) << 9))
                            if (lcdc & 1) == 0:
                                c = 0
                            shade = (int(m.hram[i, R_BGP]) >> (2 * c)) & 3
                            src = 0
                            if sx != 0:
                                obj_shade = object_shade(i, m, lcdc, o, c)
                                if obj_shade >= 0:
                                    shade = obj_shade
                                    src = keep * (1 + ((o >> 2) & 1))  # OBP0 / OBP1 (sources)
                            if blank:
                                shade = 0
                                src = 0
                            m.fb[i, line, sx] = wp.uint8(shade | (src << 2))
                        sx = sx + 1
                        if sx >= SCREEN_W:
                            end = d + 1
            # window trigger, checked after the shifter (outside object fetches): the next pixel
            # is at x = WX - 7 (WX < 7: among the invisible pixels, the window's first 7 - WX
            # pixels unseen), or at WX - 6 when the match was missed (LCDC.5 was off on it)
            if stall == 0 and ((fetch >> 4) & 1) == 0 and window_enabled(lcdc, cgb) and (win & 2) != 0:
                wx = int(m.hram[i, R_WX])
                if ((sx + 7 == wx or (sx + WIN_LATE == wx and sx > WIN_LATE - 7))
                        and (sx < 0 or (fine >> 4) >= (fine & 7))):
                    react = again(win)
                    if (win & 1) != 0 and react < 3:
                        react = react + 1  # activated again on this line: the next window row
                    win = (win & 3) | 1 | WIN_FRESH | (react << WIN_AGAIN_SHIFT)
                    bg = 0
                    fetch = 1 << 4  # window tile 0, step 0
                    if wx == 0 and (fine & 7) != 0:
                        fetch = fetch | FETCH_IDLE
        d = d + 1
    if end >= 0:
        d = end
    m.st[i, S_FIFO_DOT] = d
    m.st[i, S_FIFO_KP] = kp
    m.st[i, S_FIFO_SX] = sx
    m.st[i, S_FIFO_FETCH] = fetch
    m.st[i, S_FIFO_TILE] = tile
    m.st[i, S_FIFO_LO] = lo
    m.st[i, S_FIFO_HI] = hi
    m.st[i, S_FIFO_BG] = bg
    m.st[i, S_FIFO_OBJ] = obj
    m.st[i, S_FIFO_STALL] = stall
    m.st[i, S_FIFO_OBJN] = objn
    m.st[i, S_FIFO_WIN] = win
    m.st[i, S_FIFO_FINE] = fine
    m.st[i, S_FIFO_OBJH] = (m.st[i, S_FIFO_OBJH] & 0xFF) | (head << HEAD_SHIFT)
    return end


@wp.func
def fifo_abandon_object(i: int, m: wp.ref[Mem]):
    """LCDC.1 cleared during an object fetch (the wait for the background fetcher included):
    the fetch is abandoned on the write's dot, the shifter resumes and the object is not drawn
    (DMG: mealybug m3_lcdc_obj_en_change_variant's reference, objects X = 16 and 17)."""
    i = console(i)
    if m.st[i, S_FIFO_STALL] > 0:
        m.st[i, S_FIFO_STALL] = 0
        m.st[i, S_FIFO_OBJN] = m.st[i, S_FIFO_OBJN] + 1


@wp.func(inline=False)
def fifo_dry_end(i: int, m: wp.ref[Mem], line: int, t0: int, win_count: int) -> int:
    """The dot mode 3 ends if the registers stay as they are now: the pipeline is run to its end
    without drawing, then its state is put back."""
    i = console(i)
    save = _vec16i()
    for k in range(FIFO_WORDS):
        save[k] = m.st[i, S_FIFO_LINE + k]
    end = fifo_run(i, m, line, t0, 1 << 20, False, False, win_count)
    for k in range(FIFO_WORDS):
        m.st[i, S_FIFO_LINE + k] = save[k]
    return end
