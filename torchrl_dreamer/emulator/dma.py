"""OAM DMA: writing FF46 copies 160 bytes from ``page << 8`` into OAM.

The copy is done at once when the register is written; OAM then reads 0xFF for the 160
M-cycles the transfer takes on hardware (``DMA_CNT`` counts them down, see
:func:`dma_advance`). DMA reads its source through the cartridge, VRAM and WRAM; sources at
E000 and above read the WRAM echo (Pan Docs "OAM DMA Transfer").
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import S_BOOT_ON, S_CLK, S_DMA_CNT, S_ROM_OFF0, S_ROM_OFF1
from torchrl_dreamer.emulator.mappers import cram_read
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.registers import R_DMA

__all__ = ["oam_dma", "dma_advance", "dma_active", "dma_read"]

DMA_BYTES = wp.constant(160)
DMA_CYCLES = wp.constant(644)  # T-cycles during which OAM reads 0xFF (160 M-cycles + start)


@wp.func
def dma_read(i: int, m: Mem, addr: int) -> int:
    """A byte as the DMA unit reads it from ``addr`` (no IO registers, no OAM: WRAM echo)."""
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
    return int(m.wram[i, addr & 0x1FFF])


@wp.func(inline=False)
def oam_dma(i: int, m: Mem, src: int):
    """Start an OAM DMA from page ``src`` (the value written to FF46)."""
    m.hram[i, R_DMA] = wp.uint8(src)
    base = src << 8
    for k in range(DMA_BYTES):
        m.oam[i, k] = wp.uint8(dma_read(i, m, (base + k) & 0xFFFF))
    m.st[i, S_DMA_CNT] = DMA_CYCLES + m.st[i, S_CLK]


@wp.func
def dma_active(i: int, m: Mem) -> bool:
    """Whether a transfer is in progress at the current (lazy) cycle: OAM is then unreadable."""
    return m.st[i, S_DMA_CNT] - m.st[i, S_CLK] > 0


@wp.func(inline=True)
def dma_advance(i: int, m: Mem, c: int):
    """Count the transfer down by ``c`` T-cycles."""
    dc = m.st[i, S_DMA_CNT] - c
    if dc < 0:
        dc = 0
    m.st[i, S_DMA_CNT] = dc
