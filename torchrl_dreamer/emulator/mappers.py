"""Cartridge mappers (MBC1, MBC2, MBC3 with its real-time clock, MBC5): one function per mapper
behind one dispatcher for control writes, plus cartridge-RAM reads and writes.

Mapper ids (``MBC_*`` in :mod:`~torchrl_dreamer.emulator.registers`) are the ones
:mod:`~torchrl_dreamer.emulator.cartridge` derives from the header's type byte. The current ROM
bank offsets live in state columns ``ROM_OFF0`` / ``ROM_OFF1`` so the CPU's ROM reads are a
single array access. Facts: Pan Docs "MBC1", "MBC2", "MBC3", "MBC5".
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_BANK1,
    S_BANK2,
    S_MBC,
    S_MBC_MODE,
    S_RAM_BANK,
    S_RAM_EN,
    S_RAM_SIZE,
    S_ROM_MASK,
    S_ROM_OFF0,
    S_ROM_OFF1,
    S_RTC_DH,
    S_RTC_DL,
    S_RTC_H,
    S_RTC_LATCH,
    S_RTC_LDH,
    S_RTC_LDL,
    S_RTC_LH,
    S_RTC_LM,
    S_RTC_LS,
    S_RTC_M,
    S_RTC_S,
    S_RTC_SUB,
)
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.registers import MBC_1, MBC_2, MBC_3, MBC_5, MBC_NONE

__all__ = ["cart_write", "cram_read", "cram_write", "rtc_advance", "mbc_update"]

BANK_SIZE = wp.constant(0x4000)
RAM_BANK_SIZE = wp.constant(0x2000)
RTC_HZ = wp.constant(4194304)  # T-cycles per emulated second


@wp.func(inline=False)
def mbc_update(i: int, m: Mem):
    """Recompute ROM/RAM bank offsets from the raw mapper registers."""
    mbc = m.st[i, S_MBC]
    mask = m.st[i, S_ROM_MASK]
    b1 = m.st[i, S_BANK1]
    b2 = m.st[i, S_BANK2]
    if mbc == MBC_1:
        m.st[i, S_ROM_OFF1] = (((b2 << 5) | b1) & mask) * BANK_SIZE
        if m.st[i, S_MBC_MODE] != 0:
            m.st[i, S_ROM_OFF0] = ((b2 << 5) & mask) * BANK_SIZE
            m.st[i, S_RAM_BANK] = b2
        else:
            m.st[i, S_ROM_OFF0] = 0
            m.st[i, S_RAM_BANK] = 0
    elif mbc == MBC_5:
        m.st[i, S_ROM_OFF1] = (((b2 << 8) | b1) & mask) * BANK_SIZE
    else:
        m.st[i, S_ROM_OFF1] = (b1 & mask) * BANK_SIZE


@wp.func
def ram_enable_write(i: int, m: Mem, v: int):
    """0000-1FFF on MBC1/3/5: 0x0A in the low nibble enables cartridge RAM."""
    m.st[i, S_RAM_EN] = int((v & 0x0F) == 0x0A)


@wp.func(inline=False)
def mbc1_write(i: int, m: Mem, addr: int, v: int):
    """MBC1: RAM enable, 5-bit ROM bank (0 reads as 1), 2-bit upper bank, banking mode."""
    if addr < 0x2000:
        ram_enable_write(i, m, v)
        return
    if addr < 0x4000:
        b = v & 0x1F
        if b == 0:
            b = 1
        m.st[i, S_BANK1] = b
    elif addr < 0x6000:
        m.st[i, S_BANK2] = v & 3
    else:
        m.st[i, S_MBC_MODE] = v & 1
    mbc_update(i, m)


@wp.func(inline=False)
def mbc2_write(i: int, m: Mem, addr: int, v: int):
    """MBC2: address bit 8 picks RAM enable (0) or the 4-bit ROM bank (1), below 0x4000 only."""
    if addr >= 0x4000:
        return
    if (addr & 0x100) == 0:
        ram_enable_write(i, m, v)
    else:
        b = v & 0x0F
        if b == 0:
            b = 1
        m.st[i, S_BANK1] = b
        mbc_update(i, m)


@wp.func(inline=False)
def mbc3_write(i: int, m: Mem, addr: int, v: int):
    """MBC3: RAM/RTC enable, 7-bit ROM bank, RAM bank or RTC register select, RTC latch (0->1)."""
    if addr < 0x2000:
        ram_enable_write(i, m, v)
    elif addr < 0x4000:
        b = v & 0x7F
        if b == 0:
            b = 1
        m.st[i, S_BANK1] = b
        mbc_update(i, m)
    elif addr < 0x6000:
        m.st[i, S_RAM_BANK] = v & 0x0F
    else:
        if m.st[i, S_RTC_LATCH] == 0 and v == 1:
            m.st[i, S_RTC_LS] = m.st[i, S_RTC_S]
            m.st[i, S_RTC_LM] = m.st[i, S_RTC_M]
            m.st[i, S_RTC_LH] = m.st[i, S_RTC_H]
            m.st[i, S_RTC_LDL] = m.st[i, S_RTC_DL]
            m.st[i, S_RTC_LDH] = m.st[i, S_RTC_DH]
        m.st[i, S_RTC_LATCH] = v


@wp.func(inline=False)
def mbc5_write(i: int, m: Mem, addr: int, v: int):
    """MBC5: RAM enable, 9-bit ROM bank (bank 0 selectable), 4-bit RAM bank."""
    if addr < 0x2000:
        ram_enable_write(i, m, v)
    elif addr < 0x3000:
        m.st[i, S_BANK1] = v
        mbc_update(i, m)
    elif addr < 0x4000:
        m.st[i, S_BANK2] = v & 1
        mbc_update(i, m)
    elif addr < 0x6000:
        m.st[i, S_RAM_BANK] = v & 0x0F


@wp.func(inline=False)
def cart_write(i: int, m: Mem, addr: int, v: int):
    """Write to 0000-7FFF: the mapper's control registers (dispatch on the mapper id)."""
    mbc = m.st[i, S_MBC]
    if mbc == MBC_NONE:
        return
    if mbc == MBC_1:
        mbc1_write(i, m, addr, v)
    elif mbc == MBC_2:
        mbc2_write(i, m, addr, v)
    elif mbc == MBC_3:
        mbc3_write(i, m, addr, v)
    elif mbc == MBC_5:
        mbc5_write(i, m, addr, v)


@wp.func(inline=False)
def cram_read(i: int, m: Mem, addr: int) -> int:
    """Read A000-BFFF: cartridge RAM (banked), MBC2 nibble RAM or the MBC3 RTC registers."""
    if m.st[i, S_RAM_EN] == 0:
        return 0xFF
    mbc = m.st[i, S_MBC]
    if mbc == MBC_2:
        return 0xF0 | int(m.cram[i, addr & 0x1FF])
    bank = m.st[i, S_RAM_BANK]
    if mbc == MBC_3 and bank >= 8:
        if bank == 8:
            return m.st[i, S_RTC_LS]
        if bank == 9:
            return m.st[i, S_RTC_LM]
        if bank == 10:
            return m.st[i, S_RTC_LH]
        if bank == 11:
            return m.st[i, S_RTC_LDL]
        if bank == 12:
            return m.st[i, S_RTC_LDH]
        return 0xFF
    off = bank * RAM_BANK_SIZE + (addr - 0xA000)
    size = m.st[i, S_RAM_SIZE]
    if size == 0:
        return 0xFF
    return int(m.cram[i, off % size])


@wp.func(inline=False)
def cram_write(i: int, m: Mem, addr: int, v: int):
    """Write A000-BFFF (see :func:`cram_read`)."""
    if m.st[i, S_RAM_EN] == 0:
        return
    mbc = m.st[i, S_MBC]
    if mbc == MBC_2:
        m.cram[i, addr & 0x1FF] = wp.uint8(v & 0x0F)
        return
    bank = m.st[i, S_RAM_BANK]
    if mbc == MBC_3 and bank >= 8:
        if bank == 8:
            m.st[i, S_RTC_S] = v & 0x3F
            m.st[i, S_RTC_SUB] = 0
        elif bank == 9:
            m.st[i, S_RTC_M] = v & 0x3F
        elif bank == 10:
            m.st[i, S_RTC_H] = v & 0x1F
        elif bank == 11:
            m.st[i, S_RTC_DL] = v
        elif bank == 12:
            m.st[i, S_RTC_DH] = v & 0xC1
        return
    size = m.st[i, S_RAM_SIZE]
    if size == 0:
        return
    off = bank * RAM_BANK_SIZE + (addr - 0xA000)
    m.cram[i, off % size] = wp.uint8(v)


@wp.func(inline=False)
def rtc_advance(i: int, m: Mem, tcycles: int):
    """Advance the MBC3 real-time clock by emulated T-cycles (deterministic, 4 MiHz = 1 s)."""
    if m.st[i, S_MBC] != MBC_3 or (m.st[i, S_RTC_DH] & 0x40) != 0:
        return
    sub = m.st[i, S_RTC_SUB] + tcycles
    while sub >= RTC_HZ:
        sub = sub - RTC_HZ
        s = m.st[i, S_RTC_S] + 1
        if s == 60:
            s = 0
            mi = m.st[i, S_RTC_M] + 1
            if mi == 60:
                mi = 0
                h = m.st[i, S_RTC_H] + 1
                if h == 24:
                    h = 0
                    day = ((m.st[i, S_RTC_DH] & 1) << 8) + m.st[i, S_RTC_DL] + 1
                    dh = m.st[i, S_RTC_DH] & 0xFE
                    if day > 511:
                        day = 0
                        dh = dh | 0x80
                    m.st[i, S_RTC_DL] = day & 0xFF
                    m.st[i, S_RTC_DH] = dh | (day >> 8)
                m.st[i, S_RTC_H] = h
            m.st[i, S_RTC_M] = mi
        m.st[i, S_RTC_S] = s
    m.st[i, S_RTC_SUB] = sub
