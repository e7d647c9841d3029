"""Cartridge image builder: places code, writes the DMG header and both checksums.

Why our own: the header layout is a handful of bytes, and we must NOT embed Nintendo's logo
(copyrighted); $0104-$0133 stays zero unless the caller supplies ``logo``. Emulators started
without a boot ROM (ours, PyBoy) do not check it; real hardware and boot ROMs do.

Header fields written ($0100-$014F): entry ``nop; jp start``, logo (zeros by default), title
(up to 15 upper-case ASCII characters at $0134), CGB flag $0143, new licensee $0144-5, SGB flag
$0146, cartridge type $0147, ROM size code $0148 (32 KiB << n), RAM size code $0149,
destination $014A, old licensee $014B, version $014C, header checksum $014D, global checksum
$014E-$014F (big-endian sum of every other byte).
"""

from __future__ import annotations

from torchrl_dreamer.asm.assembler import DEFAULT_ORIGIN, Program

__all__ = ["build_rom", "header_checksum", "global_checksum", "RAM_SIZE_CODES"]

HEADER_START, HEADER_END = 0x0100, 0x0150
LOGO_START, LOGO_LEN = 0x0104, 48
RAM_SIZE_CODES = {0: 0, 2048: 1, 8192: 2, 32768: 3, 131072: 4, 65536: 5}
_ROM_ONLY_TYPES = {0x00, 0x08, 0x09}


def header_checksum(rom: bytes | bytearray) -> int:
    """The header checksum stored at $014D: ``x = x - rom[i] - 1`` over $0134-$014C."""
    x = 0
    for i in range(0x0134, 0x014D):
        x = (x - rom[i] - 1) & 0xFF
    return x


def global_checksum(rom: bytes | bytearray) -> int:
    """The global checksum stored at $014E-$014F: 16-bit sum of all bytes except those two."""
    return (sum(rom) - rom[0x014E] - rom[0x014F]) & 0xFFFF


def _rom_size_code(size: int) -> int:
    code = (size // 0x8000).bit_length() - 1
    if size < 0x8000 or 0x8000 << code != size or code > 8:
        raise ValueError(f"rom_size={size} must be 32 KiB times a power of two (32768 .. 8 MiB)")
    return code


def build_rom(code: bytes | bytearray | Program, title: str = "", cart_type: int = 0x00,
              rom_size: int | None = None, ram_size: int = 0, *, entry: str | int = "start",
              logo: bytes | None = None, version: int = 0, cgb_flag: int = 0x00,
              sgb_flag: int = 0x00, destination: int = 0x01, licensee: int = 0x00,
              fill: int = 0x00) -> bytes:
    """Build a complete cartridge image with a valid header and checksums.

    Args:
        code: plain ``bytes`` (placed at $0150, entered there) or a :class:`Program` from
            :func:`~torchrl_dreamer.asm.assemble` (each section at its address; nothing may use
            $0100-$014F, the header).
        title: cartridge title, up to 15 ASCII characters (upper-cased).
        cart_type: header byte $0147 (0 = ROM only, 1 = MBC1, 0x13 = MBC3+RAM+battery, ...).
        rom_size: total ROM bytes (32 KiB << n); default: the smallest that fits.
        ram_size: external RAM: a header code 0..5, or a byte count (8192, 32768, ...).
        entry: label (for a ``Program``) or address the $0100 entry point jumps to.
        logo: the 48 logo bytes for $0104 if you need a boot ROM to accept the image
            (not shipped here: the Nintendo logo is copyrighted). Default: zeros.
        version, cgb_flag, sgb_flag, destination, licensee: remaining header fields.
        fill: value of unused ROM bytes.

    Example::

        >>> from torchrl_dreamer.asm import assemble
        >>> rom = build_rom(assemble("start: jr start"), title="SPIN")
        >>> len(rom), rom[0x100:0x104].hex(), rom[0x134:0x138]
        (32768, '00c35001', b'SPIN')
    """
    if isinstance(code, Program):
        prog = code
        for s in prog.sections:
            if s.is_rom and s.data and s.offset < HEADER_END and s.offset + len(s.data) > HEADER_START:
                raise ValueError(
                    f"section {s.name!r} ({s.filename}:{s.line}) overlaps the cartridge header "
                    "$0100-$014F: start code at $0150 (or jump over the header)")
        if isinstance(entry, str):
            if entry not in prog.symbols:
                raise ValueError(f"entry label {entry!r} is not defined: add a '{entry}:' label "
                                 "or pass entry=<label or address>")
            target = prog.symbols[entry]
        else:
            target = entry
        needed = max((s.offset + len(s.data) for s in prog.sections if s.is_rom), default=HEADER_END)
        sections = [(s.offset, bytes(s.data)) for s in prog.sections if s.is_rom and s.data]
    elif isinstance(code, bytes | bytearray):
        target = DEFAULT_ORIGIN if isinstance(entry, str) else entry
        needed = DEFAULT_ORIGIN + len(code)
        sections = [(DEFAULT_ORIGIN, bytes(code))]
    else:
        raise TypeError(f"code must be bytes or an assembled Program, got {type(code).__name__}")
    if not 0 <= target <= 0xFFFF:
        raise ValueError(f"entry address {target:#x} is outside $0000-$FFFF")

    if rom_size is None:
        rom_size = 0x8000
        while rom_size < needed:
            rom_size *= 2
    size_code = _rom_size_code(rom_size)
    if needed > rom_size:
        raise ValueError(f"code needs {needed} bytes but rom_size is {rom_size}")
    if rom_size > 0x8000 and cart_type in _ROM_ONLY_TYPES:
        raise ValueError(f"a {rom_size // 1024} KiB ROM needs a memory bank controller: pass "
                         "cart_type=0x01 (MBC1), 0x11 (MBC3) or 0x19 (MBC5)")
    if ram_size in RAM_SIZE_CODES.values():
        ram_code = ram_size
    elif ram_size in RAM_SIZE_CODES:
        ram_code = RAM_SIZE_CODES[ram_size]
    else:
        raise ValueError(f"ram_size={ram_size}: use a header code 0..5 or one of "
                         f"{sorted(k for k in RAM_SIZE_CODES if k)} bytes")
    raw_title = title.upper().encode("ascii", errors="strict")
    if len(raw_title) > 15:
        raise ValueError(f"title {title!r} is longer than 15 characters")
    if logo is not None and len(logo) != LOGO_LEN:
        raise ValueError(f"logo must be exactly {LOGO_LEN} bytes, got {len(logo)}")

    rom = bytearray([fill & 0xFF]) * rom_size
    for off, data in sections:
        rom[off: off + len(data)] = data
    rom[HEADER_START:HEADER_END] = bytes(HEADER_END - HEADER_START)
    rom[0x100:0x104] = bytes((0x00, 0xC3, target & 0xFF, target >> 8))
    if logo is not None:
        rom[LOGO_START: LOGO_START + LOGO_LEN] = logo
    rom[0x134: 0x134 + len(raw_title)] = raw_title
    rom[0x143] = cgb_flag & 0xFF
    rom[0x144:0x146] = b"00" if licensee == 0 else bytes(((licensee >> 8) & 0xFF, licensee & 0xFF))
    rom[0x146] = sgb_flag & 0xFF
    rom[0x147] = cart_type & 0xFF
    rom[0x148] = size_code
    rom[0x149] = ram_code
    rom[0x14A] = destination & 0xFF
    rom[0x14B] = 0x00
    rom[0x14C] = version & 0xFF
    rom[0x14D] = header_checksum(rom)
    g = global_checksum(rom)
    rom[0x14E], rom[0x14F] = g >> 8, g & 0xFF
    return bytes(rom)
