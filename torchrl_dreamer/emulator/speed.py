"""The Game Boy Color's double-speed mode: CPU T-cycles against PPU dots.

The lazy clock (``CLK``, :mod:`~torchrl_dreamer.emulator.scheduler`) counts CPU T-cycles: 4 per
M-cycle at either speed. The CPU-clocked blocks (timer and DIV, serial, OAM DMA) advance by
them; the PPU, the APU and the MBC3 clock run at 4.19 MHz whatever the CPU does, so in double
speed (``SPEED`` = 1, KEY1 bit 7) they advance by half as many dots. On a DMG ``SPEED`` is
always 0 and every conversion is the identity. Facts: Pan Docs "CGB Registers" (KEY1).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import S_SPEED
from torchrl_dreamer.emulator.memory import Mem, console

__all__ = ["dots", "cpu_cycles"]


@wp.func
def dots(i: int, m: wp.ref[Mem], t: int) -> int:
    """PPU dots in ``t`` CPU T-cycles (``t`` itself at normal speed, ``t / 2`` in double speed)."""
    i = console(i)
    if m.st[i, S_SPEED] != 0:
        return t >> 1
    return t


@wp.func
def cpu_cycles(i: int, m: wp.ref[Mem], d: int) -> int:
    """CPU T-cycles in ``d`` PPU dots (the inverse of :func:`dots`)."""
    i = console(i)
    if m.st[i, S_SPEED] != 0:
        return d << 1
    return d
