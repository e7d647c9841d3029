"""A line-start point handled at dot 0 with the HBlank STAT source on (``ppu.quiet_line_start``).

With no STAT source that can rise at a line's dot 3 (the mode 2 and VBlank sources off, LYC
elsewhere), the PPU handles that point at dot 0: one event a line fewer. The HBlank source may
be on: it only falls there, so its level drops 3 dots early. A write that could see the level
in between brings the point and the level back (``ppu.line_start_restored``). Each test
measures, on micro ROMs built with our assembler, a request that depends on that level: the
DMG's STAT write bug (a STAT write requests the interrupt unless the line is high) and the
level an LCD switched off keeps (switched on again with LY = LYC, it requests the interrupt
only if that level was low).
"""

from __future__ import annotations

from test_cgb import LCD_OFF
from test_ppu_timing import nop_lines

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

HBLANK, LYC, NO_SOURCE = 0x08, 0x40, 0x00


def stat_requested(src_after_lcd_on: str, stat: int) -> bool:
    """IF's STAT bit as the ROM stores it at $C000 after ``src_after_lcd_on`` (LCD switched on
    by ``$81`` with STAT = ``stat`` and LYC = 0; IF cleared before the measured write)."""
    src = f"""
start:  ld sp, $DFFF
{LCD_OFF}
        ldh [$45], a
        ld a, {stat}
        ldh [$41], a
        ld a, $81
        ldh [$40], a
{src_after_lcd_on}
        ldh a, [$0F]
        ld [$C000], a
.spin:  jr .spin
"""
    gb = GameBoy(build_rom(assemble(src), title="QLS"), check_header=False)
    gb.run_frames(4, render=False)
    return (gb.read_memory(0xC000, 1)[0].tolist()[0] & 2) != 0


def stat_write_at(n: int, stat: int) -> bool:
    """The STAT write bug's request for a STAT write (of the same sources) ``n`` NOPs after
    the LCD is switched on: 104 lands it in line 1's first M-cycle, 105 in its mode 2."""
    return stat_requested(f"""
{nop_lines(n)}
        xor a
        ldh [$0F], a
        ld a, {stat}
        ldh [$41], a""", stat)


def test_stat_write_bug_sees_the_hblank_level_until_the_line_start_point():
    # the HBlank source holds the line high from line 0's mode 0 until line 1's dot 3: a STAT
    # write in line 1's first M-cycle requests nothing, one in mode 2 requests the interrupt
    assert [stat_write_at(n, HBLANK) for n in (103, 104, 105)] == [False, False, True]
    assert [stat_write_at(n, NO_SOURCE) for n in (103, 104, 105)] == [True, True, True]


def lcd_off_at(n: int, stat: int) -> bool:
    """The LCD switched off ``n`` NOPs after it was switched on (223: in line 2's first
    M-cycle, 224: in its mode 2), then on again (line 0, LY = LYC = 0): whether that requests
    the STAT interrupt (it does only if the level the LCD kept was low)."""
    return stat_requested(f"""
{nop_lines(n)}
        xor a
        ldh [$40], a
        ldh [$0F], a
        ld a, $81
        ldh [$40], a""", stat)


def test_lcd_off_keeps_the_hblank_level_until_the_line_start_point():
    # line 2's start is quiet (LYC = 0 is neither 2 nor 1): the LCD switched off in its first
    # M-cycle keeps the HBlank source's high level, in mode 2 a low one
    assert [lcd_off_at(n, HBLANK | LYC) for n in (222, 223, 224)] == [False, False, True]
    assert [lcd_off_at(n, LYC) for n in (222, 223, 224)] == [True, True, True]
