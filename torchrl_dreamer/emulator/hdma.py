"""The Game Boy Color's VRAM DMA (HDMA): general-purpose and HBlank transfers.

A write to HDMA5 (FF55) starts a copy of ``(HDMA5 & 0x7F) + 1`` blocks of 16 bytes from the
source (HDMA1/2, ROM, cartridge RAM or WRAM, low 4 bits ignored) to VRAM (HDMA3/4 within
8000-9FF0, in the bank VBK selects). Bit 7 clear: general-purpose, all blocks at once while
the CPU waits 8 M-cycles a block at normal speed (16 in double speed: the same time in dots).
Bit 7 set: one block at the start of every HBlank (:func:`hdma_hblank`, called by the PPU at
the mode 0 point of each visible line; the CPU waits as long per block), and a write with bit 7
clear while it runs stops it. Not modelled: reads of VRAM or OAM as the source. Facts: Pan Docs "CGB Registers" (LCD VRAM DMA transfers).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    CGBX_VRAM1,
    HDMA_HBLANK,
    S_CLK,
    S_HDMA,
    S_HDMA_DST,
    S_HDMA_SRC,
    S_ROM_OFF0,
    S_ROM_OFF1,
    S_VBK,
)
from torchrl_dreamer.emulator.mappers import cram_read
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.registers import R_HDMA1, R_HDMA2, R_HDMA3, R_HDMA4, R_HDMA5
from torchrl_dreamer.emulator.speed import cpu_cycles

__all__ = ["hdma_source_byte", "hdma_block", "hdma_write", "hdma_read", "hdma_hblank",
           "HDMA_BLOCK_DOTS"]

HDMA_BLOCK_DOTS = wp.constant(32)
"""Dots the CPU waits per 16-byte block (8 M-cycles at normal speed, 16 in double speed)."""


@wp.func
def hdma_source_byte(i: int, m: wp.ref[Mem], addr: int) -> int:
    """A byte of an HDMA source: ROM (banked), cartridge RAM or WRAM; VRAM and above read FF."""
    if addr < 0x4000:
        return int(m.rom[m.st[i, S_ROM_OFF0] + addr])
    if addr < 0x8000:
        return int(m.rom[m.st[i, S_ROM_OFF1] + addr - 0x4000])
    if addr < 0xA000:
        return 0xFF
    if addr < 0xC000:
        return cram_read(i, m, addr)
    if addr < 0xE000:
        return int(m.wram[i, addr - 0xC000])
    return 0xFF


@wp.func(inline=False)
def hdma_block(i: int, m: wp.ref[Mem]):
    """Copy one 16-byte block and step the pointers (the destination wraps within VRAM)."""
    src = m.st[i, S_HDMA_SRC]
    dst = m.st[i, S_HDMA_DST]
    bank1 = m.st[i, S_VBK] != 0
    for k in range(16):
        v = wp.uint8(hdma_source_byte(i, m, (src + k) & 0xFFFF))
        o = (dst + k) & 0x1FFF
        if bank1:
            m.cgbx[i, CGBX_VRAM1 + o] = v
        else:
            m.vram[i, o] = v
    m.st[i, S_HDMA_SRC] = (src + 16) & 0xFFFF
    m.st[i, S_HDMA_DST] = (dst + 16) & 0x1FFF


@wp.func(inline=False)
def hdma_write(i: int, m: wp.ref[Mem], v: int) -> int:
    """HDMA5 written with ``v`` (Color mode): start, or stop an HBlank transfer. Returns the
    dots the CPU waits (a general-purpose transfer's copy time, else 0)."""
    state = m.st[i, S_HDMA]
    if state != 0 and (v & 0x80) == 0:
        # stop the HBlank transfer: HDMA5 then reads bit 7 set with the blocks left - 1
        m.hram[i, R_HDMA5] = wp.uint8(0x80 | (((state & 0xFF) - 1) & 0x7F))
        m.st[i, S_HDMA] = 0
        return 0
    m.st[i, S_HDMA_SRC] = ((int(m.hram[i, R_HDMA1]) << 8) | int(m.hram[i, R_HDMA2])) & 0xFFF0
    m.st[i, S_HDMA_DST] = ((int(m.hram[i, R_HDMA3]) << 8) | int(m.hram[i, R_HDMA4])) & 0x1FF0
    blocks = (v & 0x7F) + 1
    if (v & 0x80) != 0:
        m.st[i, S_HDMA] = HDMA_HBLANK | blocks
        return 0
    for _k in range(blocks):
        hdma_block(i, m)
    m.st[i, S_HDMA] = 0
    m.hram[i, R_HDMA5] = wp.uint8(0xFF)
    return blocks * HDMA_BLOCK_DOTS


@wp.func
def hdma_read(i: int, m: wp.ref[Mem]) -> int:
    """HDMA5: while an HBlank transfer runs, bit 7 clear and the blocks left - 1; else FF after
    a completed transfer, or bit 7 set and the blocks left - 1 after a stopped one."""
    state = m.st[i, S_HDMA]
    if state != 0:
        return ((state & 0xFF) - 1) & 0x7F
    return int(m.hram[i, R_HDMA5])


@wp.func(inline=False)
def hdma_hblank(i: int, m: wp.ref[Mem]):
    """The mode 0 point of a visible line: an HBlank transfer in progress copies one block,
    while the CPU waits 8 M-cycles (16 in double speed): called during a clock catch-up, whose
    origin ``CLK`` is then 0, it moves the CPU's clock on by that long (the rest of the console
    catches up with it at the next sync), as a general-purpose transfer does."""
    state = m.st[i, S_HDMA]
    if (state & HDMA_HBLANK) == 0:
        return
    hdma_block(i, m)
    m.st[i, S_CLK] = m.st[i, S_CLK] + cpu_cycles(i, m, HDMA_BLOCK_DOTS)
    left = (state & 0xFF) - 1
    if left <= 0:
        m.st[i, S_HDMA] = 0
        m.hram[i, R_HDMA5] = wp.uint8(0xFF)
    else:
        m.st[i, S_HDMA] = HDMA_HBLANK | left

