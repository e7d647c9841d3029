"""The DMG OAM corruption bug ("OAM bug").

During mode 2 (OAM scan) the PPU reads one 8-byte OAM row per M-cycle (20 rows in 80 dots). A CPU
access to FE00-FEFF in that M-cycle, or a 16-bit increment/decrement by the CPU's IDU of a
register holding an FE00-FEFF value (the IDU drives its input onto the address bus), corrupts the
row being scanned, by a pattern that depends only on the kind of access and on the row, never on
the address or value (Pan Docs "OAM Corruption Bug"; OAM is a 16-bit-word memory, and as every
pattern is bitwise the code below applies it to the two bytes of a word independently):

- write (a write, or an IDU step alone): the row's first word becomes ``((a ^ c) & (b ^ c)) ^ c``
  (``a`` the word, ``b`` / ``c`` the first / third word of the preceding row), and its other three
  words are copied from the preceding row;
- read: the same with ``b | (a & c)``;
- read during increase/decrease (``POP``, ``RET``, ``LD A,(HL+/-)``): for rows 4-18 the preceding
  row's first word first becomes ``(b & (a | c | d)) | (a & c & d)`` (``a`` first word two rows
  back, ``b`` the preceding row's first word, ``c`` this row's, ``d`` the preceding row's third)
  and the preceding row is copied to this row and to the row two back; then a read corruption.
  A write during an IDU step is a single write.

Row 0 is never corrupted. The row is computed arithmetically from the lazy clock: the access
M-cycle ends at PPU dot ``PPU_DOT + clk`` (see :mod:`.scheduler`), in the dot frame of
:mod:`.ppu` (STAT shows mode 2 from dot 1, mode 3 from dot 81; switching the LCD on starts line 0
at dot 4), and the CPU M-cycle that ends at dot ``4k`` of a visible line meets row ``k``: the
line's first M-cycle (ending at dot 0) row 0, the 19 M-cycles ending at dots 4-76 rows 1-19 (blargg's
oam_bug 4-scanline_timing: 19 consecutive M-cycles corrupt; micro tests in test_oam_bug.py: with
the LCD switched on by a write in M-cycle ``W``, M-cycle ``W + 114 + k`` meets row ``k + 1`` of
line 1). The first line after the LCD is switched on has no OAM scan (the PPU starts it in
mode 0).

Only the CGB is immune (a Color console, in either mode, skips it). Not modelled: corruption by instruction fetches
with PC in FE00-FEFF beyond the plain read (executing code from OAM).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import S_CGB, S_LINE, S_PPU_DOT, S_WIN_LINE
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.ppu import FRAME_LINES, LINE_DOTS, VBLANK_LINE, WIN_BLANK, lcd_on

__all__ = ["OAM_BUG_READ", "OAM_BUG_WRITE", "oam_bug", "oam_bug_read_idu", "oam_scan_row"]

OAM_BUG_READ = wp.constant(0)
OAM_BUG_WRITE = wp.constant(1)
OAM_ROWS = wp.constant(20)  # 8-byte rows, one scanned per M-cycle of mode 2


@wp.func
def oam_scan_row(i: int, m: wp.ref[Mem], clk: int) -> int:
    """OAM row (1-19) the PPU scans in the CPU M-cycle that ends at lazy clock ``clk``, or -1
    when that M-cycle cannot corrupt OAM (LCD off, VBlank, outside mode 2, row 0, the first line
    after LCD on, or a Game Boy Color, which has no OAM bug)."""
    i = console(i)
    if not lcd_on(i, m) or m.st[i, S_CGB] != 0:
        return -1
    dt = m.st[i, S_PPU_DOT] + clk
    line = (m.st[i, S_LINE] + dt // LINE_DOTS) % FRAME_LINES
    row = (dt % LINE_DOTS) // 4
    if line >= VBLANK_LINE or row < 1 or row >= OAM_ROWS:
        return -1
    if line == 0 and (m.st[i, S_WIN_LINE] & WIN_BLANK) != 0:
        return -1
    return row


@wp.func
def corrupt_row(i: int, m: wp.ref[Mem], row: int, write: int):
    """Read (``write`` 0) or write (1) corruption of ``row`` (>= 1) from the preceding row."""
    i = console(i)
    r = row * 8
    p = r - 8
    for k in range(2):
        a = int(m.oam[i, r + k])
        b = int(m.oam[i, p + k])
        c = int(m.oam[i, p + 4 + k])
        v = b | (a & c)
        if write != 0:
            v = ((a ^ c) & (b ^ c)) ^ c
        m.oam[i, r + k] = wp.uint8(v)
    for k in range(2, 8):
        m.oam[i, r + k] = m.oam[i, p + k]


@wp.func(inline=False)
def oam_bug(i: int, m: wp.ref[Mem], clk: int, write: int):
    """A CPU read (``OAM_BUG_READ``) or write / IDU step (``OAM_BUG_WRITE``) of an FE00-FEFF
    address in the M-cycle ending at ``clk``: corrupt the row being scanned, if any."""
    i = console(i)
    row = oam_scan_row(i, m, clk)
    if row > 0:
        corrupt_row(i, m, row, write)


@wp.func(inline=False)
def oam_bug_read_idu(i: int, m: wp.ref[Mem], clk: int):
    """The IDU half of a read during an increase/decrease of its FE00-FEFF address (``POP``,
    ``RET``, ``LD A,(HL+/-)``) in the M-cycle ending at ``clk``: for rows 4-18, the preceding row
    is mixed and copied over this row and the one two back. The read itself then applies the
    plain read corruption (:func:`oam_bug`), which completes the pattern."""
    i = console(i)
    row = oam_scan_row(i, m, clk)
    if row < 4 or row >= OAM_ROWS - 1:
        return
    r = row * 8
    p = r - 8
    q = r - 16
    for k in range(2):
        a = int(m.oam[i, q + k])
        b = int(m.oam[i, p + k])
        c = int(m.oam[i, r + k])
        d = int(m.oam[i, p + 4 + k])
        m.oam[i, p + k] = wp.uint8((b & (a | c | d)) | (a & c & d))
    for k in range(8):
        m.oam[i, r + k] = m.oam[i, p + k]
        m.oam[i, q + k] = m.oam[i, p + k]
