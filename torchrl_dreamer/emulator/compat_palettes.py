"""The colours the Game Boy Color's boot ROM gives a DMG-only game: its compatibility palettes.

A DMG-only cartridge (header byte 0x143 without bit 7) on a Color runs in the compatibility
mode, where the DMG palettes BGP, OBP0 and OBP1 no longer pick greys: they index the Color's
palette memory, BG palette 0 for the background and window and OBJ palettes 0 and 1 for objects
(by attribute bit 4). The boot ROM fills those three palettes from a table chosen by the header
(facts: Pan Docs "Power Up Sequence", "Compatibility palettes"; the boot ROM's tables as its
public disassembly lists them, ISSOtm/gb-bootroms ``src/cgb.asm``):

1. A Nintendo cartridge (old licensee 0x01, or 0x33 with new licensee ``"01"``) gets a palette
   ID from its title checksum (the sum of the 16 bytes at 0x134-0x143, mod 256); any other
   cartridge, or a checksum not in the table, gets ID 0.
2. The checksum's index in the 79-entry table is the ID when it is 64 or below. Indexes 65-78
   are checksums that several titles share: the title's fourth letter is looked up in the
   column of that index in a table of letter rows, and each row down adds 14 to the ID; a letter
   not there gives ID 0.
3. The ID's byte in a 94-entry table holds a combination (bits 0-4) and three selector bits
   (bits 5-7). A combination is three palette offsets; the selectors pick which offset OBJ 0
   and OBJ 1 take (BG always takes the third): bit 0 set gives OBJ 0 the first offset (else the
   third); OBJ 1 gets the second with bit 2, else the first with bit 1, else the third.
4. An offset is a byte offset into the boot ROM's 240 bytes of colours (4 RGB555 words a
   palette; a few offsets start mid-palette, and take the words found there).

ID 0, the colours of every non-Nintendo game (homebrew included): BG white, light green, dark
blue-green, black; both OBJ palettes white, pink-red, dark red, black.

Besides the palettes, the boot ROM leaves the title checksum in register B (Nintendo cartridges;
0 for others) and, for the checksums 0x43 and 0x58 only, the DMG logo's tile map in VRAM with HL
at 0x991A (else HL is 0x007C and the logo's rows of the map are cleared): :func:`compat_boot`.

A user's own Color boot ROM (``GameBoy(..., boot_rom=...)``) makes this choice itself, including
the button combinations held during the logo that override it; without one the console starts
after the boot ROM with no buttons held.

Example:
    >>> rom = bytearray(0x150); rom[0x134:0x13A] = b"TETRIS"; rom[0x14B] = 0x01
    >>> b = compat_boot(bytes(rom))
    >>> b.palette_id, hex(b.title_checksum), [hex(c) for c in b.bg]
    (5, '0xdb', ['0x7fff', '0x3ff', '0x1f', '0x0'])
    >>> compat_boot(bytes(0x150)).palette_id   # not a Nintendo cartridge
    0
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CompatBoot", "compat_boot", "compat_palette_id", "title_checksum",
           "nintendo_licensee", "LOGO_MAP_CHECKSUMS"]

_CHECKSUMS = bytes.fromhex(
    "00 88 16 36 D1 DB F2 3C 8C 92 3D 5C 58 C9 3E 70 1D 59 69 19 35 A8 14 AA 75 95 99 34 6F 15"
    "FF 97 4B 90 17 10 39 F7 F6 A2 49 4E 43 68 E0 8B F0 CE 0C 29 E8 B7 86 9A 52 01 9D 71 9C BD"
    "5D 6D 67 3F 6B"  # IDs 0-64 directly
    "B3 46 28 A5 C6 D3 27 61 18 66 6A BF 0D F4")  # 65-78: the fourth letter decides
"""Title checksums the boot ROM knows, in table order (the first match wins)."""

_SHARED = 65
"""Index of the first checksum that the title's fourth letter disambiguates."""

_FOURTH_LETTERS = b"BEFAARBEKEK R-" b"URAR INAILICE " b"R"
"""Rows of 14 fourth letters (column = checksum index - 65); row r adds 14 r to the ID."""

_ENTRIES = bytes.fromhex(
    "7C 08 12 A3 A2 07 87 4B 20 12 65 A8 16 A9 86 B1 68 A0 87 66 12 A1 30 3C 12 85 12 64 1B 07"
    "06 6F 6E 6E AE AF 6F B2 AF B2 A8 AB 6F AF 86 AE A2 A2 12 AF 13 12 A1 6E AF AF AD 06 4C 6E"
    "AF AF 12 7C AC A8 6A 6E 13 A0 2D A8 2B AC 64 AC 6D 87 BC 60 B4 13 72 7C B5 AE AE 7C 7C 65"
    "A2 6C 64 85")
"""Per palette ID (0-93): combination (bits 0-4) | selector bits (5-7)."""

_COMBINATIONS = bytes.fromhex(
    "80 B0 40 88 20 68 DE 00 70 DE 20 78 20 20 38 20 B0 90 20 B0 A0 E0 B0 C0 98 B6 48 80 E0 50"
    "1E 1E 58 20 B8 E0 88 B0 10 20 00 10 20 E0 18 E0 18 00 18 E0 20 A8 E0 20 18 E0 00 20 18 D8"
    "C8 18 E0 00 E0 40 28 28 28 18 E0 60 20 18 E0 00 00 08 E0 18 30 D0 D0 D0 20 E0 E8")
"""Three byte offsets into :data:`_COLOURS` per combination (29 combinations)."""

_COLOURS = (
    0x7FFF, 0x32BF, 0x00D0, 0x0000, 0x639F, 0x4279, 0x15B0, 0x04CB,
    0x7FFF, 0x6E31, 0x454A, 0x0000, 0x7FFF, 0x1BEF, 0x0200, 0x0000,
    0x7FFF, 0x421F, 0x1CF2, 0x0000, 0x7FFF, 0x5294, 0x294A, 0x0000,
    0x7FFF, 0x03FF, 0x012F, 0x0000, 0x7FFF, 0x03EF, 0x01D6, 0x0000,
    0x7FFF, 0x42B5, 0x3DC8, 0x0000, 0x7E74, 0x03FF, 0x0180, 0x0000,
    0x67FF, 0x77AC, 0x1A13, 0x2D6B, 0x7ED6, 0x4BFF, 0x2175, 0x0000,
    0x53FF, 0x4A5F, 0x7E52, 0x0000, 0x4FFF, 0x7ED2, 0x3A4C, 0x1CE0,
    0x03ED, 0x7FFF, 0x255F, 0x0000, 0x036A, 0x021F, 0x03FF, 0x7FFF,
    0x7FFF, 0x01DF, 0x0112, 0x0000, 0x231F, 0x035F, 0x00F2, 0x0009,
    0x7FFF, 0x03EA, 0x011F, 0x0000, 0x299F, 0x001A, 0x000C, 0x0000,
    0x7FFF, 0x027F, 0x001F, 0x0000, 0x7FFF, 0x03E0, 0x0206, 0x0120,
    0x7FFF, 0x7EEB, 0x001F, 0x7C00, 0x7FFF, 0x3FFF, 0x7E00, 0x001F,
    0x7FFF, 0x03FF, 0x001F, 0x0000, 0x03FF, 0x001F, 0x000C, 0x0000,
    0x7FFF, 0x033F, 0x0193, 0x0000, 0x0000, 0x4200, 0x037F, 0x7FFF,
    0x7FFF, 0x7E8C, 0x7C00, 0x0000, 0x7FFF, 0x1BEF, 0x6180, 0x0000,
)
"""The boot ROM's 240 bytes of colours as 120 RGB555 words (30 rows of 4)."""

LOGO_MAP_CHECKSUMS = (0x43, 0x58)
"""Title checksums for which the boot ROM writes the DMG logo's tile map (games that animate
the logo)."""


def title_checksum(rom: bytes) -> int:
    """Sum of the 16 title bytes 0x134-0x143, mod 256."""
    return sum(rom[0x134:0x144]) & 0xFF


def nintendo_licensee(rom: bytes) -> bool:
    """Whether the header names Nintendo: old licensee 0x01, or 0x33 with new licensee "01"."""
    if rom[0x14B] == 0x33:
        return bytes(rom[0x144:0x146]) == b"01"
    return rom[0x14B] == 0x01


def compat_palette_id(rom: bytes) -> int:
    """The boot ROM's palette ID (0-93) for cartridge image ``rom`` (see the module docs)."""
    if not nintendo_licensee(rom):
        return 0
    index = _CHECKSUMS.find(bytes([title_checksum(rom)]))
    if index < 0:
        return 0
    if index < _SHARED:
        return index
    column = index - _SHARED
    for row in range(0, len(_FOURTH_LETTERS), 14):
        if row + column < len(_FOURTH_LETTERS) and _FOURTH_LETTERS[row + column] == rom[0x137]:
            return index + row
    return 0


def _palette(offset: int) -> tuple[int, int, int, int]:
    w = offset // 2
    return tuple(_COLOURS[w:w + 4])  # type: ignore[return-value]


@dataclass(frozen=True)
class CompatBoot:
    """What the Color's boot ROM leaves for a DMG-only cartridge (see :func:`compat_boot`).

    Attributes:
        palette_id: the boot ROM's palette ID, 0-93.
        title_checksum: register B at 0x100 (the title checksum; 0 for a non-Nintendo header).
        bg: BG palette 0, four RGB555 colours (BGP's shades 0-3 index them).
        obj0: OBJ palette 0 (objects with attribute bit 4 clear; OBP0 indexes it).
        obj1: OBJ palette 1 (attribute bit 4 set; OBP1).
        logo_map: the DMG logo's tile map stays in VRAM (and HL is 0x991A).
    """

    palette_id: int
    title_checksum: int
    bg: tuple[int, int, int, int]
    obj0: tuple[int, int, int, int]
    obj1: tuple[int, int, int, int]
    logo_map: bool

    @property
    def hl(self) -> int:
        """Register pair HL at 0x100."""
        return 0x991A if self.logo_map else 0x007C


def compat_boot(rom: bytes) -> CompatBoot:
    """The compatibility palettes and boot-time registers for DMG-only cartridge image ``rom``."""
    pid = compat_palette_id(rom)
    entry = _ENTRIES[pid]
    k = 3 * (entry & 0x1F)
    first, second, third = _COMBINATIONS[k:k + 3]
    sel = entry >> 5
    obj0 = first if sel & 1 else third
    obj1 = second if sel & 4 else (first if sel & 2 else third)
    checksum = title_checksum(rom) if nintendo_licensee(rom) else 0
    return CompatBoot(palette_id=pid, title_checksum=checksum, bg=_palette(third),
                      obj0=_palette(obj0), obj1=_palette(obj1),
                      logo_map=checksum in LOGO_MAP_CHECKSUMS)
