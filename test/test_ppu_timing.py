"""PPU mode timing and STAT, dot- and M-cycle-exact, on micro ROMs built with our assembler.

Each ROM measures one hardware fact (Pan Docs, and the mooneye acceptance/ppu tests' verified
DMG results) in M-cycles from a reference the CPU controls: the LCDC write that switches the LCD
on, or the STAT interrupt that wakes a halted CPU. Results are stored in WRAM at $C000.
"""

from __future__ import annotations

import pytest

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

WAIT_VBLANK = """
.wv:    ldh a, [$44]
        cp 144
        jr nz, .wv
"""


def nop_lines(n: int) -> str:
    return "\n".join(["        nop"] * n)


def run(src: str, frames: int = 4) -> list[int]:
    """Assemble ``src`` (entered at ``start``), run it and return WRAM $C000-$C003."""
    gb = GameBoy(build_rom(assemble(src), title="PPUT"), check_header=False)
    gb.run_frames(frames)
    return gb.read_memory(0xC000, 4)[0].tolist()


def lcd_on_read(addr: int, nops: int, lyc: int = 0) -> int:
    """The byte at ``addr`` read ``nops`` + 2 M-cycles after the LCDC write that switches the
    LCD on (``ld a,(de)`` reads in its 2nd M-cycle), as in mooneye lcdon_timing."""
    src = f"""
start:  ld sp, $DFFF
{WAIT_VBLANK}
        xor a
        ldh [$40], a
        ld a, {lyc}
        ldh [$45], a
        ld de, ${addr:04X}
        ld a, $81
        ldh [$40], a
{nop_lines(nops)}
        ld a, [de]
        ld [$C000], a
.spin:  jr .spin
"""
    return run(src)[0]


# (nops after the LCDC write, STAT with LYC=0, LY): line 0 after LCD on has no mode 2 and is 4
# dots short (LY=1 from 452 dots on); line 1 shows mode 0 for 4 dots, mode 2 for 80, mode 3 from
# dot 84 for 172 dots, with no LY=LYC match during the first 4 dots.
LCD_ON_POINTS = [
    (0, 0x84, 0), (17, 0x84, 0), (18, 0x87, 0), (60, 0x87, 0), (61, 0x84, 0),
    (110, 0x84, 0), (111, 0x80, 1), (112, 0x82, 1), (131, 0x82, 1), (132, 0x83, 1),
    (174, 0x83, 1), (175, 0x80, 1), (225, 0x80, 2), (226, 0x82, 2),
]


@pytest.mark.parametrize("nops,stat,ly", LCD_ON_POINTS)
def test_stat_and_ly_after_lcd_on(nops, stat, ly):
    assert lcd_on_read(0xFF41, nops) == stat
    assert lcd_on_read(0xFF44, nops) == ly


@pytest.mark.parametrize("nops,vram,oam", [
    (17, 0x00, 0x00), (18, 0xFF, 0xFF), (61, 0x00, 0x00),  # line 0: mode 3 only
    (111, 0x00, 0xFF),  # line 1, dot 0: OAM already blocked while STAT still shows mode 0
    (130, 0x00, 0xFF), (131, 0xFF, 0xFF),  # VRAM reads blocked 4 dots before mode 3
    (175, 0x00, 0x00),  # mode 0
])
def test_vram_and_oam_reads_blocked_by_mode(nops, vram, oam):
    assert lcd_on_read(0x8000, nops) == vram
    assert lcd_on_read(0xFE00, nops) == oam


def hblank_ly_read(scx: int, nops: int) -> int:
    """LY read by a mode 0 STAT handler after ``nops`` NOPs (halted on line $41)."""
    src = f"""
        org $0048
handler:
{nop_lines(nops)}
        ld a, [hl]
        ld [$C000], a
.stop:  jr .stop
        org $0150
start:  ld sp, $DFFF
        ld a, {scx}
        ldh [$43], a
        ld a, $08
        ldh [$41], a
        ld a, $02
        ldh [$FF], a
        ld hl, $FF44
.wl:    ldh a, [$44]
        cp $41
        jr nz, .wl
        xor a
        ldh [$0F], a
        ei
        halt
        nop
.spin:  jr .spin
"""
    return run(src)[0]


@pytest.mark.parametrize("scx,nops", [(0, 44), (1, 43), (4, 43), (5, 42), (7, 42), (8, 44)])
def test_mode0_interrupt_moves_with_scx_fine_scroll(scx, nops):
    # mode 3 lasts 172 + (SCX mod 8) dots; the mode 0 interrupt wakes the CPU 51 / 50 / 49
    # M-cycles before LY changes for SCX mod 8 = 0 / 1-4 / 5-7 (mooneye hblank_ly_scx_timing)
    assert hblank_ly_read(scx, nops - 1) == 0x41
    assert hblank_ly_read(scx, nops) == 0x42


def test_lyc_flag_frozen_while_lcd_off():
    # LY=LYC holds its value with the LCD off; LYC writes do not re-compare; switching the LCD
    # on compares LY 0 at once (mooneye stat_lyc_onoff)
    src = f"""
start:  ld sp, $DFFF
        ld a, $40
        ldh [$41], a
{WAIT_VBLANK}
        ld a, 144
        ldh [$45], a
        xor a
        ldh [$40], a
        ldh a, [$41]
        ld [$C000], a
        ld a, 1
        ldh [$45], a
        ldh a, [$41]
        ld [$C001], a
        ld a, $80
        ldh [$40], a
        ldh a, [$41]
        ld [$C002], a
.spin:  jr .spin
"""
    assert run(src)[:3] == [0xC4, 0xC4, 0xC0]


def test_oam_stat_interrupt_also_at_vblank_start():
    # with only the mode 2 source on, line 144 requests a STAT interrupt as VBlank starts,
    # in the same M-cycle as the VBlank interrupt (mooneye vblank_stat_intr)
    src = """
        org $0048
handler:
        ldh a, [$44]
        ld [$C000], a
        ldh a, [$0F]
        ld [$C001], a
.stop:  jr .stop
        org $0150
start:  ld sp, $DFFF
        ld a, $20
        ldh [$41], a
        ld a, $02
        ldh [$FF], a
.wl:    ldh a, [$44]
        cp 143
        jr nz, .wl
.w0:    ldh a, [$41]
        and 3
        jr nz, .w0
        xor a
        ldh [$0F], a
        ei
        halt
        nop
.spin:  jr .spin
"""
    ly, iflag = run(src)[:2]
    assert ly == 144 and iflag & 1  # the VBlank request is already there
