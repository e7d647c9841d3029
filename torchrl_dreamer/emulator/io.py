"""The IO register page FF00-FF7F (and HRAM/IE above it): dispatch to the hardware blocks.

Every IO access first catches the console up to the current cycle (:func:`~.scheduler.catch_up`)
so registers read as if every M-cycle had been simulated (reads of LY/STAT derive the value from
the dot counter instead, and the other LCD registers hold no time-dependent state); a write then reschedules the next
event, since it may change when that is (a new TAC, LYC, STAT source...).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.apu import apu_read, apu_write
from torchrl_dreamer.emulator.cgb import cgb_io_read, cgb_io_write, color_mode
from torchrl_dreamer.emulator.dma import oam_dma
from torchrl_dreamer.emulator.joypad import joyp_value, joyp_write
from torchrl_dreamer.emulator.layout import S_BOOT_ON, S_CLK, S_PPU_FIFO, S_VRAM_OPEN
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.ppu import (
    lcd_register,
    lcd_write_is_plain,
    ppu_fifo_write,
    ppu_read,
    ppu_value,
    ppu_write,
    stat_read,
)
from torchrl_dreamer.emulator.registers import (
    R_BOOT,
    R_DIV,
    R_DMA,
    R_HRAM,
    R_IF,
    R_JOYP,
    R_LCDC,
    R_LY,
    R_LYC,
    R_NR10,
    R_SC,
    R_STAT,
    R_TAC,
    R_WX,
)
from torchrl_dreamer.emulator.scheduler import catch_up, schedule
from torchrl_dreamer.emulator.serial import serial_div_reset, serial_write_sc
from torchrl_dreamer.emulator.speed import dots
from torchrl_dreamer.emulator.timer import timer_read, timer_write

__all__ = ["io_read", "io_write"]


@wp.func
def io_unused_bits(r: int) -> int:
    """Bits of FF00-FF7F that read as 1 on a DMG (unmapped registers read FF)."""
    if r >= 0x4C:
        return 0xFF
    if r == 0x03 or (r >= 0x08 and r <= 0x0E):
        return 0xFF
    return 0  # (the sound registers FF10-FF3F are read by apu_read)


@wp.func(inline=False)
def io_read(i: int, m: wp.ref[Mem], r: int) -> int:
    """Read FF00-FFFF (``r`` = offset from FF00)."""
    i = console(i)
    if r >= R_HRAM:
        return int(m.hram[i, r])
    if r == R_STAT or r == R_LY:
        # from the dot counter, without catching up: no event is due before NEXT, so this is
        # ppu_read's value after catch_up (the deferred catch-up is done by the next sync)
        if r == R_STAT:
            return stat_read(i, m, m.st[i, S_CLK])  # (and the VRAM bound it gives)
        return ppu_value(i, m, r, dots(i, m, m.st[i, S_CLK]))
    elif r >= R_LCDC and r <= R_WX:
        return int(m.hram[i, r])  # plain LCD registers: nothing time-dependent to catch up
    catch_up(i, m)
    if r == R_JOYP:
        return joyp_value(i, m)
    if r == R_SC:
        return int(m.hram[i, r]) | 0x7E
    if r >= R_DIV and r <= R_TAC:
        return timer_read(i, m, r)
    if r == R_IF:
        return int(m.hram[i, r]) | 0xE0
    if r == R_STAT or r == R_LY:
        return ppu_read(i, m, r)
    if r >= R_NR10 and r < R_LCDC:
        return apu_read(i, m, r)
    if r > R_WX and color_mode(i, m):
        return cgb_io_read(i, m, r)
    return int(m.hram[i, r]) | io_unused_bits(r)


@wp.func(inline=False)
def io_write_reg(i: int, m: wp.ref[Mem], r: int, v: int):
    """The register side effects of :func:`io_write` (the console already caught up)."""
    i = console(i)
    if m.st[i, S_PPU_FIFO] != 0 and lcd_register(r):
        ppu_fifo_write(i, m, r, v)  # ppu="fifo": the write may land in mode 3
    elif r == R_JOYP:
        joyp_write(i, m, v)
    elif r == R_SC:
        serial_write_sc(i, m, v)
    elif r >= R_DIV and r <= R_TAC:
        if r == R_DIV:
            serial_div_reset(i, m)
        timer_write(i, m, r, v)
    elif r == R_IF:
        m.hram[i, r] = wp.uint8(v & 0x1F)
    elif r == R_LCDC or r == R_STAT or r == R_LYC:
        ppu_write(i, m, r, v)
    elif r >= R_NR10 and r < R_LCDC:
        apu_write(i, m, r, v)
    elif r == R_LY:
        return
    elif r == R_DMA:
        oam_dma(i, m, v)
    elif r == R_BOOT:
        if v != 0:
            m.st[i, S_BOOT_ON] = 0
    elif r > R_WX and color_mode(i, m):
        cgb_io_write(i, m, r, v)
    else:
        m.hram[i, r] = wp.uint8(v)


@wp.func(inline=False)
def io_write(i: int, m: wp.ref[Mem], r: int, v: int):
    """Write FF00-FFFF, with each register's side effects, then reschedule the next event."""
    i = console(i)
    if r >= R_HRAM or (r != R_LCDC and lcd_register(r) and lcd_write_is_plain(i, m)):
        m.hram[i, r] = wp.uint8(v)
        return
    m.st[i, S_VRAM_OPEN] = 0  # LCDC, KEY1, VBK, DMA...: the bus's VRAM bound is recomputed
    catch_up(i, m)
    io_write_reg(i, m, r, v)
    schedule(i, m)
