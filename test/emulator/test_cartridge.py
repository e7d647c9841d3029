"""Cartridge header parsing, bad-input errors, mappers (MBC1/2/3/5) and battery RAM."""

from __future__ import annotations

import warnings

import pytest
import torch
from test_emulator_romkit import make_rom

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.cartridge import CartridgeError, parse_cartridge


def test_header_fields():
    cart = parse_cartridge(make_rom(cart_type=0x13, rom_size_code=3, ram_code=3, title="HELLO"))
    assert cart.title == "HELLO"
    assert (cart.mbc, cart.rom_banks, cart.ram_size, cart.battery, cart.rtc) == (3, 16, 0x8000, True, False)
    assert cart.type_name == "MBC3+RAM+BATTERY"


def test_checksum_mismatch_warns():
    rom = bytearray(make_rom())
    rom[0x14D] ^= 0xFF
    with pytest.warns(UserWarning, match="header checksum"):
        parse_cartridge(bytes(rom))


@pytest.mark.parametrize(
    "data,match",
    [
        (b"hello world, not a rom", "too short"),
        (make_rom()[:0x6000], "truncated"),
        (make_rom() + bytes(0x4000), "larger than its header"),
        (bytes(make_rom()[:0x147]) + b"\xfc" + make_rom()[0x148:], "unsupported cartridge type 0xFC"),
        (bytes(make_rom()[:0x149]) + b"\x09" + make_rom()[0x14A:], "RAM size code"),
    ],
)
def test_bad_roms_raise_clear_errors(data, match):
    with pytest.raises(CartridgeError, match=match):
        parse_cartridge(data, check=False)
    with pytest.raises(CartridgeError, match=match):
        GameBoy(data, check_header=False)


def test_missing_rom_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        GameBoy(tmp_path / "nope.gb")


def _bank(gb):
    lo, hi = gb.read_memory(0x4000, 2)[0].tolist()
    return lo | hi << 8


def test_rom_only_maps_bank1():
    gb = GameBoy(make_rom(), check_header=False)
    assert _bank(gb) == 1
    gb.write_memory(0x2000, 0)  # no mapper: ignored
    assert _bank(gb) == 1


def test_mbc1_rom_banking_both_modes():
    gb = GameBoy(make_rom(cart_type=0x03, rom_size_code=6, ram_code=3), check_header=False)  # 128 banks
    gb.write_memory(0x2000, 5)
    assert _bank(gb) == 5
    gb.write_memory(0x2000, 0)  # bank 0 maps as 1
    assert _bank(gb) == 1
    gb.write_memory(0x2000, 3)
    gb.write_memory(0x4000, 2)  # upper bits
    assert _bank(gb) == 0x43
    assert gb.read_memory(0x0000, 1)[0, 0] == 0  # mode 0: 0000-3FFF is bank 0
    gb.write_memory(0x6000, 1)  # mode 1: 0000-3FFF follows the upper bits (bank 0x40)
    assert gb.read_memory(0x0000, 1)[0, 0] == 0x40
    # RAM: disabled reads FF, enabled banks are separate in mode 1
    assert gb.read_memory(0xA000, 1)[0, 0] == 0xFF
    gb.write_memory(0x0000, 0x0A)
    gb.write_memory(0x4000, 1)
    gb.write_memory(0xA000, 0x11)
    gb.write_memory(0x4000, 2)
    gb.write_memory(0xA000, 0x22)
    gb.write_memory(0x4000, 1)
    assert gb.read_memory(0xA000, 1)[0, 0] == 0x11


def test_mbc2_nibble_ram_and_banks():
    gb = GameBoy(make_rom(cart_type=0x06, rom_size_code=3), check_header=False)
    gb.write_memory(0x2100, 7)  # address bit 8 set: ROM bank
    assert _bank(gb) == 7
    gb.write_memory(0x0000, 0x0A)  # bit 8 clear: RAM enable
    gb.write_memory(0xA000, 0xAB)
    assert gb.read_memory(0xA000, 1)[0, 0] == 0xFB  # 4-bit RAM, upper nibble reads 1s
    assert gb.read_memory(0xA200, 1)[0, 0] == 0xFB  # mirrored every 512 bytes


def test_mbc5_9bit_bank():
    gb = GameBoy(make_rom(cart_type=0x19, rom_size_code=8), check_header=False)  # 512 banks
    gb.write_memory(0x2000, 0x23)
    gb.write_memory(0x3000, 1)
    assert _bank(gb) == 0x123
    gb.write_memory(0x2000, 0)  # MBC5 can map bank 0 at 4000
    gb.write_memory(0x3000, 0)
    assert _bank(gb) == 0


def test_mbc3_rtc_runs_on_emulated_time():
    gb = GameBoy(make_rom(cart_type=0x10, rom_size_code=2, ram_code=3), check_header=False)
    gb.write_memory(0x0000, 0x0A)
    gb.run_frames(60 * 3)  # 180 frames * 70224 cycles ~ 3.01 s
    gb.write_memory(0x6000, 0)
    gb.write_memory(0x6000, 1)  # latch
    gb.write_memory(0x4000, 0x08)
    assert gb.read_memory(0xA000, 1)[0, 0] == 3
    # halting the clock (DH bit 6) stops it
    gb.write_memory(0x4000, 0x0C)
    gb.write_memory(0xA000, 0x40)
    gb.run_frames(120)
    gb.write_memory(0x6000, 0)
    gb.write_memory(0x6000, 1)
    gb.write_memory(0x4000, 0x08)
    assert gb.read_memory(0xA000, 1)[0, 0] == 3


def test_battery_ram_save_load():
    rom = make_rom(cart_type=0x03, rom_size_code=1, ram_code=2)
    gb = GameBoy(rom, num_envs=2, check_header=False)
    gb.write_memory(0x0000, 0x0A)
    gb.write_memory(0xA010, torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.uint8))
    sav = gb.battery_ram(1)
    assert len(sav) == 0x2000 and sav[0x10:0x13] == bytes([4, 5, 6])
    gb2 = GameBoy(rom, num_envs=2, check_header=False)
    gb2.load_battery_ram(sav, mask=torch.tensor([True, False]))
    gb2.write_memory(0x0000, 0x0A)
    assert gb2.read_memory(0xA010, 3).tolist() == [[4, 5, 6], [0, 0, 0]]
    with pytest.raises(ValueError, match="battery RAM must be"):
        gb2.load_battery_ram(b"\x00" * 3)


def test_real_game_headers(roms):
    from conftest import rom_path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cart = parse_cartridge((rom_path(roms, "games/tobutobugirl/tobu.gb")).read_bytes())
        cart5 = parse_cartridge((rom_path(roms, "games/pandoras-blocks/PandorasBlocks.gbc")).read_bytes())
    assert (cart.title, cart.mbc, cart.rom_banks, cart.ram_size, cart.header_ok) == ("TOBU", 1, 16, 8192, True)
    assert (cart5.mbc, cart5.ram_size, cart5.cgb_flag) == (5, 0x20000, 0x80)


def _with_cgb_flag(flag: int) -> bytes:
    rom = bytearray(make_rom(title="COLOR"))
    rom[0x143] = flag
    return bytes(rom)


def test_color_only_rom_is_refused_on_a_dmg():
    """A Color-only cartridge (0x143 = 0xC0) is refused for a DMG console with a message naming
    the Color model, whether parsed for a DMG or when a DMG GameBoy is asked for (unset, the
    model is the Color: ``test_cgb.py``); dual-mode (0x80) still parses."""
    from torchrl_dreamer.emulator.cartridge import ColorOnlyCartridgeError

    with pytest.raises(ColorOnlyCartridgeError, match="Color-only.*DMG.*model='cgb'"):
        parse_cartridge(_with_cgb_flag(0xC0), check=False)
    with pytest.raises(CartridgeError, match="0x143 is 0xC0.*model='cgb'"):
        GameBoy(_with_cgb_flag(0xC0), check_header=False, model="dmg")
    header_only = parse_cartridge(_with_cgb_flag(0xC0), check=False, dmg_only=False)
    assert header_only.cgb_flag == 0xC0
    assert parse_cartridge(_with_cgb_flag(0x80), check=False).cgb_flag == 0x80
