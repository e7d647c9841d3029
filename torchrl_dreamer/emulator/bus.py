"""The CPU's view of the 64 KiB address space: :func:`peek` / :func:`poke` route each address.

Timing is not here: the generated CPU kernel (:mod:`~torchrl_dreamer.emulator.codegen`) advances
the lazy clock by one M-cycle before each bus access and does the WRAM, HRAM and ROM accesses
(most of them) in place; every other region goes through these two functions. The hardware
blocks behind them live in one module each: :mod:`.mappers` (cartridge), :mod:`.io` (FF00-FFFF,
dispatching to :mod:`.timer`, :mod:`.ppu`, :mod:`.dma`, :mod:`.serial`, :mod:`.joypad`),
:mod:`.scheduler` (the lazy clock) and :mod:`.interrupts`.

Why our own: no Warp Game Boy exists to reuse; the code is written from hardware documentation
(Pan Docs facts) and is shared verbatim by the CPU and CUDA devices.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.dma import dma_active
from torchrl_dreamer.emulator.io import io_read, io_write
from torchrl_dreamer.emulator.layout import S_BOOT_ON, S_CLK, S_ROM_OFF0, S_ROM_OFF1
from torchrl_dreamer.emulator.mappers import cart_write, cram_read, cram_write
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.ppu import oam_read_blocked, oam_write_blocked, vram_blocked

__all__ = ["Mem", "peek", "poke", "cpu_read", "cpu_write"]


@wp.func
def peek(i: int, m: Mem, addr: int) -> int:
    """Read a byte through the bus view without advancing time."""
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
        if dma_active(i, m):
            return 0xFF
        return int(m.oam[i, addr - 0xFE00])
    if addr < 0xFF00:
        return 0
    return io_read(i, m, addr - 0xFF00)


@wp.func
def poke(i: int, m: Mem, addr: int, v: int):
    """Write a byte through the bus view without advancing time."""
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


@wp.func
def cpu_read(i: int, m: Mem, addr: int) -> int:
    """A CPU read: :func:`peek`, except that VRAM in mode 3 and OAM in modes 2 and 3 read FF
    (see :func:`.ppu.vram_blocked`, :func:`.ppu.oam_read_blocked`).

    The PPU has not caught up (``CLK`` T-cycles are pending), so the mode is computed for the
    current cycle from the dot counter (:mod:`.ppu`). The host's memory view uses :func:`peek`.
    """
    if addr >= 0x8000 and addr < 0xA000:
        if vram_blocked(i, m, m.st[i, S_CLK], True):
            return 0xFF
    elif addr >= 0xFE00 and addr < 0xFEA0:
        if oam_read_blocked(i, m, m.st[i, S_CLK]):
            return 0xFF
    return peek(i, m, addr)


@wp.func
def cpu_write(i: int, m: Mem, addr: int, v: int):
    """A CPU write: :func:`poke`, except that writes to VRAM in mode 3 and to OAM while the PPU
    scans or draws are dropped (see :func:`.ppu.oam_write_blocked`)."""
    if addr >= 0x8000 and addr < 0xA000:
        if vram_blocked(i, m, m.st[i, S_CLK], False):
            return
    elif addr >= 0xFE00 and addr < 0xFEA0:
        if oam_write_blocked(i, m, m.st[i, S_CLK]):
            return
    poke(i, m, addr, v)
