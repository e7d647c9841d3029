"""MBC5 (types 19-1E, with or without rumble): 9-bit ROM bank (bank 0 selectable), 4-bit RAM bank,
RAM enable. Facts: Pan Docs "MBC5". The rumble motor (RAM bank bit 3 on rumble carts) is not
emulated.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import S_BANK1, S_BANK2, S_RAM_BANK, S_ROM_MASK, S_ROM_OFF1
from torchrl_dreamer.emulator.mappers.base import BANK_SIZE, CartType, Mapper, ram_enable_write
from torchrl_dreamer.emulator.memory import Mem, console

__all__ = ["MBC_5", "MAPPER", "mbc5_offsets", "mbc5_write", "mbc5_update"]

MBC_5 = wp.constant(5)
"""Mapper id of an MBC5 cartridge."""


def mbc5_offsets(b1: int, b2: int, mode: int, mask: int) -> tuple[int, int, int]:
    """Host twin of :func:`mbc5_update`: ``(ROM_OFF0, ROM_OFF1, -1)`` (RAM bank unchanged).

    >>> mbc5_offsets(b1=0x02, b2=1, mode=0, mask=511)
    (0, 4227072, -1)
    """
    return 0, (((b2 << 8) | b1) & mask) * 0x4000, -1


@wp.func(inline=False)
def mbc5_update(i: int, m: wp.ref[Mem]):
    """ROM_OFF1 from the 9-bit bank BANK2:BANK1."""
    i = console(i)
    bank = (m.st[i, S_BANK2] << 8) | m.st[i, S_BANK1]
    m.st[i, S_ROM_OFF1] = (bank & m.st[i, S_ROM_MASK]) * BANK_SIZE


@wp.func(inline=False)
def mbc5_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write to 0000-7FFF: RAM enable, ROM bank low 8 bits, ROM bank bit 8, RAM bank."""
    i = console(i)
    if addr < 0x2000:
        ram_enable_write(i, m, v)
    elif addr < 0x3000:
        m.st[i, S_BANK1] = v
        mbc5_update(i, m)
    elif addr < 0x4000:
        m.st[i, S_BANK2] = v & 1
        mbc5_update(i, m)
    elif addr < 0x6000:
        m.st[i, S_RAM_BANK] = v & 0x0F


MAPPER = Mapper(
    id=MBC_5,
    name="MBC5",
    cartridge_types={
        0x19: CartType(False, False, False, "MBC5"),
        0x1A: CartType(True, False, False, "MBC5+RAM"),
        0x1B: CartType(True, True, False, "MBC5+RAM+BATTERY"),
        0x1C: CartType(False, False, False, "MBC5+RUMBLE"),
        0x1D: CartType(True, False, False, "MBC5+RUMBLE+RAM"),
        0x1E: CartType(True, True, False, "MBC5+RUMBLE+RAM+BATTERY"),
    },
    write=mbc5_write,
    rom_offsets=mbc5_offsets,
)
"""The MBC5 row of the mapper table."""
