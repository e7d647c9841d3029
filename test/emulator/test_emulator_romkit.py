"""Tiny in-test Game Boy ROM builder (raw SM83 bytes) used by the emulator tests."""

from __future__ import annotations

from torchrl_dreamer.emulator.cartridge import parse_cartridge

# Common SM83 encodings used by the micro ROMs.
DI = b"\xf3"
HALT = b"\x76"
LOOP = b"\x18\xfe"  # jr -2: spin forever
STOP_FOREVER = DI + b"\xaf\xe0\xff" + HALT + b"\x18\xfd"  # di; xor a; ldh (IE),a; halt; jr -3


COUNT_IRQ = b"\x21\x01\xc0\x34\xd9"  # ld hl,C001; inc (hl); reti


def ld_a(v: int) -> bytes:
    return bytes([0x3E, v & 0xFF])


def ld_a16_a(addr: int) -> bytes:
    return bytes([0xEA, addr & 0xFF, addr >> 8])


def ld_a_a16(addr: int) -> bytes:
    return bytes([0xFA, addr & 0xFF, addr >> 8])


def make_rom(code: bytes = STOP_FOREVER, cart_type: int = 0x00, rom_size_code: int = 0,
             ram_code: int = 0, title: str = "TEST", bank_marks: bool = True,
             vectors: dict[int, bytes] | None = None) -> bytes:
    """A valid cartridge image running ``code`` from 0x150 (entry ``jp 0x0150`` at 0x100).

    With ``bank_marks`` every bank b >= 1 holds ``b & 0xFF`` at its first byte and ``b >> 8`` at
    its second (read through 0x4000/0x4001 to check the mapper).
    """
    banks = 2 << rom_size_code
    rom = bytearray(banks * 0x4000)
    rom[0x100:0x104] = b"\x00\xc3\x50\x01"
    rom[0x104:0x10C] = bytes.fromhex("CEED6666CC0D000B")  # start of the boot logo
    rom[0x134:0x134 + len(title)] = title.encode()
    rom[0x147] = cart_type
    rom[0x148] = rom_size_code
    rom[0x149] = ram_code
    rom[0x150:0x150 + len(code)] = code
    for addr, handler in (vectors or {}).items():
        rom[addr:addr + len(handler)] = handler
    if bank_marks:
        for b in range(1, banks):
            rom[b * 0x4000] = b & 0xFF
            rom[b * 0x4000 + 1] = b >> 8
    hsum = 0
    for x in rom[0x134:0x14D]:
        hsum = (hsum - x - 1) & 0xFF
    rom[0x14D] = hsum
    g = (sum(rom) - rom[0x14E] - rom[0x14F]) & 0xFFFF
    rom[0x14E], rom[0x14F] = g >> 8, g & 0xFF
    return bytes(rom)


def test_make_rom_header_is_valid():
    cart = parse_cartridge(make_rom(cart_type=0x1B, rom_size_code=2, ram_code=3), check=False)
    assert cart.header_ok and cart.global_ok
    assert (cart.mbc, cart.rom_banks, cart.ram_size, cart.battery) == (5, 8, 0x8000, True)
