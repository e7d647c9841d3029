"""The lazy clock: the rest of the console catches up with the CPU only when it must.

The CPU kernel adds 4 to ``CLK`` per M-cycle (CPU T-cycles since the last sync; in the Color's
double speed the PPU, APU and MBC3 clock advance by half of them, see :mod:`.speed`) and compares it with
``NEXT`` (T-cycles from the last sync to the next event: a PPU mode change, a TIMA overflow or
its reload, the end of a serial transfer). :func:`sync` then advances every hardware block
(and the MBC3 real-time clock) arithmetically by ``CLK`` cycles (:func:`catch_up`) and handles
the events due. IO accesses
catch up first, so registers read exactly as if every M-cycle had been simulated, and a halted
CPU jumps straight to the next event (:func:`halt_advance`).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.apu import apu_advance
from torchrl_dreamer.emulator.dma import dma_advance, dma_copy_due
from torchrl_dreamer.emulator.interrupts import pending_irqs
from torchrl_dreamer.emulator.layout import (
    S_CLK,
    S_DIV16,
    S_FRAME_DONE,
    S_FRAMES,
    S_NEXT,
    S_SPEED,
    S_VRAM_OPEN,
)
from torchrl_dreamer.emulator.mappers import rtc_advance
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.ppu import at_vblank_point, ppu_advance, ppu_next_event
from torchrl_dreamer.emulator.registers import IRQ_STAT, IRQ_VBLANK
from torchrl_dreamer.emulator.serial import serial_advance, serial_next_event
from torchrl_dreamer.emulator.speed import cpu_cycles
from torchrl_dreamer.emulator.timer import timer_advance, timer_next_event

__all__ = ["catch_up", "schedule", "sync", "halt_advance", "stop_advance", "frame_end"]


@wp.func(inline=True)
def catch_up(i: int, m: wp.ref[Mem]):
    """Advance timer, APU, PPU, serial, DMA and the MBC3 clock by the CLK cycles elapsed; handle due
    events. The OAM DMA's times move first, so the PPU's events see them relative to the new
    origin (where its dot counter then is); a transfer that ended in the window is copied into
    OAM after them (lines scanned before it still read the old bytes)."""
    i = console(i)
    c = m.st[i, S_CLK]
    if c <= 0:
        return
    m.st[i, S_CLK] = 0
    dma_advance(i, m, c)
    m.st[i, S_NEXT] = m.st[i, S_NEXT] - c  # keep NEXT relative to the new origin
    m.st[i, S_VRAM_OPEN] = wp.max(m.st[i, S_VRAM_OPEN] - c, 0)  # and the bus's VRAM bound
    d = m.st[i, S_DIV16]  # the serial clock is a bit of the system counter: its value before
    timer_advance(i, m, c)
    if m.st[i, S_SPEED] != 0:
        # Color double speed: CLK counts CPU T-cycles; the PPU, APU and MBC3 clock see half as
        # many dots (the frame sequencer then follows divider bit 13: the halved counter's 12)
        p = c >> 1
        apu_advance(i, m, d >> 1, p)
        ppu_advance(i, m, p)
        rtc_advance(i, m, p)
    else:
        apu_advance(i, m, d, c)
        ppu_advance(i, m, c)
        rtc_advance(i, m, c)
    serial_advance(i, m, d, c)
    dma_copy_due(i, m, 0)


@wp.func(inline=True)
def schedule(i: int, m: wp.ref[Mem]):
    """Set NEXT: T-cycles (from now, CLK = 0) to the earliest upcoming event."""
    i = console(i)
    n = cpu_cycles(i, m, ppu_next_event(i, m))
    n = timer_next_event(i, m, n)
    n = serial_next_event(i, m, n)
    m.st[i, S_NEXT] = n


@wp.func(inline=False)
def sync(i: int, m: wp.ref[Mem]):
    """Bring the console up to the current cycle and reschedule the next event."""
    i = console(i)
    catch_up(i, m)
    schedule(i, m)


@wp.func(inline=True)
def halt_advance(i: int, m: wp.ref[Mem]):
    """While halted: jump straight to the M-cycle of the next event (no per-M-cycle spinning).

    The CPU wakes at M-cycle granularity. An event on an M-cycle boundary (timer, VBlank) is
    seen when that M-cycle ends, so the wake-up fetch is the next M-cycle; an event strictly
    inside an M-cycle (the PPU's STAT interrupt points, see :mod:`.ppu`) wakes
    the CPU within it, and that M-cycle is the wake-up fetch: ``CLK`` is then left 4 T-cycles
    behind the caught-up clock, so the kernel's fetch ends exactly there. This is how a halted
    CPU reaches a STAT handler in the same M-cycle as a running one (mooneye intr_2_0_timing vs
    hblank_ly_scx_timing) but a timer handler one M-cycle later (gbmicrotest int_timer_halt).
    """
    i = console(i)
    c = m.st[i, S_CLK]
    n = m.st[i, S_NEXT]
    t = c + 4 * ((n - c + 3) // 4)
    if t < c + 4:
        t = c + 4
    m.st[i, S_CLK] = t
    sync(i, m)
    if halt_wake_in_event_cycle(pending_irqs(i, m), t != n and n > c, at_vblank_point(i, m)):
        m.st[i, S_CLK] = m.st[i, S_CLK] - 4  # (0 after the sync, unless an HDMA block stalls)


@wp.func
def halt_wake_in_event_cycle(pending: int, mid_cycle: bool, vblank_point: bool) -> bool:
    """Whether the M-cycle holding the wake-up event is already the dispatch's first.

    An event strictly inside an M-cycle (the PPU's STAT points) wakes the CPU within it; so do
    the interrupts requested at the VBlank point (``vblank_point``): the VBlank interrupt
    (mooneye halt_ime1_timing2-GS and di_timing-GS: a VBlank handler starts in the same M-cycle
    from HALT as from a run of NOPs) and the line-144 mode 2 STAT interrupt requested with it
    (vblank_stat_intr: both wake HALT at the same time). Other sources on an M-cycle boundary
    (timer, serial, joypad) wake it one M-cycle later (gbmicrotest int_timer_halt_div_a/b).
    """
    return mid_cycle or (vblank_point and (pending & (IRQ_VBLANK | IRQ_STAT)) != 0)


@wp.func(inline=False)
def stop_advance(i: int, m: wp.ref[Mem]):
    """In STOP mode: the system clock is stopped, so DIV, TIMA, the serial clock and OAM DMA
    stand still, and the LCD is dark (:func:`~.ppu.lcd_on` is false while ``STOPPED``: no
    pixels, no PPU interrupts, the observation goes blank). The PPU's line counter alone keeps
    going, as with the LCD off, so frames still end every 70224 T-cycles; the MBC3 clock has its
    own crystal and keeps time. Jumps to the next PPU event."""
    i = console(i)
    sync(i, m)  # the M-cycles before STOP
    m.st[i, S_VRAM_OPEN] = 0  # the PPU moves on while the CPU's clock stands: no VRAM bound holds
    n = ppu_next_event(i, m)
    ppu_advance(i, m, n)
    rtc_advance(i, m, n)
    schedule(i, m)


@wp.func(inline=False)
def frame_end(i: int, m: wp.ref[Mem]):
    """Book-keeping at the end of every emulated frame (the frame counter)."""
    i = console(i)
    m.st[i, S_FRAME_DONE] = 0
    m.st[i, S_FRAMES] = m.st[i, S_FRAMES] + 1
