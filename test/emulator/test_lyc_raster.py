"""A raster handler that moves LYC on in HBlank (``ppu.lyc_refine``): the LY=LYC interrupts come
on the same lines and at the same cycles whether the PPU runs its lines coarsely (nothing
observes the modes: frames not drawn) or mode by mode (every frame drawn).

The handler logs the low byte of the main loop's counter (a cycle stamp: one count per 5
M-cycles) and LY, waits for mode 0 as raster effects do, and moves LYC ``step`` lines on
(back to line 2 past line 143).
"""

from __future__ import annotations

import pytest

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy


def raster_rom(step: int) -> bytes:
    src = f"""
        org $0048
        jp handler
        org $0150
start:  ld sp, $DFFF
.wv:    ldh a, [$44]
        cp 144
        jr nz, .wv
        xor a
        ldh [$80], a
        ld a, 2
        ldh [$45], a
        ld a, $40
        ldh [$41], a
        ld a, $02
        ldh [$FF], a
        xor a
        ldh [$0F], a
        ld de, 0
        ei
main:   inc de
        jr main
handler:
        push af
        push hl
        ldh a, [$80]
        ld l, a
        ld h, $C0
        ld a, e
        ld [hl+], a
        ldh a, [$44]
        ld [hl+], a
        ld a, l
        ldh [$80], a
.w:     ldh a, [$41]
        and 3
        jr nz, .w
        ldh a, [$45]
        add {step}
        cp 144
        jr c, .ok
        ld a, 2
.ok:    ldh [$45], a
        pop hl
        pop af
        reti
"""
    return build_rom(assemble(src), title="LYCRAST")


@pytest.mark.parametrize("step", [1, 7])
def test_lyc_moved_in_hblank_interrupts_alike_coarse_or_mode_by_mode(step):
    rom = raster_rom(step)
    coarse = GameBoy(rom, check_header=False)
    coarse.run_frames(12, render=False)
    drawn = GameBoy(rom, check_header=False)
    for _ in range(12):
        drawn.run_frames(1, render=True)
    log = coarse.read_memory(0xC000, 256)[0].tolist()
    assert log == drawn.read_memory(0xC000, 256)[0].tolist()
    ptr = coarse.read_memory(0xFF80, 1)[0, 0].item() // 2  # the ring's oldest entry
    lys = log[1::2]
    lys = lys[ptr:] + lys[:ptr]  # chronological
    # every interrupt on the line LYC named: 2, 2 + step, ... up to 143, then 2 again
    for a, b in zip(lys, lys[1:]):
        assert b == (a + step if a + step < 144 else 2), lys
