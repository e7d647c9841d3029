"""MBC2 (types 05, 06): 4-bit ROM bank and 512 x 4 bits of RAM built into the mapper. Address bit 8
of a write below 4000 picks RAM enable (0) or the ROM bank (1); the RAM's upper nibbles read as
1s and A000-BFFF mirrors it every 512 bytes. Facts: Pan Docs "MBC2".
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import S_BANK1
from torchrl_dreamer.emulator.mappers.base import CartType, Mapper, plain_update, ram_enable_write
from torchrl_dreamer.emulator.memory import Mem, console

__all__ = ["MBC_2", "MAPPER", "mbc2_write", "mbc2_ram_read", "mbc2_ram_write"]

MBC_2 = wp.constant(2)
"""Mapper id of an MBC2 cartridge."""


@wp.func(inline=False)
def mbc2_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write to 0000-7FFF: address bit 8 picks RAM enable (0) or the 4-bit ROM bank (1), below
    0x4000 only."""
    i = console(i)
    if addr >= 0x4000:
        return
    if (addr & 0x100) == 0:
        ram_enable_write(i, m, v)
    else:
        b = v & 0x0F
        if b == 0:
            b = 1
        m.st[i, S_BANK1] = b
        plain_update(i, m)


@wp.func
def mbc2_ram_read(i: int, m: wp.ref[Mem], addr: int) -> int:
    """Read the nibble RAM (upper bits read 1)."""
    i = console(i)
    return 0xF0 | int(m.cram[i, addr & 0x1FF])


@wp.func
def mbc2_ram_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write the nibble RAM (only the low 4 bits are stored)."""
    i = console(i)
    m.cram[i, addr & 0x1FF] = wp.uint8(v & 0x0F)


MAPPER = Mapper(
    id=MBC_2,
    name="MBC2",
    cartridge_types={
        0x05: CartType(True, False, False, "MBC2"),
        0x06: CartType(True, True, False, "MBC2+BATTERY"),
    },
    write=mbc2_write,
    ram_read=mbc2_ram_read,
    ram_write=mbc2_ram_write,
    ram_size=512,
)
"""The MBC2 row of the mapper table."""
