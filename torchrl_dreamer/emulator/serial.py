"""The serial port with no link partner: transfers on the internal clock shift in 0xFF.

The internal shift clock (8192 Hz) is not a timer of its own: it is a bit of the 16-bit system
counter (DIV16 bit 8, period 512 T-cycles), so the bit edges line up with the counter's phase
since reset, not with the SC write, and resetting DIV moves them (a reset while bit 8 is set is a
falling edge, like TIMA's). A transfer started by writing SC with bits 7 and 0 set ends on the
8th falling edge of that bit after the write: 3,585 to 4,096 T-cycles later. The byte written to
SB is logged (blargg's tests print their verdict this way); at the end SB reads 0xFF, SC bit 7
clears and the serial interrupt is requested. ``SER_CNT`` holds the clock edges still to come,
so the state stays exact across DIV resets and is advanced arithmetically (no per-edge work).
Facts: Pan Docs "Serial Data Transfer (Link Cable)"; mooneye ``serial/boot_sclk_align``.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.interrupts import raise_irq
from torchrl_dreamer.emulator.layout import S_DIV16, S_SER_CNT, S_SER_N
from torchrl_dreamer.emulator.layout import SERIAL_CAPACITY as _SER_CAP
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import IRQ_SERIAL, R_SB, R_SC

__all__ = ["serial_advance", "serial_next_event", "serial_write_sc", "serial_div_reset"]

SER_CAP = wp.constant(_SER_CAP)
SER_BITS = wp.constant(8)  # clock edges per transfer
SER_CLOCK_SHIFT = wp.constant(9)  # an edge each time DIV16 >> 9 changes (bit 8 falls)
SER_CLOCK_PERIOD = wp.constant(512)  # T-cycles per serial bit (8192 Hz)
SER_CLOCK_BIT = wp.constant(256)  # DIV16 bit 8


@wp.func
def serial_edges(i: int, m: wp.ref[Mem], n: int):
    """Count ``n`` shift-clock edges of the transfer in progress; complete it at the last one."""
    i = console(i)
    sc = m.st[i, S_SER_CNT] - n
    if sc <= 0:
        sc = 0
        m.hram[i, R_SB] = wp.uint8(0xFF)
        m.hram[i, R_SC] = wp.uint8(int(m.hram[i, R_SC]) & 0x7F)
        raise_irq(i, m, IRQ_SERIAL)
    m.st[i, S_SER_CNT] = sc


@wp.func(inline=True)
def serial_advance(i: int, m: wp.ref[Mem], d: int, c: int):
    """Advance a transfer by ``c`` T-cycles from system counter value ``d`` (before them)."""
    i = console(i)
    if m.st[i, S_SER_CNT] > 0:
        n = ((d + c) >> SER_CLOCK_SHIFT) - (d >> SER_CLOCK_SHIFT)
        if n > 0:
            serial_edges(i, m, n)


@wp.func
def serial_next_event(i: int, m: wp.ref[Mem], n: int) -> int:
    """``min(n, T-cycles to the end of the transfer in progress)``."""
    i = console(i)
    sc = m.st[i, S_SER_CNT]
    if sc > 0:
        d = m.st[i, S_DIV16]
        t = SER_CLOCK_PERIOD - (d & (SER_CLOCK_PERIOD - 1)) + (sc - 1) * SER_CLOCK_PERIOD
        if t < n:
            return t
    return n


@wp.func
def serial_div_reset(i: int, m: wp.ref[Mem]):
    """A DIV write resets the system counter: with bit 8 set that is a shift-clock edge."""
    i = console(i)
    if m.st[i, S_SER_CNT] > 0 and (m.st[i, S_DIV16] & SER_CLOCK_BIT) != 0:
        serial_edges(i, m, 1)


@wp.func(inline=False)
def serial_write_sc(i: int, m: wp.ref[Mem], v: int):
    """SC: an internal-clock start logs SB and arms a transfer of 8 shift-clock edges."""
    i = console(i)
    m.hram[i, R_SC] = wp.uint8(v | 0x7E)
    if (v & 0x81) == 0x81:
        n = m.st[i, S_SER_N]
        if n < SER_CAP:
            m.ser[i, n] = m.hram[i, R_SB]
            m.st[i, S_SER_N] = n + 1
        m.st[i, S_SER_CNT] = SER_BITS
