"""Declarative task specs (torchrl_dreamer.envs.spec): validation errors that name the field,
decoding, and a spec that behaves exactly like the Python task it restates."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.spec import (
    CountWatch,
    DistanceWatch,
    Predicate,
    RamWatch,
    RewardTerm,
    TaskSpecError,
    load_task_spec,
    parse_predicate,
    parse_task_spec,
)
from torchrl_dreamer.roms import rom_path

GAME_2048 = "games/2048-wyattferguson/2048.gb"

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
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
    (_spec(max_episode_steps=100, max_episode_frames=800), "give the episode's limit once"),
    (_spec(max_episode_frames=0), "max_episode_frames"),
    (_spec(terminate=[{"address": 0xC000, "op": "~="}]), "terminate[0].op: unknown op"),
    (_spec(on_reset=[{"address": 0xC000}]), "on_reset[0]: give exactly one"),
    (_spec(on_reset=[{"address": 0xC000, "random": [9, 3]}]), "lo 9 > hi 3"),
    (_spec(rom={"sha256": "abc"}), "rom.sha256: expected 64 hex digits"),
    (_spec(exploration={"ram": {"addresses": []}}), "exploration.ram.addresses"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "bcd", "signed": True}]),
     "BCD values cannot be signed"),
    # predicate groups and set membership
    (_spec(terminate=[{"all": [{"address": 0xC000, "op": "==", "value": 1},
                               {"address": 0xC001, "in": [1, 300]}]}]),
     "terminate[0].all[1].in: expected a list of integers 0..255; 300 is not one"),
    (_spec(terminate=[{"all": [{"address": 0xC000, "in": []}]}]),
     "terminate[0].all[0].in: expected a list of integers 0..255"),
    (_spec(terminate=[{"address": 0xC000, "op": "in", "value": 3}]),
     "terminate[0].value: expected a list of integers 0..255, got 3"),
    (_spec(terminate=[{"address": 0xC000, "op": "in"}]), "needs a 'value' to compare with (a list"),
    (_spec(terminate=[{"address": 0xC000, "op": "==", "in": [1]}]), "terminate[0].in: 'in: [...]' is short"),
    (_spec(terminate=[{"any": [], "all": []}]), "one group key per mapping"),
    (_spec(terminate=[{"any": []}]), "terminate[0].any: expected a non-empty list"),
    (_spec(terminate=[{"not": [{"address": 0xC000, "op": "changed"}]}]),
     "terminate[0].not: expected one predicate mapping"),
    (_spec(terminate=[{"any": [{"address": 0xC000, "op": "changed"}], "address": 0xC000}]),
     "terminate[0]: 'any' groups take no watch or comparison keys (['address'])"),
    (_spec(terminate=[{"not": {"any": [{"address": 0xC000, "op": "<>", "value": 1}]}}]),
     "terminate[0].not.any[0].op: unknown op '<>'"),
    (_spec(terminate=[{"address": 0xC000}]), "terminate[0]: missing required key 'op'"),
    (_spec(terminate=[{"address": 0xC000, "op": "==", "value": 256}]),
     "terminate[0].value: 256 is outside the values 0..255 of the 1-byte u8 watch at 0xc000"),
    (_spec(terminate=[{"address": 0xC000, "mask": 0x0F, "op": "!=", "value": 16}]),
     "terminate[0].value: 16 is outside the values 0..15"),
    (_spec(success=[]), "success: expected a predicate or a non-empty list"),
    (_spec(success="won"), "success: expected a predicate or a list"),
    (_spec(reward=[{"kind": "event", "not": {"address": 0xC000, "op": "==", "value": 1},
                    "scale": "x"}]), "reward[0].scale: expected a number"),
    # masks
    (_spec(reward=[{"kind": "level", "address": 0xC000, "mask": 0x100}]),
     "reward[0].mask: 0x100 must be a non-zero mask within the watch's 8 bits"),
    (_spec(reward=[{"kind": "level", "address": 0xC000, "mask": 0}]), "reward[0].mask: 0x0 must be"),
    (_spec(reward=[{"kind": "level", "address": 0xC000, "encoding": "bcd", "mask": 0x0F}]),
     "reward[0].mask: a mask selects bits of a binary value; encoding 'bcd' is decimal"),
    (_spec(reward=[{"kind": "level", "address": 0xC000, "signed": True, "mask": 0x7F}]),
     "reward[0].mask: a masked value is a bit field: drop 'signed'"),
    # encodings
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "u32le", "length": 2}]),
     "reward[0].length: encoding 'u32le' takes 4 byte(s), got 2"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "bcd", "length": 9}]),
     "reward[0].length: 9 is outside 1..8"),
    (_spec(reward=[{"kind": "delta", "address": 0xFFFE, "encoding": "u32be"}]),
     "reward[0].address: 4 bytes from 0xfffe run past 0xFFFF"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "digits", "length": 3,
                    "blank": 7}]), "reward[0].blank: 7 is a digit (0..9)"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "digits", "blank": 256}]),
     "reward[0].blank: 256 is outside 0..255"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "bcd", "blank": 0x80}]),
     "reward[0].blank: 'blank' applies to encoding 'digits' only"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "bcd", "order": "lsb"}]),
     "reward[0].order: 'order' applies to encoding 'digits' only; for BCD use"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "digits", "order": "le"}]),
     "reward[0].order: expected one of ['msb', 'lsb']"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "encoding": "digits", "signed": True}]),
     "reward[0].signed: decimal digits cannot be signed"),
    # clamp
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "clamp": [0]}]),
     "reward[0].clamp: expected [lo, hi] (numbers; null for an open end"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "clamp": [None, None]}]),
     "reward[0].clamp: [null, null] clamps nothing"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "clamp": [2, 1]}]),
     "reward[0].clamp: lo 2.0 > hi 1.0"),
    (_spec(reward=[{"kind": "delta", "address": 0xC000, "clamp": ["0", 1]}]),
     "reward[0].clamp[0]: expected a number"),
    # count watches
    (_spec(reward=[{"kind": "delta", "count": {"range": [0xC100, 0x10000], "op": "!=", "value": 0}}]),
     "reward[0].count.range[1]: 0x10000 is outside 0x0000-0xffff"),
    (_spec(reward=[{"kind": "delta", "count": {"range": [0xC1FF, 0xC100], "op": "!=", "value": 0}}]),
     "reward[0].count.range: lo 0xc1ff > hi 0xc100"),
    (_spec(reward=[{"kind": "delta", "count": {"range": 0xC100, "op": "!=", "value": 0}}]),
     "reward[0].count.range: expected [lo, hi]"),
    (_spec(reward=[{"kind": "delta", "count": {"range": [1, 2], "op": "changed"}}]),
     "reward[0].count.op: unknown op 'changed'"),
    (_spec(reward=[{"kind": "delta", "count": {"range": [1, 2], "op": "==", "value": 256}}]),
     "reward[0].count.value: 256 is outside the values 0..255 of a byte"),
    (_spec(reward=[{"kind": "delta", "count": {"range": [1, 2], "in": [1, -1]}}]),
     "reward[0].count.in: expected a list of integers 0..255; -1 is not one"),
    (_spec(reward=[{"kind": "delta", "address": 1, "count": {"range": [1, 2], "in": [1]}}]),
     "reward[0]: give one of 'address' (a RAM watch), 'count'"),
    (_spec(terminate=[{"count": {"range": [0, 9], "op": "==", "value": 0}, "op": "==", "value": 11}]),
     "terminate[0].value: 11 is outside the values 0..10 of the count over 0x0000-0x0009"),
    (_spec(reward=[{"kind": "delta", "count": {"range": [1, 2], "op": "==", "value": 0, "step": 1}}]),
     "reward[0].count: unknown key(s) ['step']"),
    # start section
    (_spec(start={"states": []}), "start.states: expected a non-empty list of savestate files"),
    (_spec(start={"states": ["nowhere.trdstate"]}), "start.states[0]: savestate file"),
    (_spec(start={"states": ["a"], "macro": [{"wait": 1}]}), "not 'states' and 'macro'"),
    (_spec(start={"macro": [{"wait": 1}], "jitter": -1}), "start.jitter: -1 is outside 0..3600"),
    (_spec(start={"noop_max": "many"}), "start.noop_max: expected an integer"),
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


def test_screen_key_is_the_block_shade_hash():
    """The table-driven screen hash equals its definition: each 8x8 block's shade sum,
    quantised to 4 levels, mixed by the task's weights; and it tells frames apart."""
    obj = {"actions": "dpad", "start": {"macro": [{"wait": 1}]},
           "reward": [{"kind": "level", "address": 0xC000, "scale": 0.0}],
           "exploration": {"screen": {"scale": 1.0, "table_bits": 12}}}
    task = load_task_spec(obj, rom=rom_path("catch"))
    n = 5
    task.setup(n, torch.device("cpu"))
    g = torch.Generator().manual_seed(3)
    pixels = torch.randint(0, 256, (n, 1, 72, 20), generator=g, dtype=torch.uint8)
    pixels[0] = 0  # all white: every block 0
    pixels[1] = 0xFF  # all black: every block 192
    p = pixels.reshape(n, 72, 20).to(torch.int64)
    shades = sum(((p >> (2 * k)) & 3) for k in range(4))
    blocks = shades.reshape(n, 9, 8, 10, 2).sum((2, 4))
    q = (blocks * 4 // 193).reshape(n, -1)
    h = (q * task._screen_w).sum(1)
    want = (h ^ (h >> 17)) & ((1 << 12) - 1)
    got = task.screen_key(pixels, 12)
    assert torch.equal(got, want)
    assert len(set(got.tolist())) == n  # five different frames, five keys


def test_spec_rom_check():
    obj = {**MIN, "rom": {"title": "SOMETHING ELSE"}}
    from torchrl_dreamer.envs.task import TaskMismatchError
    with pytest.raises(TaskMismatchError, match="task spec 'rom' section"):
        GameBoyEnv(load_task_spec(obj, rom=rom_path("catch")), num_envs=1)


def test_train_config_with_task_spec(tmp_path):
    """--task-spec builds the run's task from the file (defaults from its train section); a bad
    spec, a missing --rom or a ROM the spec does not fit fail before any console is built."""
    from torchrl_dreamer.trainers import TrainConfig
    from torchrl_dreamer.trainers.builder import make_env
    from torchrl_dreamer.trainers.config import ConfigError

    spec = tmp_path / "c.yaml"
    spec.write_text((EXAMPLES / "catch.yaml").read_text() + "train: {batch_size: 4}\n")
    cfg = TrainConfig(task_spec=str(spec), rom=str(rom_path("catch")), total_steps=100)
    assert cfg.task == "catch_spec" and cfg.batch_size == 4
    env = make_env(cfg, num_envs=2)
    assert env.task.name == "catch_spec" and env.action_set.names[1] == "UP"
    with pytest.raises(ConfigError, match="needs --rom"):
        TrainConfig(task_spec=str(spec))
    bad = tmp_path / "bad.yaml"
    bad.write_text("reward: [{kind: delta, address: 0x1C000}]\n")
    with pytest.raises(ConfigError, match=r"reward\[0\].address"):
        TrainConfig(task_spec=str(bad), rom=str(rom_path("catch")))
    with pytest.raises(ConfigError, match="expects a ROM titled"):
        TrainConfig(task_spec=str(spec), rom=str(rom_path("maze")))
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("reward: [{kind: delta, address: 0xC000}]\ntrain: {batch: 4}\n")
    with pytest.raises(ConfigError, match="not TrainConfig settings"):
        TrainConfig(task_spec=str(wrong), rom=str(rom_path("catch")))


# ------------------------------------------------------------------------------ new encodings
@pytest.mark.parametrize("kw, raw, want", [
    ({"encoding": "u32le"}, [0x78, 0x56, 0x34, 0x12], 0x12345678),
    ({"encoding": "u32be"}, [0x12, 0x34, 0x56, 0x78], 0x12345678),
    ({"encoding": "u32le", "signed": True}, [0xFE, 0xFF, 0xFF, 0xFF], -2),
    ({"encoding": "u32be"}, [0xFF, 0xFF, 0xFF, 0xFF], 2**32 - 1),
    ({"encoding": "bcd"}, [0x12, 0x34, 0x56, 0x78, 0x90, 0x12, 0x34, 0x56], 1234567890123456),
    ({"encoding": "bcdle"}, [0x56, 0x34, 0x12, 0x90, 0x78, 0x56, 0x34, 0x12], 1234567890123456),
    ({"encoding": "digits"}, [1, 2, 3, 4, 5, 6, 7, 8], 12345678),
    ({"encoding": "digits", "order": "lsb"}, [1, 2, 3, 4, 5, 6, 7, 8], 87654321),
    ({"encoding": "digits", "blank": 0x80}, [0x80, 0x80, 4, 0], 40),
    ({"encoding": "digits", "order": "lsb", "blank": 0xFF}, [5, 2, 0xFF, 0xFF], 25),
    ({"encoding": "u8", "mask": 0x0F}, [0xA7], 7),
    ({"encoding": "u16le", "mask": 0x8000}, [0x00, 0x81], 0x8000),  # bit 7 of the second byte
    ({"encoding": "u16be", "mask": 0x00F0}, [0xFF, 0x3C], 0x30),
    ({"encoding": "u32le", "mask": 0xFF00}, [0x11, 0x22, 0x33, 0x44], 0x2200),
])
def test_new_encodings_decode(kw, raw, want):
    w = RamWatch.parse({"address": 0xC000, "length": len(raw), **kw}, "w")
    got = w.decode(torch.tensor([raw, raw], dtype=torch.uint8))
    assert got.dtype == torch.int64 and got.tolist() == [want, want]


def test_digits_with_a_non_digit_byte_decode_its_value():
    """Documented: a byte that is neither 0-9 nor the blank marker enters the sum as is."""
    w = RamWatch.parse({"address": 0xC000, "length": 2, "encoding": "digits"}, "w")
    assert w.decode(torch.tensor([[0x80, 3]], dtype=torch.uint8)).tolist() == [128 * 10 + 3]


def test_value_ranges():
    assert RamWatch(0, 4, "u32le", signed=True).value_range() == (-2**31, 2**31 - 1)
    assert RamWatch(0, 3, "digits").value_range() == (0, 999)
    assert RamWatch(0, 2, "bcd").value_range() == (0, 9999)
    assert RamWatch(0, 2, "u16le", mask=0x0F0F).value_range() == (0, 0x0F0F)
    assert CountWatch(0x10, 0x1F, "==").value_range() == (0, 16)


# ------------------------------------------------------------------------------ predicates
def _vals(**cols):
    """Watch -> tensor maps for parse_predicate(...).test from {"0xC000": [...], ...}."""
    return {RamWatch(int(k[1:], 16)): torch.tensor(v) for k, v in cols.items()}


def test_in_op_and_its_shorthand_agree():
    a = parse_predicate({"address": 0xC000, "op": "in", "value": [2, 5, 5]}, "p")
    b = parse_predicate({"address": 0xC000, "in": [5, 2]}, "p")
    assert a == b and a.values == (2, 5)
    now = _vals(xC000=[1, 2, 3, 5])
    assert a.test(now, now).tolist() == [False, True, False, True]


def test_predicate_groups_nest():
    """(a == 1 and not b in {2, 3}) or c decreased."""
    p = parse_predicate({"any": [
        {"all": [{"address": 0xC000, "op": "==", "value": 1},
                 {"not": {"address": 0xC001, "in": [2, 3]}}]},
        {"address": 0xC002, "op": "decreased"}]}, "p")
    now = _vals(xC000=[1, 1, 0, 0, 1], xC001=[0, 2, 0, 0, 3], xC002=[5, 5, 5, 4, 6])
    prev = _vals(xC000=[0, 0, 0, 0, 0], xC001=[0, 0, 0, 0, 0], xC002=[5, 5, 5, 5, 5])
    assert p.test(now, prev).tolist() == [True, False, False, True, False]
    assert p.has_change() and len(p.watches()) == 3


def test_mask_on_a_predicate_watch():
    p = parse_predicate({"address": 0xFF00, "mask": 0x10, "op": "==", "value": 0}, "p")
    raw = torch.tensor([[0xEF], [0xFF], [0x00]], dtype=torch.uint8)
    v = p.watch.decode(raw)
    assert p.evaluate(v, v).tolist() == [True, False, True]


def test_event_of_a_group_pays_on_becoming_true_or_at_every_change():
    """A group of comparisons pays once when it becomes true; one holding a change op pays at
    every step it holds."""
    state = RewardTerm.parse({"kind": "event", "all": [{"address": 0xC000, "op": ">=", "value": 2},
                                                        {"address": 0xC001, "op": "==", "value": 0}],
                              "scale": 3}, "r")
    seq_a, seq_b = [0, 2, 3, 4, 4], [0, 0, 0, 1, 0]
    paid = [state.compute(_vals(xC000=[seq_a[t]], xC001=[seq_b[t]]),
                          _vals(xC000=[seq_a[t - 1]], xC001=[seq_b[t - 1]])).item()
            for t in range(1, 5)]
    assert paid == [3.0, 0.0, 0.0, 3.0]  # true from t=1; false at t=3, true again at t=4
    instant = RewardTerm.parse({"kind": "event", "all": [
        {"address": 0xC000, "op": "increased"}, {"address": 0xC001, "op": "==", "value": 0}]}, "r")
    paid = [instant.compute(_vals(xC000=[seq_a[t]], xC001=[seq_b[t]]),
                            _vals(xC000=[seq_a[t - 1]], xC001=[seq_b[t - 1]])).item()
            for t in range(1, 5)]
    assert paid == [1.0, 1.0, 0.0, 0.0]  # every increase while b == 0


def test_clamp_bounds_the_scaled_contribution():
    now, prev = _vals(xC000=[10, 0, 5]), _vals(xC000=[0, 10, 5])
    up = RewardTerm.parse({"kind": "delta", "address": 0xC000, "scale": 0.5, "clamp": [0, None]}, "r")
    assert up.compute(now, prev).tolist() == [5.0, 0.0, 0.0]  # never negative
    both = RewardTerm.parse({"kind": "delta", "address": 0xC000, "scale": 0.5, "clamp": [-1, 2]}, "r")
    assert both.compute(now, prev).tolist() == [2.0, -1.0, 0.0]
    level = RewardTerm.parse({"kind": "level", "address": 0xC000, "clamp": [None, 6]}, "r")
    assert level.compute(now, prev).tolist() == [6.0, 0.0, 5.0]


class _FakeGB:
    """read_memory over a fixed [N, 0x10000] memory image (as the emulator returns it)."""

    def __init__(self, mem: torch.Tensor):
        self.mem = mem

    def read_memory(self, addr: int, length: int = 1) -> torch.Tensor:
        return self.mem[:, addr:addr + length].clone()


def test_count_watch_counts_matching_bytes():
    mem = torch.zeros(2, 0x10000, dtype=torch.uint8)
    mem[0, 0xC100:0xC110] = 1           # 16 non-zero bytes in env 0
    mem[1, 0xC1F0:0xC200] = 0x83        # 16 in env 1, at the end of the range
    mem[1, 0xC200] = 1                  # just past the range: not counted
    gb = _FakeGB(mem)
    nonzero = CountWatch.parse({"range": [0xC100, 0xC1FF], "op": "!=", "value": 0}, "c")
    assert nonzero.read(gb).tolist() == [16, 16]
    low_bits = CountWatch.parse({"range": [0xC100, 0xC1FF], "mask": 0x03, "in": [3]}, "c")
    assert low_bits.read(gb).tolist() == [0, 16]
    whole = CountWatch.parse({"range": [0, 0xFFFF], "op": ">", "value": 0}, "c")
    assert whole.read(gb).tolist() == [16, 17]


def test_distance_watch_is_the_manhattan_distance_and_its_delta_shapes():
    mem = torch.zeros(2, 0x10000, dtype=torch.uint8)
    mem[0, 0xC004], mem[0, 0xC005], mem[0, 0xC008], mem[0, 0xC009] = 96, 40, 56, 88
    mem[1, 0xC004], mem[1, 0xC005], mem[1, 0xC008], mem[1, 0xC009] = 16, 200, 24, 16
    gb = _FakeGB(mem)
    dist = DistanceWatch.parse({"a": [0xC005, 0xC004], "b": [0xC009, 0xC008]}, "d")
    assert dist.read(gb).tolist() == [48 + 40, 184 + 8]
    assert dist.value_range() == (0, 510)
    term = RewardTerm.parse({"kind": "delta", "distance": {"a": [0xC005, 0xC004],
                                                           "b": [0xC009, 0xC008]},
                             "scale": -0.01, "clamp": [-0.1, 0.1]}, "r")
    assert term.watch == dist
    prev = {dist: dist.read(gb)}
    mem[0, 0xC005] = 48                 # one cell (8 px) towards the target: +0.08
    mem[1, 0xC008] = 136                # the target placed anew, 112 px further: clamped
    now = {dist: dist.read(gb)}
    assert torch.allclose(term.compute(now, prev), torch.tensor([0.08, -0.1]))


def test_distance_to_a_fixed_point_reads_one_side_from_ram():
    mem = torch.zeros(2, 0x10000, dtype=torch.uint8)
    mem[0, 0xC22D], mem[0, 0xC22F] = 60, 64            # on the target's row, 76 px short
    mem[1, 0xC22D], mem[1, 0xC22F] = 200, 10
    gb = _FakeGB(mem)
    dist = DistanceWatch.parse({"a": [0xC22D, 0xC22F], "to": [136, 64]}, "d")
    assert dist.read(gb).tolist() == [76, 64 + 54]
    assert dist.value_range() == (0, 510) and "(136, 64)" in dist.describe()
    term = RewardTerm.parse({"kind": "delta", "distance": {"a": [0xC22D, 0xC22F],
                                                           "to": [136, 64]},
                             "scale": -0.01}, "r")
    prev = {term.watch: term.watch.read(gb)}
    mem[0, 0xC22D] = 68                                 # 8 px towards it: +0.08
    mem[1, 0xC22F] = 0                                  # 10 px away: -0.1
    now = {term.watch: term.watch.read(gb)}
    assert torch.allclose(term.compute(now, prev), torch.tensor([0.08, -0.1]))


@pytest.mark.parametrize("obj, needle", [
    ({"a": [0xC005], "b": [0xC009, 0xC008]}, "same coordinates"),
    ({"a": [0xC005, 0xC004], "to": [1]}, "a has 2 coordinate.*to 1"),
    ({"a": [0xC005], "to": [256]}, "outside"),
    ({"a": [0xC005], "b": [0xC009], "to": [1]}, "not both"),
    ({"a": [0xC005]}, "not neither"),
    ({"a": [], "b": []}, "1-3 RAM addresses"),
    ({"a": [0x10000], "b": [0]}, "outside"),
])
def test_distance_watch_refuses_bad_points(obj, needle):
    with pytest.raises(TaskSpecError, match=needle):
        DistanceWatch.parse(obj, "d")


def test_a_watch_names_one_kind():
    with pytest.raises(TaskSpecError, match="not several"):
        RewardTerm.parse({"kind": "delta", "address": 0xC000,
                          "distance": {"a": [0xC005], "b": [0xC009]}}, "r")


def test_shaping_terms_are_marked_and_bad_marks_refused():
    term = RewardTerm.parse({"kind": "level", "address": 0xC000, "shaping": True}, "r")
    assert term.shaping and not RewardTerm.parse({"kind": "level", "address": 0xC000}, "r").shaping
    with pytest.raises(TaskSpecError, match=r"r.shaping: expected true or false, got 1"):
        RewardTerm.parse({"kind": "level", "address": 0xC000, "shaping": 1}, "r")
    ev = RewardTerm.parse({"kind": "event", "address": 0xC000, "op": "changed", "shaping": True},
                          "r")
    assert ev.shaping and ev.kind == "event"
    base = {"actions": "dpad", "reward": [{"kind": "delta", "address": 0xC000}]}
    assert not load_task_spec(base).has_score  # the reward is the score
    shaped = {**base, "reward": base["reward"] + [{"kind": "level", "address": 0xC001,
                                                   "shaping": True}]}
    assert load_task_spec(shaped).has_score
    assert load_task_spec({**base, "exploration": {"screen": {"scale": 0.01}}}).has_score


# ------------------------------------------------------------------------------ in an env
def test_score_is_the_reward_without_its_shaping_terms():
    """The env's ``score`` output: what the spec's unmarked terms paid at each step (nothing
    at an episode's first step, like the reward), while the reward also holds the shaping."""
    obj = {"actions": "dpad", "rom": {"logo": False}, "start": {"macro": [{"wait": 30}]},
           "max_episode_steps": 6,
           "reward": [{"kind": "delta", "address": 0xC0F0},
                      {"kind": "level", "address": 0xC0F0, "scale": 0.5, "shaping": True}]}
    env = GameBoyEnv(load_task_spec(obj, rom=rom_path("catch")), num_envs=2, frame_skip=8,
                     noop_max=0, seed=0)
    assert "score" in env.observation_spec.keys()
    td = env.reset()
    assert td["score"].tolist() == [[0.0], [0.0]]
    noop = TensorDict({"action": torch.zeros(2, dtype=torch.int64)}, batch_size=[2])
    prev = env.gb.read_memory(0xC0F0)[:, 0].float()
    firsts, moved = 0, False  # catch's frame counter (FRAME) runs: the score is not all 0
    for _ in range(8):
        nxt = env.step(noop)["next"]
        now = env.gb.read_memory(0xC0F0)[:, 0].float()
        first = nxt["is_first"].reshape(2)
        score, reward = nxt["score"].reshape(2), nxt["reward"].reshape(2)
        want = torch.where(first, torch.zeros(2), now - prev)
        assert torch.equal(score, want)
        assert torch.allclose(reward, torch.where(first, torch.zeros(2), want + 0.5 * now))
        firsts += int(first.sum())
        moved = moved or bool((score != 0).any())
        prev = now
    assert moved and firsts == 2  # the 6-step limit passed once in each env: a first step was checked
    assert "score" not in GameBoyEnv(load_task_spec({**obj, "reward": obj["reward"][:1]},
                                                    rom=rom_path("catch")),
                                     num_envs=1).observation_spec.keys()


def test_bonus_is_the_exploration_part_of_the_reward():
    """The env's ``bonus`` output: the exploration bonus each step paid (nothing at an
    episode's first step, like the reward), so that reward - bonus is what the spec's terms
    paid; tasks without a bonus have no ``bonus`` key."""
    obj = {"actions": "dpad", "rom": {"logo": False}, "start": {"macro": [{"wait": 30}]},
           "max_episode_steps": 5,
           "reward": [{"kind": "delta", "address": 0xC0F0}],
           "exploration": {"ram": {"addresses": [0xC0F0], "scale": 0.5, "table_bits": 8},
                           "screen": {"scale": 0.25}}}
    task = load_task_spec(obj, rom=rom_path("catch"))
    assert task.has_bonus and task.has_score
    env = GameBoyEnv(task, num_envs=2, frame_skip=8, noop_max=0, seed=0)
    assert "bonus" in env.observation_spec.keys()
    assert env.reset()["bonus"].tolist() == [[0.0], [0.0]]
    noop = TensorDict({"action": torch.zeros(2, dtype=torch.int64)}, batch_size=[2])
    prev = env.gb.read_memory(0xC0F0)[:, 0].float()
    firsts, paid = 0, 0.0
    for _ in range(8):
        nxt = env.step(noop)["next"]
        now = env.gb.read_memory(0xC0F0)[:, 0].float()
        first = nxt["is_first"].reshape(2)
        bonus, reward = nxt["bonus"].reshape(2), nxt["reward"].reshape(2)
        assert torch.equal(bonus[first], torch.zeros(int(first.sum())))
        # catch's frame counter moves every step: a new RAM value pays 0.5 (screens repeat)
        assert bool((bonus[~first] >= 0.5).all()) and bool((bonus <= 0.75).all())
        assert torch.allclose(reward - bonus, torch.where(first, torch.zeros(2), now - prev))
        firsts += int(first.sum())
        paid += float(bonus.sum())
        prev = now
    assert firsts == 2 and paid > 0
    plain = load_task_spec({k: v for k, v in obj.items() if k != "exploration"},
                           rom=rom_path("catch"))
    assert not plain.has_bonus
    assert "bonus" not in GameBoyEnv(plain, num_envs=1).observation_spec.keys()


def test_episode_limit_in_frames_holds_at_any_frame_skip():
    """``max_episode_frames``: ceil(frames / frame_skip) steps, then the episode is truncated
    (not terminated) and the next step starts a new one."""
    obj = {"actions": "dpad", "rom": {"logo": False}, "start": {"macro": [{"wait": 30}]},
           "max_episode_frames": 100, "reward": [{"kind": "delta", "address": 0xC003}]}
    task = load_task_spec(obj, rom=rom_path("catch"))
    assert task.default_max_episode_steps is None and task.default_max_episode_frames == 100
    assert GameBoyEnv(task, num_envs=1, frame_skip=24).max_episode_steps == 5
    env = GameBoyEnv(task, num_envs=2, frame_skip=8, noop_max=0, seed=0)
    assert env.max_episode_steps == 13  # 12.5 rounded up: never shorter than the frames asked
    env.reset()
    noop = TensorDict({"action": torch.zeros(2, dtype=torch.int64)}, batch_size=[2])
    ends = []
    for _ in range(14):
        nxt = env.step(noop)["next"]
        ends.append(bool(nxt["truncated"].all()) and not bool(nxt["terminated"].any()))
    assert ends.index(True) == 12 and ends.count(True) == 1


def test_count_clamp_and_success_in_a_catch_env():
    """On catch with the paddle idle: a count of non-zero bytes over LIVES..MISSES, a clamped
    lives delta and a success predicate, each checked against RAM read directly."""
    obj = {"actions": "dpad", "rom": {"logo": False},
           "start": {"macro": [{"wait": 30}], "noop_max": 7},
           "on_reset": [{"address": 0xC002, "value": 9}, {"address": 0xC001, "value": 1}],
           "reward": [{"kind": "level", "count": {"range": [0xC003, 0xC006], "op": "!=",
                                                   "value": 0}},
                      {"kind": "delta", "address": 0xC003, "scale": 10, "clamp": [-0.5, None]}],
           "success": {"all": [{"address": 0xC000, "op": "==", "value": 1},
                               {"address": 0xC006, "in": [1, 2]}]}}
    task = load_task_spec(obj, rom=rom_path("catch"))
    assert task.has_success and task.default_noop_max == 7
    env = GameBoyEnv(task, num_envs=2, seed=0)
    env.reset()
    noop = TensorDict({"action": torch.zeros(2, dtype=torch.int64)}, batch_size=[2])
    lives_before = env.gb.read_memory(0xC003)[:, 0].to(torch.int64)
    seen_success = seen_loss = False
    for _ in range(40):
        nxt = env.step(noop)["next"]
        ram = env.gb.read_memory(0xC000, 7).to(torch.int64)
        lives = ram[:, 3]
        count = (ram[:, 3:7] != 0).sum(1).float()
        lost = torch.where(lives < lives_before, -0.5, 0.0)
        first = nxt["is_first"].reshape(-1)
        want = torch.where(first, 0.0, count + lost)
        assert torch.allclose(nxt["reward"].reshape(-1), want), (nxt["reward"], want)
        success = (ram[:, 0] == 1) & ((ram[:, 6] == 1) | (ram[:, 6] == 2)) & ~first
        assert torch.equal(task.success(), success)
        seen_success |= bool(success.any())
        seen_loss |= bool((lost < 0).any())
        lives_before = lives
    assert seen_success and seen_loss  # the run saw both
    no_success = load_task_spec(MIN)
    assert not no_success.has_success and no_success.default_noop_max is None


# ------------------------------------------------------------------------------ varied starts
def _catch_states(tmp_path: Path) -> list[int]:
    """Two catch savestates, 20 and 45 frames after power-on; their frame counts."""
    gb = GameBoy(rom_path("catch"), num_envs=1, check_header=False)
    frames = []
    for name, n in (("a.trdstate", 20), ("b.trdstate", 25)):
        gb.run_frames(n)
        gb.save_state().save(tmp_path / name)
        frames.append(int(gb.frame_count[0]))
    return frames


def test_start_states_are_variants(tmp_path):
    frames = _catch_states(tmp_path)
    spec = tmp_path / "two.yaml"
    spec.write_text("rom: {logo: false}\nstart: {states: [a.trdstate, b.trdstate], noop_max: 4}\n"
                    "reward: [{kind: delta, address: 0xC004, encoding: u16le}]\n")
    task = load_task_spec(spec, rom=rom_path("catch"))
    assert task.num_start_variants == 2 and task.start_jitter == 0 and task.default_noop_max == 4
    g = torch.Generator().manual_seed(0)
    for variant in (1, 0):
        gb = GameBoy(rom_path("catch"), num_envs=2, check_header=False)
        task.prepare_start(gb, variant, g)
        assert gb.frame_count.tolist() == [frames[variant]] * 2
    gb = GameBoy(rom_path("catch"), num_envs=1, check_header=False)
    task.prepare(gb)  # the env's main snapshot: the first state
    assert gb.frame_count.tolist() == [frames[0]]
    with pytest.raises(ValueError, match="start variant 2 out of range"):
        task.prepare_start(gb, 2, g)
    env = GameBoyEnv(task, num_envs=1, seed=0)  # a spec with several states builds an env
    env.reset()
    # a state given by the caller replaces the spec's start
    assert load_task_spec(spec, rom=rom_path("catch"), state=tmp_path / "b.trdstate"
                          ).num_start_variants == 1
    # jitter cannot delay a savestate
    bad = tmp_path / "bad.yaml"
    bad.write_text("start: {states: [a.trdstate], jitter: 5}\n"
                   "reward: [{kind: delta, address: 0xC004}]\n")
    with pytest.raises(TaskSpecError, match="start.jitter: a savestate start has no macro to "
                                            "delay.*use 'noop_max'"):
        load_task_spec(bad)


def test_macro_jitter_waits_before_each_press():
    """jitter: the macro runs 0..jitter extra frames before each press, drawn from the
    generator in press order: same seed, same start; the draws add up to the frame count."""
    macro = [{"wait": 10}, {"press": "A", "frames": 4}, {"wait": 5}, {"press": "B", "frames": 2}]
    task = load_task_spec({**MIN, "start": {"macro": macro, "jitter": 6}}, rom=rom_path("catch"))
    assert task.num_start_variants == 1 and task.start_jitter == 12

    def frames_after(seed: int) -> int:
        gb = GameBoy(rom_path("catch"), num_envs=1, check_header=False)
        task.prepare_start(gb, 0, torch.Generator().manual_seed(seed))
        return int(gb.frame_count[0])

    counts = {}
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        draws = [int(torch.randint(0, 7, (1,), generator=g)) for _ in range(2)]
        counts[seed] = frames_after(seed)
        assert counts[seed] == 21 + sum(draws)
    assert len(set(counts.values())) > 1 and frames_after(3) == counts[3]
    gb = GameBoy(rom_path("catch"), num_envs=1, check_header=False)
    task.prepare(gb)  # the main snapshot: no jitter
    assert int(gb.frame_count[0]) == 21
    waits_only = load_task_spec({**MIN, "start": {"macro": [{"wait": 10}], "jitter": 3}},
                                rom=rom_path("catch"))
    assert waits_only.start_jitter == 3  # a macro without presses gets one delay at its end


def test_example_specs_with_a_win_report_success(roms):
    """2048.yaml's success is the won state: two 1024 tiles merged by LEFT win the game in the
    env where they were written, which ends that episode with success and only that one."""
    from conftest import rom_path as shared_rom

    assert {name: load_task_spec(EXAMPLES / f"{name}.yaml").has_success
            for name in ("2048", "tobutobugirl", "postbot", "snake", "pandoras_blocks")} == {
        "2048": True, "tobutobugirl": True, "postbot": True, "snake": False,
        "pandoras_blocks": False}
    task = load_task_spec(EXAMPLES / "2048.yaml", rom=shared_rom(roms, GAME_2048))
    env = GameBoyEnv(task, num_envs=2, seed=0)
    env.reset()
    board = torch.zeros(2, 50, dtype=torch.uint8)
    board[:, 1] = board[:, 3] = 4  # u16le 0x400 = 1024 in the first two cells of row 0
    env.gb.write_memory(0xC0B1, board, mask=torch.tensor([True, False]))
    left = torch.full((2,), env.action_set.names.index("LEFT"))
    nxt = env.step(TensorDict({"action": left}, batch_size=[2]))["next"]
    assert task.success().tolist() == [True, False]
    assert nxt["terminated"].reshape(-1).tolist() == [True, False]
    assert nxt["reward"][0].item() == 2048 / 4  # the merge's score, scaled
