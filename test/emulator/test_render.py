"""Tests of the Warp scanline renderer against hand-checked cases and the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp
from conftest import requires_cuda
from ppu_roms import put_tile, reference_frame

from torchrl_dreamer.emulator.packed2 import pack_packed2
from torchrl_dreamer.emulator.render import (
    LINE_REGISTERS,
    OAM_SIZE,
    VRAM_SIZE,
    WINDOW_STATE_RESET,
    line_registers,
    pack_row_packed2,
    render_frame,
    render_scanline_row,
    window_line,
)

wp.config.quiet = True


def solid(c: int, rows: int = 8):
    return [[c] * 8 for _ in range(rows)]


def blank():
    return np.zeros(VRAM_SIZE, dtype=np.uint8), np.zeros(OAM_SIZE, dtype=np.uint8)


def render_one(vram, oam, **regs) -> np.ndarray:
    fb = render_frame(
        torch.from_numpy(vram)[None], torch.from_numpy(oam)[None], line_registers(1, **regs)
    )
    return fb[0].numpy()


def regs_table(**regs) -> np.ndarray:
    return line_registers(1, **regs)[0].numpy()


def check_against_reference(vram, oam, **regs) -> np.ndarray:
    got = render_one(vram, oam, **regs)
    want = reference_frame(vram, oam, regs_table(**regs))
    np.testing.assert_array_equal(got, want)
    return got


def set_sprite(oam, n, y, x, tile, attr=0):
    oam[4 * n : 4 * n + 4] = (y + 16, x + 8, tile, attr)


# ---------------------------------------------------------------- background


def test_tile_data_modes_unsigned_and_signed():
    vram, oam = blank()
    put_tile(vram, 0x0000 + 16 * 1, solid(1))  # tile 1 in 8000 mode
    put_tile(vram, 0x1000 + 16 * 1, solid(2))  # tile 1 in 8800 mode (0x9010)
    put_tile(vram, 0x0800, solid(3))  # tile 0x80 in both modes (0x8800)
    vram[0x1800] = 1
    vram[0x1801] = 0x80
    identity = 0xE4  # BGP: colour c -> shade c
    fb = check_against_reference(vram, oam, lcdc=0x91, bgp=identity)  # 8000 unsigned
    assert fb[0, 0] == 1 and fb[0, 8] == 3
    fb = check_against_reference(vram, oam, lcdc=0x81, bgp=identity)  # 8800 signed
    assert fb[0, 0] == 2 and fb[0, 8] == 3


def test_tile_maps_and_scroll_wrap():
    vram, oam = blank()
    put_tile(vram, 16, solid(3))
    vram[0x1800 + 31] = 1  # 9800 map: top-right tile (x 248..255)
    vram[0x1C00 + 31 * 32] = 1  # 9C00 map: bottom-left tile (y 248..255)
    fb = check_against_reference(vram, oam, lcdc=0x91, bgp=0xE4, scx=248)
    assert (fb[0:8, 0:8] == 3).all() and (fb[0:8, 8:] == 0).all()
    fb = check_against_reference(vram, oam, lcdc=0x99, bgp=0xE4, scy=248)
    assert (fb[0:8, 0:8] == 3).all() and (fb[8:, :] == 0).all()
    # SCX = 252: the right half of map column 31 shows at x 0..3, then x wraps to map column 0
    fb = check_against_reference(vram, oam, lcdc=0x91, bgp=0xE4, scx=252)
    assert (fb[0:8, 0:4] == 3).all() and (fb[0:8, 4:] == 0).all()


def test_scroll_fine_offsets_match_reference():
    rng = np.random.default_rng(1)
    vram = rng.integers(0, 256, VRAM_SIZE, dtype=np.uint8)
    oam = np.zeros(OAM_SIZE, dtype=np.uint8)
    for scx, scy in [(1, 0), (7, 3), (129, 250), (255, 255)]:
        check_against_reference(vram, oam, lcdc=0x91, bgp=0x1B, scx=scx, scy=scy)


def test_palette_applies_to_bg():
    vram, oam = blank()
    for c in range(4):
        put_tile(vram, 16 * c, solid(c))
        vram[0x1800 + c] = c
    fb = render_one(vram, oam, lcdc=0x91, bgp=0b00_01_10_11)  # inverted ramp
    assert [int(fb[0, 8 * c]) for c in range(4)] == [3, 2, 1, 0]


# ---------------------------------------------------------------- window


def window_vram():
    vram, oam = blank()
    put_tile(vram, 16, solid(3))  # tile 1: dark, BG map is all tile 0 (colour 0)
    # window map at 9C00: rows alternate tile 1 / tile 0 every tile row
    for r in range(32):
        vram[0x1C00 + 32 * r : 0x1C00 + 32 * r + 32] = 1 if r % 2 == 0 else 0
    return vram, oam


def test_window_position_and_wx_below_7():
    vram, oam = window_vram()
    fb = check_against_reference(vram, oam, lcdc=0xF1, bgp=0xE4, wx=47, wy=20)
    assert (fb[:20] == 0).all()
    assert (fb[20:28, 40:] == 3).all() and (fb[20:28, :40] == 0).all()
    assert (fb[28:36, 40:] == 0).all()  # second window tile row is tile 0
    # WX = 3: window starts 4 pixels left of the screen edge
    vram2, _ = window_vram()
    put_tile(vram2, 16, [[3, 3, 3, 3, 0, 0, 0, 0]] * 8)  # left half dark
    fb = check_against_reference(vram2, oam, lcdc=0xF1, bgp=0xE4, wx=3, wy=0)
    assert (fb[0, 0:4] == 0).all() and (fb[0, 4:8] == 3).all()
    # WX >= 167 hides it
    fb = check_against_reference(vram, oam, lcdc=0xF1, bgp=0xE4, wx=167, wy=0)
    assert (fb == 0).all()


def test_window_line_counter_only_advances_when_drawn():
    vram, oam = window_vram()
    lcdc = torch.full((144,), 0xF1)
    lcdc[10:30] = 0xD1  # window disabled on lines 10..29
    fb = check_against_reference(vram, oam, lcdc=lcdc, bgp=0xE4, wx=7, wy=0)
    assert (fb[0:8] == 3).all() and (fb[8:10] == 0).all()
    assert (fb[10:30] == 0).all()
    # after the gap the window resumes at its line 10, not at screen line 30
    assert (fb[30:36] == 0).all() and (fb[36:44] == 3).all()


def test_window_wy_latch():
    vram, oam = window_vram()
    wy = torch.full((144,), 100)
    wy[5] = 5  # LY == WY on line 5 only: the window stays on for the rest of the frame
    fb = check_against_reference(vram, oam, lcdc=0xF1, bgp=0xE4, wx=7, wy=wy)
    assert (fb[:5] == 0).all() and (fb[5:13] == 3).all() and (fb[13:21] == 0).all()
    # WY below LY without ever being equal: never shown
    fb = check_against_reference(vram, oam, lcdc=0xF1, bgp=0xE4, wx=7, wy=torch.arange(144) + 1)
    assert (fb == 0).all()


def test_window_hidden_when_bg_disabled():
    vram, oam = window_vram()
    fb = check_against_reference(vram, oam, lcdc=0xF0, bgp=0xE4, wx=7, wy=0)
    assert (fb == 0).all()


# ---------------------------------------------------------------- objects


def sprite_vram():
    vram, oam = blank()
    put_tile(vram, 16 * 2, solid(1))
    put_tile(vram, 16 * 3, solid(2))
    put_tile(vram, 16 * 4, [[0, 3, 3, 3, 3, 3, 3, 3]] + solid(1, 7))  # asymmetric tile
    put_tile(vram, 16 * 5, solid(3))
    return vram, oam


def test_ten_objects_per_line_in_oam_order():
    vram, oam = sprite_vram()
    for n in range(11):
        set_sprite(oam, n, y=40, x=150 - 12 * n, tile=2)  # OAM #10 is the leftmost
    fb = check_against_reference(vram, oam, lcdc=0x93, bgp=0xE4, obp0=0xE4)
    assert (fb[40, 150 - 12 * 9 : 158 - 12 * 9] == 1).all()
    assert (fb[40, 150 - 12 * 10 : 158 - 12 * 10] == 0).all()  # 11th object dropped
    # an off-screen object (X=0) still uses a slot
    set_sprite(oam, 0, y=40, x=-8, tile=2)
    set_sprite(oam, 11, y=40, x=0, tile=2)
    fb = check_against_reference(vram, oam, lcdc=0x93, bgp=0xE4, obp0=0xE4)
    assert (fb[40, 0:8] == 0).all()


def test_priority_x_then_oam_index():
    vram, oam = sprite_vram()
    set_sprite(oam, 0, y=10, x=24, tile=2)  # colour 1
    set_sprite(oam, 1, y=10, x=20, tile=3)  # colour 2, smaller X: wins the overlap
    set_sprite(oam, 2, y=30, x=20, tile=2)
    set_sprite(oam, 3, y=30, x=20, tile=3)  # same X: lower OAM index (2) wins
    fb = check_against_reference(vram, oam, lcdc=0x83, bgp=0xE4, obp0=0xE4)
    assert (fb[10, 20:28] == 2).all() and (fb[10, 28:32] == 1).all()
    assert (fb[30, 20:28] == 1).all()


def test_flips_and_8x16():
    vram, oam = sprite_vram()
    set_sprite(oam, 0, y=0, x=0, tile=4)
    set_sprite(oam, 1, y=0, x=16, tile=4, attr=0x20)  # X flip
    set_sprite(oam, 2, y=20, x=0, tile=4, attr=0x40)  # Y flip
    fb = check_against_reference(vram, oam, lcdc=0x83, bgp=0xE4, obp0=0xE4)
    assert fb[0, 0] == 0 and fb[0, 1] == 3 and fb[1, 0] == 1
    assert fb[0, 23] == 0 and fb[0, 16] == 3
    assert fb[27, 0] == 0 and fb[27, 1] == 3 and fb[20, 0] == 1
    # 8x16: index 5 -> tiles 4 (top) and 5 (bottom); LSB ignored
    oam[:] = 0
    set_sprite(oam, 0, y=50, x=50, tile=5)
    set_sprite(oam, 1, y=50, x=70, tile=5, attr=0x40)  # Y flip swaps the halves too
    fb = check_against_reference(vram, oam, lcdc=0x87, bgp=0xE4, obp0=0xE4)
    assert fb[50, 51] == 3 and fb[51, 50] == 1 and (fb[58:66, 50:58] == 3).all()
    assert (fb[50:58, 70:78] == 3).all() and fb[65, 71] == 3 and fb[65, 70] == 0


def test_obp_palettes_and_obj_disable():
    vram, oam = sprite_vram()
    set_sprite(oam, 0, y=0, x=0, tile=2)  # colour 1 via OBP0
    set_sprite(oam, 1, y=0, x=8, tile=2, attr=0x10)  # colour 1 via OBP1
    fb = check_against_reference(vram, oam, lcdc=0x83, obp0=0b1000, obp1=0b1100)
    assert fb[0, 0] == 2 and fb[0, 8] == 3
    fb = check_against_reference(vram, oam, lcdc=0x81, obp0=0b1000, obp1=0b1100, bgp=0xE4)
    assert (fb == 0).all()


def test_obj_behind_bg():
    vram, oam = sprite_vram()
    put_tile(vram, 16 * 6, [[0, 0, 0, 0, 1, 1, 1, 1]] * 8)  # BG tile: left colour 0, right 1
    vram[0x1800] = 6
    set_sprite(oam, 0, y=0, x=0, tile=5, attr=0x80)  # behind BG, colour 3
    fb = check_against_reference(vram, oam, lcdc=0x93, bgp=0xE4, obp0=0xE4)
    assert (fb[0, 0:4] == 3).all() and (fb[0, 4:8] == 1).all()
    # hardware rule: the higher-priority behind-BG object hides a lower-priority one beneath
    set_sprite(oam, 1, y=0, x=0, tile=3)  # same X, higher OAM index: lower priority
    fb = check_against_reference(vram, oam, lcdc=0x93, bgp=0xE4, obp0=0xE4)
    assert (fb[0, 4:8] == 1).all() and (fb[0, 0:4] == 3).all()


def test_bg_disabled_is_colour0_and_objects_show():
    vram, oam = sprite_vram()
    vram[0x1800 : 0x1800 + 1024] = 5  # dark BG everywhere if it were on
    set_sprite(oam, 0, y=0, x=0, tile=2, attr=0x80)  # behind BG, but BG is off
    fb = check_against_reference(vram, oam, lcdc=0x92, bgp=0b01, obp0=0xE4)
    assert (fb[0, 0:8] == 1).all()  # object drawn
    assert (fb[0, 8:] == 1).all() and (fb[100] == 1).all()  # BG = BGP colour 0 = shade 1


def test_lcd_off_is_blank():
    vram, oam = sprite_vram()
    vram[0x1800 : 0x1800 + 1024] = 5
    set_sprite(oam, 0, y=0, x=0, tile=2)
    fb = render_one(vram, oam, lcdc=0x13, bgp=0xE4, obp0=0xE4)
    assert (fb == 0).all()


# ---------------------------------------------------------------- fuzz vs reference


@pytest.mark.parametrize("seed", range(6))
def test_random_frames_match_reference(seed):
    rng = np.random.default_rng(seed)
    n = 2
    vram = rng.integers(0, 256, (n, VRAM_SIZE), dtype=np.uint8)
    oam = rng.integers(0, 256, (n, OAM_SIZE), dtype=np.uint8)
    if seed % 2:  # crowd the objects onto few lines to exercise the 10-per-line limit
        oam[:, 0::4] = rng.integers(40, 70, (n, 40))
        oam[:, 1::4] = rng.integers(0, 60, (n, 40))
    regs = np.zeros((n, 144, len(LINE_REGISTERS)), dtype=np.int32)
    for e in range(n):
        base = rng.integers(0, 256, len(LINE_REGISTERS))
        base[0] |= 0x80
        base[3] = rng.integers(0, 172)  # WX
        base[4] = rng.integers(0, 150)  # WY
        regs[e] = base
        if seed >= 3:  # mid-frame register changes on random lines
            for ly in rng.choice(144, 12, replace=False):
                col = int(rng.integers(0, len(LINE_REGISTERS)))
                regs[e, ly:, col] = rng.integers(0, 256)
    got = render_frame(torch.from_numpy(vram), torch.from_numpy(oam), torch.from_numpy(regs))
    for e in range(n):
        np.testing.assert_array_equal(got[e].numpy(), reference_frame(vram[e], oam[e], regs[e]))


def test_packed2_from_kernel_matches_torch_packing():
    rng = np.random.default_rng(7)
    vram = torch.from_numpy(rng.integers(0, 256, (3, VRAM_SIZE), dtype=np.uint8))
    oam = torch.from_numpy(rng.integers(0, 256, (3, OAM_SIZE), dtype=np.uint8))
    fb, obs = render_frame(vram, oam, line_registers(3, lcdc=0xE7, bgp=0x1B), packed2=True)
    assert obs.shape == (3, 1, 72, 20)
    assert torch.equal(obs, pack_packed2(fb))


# ---------------------------------------------------------------- line-buffer variant


@wp.kernel
def _linebuf_kernel(
    vram: wp.array2d(dtype=wp.uint8),
    oam: wp.array2d(dtype=wp.uint8),
    regs: wp.array3d(dtype=wp.int32),
    line: wp.array3d(dtype=wp.uint8),
    obs: wp.array4d(dtype=wp.uint8),
    win_out: wp.array2d(dtype=wp.int32),
):
    i = wp.tid()
    win = int(WINDOW_STATE_RESET)
    for ly in range(144):
        win = render_scanline_row(
            i,
            ly,
            0,
            vram,
            oam,
            regs[i, ly, 0],
            regs[i, ly, 1],
            regs[i, ly, 2],
            regs[i, ly, 3],
            regs[i, ly, 4],
            regs[i, ly, 5],
            regs[i, ly, 6],
            regs[i, ly, 7],
            win,
            line,
            False,
        )
        pack_row_packed2(i, ly, 0, line, obs)
        win_out[i, ly] = window_line(win)


def test_line_buffer_variant_and_window_counter():
    vram, oam = window_vram()
    vram_t = torch.from_numpy(vram)[None].repeat(2, 1)
    oam_t = torch.from_numpy(oam)[None].repeat(2, 1)
    lcdc = torch.full((2, 144), 0xF1)
    lcdc[1, 50:60] = 0xD1
    regs = line_registers(2, lcdc=lcdc, bgp=0xE4, wx=7, wy=20)
    line = torch.zeros(2, 1, 160, dtype=torch.uint8)
    obs = torch.zeros(2, 1, 72, 20, dtype=torch.uint8)
    win = torch.zeros(2, 144, dtype=torch.int32)
    wp.launch(
        _linebuf_kernel,
        dim=2,
        inputs=[wp.from_torch(t) for t in (vram_t, oam_t, regs, line, obs, win)],
        device="cpu",
    )
    _, want = render_frame(vram_t, oam_t, regs, packed2=True)
    assert torch.equal(obs, want)
    assert win[0, 19] == 0 and win[0, 20] == 1 and win[0, 143] == 124
    assert win[1, 143] == 114 and win[1, 55] == win[1, 49]


# ---------------------------------------------------------------- errors and CUDA


def test_render_frame_rejects_bad_shapes():
    vram, oam = blank()
    v, o = torch.from_numpy(vram)[None], torch.from_numpy(oam)[None]
    with pytest.raises(ValueError, match="vram"):
        render_frame(v[:, :100], o, line_registers(1))
    with pytest.raises(ValueError, match="oam"):
        render_frame(v, o[:, :10], line_registers(1))
    with pytest.raises(ValueError, match="regs"):
        render_frame(v, o, line_registers(2))
    with pytest.raises(ValueError, match="unknown registers"):
        line_registers(1, lcd=0x91)


@requires_cuda
def test_cuda_matches_cpu():
    rng = np.random.default_rng(3)
    vram = torch.from_numpy(rng.integers(0, 256, (64, VRAM_SIZE), dtype=np.uint8))
    oam = torch.from_numpy(rng.integers(0, 256, (64, OAM_SIZE), dtype=np.uint8))
    regs = line_registers(64, lcdc=torch.randint(0x80, 0x100, (64, 1)), wx=30, wy=40, bgp=0x1B)
    fb_cpu, obs_cpu = render_frame(vram, oam, regs, packed2=True)
    fb_gpu, obs_gpu = render_frame(vram.cuda(), oam.cuda(), regs.cuda(), packed2=True)
    assert torch.equal(fb_gpu.cpu(), fb_cpu) and torch.equal(obs_gpu.cpu(), obs_cpu)
