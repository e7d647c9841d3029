"""The pixel pipeline in Color mode (``ppu="fifo"`` on ``model="cgb"``, :mod:`torchrl_dreamer.emulator.fifo`).

* With constant registers the pipeline draws exactly the Color's whole-line renderer's colours
  (tile attributes: bank, palette, flips, BG-to-OBJ priority; OBJ banks and palettes, OAM-index
  priority or OPRI's X order; LCDC.0 as master priority; the window without LCDC.0) and ends
  mode 3 on exactly the dot :func:`~torchrl_dreamer.emulator.ppu.mode3_end` gives (except on
  the lines docs/emulator.md names), on random
  scenes, so lines without a mid-mode-3 write keep the fast renderer safely.
* A write that lands in mode 3 changes the line from the pixel it reaches (a micro ROM of our
  own); with ``ppu="line"`` it changes the whole line.
"""

from __future__ import annotations

import pytest
import torch
import warp as wp
from ppu_scenes import randomize_objects_and_registers, run_pipeline_to_end

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import CGBX_BGPAL, CGBX_VRAM1, FIELDS
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.render_cgb import render_line_cgb

SPIN = "start: jr start"


@wp.kernel(enable_backward=False)
def _pipeline_vs_line_cgb(m: Mem, line: int, out: wp.array2d(dtype=wp.int32)):
    i = wp.tid()
    wl = run_pipeline_to_end(i, m, line, out)
    for x in range(160):
        out[i, 2 + x] = int(m.rgb[i, line, x])
        out[i, 322 + x] = int(m.fb[i, line, x])
    render_line_cgb(i, m, line, int(m.hram[i, 0x40]), int(m.hram[i, 0x43]), int(m.hram[i, 0x42]),
                    int(m.hram[i, 0x4B]), int(m.hram[i, 0x4A]), wl)
    for x in range(160):
        out[i, 162 + x] = int(m.rgb[i, line, x])
        out[i, 482 + x] = int(m.fb[i, line, x])


def _random_color_scenes(n: int, line: int, seed: int) -> GameBoy:
    """``n`` Color-mode consoles with random VRAM in both banks (tiles, maps, attributes),
    palette memory, OAM (objects near ``line``, X anywhere, overlaps), OPRI and LCD registers."""
    g = torch.Generator().manual_seed(seed)
    gb = GameBoy(build_rom(assemble(SPIN), cgb_flag=0xC0), num_envs=n, check_header=False)
    assert gb.model == "cgb"
    t = gb.state_tensors()
    t["vram"][:] = torch.randint(0, 256, (n, 0x2000), generator=g, dtype=torch.uint8)
    t["cgbx"][:, CGBX_VRAM1:CGBX_VRAM1 + 0x2000] = torch.randint(0, 256, (n, 0x2000), generator=g,
                                                                 dtype=torch.uint8)
    t["cgbx"][:, CGBX_BGPAL:CGBX_BGPAL + 128] = torch.randint(0, 256, (n, 128), generator=g,
                                                              dtype=torch.uint8)
    randomize_objects_and_registers(gb, line, g, (0x42, 0x43))
    t["hram"][:, 0x6C] = torch.randint(0, 2, (n,), generator=g, dtype=torch.uint8)  # OPRI
    t["st"][:, FIELDS["PACK"]] = 1
    return gb


@pytest.mark.parametrize("seed,line", [(0, 0), (1, 37), (2, 77), (3, 143)])
def test_color_pipeline_matches_color_line_renderer(seed, line):
    n = 256
    gb = _random_color_scenes(n, line, seed)
    out = torch.zeros(n, 642, dtype=torch.int32)
    wp.launch(_pipeline_vs_line_cgb, dim=n, inputs=[gb._mem, line, wp.from_torch(out)], device="cpu")
    pipe, ref = out[:, 2:162], out[:, 162:322]
    bad = (pipe != ref).any(1)
    assert not bad.any(), f"colours differ in envs {torch.nonzero(bad).flatten().tolist()[:8]}"
    assert torch.equal(out[:, 322:482], out[:, 482:642]), "luminance shades differ"
    assert len(torch.unique(pipe)) > 100  # the scenes do exercise palettes
    h = gb.state_tensors()["hram"].to(torch.int64)
    lcdc = h[:, 0x40]
    # mode-3 length, as on a DMG: lines with both the window and objects compared on pixels only
    # (a window with LCDC.0 clear, which a Color draws, is timed too)
    win = ((lcdc & 0x20) != 0) & (h[:, 0x4B] < 167) & (h[:, 0x4A] <= line)
    check = ~(win & ((lcdc & 2) != 0))
    assert check.sum() > n // 4
    assert line == 0 or (check & win & ((lcdc & 1) == 0)).sum() > 0  # (line 0: WY = 0 only)
    assert torch.equal(out[check, 0], out[check, 1]), (
        f"mode-3 end differs: envs {torch.nonzero((out[:, 0] != out[:, 1]) & check).flatten().tolist()[:8]}")


# ------------------------------------------------------------ a mid-mode-3 write in Color mode

RED, GREEN = 0x001F, 0x03E0
WRITE_LINE = 40

# BG palette 0 = white, red, green, blue; tile 0 at $8000 all colour 1, at $9000 all colour 2;
# the map all tile 0 (attributes 0); on line 40 (woken by LY=LYC from HALT) LCDC.4 is cleared in
# mode 3, so the tiles fetched after the write come from $9000; set again on line 41.
_DELAY = "nop\n        " * 24  # from the wake-up (dot ~4 of line 40) into mode 3
_PROGRAM = f"""
start:
.vbl:   ldh a, [$44]
        cp 144
        jr nz, .vbl
        xor a
        ldh [$40], a
        ld a, $80
        ldh [$68], a
        ld hl, .pal
        ld b, 8
.p:     ld a, [hl+]
        ldh [$69], a
        dec b
        jr nz, .p
        ld hl, $8000
        ld b, 8
.t1:    ld a, $FF
        ld [hl+], a
        xor a
        ld [hl+], a
        dec b
        jr nz, .t1
        ld hl, $9000
        ld b, 8
.t2:    xor a
        ld [hl+], a
        ld a, $FF
        ld [hl+], a
        dec b
        jr nz, .t2
        ld hl, $9800
        ld bc, $0400
.m:     xor a
        ld [hl+], a
        dec bc
        ld a, b
        or c
        jr nz, .m
        ld a, {WRITE_LINE}
        ldh [$45], a
        ld a, $40
        ldh [$41], a
        ld a, $02
        ldh [$FF], a
        ld a, $91
        ldh [$40], a
.frame: xor a
        ldh [$0F], a
        halt
        {_DELAY}ld a, $81
        ldh [$40], a
.w:     ldh a, [$44]
        cp {WRITE_LINE + 1}
        jr nz, .w
        ld a, $91
        ldh [$40], a
        jr .frame
.pal:   db $FF, $7F, $1F, $00, $E0, $03, $00, $7C
"""


def _run_program(ppu: str) -> torch.Tensor:
    gb = GameBoy(build_rom(assemble(_PROGRAM), title="FIFOCGB", cgb_flag=0xC0), check_header=False,
                 ppu=ppu)
    gb.run_frames(6)
    return gb.rgb555[0].to(torch.int64) & 0x7FFF


def test_mid_mode3_lcdc_write_changes_the_line_from_a_tile_on():
    rgb = _run_program("fifo")
    assert (rgb[WRITE_LINE - 1] == RED).all() and (rgb[WRITE_LINE + 1] == RED).all()
    row = rgb[WRITE_LINE]
    assert set(row.tolist()) == {RED, GREEN}, "the line holds the two tile data areas' colours"
    split = int((row == GREEN).nonzero()[0])
    assert (row[:split] == RED).all() and (row[split:] == GREEN).all()
    assert split % 8 == 0 and 8 <= split <= 152, f"split at x = {split}: tiles fetched after the write"
    # the whole-line renderer takes the write for the whole line
    line_mode = _run_program("line")
    assert (line_mode[WRITE_LINE] == GREEN).all()
    assert torch.equal(line_mode[WRITE_LINE + 1], rgb[WRITE_LINE + 1])


def test_color_mode_palette_register_writes_leave_the_line_alone():
    """BGP / OBP0 / OBP1 colour nothing in Color mode: a write in mode 3 changes no pixel and
    does not send the line through the pipeline."""
    program = _PROGRAM.replace("ld a, $81\n        ldh [$40], a", "ld a, $1B\n        ldh [$47], a")
    gb = GameBoy(build_rom(assemble(program), cgb_flag=0xC0), check_header=False)
    gb.run_frames(6)
    assert (gb.rgb555[0, WRITE_LINE].to(torch.int64) == RED).all()
    assert int(gb.state_tensors()["st"][0, FIELDS["FIFO_LINE"]]) == 0
