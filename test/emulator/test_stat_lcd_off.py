"""STAT with the LCD off, the DMG's STAT write bug, and EI; HALT with an interrupt already
requested: micro ROMs of our own that follow SameSuite's ``ppu/stat_lcd_off`` and
``interrupt/ei_delay_halt`` (``LIJI32/SameSuite``) and check the hardware results they publish,
on both models."""

from __future__ import annotations

import pytest
from test_cgb import LCD_OFF

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy


def run(body: str, model: str, vectors: dict[int, bytes] | None = None) -> list[int]:
    """Run ``body`` after switching the LCD off; the 8 result bytes at C000."""
    src = "start:\ndi\n" + LCD_OFF + body + "\n.spin: jr .spin\n"
    rom = bytearray(build_rom(assemble(src), title="STAT", cgb_flag=0x80))
    for addr, code in (vectors or {}).items():
        rom[addr:addr + len(code)] = code
    gb = GameBoy(bytes(rom), check_header=False, model=model)
    gb.run_frames(10)
    return gb.read_memory(0xC000, 8)[0].tolist()


def if_after(setup: str, slot: int) -> str:
    """Clear IF, run ``setup``, store IF at C000 + ``slot``."""
    return f"xor a\nldh [$0F], a\n{setup}\nldh a, [$0F]\nld [$C00{slot}], a\n"


STAT_LCD_OFF = (
    "xor a\nldh [$FF], a\nldh a, [$40]\nor $80\nldh [$40], a\n"
    ".v90: ldh a, [$44]\ncp $90\njr nz, .v90\n"
    + if_after("ld a, $08\nldh [$41], a", 0)  # mode 0 source written in mode 1
    + if_after(".w: ldh a, [$44]\ncp 144\njr nz, .w\nxor a\nldh [$40], a", 1)  # LCD off
    + "ldh a, [$44]\nld [$C002], a\ninc a\nldh [$45], a\n"
    + if_after("ld a, $40\nldh [$41], a", 3)  # LYC source, LYC != LY
    + if_after("ld a, [$C002]\nldh [$45], a", 4)  # LYC = LY with the LCD off
    + if_after("ld a, $10\nldh [$41], a", 5)
    + if_after("ld a, $FF\nldh [$41], a", 6)
    + "ldh a, [$44]\nld [$C007], a\n"
)


@pytest.mark.parametrize("model, first", [("dmg", 0xE2), ("cgb", 0xE0)])
def test_stat_with_the_lcd_off(model, first):
    """A STAT write in mode 1 requests the STAT interrupt on a DMG only (its STAT write bug);
    switching the LCD off requests nothing, LY reads 0, and with the LCD off neither STAT
    writes (every source enabled) nor LYC = LY request anything."""
    assert run(STAT_LCD_OFF, model) == [first, 0xE0, 0x00, 0xE0, 0xE0, 0xE0, 0xE0, 0x00]


@pytest.mark.parametrize("model", ["dmg", "cgb"])
def test_ei_halt_with_an_interrupt_requested(model):
    """EI; HALT with VBlank already requested: the VBlank handler runs (B 00), HALT does not
    repeat a byte (A 02: no HALT bug) and is not left by it, so the timer interrupt ends it
    (C FE) and INC A runs last (F 00)."""
    body = ("xor a\nldh [$04], a\nldh [$05], a\nldh [$06], a\nld a, 4\nldh [$07], a\n"
            "ld b, $FF\nld c, b\nld d, b\nld e, b\nld h, b\nld l, b\ndi\nld a, 5\nldh [$FF], a\n"
            "ld a, 1\nldh [$0F], a\nei\nhalt\ninc a\nld [$C010], sp\nld sp, $C008\npush af\n"
            "push bc\npush de\npush hl\nld sp, $FFFE\n")
    got = run(body, model, {0x40: bytes([0x04, 0xD9]), 0x50: bytes([0x0D, 0xD9])})  # INC B / DEC C; RETI
    assert got[4:] == [0xFE, 0x00, 0x00, 0x02]
