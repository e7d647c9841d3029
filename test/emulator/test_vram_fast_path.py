"""The bus's VRAM fast path (``bus.wr`` with the kernel's ``vram_end``) drops and keeps exactly
the writes that the checked path (``bus.cpu_write``) drops and keeps.

A micro ROM fills 4 KiB of VRAM with FF while the LCD is off (the fast path's bound is then
unbounded), switches the LCD on (an IO write, which must clear that bound) and writes 0 to the
same 4 KiB, one byte every 44 dots, for about two and a half frames: every write that lands in
mode 3 of a visible line is dropped and leaves FF. (44 dots a write: the writes of successive
lines fall on every fourth dot of a line, so some land on mode 3's first dot, 81, or just
before it.) The oracle runs the same ROM one instruction at a time with the bound cleared before
each, so every VRAM write goes through ``cpu_write``.
"""

from __future__ import annotations

import pytest
from vram_oracle import run_bound_cleared

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS

SIZE = 0x1000

ROM_SRC = f"""
start:  ld sp, $DFFF
.wv:    ldh a, [$44]
        cp 144
        jr nz, .wv
        xor a
        ldh [$40], a
        ld hl, $8000
        ld bc, ${SIZE:04X}
.fill:  ld a, $FF
        ld [hl+], a
        dec bc
        ld a, b
        or c
        jr nz, .fill
        ld a, 100
        ldh [$45], a
        ld a, $91
        ldh [$40], a
        ld hl, $8000
        ld bc, ${SIZE:04X}
.clear: xor a
        nop
        ld [hl+], a
        dec bc
        ld a, b
        or c
        jr nz, .clear
        ld a, 1
        ld [$C000], a
.spin:  jr .spin
"""
DONE = 0xC000


@pytest.fixture(scope="module")
def rom() -> bytes:
    return build_rom(assemble(ROM_SRC), title="VRAMFP")


def checked_path_vram(rom: bytes, ppu: str) -> tuple[list[int], int]:
    """VRAM after the ROM ran one instruction a launch with ``VRAM_OPEN`` cleared before each,
    and how many steps found a bound set by the step before (the checked path stores one)."""
    gb = GameBoy(rom, check_header=False, ppu=ppu)
    col = FIELDS["VRAM_OPEN"]
    bounds = [0]

    def after_step(row):
        bounds[0] += int(row[col] > 0)

    run_bound_cleared(gb, DONE, 200_000, after_step)
    return gb.read_memory(0x8000, SIZE)[0].tolist(), bounds[0]


@pytest.mark.parametrize("ppu", ["line", "fifo"])
def test_vram_fast_path_drops_the_writes_the_checked_path_drops(rom, ppu):
    gb = GameBoy(rom, check_header=False, ppu=ppu)
    gb.run_frames(10)
    assert gb.read_memory(DONE, 1)[0, 0] == 1
    fast = gb.read_memory(0x8000, SIZE)[0].tolist()
    checked, bounds = checked_path_vram(rom, ppu)
    assert bounds > SIZE  # the checked path did store bounds, in both phases of the ROM
    dropped = fast.count(0xFF)
    # about 172 of every 456 dots of 144 visible lines are mode 3: ~4 of each line's ~10 writes
    assert 900 < dropped < 1500 and fast.count(0) == SIZE - dropped
    first_diff = next((k for k in range(SIZE) if fast[k] != checked[k]), None)
    assert first_diff is None, f"VRAM ${0x8000 + first_diff:04X}: fast path {fast[first_diff]:02X}, checked path {checked[first_diff]:02X}"
