"""RAM observations a task declares (``Task.observations``, a spec's ``observe:``): validation
that names the field before any console is built, and the env's ``float32[N, D]`` outputs,
compared with ``read_memory`` of the same consoles after resets, steps and partial resets."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchrl.data import Bounded
from torchrl.envs.utils import check_env_specs

from torchrl_dreamer.envs import GameBoyEnv, RamObservation, load_task_spec
from torchrl_dreamer.envs.spec import TaskSpecError, parse_task_spec
from torchrl_dreamer.envs.task import RESERVED_OBSERVATION_KEYS, check_observations
from torchrl_dreamer.envs.tasks.catch import CatchTask
from torchrl_dreamer.envs.tasks.maze import MazeTask
from torchrl_dreamer.roms import rom_path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
MIN = {"reward": [{"kind": "delta", "address": 0xC000}]}
# catch (docs/roms.md): LIVES 0xC003, PADDLE_X 0xC007, OBJ_X 0xC008, OBJ_Y 0xC009, FRAME 0xC0F0
OBSERVE = {"objects": [0xC009, 0xC007, 0xC008], "lives": [0xC003],
           "points": {"range": [0xC004, 0xC005]}, "far": [0xC0F0, 0xC000]}
LEFT, RIGHT = 3, 4  # dpad: NOOP, UP, DOWN, LEFT, RIGHT


def _catch_env(num_envs: int, observe=None, seed: int = 0) -> GameBoyEnv:
    obj = {**parse_yaml_example(), "observe": OBSERVE if observe is None else observe}
    return GameBoyEnv(load_task_spec(obj, rom=rom_path("catch")), num_envs=num_envs, seed=seed)


def parse_yaml_example() -> dict:
    import yaml

    return yaml.safe_load((EXAMPLES / "catch.yaml").read_text())


def _assert_reads(env: GameBoyEnv, td) -> None:
    """Every RAM observation of ``td`` is byte / 255 of the env's consoles as they are now."""
    for obs in env.task.observations:
        want = torch.stack([env.gb.read_memory(a)[:, 0] for a in obs.addresses], 1)
        got = td[obs.name]
        assert got.dtype == torch.float32 and tuple(got.shape) == (env.num_envs, obs.size)
        assert torch.equal(got, want.float() / 255), obs.name


# ------------------------------------------------------------------------------ the spec key
def test_observe_parses_lists_and_ranges_in_order():
    spec = parse_task_spec({**MIN, "observe": {"xy": [0xC005, "0xC004"],
                                               "board": {"range": [0xC100, 0xC103]}}})
    assert spec.observations == (RamObservation("xy", (0xC005, 0xC004)),
                                 RamObservation("board", (0xC100, 0xC101, 0xC102, 0xC103)))
    task = spec.build()
    assert task.observations == spec.observations
    assert parse_task_spec(MIN).build().observations == ()  # none unless asked for


@pytest.mark.parametrize("observe, field", [
    ([0xC000], "observe: expected a mapping of observation names"),
    ({"pixels": [0xC000]}, "observe.pixels: 'pixels' is already a key of every env step"),
    ({"is_first": [0xC000]}, "observe.is_first: 'is_first' is already a key"),
    ({"1ram": [0xC000]}, "observe.1ram: '1ram' is not a plain name"),
    ({"_reset": [0xC000]}, "observe._reset: '_reset' is not a plain name"),
    ({"ram": [0xC000, 0x10000]}, "observe.ram[1]: 0x10000 is outside 0x0000-0xffff"),
    ({"ram": [0xC000, "C0"]}, "observe.ram[1]: expected an integer"),
    ({"ram": [0xC000, True]}, "observe.ram[1]: expected an integer"),
    ({"ram": []}, "observe.ram: expected at least one RAM address"),
    ({"ram": [0xC000, 0xC001, 0xC000]}, "observe.ram[2]: 0xc000 is listed twice (also at [0])"),
    ({"ram": 0xC000}, "observe.ram: expected a list of RAM addresses or {range: [lo, hi]}"),
    ({"ram": {"range": [0xC010, 0xC000]}}, "observe.ram.range: lo 0xc010 > hi 0xc000"),
    ({"ram": {"range": [0xC010]}}, "observe.ram.range: expected [lo, hi]"),
    ({"ram": {"range": [0xC000, 0x1FFFF]}}, "observe.ram.range[1]: 0x1ffff is outside"),
    ({"ram": {"addresses": [0xC000]}}, "observe.ram: unknown key(s) ['addresses']"),
])
def test_bad_observe_is_refused_naming_the_field(observe, field):
    with pytest.raises(TaskSpecError) as err:
        parse_task_spec({**MIN, "observe": observe})
    assert field.lower() in str(err.value).lower(), str(err.value)


def test_every_reserved_key_is_refused():
    for key in sorted(RESERVED_OBSERVATION_KEYS):
        with pytest.raises(TaskSpecError, match=f"observe.{key}: '{key}' is already a key"):
            parse_task_spec({**MIN, "observe": {key: [0xC000]}})
        with pytest.raises(ValueError, match="RamObservation name"):
            RamObservation(key, [0xC000])


@pytest.mark.parametrize("name, addresses, message", [
    ("reward", [0xC000], "RamObservation name: 'reward' is already a key"),
    ("ram", [], "RamObservation 'ram': addresses: expected at least one RAM address"),
    ("ram", 0xC000, "RamObservation 'ram': addresses: expected a list of RAM addresses"),
    ("ram", [0xC000, -1], r"RamObservation 'ram': addresses\[1\]: -0x1 is outside"),
    ("ram", [0xC000, 1.5], r"RamObservation 'ram': addresses\[1\]: expected an integer"),
    ("ram", [7, 7], r"RamObservation 'ram': addresses\[1\]: 0x0007 is listed twice"),
])
def test_bad_python_observation_is_refused(name, addresses, message):
    with pytest.raises(ValueError, match=message):
        RamObservation(name, addresses)


def test_observations_of_a_python_task_are_checked_before_any_console():
    class Backend:  # an env that got as far as building a console would fail differently
        def GameBoy(self, *args, **kwargs):
            raise AssertionError("a console was built before the observations were checked")

    class Twice(MazeTask):
        observations = (RamObservation("xy", [0xC004]), RamObservation("xy", [0xC005]))

    class NotOne(MazeTask):
        observations = (RamObservation("xy", [0xC004]), {"name": "z", "addresses": [1]})

    class Bare(MazeTask):
        observations = RamObservation("xy", [0xC004])  # not a tuple of them

    with pytest.raises(ValueError, match=r"task 'maze' observations\[1\]: name 'xy' is used by "
                                         r"\[0\] too"):
        GameBoyEnv(Twice(), backend=Backend())
    with pytest.raises(ValueError, match=r"observations\[1\]: expected a RamObservation"):
        GameBoyEnv(NotOne(), backend=Backend())
    with pytest.raises(ValueError, match="observations: expected a tuple of RamObservation"):
        GameBoyEnv(Bare(), backend=Backend())
    assert check_observations([]) == ()


def test_nearby_addresses_are_read_in_one_block_far_ones_apart():
    class Counting:
        def __init__(self):
            self.reads = []

        def read_memory(self, addr, length=1):
            self.reads.append((addr, length))
            return (torch.arange(addr, addr + length) & 0xFF).to(torch.uint8).repeat(2, 1)

    gb = Counting()
    obs = RamObservation("o", [0xC009, 0xC007, 0xC020, 0xD000, 0xC0F0])
    out = obs.read(gb)
    # 0xC020 is near enough to 0xC009 to share its read; 0xC0F0 and 0xD000 are not
    assert gb.reads == [(0xC007, 0xC020 - 0xC007 + 1), (0xC0F0, 1), (0xD000, 1)]
    want = torch.tensor([0x09, 0x07, 0x20, 0x00, 0xF0], dtype=torch.float32) / 255
    assert torch.equal(out, want.repeat(2, 1))


# ------------------------------------------------------------------------------ the env
def test_env_emits_ram_observations_in_spec_reset_step_and_fast_step():
    env = _catch_env(3)
    spec = env.observation_spec
    assert set(OBSERVE) <= set(spec.keys())
    for name, size in (("objects", 3), ("lives", 1), ("points", 2), ("far", 2)):
        leaf = spec[name]
        assert isinstance(leaf, Bounded) and leaf.dtype == torch.float32
        assert tuple(leaf.shape) == (3, size)
    check_env_specs(env)
    td = env.reset()
    _assert_reads(env, td)
    assert td["lives"].mul(255).round().flatten().tolist() == [3.0] * 3  # a new game
    for k in range(12):
        action = torch.tensor([RIGHT, LEFT, RIGHT if k % 2 else LEFT])
        td = env.step(td.set("action", action))["next"]
        _assert_reads(env, td)
        fast = env.fast_step(action)
        _assert_reads(env, fast)
    # the paddle (objects[1] = PADDLE_X) followed the buttons: the bytes are live, not a copy
    assert fast["objects"][0, 1] > fast["objects"][1, 1]
    rollout = env.rollout(4, break_when_any_done=False)
    assert tuple(rollout["next", "objects"].shape) == (3, 4, 3)


def test_first_observation_of_a_new_episode_reads_the_restarted_console():
    env = _catch_env(2, observe={"lives": [0xC003]})
    env.reset()
    ended = False
    for _ in range(400):  # the idle paddle misses until the game is over
        out = env.fast_step(torch.tensor([0, 0]))
        _assert_reads(env, out)
        if ended:
            first = out["is_first"].flatten()
            assert first.any()
            assert out["lives"][first].mul(255).round().flatten().tolist() == [3.0] * int(first.sum())
            break
        ended = bool(out["done"].any())
    assert ended, "no game over within 400 steps"


def test_partial_reset_reads_every_console_as_it_stands():
    env = _catch_env(3, observe={"objects": [0xC007, 0xC008, 0xC009]})
    td = env.reset()
    for _ in range(6):
        td = env.step(td.set("action", torch.tensor([RIGHT, RIGHT, LEFT])))["next"]
    before = td["objects"].clone()
    td.set("_reset", torch.tensor([[False], [True], [False]]))
    out = env.reset(td)
    _assert_reads(env, out)
    assert torch.equal(out["objects"][[0, 2]], before[[0, 2]])  # consoles 0 and 2 did not move
    assert not torch.equal(out["objects"][1], before[1])  # console 1 restarted its game


def test_python_task_declares_observations():
    class CatchObjects(CatchTask):
        observations = (RamObservation("paddle", [0xC007]), RamObservation("block", [0xC008, 0xC009]))

    env = GameBoyEnv(CatchObjects(), num_envs=2)
    td = env.reset()
    _assert_reads(env, td)
    x0 = td["paddle"][:, 0].clone()
    for _ in range(3):
        td = env.fast_step(torch.tensor([RIGHT, 0]))
        _assert_reads(env, td)
    assert td["paddle"][0, 0] > x0[0]  # moved right
    assert td["paddle"][1, 0] == x0[1]  # the idle paddle did not
    assert "paddle" not in GameBoyEnv("catch", num_envs=1).observation_spec.keys()  # opt-in
