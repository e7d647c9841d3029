"""``GameBoy(..., launch_frames=k)``: a call's frames split into launches of ``k`` frames (the
consoles of a GPU warp then meet at frame ends), byte for byte as one launch per call.

Each case plays the same per-console random input on a one-launch console batch and on split
ones, and compares every state array, the packed2 observation and the framebuffer after every
call: steps into ``packed2`` and into ``obs_out``, presses shorter than, equal to and longer
than the step (and none), and ``run_frames`` with and without rendering.
"""

from __future__ import annotations

import pytest
import torch
from conftest import rom_path

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.launch import launch_plan, resolve_launch_frames
from torchrl_dreamer.roms import rom_path as shipped_rom

GAMES = {
    "maze": None,
    "tobutobugirl": "games/tobutobugirl/tobu.gb",
    "pandoras_blocks": "games/pandoras-blocks/PandorasBlocks.gbc",
    "pandoras_blocks_cgb": "games/pandoras-blocks/PandorasBlocks.gbc",  # on the Color
}
MODELS = {"pandoras_blocks_cgb": "cgb"}  # the console of a case, where not the ROM's default


def _rom(roms, game):
    return shipped_rom(game) if GAMES[game] is None else rom_path(roms, GAMES[game])


def _assert_same(a: GameBoy, b: GameBoy, where: str) -> None:
    for name, t in a.state_tensors().items():
        assert torch.equal(t, b.state_tensors()[name]), f"{where}: state array {name!r} differs"
    assert torch.equal(a.packed2, b.packed2), f"{where}: packed2 differs"
    assert torch.equal(a.framebuffer, b.framebuffer), f"{where}: framebuffer differs"
    if a.model == "cgb":
        assert torch.equal(a.rgb555, b.rgb555), f"{where}: colour frame differs"


@pytest.mark.parametrize("game", sorted(GAMES))
def test_split_launches_equal_one_launch_bit_for_bit(roms, game):
    n = 6
    rom = _rom(roms, game)
    model = {"model": MODELS[game]} if game in MODELS else {}
    gbs = {k: GameBoy(rom, num_envs=n, check_header=False, framebuffer=True, launch_frames=k,
                      **model) for k in (None, 1, 5)}
    for gb in gbs.values():
        gb.run_frames(300, render=False)
    gen = torch.Generator().manual_seed(7)
    outs = {k: torch.empty(n, 1, 72, 20, dtype=torch.uint8) for k in gbs}
    for t in range(24):
        buttons = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=gen)
        press = (0, 3, 8, 12, 30)[t % 5]
        for k, gb in gbs.items():
            if t % 3 == 0:
                gb.step(buttons, frames=12, press_frames=min(press, 12))
            elif t % 3 == 1:
                gb.step(buttons, frames=12, press_frames=min(press, 12), obs_out=outs[k])
                gb.packed2.copy_(outs[k])  # compared below like the other calls' observations
            else:
                gb.run_frames(7, buttons=int(buttons[0]), render=bool(t % 2))
        for k in (1, 5):
            _assert_same(gbs[None], gbs[k], f"{game}, call {t}, launch_frames={k}")


def test_launch_frames_must_be_a_positive_int_none_or_auto():
    for bad in (0, -2, 1.5, True, "1", "fast"):
        with pytest.raises(ValueError, match="launch_frames must be an int >= 1, None .* or 'auto'"):
            GameBoy(shipped_rom("maze"), num_envs=1, check_header=False, launch_frames=bad)


def test_auto_is_a_launch_per_frame_on_cuda_and_one_a_call_on_the_cpu():
    # the default: what measured fastest on each device (emulator/launch.py)
    assert resolve_launch_frames("auto", "cuda:0") == 1
    assert resolve_launch_frames("auto", torch.device("cpu")) is None
    assert resolve_launch_frames(None, "cuda") is None and resolve_launch_frames(3, "cpu") == 3
    assert GameBoy(shipped_rom("maze"), num_envs=1, check_header=False).launch_frames is None
    assert launch_plan(24, 3, 1, None) == [(24, 3, 1)]
    plan = launch_plan(24, 3, 1, 1)
    assert len(plan) == 24 and sum(f for f, _, _ in plan) == 24
    assert [p for _, p, _ in plan] == [1, 1, 1] + [0] * 21  # the press spans the first 3 frames
    assert [k for _, _, k in plan] == [0] * 23 + [1]  # only the last frame is observed


def test_env_with_frame_launches_equals_one_launch_per_step():
    from tensordict import TensorDict

    from torchrl_dreamer.envs import GameBoyEnv

    envs = [GameBoyEnv("maze", num_envs=4, seed=3, launch_frames=k) for k in (None, 1)]
    assert envs[1].gb.launch_frames == 1 and envs[0].gb.launch_frames is None
    assert GameBoyEnv("maze", num_envs=1).gb.launch_frames is None  # "auto" on the CPU
    tds = [env.reset() for env in envs]
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        action = torch.randint(0, envs[0].action_set.n, (4,), generator=gen)
        tds = [env.step(TensorDict({"action": action}, batch_size=[4]))["next"] for env in envs]
        for key in ("pixels", "reward", "terminated", "is_first"):
            assert torch.equal(tds[0][key], tds[1][key]), key
