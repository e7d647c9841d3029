"""The 64 KiB address space: :func:`peek` / :func:`poke` route each address.

Timing is not here: the generated CPU kernel (:mod:`~torchrl_dreamer.emulator.codegen`) advances
the lazy clock by one M-cycle before each bus access and does the WRAM, HRAM and ROM accesses
(most of them) in place; every other access goes through :func:`cpu_read` / :func:`cpu_write`,
which apply what an OAM DMA in progress does to the CPU's accesses (:mod:`.dma`: OAM unavailable,
bus conflicts) and then call :func:`peek` / :func:`poke`, the plain memory map (also the host's
``read_memory`` / ``write_memory`` view, which sees OAM as it is). The hardware
blocks behind them live in one module each: :mod:`.mappers` (cartridge), :mod:`.io` (FF00-FFFF,
dispatching to :mod:`.timer`, :mod:`.ppu`, :mod:`.dma`, :mod:`.serial`, :mod:`.joypad`),
:mod:`.scheduler` (the lazy clock) and :mod:`.interrupts`.

Why our own: no Warp Game Boy exists to reuse; the code is written from hardware documentation
(Pan Docs facts) and is shared verbatim by the CPU and CUDA devices.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.dma import dma_conflict, dma_copy_due, dma_read
from torchrl_dreamer.emulator.io import io_read, io_write
from torchrl_dreamer.emulator.layout import S_BOOT_ON, S_CLK, S_ROM_OFF0, S_ROM_OFF1
from torchrl_dreamer.emulator.mappers import cart_write, cram_read, cram_write, rtc_needs_sync
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.ppu import oam_read_blocked, oam_write_blocked, vram_blocked
from torchrl_dreamer.emulator.scheduler import sync

__all__ = ["Mem", "peek", "poke", "cpu_read", "cpu_write"]


@wp.func
def peek(i: int, m: Mem, addr: int) -> int:
    """Read a byte through the memory map without advancing time (no DMA effects)."""
    if addr < 0x8000:
        if addr < 0x4000:
            if addr < 0x100 and m.st[i, S_BOOT_ON] != 0:
                return int(m.boot[addr])
            return int(m.rom[m.st[i, S_ROM_OFF0] + addr])
        return int(m.rom[m.st[i, S_ROM_OFF1] + addr - 0x4000])
    if addr < 0xA000:
        return int(m.vram[i, addr - 0x8000])
    if addr < 0xC000:
        return cram_read(i, m, addr)
    if addr < 0xFE00:
        return int(m.wram[i, addr & 0x1FFF])
    if addr < 0xFEA0:
        return int(m.oam[i, addr - 0xFE00])
    if addr < 0xFF00:
        return 0
    return io_read(i, m, addr - 0xFF00)


@wp.func
def poke(i: int, m: Mem, addr: int, v: int):
    """Write a byte through the memory map without advancing time (no DMA effects; a write
    that latches or sets the MBC3 clock first brings the console up to the current cycle)."""
    if rtc_needs_sync(i, m, addr):
        sync(i, m)
    if addr < 0x8000:
        cart_write(i, m, addr, v)
    elif addr < 0xA000:
        m.vram[i, addr - 0x8000] = wp.uint8(v)
    elif addr < 0xC000:
        cram_write(i, m, addr, v)
    elif addr < 0xFE00:
        m.wram[i, addr & 0x1FFF] = wp.uint8(v)
    elif addr < 0xFEA0:
        m.oam[i, addr - 0xFE00] = wp.uint8(v)
    elif addr >= 0xFF00:
        io_write(i, m, addr - 0xFF00, v)


@wp.func(inline=False)
def cpu_read(i: int, m: Mem, addr: int) -> int:
    """A CPU read at the current cycle (``CLK``: the console has not caught up, so DMA and PPU
    state are computed for that cycle). During an OAM DMA, OAM reads 0xFF and a read of the
    DMA's bus sees the byte the DMA reads (bus conflict, see :mod:`.dma`); VRAM in mode 3 and
    OAM in modes 2 and 3 read 0xFF (:func:`.ppu.vram_blocked`, :func:`.ppu.oam_read_blocked`).
    The host's memory view uses :func:`peek`."""
    t = m.st[i, S_CLK]
    dma_copy_due(i, m, t)
    src = dma_conflict(i, m, addr, t)
    if src >= 0:
        if addr >= 0xFE00:
            return 0xFF
        return dma_read(i, m, src)
    if addr >= 0x8000 and addr < 0xA000:
        if vram_blocked(i, m, t, True):
            return 0xFF
    elif addr >= 0xFE00 and addr < 0xFEA0:
        if oam_read_blocked(i, m, t):
            return 0xFF
    return peek(i, m, addr)


@wp.func(inline=False)
def cpu_write(i: int, m: Mem, addr: int, v: int):
    """A CPU write at the current cycle (``CLK``): lost if it collides with an OAM DMA (OAM, or
    the bus the DMA reads from, see :mod:`.dma`), or if it targets VRAM in mode 3 or OAM while
    the PPU scans or draws (:func:`.ppu.oam_write_blocked`)."""
    t = m.st[i, S_CLK]
    dma_copy_due(i, m, t)
    if dma_conflict(i, m, addr, t) >= 0:
        return
    if addr >= 0x8000 and addr < 0xA000:
        if vram_blocked(i, m, t, False):
            return
    elif addr >= 0xFE00 and addr < 0xFEA0:
        if oam_write_blocked(i, m, t):
            return
    poke(i, m, addr, v)
