"""PPU frame verification: our renderer and core against PyBoy, and the PPU micro test ROMs.

* Renderer vs PyBoy on game dumps (no core needed): each frame PyBoy draws, VRAM/OAM/registers
  are read back and rendered by our Warp renderer (per-line SCX/SCY/WX/WY from PyBoy's scanline
  record); frames whose state did not change across the frame must match PyBoy's screen exactly.
* Micro ROMs (``test/emulator/ppu_roms.py``): PyBoy must show the frame our numpy reference predicts
  (validates ROM + reference), then our core must show it too.
* Core vs PyBoy, frame by frame with scripted inputs, both booting PyBoy's DMG boot ROM, our
  core in PyBoy's frame protocol (``set_pyboy_timing``, see ``docs/emulator.md``): every frame
  must equal PyBoy's, except after the first gap documented per game in ``CORE_VS_PYBOY_GAPS``.

Frame counts: ``TORCHRL_DREAMER_PPU_FRAMES`` sets the frames per game (default: 1000 for the
renderer dumps, 600 for core vs PyBoy); set it to 10000 for the long verification.
``cd test && python test_ppu_frames.py [frames]`` prints the core-vs-PyBoy report per game.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import rom_path
from ppu_roms import MICRO_ROMS

from torchrl_dreamer._roms import roms_dir, shipped_roms_dir
from torchrl_dreamer.emulator.packed2 import pack_packed2
from torchrl_dreamer.emulator.render import line_registers, render_frame

pyboy = pytest.importorskip("pyboy")

FRAMES_ENV = "TORCHRL_DREAMER_PPU_FRAMES"


def frames_per_game(default: int) -> int:
    """``$TORCHRL_DREAMER_PPU_FRAMES`` if set (e.g. 10000), else ``default`` (CI budget)."""
    return int(os.environ.get(FRAMES_ENV, default))


GREY = (0xFFFFFF, 0xAAAAAA, 0x555555, 0x000000)
GAMES = {
    "2048": "games/2048-wyattferguson/2048.gb",
    "snake": "games/gb_raw_snake/snake.gb",
    "postbot": "games/postbot/PostBot.gb",
    "tobu": "games/tobutobugirl/tobu.gb",
    "pandora": "games/pandoras-blocks/PandorasBlocks.gbc",
}
SHIPPED = sorted(p.stem for p in shipped_roms_dir().glob("*/*.gb"))
BUTTON_BITS = {
    "a": 1,
    "b": 2,
    "select": 4,
    "start": 8,
    "right": 16,
    "left": 32,
    "up": 64,
    "down": 128,
}
SCRIPT = ("a", "start", "right", "left", "up", "down", "b", None)  # one per 40 frames, 8 held
_SHADE_OF_GREY = np.zeros(256, np.uint8)
_SHADE_OF_GREY[[0xFF, 0xAA, 0x55, 0x00]] = [0, 1, 2, 3]
_IO = (0xFF40, 0xFF43, 0xFF42, 0xFF4B, 0xFF4A, 0xFF47, 0xFF48, 0xFF49)  # LINE_REGISTERS order


def game_path(roms: Path, name: str) -> Path:
    if name in GAMES:
        return rom_path(roms, GAMES[name])
    return shipped_roms_dir() / name / f"{name}.gb"


def open_pyboy(path: Path, tmp_dir: Path):
    # PyBoy's 2048 game wrapper looks up debug symbols every tick and logs a traceback when the
    # ROM has none: hand it dummy ones (it only reads them).
    sym = tmp_dir / "pyboy_dummy.sym"
    sym.write_text("".join(f"00:C000 {n}\n" for n in ("_board", "_score", "_winner", "_state")))
    pb = pyboy.PyBoy(
        str(path),
        symbols=str(sym),
        window="null",
        sound_emulated=False,
        cgb=False,
        color_palette=GREY,
        log_level="CRITICAL",
    )
    pb.set_emulation_speed(0)
    return pb


def pyboy_boot_rom() -> Path:
    """PyBoy's own DMG boot ROM: booting it in both emulators aligns their first frames."""
    return Path(pyboy.__file__).parent / "core" / "bootrom_dmg.bin"


def screen(pb) -> np.ndarray:
    return _SHADE_OF_GREY[pb.screen.ndarray[:, :, 0]]


def script_action(frame: int) -> str | None:
    """The scripted input: SCRIPT[k] pressed for frames 40k..40k+7 (cycling)."""
    act = SCRIPT[(frame // 40) % len(SCRIPT)]
    return act if frame % 40 < 8 else None


def pyboy_input(pb, frame: int) -> None:
    act = SCRIPT[(frame // 40) % len(SCRIPT)]
    if act is not None and frame % 40 == 0:
        pb.button_press(act)
    if act is not None and frame % 40 == 8:
        pb.button_release(act)


def pyboy_frame(pb) -> bool:
    """Run PyBoy to its next frame boundary as our core sees it; True if the LCD was switched on.

    PyBoy's ``tick()`` also returns as soon as the LCD is switched on (a frame boundary ours
    does not have: switching the LCD on restarts line 0 in both); one more tick finishes the
    frame, so both count the same frames.
    """
    lcd_was_on = pb.memory[0xFF40] & 0x80
    pb.tick(1, True)
    if not lcd_was_on and pb.memory[0xFF40] & 0x80:
        pb.tick(1, True)
        return True
    return False


def pyboy_state(pb) -> bytes:
    m = pb.memory
    return bytes(m[0x8000:0xA000]) + bytes(m[0xFE00:0xFEA0]) + bytes(m[a] for a in _IO)


def render_state(state: bytes, scroll: list | None = None) -> np.ndarray:
    """Render a (VRAM, OAM, registers) snapshot; ``scroll``: per-line [SCX, SCY, WX-7, WY]."""
    io = state[0x20A0:]
    regs = dict(zip(("lcdc", "scx", "scy", "wx", "wy", "bgp", "obp0", "obp1"), io))
    if scroll is not None:
        lines = torch.tensor(scroll)
        regs.update(scx=lines[:, 0], scy=lines[:, 1], wx=lines[:, 2] + 7, wy=lines[:, 3])
    vram = torch.frombuffer(bytearray(state[:0x2000]), dtype=torch.uint8)[None]
    oam = torch.frombuffer(bytearray(state[0x2000:0x20A0]), dtype=torch.uint8)[None]
    return render_frame(vram, oam, line_registers(1, **regs))[0].numpy()


# ---------------------------------------------------------------- renderer vs PyBoy (no core)


@pytest.mark.parametrize("game", [*GAMES, *SHIPPED])
def test_renderer_matches_pyboy_static_frames(roms, tmp_path, game):
    frames = frames_per_game(1000)
    pb = open_pyboy(game_path(roms, game), tmp_path)
    prev = None
    static = matched = blank = 0
    try:
        for f in range(frames):
            pyboy_input(pb, f)
            pb.tick(1, True)
            state = pyboy_state(pb)
            if f >= 2 and state == prev:
                static += 1
                want = screen(pb)
                lcdc, bgp = state[0x20A0], state[0x20A0 + 5]
                got = render_state(state, pb.screen.tilemap_position_list)
                if np.array_equal(got, want):
                    matched += 1
                elif (want == (bgp & 3)).all():
                    # PyBoy's blank screen (LCD off, or the first frame after the LCD is switched
                    # on) is BGP colour 0 everywhere; the snapshot cannot tell that frame apart
                    # (the core blanks it; with the LCD off ours is shade 0).
                    blank += 1
                else:
                    diff = np.argwhere(got != want)
                    pytest.fail(
                        f"{game} frame {f}: {len(diff)} pixels differ from PyBoy, first at "
                        f"(y, x) = {tuple(diff[0])}, LCDC={lcdc:#04x}"
                    )
            prev = state
    finally:
        pb.stop(save=False)
    print(f"{game}: {frames} frames, {static} static, {matched} equal, {blank} LCD-blank")
    assert static >= frames // 4, f"too few static frames ({static}) to check anything"
    assert blank <= static // 10


# ---------------------------------------------------------------- micro test ROMs


@pytest.mark.parametrize("name", sorted(MICRO_ROMS))
def test_micro_rom_expected_frame_in_pyboy(tmp_path, name):
    micro = MICRO_ROMS[name]()
    path = tmp_path / f"{name}.gb"
    path.write_bytes(micro.rom)
    pb = open_pyboy(path, tmp_path)
    try:
        # PyBoy's boot ROM takes ~72 frames. Render every frame: PyBoy resets its window line
        # counter only in rendered frames.
        for _ in range(100):
            pb.tick(1, True)
        np.testing.assert_array_equal(screen(pb), micro.expected)
        for addr, value in micro.memory.items():
            assert pb.memory[addr] == value
    finally:
        pb.stop(save=False)


@pytest.mark.parametrize("name", sorted(MICRO_ROMS))
def test_micro_rom_expected_frame_in_core(name):
    from torchrl_dreamer.emulator import GameBoy

    micro = MICRO_ROMS[name]()
    gb = GameBoy(micro.rom, num_envs=2, framebuffer=True, check_header=False)
    gb.run_frames(micro.frames)
    want = torch.from_numpy(micro.expected)
    for env in range(2):
        got = gb.framebuffer[env].cpu()
        diff = (got != want).nonzero()
        assert len(diff) == 0, (
            f"{name} env {env}: {len(diff)} pixels differ, first {diff[:3].tolist()}"
        )
    assert torch.equal(gb.packed2.cpu(), pack_packed2(want[None].expand(2, -1, -1)))
    for addr, value in micro.memory.items():
        assert gb.read_memory(addr).cpu().tolist() == [[value]] * 2


# ---------------------------------------------------------------- core vs PyBoy


def pyboy_timed_core(path: Path, **kw):
    """Our core set up to be compared frame by frame with PyBoy (same boot ROM, PyBoy timing).

    ``PYBOY_TIMING`` (see ``bus.py``) ends frames where PyBoy's ``tick()`` does (LY 153 -> 0, and
    at LCD off, which also restarts the frame clock) and applies PyBoy's LY-read and SCX/mode-3
    timing, so inputs land on the same emulated cycle in both. ``idle_skip`` is off because the
    LY busy-wait fast-forward assumes hardware LY timing.
    """
    from torchrl_dreamer.emulator import GameBoy
    from torchrl_dreamer.emulator.pyboy_state import set_pyboy_timing

    gb = GameBoy(path, framebuffer=True, boot_rom=pyboy_boot_rom(), check_header=False,
                 idle_skip=False, **kw)
    set_pyboy_timing(gb)
    return gb


def _is_lcd_blank_pair(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Ours blank (shade 0) where PyBoy shows a uniform non-zero shade: PyBoy paints LCD-off
    frames and the first frame after LCD on with BGP colour 0, hardware shows shade 0. Expected
    never to happen here: ``PYBOY_TIMING`` paints those blanks as PyBoy does; kept as a class so
    a regression is reported with its cause."""
    return not ours.any() and theirs.min() == theirs.max() and theirs[0, 0] != 0


def compare_core_with_pyboy(path: Path, frames: int, tmp_dir: Path) -> dict:
    """Run our core (:func:`pyboy_timed_core`) and PyBoy side by side with the scripted input.

    Every frame falls in one class: ``equal`` to PyBoy's frame of the same index; ``lcd_blank``
    (see :func:`_is_lcd_blank_pair`); ``shifted`` (equal to a PyBoy frame at most 3 frames away:
    the game runs ahead or behind, not a rendering difference); ``unmatched``. ``resync`` counts
    LCD switch-ons (where PyBoy's ``tick()`` returns early, see :func:`pyboy_frame`).
    """
    gb = pyboy_timed_core(path)
    pb = open_pyboy(path, tmp_dir)
    ours, theirs = [], []
    resync = 0
    try:
        for f in range(frames):
            pyboy_input(pb, f)
            act = script_action(f)
            gb.run_frames(1, buttons=BUTTON_BITS[act] if act else 0)
            resync += pyboy_frame(pb)
            ours.append(gb.framebuffer[0].cpu().numpy().copy())
            theirs.append(screen(pb))
    finally:
        pb.stop(save=False)
    classes: dict[str, list[int]] = {"equal": [], "lcd_blank": [], "shifted": [], "unmatched": []}
    for f in range(frames):
        if np.array_equal(ours[f], theirs[f]):
            classes["equal"].append(f)
        elif _is_lcd_blank_pair(ours[f], theirs[f]):
            classes["lcd_blank"].append(f)
        elif any(0 <= f + k < frames and np.array_equal(ours[f], theirs[f + k])
                 for k in (-1, 1, -2, 2, -3, 3)):
            classes["shifted"].append(f)
        else:
            classes["unmatched"].append(f)
    stats: dict = {"frames": frames, "resync": resync}
    stats.update({k: len(v) for k, v in classes.items()})
    other = sorted(classes["shifted"] + classes["unmatched"])
    stats["first_other"] = other[:10]
    stats["first_lcd_blank"] = classes["lcd_blank"][:6]
    stats["by_class"] = classes
    return stats


# Per game: (first frame that may differ, reason), from 10,000-frame runs (module docstring).
# Before that frame every frame must equal PyBoy's; games without a gap must match throughout.
CORE_VS_PYBOY_GAPS: dict[str, tuple[int | None, str]] = {
    "postbot": (None, ""),
    "catch": (None, ""),
    "maze": (None, ""),
    "runner": (None, ""),
    "snake": (None, ""),
    "pandora": (None, ""),
    "2048": (366, "the game seeds its RNG (C0E3-C0E6) from DIV around frame 70; PyBoy samples IO "
                  "registers in LDH at the 2nd M-cycle (ours at the 3rd, as hardware) and its DIV "
                  "phase after LCD on differs by 4 T-cycles, so its sample can differ by 1 and the "
                  "board dealt at the first game start (frame 366) differs"),
    "tobu": (808, "from about frame 790 the game logic runs one update behind PyBoy (object "
                  "positions in WRAM differ by 1): a lag frame caused by CPU/interrupt timing "
                  "differences (PyBoy's IO access cycles, LCD-on timing); frames then differ or "
                  "match PyBoy's previous frame"),
}


@pytest.mark.parametrize("game", [*GAMES, *SHIPPED])
def test_core_frames_vs_pyboy(roms, tmp_path, game):
    frames = frames_per_game(600)
    first_gap, reason = CORE_VS_PYBOY_GAPS[game]
    limit = frames if first_gap is None else min(frames, first_gap)
    stats = compare_core_with_pyboy(game_path(roms, game), frames, tmp_path)
    by_class = stats.pop("by_class")
    print(game, stats, "known gap:", reason or "none")
    equal = set(by_class["equal"])
    before = [f for f in range(limit) if f not in equal]
    assert not before, f"{game}: frames {before[:10]} differ from PyBoy before {limit}: {stats}"


if __name__ == "__main__":
    # the long report: PYTHONPATH=test python test/emulator/test_ppu_frames.py 10000
    torch.set_num_threads(1)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    for g in [*GAMES, *SHIPPED]:
        p = game_path(roms_dir(), g)
        if p.is_file():
            st = compare_core_with_pyboy(p, n, Path(tempfile.mkdtemp()))
            st.pop("by_class")
            print(g, st, flush=True)
