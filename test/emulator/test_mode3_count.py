"""What changes a line's mode-3 length before mode 3 starts counts for that line.

The PPU counts mode 3's length (``ppu.mode3_end``) from the registers and OAM as they are at
mode 3 start (dot 81): an SCX write in mode 2, a CPU write to OAM in the M-cycle before mode 3
and the OAM bug's corruption of the row being scanned all count. These tests pin that for any
scheduling of the count (a count planned earlier must be planned again after such a change; one
such plan, tried 2026-12-02, is in ``docs/emulator.md``). Each measures the mode 0 point on line
1 after the LCD is switched on, on micro ROMs built with our assembler, with the HBlank STAT
source alone, with the OAM source too and with no source (a line nobody observes).
"""

from __future__ import annotations

import pytest
from test_cgb import LCD_OFF
from test_ppu_timing import nop_lines

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

HBLANK_ONLY, HBLANK_AND_OAM, NO_SOURCE = 0x08, 0x28, 0x00

CLEAR_OAM = """
        ld hl, $FE00
        ld b, 160
.clr:   ld [hl+], a
        dec b
        jr nz, .clr
"""


INC_B_120 = "\n".join(["        inc b"] * 120)


def run(src: str, n: int = 1) -> list[int]:
    gb = GameBoy(build_rom(assemble(src), title="M3LEN"), check_header=False)
    gb.run_frames(4, render=False)
    return gb.read_memory(0xC000, n)[0].tolist()


def stat_after_write(stat: int, write: str, at: int, read: int, obj_y: int = 0) -> int:
    """STAT's mode bits ``read`` M-cycles after line 1's dot 0 (LCD switched on by ``$83``),
    with ``write`` (which leaves B and HL as set here: B = 17, HL = FE00, an object at X = 40
    whose Y is ``obj_y``) done ``at`` M-cycles after it."""
    src = f"""
start:  ld sp, $DFFF
{LCD_OFF}
        ldh [$43], a
{CLEAR_OAM}
        ld a, {obj_y}
        ld [$FE00], a
        ld a, 40
        ld [$FE01], a
        ld a, {stat}
        ldh [$41], a
        ld hl, $FE00
        ld b, 17
        ld a, $83
        ldh [$40], a
{nop_lines(111 + at)}
{write}
{nop_lines(read - at)}
        ldh a, [$41]
        ld [$C000], a
.spin:  jr .spin
"""
    return run(src)[0] & 3


def mode0_from(stat: int, write: str, at: int, reads: range, obj_y: int = 0) -> int:
    """The first of ``reads`` whose STAT shows mode 0."""
    for k in reads:
        if stat_after_write(stat, write, at, k, obj_y) == 0:
            return k
    raise AssertionError(f"no mode 0 in {reads}")


def scx_write(v: int) -> str:
    return f"        ld a, {v}\n        ldh [$43], a"


def test_an_scx_write_in_mode_2_lengthens_the_line():
    # SCX's fine scroll adds its 7 dots to mode 3 (Pan Docs "Mode 3 length"): a read an
    # M-cycle later
    plain = mode0_from(HBLANK_ONLY, scx_write(0), 10, range(50, 66))
    seen = {stat: mode0_from(stat, scx_write(7), 10, range(50, 66))
            for stat in (HBLANK_ONLY, HBLANK_AND_OAM, NO_SOURCE)}
    assert seen[HBLANK_ONLY] == seen[HBLANK_AND_OAM] == seen[NO_SOURCE] == plain + 1, seen


def test_an_oam_write_before_mode_3_adds_its_object():
    # OAM writes pass in the M-cycle before mode 3 (lcdon_write_timing): M-cycle 20 of line 1;
    # the object's Y (17) puts it on line 1, and it adds 11 dots to mode 3 there
    write = "        ld [hl], b"
    seen = {stat: mode0_from(stat, write, 20, range(56, 70))
            for stat in (HBLANK_ONLY, HBLANK_AND_OAM, NO_SOURCE)}
    blocked = mode0_from(HBLANK_ONLY, write, 19, range(56, 70))  # an M-cycle early: dropped
    assert seen[HBLANK_ONLY] == seen[HBLANK_AND_OAM] == seen[NO_SOURCE] > blocked, seen


def hblank_irq_count(at: int, obj_row: int | None) -> tuple[int, list[int]]:
    """``inc hl`` with HL = FE40 (the OAM bug's write pattern, on the row scanned then) ``at``
    M-cycles into line 1, then a count in B until the HBlank STAT interrupt; one object on
    line 1 as entry 1 of OAM row ``obj_row`` (None: no object). Returns the count and OAM
    bytes 8-23 (rows 1-2)."""
    y = 17 if obj_row is not None else 0
    row = obj_row or 0
    src = f"""
        org $48
        jp lcdstat
        org $150
start:  ld sp, $DFFF
{LCD_OFF}
{CLEAR_OAM}
        ld a, {y}
        ld [${0xFE04 + 8 * row:04X}], a
        ld a, 40
        ld [${0xFE05 + 8 * row:04X}], a
        xor a
        ldh [$43], a
        ld a, {HBLANK_ONLY}
        ldh [$41], a
        ld hl, $FE40
        ld b, 0
        ld a, $83
        ldh [$40], a
{nop_lines(80)}
        xor a
        ldh [$0F], a
        ld a, $02
        ldh [$FF], a
        ei
{nop_lines(20 + at)}
        inc hl
{INC_B_120}
.spin:  jr .spin
lcdstat: ld a, b
        ld [$C000], a
.hang:  jr .hang
"""
    gb = GameBoy(build_rom(assemble(src), title="M3LEN"), check_header=False)
    gb.run_frames(4, render=False)
    return gb.read_memory(0xC000, 1)[0].tolist()[0], gb.read_memory(0xFE08, 16)[0].tolist()


@pytest.mark.parametrize("at,row", [(2, 1), (3, 2)])
def test_an_object_the_oam_bug_removes_no_longer_delays_the_hblank_interrupt(at, row):
    # the IDU step at M-cycle `at` corrupts the row holding the object (its words 1-3 are
    # copied from the row before, empty): mode 3 gets shorter, and
    # the interrupt comes when it comes on a line with no object
    count, oam = hblank_irq_count(at, row)
    assert oam == [0] * 16  # the object is gone
    assert count == hblank_irq_count(at, None)[0]
    # one M-cycle earlier the IDU step corrupts the row before (empty into empty): the object
    # stays and delays the interrupt
    kept, oam = hblank_irq_count(at - 1, row)
    assert oam[8 * row - 4: 8 * row - 2] == [17, 40]
    assert kept > hblank_irq_count(at - 1, None)[0]
