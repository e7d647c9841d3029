"""benchmarks/memory_paths.py: each micro ROM runs its loop on the path it names, and bad input
is refused by name (no timing is asserted)."""

from __future__ import annotations

import pytest
from conftest import load_benchmark

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS


@pytest.fixture(scope="module")
def mp():
    return load_benchmark("memory_paths")


def _run(mp, case: str, frames: int = 5) -> GameBoy:
    gb = GameBoy(mp.build(case), check_header=False)
    gb.run_frames(frames, render=False)
    st = gb.state_tensors()["st"][0]
    assert int(st[FIELDS["LOCKED"]]) == 0
    assert 0x150 <= int(st[FIELDS["PC"]]) < 0x200  # still in its loop, in the ROM's code
    return gb


def test_every_case_builds_and_loops(mp):
    assert set(mp.CASES) == {"wram_copy", "cart_ram_copy", "vram_read", "vram_write",
                             "hram_loop", "lcd_registers", "rom_banks"}
    for case in mp.CASES:
        _run(mp, case)


def test_each_loop_is_on_its_path(mp):
    st = _run(mp, "cart_ram_copy").state_tensors()["st"][0]
    assert int(st[FIELDS["RAM_EN"]]) == 1 and int(st[FIELDS["RAM_SIZE"]]) == 0x8000
    st = _run(mp, "rom_banks").state_tensors()["st"][0]
    assert 1 <= int(st[FIELDS["BANK1"]]) <= 7
    assert int(st[FIELDS["ROM_OFF1"]]) == int(st[FIELDS["BANK1"]]) * 0x4000
    hram = _run(mp, "hram_loop").read_memory(0xFF90, 32)[0]
    assert int(hram.count_nonzero()) > 0  # its read-modify-writes landed
    lcd = _run(mp, "lcd_registers").read_memory(0xC000, 3 * 64)[0].tolist()
    assert all(v & 0x80 for v in lcd[0::3])  # STAT reads bit 7 as 1
    assert len(set(lcd[1::3])) > 1  # LY moves while it reads


@pytest.mark.parametrize("argv, message", [
    (["--cases", "nope"], "unknown case(s) ['nope']"),
    (["--frames", "10"], "at least 200"),
    (["--rounds", "0"], "at least 1"),
])
def test_bad_input_is_refused_by_name(mp, argv, message, capsys):
    with pytest.raises(SystemExit):
        mp.main(argv)
    assert message in capsys.readouterr().err
