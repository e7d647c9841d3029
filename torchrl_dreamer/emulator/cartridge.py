"""Game Boy cartridge header parsing and validation.

:func:`parse_cartridge` reads the header at 0x100-0x14F of a ROM image, checks it against the
image (size, known mapper) and returns a :class:`Cartridge`. Bad input raises
:class:`CartridgeError` naming the problem; checksum mismatches only warn (many homebrew ROMs get
them wrong and real hardware only checks the header checksum in the boot ROM).

Example:
    >>> from torchrl_dreamer.emulator.cartridge import parse_cartridge
    >>> rom = bytearray(0x8000); rom[0x147] = 0x00; rom[0x148] = 0x00
    >>> cart = parse_cartridge(bytes(rom), check=False)
    >>> cart.mbc, cart.rom_banks, cart.ram_size
    (0, 2, 0)
"""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from torchrl_dreamer.emulator.mappers import MAPPERS, MBC_1, MBC_1M, mapper_for

__all__ = ["Cartridge", "CartridgeError", "ColorOnlyCartridgeError", "CARTRIDGE_TYPES",
           "CGB_ONLY", "parse_cartridge", "load_rom_bytes", "is_mbc1_multicart"]


class CartridgeError(ValueError):
    """The ROM image is not a usable Game Boy cartridge (the message says why)."""


class ColorOnlyCartridgeError(CartridgeError):
    """The ROM is a Game Boy Color-only game (header byte 0x143 is 0xC0) and a DMG console was
    asked for (``model="dmg"``); run it with ``model="cgb"``.

    Dual-mode ROMs (0x80) run on either: they carry DMG code paths and fall back to them on a DMG.
    """


CGB_ONLY = 0xC0
"""Header byte 0x143 of a Color-only cartridge (0x80 marks a dual-mode one)."""


# type byte -> (mapper id, has RAM, has battery, has RTC, name), from each mapper's module
CARTRIDGE_TYPES: dict[int, tuple[int, bool, bool, bool, str]] = {
    code: (int(row.id), *t) for row in MAPPERS for code, t in row.cartridge_types.items()
}
"""Supported cartridge type bytes (0x147)."""

_RAM_SIZES = {0x00: 0, 0x01: 0x800, 0x02: 0x2000, 0x03: 0x8000, 0x04: 0x20000, 0x05: 0x10000}
_LOGO_HEAD = bytes.fromhex("CEED6666CC0D000B")
NINTENDO_LOGO = bytes.fromhex(
    "CEED6666CC0D000B03730083000C000D0008111F8889000EDCCC6EE6DDDDD999BBBB67636E0EECCCDDDC999FBBB9333E"
)
"""The 48 logo bytes at 0x104-0x133 of every licensed cartridge (the boot ROM checks them)."""
_MULTICART_BANKS = 64  # MBC1 multicarts are 8 Mbit: four 2 Mbit games of 16 banks
_MULTICART_PROBE_BANK = 0x10  # the second game's bank 0


def is_mbc1_multicart(data: bytes) -> bool:
    """Whether an MBC1 image is a multicart (e.g. Bomberman Collection, Mortal Kombat I & II).

    The header cannot tell: multicarts declare a plain 8 Mbit MBC1. On the board, BANK2 drives
    ROM address lines A18-A19 instead of A19-A20 and BANK1 bit 4 is not connected, so each 2 Mbit
    game sits in 16 banks. Like hardware-aware emulators we detect one by its layout: 64 banks
    with a second game header (the Nintendo logo) at the start of bank 0x10.
    """
    if len(data) != _MULTICART_BANKS * 0x4000:
        return False
    base = _MULTICART_PROBE_BANK * 0x4000
    return data[base + 0x104 : base + 0x134] == NINTENDO_LOGO


@dataclass(frozen=True)
class Cartridge:
    """Parsed cartridge header.

    Attributes:
        title: ASCII title (0x134-0x143, trailing NULs stripped).
        type_code: raw cartridge type byte (0x147); ``type_name`` its name.
        mbc: mapper id, a ``registers.MBC_*`` (0 none, 1 MBC1, 2 MBC2, 3 MBC3, 5 MBC5, 6 MBC1
            multicart wiring).
        rom_banks: number of 16 KiB ROM banks the header declares.
        ram_size: bytes of cartridge RAM (512 for MBC2's built-in nibble RAM).
        battery / rtc: battery-backed RAM, MBC3 real-time clock.
        cgb_flag: byte 0x143 (0x80 dual mode, 0xC0 CGB only).
        header_ok / global_ok: whether the checksums match.
        sha256: hex digest of the whole image (savestates record it).
    """

    title: str
    type_code: int
    type_name: str
    mbc: int
    rom_banks: int
    ram_size: int
    battery: bool
    rtc: bool
    cgb_flag: int
    header_ok: bool
    global_ok: bool
    sha256: str


def load_rom_bytes(rom: str | os.PathLike | bytes | bytearray | memoryview) -> bytes:
    """Return a ROM image's bytes from a path or a bytes-like object."""
    if isinstance(rom, (bytes, bytearray, memoryview)):
        return bytes(rom)
    if isinstance(rom, (str, os.PathLike)):
        p = Path(rom)
        if not p.is_file():
            raise FileNotFoundError(f"ROM file {p} does not exist")
        return p.read_bytes()
    raise TypeError(f"rom must be a path or bytes, got {type(rom).__name__}")


def parse_cartridge(data: bytes, check: bool = True, dmg_only: bool = True) -> Cartridge:
    """Parse and validate the header of ROM image ``data``.

    Args:
        data: the whole ROM image.
        check: also warn on a missing Nintendo logo / bad checksums (off for synthetic test ROMs).
        dmg_only: refuse Game Boy Color-only cartridges (for a DMG console); pass ``False`` to
            read such a header (the Color model, or to inspect it).

    Raises:
        ColorOnlyCartridgeError: a Color-only cartridge (0x143 == 0xC0) while ``dmg_only``.
        CartridgeError: truncated image, unknown cartridge type / size codes, or an image larger
            or smaller than its header declares.
    """
    if len(data) < 0x150:
        raise CartridgeError(
            f"ROM image is {len(data)} bytes: too short to hold a cartridge header (needs >= 0x150 "
            "bytes); is this a Game Boy ROM?"
        )
    if dmg_only and data[0x143] == CGB_ONLY:
        raise ColorOnlyCartridgeError(
            "this ROM is a Game Boy Color-only game (header byte 0x143 is 0xC0): a DMG (original "
            "Game Boy) cannot run it. Run it on the Color: GameBoy(rom, model='cgb') (--model cgb "
            "on the command line), or leave model unset, which picks the Color for such a ROM"
        )
    type_code = data[0x147]
    if type_code not in CARTRIDGE_TYPES:
        raise CartridgeError(
            f"unsupported cartridge type 0x{type_code:02X} at 0x147; supported: "
            + ", ".join(row.name for row in MAPPERS if row.cartridge_types)
            + " (codes " + ", ".join(f"0x{k:02X}" for k in sorted(CARTRIDGE_TYPES)) + ")"
        )
    mbc, has_ram, battery, rtc, name = CARTRIDGE_TYPES[type_code]
    if mbc == MBC_1 and is_mbc1_multicart(data):
        mbc, name = MBC_1M, name + " (multicart)"
    size_code = data[0x148]
    if size_code > 0x08:
        raise CartridgeError(f"unknown ROM size code 0x{size_code:02X} at 0x148 (valid: 0x00-0x08)")
    rom_banks = 2 << size_code
    if len(data) != rom_banks * 0x4000:
        what = "truncated" if len(data) < rom_banks * 0x4000 else "larger than its header says"
        raise CartridgeError(
            f"ROM image is {what}: header declares {rom_banks} banks ({rom_banks * 0x4000} bytes) "
            f"but the image has {len(data)} bytes"
        )
    ram_code = data[0x149]
    if ram_code not in _RAM_SIZES:
        raise CartridgeError(f"unknown RAM size code 0x{ram_code:02X} at 0x149 (valid: 0x00-0x05)")
    ram_size = _RAM_SIZES[ram_code] if has_ram else 0
    if mapper_for(mbc).ram_size is not None:  # RAM built into the mapper (MBC2)
        ram_size = mapper_for(mbc).ram_size
    title = data[0x134:0x144].split(b"\x00")[0].decode("ascii", errors="replace").strip()
    hsum = 0
    for b in data[0x134:0x14D]:
        hsum = (hsum - b - 1) & 0xFF
    header_ok = hsum == data[0x14D]
    gsum = (sum(data) - data[0x14E] - data[0x14F]) & 0xFFFF
    global_ok = gsum == (data[0x14E] << 8 | data[0x14F])
    if check:
        if data[0x104:0x10C] != _LOGO_HEAD:
            warnings.warn("ROM has no Nintendo logo at 0x104: it may not be a Game Boy ROM", stacklevel=2)
        if not header_ok:
            warnings.warn(f"header checksum mismatch (0x{data[0x14D]:02X} != 0x{hsum:02X})", stacklevel=2)
        if not global_ok:
            warnings.warn("global checksum mismatch (ignored by hardware)", stacklevel=2)
    return Cartridge(
        title=title,
        type_code=type_code,
        type_name=name,
        mbc=mbc,
        rom_banks=rom_banks,
        ram_size=ram_size,
        battery=battery,
        rtc=rtc,
        cgb_flag=data[0x143],
        header_ok=header_ok,
        global_ok=global_ok,
        sha256=hashlib.sha256(data).hexdigest(),
    )
