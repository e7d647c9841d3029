"""Savestates (versioned format, masks, broadcast, bad input) and the on-device ResetCache."""

from __future__ import annotations

import pytest
import torch
from conftest import rom_path
from test_emulator_romkit import make_rom

from torchrl_dreamer.emulator import BUTTON_A, BUTTON_DOWN, BUTTON_RIGHT, GameBoy, ResetCache
from torchrl_dreamer.emulator.state import EmulatorState, SavestateError

BUTTONS = torch.tensor([BUTTON_A, BUTTON_RIGHT, BUTTON_DOWN], dtype=torch.uint8)


@pytest.fixture(scope="module")
def game(roms):
    return rom_path(roms, "games/2048-wyattferguson/2048.gb")


def _snapshot(gb):
    return gb.packed2.clone(), {k: v.clone() for k, v in gb.registers().items()}, gb.read_memory(0xC000, 0x2000)


def test_round_trip_identical_frames(game):
    gb = GameBoy(game, num_envs=3)
    gb.run_frames(120)
    s = gb.save_state()
    for _ in range(3):
        gb.step(BUTTONS, frames=24, press_frames=8)
    obs1, regs1, ram1 = _snapshot(gb)
    gb.load_state(s)
    for _ in range(3):
        gb.step(BUTTONS, frames=24, press_frames=8)
    obs2, regs2, ram2 = _snapshot(gb)
    assert torch.equal(obs1, obs2) and torch.equal(ram1, ram2)
    for k in regs1:
        assert torch.equal(regs1[k], regs2[k]), k
    assert obs1.any(), "the game should show something after 120+ frames"


def test_bytes_round_trip_and_masked_load(game, tmp_path):
    gb = GameBoy(game, num_envs=3)
    gb.run_frames(30)
    s = gb.save_state()
    path = tmp_path / "x.trdstate"
    s.save(path)
    s2 = EmulatorState.load(path)
    for k in s.arrays:
        assert torch.equal(s.arrays[k], s2.arrays[k])
    gb.run_frames(50, buttons=BUTTONS)
    after = gb.save_state()
    mask = torch.tensor([False, True, False])
    gb.load_state(s2, mask=mask)
    now = gb.save_state()
    for k in s.arrays:
        assert torch.equal(now.arrays[k][1], s.arrays[k][1]), k
        assert torch.equal(now.arrays[k][0], after.arrays[k][0]), k
        assert torch.equal(now.arrays[k][2], after.arrays[k][2]), k


def test_broadcast_one_env_state(game):
    gb = GameBoy(game, num_envs=3)
    gb.run_frames(40, buttons=BUTTONS)
    one = gb.save_state().select(2)
    gb.load_state(one)
    regs = gb.registers()
    assert all(bool((v == v[2]).all()) for v in regs.values())


def test_reset_cache_restores_only_masked_envs(game):
    gb = GameBoy(game, num_envs=4)
    gb.run_frames(60)
    cache = ResetCache(gb)
    ref = gb.save_state()
    gb.run_frames(37, buttons=torch.tensor([1, 2, 16, 128], dtype=torch.uint8))
    moved = gb.save_state()
    cache.restore(torch.zeros(4, dtype=torch.bool))  # empty mask: nothing changes
    same = gb.save_state()
    for k in moved.arrays:
        assert torch.equal(same.arrays[k], moved.arrays[k])
    cache.restore(torch.tensor([True, False, True, False]))
    now = gb.save_state()
    for k in ref.arrays:
        for env in (0, 2):
            assert torch.equal(now.arrays[k][env], ref.arrays[k][env]), k
        for env in (1, 3):
            assert torch.equal(now.arrays[k][env], moved.arrays[k][env]), k


def test_bad_states_raise(game):
    gb = GameBoy(game, num_envs=2)
    data = gb.save_state().to_bytes()
    with pytest.raises(SavestateError, match="truncated"):
        EmulatorState.from_bytes(data[: len(data) // 2])
    with pytest.raises(SavestateError, match="bad magic"):
        EmulatorState.from_bytes(b"PK\x03\x04" + data[4:])
    bumped = data[:8] + (99).to_bytes(4, "little") + data[12:]
    with pytest.raises(SavestateError, match="version 99"):
        EmulatorState.from_bytes(bumped)
    other = GameBoy(make_rom(), num_envs=2, check_header=False)
    with pytest.raises(SavestateError, match="another ROM"):
        other.load_state(gb.save_state())
    three = GameBoy(game, num_envs=3)
    with pytest.raises(SavestateError, match="holds 2 envs"):
        three.load_state(gb.save_state())
    with pytest.raises(ValueError, match="mask must be bool"):
        gb.load_state(gb.save_state(), mask=torch.ones(2))
