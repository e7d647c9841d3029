"""MBC3 (types 0F-13): 7-bit ROM bank, 4 RAM banks (8 on the 64 KiB MBC30), and on the TIMER types
a real-time clock. Facts: Pan Docs "MBC3".

MBC3 real-time clock: deterministic, it counts emulated T-cycles (4,194,304 = one second), never
the host clock. Every catch-up of the lazy clock advances it (:func:`rtc_advance`), and the bus
catches up before a latch or an RTC register write (:func:`rtc_needs_sync`), so a program sees
the time of the exact M-cycle it accesses the clock in. Its registers (RAM bank 08-0C: seconds,
minutes, hours, day low, day high = day bit 8 | halt 0x40 | day carry 0x80) are read through
the latched copy, which *every* write to 6000-7FFF refreshes, whatever the value (the MBC3 that
CasualPokePlayer's latch-rtc-test ran on: its 52 single writes of random values each relatched;
Pan Docs' 00-then-01 sequence still works, it just latches twice).
Writes go to the live counters only (masked to their 6/6/5/8/3 bits; unused bits read 0) and
are seen after the next latch; a seconds write also restarts the current second, writes to the
other registers keep its fraction, and the halt bit pauses it. Counters at out-of-range values
count on to their bit width and wrap to 0 without a carry (only 59 -> 0 seconds / minutes and
23 -> 0 hours carry); day 511 -> 0 sets the sticky carry bit. The select register is 4 bits
(bits 4-7 are ignored); on a cartridge with the clock, the selects that map nothing (04-07
beyond the MBC3's 4 RAM banks, 0D-0F) read FF and drop writes (rtc-invalid-banks-test); the
64 KiB MBC30 (Pokemon Crystal JP) maps RAM banks 04-07. MBC3 carts without the crystal (types
without TIMER) keep the registers but the clock never ticks, and their selects 04-07 mirror
RAM banks 00-03 (modulo the RAM size) as before: no measurement says otherwise. Facts and their
sources: docs/accuracy.md, "MBC3 real-time clock".
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_BANK1,
    S_RAM_BANK,
    S_RAM_SIZE,
    S_RTC_DH,
    S_RTC_DL,
    S_RTC_H,
    S_RTC_LATCH,
    S_RTC_LDH,
    S_RTC_LS,
    S_RTC_M,
    S_RTC_ON,
    S_RTC_S,
    S_RTC_SUB,
)
from torchrl_dreamer.emulator.mappers.base import (
    CartType,
    Mapper,
    banked_read,
    banked_write,
    plain_update,
    ram_enable_write,
)
from torchrl_dreamer.emulator.memory import Mem, console

__all__ = ["MBC_3", "MAPPER", "RTC_HZ", "mbc3_write", "mbc3_ram_read", "mbc3_ram_write",
           "rtc_advance", "rtc_needs_sync"]

MBC_3 = wp.constant(3)
"""Mapper id of an MBC3 cartridge (with or without the clock, MBC30 included)."""

RTC_HZ = wp.constant(4194304)
"""T-cycles per emulated second of the MBC3 clock (the DMG's 4.19 MHz master clock)."""
MBC3_RAM_BANKS = wp.constant(4)  # RAM bank selects 00-03 of a 32 KiB MBC3 (MBC30: 8, 64 KiB)
MBC30_RAM_SIZE = wp.constant(0x10000)
RTC_REG_S = wp.constant(0x08)  # RAM bank select values of the RTC registers: seconds ...
RTC_REG_H = wp.constant(0x0A)  # ... hours
RTC_REG_DH = wp.constant(0x0C)  # ... day high (the last one)
RTC_HALT = wp.constant(0x40)  # day high bit 6: clock stopped
RTC_DAY_CARRY = wp.constant(0x80)  # day high bit 7: the 9-bit day counter overflowed (sticky)

# register k (RAM bank 08 + k) is state column RTC_S + k, its latched copy RTC_LS + k
assert S_RTC_DH - S_RTC_S == 4 and S_RTC_LDH - S_RTC_LS == 4


@wp.func(inline=False)
def mbc3_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """MBC3: RAM/RTC enable, 7-bit ROM bank, 4-bit RAM bank or RTC register select, RTC latch
    (any write to 6000-7FFF)."""
    i = console(i)
    if addr < 0x2000:
        ram_enable_write(i, m, v)
    elif addr < 0x4000:
        b = v & 0x7F
        if b == 0:
            b = 1
        m.st[i, S_BANK1] = b
        plain_update(i, m)
    elif addr < 0x6000:
        m.st[i, S_RAM_BANK] = v & 0x0F
    else:
        rtc_latch(i, m)  # every write latches (cpp/latch-rtc-test), not only a rising bit 0
        m.st[i, S_RTC_LATCH] = v  # the last value written, kept for savestates and debugging


@wp.func
def mbc3_ram_read(i: int, m: wp.ref[Mem], addr: int) -> int:
    """Read A000-BFFF: RAM banks 00-03 (00-07 on the MBC30), the latched RTC registers (08-0C);
    the selects that map nothing read FF (see :func:`mbc3_ram_write`)."""
    i = console(i)
    bank = m.st[i, S_RAM_BANK]
    if bank >= MBC3_RAM_BANKS:
        if bank >= RTC_REG_S:
            if bank > RTC_REG_DH:
                return 0xFF  # 0D-0F map nothing
            return m.st[i, S_RTC_LS + bank - RTC_REG_S]
        if m.st[i, S_RTC_ON] != 0 and m.st[i, S_RAM_SIZE] < MBC30_RAM_SIZE:
            return 0xFF  # 04-07 map nothing on a 32 KiB MBC3 with the clock
    return banked_read(i, m, addr)


@wp.func
def mbc3_ram_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write A000-BFFF: RAM, or a live RTC counter (08-0C, masked; seconds restart the second)."""
    i = console(i)
    bank = m.st[i, S_RAM_BANK]
    if bank >= MBC3_RAM_BANKS:
        if bank >= RTC_REG_S:
            if bank <= RTC_REG_DH:  # 0D-0F map nothing
                m.st[i, S_RTC_S + bank - RTC_REG_S] = v & rtc_reg_mask(bank)
                if bank == RTC_REG_S:
                    m.st[i, S_RTC_SUB] = 0
            return
        # 04-07: an MBC3 has 4 RAM banks (its select lines 2-3 go to the clock), the 64 KiB
        # MBC30 8; without the clock they mirror 00-03 (modulo the RAM size, in banked_write)
        if m.st[i, S_RTC_ON] != 0 and m.st[i, S_RAM_SIZE] < MBC30_RAM_SIZE:
            return
    banked_write(i, m, addr, v)


@wp.func
def rtc_reg_mask(bank: int) -> int:
    """Implemented bits of RTC register ``bank`` (08-0C); the others read 0."""
    if bank < RTC_REG_H:
        return 0x3F  # seconds, minutes
    if bank == RTC_REG_H:
        return 0x1F
    if bank < RTC_REG_DH:
        return 0xFF  # day low
    return RTC_DAY_CARRY | RTC_HALT | 1


@wp.func(inline=False)
def rtc_latch(i: int, m: wp.ref[Mem]):
    """Copy the live counters to the latched registers that A000-BFFF reads."""
    i = console(i)
    for k in range(5):
        m.st[i, S_RTC_LS + k] = m.st[i, S_RTC_S + k]


@wp.func
def rtc_count(v: int, last: int, mask: int) -> int:
    """One count of an RTC counter: ``last`` wraps to 0 (and carries: the result is negative,
    -1); any other value counts on within its ``mask`` bits, an out-of-range one wrapping to 0
    without a carry."""
    if v == last:
        return -1
    return (v + 1) & mask


@wp.func(inline=False)
def rtc_second(i: int, m: wp.ref[Mem]):
    """One second of the MBC3 clock: seconds, and the carries into minutes, hours and days."""
    i = console(i)
    s = rtc_count(m.st[i, S_RTC_S], 59, 0x3F)
    if s >= 0:
        m.st[i, S_RTC_S] = s
        return
    m.st[i, S_RTC_S] = 0
    mi = rtc_count(m.st[i, S_RTC_M], 59, 0x3F)
    if mi >= 0:
        m.st[i, S_RTC_M] = mi
        return
    m.st[i, S_RTC_M] = 0
    h = rtc_count(m.st[i, S_RTC_H], 23, 0x1F)
    if h >= 0:
        m.st[i, S_RTC_H] = h
        return
    m.st[i, S_RTC_H] = 0
    dh = m.st[i, S_RTC_DH]
    day = ((dh & 1) << 8) + m.st[i, S_RTC_DL] + 1
    if day > 511:
        day = 0
        dh = dh | RTC_DAY_CARRY
    m.st[i, S_RTC_DL] = day & 0xFF
    m.st[i, S_RTC_DH] = (dh & (RTC_DAY_CARRY | RTC_HALT)) | (day >> 8)


@wp.func(inline=True)
def rtc_advance(i: int, m: wp.ref[Mem], tcycles: int):
    """Advance a ticking MBC3 clock by ``tcycles`` emulated T-cycles (one check when it has none,
    or is halted: then the current second's fraction is kept)."""
    i = console(i)
    if m.st[i, S_RTC_ON] != 0:
        if (m.st[i, S_RTC_DH] & RTC_HALT) == 0:
            sub = m.st[i, S_RTC_SUB] + tcycles
            while sub >= RTC_HZ:
                sub = sub - RTC_HZ
                rtc_second(i, m)
            m.st[i, S_RTC_SUB] = sub


@wp.func
def rtc_needs_sync(i: int, m: wp.ref[Mem], addr: int) -> bool:
    """Whether a write to ``addr`` reads or sets the clock (a latch, an RTC register write), so
    the console must first catch up with the CPU's cycle."""
    i = console(i)
    if m.st[i, S_RTC_ON] == 0:
        return False
    if addr >= 0x6000 and addr < 0x8000:
        return True
    return addr >= 0xA000 and addr < 0xC000 and m.st[i, S_RAM_BANK] >= RTC_REG_S


MAPPER = Mapper(
    id=MBC_3,
    name="MBC3",
    cartridge_types={
        0x0F: CartType(False, True, True, "MBC3+TIMER+BATTERY"),
        0x10: CartType(True, True, True, "MBC3+TIMER+RAM+BATTERY"),
        0x11: CartType(False, False, False, "MBC3"),
        0x12: CartType(True, False, False, "MBC3+RAM"),
        0x13: CartType(True, True, False, "MBC3+RAM+BATTERY"),
    },
    write=mbc3_write,
    ram_read=mbc3_ram_read,
    ram_write=mbc3_ram_write,
    plain_ram_banks=MBC3_RAM_BANKS,  # 04-07 may map nothing, 08-0C are the clock's
)
"""The MBC3 row of the mapper table."""
