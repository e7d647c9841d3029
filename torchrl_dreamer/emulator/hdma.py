"""The Game Boy Color's VRAM DMA (HDMA): general-purpose and HBlank transfers.

A write to HDMA5 (FF55) starts a copy of ``(HDMA5 & 0x7F) + 1`` blocks of 16 bytes from the
source pointer (HDMA1/2: ROM, cartridge RAM or WRAM, low 4 bits ignored) to the destination
pointer in VRAM (HDMA3/4: 8000-9FF0, in the bank VBK selects; the top 3 bits ignored). The
pointers are the registers themselves: a write to HDMA1-4 sets its byte, a transfer moves them
on, and a new transfer started without rewriting them continues after the last one. Bit 7
clear: general-purpose, all blocks at once while the CPU waits 8 M-cycles a block at normal
speed (16 in double speed: the same time in dots). Bit 7 set: one block at the start of every
HBlank (:func:`hdma_hblank`, called by the PPU at the mode 0 point of each visible line; the
CPU waits as long per block), and one at once when started with the LCD off or in HBlank
(mode 0). A write with bit 7 clear while it runs stops it; HDMA5 then reads bit 7 set and the
written length bits. Not modelled: reads of VRAM or OAM as the source. Facts: Pan Docs "CGB
Registers" (LCD VRAM DMA transfers), and the hardware results that the SameSuite DMA tests
publish (``LIJI32/SameSuite`` ``dma/``: ``gbc_dma_cont``, ``gdma_addr_mask``,
``hdma_lcd_off``, ``hdma_mode0``; micro ROMs of our own follow them in
``test/emulator/test_cgb_hdma.py``).
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
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.raw import rom_at, u8_at, u8_set
from torchrl_dreamer.emulator.registers import R_HDMA1, R_HDMA2, R_HDMA3, R_HDMA5
from torchrl_dreamer.emulator.speed import cpu_cycles

__all__ = ["hdma_source_byte", "hdma_block", "hdma_pointer_write", "hdma_write", "hdma_read",
           "hdma_hblank", "HDMA_BLOCK_DOTS"]

HDMA_BLOCK_DOTS = wp.constant(32)
"""Dots the CPU waits per 16-byte block (8 M-cycles at normal speed, 16 in double speed)."""


@wp.func
def hdma_source_byte(i: int, m: wp.ref[Mem], addr: int) -> int:
    """A byte of an HDMA source: ROM (banked), cartridge RAM or WRAM; VRAM and above read FF."""
    i = console(i)
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
    """Copy one 16-byte block and step the pointers (the destination wraps within VRAM).

    The source pointer is a multiple of 16, so a block never crosses a 4000/8000/A000/C000/E000
    boundary: its region (:func:`hdma_source_byte`) is decided once, and ROM and WRAM blocks
    are read without the per-byte region tests (and, as the bus's in-place paths, without
    Warp's negative-index wrap: :mod:`.raw`)."""
    i = console(i)
    src = m.st[i, S_HDMA_SRC]
    dst = m.st[i, S_HDMA_DST]
    bank1 = m.st[i, S_VBK] != 0
    rom = int(-1)  # noqa: UP018 (Warp: a dynamic variable) the block's ROM offset, or -1
    if src < 0x4000:
        rom = m.st[i, S_ROM_OFF0] + src
    elif src < 0x8000:
        rom = m.st[i, S_ROM_OFF1] + src - 0x4000
    wram = src >= 0xC000 and src < 0xE000
    for k in range(16):
        v = int(0)  # noqa: UP018 (Warp: a dynamic variable)
        if rom >= 0:
            v = rom_at(m.rom, rom + k)
        elif wram:
            v = u8_at(m.wram, i, src - 0xC000 + k)
        else:
            v = hdma_source_byte(i, m, src + k)
        o = (dst + k) & 0x1FFF
        if bank1:
            u8_set(m.cgbx, i, CGBX_VRAM1 + o, v)
        else:
            u8_set(m.vram, i, o, v)
    m.st[i, S_HDMA_SRC] = (src + 16) & 0xFFFF
    m.st[i, S_HDMA_DST] = (dst + 16) & 0x1FFF


@wp.func
def hdma_pointer_write(i: int, m: wp.ref[Mem], r: int, v: int):
    """HDMA1-4 written with ``v``: set that byte of the source or destination pointer."""
    i = console(i)
    m.hram[i, r] = wp.uint8(v)
    src = m.st[i, S_HDMA_SRC]
    dst = m.st[i, S_HDMA_DST]
    if r == R_HDMA1:
        m.st[i, S_HDMA_SRC] = (v << 8) | (src & 0xF0)
    elif r == R_HDMA2:
        m.st[i, S_HDMA_SRC] = (src & 0xFF00) | (v & 0xF0)
    elif r == R_HDMA3:
        m.st[i, S_HDMA_DST] = ((v & 0x1F) << 8) | (dst & 0xF0)
    else:
        m.st[i, S_HDMA_DST] = (dst & 0x1F00) | (v & 0xF0)


@wp.func(inline=False)
def hdma_write(i: int, m: wp.ref[Mem], v: int, hblank_now: bool) -> int:
    """HDMA5 written with ``v`` (Color mode): start, or stop an HBlank transfer; ``hblank_now``:
    the LCD is off or in mode 0, so an HBlank transfer copies its first block at once. Returns
    the dots the CPU waits."""
    i = console(i)
    state = m.st[i, S_HDMA]
    if state != 0 and (v & 0x80) == 0:
        # stop the HBlank transfer: HDMA5 then reads bit 7 set and the written length bits
        m.hram[i, R_HDMA5] = wp.uint8(0x80 | (v & 0x7F))
        m.st[i, S_HDMA] = 0
        return 0
    blocks = (v & 0x7F) + 1
    if (v & 0x80) != 0:
        m.st[i, S_HDMA] = HDMA_HBLANK | blocks
        if hblank_now:
            hdma_hblank_block(i, m)
            return HDMA_BLOCK_DOTS
        return 0
    for _k in range(blocks):
        hdma_block(i, m)
    m.st[i, S_HDMA] = 0
    m.hram[i, R_HDMA5] = wp.uint8(0xFF)
    return blocks * HDMA_BLOCK_DOTS


@wp.func
def hdma_hblank_block(i: int, m: wp.ref[Mem]):
    """One block of the HBlank transfer in progress; the transfer ends with its last block."""
    i = console(i)
    hdma_block(i, m)
    left = (m.st[i, S_HDMA] & 0xFF) - 1
    if left <= 0:
        m.st[i, S_HDMA] = 0
        m.hram[i, R_HDMA5] = wp.uint8(0xFF)
    else:
        m.st[i, S_HDMA] = HDMA_HBLANK | left


@wp.func
def hdma_read(i: int, m: wp.ref[Mem]) -> int:
    """HDMA5: while an HBlank transfer runs, bit 7 clear and the blocks left - 1; else FF after
    a completed transfer, or bit 7 set and the length bits written to stop it."""
    i = console(i)
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
    i = console(i)
    if (m.st[i, S_HDMA] & HDMA_HBLANK) == 0:
        return
    hdma_hblank_block(i, m)
    m.st[i, S_CLK] = m.st[i, S_CLK] + cpu_cycles(i, m, HDMA_BLOCK_DOTS)

