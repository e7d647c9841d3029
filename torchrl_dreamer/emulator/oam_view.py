"""OAM as the PPU reads it while an OAM DMA runs: the scan's hidden entries, a fetch's byte pair.

A transfer (:mod:`.dma`) owns OAM for its 160 M-cycles. What the PPU reads meanwhile (SameBoy
``Core/display.c``, ``add_object_from_index`` and ``oam_read``; Damian Yerrick's "Red from OAM"
test notes; gambatte's OAM reader, which reads 0xFF while a transfer owns OAM):

* **OAM scan (mode 2)**: the scan reads entry ``s`` on line dot ``OAM_SCAN_DOT + 2 * s`` (40
  entries in the 80 dots before mode 3), so a transfer hides a contiguous run of entries: the
  rest of the scan after its first byte, or the part before its end. A hidden entry is not
  read at all: on a DMG the PPU's OAM latch keeps the pair it read last and the entry is judged
  (and, if selected, drawn at that X, with that Y's row) with it: the entry before the run, or
  for a run from the scan's start the previous line's last read (:func:`previous_line_read`,
  from OAM as it is: exact unless a transfer also ran during that line's scan or fetches). An
  entry read before the end of a transfer that ends during the scan is not selected (the
  latch then holds what the transfer's earlier lines read: not modelled). DocBoy's PPU
  notes state the latch ("it does not read at all: therefore the oam registers will hold their
  old values"), and Hacktix's ``strikethrough`` reference screen shows it: its one struck
  letter sits at entry 39's X on a line whose whole scan a transfer hides. On the Color an
  entry read while a transfer runs is not selected (no measurement of the Color here).
* **Object fetch (mode 3)**: an object selected before the transfer and fetched while it runs
  takes its tile number and attributes from the OAM byte pair the transfer is writing (the even
  byte as the tile, the odd one as the attributes), not from its own entry. The object's Y and X
  are those its scan latched.

Times are lazy times (CPU T-cycles from the origin ``CLK`` = 0, where the PPU's dot counter
is): the caller converts a line's dot to it (:func:`~.ppu.line_time`). PyBoy's timing mode
(``PYBOY_TIMING``) has no such effect.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.dma import (
    dma_copy_due,
    dma_oam_pair,
    dma_ran_since,
    dma_recent,
    dma_source_at,
)
from torchrl_dreamer.emulator.layout import MODEL_DMG, S_CGB, S_PPU_DOT, S_PYBOY_TIMING
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import R_LCDC
from torchrl_dreamer.emulator.render import obj_on_line
from torchrl_dreamer.emulator.speed import cpu_cycles

__all__ = ["OAM_SCAN_DOT", "scan_hidden", "hidden_entry", "hidden_mask", "latch_y", "latch_x", "fetch_byte",
           "this_line_time"]

OAM_SCAN_DOT = wp.constant(1)  # line dot on which the OAM scan reads entry 0 (entry s: + 2 s)
OAM_ENTRIES = wp.constant(40)


@wp.func
def this_line_time(i: int, m: wp.ref[Mem]) -> int:
    """Lazy time of dot 0 of the line the PPU's dot counter is on (the line being drawn)."""
    i = console(i)
    return cpu_cycles(i, m, -m.st[i, S_PPU_DOT])


# Inlined on purpose: as a call, the state live across it was spilled on the STAT read's path,
# and the GPU ran real games at 0.5-0.7x (docs/concepts/running_on_gpu.md, "The sixth GPU run").
@wp.func
def scan_hidden(i: int, m: wp.ref[Mem], t_line: int, line: int) -> int:
    """The OAM entries that the scan of ``line`` (starting at lazy time ``t_line``) reads while a
    transfer runs, as ``lo | hi << 8 | Y << 16 | X << 24`` (entries ``lo`` to ``hi - 1``, judged
    with the latch's Y and X: :func:`latch_y`, :func:`latch_x`; 0: none).

    The latch (DMG, a transfer still running at the scan's end, so OAM still holds the old
    bytes) is 0 otherwise; a transfer that ended before the scan's last entry is copied into OAM
    first, so the entries read after it see the new bytes."""
    i = console(i)
    if m.st[i, S_PYBOY_TIMING] != 0 or not dma_recent(i, m):
        return 0
    t0 = t_line + cpu_cycles(i, m, OAM_SCAN_DOT)
    if not dma_ran_since(i, m, t0):
        return 0  # (every line of a game that copies OAM in VBlank)
    lo = int(OAM_ENTRIES)  # (a dynamic Warp variable)
    hi = int(0)  # noqa: UP018 (a dynamic Warp variable)
    for s in range(OAM_ENTRIES):
        if dma_source_at(i, m, t0 + cpu_cycles(i, m, 2 * s)) >= 0:
            if s < lo:
                lo = s
            hi = s + 1
    latch = int(0)  # noqa: UP018 (a dynamic Warp variable)
    if hi == OAM_ENTRIES and m.st[i, S_CGB] == MODEL_DMG:  # (the transfer runs on: OAM is old)
        if lo > 0:
            latch = int(m.oam[i, (lo - 1) * 4]) | (int(m.oam[i, (lo - 1) * 4 + 1]) << 8)
        else:
            latch = previous_line_read(i, m, line)
    dma_copy_due(i, m, t0 + cpu_cycles(i, m, 2 * (OAM_ENTRIES - 1)))
    if hi == 0:
        return 0
    return lo | (hi << 8) | (latch << 16)


@wp.func(inline=False)
def previous_line_read(i: int, m: wp.ref[Mem], line: int) -> int:
    """The last pair the PPU read from OAM on the line before ``line`` (``Y | X << 8`` of a scan
    entry, or ``tile | attributes << 8`` of an object fetch), from OAM as it is: its last object
    fetch's (the highest X, then index, of its first 10 objects with X < 168, LCDC.1 set), else
    the last entry its scan read (the 10th object found, or entry 39)."""
    i = console(i)
    prev = line - 1
    if prev < 0:
        prev = 143
    h = 8
    if (int(m.hram[i, R_LCDC]) & 4) != 0:
        h = 16
    fetches = (int(m.hram[i, R_LCDC]) & 2) != 0
    n = int(0)  # noqa: UP018 (a dynamic Warp variable)
    last = int(OAM_ENTRIES - 1)  # (a dynamic Warp variable)
    best = int(-1)  # noqa: UP018 (a dynamic Warp variable)
    for s in range(OAM_ENTRIES):
        if n < 10 and obj_on_line(int(m.oam[i, s * 4]), prev, h):
            n = n + 1
            if n == 10:
                last = s
            x = int(m.oam[i, s * 4 + 1])
            if fetches and x < 168 and x * 64 + s > best:
                best = x * 64 + s
    if best >= 0:
        e = best & 63
        return int(m.oam[i, e * 4 + 2]) | (int(m.oam[i, e * 4 + 3]) << 8)
    return int(m.oam[i, last * 4]) | (int(m.oam[i, last * 4 + 1]) << 8)


@wp.func
def hidden_entry(hidden: int, s: int) -> bool:
    """Whether OAM entry ``s`` is among the entries ``hidden`` (:func:`scan_hidden`)."""
    return s >= (hidden & 0xFF) and s < ((hidden >> 8) & 0xFF)


@wp.func
def hidden_mask(hidden: int) -> wp.int64:
    """The entries ``hidden`` (:func:`scan_hidden`) as a mask, bit ``s`` for entry ``s``."""
    lo = wp.int64(1) << wp.int64(hidden & 0xFF)
    hi = wp.int64(1) << wp.int64((hidden >> 8) & 0xFF)
    return hi - lo


@wp.func
def latch_y(hidden: int) -> int:
    """The Y byte the scan judges the ``hidden`` entries with (0 on a Color: never on a line)."""
    return (hidden >> 16) & 0xFF


@wp.func
def latch_x(hidden: int) -> int:
    """The X byte the scan gives the ``hidden`` entries it selects."""
    return (hidden >> 24) & 0xFF


@wp.func
def fetch_byte(i: int, m: wp.ref[Mem], t: int, s: int, odd: int) -> int:
    """Byte ``2 + odd`` of OAM entry ``s`` (0: the tile number, 1: the attributes) as an object
    fetch at lazy time ``t`` reads it: the transfer's byte pair while one runs, else OAM's."""
    i = console(i)
    if m.st[i, S_PYBOY_TIMING] == 0:
        b = dma_oam_pair(i, m, t, odd)
        if b >= 0:
            return b
    return int(m.oam[i, s * 4 + 2 + odd])
