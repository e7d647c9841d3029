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
    # at the VBlank point, with the VBlank interrupt (mooneye vblank_stat_intr)
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


def mode3_probe(k: int, xs: tuple[int, ...] = (), scx: int = 0, window: bool = False) -> int:
    """STAT mode read ``k`` NOPs into the handler of line $42's mode 2 interrupt, with objects at
    X = ``xs`` on that line (and the window from WX=7 / WY=0 when ``window``)."""
    objs = "\n".join(f"        ld a, $52\n        ld [hl+], a\n        ld a, {x}\n        ld [hl+], a\n"
                     "        xor a\n        ld [hl+], a\n        ld [hl+], a" for x in xs)
    lcdc = 0x93 | (0x20 if window else 0)
    src = f"""
        org $0048
handler:
{nop_lines(k)}
        ld a, [hl]
        and 3
        ld [$C000], a
.stop:  jr .stop
        org $0150
start:  ld sp, $DFFF
{WAIT_VBLANK}
        xor a
        ldh [$40], a
        ldh [$4A], a
        ld hl, $FE00
        ld b, 160
.clr:   ld [hl+], a
        dec b
        jr nz, .clr
        ld hl, $FE00
{objs}
        ld a, 7
        ldh [$4B], a
        ld a, {scx}
        ldh [$43], a
        ld a, {lcdc}
        ldh [$40], a
        ld a, $20
        ldh [$41], a
        ld a, $02
        ldh [$FF], a
        ld hl, $FF41
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


# (objects' X, SCX, window, NOPs at which mode 0 is first seen). The handler's read ends
# 4 * (k + 7) dots into the line; mode 0 shows from dot 81 + 172 + penalties.
MODE3_CASES = [
    ((), 0, False, 57),
    ((), 3, False, 57),  # 256: still within the same M-cycle
    ((), 4, False, 58),  # SCX fine scroll 4: 257
    ((), 0, True, 58),  # window: +6
    ((4,), 0, False, 58),  # one object, offset 4 in its tile: 6 + 1
    ((3,), 0, False, 59),  # offset 3: 6 + 2
    ((0,) * 10, 0, False, 73),  # ten objects on one tile: 10 * 6 + 5
    (tuple(range(0, 80, 8)), 0, False, 84),  # ten objects on ten tiles: 10 * 11
    ((168,) * 10, 0, False, 57),  # X >= 168: not fetched
]


@pytest.mark.parametrize("xs,scx,window,k", MODE3_CASES)
def test_mode3_length_follows_scroll_window_and_objects(xs, scx, window, k):
    assert mode3_probe(k - 1, xs, scx, window) == 3
    assert mode3_probe(k, xs, scx, window) == 0


def test_line_153_reads_ly_0_and_matches_lyc_0():
    # sample LY and STAT every 14 M-cycles (56 dots) from LY 152 on: line 153 shows LY 153 in no more than
    # one sample (LY reads 0 after its first M-cycle), then LY 0 in mode 1 with LY=LYC (LYC=0)
    src = """
start:  ld sp, $DFFF
        xor a
        ldh [$45], a
.w:     ldh a, [$44]
        cp 152
        jr nz, .w
        ld hl, $C100
        ld b, 128
.loop:  ldh a, [$44]
        ld [hl+], a
        ldh a, [$41]
        ld [hl+], a
        dec b
        jr nz, .loop
.spin:  jr .spin
"""
    gb = GameBoy(build_rom(assemble(src), title="PPUT"), check_header=False)
    gb.run_frames(3)
    raw = gb.read_memory(0xC100, 256)[0].tolist()
    ly, stat = raw[0::2], raw[1::2]
    assert ly.count(153) <= 1
    k = max(j for j, v in enumerate(ly) if v == 152) + 1  # first sample on line 153
    line153 = [(a, s) for a, s in zip(ly[k:], stat[k:])][: 456 // 56]
    assert all(a in (0, 153) for a, _ in line153)
    assert all(s & 3 == 1 for _, s in line153)
    assert any(a == 0 and s & 4 for a, s in line153)
