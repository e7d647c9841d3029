"""Cartridge mappers: one module per MBC, one table (:data:`MAPPERS`) that the kernel's dispatch
and the cartridge-type table are built from.

Each mapper module (:mod:`.rom_only`, :mod:`.mbc1` with the multicart wiring, :mod:`.mbc2`,
:mod:`.mbc3` with its real-time clock, :mod:`.mbc5`) holds its mapper id, cartridge type bytes,
power-on registers, Warp functions and host-side bank formula in one :class:`~.base.Mapper` row.
This package lists the rows and builds from them:

- the Warp dispatch the bus calls: :func:`cart_write` (0000-7FFF), :func:`cram_read` /
  :func:`cram_write` (A000-BFFF), each a flat ``if mbc == id`` chain unrolled from the table at
  compile time (``wp.static``), so the kernel is what a hand-written chain would be;
- :func:`cartridge_types` (header byte 0x147 -> mapper), which
  :mod:`~torchrl_dreamer.emulator.cartridge` reads, and :func:`mapper_for` (id -> row), which the
  power-on state and PyBoy state import read.

The current ROM bank offsets live in state columns ``ROM_OFF0`` / ``ROM_OFF1`` so the CPU's ROM
reads are a single array access; a mapper recomputes them when its bank registers change.

A new mapper is a new module with its ``MAPPER`` row plus one line in :data:`MAPPERS`.

Example:
    >>> from torchrl_dreamer.emulator.mappers import MAPPERS, mapper_for, cartridge_types
    >>> mapper_for(3).name, cartridge_types()[0x13].name
    ('MBC3', 'MBC3+RAM+BATTERY')
    >>> [row.name for row in MAPPERS][:3]
    ['ROM only', 'MBC1', 'MBC2']
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import S_MBC, S_RAM_BANK, S_RAM_EN, S_RAM_SIZE
from torchrl_dreamer.emulator.mappers import mbc1, mbc2, mbc3, mbc5, rom_only
from torchrl_dreamer.emulator.mappers.base import (
    RAM_BANK_SIZE,
    CartType,
    Mapper,
    banked_read,
    banked_write,
)
from torchrl_dreamer.emulator.mappers.mbc1 import MBC_1, MBC_1M
from torchrl_dreamer.emulator.mappers.mbc2 import MBC_2
from torchrl_dreamer.emulator.mappers.mbc3 import MBC_3, RTC_HZ, rtc_advance, rtc_needs_sync
from torchrl_dreamer.emulator.mappers.mbc5 import MBC_5
from torchrl_dreamer.emulator.mappers.rom_only import MBC_NONE
from torchrl_dreamer.emulator.memory import Mem, console

# The host-side API; the Warp functions (cart_write, cram_index, cram_read, cram_write,
# rtc_advance, rtc_needs_sync) are imported by name by the bus and the scheduler, not documented
# here.
__all__ = ["MAPPERS", "Mapper", "CartType", "mapper_for", "cartridge_types", "cartridge_mapper",
           "MBC_NONE", "MBC_1", "MBC_1M", "MBC_2", "MBC_3", "MBC_5"]

MAPPERS: tuple[Mapper, ...] = (
    rom_only.MAPPER,
    mbc1.MAPPER,
    mbc2.MAPPER,
    mbc3.MAPPER,
    mbc5.MAPPER,
    mbc1.MULTICART,
)
"""Every supported mapper wiring, one row each (ids and cartridge type bytes unique)."""


def _check_table(rows: tuple[Mapper, ...]) -> None:
    """Refuse a table whose mapper ids or cartridge type bytes repeat (the dispatch would pick
    the first row silently)."""
    ids: dict[int, str] = {}
    codes: dict[int, str] = {}
    for row in rows:
        if int(row.id) in ids:
            raise ValueError(f"mapper id {int(row.id)} of {row.name} is already {ids[int(row.id)]}'s; "
                             "give each row of MAPPERS its own id")
        ids[int(row.id)] = row.name
        for code in row.cartridge_types:
            if code in codes:
                raise ValueError(f"cartridge type 0x{code:02X} is listed by {codes[code]} and "
                                 f"{row.name}; keep it in one mapper module")
            codes[code] = row.name


_check_table(MAPPERS)
_BY_ID = {int(row.id): row for row in MAPPERS}


def mapper_for(mbc: int) -> Mapper:
    """The table row of mapper id ``mbc`` (state column ``MBC``, ``Cartridge.mbc``)."""
    try:
        return _BY_ID[int(mbc)]
    except KeyError:
        raise ValueError(f"unknown mapper id {mbc}; known: "
                         + ", ".join(f"{k} ({r.name})" for k, r in _BY_ID.items())) from None


def cartridge_types() -> dict[int, CartType]:
    """Header type byte (0x147) -> its :class:`~.base.CartType`, over every mapper, in table order."""
    return {code: t for row in MAPPERS for code, t in row.cartridge_types.items()}


def cartridge_mapper() -> dict[int, int]:
    """Header type byte (0x147) -> mapper id, over every mapper."""
    return {code: int(row.id) for row in MAPPERS for code in row.cartridge_types}


# (id, Warp function) pairs the dispatch unrolls; rows without their own function are left out
_WRITES = tuple((row.id, row.write) for row in MAPPERS if row.write is not None)
_RAM_READS = tuple((row.id, row.ram_read) for row in MAPPERS if row.ram_read is not None)
_RAM_WRITES = tuple((row.id, row.ram_write) for row in MAPPERS if row.ram_write is not None)
# (id, RAM bank selects that are plain banked RAM) for the rows where that is not every select
_PLAIN_BANKS = tuple((row.id, row.plain_ram_banks or 0) for row in MAPPERS
                     if row.ram_read is not None or row.ram_write is not None)


@wp.func(inline=False)
def cart_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write to 0000-7FFF: the mapper's control registers (dispatch on the mapper id)."""
    i = console(i)
    mbc = m.st[i, S_MBC]
    for k in range(wp.static(len(_WRITES))):
        if mbc == wp.static(_WRITES[k][0]):
            wp.static(_WRITES[k][1])(i, m, addr, v)
            return


@wp.func(inline=True)
def cram_index(i: int, m: wp.ref[Mem], addr: int) -> int:
    """Where A000-BFFF ``addr`` is in ``m.cram`` when the mapper would read and write it as
    plain banked RAM (:func:`~.base.banked_read`), for the bus's in-place path; -1 when the access
    needs the mapper: RAM disabled or absent, under 8 KiB (mirrored within a bank), a select
    that maps something else (the MBC3 clock), or a mapper whose RAM is not plain (MBC2)."""
    i = console(i)
    if m.st[i, S_RAM_EN] == 0:
        return -1
    size = m.st[i, S_RAM_SIZE]
    bank = m.st[i, S_RAM_BANK]
    if size < RAM_BANK_SIZE or (size & (size - 1)) != 0:
        return -1
    mbc = m.st[i, S_MBC]
    for k in range(wp.static(len(_PLAIN_BANKS))):
        if mbc == wp.static(_PLAIN_BANKS[k][0]) and bank >= wp.static(_PLAIN_BANKS[k][1]):
            return -1
    return (bank * RAM_BANK_SIZE + addr - 0xA000) & (size - 1)


@wp.func(inline=False)
def cram_read(i: int, m: wp.ref[Mem], addr: int) -> int:
    """Read A000-BFFF: FF while RAM is disabled, else the mapper's RAM (banked by default)."""
    i = console(i)
    if m.st[i, S_RAM_EN] == 0:
        return 0xFF
    mbc = m.st[i, S_MBC]
    for k in range(wp.static(len(_RAM_READS))):
        if mbc == wp.static(_RAM_READS[k][0]):
            return wp.static(_RAM_READS[k][1])(i, m, addr)
    return banked_read(i, m, addr)


@wp.func(inline=False)
def cram_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write A000-BFFF (see :func:`cram_read`)."""
    i = console(i)
    if m.st[i, S_RAM_EN] == 0:
        return
    mbc = m.st[i, S_MBC]
    for k in range(wp.static(len(_RAM_WRITES))):
        if mbc == wp.static(_RAM_WRITES[k][0]):
            wp.static(_RAM_WRITES[k][1])(i, m, addr, v)
            return
    banked_write(i, m, addr, v)
