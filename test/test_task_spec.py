"""Declarative task specs (torchrl_dreamer.envs.spec): validation errors that name the field,
decoding, and a spec that behaves exactly like the Python task it restates."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.spec import (
    Predicate,
    RamWatch,
    TaskSpecError,
    load_task_spec,
    parse_task_spec,
)
from torchrl_dreamer.roms import rom_path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"
MIN = {"reward": [{"kind": "delta", "address": 0xC000}]}


def _spec(**kw):
    return {**MIN, **kw}


@pytest.mark.parametrize("obj, field", [
    ({**MIN, "rewards": []}, "unknown key(s) ['rewards']"),
    ({}, "missing required key 'reward'"),
    (_spec(reward=[{"kind": "delta", "address": 0x10000}]), "reward[0].address: 0x10000 is outside"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "u16le", "length": 1}]),
     "reward[0].length: encoding 'u16le' takes 2 byte(s)"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "u24"}]), "unknown encoding 'u24'"),
    (_spec(reward=[{"kind": "bonus", "address": 0xC000}]), "reward[0].kind"),
    (_spec(reward=[{"kind": "event", "address": 0xC000, "op": ">"}]), "needs a 'value'"),
    (_spec(reward=[{"kind": "event", "address": 0xC000, "op": "decreased", "value": 1}]),
     "reward[0].value"),
    (_spec(start={"macro": [{"press": "JUMP"}]}), "start.macro[0].press: unknown button 'JUMP'"),
    (_spec(start={"macro": [{"wait": 10}], "state": "x.trdstate"}), "either 'state'"),
    (_spec(start={"state": "nowhere.trdstate"}), "start.state: savestate file"),
    (_spec(actions=["NOOP", "KICK"]), "actions"),
    (_spec(terminate=[{"address": 0xC000, "op": "~="}]), "terminate[0].op: unknown op"),
    (_spec(on_reset=[{"address": 0xC000}]), "on_reset[0]: give exactly one"),
    (_spec(on_reset=[{"address": 0xC000, "random": [9, 3]}]), "lo 9 > hi 3"),
    (_spec(rom={"sha256": "abc"}), "rom.sha256: expected 64 hex digits"),
    (_spec(exploration={"ram": {"addresses": []}}), "exploration.ram.addresses"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "bcd", "signed": True}]),
     "BCD values cannot be signed"),
])
def test_bad_specs_name_the_field(obj, field):
    with pytest.raises(TaskSpecError) as err:
        parse_task_spec(obj)
    assert field in str(err.value), str(err.value)


def test_spec_files_that_do_not_parse(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("reward: [unclosed\n")
    with pytest.raises(TaskSpecError, match="does not parse"):
        load_task_spec(bad)
    with pytest.raises(TaskSpecError, match="not found"):
        load_task_spec(tmp_path / "missing.yaml")
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(TaskSpecError, match="empty"):
        load_task_spec(tmp_path / "empty.yaml")


def test_json_spec_and_name_default(tmp_path):
    p = tmp_path / "my_game.json"
    p.write_text('{"reward": [{"kind": "level", "address": "0xC010", "scale": 0.5}]}')
    task = load_task_spec(p)
    assert task.name == "my_game" and task.spec.reward[0].watch.address == 0xC010


@pytest.mark.parametrize("enc, raw, signed, want", [
    ("u8", [0xFE], True, -2),
    ("u8", [0xFE], False, 254),
    ("u16le", [0x34, 0x12], False, 0x1234),
    ("u16be", [0x12, 0x34], False, 0x1234),
    ("u16le", [0xFF, 0xFF], True, -1),
    ("bcd", [0x12, 0x34, 0x56], False, 123456),
    ("bcdle", [0x56, 0x34, 0x12], False, 123456),
])
def test_watch_decoding(enc, raw, signed, want):
    w = RamWatch(0xC000, len(raw), enc, signed)
    assert w.decode(torch.tensor([raw], dtype=torch.uint8)).tolist() == [want]


def test_predicates():
    w = RamWatch(0xC000)
    now, prev = torch.tensor([1, 2, 3]), torch.tensor([2, 2, 2])
    assert Predicate(w, "decreased").evaluate(now, prev).tolist() == [True, False, False]
    assert Predicate(w, "changed").evaluate(now, prev).tolist() == [True, False, True]
    assert Predicate(w, ">=", 2).evaluate(now, prev).tolist() == [False, True, True]


def test_catch_spec_matches_the_python_task():
    """examples/tasks/catch.yaml restates CatchTask: same rewards and episode ends, step by step."""
    ref = GameBoyEnv("catch", num_envs=4, seed=3)
    spec = GameBoyEnv(load_task_spec(EXAMPLES / "catch.yaml", rom=rom_path("catch")),
                      num_envs=4, seed=3)
    assert spec.action_set.names == ref.action_set.names
    assert spec.max_episode_steps == ref.max_episode_steps
    ref.reset(), spec.reset()
    g = torch.Generator().manual_seed(0)
    total, ends = torch.zeros(4), 0
    for _ in range(150):
        a = torch.randint(0, 5, (4,), generator=g)
        r1 = ref.step(TensorDict({"action": a}, batch_size=[4]))["next"]
        r2 = spec.step(TensorDict({"action": a}, batch_size=[4]))["next"]
        for key in ("reward", "terminated", "truncated", "pixels", "is_first"):
            assert torch.equal(r1[key], r2[key]), key
        total += r1["reward"].reshape(-1).abs()
        ends += int(r1["terminated"].sum())
    assert total.sum() > 0 and ends > 0  # the comparison saw rewards and game overs


def test_truncate_predicate_and_event_reward_and_pokes():
    """A spec's truncate predicate ends the episode as truncated, an event pays once when its
    predicate becomes true, and on_reset pokes land in RAM."""
    obj = {
        "name": "catch_events", "actions": "dpad",
        "start": {"macro": [{"wait": 30}]},
        "on_reset": [{"address": 0xC002, "value": 5}, {"address": 0xC001, "value": 1}],
        "reward": [{"kind": "event", "address": 0xC003, "op": "<", "value": 3, "scale": -2.0}],
        "truncate": [{"address": 0xC003, "op": "==", "value": 1}],
    }
    env = GameBoyEnv(load_task_spec(obj, rom=rom_path("catch")), num_envs=2, seed=0)
    env.reset()
    assert env.gb.read_memory(0xC002)[:, 0].tolist() == [5, 5]
    rewards, truncated_at = [], None
    for t in range(400):
        out = env.step(TensorDict({"action": torch.zeros(2, dtype=torch.int64)}, batch_size=[2]))
        nxt = out["next"]
        rewards.append(nxt["reward"][0, 0].item())
        if nxt["truncated"][0, 0]:
            truncated_at = t
            assert not nxt["terminated"][0, 0]
            break
    assert truncated_at is not None, "lives never reached 1 with the paddle idle"
    assert rewards.count(-2.0) == 1  # lives 3 -> 2 is the one event; 2 -> 1 keeps it true


def test_exploration_bonus_counts_visits_per_episode():
    obj = {"actions": "dpad", "start": {"macro": [{"wait": 30}]},
           "on_reset": [{"address": 0xC001, "value": 1}],
           "reward": [{"kind": "level", "address": 0xC000, "scale": 0.0}],
           "exploration": {"ram": {"addresses": [0xC007], "scale": 1.0, "table_bits": 8},
                           "screen": {"scale": 0.0}}}
    task = load_task_spec(obj, rom=rom_path("catch"))
    env = GameBoyEnv(task, num_envs=1, seed=0)
    env.reset()
    right = TensorDict({"action": torch.tensor([4])}, batch_size=[1])
    noop = TensorDict({"action": torch.tensor([0])}, batch_size=[1])
    r_new = env.step(right)["next"]["reward"].item()     # a new paddle x: first visit
    r_same = env.step(noop)["next"]["reward"].item()     # the same x again: second visit
    assert r_new == pytest.approx(1.0) and r_same == pytest.approx(2 ** -0.5)
    key = task.screen_key(torch.zeros(1, 1, 72, 20, dtype=torch.uint8), 16)
    assert key.shape == (1,) and 0 <= int(key) < 2 ** 16


def test_spec_rom_check():
    obj = {**MIN, "rom": {"title": "SOMETHING ELSE"}}
    from torchrl_dreamer.envs.task import TaskMismatchError
    with pytest.raises(TaskMismatchError, match="task spec 'rom' section"):
        GameBoyEnv(load_task_spec(obj, rom=rom_path("catch")), num_envs=1)
