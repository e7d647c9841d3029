"""MBC1 (types 01-03) and its multicart wiring: 5-bit ROM bank (0 reads as 1, the zero test sees
all 5 bits), 2-bit upper bank, banking mode, RAM enable. Facts: Pan Docs "MBC1"; Gekkio's GB-CTR
(multicart wiring).

The multicart (8 Mbit, e.g. Bomberman Collection) has its own mapper id, :data:`MBC_1M`: BANK1
bit 4 is not wired and BANK2 drives ROM A18-A19. The header cannot tell it apart, its layout
does (:func:`torchrl_dreamer.emulator.cartridge.is_mbc1_multicart`).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_BANK1,
    S_BANK2,
    S_MBC,
    S_MBC_MODE,
    S_RAM_BANK,
    S_ROM_MASK,
    S_ROM_OFF0,
    S_ROM_OFF1,
)
from torchrl_dreamer.emulator.mappers.base import BANK_SIZE, CartType, Mapper, ram_enable_write
from torchrl_dreamer.emulator.memory import Mem, console

__all__ = ["MBC_1", "MBC_1M", "MAPPER", "MULTICART", "mbc1_offsets", "mbc1_write", "mbc1_update"]

MBC_1 = wp.constant(1)
"""Mapper id of an MBC1 cartridge."""
MBC_1M = wp.constant(6)
"""Mapper id of the MBC1 multicart wiring (8 Mbit): 4-bit BANK1, BANK2 on ROM A18-A19."""


def mbc1_offsets(b1: int, b2: int, mode: int, mask: int, multicart: bool = False) -> tuple[int, int, int]:
    """Host twin of :func:`mbc1_update`: ``(ROM_OFF0, ROM_OFF1, RAM bank)``.

    >>> mbc1_offsets(b1=1, b2=1, mode=1, mask=127)
    (524288, 540672, 1)
    """
    hi, lo = (b2 << 4, b1 & 0x0F) if multicart else (b2 << 5, b1)
    off1 = ((hi | lo) & mask) * 0x4000
    if mode:
        return (hi & mask) * 0x4000, off1, b2
    return 0, off1, 0


@wp.func(inline=False)
def mbc1_update(i: int, m: wp.ref[Mem]):
    """Recompute ROM_OFF0 / ROM_OFF1 and the RAM bank from BANK1, BANK2 and the mode."""
    i = console(i)
    mask = m.st[i, S_ROM_MASK]
    b1 = m.st[i, S_BANK1]
    b2 = m.st[i, S_BANK2]
    hi = b2 << 5
    lo = b1
    if m.st[i, S_MBC] == MBC_1M:  # multicart: BANK1 bit 4 is not wired, BANK2 drives A18-A19
        hi = b2 << 4
        lo = b1 & 0x0F
    m.st[i, S_ROM_OFF1] = ((hi | lo) & mask) * BANK_SIZE
    if m.st[i, S_MBC_MODE] != 0:
        m.st[i, S_ROM_OFF0] = (hi & mask) * BANK_SIZE
        m.st[i, S_RAM_BANK] = b2
    else:
        m.st[i, S_ROM_OFF0] = 0
        m.st[i, S_RAM_BANK] = 0


@wp.func(inline=False)
def mbc1_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write to 0000-7FFF: RAM enable, ROM bank, upper bank, banking mode."""
    i = console(i)
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
    mbc1_update(i, m)


MAPPER = Mapper(
    id=MBC_1,
    name="MBC1",
    cartridge_types={
        0x01: CartType(False, False, False, "MBC1"),
        0x02: CartType(True, False, False, "MBC1+RAM"),
        0x03: CartType(True, True, False, "MBC1+RAM+BATTERY"),
    },
    write=mbc1_write,
    rom_offsets=mbc1_offsets,
)
"""The MBC1 row of the mapper table."""

MULTICART = Mapper(
    id=MBC_1M,
    name="MBC1 multicart",
    cartridge_types={},
    write=mbc1_write,
    rom_offsets=lambda b1, b2, mode, mask: mbc1_offsets(b1, b2, mode, mask, multicart=True),
)
"""The MBC1 multicart row (no type byte of its own: an MBC1 type and the ROM's layout)."""
