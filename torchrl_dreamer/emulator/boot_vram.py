"""VRAM as the DMG boot ROM leaves it: the cartridge's logo and the (R) tile, mapped on screen.

Without a boot ROM the console starts in the post-boot state, and some programs rely on what the
boot ROM left in VRAM (mattcurrie's mealybug-tearoom tests draw the (R) tile, tile 0x19). The boot
ROM (facts: Pan Docs "Power Up Sequence", the boot ROM disassembly) scales each of the 48 logo
bytes at 0x104 up to four 8-pixel rows (each nibble's bits doubled, each row twice), giving tiles
1-24 at 0x8010; it copies its 8-byte (R) glyph to tile 0x19 (0x8190), one byte per row with a
zero high byte; and it maps tiles 1-12 at 0x9904, 0x19 at 0x9910 and 13-24 at 0x9924.

Example:
    >>> from torchrl_dreamer.emulator.cartridge import NINTENDO_LOGO
    >>> v = boot_vram(bytes(0x104) + NINTENDO_LOGO)
    >>> len(v), v[0x1910], v[0x190] == REGISTERED_GLYPH[0]
    (8192, 25, True)
"""

from __future__ import annotations

__all__ = ["boot_vram", "REGISTERED_GLYPH"]

REGISTERED_GLYPH = bytes.fromhex("3C42B9A5B9A5423C")
"""The 8 rows of the (R) glyph the boot ROM puts in tile 0x19."""


def _double_bits(nibble: int) -> int:
    out = 0
    for k in range(4):
        if nibble >> k & 1:
            out |= 3 << (2 * k)
    return out


def boot_vram(rom: bytes) -> bytes:
    """The 8 KiB of VRAM (0x8000-0x9FFF) after the boot ROM ran on cartridge image ``rom``."""
    v = bytearray(0x2000)
    logo = rom[0x104:0x134].ljust(48, b"\x00")
    for k, byte in enumerate(logo):
        for half, nibble in enumerate((byte >> 4, byte & 15)):
            row = _double_bits(nibble)
            for rep in range(2):
                v[0x10 + k * 8 + half * 4 + rep * 2] = row
    for r, byte in enumerate(REGISTERED_GLYPH):
        v[0x190 + 2 * r] = byte
    for k in range(12):
        v[0x1904 + k] = 1 + k
        v[0x1924 + k] = 13 + k
    v[0x1910] = 0x19
    return bytes(v)
