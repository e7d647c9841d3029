"""A DMG-only cartridge on the Game Boy Color: the boot ROM's compatibility palettes (by title
checksum, licensee and fourth letter), the registers and VRAM it leaves, and the DMG picture
coloured through BG palette 0 and OBJ palettes 0-1 on both drawing paths (the scanline renderer
and the pixel pipeline), with the packed2 shades the same as on a DMG."""

from __future__ import annotations

import pytest
import torch
from test_cgb import LCD_OFF

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.compat_palettes import compat_boot, compat_palette_id

SPIN = "\n.spin: jr .spin\n"


def header(title: bytes, old_licensee: int = 0x01, new_licensee: bytes = b"\0\0") -> bytes:
    rom = bytearray(0x150)
    rom[0x134:0x134 + len(title)] = title
    rom[0x144:0x146] = new_licensee
    rom[0x14B] = old_licensee
    return bytes(rom)


def with_checksum(checksum: int, fourth: bytes = b"A") -> bytes:
    """A title whose fourth letter is ``fourth`` and whose bytes sum to ``checksum``."""
    start = b"AAA" + fourth
    return start + bytes([(checksum - sum(start)) & 0xFF])


def test_palette_id_by_licensee_checksum_and_fourth_letter():
    # Nintendo by the old licensee byte, or by 0x33 and the new code "01"; anyone else gets ID 0
    assert compat_palette_id(header(b"TETRIS")) == 5
    assert compat_palette_id(header(b"TETRIS", 0x33, b"01")) == 5
    assert compat_palette_id(header(b"TETRIS", 0x33, b"08")) == 0
    assert compat_palette_id(header(b"TETRIS", 0x00)) == 0
    # a checksum the table does not list
    assert compat_palette_id(header(with_checksum(0x01 + 0x01))) == 0
    # checksum 0xB3 (index 65) is shared: fourth letter B (row 0), U (row 1), R (row 2)
    assert compat_palette_id(header(with_checksum(0xB3, b"B"))) == 65
    assert compat_palette_id(header(with_checksum(0xB3, b"U"))) == 65 + 14
    assert compat_palette_id(header(with_checksum(0xB3, b"R"))) == 65 + 28
    assert compat_palette_id(header(with_checksum(0xB3, b"Z"))) == 0
    # column 13 (checksum 0xF4) has a letter in rows 0 and 1 only: "-" and " "
    assert compat_palette_id(header(with_checksum(0xF4, b"-"))) == 78
    assert compat_palette_id(header(with_checksum(0xF4, b" "))) == 92


def test_palettes_registers_of_the_boot():
    plain = compat_boot(header(b"HOMEBREW", 0x00))
    assert plain.palette_id == 0 and plain.title_checksum == 0 and plain.hl == 0x007C
    assert plain.bg == (0x7FFF, 0x1BEF, 0x6180, 0x0000)
    assert plain.obj0 == plain.obj1 == (0x7FFF, 0x421F, 0x1CF2, 0x0000)
    red = compat_boot(header(b"POKEMON RED"))  # checksum 0x14, ID 22: red BG, green OBJ 0
    assert (red.palette_id, red.title_checksum) == (22, 0x14)
    assert red.bg == red.obj1 == (0x7FFF, 0x421F, 0x1CF2, 0x0000)
    assert red.obj0 == (0x7FFF, 0x1BEF, 0x0200, 0x0000)
    # one of the two titles whose boot keeps the DMG logo's tile map
    logo = compat_boot(header(with_checksum(0x43)))
    assert logo.logo_map and logo.hl == 0x991A and logo.title_checksum == 0x43


# A DMG program: tile 1 is colour 1 on every pixel, tile 2 colour 3; map row 0 shows tile 1 but
# in entries 1-3 (tile 0, colour 0); object 0 (OBP0) at x 8-15 and object 1 (OBP1) at
# x 16-23 on the first 8 lines; OBP1 = 0x1B reverses the shades. Then LCD on (BG and objects).
SCENE = LCD_OFF + """
        ld hl, $8010
        ld b, 8
.t1:    ld a, $FF
        ld [hl+], a
        xor a
        ld [hl+], a
        dec b
        jr nz, .t1
        ld b, 16
        ld a, $FF
.t2:    ld [hl+], a
        dec b
        jr nz, .t2
        ld hl, $9800
        ld a, 1
        ld b, 32
.m:     ld [hl+], a
        dec b
        jr nz, .m
        xor a
        ld [$9801], a
        ld [$9802], a
        ld [$9803], a
        ld hl, $FE00
        ld a, 16
        ld [hl+], a
        ld a, 16
        ld [hl+], a
        ld a, 2
        ld [hl+], a
        xor a
        ld [hl+], a
        ld a, 16
        ld [hl+], a
        ld a, 24
        ld [hl+], a
        ld a, 2
        ld [hl+], a
        ld a, $10
        ld [hl+], a
        ld a, $E4
        ldh [$47], a
        ldh [$48], a
        ld a, $1B
        ldh [$49], a
        ld a, $93
        ldh [$40], a
"""
# after the scene, BGP flips between two mappings as fast as the CPU can: writes land in
# mode 3 of most lines, which the pixel pipeline draws (ppu="fifo")
FLIP = """
.flip:  ld a, $E4
        ldh [$47], a
        ld a, $D8
        ldh [$47], a
        jr .flip
"""


def scene_rom(title: bytes, body: str = SPIN) -> bytes:
    return build_rom(assemble("start:\n" + SCENE + body), title=title.decode(), licensee=0x01)


@pytest.mark.parametrize("title", [b"POKEMON RED", b"HOMEBREW"])
def test_compat_mode_colours_the_dmg_picture(title):
    rom = scene_rom(title)
    gb = GameBoy(rom, check_header=False, model="cgb", framebuffer=True)
    dmg = GameBoy(rom, check_header=False, model="dmg", framebuffer=True)
    gb.run_frames(4)
    dmg.run_frames(4)
    boot = compat_boot(rom)
    # the shades (and so packed2) are the DMG's, but for the logo the DMG boot ROM leaves on
    # map rows 5-13 (screen lines 40-111) and the Color's clears
    assert torch.equal(gb.framebuffer[:, :40], dmg.framebuffer[:, :40])
    assert torch.equal(gb.packed2[:, :, :20], dmg.packed2[:, :, :20])
    assert bool((gb.framebuffer[:, 40:112] == 0).all()) and bool(dmg.framebuffer[:, 40:112].any())
    rgb = [int(v) for v in gb.rgb555[0, 0, 0:32]]
    assert rgb[0:8] == [boot.bg[1]] * 8            # tile 1, colour 1, BGP shade 1
    assert rgb[8:16] == [boot.obj0[3]] * 8         # object 0: colour 3 through OBP0 (shade 3)
    assert rgb[16:24] == [boot.obj1[0]] * 8        # object 1: colour 3 through OBP1 (shade 0)
    assert rgb[24:32] == [boot.bg[0]] * 8          # tile 0, colour 0
    regs = gb.registers()
    assert int(regs["b"][0]) == boot.title_checksum


@pytest.mark.parametrize("ppu", ["line", "fifo"])
def test_compat_colours_follow_mid_line_palette_writes(ppu):
    """Every pixel's colour is its palette's entry for its shade, also where BGP changed in the
    middle of the line (the pixel pipeline's lines with ``ppu="fifo"``)."""
    rom = scene_rom(b"POKEMON RED", FLIP)
    gb = GameBoy(rom, check_header=False, model="cgb", framebuffer=True, ppu=ppu)
    gb.run_frames(4)
    boot = compat_boot(rom)
    fb = gb.framebuffer[0, :8].long()
    rgb = gb.rgb555[0, :8].long() & 0x7FFF
    bg = torch.tensor(boot.bg)[fb]
    assert torch.equal(rgb[:, 24:], bg[:, 24:]) and torch.equal(rgb[:, :8], bg[:, :8])
    assert torch.equal(rgb[:, 8:16], torch.tensor(boot.obj0)[fb[:, 8:16]])
    assert torch.equal(rgb[:, 16:24], torch.tensor(boot.obj1)[fb[:, 16:24]])
    if ppu == "fifo":  # BGP 0xD8 maps colour 1 to shade 2: some lines change mid-way
        row = fb[:, 32:]
        assert bool(((row == 1).any(dim=1) & (row == 2).any(dim=1)).any())


def test_compat_lcd_off_is_white_and_dmg_has_no_colour_frame():
    off = build_rom(assemble("start:\n" + SCENE + "xor a\nldh [$40], a" + SPIN), licensee=0x01)
    gb = GameBoy(off, check_header=False, model="cgb")
    gb.run_frames(3)
    assert bool((gb.rgb555 == 0x7FFF).all())
    with pytest.raises(AttributeError, match="model='dmg'.*model='cgb'"):
        _ = GameBoy(off, check_header=False).rgb555


def test_compat_boot_clears_the_logo_map_unless_the_title_animates_it():
    spin = assemble("start: jr start")
    plain = GameBoy(build_rom(spin, title="HOMEBREW"), check_header=False, model="cgb")
    dmg = GameBoy(build_rom(spin, title="HOMEBREW"), check_header=False)
    assert plain.read_memory(0x9904, 12)[0].tolist() == [0] * 12
    assert dmg.read_memory(0x9904, 12)[0].tolist() == list(range(1, 13))
    logo_rom = bytearray(build_rom(spin))
    logo_rom[0x134:0x139] = with_checksum(0x58)
    logo_rom[0x14B] = 0x01
    logo = GameBoy(bytes(logo_rom), check_header=False, model="cgb")
    assert logo.read_memory(0x9904, 12)[0].tolist() == list(range(1, 13))
    r = logo.registers()
    assert (int(r["b"][0]), int(r["h"][0]), int(r["l"][0])) == (0x58, 0x99, 0x1A)
