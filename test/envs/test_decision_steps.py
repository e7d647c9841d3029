"""A spec's ``decision:`` section: env steps that end at the game's own tick.

On catch (the object falls 2 px every 5 frames; docs/roms.md: OBJ_Y 0xC009): every step ends
right after the object moved, the env counts each episode's frames and truncates the episode
at the task's frame limit, and a bad section is refused naming the field.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl_dreamer.envs import GameBoyEnv, load_task_spec
from torchrl_dreamer.envs.spec import TaskSpecError
from torchrl_dreamer.roms import rom_path

OBJ_Y = 0xC009
SPEC = {"actions": "dpad", "rom": {"logo": False},
        "start": {"macro": [{"wait": 30}]},
        "on_reset": [{"address": 0xC001, "value": 1}],   # NEW_GAME: the game starts
        "reward": [{"kind": "delta", "address": 0xC004}],
        "decision": {"on_change": [OBJ_Y], "max_frames": 12}}


def _noop(n: int) -> TensorDict:
    return TensorDict({"action": torch.zeros(n, dtype=torch.int64)}, batch_size=[n])


def test_the_spec_section_reaches_the_task_and_the_env():
    task = load_task_spec(SPEC, rom=rom_path("catch"))
    assert task.decision_watch == (OBJ_Y,) and task.decision_max_frames == 12
    plain = load_task_spec({k: v for k, v in SPEC.items() if k != "decision"})
    assert plain.decision_watch == ()
    assert load_task_spec({**SPEC, "decision": {"on_change": [1]}}).decision_max_frames == 16


def test_each_step_ends_when_the_object_moves():
    env = GameBoyEnv(load_task_spec(SPEC, rom=rom_path("catch")), num_envs=3, frame_skip=8,
                     noop_max=4, seed=0)
    env.reset()
    for _ in range(3):
        env.step(_noop(3))  # past the reset step: the game runs
    for _ in range(12):
        y0 = env.gb.read_memory(OBJ_Y)[:, 0].clone()
        f0 = env.gb.frame_count.clone()
        frames0 = env.episode_frames
        nxt = env.step(_noop(3))["next"]
        ran = env.gb.frame_count - f0
        live = ~nxt["is_first"].reshape(-1)
        moved = env.gb.read_memory(OBJ_Y)[:, 0] != y0
        # a step per move of the object (every 5 frames), never the 8 of frame_skip
        assert bool((moved | ~live).all()) and bool((ran[live] <= 5).all()), ran
        assert torch.equal(env.episode_frames[live], frames0[live] + ran[live])


def test_the_episode_frame_limit_counts_the_frames_the_steps_ran():
    spec = {**SPEC, "max_episode_frames": 40}
    env = GameBoyEnv(load_task_spec(spec, rom=rom_path("catch")), num_envs=2, frame_skip=24,
                     seed=0)
    assert env.max_episode_frames == 40 and env.max_episode_steps == 40  # a backstop only
    env.reset()
    lengths = []
    frames = 0
    for _ in range(40):
        f0 = env.gb.frame_count[0].item()
        nxt = env.step(_noop(2))["next"]
        frames += env.gb.frame_count[0].item() - f0
        if bool(nxt["truncated"][0]):
            lengths.append(frames)
            assert not bool(nxt["terminated"][0])
            frames = 0
        elif bool(nxt["is_first"][0]):
            frames = 0
    assert lengths and all(40 <= n < 40 + 12 for n in lengths), lengths


def test_a_checkpoint_keeps_the_episode_frames():
    def make():
        return GameBoyEnv(load_task_spec(SPEC, rom=rom_path("catch")), num_envs=2, seed=3)

    env = make()
    env.reset()
    for _ in range(6):
        env.step(_noop(2))
    other = make()
    other.load_state_dict(env.state_dict())
    assert torch.equal(other.episode_frames, env.episode_frames)
    assert int(env.episode_frames.min()) > 0
    a, b = env.step(_noop(2))["next"], other.step(_noop(2))["next"]
    assert torch.equal(a["pixels"], b["pixels"]) and torch.equal(other.episode_frames, env.episode_frames)
    assert "decision_watch=['0xc009']" in repr(env)


@pytest.mark.parametrize("decision,field", [
    ({"on_change": []}, "decision.on_change: expected a non-empty list"),
    ({"on_change": 0xC009}, "decision.on_change: expected a non-empty list"),
    ({"on_change": [0x10000]}, "decision.on_change[0]"),
    ({"on_change": [1], "max_frames": 0}, "decision.max_frames"),
    ({"on_change": [1], "every": 3}, "decision: unknown key(s) ['every']"),
    ({"max_frames": 8}, "decision"),
])
def test_bad_decision_sections_name_the_field(decision, field):
    with pytest.raises(TaskSpecError, match=field.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        load_task_spec({**SPEC, "decision": decision})
