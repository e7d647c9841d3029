"""A STAT read that shows a mode other than 3 opens the bus's VRAM fast path (``VRAM_OPEN``,
:func:`~torchrl_dreamer.emulator.ppu.vram_open_seen`) exactly as far as a VRAM write there would:
to mode 3 of this line or of the next visible one.

The usual tile write reads STAT (once, or in a wait loop the idle fast-forward skips) and then
writes VRAM. A micro ROM fills 2 KiB of VRAM with FF with the LCD off, switches it on and then
writes 0 after STAT reads at every phase: first a single read, then a wait for mode 0 or 1; after
the read it waits 0-63 loop turns (up to two and a half lines), so that many writes fall in mode 3
of the same line or of a later one and are dropped. The oracle runs the ROM one instruction at a
time with the bound cleared before each, so every VRAM write goes through ``cpu_write``; it also
checks that each single STAT read stored a bound when, and only when, it read a mode other than 3.
"""

from __future__ import annotations

import pytest
from vram_oracle import run_bound_cleared

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS

SIZE = 0x400  # bytes written by each of the two phases

ROM_SRC = f"""
start:  ld sp, $DFFF
wv:     ldh a, [$44]
        cp 144
        jr nz, wv
        xor a
        ldh [$40], a
        ld hl, $8000
        ld bc, ${2 * SIZE:04X}
fill:   ld a, $FF
        ld [hl+], a
        dec bc
        ld a, b
        or c
        jr nz, fill
        ld a, $91
        ldh [$40], a
        ld hl, $8000
        ld d, 0
one:    ldh a, [$41]
after_one:
        ld b, d
        inc b
d1:     dec b
        jr nz, d1
        xor a
        ld [hl+], a
        ld a, d
        add a, 7
        and 63
        ld d, a
        ld a, h
        cp ${0x80 + SIZE // 0x100:02X}
        jr nz, one
wait:   ldh a, [$41]
        and 2
        jr nz, wait
        ld b, d
        inc b
d2:     dec b
        jr nz, d2
        xor a
        ld [hl+], a
        ld a, d
        add a, 5
        and 63
        ld d, a
        ld a, h
        cp ${0x80 + 2 * SIZE // 0x100:02X}
        jr nz, wait
        ld a, 1
        ld [$C000], a
spin:   jr spin
"""
DONE = 0xC000


@pytest.fixture(scope="module")
def program():
    return assemble(ROM_SRC)


@pytest.fixture(scope="module")
def rom(program) -> bytes:
    return build_rom(program, title="VRAMSTAT")


def checked_path_vram(rom: bytes, after_one: int, ppu: str) -> tuple[list[int], int, int]:
    """VRAM after the ROM ran one instruction a launch with ``VRAM_OPEN`` cleared before each;
    how many single STAT reads read a mode other than 3 and how many read mode 3 (each checked to
    have stored a bound exactly in the first case)."""
    gb = GameBoy(rom, check_header=False, ppu=ppu)
    col, pc, a = FIELDS["VRAM_OPEN"], FIELDS["PC"], FIELDS["A"]
    seen = [0, 0]

    def after_step(row):
        if int(row[pc]) == after_one and int(row[FIELDS["LINE"]]) < 144:
            mode3 = int(row[a]) & 3 == 3
            assert (int(row[col]) > 0) != mode3, (
                f"STAT read {int(row[a]):02X}: VRAM bound {int(row[col])}")
            seen[mode3] += 1

    run_bound_cleared(gb, DONE, 400_000, after_step)
    return gb.read_memory(0x8000, 2 * SIZE)[0].tolist(), seen[0], seen[1]


@pytest.mark.parametrize("ppu", ["line", "fifo"])
def test_a_stat_read_opens_vram_as_far_as_a_write_would(program, rom, ppu):
    gb = GameBoy(rom, check_header=False, ppu=ppu)
    gb.run_frames(30)
    assert gb.read_memory(DONE, 1)[0, 0] == 1
    fast = gb.read_memory(0x8000, 2 * SIZE)[0].tolist()
    checked, open_reads, mode3_reads = checked_path_vram(rom, program.symbols["after_one"], ppu)
    assert open_reads > 300 and mode3_reads > 100  # single reads at every phase of a line
    for phase in range(2):  # each phase wrote in mode 3 (dropped) and outside it
        part = fast[phase * SIZE:(phase + 1) * SIZE]
        assert 50 < part.count(0xFF) < SIZE - 50 and part.count(0) == SIZE - part.count(0xFF)
    first_diff = next((k for k in range(2 * SIZE) if fast[k] != checked[k]), None)
    assert first_diff is None, (f"VRAM ${0x8000 + first_diff:04X}: fast path {fast[first_diff]:02X},"
                                f" checked path {checked[first_diff]:02X}")
