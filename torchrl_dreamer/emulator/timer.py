"""The timer: the 16-bit system counter (DIV is its upper byte), TIMA, TMA, TAC.

TIMA counts falling edges of one bit of the system counter (selected by TAC). An overflow leaves
TIMA at 0 for one M-cycle (cycle A), then in the next M-cycle (cycle B) TMA is loaded and the
timer interrupt requested. A TIMA write in cycle A cancels the reload and the interrupt; in cycle
B a TIMA write is ignored (the reload wins) and a TMA write is loaded into TIMA too. ``TIMA_OVF``
records which of the two M-cycles the console is in (:data:`TIMA_OVERFLOWED`,
:data:`TIMA_RELOADING`). Between events the counters are advanced arithmetically
(:func:`timer_advance`), so a halted console costs nothing per M-cycle. Facts: Pan Docs "Timer
and Divider Registers", "Timer obscure behaviour"; mooneye ``tima_write_reloading``,
``tma_write_reloading``.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.apu import apu_div_write
from torchrl_dreamer.emulator.interrupts import raise_irq
from torchrl_dreamer.emulator.layout import S_DIV16, S_TAC, S_TIMA, S_TIMA_OVF, S_TMA
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import IRQ_TIMER, R_DIV, R_TAC, R_TIMA, R_TMA

__all__ = ["timer_mask", "timer_advance", "timer_next_event", "timer_read", "timer_write",
           "TIMA_OVERFLOWED", "TIMA_RELOADING"]

TIMA_OVERFLOWED = wp.constant(1)  # TIMA_OVF: TIMA overflowed in the M-cycle just run (reads 0)
TIMA_RELOADING = wp.constant(2)  # TIMA_OVF: TMA was loaded in the M-cycle just run


@wp.func
def timer_mask(tac: int) -> int:
    """Bit of the 16-bit divider whose falling edge clocks TIMA for TAC's clock select."""
    sel = tac & 3
    if sel == 0:
        return 512
    if sel == 1:
        return 8
    if sel == 2:
        return 32
    return 128


@wp.func
def timer_shift(tac: int) -> int:
    """log2 of twice :func:`timer_mask`: TIMA ticks = change of ``counter >> shift``."""
    sel = tac & 3
    if sel == 0:
        return 10
    if sel == 1:
        return 4
    if sel == 2:
        return 6
    return 8


@wp.func(inline=False)
def tima_inc(i: int, m: wp.ref[Mem]):
    """Increment TIMA; on overflow it reads 0 for one M-cycle, then reloads TMA and raises IRQ 2."""
    i = console(i)
    t = m.st[i, S_TIMA] + 1
    if t > 255:
        m.st[i, S_TIMA] = 0
        m.st[i, S_TIMA_OVF] = TIMA_OVERFLOWED
    else:
        m.st[i, S_TIMA] = t


@wp.func(inline=True)
def timer_advance(i: int, m: wp.ref[Mem], c: int):
    """Advance the system counter and TIMA by ``c`` T-cycles (a pending reload happens first).

    The scheduler syncs exactly one M-cycle after an overflow (:func:`timer_next_event`), so a
    reload done with ``c == 4`` happened in the M-cycle just run: TIMA_OVF then says
    :data:`TIMA_RELOADING` until the next catch-up, for :func:`timer_write`.
    """
    i = console(i)
    ovf = m.st[i, S_TIMA_OVF]
    if ovf != 0 and c >= 4:
        m.st[i, S_TIMA_OVF] = 0
        if ovf == TIMA_OVERFLOWED:
            m.st[i, S_TIMA] = m.st[i, S_TMA]
            raise_irq(i, m, IRQ_TIMER)
            if c == 4:
                m.st[i, S_TIMA_OVF] = TIMA_RELOADING
    d = m.st[i, S_DIV16]
    nd = d + c
    tac = m.st[i, S_TAC]
    if (tac & 4) != 0:
        sh = timer_shift(tac)
        t = m.st[i, S_TIMA] + (nd >> sh) - (d >> sh)
        if t > 255:
            t = 0
            m.st[i, S_TIMA_OVF] = TIMA_OVERFLOWED
        m.st[i, S_TIMA] = t
    m.st[i, S_DIV16] = nd & 0xFFFF


@wp.func(inline=True)
def timer_next_event(i: int, m: wp.ref[Mem], n: int) -> int:
    """``min(n, T-cycles to the next TIMA overflow or reload)``."""
    i = console(i)
    if m.st[i, S_TIMA_OVF] == TIMA_OVERFLOWED:
        if n > 4:
            return 4
        return n
    tac = m.st[i, S_TAC]
    if (tac & 4) != 0:
        period = timer_mask(tac) * 2
        d = m.st[i, S_DIV16]
        t = period - (d & (period - 1)) + (255 - m.st[i, S_TIMA]) * period
        if t < n:
            return t
    return n


@wp.func
def timer_read(i: int, m: wp.ref[Mem], r: int) -> int:
    """Read DIV, TIMA, TMA or TAC (``r`` = offset from FF00; counters already caught up)."""
    i = console(i)
    if r == R_DIV:
        return m.st[i, S_DIV16] >> 8
    if r == R_TIMA:
        return m.st[i, S_TIMA]
    if r == R_TMA:
        return m.st[i, S_TMA]
    return m.st[i, S_TAC] | 0xF8


@wp.func(inline=False)
def timer_write(i: int, m: wp.ref[Mem], r: int, v: int):
    """Write DIV (resets the counter: a falling edge may tick TIMA), TIMA, TMA or TAC.

    Around a TIMA overflow: a TIMA write in the overflow M-cycle cancels the reload and its
    interrupt; in the reload M-cycle it is ignored, and a TMA write also lands in TIMA.
    """
    i = console(i)
    ovf = m.st[i, S_TIMA_OVF]
    if r == R_DIV:
        tac = m.st[i, S_TAC]
        if (tac & 4) != 0 and (m.st[i, S_DIV16] & timer_mask(tac)) != 0:
            tima_inc(i, m)
        apu_div_write(i, m)  # a falling edge of bit 12 clocks the frame sequencer
        m.st[i, S_DIV16] = 0
    elif r == R_TIMA:
        if ovf != TIMA_RELOADING:
            m.st[i, S_TIMA_OVF] = 0
            m.st[i, S_TIMA] = v
    elif r == R_TMA:
        m.st[i, S_TMA] = v
        if ovf == TIMA_RELOADING:
            m.st[i, S_TIMA] = v
    elif r == R_TAC:
        old = m.st[i, S_TAC]
        d = m.st[i, S_DIV16]
        was = (old & 4) != 0 and (d & timer_mask(old)) != 0
        now = (v & 4) != 0 and (d & timer_mask(v)) != 0
        if was and not now:
            tima_inc(i, m)
        m.st[i, S_TAC] = v & 7
