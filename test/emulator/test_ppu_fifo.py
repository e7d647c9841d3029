"""The pixel-FIFO PPU mode (``ppu="fifo"``, :mod:`torchrl_dreamer.emulator.fifo`).

* The pipeline with constant registers draws exactly what the whole-line renderer draws and ends
  mode 3 on exactly the dot :func:`~torchrl_dreamer.emulator.ppu.mode3_end` gives, on random
  scenes: lines without a mid-mode-3 write can use the fast renderer (and its timing) safely.
* mattcurrie's mealybug-tearoom tests (mid-mode-3 register writes) against their DMG references.
* Mode selection: bad values, savestates across modes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp
from conftest import missing_roms
from mealybug import mealybug_names, run_mealybug
from ppu_scenes import randomize_objects_and_registers, run_pipeline_to_end

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS, S_LINE, S_MODE, S_PACK, S_PPU_DOT, S_WIN_LINE
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.ppu import (
    MODE3_DOT,
    PH_DRAW,
    PIPE_LEAD,
    WRITE_LAG,
    end_of_mode3,
    fifo_finish,
    mode3_end,
    ppu_fifo_write,
)
from torchrl_dreamer.emulator.render import render_scanline
from torchrl_dreamer.roms import rom_path as shipped_rom

# ---------------------------------------------------------------- pipeline == line renderer


@wp.kernel(enable_backward=False)
def _pipeline_vs_line(m: Mem, line: int, out: wp.array2d(dtype=wp.int32)):
    i = wp.tid()
    wl = run_pipeline_to_end(i, m, line, out)
    for x in range(160):
        out[i, 2 + x] = int(m.fb[i, line, x])
    render_scanline(i, line, m.vram, m.oam, int(m.hram[i, 0x40]), int(m.hram[i, 0x43]),
                    int(m.hram[i, 0x42]), int(m.hram[i, 0x4B]), int(m.hram[i, 0x4A]),
                    int(m.hram[i, 0x47]), int(m.hram[i, 0x48]), int(m.hram[i, 0x49]), wl, m.fb)
    for x in range(160):
        out[i, 162 + x] = int(m.fb[i, line, x])


def _random_scenes(n: int, line: int, seed: int) -> GameBoy:
    """``n`` consoles with random VRAM, OAM (objects near ``line``, X anywhere incl. < 8 and
    >= 160, overlaps) and LCD registers (LCD on)."""
    g = torch.Generator().manual_seed(seed)
    gb = GameBoy(shipped_rom("maze"), num_envs=n, check_header=False)
    t = gb.state_tensors()
    t["vram"][:] = torch.randint(0, 256, (n, 0x2000), generator=g, dtype=torch.uint8)
    randomize_objects_and_registers(gb, line, g, (0x42, 0x43, 0x47, 0x48, 0x49))
    return gb


@pytest.mark.parametrize("seed,line", [(0, 0), (1, 37), (2, 77), (3, 143)])
def test_pipeline_matches_line_renderer(seed, line):
    n = 256
    gb = _random_scenes(n, line, seed)
    out = torch.zeros(n, 322, dtype=torch.int32)
    wp.launch(_pipeline_vs_line, dim=n, inputs=[gb._mem, line, wp.from_torch(out)], device="cpu")
    h = gb.state_tensors()["hram"].to(torch.int64)
    # the DMG window-disable glitch (window off after being drawn earlier this frame, WX on the
    # tile grid, (WX + SCX) & 7 == 7: a colour-0 pixel at WX - 7) is drawn by the pipeline only
    # (docs/emulator.md)
    wl = gb.state_tensors()["st"][:, FIELDS["WIN_LINE"]].to(torch.int64)
    lcdc, wx = h[:, 0x40], h[:, 0x4B]
    glitch = ((lcdc & 0x20) == 0) & ((wl & 0xFF) > 0) & (wx <= 166) & ((wx + (h[:, 0x43] & 7)) % 8 == 7)
    assert (~glitch).sum() > n // 2
    pipe, ref = out[~glitch, 2:162], out[~glitch, 162:]
    assert torch.equal(pipe, ref), f"pixels differ in envs {torch.nonzero((pipe != ref).any(1)).flatten().tolist()}"
    # mode-3 length: the closed form places object fetch waits on the background tile grid; once
    # the window is on, the pipeline's fetcher follows the window's grid, so lines with both are
    # compared on pixels only (documented in docs/emulator.md)
    wy = h[:, 0x4A]
    win = ((lcdc & 0x21) == 0x21) & (h[:, 0x4B] < 167) & (wy <= line)
    objs = (lcdc & 2) != 0
    check = ~(win & objs) & ~glitch
    assert check.sum() > n // 4
    assert torch.equal(out[check, 0], out[check, 1]), (
        f"mode-3 end differs: envs {torch.nonzero((out[:, 0] != out[:, 1]) & check).flatten().tolist()[:8]}")


# ---------------------------------------------------------------- writes just after mode 3

R_BGP = 0x47


@wp.kernel(enable_backward=False)
def _late_bgp_write(m: Mem, line: int, early: int, late: int, bgp: int, out: wp.array2d(dtype=wp.int32)):
    """Line ``line`` as the core runs it: optionally an early no-op BGP write in mode 3 (so the
    pipeline draws the line), mode 3 ends, BGP := ``bgp`` ``late`` dots after that, line end."""
    i = wp.tid()
    m.st[i, S_LINE] = line
    m.st[i, S_MODE] = PH_DRAW
    m.st[i, S_PACK] = 1
    if early != 0:
        m.st[i, S_PPU_DOT] = MODE3_DOT + 20
        ppu_fifo_write(i, m, R_BGP, int(m.hram[i, R_BGP]))  # same value: no visible change
    e = mode3_end(i, m, line)
    m.st[i, S_PPU_DOT] = e
    end_of_mode3(i, m, line)
    m.st[i, S_PPU_DOT] = e + late
    ppu_fifo_write(i, m, R_BGP, bgp)
    fifo_finish(i, m, line)
    for x in range(160):
        out[i, x] = int(m.fb[i, line, x])
    out[i, 160] = m.st[i, S_WIN_LINE]


@pytest.mark.parametrize("late", [1, 3, 5, 8])
def test_write_just_after_mode3_same_with_or_without_an_earlier_write(late):
    """A BGP write landing a few dots after mode 3 ends (as STAT shows it) reaches the pipeline's
    last pixels only while the write, as the pipeline sees it (WRITE_LAG dots after the CPU's),
    comes before the last pixel, which leaves PIPE_LEAD dots before STAT mode 0: within
    -WRITE_LAG - PIPE_LEAD = 2 dots. A line the whole-line renderer drew (no earlier write) must
    come out as the pipeline draws it (an earlier no-op write), window line counter included."""
    n, line = 128, 50
    res = []
    for early in (0, 1):
        gb = _random_scenes(n, line, seed=7)
        gb.state_tensors()["hram"][:, 0x40] &= 0xFD  # no objects: both paths end mode 3 alike
        gb.state_tensors()["st"][:, FIELDS["WIN_LINE"]] &= ~0xFF  # no window-disable glitch
        out = torch.zeros(n, 161, dtype=torch.int32)
        wp.launch(_late_bgp_write, dim=n, inputs=[gb._mem, line, early, late, 0x1B, wp.from_torch(out)],
                  device="cpu")
        res.append(out)
    assert torch.equal(res[0][:, 160], res[1][:, 160]), "window line counters differ"
    bad = (res[0][:, :160] != res[1][:, :160]).any(1)
    assert not bad.any(), f"pixels differ in envs {torch.nonzero(bad).flatten().tolist()[:8]}"
    changed = (res[1][:, 150:160] != _reference_lines(line, n)).any(1)
    reach = -WRITE_LAG - PIPE_LEAD
    assert changed.any() == (late < reach), f"the write should reach the last pixels only within {reach} dots"


def _reference_lines(line: int, n: int) -> torch.Tensor:
    """The last 10 pixels of ``line`` of the random scenes with no write at all."""
    gb = _random_scenes(n, line, seed=7)
    gb.state_tensors()["hram"][:, 0x40] &= 0xFD
    gb.state_tensors()["st"][:, FIELDS["WIN_LINE"]] &= ~0xFF
    out = torch.zeros(n, 322, dtype=torch.int32)
    wp.launch(_pipeline_vs_line, dim=n, inputs=[gb._mem, line, wp.from_torch(out)], device="cpu")
    return out[:, 162 + 150:162 + 160]


# ---------------------------------------------------------------- mealybug-tearoom

# name -> what the emulator lacks (strict xfail: a fix that makes one pass must remove it)
MEALYBUG_KNOWN_FAILURES: dict[str, str] = {}


def _mealybug_params():
    from torchrl_dreamer._roms import roms_dir

    names = mealybug_names(roms_dir()) or ["<missing>"]
    return [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=MEALYBUG_KNOWN_FAILURES[n])]
                         if n in MEALYBUG_KNOWN_FAILURES else [], id=n) for n in names]


@pytest.mark.parametrize("name", _mealybug_params())
def test_mealybug(roms, name):
    if name == "<missing>":
        missing_roms(f"no mealybug ROMs under {roms / 'mealybug'}")
    got, want = run_mealybug(name, "fifo", roms)
    bad = got != want
    assert not bad.any(), f"{int(bad.sum())} pixels differ, rows {sorted(set(np.nonzero(bad)[0].tolist()))[:10]}"


# ---------------------------------------------------------------- mode selection


def test_unknown_ppu_mode_lists_the_modes():
    with pytest.raises(ValueError, match="fifo, line"):
        GameBoy(shipped_rom("maze"), check_header=False, ppu="pixel")


def _mid_mode3_state(ppu: str, roms) -> tuple[GameBoy, object]:
    """A console stopped in the middle of a frame with mid-mode-3 writes (m3_bgp_change_sprites)."""
    path = roms / "mealybug" / "m3_bgp_change_sprites.gb"
    if not path.is_file():
        pytest.skip("mealybug ROMs not found")
    gb = GameBoy(path, check_header=False, framebuffer=True, ppu=ppu)
    gb.run_frames(3)
    gb.step_instructions(1500)  # into the frame: the pipeline is mid-line on some step
    return gb, gb.save_state()


@pytest.mark.parametrize("src,dst", [("fifo", "line"), ("line", "fifo")])
def test_savestate_loads_across_modes(roms, src, dst):
    gb, state = _mid_mode3_state(src, roms)
    other = GameBoy(gb._rom_bytes, check_header=False, framebuffer=True, ppu=dst)
    other.load_state(state)
    assert other.ppu == dst
    assert int(other.state_tensors()["st"][0, FIELDS["PPU_FIFO"]]) == int(dst == "fifo")
    # the same mode continues from the state as a fresh console of that mode would
    fresh = GameBoy(gb._rom_bytes, check_header=False, framebuffer=True, ppu=dst)
    fresh.load_state(state)
    other.run_frames(2)
    fresh.run_frames(2)
    assert torch.equal(other.framebuffer, fresh.framebuffer)
    same = GameBoy(gb._rom_bytes, check_header=False, framebuffer=True, ppu=src)
    same.load_state(state)
    same.run_frames(2)
    gb.run_frames(2)
    assert torch.equal(same.framebuffer, gb.framebuffer)


def test_line_mode_ignores_mid_mode3_writes_fifo_mode_draws_them(roms):
    got_fifo, want = run_mealybug("m3_obp0_change", "fifo", roms)
    got_line, _ = run_mealybug("m3_obp0_change", "line", roms)
    assert (got_fifo == want).all()
    assert (got_line != want).any()
