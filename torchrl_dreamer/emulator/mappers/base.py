"""What every cartridge mapper shares: the :class:`Mapper` row type, the cartridge-type entry, and
the Warp helpers most mappers reuse (RAM enable, the single-register ROM bank, banked cartridge RAM).

A mapper module (``mbc1.py``, ``mbc3.py`` ...) builds one :class:`Mapper` per wiring from its own
Warp functions and these helpers; :mod:`torchrl_dreamer.emulator.mappers` lists the rows in one
table (``MAPPERS``) from which the kernel's dispatch and the cartridge-type table are built.

Example:
    >>> from torchrl_dreamer.emulator.mappers.base import plain_offsets
    >>> plain_offsets(b1=3, b2=0, mode=0, mask=7)   # ROM_OFF0, ROM_OFF1, RAM bank (-1: unchanged)
    (0, 49152, -1)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_BANK1,
    S_RAM_BANK,
    S_RAM_EN,
    S_RAM_SIZE,
    S_ROM_MASK,
    S_ROM_OFF1,
)
from torchrl_dreamer.emulator.memory import Mem, console

__all__ = ["BANK_SIZE", "RAM_BANK_SIZE", "CartType", "Mapper", "POWER_ON", "plain_offsets",
           "ram_enable_write", "plain_update", "banked_read", "banked_write"]

BANK_SIZE = wp.constant(0x4000)  # bytes of one switchable ROM bank
RAM_BANK_SIZE = wp.constant(0x2000)  # bytes of one cartridge RAM bank

POWER_ON: Mapping[str, int] = {"BANK1": 1, "ROM_OFF1": 0x4000}
"""State columns a mapper holds at power-on unless its row says otherwise: ROM bank 1 at 4000."""


class CartType(NamedTuple):
    """One cartridge type byte (header 0x147) of a mapper: what the board carries besides it."""

    ram: bool  # cartridge RAM (its size comes from header byte 0x149)
    battery: bool  # battery-backed RAM (and clock): a .sav file keeps it
    rtc: bool  # an MBC3 real-time clock crystal
    name: str  # the type's name, as Pan Docs spells it


def plain_offsets(b1: int, b2: int, mode: int, mask: int) -> tuple[int, int, int]:
    """Host twin of :func:`plain_update`: ``(ROM_OFF0, ROM_OFF1, RAM bank)`` from the raw bank
    registers and the ROM bank mask; RAM bank -1 means the mapper keeps its own RAM bank register."""
    return 0, (b1 & mask) * 0x4000, -1


@dataclass(frozen=True)
class Mapper:
    """One mapper wiring: a row of :data:`torchrl_dreamer.emulator.mappers.MAPPERS`.

    Attributes:
        id: the value of state column ``MBC`` for a console with this mapper (unique).
        name: short name used in messages (``"MBC1"``).
        cartridge_types: header type bytes (0x147) that select this mapper; empty for a wiring
            told apart by the ROM's layout (the MBC1 multicart).
        write: Warp function ``(i, m, addr, v)`` for writes to 0000-7FFF (control registers);
            ``None``: writes there are ignored.
        ram_read / ram_write: Warp functions ``(i, m, addr) -> int`` / ``(i, m, addr, v)`` for
            A000-BFFF while RAM is enabled; ``None``: plain banked RAM (:func:`banked_read`).
        rom_offsets: host twin of the Warp bank formula, ``(b1, b2, mode, mask) -> (ROM_OFF0,
            ROM_OFF1, RAM bank or -1)``, for states built on the host (PyBoy states).
        power_on: state columns set at power-on (after ``MBC``, ``ROM_MASK``, ``RAM_SIZE``).
        ram_size: bytes of RAM built into the mapper whatever the header says (MBC2: 512).
        plain_ram_banks: for a mapper with its own ``ram_read`` / ``ram_write``, the RAM bank
            selects (``0 .. plain_ram_banks - 1``) for which they are :func:`banked_read` /
            :func:`banked_write`, so that the bus may access A000-BFFF in place
            (:func:`~torchrl_dreamer.emulator.mappers.cram_index`); ``None``: every select when
            the row has no RAM functions of its own, none when it has.
    """

    id: int
    name: str
    cartridge_types: Mapping[int, CartType]
    write: Any = None
    ram_read: Any = None
    ram_write: Any = None
    # a factory, so the class holds no function attribute (autodoc would list it as a method)
    rom_offsets: Callable[[int, int, int, int], tuple[int, int, int]] = field(
        default_factory=lambda: plain_offsets)
    power_on: Mapping[str, int] = field(default_factory=lambda: dict(POWER_ON))
    ram_size: int | None = None
    plain_ram_banks: int | None = None


@wp.func
def ram_enable_write(i: int, m: wp.ref[Mem], v: int):
    """0000-1FFF on MBC1/3/5: 0x0A in the low nibble enables cartridge RAM."""
    i = console(i)
    m.st[i, S_RAM_EN] = int((v & 0x0F) == 0x0A)


@wp.func(inline=False)
def plain_update(i: int, m: wp.ref[Mem]):
    """ROM_OFF1 from a single ROM bank register (BANK1, masked to the ROM size): MBC2, MBC3."""
    i = console(i)
    m.st[i, S_ROM_OFF1] = (m.st[i, S_BANK1] & m.st[i, S_ROM_MASK]) * BANK_SIZE


@wp.func
def banked_read(i: int, m: wp.ref[Mem], addr: int) -> int:
    """Read A000-BFFF from the selected 8 KiB RAM bank (modulo the RAM size; FF without RAM)."""
    i = console(i)
    off = m.st[i, S_RAM_BANK] * RAM_BANK_SIZE + (addr - 0xA000)
    size = m.st[i, S_RAM_SIZE]
    if size == 0:
        return 0xFF
    return int(m.cram[i, off % size])


@wp.func
def banked_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write A000-BFFF to the selected 8 KiB RAM bank (see :func:`banked_read`)."""
    i = console(i)
    size = m.st[i, S_RAM_SIZE]
    if size == 0:
        return
    off = m.st[i, S_RAM_BANK] * RAM_BANK_SIZE + (addr - 0xA000)
    m.cram[i, off % size] = wp.uint8(v)
