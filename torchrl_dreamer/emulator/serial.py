"""The serial port with no link partner: transfers on the internal clock shift in 0xFF.

A transfer started by writing SC with bits 7 and 0 set takes 8 bits x 512 T-cycles; the byte
written to SB is logged (blargg's tests print their verdict this way) and then SB reads 0xFF and
the serial interrupt is requested. Facts: Pan Docs "Serial Data Transfer (Link Cable)".
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.interrupts import raise_irq
from torchrl_dreamer.emulator.layout import S_SER_CNT, S_SER_N
from torchrl_dreamer.emulator.layout import SERIAL_CAPACITY as _SER_CAP
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.registers import IRQ_SERIAL, R_SB, R_SC

__all__ = ["serial_advance", "serial_next_event", "serial_write_sc"]

SER_CAP = wp.constant(_SER_CAP)
TRANSFER_CYCLES = wp.constant(4096)  # 8 bits at 8192 Hz


@wp.func(inline=True)
def serial_advance(i: int, m: Mem, c: int):
    """Advance a transfer in progress by ``c`` T-cycles; complete it when due."""
    sc = m.st[i, S_SER_CNT]
    if sc > 0:
        sc = sc - c
        if sc <= 0:
            sc = 0
            m.hram[i, R_SB] = wp.uint8(0xFF)
            m.hram[i, R_SC] = wp.uint8(int(m.hram[i, R_SC]) & 0x7F)
            raise_irq(i, m, IRQ_SERIAL)
        m.st[i, S_SER_CNT] = sc


@wp.func
def serial_next_event(i: int, m: Mem, n: int) -> int:
    """``min(n, T-cycles to the end of the transfer in progress)``."""
    sc = m.st[i, S_SER_CNT]
    if sc > 0 and sc < n:
        return sc
    return n


@wp.func(inline=False)
def serial_write_sc(i: int, m: Mem, v: int):
    """SC: an internal-clock start logs SB and schedules the end of the transfer."""
    m.hram[i, R_SC] = wp.uint8(v | 0x7E)
    if (v & 0x81) == 0x81:
        n = m.st[i, S_SER_N]
        if n < SER_CAP:
            m.ser[i, n] = m.hram[i, R_SB]
            m.st[i, S_SER_N] = n + 1
        m.st[i, S_SER_CNT] = TRANSFER_CYCLES
