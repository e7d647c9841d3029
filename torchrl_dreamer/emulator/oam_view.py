"""OAM as the PPU reads it while an OAM DMA runs: the scan's hidden entries, a fetch's byte pair.

A transfer (:mod:`.dma`) owns OAM for its 160 M-cycles. What the PPU reads meanwhile (SameBoy
``Core/display.c``, ``add_object_from_index`` and ``oam_read``; Damian Yerrick's "Red from OAM"
test notes; gambatte's OAM reader, which reads 0xFF while a transfer owns OAM):

* **OAM scan (mode 2)**: an entry read while the transfer runs is not selected, as if its Y were
  255. The scan reads entry ``s`` on line dot ``OAM_SCAN_DOT + 2 * s`` (40 entries in the 80
  dots before mode 3), so a transfer hides a contiguous run of entries: the rest of the scan
  after its first byte, or the part before its end.
* **Object fetch (mode 3)**: an object selected before the transfer and fetched while it runs
  takes its tile number and attributes from the OAM byte pair the transfer is writing (the even
  byte as the tile, the odd one as the attributes), not from its own entry. The object's Y and X
  are those its scan latched.

Times are lazy times (CPU T-cycles from the origin ``CLK`` = 0, where the PPU's dot counter
is): the caller converts a line's dot to it (:func:`~.ppu.line_time`). PyBoy's timing mode
(``PYBOY_TIMING``) has no such effect. Hacktix's ``strikethrough`` test draws text struck
through by objects that such a mid-frame transfer hides and garbles.
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
from torchrl_dreamer.emulator.layout import S_PPU_DOT, S_PYBOY_TIMING
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.speed import cpu_cycles

__all__ = ["OAM_SCAN_DOT", "scan_hidden", "hidden_entry", "fetch_byte", "this_line_time"]

OAM_SCAN_DOT = wp.constant(1)  # line dot on which the OAM scan reads entry 0 (entry s: + 2 s)
OAM_ENTRIES = wp.constant(40)


@wp.func
def this_line_time(i: int, m: wp.ref[Mem]) -> int:
    """Lazy time of dot 0 of the line the PPU's dot counter is on (the line being drawn)."""
    return cpu_cycles(i, m, -m.st[i, S_PPU_DOT])


@wp.func
def scan_hidden(i: int, m: wp.ref[Mem], t_line: int) -> int:
    """The OAM entries that the scan of the line starting at lazy time ``t_line`` reads while a
    transfer runs, as ``lo | hi << 8`` (entries ``lo`` to ``hi - 1``; 0: none).

    A transfer that ended before the scan's last entry is copied into OAM first, so the entries
    read after it see the new bytes."""
    if m.st[i, S_PYBOY_TIMING] != 0 or not dma_recent(i, m):
        return 0
    t0 = t_line + cpu_cycles(i, m, OAM_SCAN_DOT)
    if not dma_ran_since(i, m, t0):
        return 0  # (every line of a game that copies OAM in VBlank)
    dma_copy_due(i, m, t0 + cpu_cycles(i, m, 2 * (OAM_ENTRIES - 1)))
    lo = int(OAM_ENTRIES)  # (a dynamic Warp variable)
    hi = int(0)  # noqa: UP018 (a dynamic Warp variable)
    for s in range(OAM_ENTRIES):
        if dma_source_at(i, m, t0 + cpu_cycles(i, m, 2 * s)) >= 0:
            if s < lo:
                lo = s
            hi = s + 1
    if hi == 0:
        return 0
    return lo | (hi << 8)


@wp.func
def hidden_entry(hidden: int, s: int) -> bool:
    """Whether OAM entry ``s`` is among the entries ``hidden`` (:func:`scan_hidden`)."""
    return s >= (hidden & 0xFF) and s < (hidden >> 8)


@wp.func
def fetch_byte(i: int, m: wp.ref[Mem], t: int, s: int, odd: int) -> int:
    """Byte ``2 + odd`` of OAM entry ``s`` (0: the tile number, 1: the attributes) as an object
    fetch at lazy time ``t`` reads it: the transfer's byte pair while one runs, else OAM's."""
    if m.st[i, S_PYBOY_TIMING] == 0:
        b = dma_oam_pair(i, m, t, odd)
        if b >= 0:
            return b
    return int(m.oam[i, s * 4 + 2 + odd])
