"""Loading PyBoy ``.state`` files into our core (``torchrl_dreamer.emulator.pyboy_state``).

A state saved by PyBoy 2.8.1 (version 29) after N frames of scripted play is parsed (checked
against PyBoy's own register/memory API), loaded into our core, then both emulators run the same
scripted inputs for k more frames with PyBoy's frame boundary (``set_pyboy_timing``): every frame must
match PyBoy's screen, and registers, WRAM and HRAM must match at the end. Bad input (another
version, truncated, another ROM, a CGB-mode state) must raise :class:`PyBoyStateError`.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from test_ppu_frames import (
    BUTTON_BITS,
    GAMES,
    game_path,
    open_pyboy,
    pyboy_frame,
    pyboy_input,
    screen,
    script_action,
)

from torchrl_dreamer.emulator.pyboy_state import (
    PYBOY_STATE_VERSIONS,
    PyBoyStateError,
    load_pyboy_state,
    parse_pyboy_state,
    set_pyboy_timing,
)
from torchrl_dreamer.emulator.state import SavestateError

pyboy = pytest.importorskip("pyboy")

SAVE_AT = 300  # frames played in PyBoy before saving (past the boot ROM and the title screens)
RUN_FOR = 120  # frames run in both emulators after loading


def pyboy_after(path, tmp_path, frames: int):
    pb = open_pyboy(path, tmp_path)
    for f in range(frames):
        pyboy_input(pb, f)
        pb.tick(1, True)
    return pb


def state_bytes(pb) -> bytes:
    buf = io.BytesIO()
    pb.save_state(buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def saved(roms, tmp_path_factory):
    """{game: (PyBoy state bytes after SAVE_AT frames, ROM path)} for the test games."""
    out = {}
    for game in ("postbot", "tobu", "2048"):
        path = game_path(roms, game)
        pb = pyboy_after(path, tmp_path_factory.mktemp(game), SAVE_AT)
        out[game] = (state_bytes(pb), path)
        pb.stop(save=False)
    return out


@pytest.mark.parametrize("game", sorted(GAMES))
def test_parse_matches_pyboy_api(roms, tmp_path, game):
    path = game_path(roms, game)
    pb = pyboy_after(path, tmp_path, 150)
    try:
        data = state_bytes(pb)
        assert data[0] in PYBOY_STATE_VERSIONS
        p = parse_pyboy_state(data, path)
        rf, mem = pb.register_file, pb.memory
        assert (p.cpu["a"], p.cpu["f"], p.cpu["b"], p.cpu["c"], p.cpu["d"], p.cpu["e"]) == (
            rf.A, rf.F, rf.B, rf.C, rf.D, rf.E)
        assert (p.cpu["h"] << 8 | p.cpu["l"], p.cpu["sp"], p.cpu["pc"]) == (rf.HL, rf.SP, rf.PC)
        assert p.vram == bytes(mem[0x8000:0xA000])
        assert p.oam == bytes(mem[0xFE00:0xFEA0])
        assert p.wram == bytes(mem[0xC000:0xE000])
        assert p.hram == bytes(mem[0xFF80:0xFFFF])
        assert p.cpu["ie"] == mem[0xFFFF]
        regs = {"lcdc": 0xFF40, "scy": 0xFF42, "scx": 0xFF43, "lyc": 0xFF45, "bgp": 0xFF47,
                "obp0": 0xFF48, "obp1": 0xFF49, "wy": 0xFF4A, "wx": 0xFF4B}
        assert {k: p.lcd[k] for k in regs} == {k: mem[a] for k, a in regs.items()}
        assert p.timer["div_counter"] >> 8 == mem[0xFF04]
    finally:
        pb.stop(save=False)


def _regs_of_pyboy(pb) -> dict[str, int]:
    rf = pb.register_file
    return {"a": rf.A, "f": rf.F, "b": rf.B, "c": rf.C, "d": rf.D, "e": rf.E, "h": rf.HL >> 8,
            "l": rf.HL & 0xFF, "sp": rf.SP, "pc": rf.PC}


@pytest.mark.parametrize("game", ["postbot", "tobu", "2048"])
def test_load_then_run_matches_pyboy(roms, tmp_path, game):
    """Save in PyBoy, load into our core, keep running both: same frames, registers, memory.

    The reference is the PyBoy instance that saved the state and keeps running (a *fresh* PyBoy
    loading it is not exact: PyBoy does not save its window line counter, so its first frame
    after ``load_state`` can draw the window one line off).
    """
    from torchrl_dreamer.emulator import GameBoy

    path = game_path(roms, game)
    pb = pyboy_after(path, tmp_path, SAVE_AT)
    try:
        data = state_bytes(pb)
        gb = GameBoy(path, num_envs=2, framebuffer=True, check_header=False, idle_skip=False)
        gb.load_state(load_pyboy_state(data, path))  # a 1-env state broadcasts to both envs
        set_pyboy_timing(gb)  # PyBoy's frame boundary and PPU timing details
        # the loaded state shows PyBoy's registers and memory before anything runs
        ours = {k: int(v[0]) for k, v in gb.registers().items()}
        want = _regs_of_pyboy(pb)
        if parse_pyboy_state(data, path).cpu["halted"]:
            want["pc"] += 1  # PyBoy keeps PC on a HALT opcode while halted, ours is past it
        assert {k: ours[k] for k in want} == want
        assert bytes(gb.read_memory(0xC000, 0x2000)[1].tolist()) == bytes(pb.memory[0xC000:0xE000])
        for k in range(RUN_FOR):
            f = SAVE_AT + k
            pyboy_input(pb, f)
            act = script_action(f)
            gb.run_frames(1, buttons=BUTTON_BITS[act] if act else 0)
            pyboy_frame(pb)
            want_fb = screen(pb)
            for env in range(2):
                got = gb.framebuffer[env].numpy()
                assert np.array_equal(got, want_fb), (
                    f"{game} frame {k} after loading, env {env}: "
                    f"{int((got != want_fb).sum())} pixels differ from PyBoy"
                )
        assert bytes(gb.read_memory(0x8000, 0x2000)[0].tolist()) == bytes(pb.memory[0x8000:0xA000])
        assert bytes(gb.read_memory(0xFE00, 0xA0)[0].tolist()) == bytes(pb.memory[0xFE00:0xFEA0])
    finally:
        pb.stop(save=False)


def test_unknown_version_is_refused(saved):
    data, path = saved["postbot"]
    bad = bytes([28]) + data[1:]
    with pytest.raises(PyBoyStateError, match="version 28 is not supported"):
        load_pyboy_state(bad, path)
    assert issubclass(PyBoyStateError, SavestateError)


def test_truncated_state_is_refused(saved):
    data, path = saved["postbot"]
    for cut in (1, 100, 0x2100, len(data) - 1):
        with pytest.raises(PyBoyStateError, match="truncated"):
            load_pyboy_state(data[:cut], path)


def test_state_from_another_rom_is_refused(roms, saved):
    """PyBoy states carry no ROM identity: a mismatch shows as a cartridge section that does not
    fit the ROM (mapper / RAM banks) or a bank register out of the ROM's range."""
    postbot_state, postbot = saved["postbot"]  # MBC1, 4 ROM banks, no RAM
    tobu_state, _ = saved["tobu"]  # MBC1+RAM, 16 ROM banks, ROM bank 9 selected at SAVE_AT
    state_2048, rom_2048 = saved["2048"]  # ROM only
    pandora = game_path(roms, "pandora")  # MBC5, 16 RAM banks
    for data, rom in ((postbot_state, pandora), (state_2048, postbot), (postbot_state, rom_2048),
                      (tobu_state, postbot)):
        with pytest.raises(PyBoyStateError, match="does not fit this ROM"):
            load_pyboy_state(data, rom)


def test_cgb_state_is_refused(roms, tmp_path):
    path = game_path(roms, "pandora")  # DMG/CGB dual-mode game
    pb = pyboy.PyBoy(str(path), window="null", sound_emulated=False, cgb=True, log_level="CRITICAL")
    try:
        pb.tick(5, False)
        data = state_bytes(pb)
    finally:
        pb.stop(save=False)
    with pytest.raises(PyBoyStateError, match="CGB"):
        load_pyboy_state(data, path)


def test_loaded_state_round_trips_through_our_format(saved, tmp_path):
    data, path = saved["postbot"]
    s = load_pyboy_state(data, path)
    f = tmp_path / "x.trdstate"
    s.save(f)
    back = type(s).load(f)
    assert back.rom_sha256 == s.rom_sha256
    assert all(torch.equal(back.arrays[k], v) for k, v in s.arrays.items())


def test_pyboy_timing_moves_the_frame_boundary(roms):
    """Default frames end when VBlank starts (LY 144); PyBoy timing ends them at LY 153 -> 0."""
    from torchrl_dreamer.emulator import GameBoy

    gb = GameBoy(game_path(roms, "postbot"), num_envs=2, idle_skip=False)
    gb.run_frames(200)
    assert gb.read_memory(0xFF40).tolist() == [[0xC7], [0xC7]]  # LCD on
    set_pyboy_timing(gb, mask=torch.tensor([False, True]))
    s = gb.save_state()
    gb.run_frames(2)
    assert gb.read_memory(0xFF44)[:, 0].tolist() == [144, 0]
    gb.load_state(s)  # the flag is part of the savestate
    gb.run_frames(1)
    assert gb.read_memory(0xFF44)[:, 0].tolist() == [144, 0]
