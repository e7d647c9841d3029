"""Battery-backed save files (``.sav``): cartridge RAM, then the MBC3 clock for carts with one.

Format (what BGB and VBA-M write, so saves move between them and us): the cartridge RAM image
(``Cartridge.ram_size`` bytes), and for carts with an MBC3 real-time clock a 48-byte trailer of
little-endian fields:

=========  ======  ===============================================================
offset     type    field
=========  ======  ===============================================================
0 .. 19    5 x u32 live counters: seconds, minutes, hours, day low, day high
20 .. 39   5 x u32 latched copies, same order
40 .. 47   u64     UNIX time of the save (seconds)
=========  ======  ===============================================================

Day high holds day bit 8 (0x01), halt (0x40) and the day carry (0x80). The 44-byte variant with
a u32 time stamp is read too. Our clock is deterministic (emulated cycles only), so time does not
pass while a save sits on disk: the time stamp is written as given (0 by default; pass the host
time for another emulator to add the time elapsed since) and ignored on load. The fraction of the
current second is not part of the format: a loaded clock starts a fresh second (savestates keep
it exactly).

Example:
    >>> trailer = pack_rtc([1, 2, 3, 4, 0x41], [1, 2, 3, 4, 0x41])
    >>> len(trailer), unpack_rtc(trailer)[0]
    (48, [1, 2, 3, 4, 65])
"""

from __future__ import annotations

import struct

__all__ = ["RTC_TRAILER_SIZE", "RTC_TRAILER_SIZES", "pack_rtc", "unpack_rtc"]

RTC_TRAILER_SIZE = 48
"""Bytes of the RTC trailer we write."""
RTC_TRAILER_SIZES = (48, 44)
"""Trailer sizes we read (64-bit and 32-bit time stamp)."""

_MASKS = (0x3F, 0x3F, 0x1F, 0xFF, 0xC1)  # implemented bits of S, M, H, DL, DH


def pack_rtc(live: list[int], latched: list[int], timestamp: int = 0) -> bytes:
    """The 48-byte trailer for clock registers ``live`` and ``latched`` (S, M, H, DL, DH)."""
    return struct.pack("<10IQ", *live, *latched, timestamp)


def unpack_rtc(trailer: bytes) -> tuple[list[int], list[int], int]:
    """``(live, latched, timestamp)`` from a 48- or 44-byte trailer (values masked to the
    registers' bits)."""
    if len(trailer) not in RTC_TRAILER_SIZES:
        raise ValueError(f"an RTC trailer is 48 or 44 bytes, got {len(trailer)}")
    fmt = "<10IQ" if len(trailer) == 48 else "<10II"
    *regs, stamp = struct.unpack(fmt, trailer)
    masked = [v & _MASKS[k % 5] for k, v in enumerate(regs)]
    return masked[:5], masked[5:], stamp
