"""The mapper table: each row's host bank formula agrees with its Warp functions, the cartridge
types come from the rows, and a table with a repeated id or type byte is refused."""

from __future__ import annotations

import dataclasses

import pytest
from test_emulator_romkit import make_rom

from torchrl_dreamer.emulator import GameBoy, layout
from torchrl_dreamer.emulator.cartridge import CARTRIDGE_TYPES
from torchrl_dreamer.emulator.mappers import MAPPERS, _check_table, cartridge_types, mapper_for

# (type byte, ROM size code, control writes) per mapper: writes that move both bank registers
_CASES = [
    (0x03, 6, [(0x2000, 0x15), (0x4000, 2), (0x6000, 1), (0x2000, 0), (0x4000, 3)]),  # MBC1
    (0x06, 3, [(0x2100, 0x0B), (0x2100, 0)]),  # MBC2
    (0x13, 6, [(0x2000, 0x5A), (0x4000, 2), (0x2000, 0)]),  # MBC3
    (0x1B, 8, [(0x2000, 0x34), (0x3000, 1), (0x4000, 3), (0x2000, 0)]),  # MBC5
]


@pytest.mark.parametrize(("cart_type", "size_code", "writes"), _CASES)
def test_host_bank_formula_matches_the_kernel(cart_type, size_code, writes):
    """PyBoy states build ROM_OFF0/ROM_OFF1/RAM_BANK with the row's host formula: after every
    control write it must give what the mapper's Warp functions computed."""
    gb = GameBoy(make_rom(cart_type=cart_type, rom_size_code=size_code, ram_code=3),
                 check_header=False)
    row = mapper_for(gb.cartridge.mbc)
    f = layout.FIELDS
    for addr, value in writes:
        gb.write_memory(addr, value)
        st = gb.state_tensors()["st"][0]
        off0, off1, ram_bank = row.rom_offsets(int(st[f["BANK1"]]), int(st[f["BANK2"]]),
                                               int(st[f["MBC_MODE"]]), gb.cartridge.rom_banks - 1)
        assert (off0, off1) == (int(st[f["ROM_OFF0"]]), int(st[f["ROM_OFF1"]])), (addr, value)
        if ram_bank >= 0:
            assert ram_bank == int(st[f["RAM_BANK"]]), (addr, value)


def test_power_on_registers_come_from_the_row():
    gb = GameBoy(make_rom(cart_type=0x1B, rom_size_code=3, ram_code=3), check_header=False)
    st = gb.state_tensors()["st"][0]
    for name, value in mapper_for(gb.cartridge.mbc).power_on.items():
        assert int(st[layout.FIELDS[name]]) == value, name


def test_cartridge_types_are_the_rows_types():
    assert CARTRIDGE_TYPES == {code: (int(row.id), *t) for row in MAPPERS
                               for code, t in row.cartridge_types.items()}
    assert set(cartridge_types()) == set(CARTRIDGE_TYPES)
    assert {int(row.id) for row in MAPPERS} == {0, 1, 2, 3, 5, 6}


def test_repeated_id_or_type_byte_is_refused():
    mbc5 = mapper_for(5)
    with pytest.raises(ValueError, match="mapper id 5 of MBC5 copy is already MBC5's"):
        _check_table((*MAPPERS, dataclasses.replace(mbc5, name="MBC5 copy", cartridge_types={})))
    with pytest.raises(ValueError, match="cartridge type 0x19 is listed by MBC5 and new"):
        _check_table((*MAPPERS, dataclasses.replace(mbc5, id=9, name="new")))
    with pytest.raises(ValueError, match="unknown mapper id 9"):
        mapper_for(9)
