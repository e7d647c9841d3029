"""``GameBoy.step_until``: each console runs until a watched byte changes (a decision per game
tick, :mod:`torchrl_dreamer.emulator.decision`).

Checked against plain steps: every console ends exactly where a one-launch ``step`` of its own
frame count leaves it (every state array, its packed2 picture), that count is the first frame
after which a watched byte differs (or the bound), and no console is left paused.
"""

from __future__ import annotations

import pytest
import torch

from torchrl_dreamer.emulator import BUTTON_RIGHT, GameBoy
from torchrl_dreamer.emulator.decision import MAX_DECISION_FRAMES, PAUSED, check_watch
from torchrl_dreamer.roms import ram_map, rom_path

N = 5


def _batch(game: str) -> GameBoy:
    """N consoles of ``game`` in play (its ``NEW_GAME`` request written), each some frames
    further on than the one before: different phases of the game's clock."""
    gb = GameBoy(rom_path(game), num_envs=N, check_header=False)
    for k in range(N):
        one = GameBoy(rom_path(game), num_envs=1, check_header=False)
        one.run_frames(90, render=False)
        one.write_memory(ram_map(game)["NEW_GAME"], 1)  # the shipped games start on this request
        one.run_frames(20 + 2 * k, render=False)
        gb.load_state(one.save_state(), mask=torch.arange(N) == k)
    return gb


def _first_change(game: str, start, buttons, watch, max_frames: int, press: int) -> list[int]:
    """Frames until a watched byte first differs, per console, by frame-by-frame plain steps."""
    gb = GameBoy(rom_path(game), num_envs=N, check_header=False)
    gb.load_state(start)
    before = torch.cat([gb.read_memory(a) for a in watch], dim=1)
    first = [max_frames] * N
    for f in range(max_frames):
        gb.step(buttons, frames=1, press_frames=1 if f < press else 0)
        now = torch.cat([gb.read_memory(a) for a in watch], dim=1)
        for i in range(N):
            if first[i] == max_frames and bool((now[i] != before[i]).any()) and f + 1 < max_frames:
                first[i] = f + 1
    return first


@pytest.mark.parametrize("game,field,buttons,press", [
    ("catch", "OBJ_Y", None, 0),                   # the falling object's own clock
    ("catch", "PADDLE_X", BUTTON_RIGHT, 3),         # input-driven, pressed for 3 frames
    ("maze", "PLAYER_X", None, 8),                  # no button: nothing moves, the bound ends it
])
def test_each_console_stops_where_a_plain_step_of_its_frames_leaves_it(game, field, buttons, press):
    watch = [ram_map(game)[field]]
    max_frames = 24
    gb = _batch(game)
    start = gb.save_state()
    out = torch.empty(N, 1, 72, 20, dtype=torch.uint8)
    frames = gb.step_until(buttons, watch, max_frames=max_frames, press_frames=press, obs_out=out)
    assert frames.dtype == torch.int32 and frames.shape == (N,)
    assert frames.tolist() == _first_change(game, start, buttons, watch, max_frames, press)
    if field == "OBJ_Y":
        assert len(set(frames.tolist())) > 1 and max(frames.tolist()) < max_frames  # real stops
    assert not bool(gb.locked.any()), "a console was left paused"
    for k in sorted(set(frames.tolist())):
        ref = GameBoy(rom_path(game), num_envs=N, check_header=False)
        ref.load_state(start)
        ref.step(buttons, frames=k, press_frames=min(press, k))
        rows = frames == k
        for name, t in gb.state_tensors().items():
            assert torch.equal(t[rows], ref.state_tensors()[name][rows]), \
                f"{game}: {name} differs for consoles stopped after {k} frames"
        assert torch.equal(out[rows], ref.packed2[rows]), f"{game}: picture after {k} frames"
    if game == "maze":
        assert frames.tolist() == [max_frames] * N  # nobody pressed anything: the bound


def test_stopped_consoles_differ_in_frames_and_the_watch_changed():
    gb = _batch("catch")
    addr = ram_map("catch")["OBJ_Y"]
    before = gb.read_memory(addr)[:, 0].clone()
    f0 = gb.frame_count.clone()
    frames = gb.step_until(None, [addr], max_frames=60)
    assert torch.equal(gb.frame_count - f0, frames.to(torch.int64))
    assert bool((gb.read_memory(addr)[:, 0] != before).all())
    assert bool((frames < 60).all())


def test_bad_watch_and_bound_are_refused_with_the_rule():
    gb = GameBoy(rom_path("maze"), num_envs=1, check_header=False)
    with pytest.raises(ValueError, match="at least one address"):
        gb.step_until(None, [], max_frames=8)
    with pytest.raises(ValueError, match="0..0xFFFF"):
        gb.step_until(None, [0x10000], max_frames=8)
    with pytest.raises(ValueError, match=f"1..{MAX_DECISION_FRAMES}"):
        gb.step_until(None, [0xC000], max_frames=0)
    with pytest.raises(ValueError, match="obs_out must be uint8"):
        gb.step_until(None, [0xC000], obs_out=torch.empty(1, 72, 20, dtype=torch.uint8))
    assert check_watch([0xC004, 0xC005], 16) == ((0xC004, 0xC005), 16)
    assert PAUSED not in (0, 1)  # never mistaken for running or an illegal-opcode lock-up
