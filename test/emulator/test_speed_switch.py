"""The Color's speed switch pause: micro ROMs of our own that follow the protocol of daid's
``speed_switch_timing_div``, ``_stat`` and ``_ly`` (``daid/GBEmulatorShootout``,
``testroms/daid``; read for facts) and check every value of the hardware tables they publish.

The protocol: switch the LCD on, HALT until VBlank (line 144), disable interrupts, arm KEY1,
call a routine (``ret`` at once, or for DIV a wait until DIV reads 0x40), STOP, then read the
register N times with ``ldh a, [reg]; ld [hl+], a`` (5 M-cycles a read, 10 dots in double
speed). The tables pin the pause (:data:`~torchrl_dreamer.emulator.cgb.SPEED_SWITCH_DOTS`):
the PPU runs on through it (LY 133 after a switch begun at 144), DIV restarts from 0 when the
CPU does.
"""

from __future__ import annotations

import pytest
from test_cgb import LCD_OFF

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

DIV_TABLE = [0x00] * 12 + [0x01] * 13 + [0x02] * 7
STAT_TABLE = ([0x80] + [0x82] * 8 + [0x83] * 17 + [0x80] * 21 + [0x82] * 8 + [0x83] * 9)
LY_TABLE = [0x85] + [0x86] * 45 + [0x87] * 46 + [0x88] * 36

PRE_RET = "ret"
PRE_DIV_40 = ".pre: ldh a, [$04]\ncp $40\nret z\njr .pre"


def switch_and_read(reg: int, n: int, pre: str) -> list[int]:
    """Follow the protocol for register ``0xFF00 + reg``; the ``n`` values read after STOP."""
    reads = f"ldh a, [${reg:02X}]\nld [hl+], a\n" * n
    src = ("start:\ndi\n" + LCD_OFF + """
        ld a, $01
        ldh [$FF], a        ; IE: VBlank
        xor a
        ldh [$41], a        ; STAT: no sources
        ld a, $81
        ldh [$40], a        ; LCD on, BG on
        xor a
        ldh [$0F], a
        halt                ; until line 144
        ld a, $30
        ldh [$00], a        ; joypad: no group selected
        xor a
        ldh [$FF], a        ; IE: none
        inc a
        ldh [$4D], a        ; KEY1: arm the switch
        call pre
        stop
        ld hl, $C000
    """ + reads + ".spin: jr .spin\npre:\n" + pre + "\n")
    rom = build_rom(assemble(src), title="SWITCH", cgb_flag=0xC0)
    gb = GameBoy(rom, check_header=False, model="cgb")
    gb.run_frames(8)
    return gb.read_memory(0xC000, n)[0].tolist()


@pytest.mark.parametrize("reg, table, pre", [
    (0x04, DIV_TABLE, PRE_DIV_40),
    (0x41, STAT_TABLE, PRE_RET),
    (0x44, LY_TABLE, PRE_RET),
], ids=["div", "stat", "ly"])
def test_speed_switch_pause_matches_the_hardware_tables(reg, table, pre):
    assert switch_and_read(reg, len(table), pre) == table


# ------------------------------------------------------------------------------ STOP on a Color
# Tile 0 colour 1 everywhere (its low bit planes FF); BG palettes 0 (colour 1: green) and 7
# (colour 3: red); the LCD on; then STOP in VBlank (LY 144) or in mode 3 (STAT & 3 == 3).
GREEN, RED = 0x03E0, 0x001F
STOP_SETUP = LCD_OFF + """
        ld hl, $8000
        ld b, 8
.t:     ld a, $FF
        ld [hli], a
        xor a
        ld [hli], a
        dec b
        jr nz, .t
        ld a, $82           ; BG palette 0, colour 1 (auto-increment)
        ldh [$68], a
        ld a, $E0
        ldh [$69], a
        ld a, $03
        ldh [$69], a
        ld a, $BE           ; BG palette 7, colour 3
        ldh [$68], a
        ld a, $1F
        ldh [$69], a
        xor a
        ldh [$69], a
        ld a, $E4
        ldh [$47], a
        ld a, $91
        ldh [$40], a        ; LCD on, BG on, tiles at 8000
        ld b, 3
.f:     ldh a, [$44]        ; three frames with the picture
        cp 144
        jr nz, .f
.g:     ldh a, [$44]
        cp 145
        jr nz, .g
        dec b
        jr nz, .f
"""
WAIT_VBLANK = ".v: ldh a, [$44]\ncp 144\njr nz, .v\n"
WAIT_MODE3 = ".m: ldh a, [$44]\ncp 40\njr nz, .m\n.d: ldh a, [$41]\nand 3\ncp 3\njr nz, .d\n"


def stop_frames(wait: str, cgb_flag: int) -> GameBoy:
    src = "start:\ndi\n" + STOP_SETUP + wait + "stop\nld a, 1\nld [$C000], a\n.spin: jr .spin\n"
    rom = build_rom(assemble(src), title="STOPCGB", cgb_flag=cgb_flag)
    gb = GameBoy(rom, check_header=False, model="cgb", framebuffer=True)
    gb.run_frames(12)
    assert gb.read_memory(0xC000, 1)[0, 0] == 0  # still stopped
    return gb


@pytest.mark.parametrize("cgb_flag", [0xC0, 0x00], ids=["color", "dmg-cartridge"])
def test_stop_on_a_color_keeps_the_ppu_running_with_vram_locked(cgb_flag):
    """STOP outside mode 3 (here in VBlank): the PPU draws on but reads FF from VRAM, so the
    screen shows BG colour 3 of palette 7 (Color mode) or of BGP (a DMG cartridge: black)."""
    gb = stop_frames(WAIT_VBLANK, cgb_flag)
    if cgb_flag == 0xC0:
        assert (gb.rgb555[0] == RED).all()
    else:
        assert (gb.framebuffer[0] == 3).all()


@pytest.mark.parametrize("cgb_flag", [0xC0, 0x00], ids=["color", "dmg-cartridge"])
def test_stop_on_a_color_in_mode_3_keeps_the_picture(cgb_flag):
    gb = stop_frames(WAIT_MODE3, cgb_flag)
    if cgb_flag == 0xC0:
        assert (gb.rgb555[0] == GREEN).all()
    else:
        assert (gb.framebuffer[0] == 1).all()
