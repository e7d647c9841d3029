"""A VRAM read skips the PPU's access check (``bus.cpu_read``) while the bus's VRAM bound
(``VRAM_OPEN``) says that mode 3 is at least
:data:`~torchrl_dreamer.emulator.ppu.VRAM_READ_LEAD` dots away, and an unblocked read stores that
bound, as a write does.

A micro ROM fills 1 KiB of VRAM with bytes that are never FF with the LCD off, switches it on
and copies VRAM to WRAM a byte at a time, waiting 0-63 loop turns before each read (so reads fall
at every M-cycle of a line, about a third of them in mode 3 or in the M-cycle before it, where
they read FF). The first half follows reads only; the second half reads once after a wait for
mode 0 or 1 (a STAT poll) before each byte. The oracle runs the ROM one instruction at a time
with the bound cleared before each, so every VRAM read goes through ``cpu_read``.
"""

from __future__ import annotations

import pytest
from vram_oracle import run_bound_cleared

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS

SIZE = 0x200  # bytes read by each of the two phases
DST = 0xC100

ROM_SRC = f"""
start:  ld sp, $DFFF
wv:     ldh a, [$44]
        cp 144
        jr nz, wv
        xor a
        ldh [$40], a
        ld hl, $8000
        ld bc, ${2 * SIZE:04X}
fill:   ld a, l
        and $7F
        ld [hl+], a
        dec bc
        ld a, b
        or c
        jr nz, fill
        ld a, $91
        ldh [$40], a
        ld hl, $8000
        ld de, ${DST:04X}
        ld c, 0
one:    ld b, c
        inc b
d1:     dec b
        jr nz, d1
        ld a, [hl+]
        ld [de], a
        inc de
        ld a, c
        add a, 7
        and 63
        ld c, a
        ld a, h
        cp ${0x80 + SIZE // 0x100:02X}
        jr nz, one
wait:   ldh a, [$41]
        and 2
        jr nz, wait
        ld b, c
        inc b
d2:     dec b
        jr nz, d2
        ld a, [hl+]
        ld [de], a
        inc de
        ld a, c
        add a, 5
        and 63
        ld c, a
        ld a, h
        cp ${0x80 + 2 * SIZE // 0x100:02X}
        jr nz, wait
        ld a, 1
        ld [$C000], a
spin:   jr spin
"""
DONE = 0xC000


@pytest.fixture(scope="module")
def rom() -> bytes:
    return build_rom(assemble(ROM_SRC), title="VRAMREAD")


def checked_path_copy(rom: bytes, ppu: str) -> list[int]:
    """The bytes the ROM read from VRAM, run one instruction a launch with ``VRAM_OPEN``
    cleared before each (every VRAM read through ``cpu_read``)."""
    gb = GameBoy(rom, check_header=False, ppu=ppu)
    run_bound_cleared(gb, DONE, 400_000)
    return gb.read_memory(DST, 2 * SIZE)[0].tolist()


@pytest.mark.parametrize("ppu", ["line", "fifo"])
def test_vram_reads_in_place_read_what_cpu_read_would(rom, ppu):
    gb = GameBoy(rom, check_header=False, ppu=ppu)
    gb.run_frames(30)
    assert gb.read_memory(DONE, 1)[0, 0] == 1
    fast = gb.read_memory(DST, 2 * SIZE)[0].tolist()
    for phase in range(2):  # each phase read in mode 3 (FF) and outside it (the byte)
        part = fast[phase * SIZE:(phase + 1) * SIZE]
        assert 50 < part.count(0xFF) < SIZE - 50
        assert all(v == 0xFF or v == k & 0x7F for k, v in enumerate(part))
    checked = checked_path_copy(rom, ppu)
    first_diff = next((k for k in range(2 * SIZE) if fast[k] != checked[k]), None)
    assert first_diff is None, (f"read {first_diff} (VRAM ${0x8000 + first_diff:04X}): fast path "
                                f"{fast[first_diff]:02X}, checked path {checked[first_diff]:02X}")


def test_an_unblocked_vram_read_stores_the_bound(rom):
    """The first read after the LCD is switched on stores a bound; a read in mode 3 stores
    none (the IO write that switched the LCD on cleared it)."""
    gb = GameBoy(rom, check_header=False)
    st = gb.state_tensors()["st"]
    col, pc = FIELDS["VRAM_OPEN"], FIELDS["PC"]
    read_at = assemble(ROM_SRC).symbols["d1"] + 3  # ld a, [hl+]
    stored = blocked = 0
    for _ in range(200_000):
        before = int(st[0, pc])
        st[0, col] = 0
        gb.step_instructions(1)
        if before == read_at:
            if int(st[0, FIELDS["A"]]) == 0xFF:
                blocked += 1
                assert int(st[0, col]) == 0
            else:
                stored += 1
                assert int(st[0, col]) > 0
        if stored > 40 and blocked > 10:
            break
    assert stored > 40 and blocked > 10
