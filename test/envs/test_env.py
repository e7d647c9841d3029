"""GameBoyEnv mechanics (specs, deferred reset, partial resets, no-op starts, TorchRL plumbing).

These tests drive the env through a small pure-torch console that follows the emulator contract
(``GameBoy``/``ResetCache`` API of ``docs/emulator.md``) so that the env logic is checked in
seconds and independently of the Warp build; ``test_env_gameboy.py`` runs the same env on the real
emulator with our shipped games.

The toy console: WRAM byte ``POS`` moves +1 per step with RIGHT held and -1 with LEFT; reaching
``GOAL`` sets ``STATE=2`` (the task terminates). ``LAYOUT`` is a byte the task's reset hook
writes. Frames advance a 16-bit frame counter. The packed2 "screen" shows POS, the frame counter
low byte and LAYOUT in its first three bytes.
"""

from __future__ import annotations

import types

import pytest
import torch
from conftest import requires_cuda
from tensordict import TensorDict

from torchrl_dreamer.envs import GameBoyEnv, Task
from torchrl_dreamer.envs.actions import BUTTON_BITS

POS, STATE, LAYOUT, FRAMES = 0xC000, 0xC001, 0xC002, 0xC010
GOAL = 3


class FakeGameBoy:
    """Pure-torch stand-in following the emulator contract (used only by these tests)."""

    def __init__(self, rom, num_envs=1, device="cpu"):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.cartridge = types.SimpleNamespace(title="FAKEGAME")
        self.mem = torch.zeros(num_envs, 0x10000, dtype=torch.uint8, device=self.device)
        self.frame_count = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.locked = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.packed2 = torch.zeros(num_envs, 1, 72, 20, dtype=torch.uint8, device=self.device)
        self.step_calls = 0

    def _frames(self, n):
        self.frame_count += n
        lo = (self.frame_count & 0xFF).to(torch.uint8)
        self.mem[:, FRAMES] = lo

    def run_frames(self, n, buttons=None):
        self._frames(n)
        self._draw(self.packed2)

    def _draw(self, out):
        out.zero_()
        out[:, 0, 0, 0] = self.mem[:, POS]
        out[:, 0, 0, 1] = self.mem[:, FRAMES]
        out[:, 0, 0, 2] = self.mem[:, LAYOUT]

    def step(self, buttons, frames=24, press_frames=8, obs_out=None):
        self.step_calls += 1
        b = buttons.to(torch.int32)
        right = (b & BUTTON_BITS["RIGHT"]) != 0
        left = (b & BUTTON_BITS["LEFT"]) != 0
        playing = self.mem[:, STATE] == 1
        pos = self.mem[:, POS].to(torch.int32) + (right & playing).int() - (left & playing).int()
        pos = pos.clamp(0, 255)
        self.mem[:, POS] = pos.to(torch.uint8)
        self.mem[:, STATE] = torch.where(playing & (pos >= GOAL), 2, self.mem[:, STATE].int()).to(
            torch.uint8
        )
        self._frames(frames)
        out = self.packed2 if obs_out is None else obs_out
        self._draw(out)
        return out

    def read_memory(self, addr, length=1):
        return self.mem[:, addr : addr + length].clone()

    def write_memory(self, addr, values, mask=None):
        # same value shapes as the real emulator: an int, [length] or [N, length]
        v = torch.as_tensor(values, device=self.device)
        if v.dim() == 0:
            v = v.reshape(1)
        if v.dim() == 1:
            v = v.unsqueeze(0).expand(self.num_envs, -1)
        v = v.to(torch.uint8)
        cur = self.mem[:, addr : addr + v.shape[1]]
        if mask is not None:
            v = torch.where(mask.reshape(-1, 1), v, cur)
        self.mem[:, addr : addr + v.shape[1]] = v

    def save_state(self):
        return {"mem": self.mem.clone(), "frame_count": self.frame_count.clone()}

    def load_state(self, state, mask=None):
        if mask is None:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        for key in ("mem", "frame_count"):
            cur = getattr(self, key)
            src = state[key].expand_as(cur)
            m = mask.reshape(-1, *([1] * (cur.dim() - 1)))
            cur.copy_(torch.where(m, src, cur))


class FakeResetCache:
    def __init__(self, gb, state=None, pool=False):
        self.gb = gb
        self.state = gb.save_state() if state is None else state
        self.restores = 0

    def restore(self, mask, rows=None):
        self.restores += 1
        state = self.state if rows is None else {k: v[rows] for k, v in self.state.items()}
        self.gb.load_state(state, mask=mask)


FAKE = types.SimpleNamespace(GameBoy=FakeGameBoy, ResetCache=FakeResetCache)


class ReachGoal(Task):
    """Toy task: +1 when POS reaches GOAL (terminated); -0.01 per step otherwise."""

    name = "reach_goal_test"
    rom_titles = ("FAKEGAME",)
    default_action_set = "dpad"
    default_max_episode_steps = 6
    start_frames = 5

    def rom_path(self):
        return "fake.gb"

    def setup(self, num_envs, device):
        super().setup(num_envs, device)
        self.buffers["steps_seen"] = torch.zeros(num_envs, dtype=torch.int64, device=device)

    def on_reset(self, gb, mask, generator):
        layout = torch.randint(1, 200, (gb.num_envs,), generator=generator, device=gb.device)
        gb.write_memory(LAYOUT, layout.to(torch.uint8).unsqueeze(1), mask=mask)
        gb.write_memory(STATE, 1, mask=mask)
        gb.write_memory(POS, 0, mask=mask)

    def compute(self, gb, pixels, is_first):
        steps = self.buffers["steps_seen"]
        steps.copy_(torch.where(is_first, torch.zeros_like(steps), steps + 1))
        won = gb.read_memory(STATE)[:, 0] == 2
        reward = torch.where(won, 1.0, -0.01)
        return reward, won


def make_env(n=4, **kw):
    kw.setdefault("backend", FAKE)
    return GameBoyEnv(ReachGoal(), num_envs=n, **kw)


RIGHT, LEFT, NOOP = 4, 3, 0  # indices in the "dpad" action set


def test_specs_and_check_env_specs():
    from torchrl.envs.utils import check_env_specs

    env = make_env(3)
    assert env.batch_size == torch.Size([3])
    assert env.observation_spec["pixels"].shape == (3, 1, 72, 20)
    assert env.observation_spec["pixels"].dtype == torch.uint8
    assert env.observation_spec["is_first"].dtype == torch.bool
    assert env.observation_spec["episode_id"].dtype == torch.int32
    assert env.action_spec.shape == (3,) and env.action_spec.space.n == 5
    assert env.reward_spec.shape == (3, 1)
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    check_env_specs(env, seed=0)


@pytest.mark.parametrize("fmt,shape", [("shades", (2, 1, 72, 80)), ("rgb", (2, 3, 72, 80))])
def test_pixel_formats(fmt, shape):
    from torchrl.envs.utils import check_env_specs

    env = make_env(2, pixels=fmt)
    td = env.reset()
    assert td["pixels"].shape == shape
    check_env_specs(env, seed=0)


def test_reset_outputs():
    env = make_env(3)
    td = env.reset()
    assert td["is_first"].all() and not td["done"].any()
    assert (td["episode_id"] == 0).all()
    assert td["pixels"].shape == (3, 1, 72, 20)
    # the reset hook ran: the layout byte shows on screen and is nonzero
    assert (td["pixels"][:, 0, 0, 2] > 0).all()


def _step(env, actions):
    td = TensorDict({"action": torch.as_tensor(actions)}, batch_size=env.batch_size)
    return env.step(td)["next"]


def test_deferred_reset_sequence():
    env = make_env(2)
    env.reset()
    # env 0 walks right to the goal in 3 steps; env 1 idles.
    outs = [_step(env, [RIGHT, NOOP]) for _ in range(3)]
    last = outs[-1]
    assert last["terminated"][0].item() and last["done"][0].item()
    assert last["reward"][0].item() == 1.0
    assert last["pixels"][0, 0, 0, 0].item() == GOAL  # the real final observation
    assert not last["done"][1].item()
    assert [o["reward"][0].item() for o in outs[:2]] == pytest.approx([-0.01, -0.01])
    # next step: env 0 ignores its action (RIGHT) and resets
    nxt = _step(env, [RIGHT, RIGHT])
    assert nxt["is_first"][0].item() and not nxt["is_first"][1].item()
    assert nxt["reward"][0].item() == 0.0 and not nxt["done"][0].item()
    assert nxt["pixels"][0, 0, 0, 0].item() == 0  # back at the start, action ignored
    assert nxt["episode_id"].flatten().tolist() == [1, 0]
    assert nxt["pixels"][1, 0, 0, 0].item() == 1  # env 1 moved normally
    # then env 0 plays again
    again = _step(env, [RIGHT, NOOP])
    assert again["pixels"][0, 0, 0, 0].item() == 1 and not again["is_first"][0].item()


def test_truncation_by_max_episode_steps():
    env = make_env(1, max_episode_steps=4)
    env.reset()
    flags = [_step(env, [NOOP]) for _ in range(5)]
    trunc = [bool(f["truncated"].item()) for f in flags]
    assert trunc == [False, False, False, True, False]
    assert not flags[3]["terminated"].item() and flags[3]["done"].item()
    assert flags[4]["is_first"].item() and flags[4]["episode_id"].item() == 1


def test_terminated_wins_over_truncated():
    env = make_env(1, max_episode_steps=GOAL)
    env.reset()
    for _ in range(GOAL):
        out = _step(env, [RIGHT])
    assert out["terminated"].item() and not out["truncated"].item()


def test_outputs_are_fresh_tensors():
    env = make_env(2)
    td0 = env.reset()
    p0 = td0["pixels"].clone()
    a = _step(env, [RIGHT, RIGHT])
    a_pix = a["pixels"].clone()
    b = _step(env, [RIGHT, LEFT])
    assert torch.equal(td0["pixels"], p0)
    assert torch.equal(a["pixels"], a_pix)
    assert a["pixels"].data_ptr() != b["pixels"].data_ptr()
    assert a["episode_id"].data_ptr() != b["episode_id"].data_ptr()


def test_obs_out_renders_in_place():
    env = make_env(2)
    env.reset()
    rows = torch.zeros(5, 2, 1, 72, 20, dtype=torch.uint8)
    out = env.fast_step(torch.tensor([RIGHT, NOOP]), obs_out=rows[3])
    assert out["pixels"].data_ptr() == rows[3].data_ptr()
    assert rows[3][:, 0, 0, 0].tolist() == [1, 0]
    assert rows[2].sum() == 0
    with pytest.raises(ValueError, match="obs_out must be uint8"):
        env.fast_step(torch.tensor([0, 0]), obs_out=torch.zeros(2, 1, 72, 19, dtype=torch.uint8))


def test_one_emulator_launch_per_step():
    env = make_env(4)
    env.reset()
    before = env.gb.step_calls
    for _ in range(5):
        _step(env, [RIGHT] * 4)
    assert env.gb.step_calls - before == 5


def test_partial_reset_leaves_other_envs_alone():
    env = make_env(3)
    td = env.reset()
    for _ in range(2):
        td = env.step(td.set("action", torch.tensor([RIGHT, RIGHT, NOOP])))["next"]
    frames_before = env.gb.frame_count.clone()
    steps_task_before = env.task.buffers["steps_seen"].clone()
    td.set("_reset", torch.tensor([[False], [True], [False]]))
    out = env.reset(td)
    assert out["pixels"][:, 0, 0, 0].tolist() == [2, 0, 0]
    assert out["is_first"].flatten().tolist() == [False, True, False]
    assert out["episode_id"].flatten().tolist() == [0, 1, 0]
    # consoles 0 and 2 were rolled back to where they were; console 1 restarted
    assert env.gb.frame_count[0] == frames_before[0] and env.gb.frame_count[2] == frames_before[2]
    assert env.task.buffers["steps_seen"][0] == steps_task_before[0]
    assert env.task.buffers["steps_seen"][1] == 0
    nxt = env.step(out.set("action", torch.tensor([RIGHT, RIGHT, RIGHT])))["next"]
    assert nxt["pixels"][:, 0, 0, 0].tolist() == [3, 1, 1]
    assert nxt["terminated"].flatten().tolist() == [True, False, False]


def test_noop_starts_vary_per_episode_and_follow_set_seed():
    def starts(seed, episodes=4):
        env = make_env(16, noop_max=30)
        env.set_seed(seed)
        counts = []
        for _ in range(episodes):
            td = env.reset()
            frames = td["pixels"][:, 0, 0, 1].long()
            # start frames, the no-ops, and the reset step's frames (ReachGoal writes RAM at
            # reset, so the step emulates)
            base = ReachGoal.start_frames + env.frame_skip
            assert ((frames - base) % 256).tolist() == env.noop_frames.tolist()
            counts.append(env.noop_frames.clone())
        return env, torch.stack(counts)

    env, a = starts(1)
    assert env.varied_starts and a.max() <= 30
    assert len(set(a.flatten().tolist())) > 4            # starts differ across envs...
    assert (a != a[0]).any(0).float().mean() > 0.5       # ... and across one env's episodes
    _, b = starts(1)
    assert torch.equal(a, b)                             # same seed, same starts
    _, c = starts(2)
    assert not torch.equal(a, c)
    # set_seed keeps the running consoles where they were
    before = env.gb.mem.clone()
    env.set_seed(3)
    assert torch.equal(env.gb.mem, before)


def test_seeded_layouts_reproducible():
    def layouts(seed):
        env = make_env(8)
        env.set_seed(seed)
        return env.reset()["pixels"][:, 0, 0, 2].tolist()

    assert layouts(5) == layouts(5)
    assert layouts(5) != layouts(6)


def test_native_autoreset_in_collector_rollout():
    env = make_env(2)
    env.set_seed(0)
    pol_actions = torch.tensor([RIGHT, NOOP])

    def policy(td):
        return td.set("action", pol_actions.clone())

    roll = env.rollout(8, policy, break_when_any_done=False)
    nxt = roll["next"]
    term0 = nxt["terminated"][0, :, 0].tolist()
    first0 = nxt["is_first"][0, :, 0].tolist()
    assert term0 == [False, False, True, False, False, False, True, False]
    assert first0 == [False, False, False, True, False, False, False, True]
    # the final frame of an episode is kept in "next" (not blanked) and carried to the root
    assert nxt["pixels"][0, 2, 0, 0, 0].item() == GOAL
    assert roll["pixels"][0, 3, 0, 0, 0].item() == GOAL
    # env 1 never finishes an episode before its truncation at step 6
    assert nxt["truncated"][1, :, 0].tolist() == [False] * 5 + [True, False, False]


def test_collector_no_reset_calls_with_auto_reset():
    from torchrl.collectors import Collector

    env = make_env(2)
    calls = []
    orig = env._reset

    def counting_reset(td=None, **kw):
        calls.append(td)
        return orig(td, **kw)

    env._reset = counting_reset
    col = Collector(env, policy=None, frames_per_batch=20, total_frames=40)
    n = 0
    for batch in col:
        assert batch.batch_size == torch.Size([2, 10])
        n += 1
    col.shutdown()
    assert n == 2
    assert len(calls) == 1  # the initial reset only: episodes restart inside steps


def test_collector_without_auto_reset_uses_partial_resets():
    from torchrl.collectors import Collector

    env = make_env(2, native_autoreset=False)
    col = Collector(
        env,
        policy=lambda td: td.set("action", torch.tensor([RIGHT, NOOP])),
        frames_per_batch=16,
        total_frames=16,
    )
    batch = next(iter(col))
    col.shutdown()
    nxt = batch["next"]
    # with explicit resets the episode restarts right away: no reset step in the data
    assert nxt["terminated"][0, :, 0].tolist() == [False, False, True] * 2 + [False, False]
    assert not nxt["is_first"].any()
    assert batch["is_first"][0, 3, 0].item()


def test_serial_and_parallel_env():
    from torchrl.envs import ParallelEnv, SerialEnv

    ser = SerialEnv(2, make_env)
    td = ser.rollout(4, break_when_any_done=False)
    assert td["next", "pixels"].shape == (2, 4, 4, 1, 72, 20)
    ser.close()
    par = ParallelEnv(2, make_env, mp_start_method="fork")
    try:
        td = par.rollout(4, break_when_any_done=False)
        assert td["next", "pixels"].shape == (2, 4, 4, 1, 72, 20)
    finally:
        par.close()


def test_transforms_and_render():
    from torchrl.envs import TransformedEnv
    from torchrl.record import PixelRenderTransform

    pytest.importorskip("torchrl_dreamer.emulator.packed2")
    from torchrl_dreamer.envs import UnpackPacked2

    env = TransformedEnv(make_env(2), UnpackPacked2())
    td = env.rollout(3)
    assert td["next", "pixels"].shape == (2, 3, 1, 72, 80)
    assert td["next", "pixels"].max() <= 3
    rgb = env.base_env.render()
    assert rgb.shape == (2, 72, 80, 3) and rgb.dtype == torch.uint8
    env2 = TransformedEnv(make_env(2), PixelRenderTransform(out_keys=["rgb"]))
    td = env2.rollout(2)
    assert td["rgb"].shape == (2, 2, 72, 80, 3)


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown task 'nope'.*maze"):
        GameBoyEnv("nope", backend=FAKE)
    with pytest.raises(ValueError, match="unknown action set"):
        make_env(1, action_set="joystick")
    with pytest.raises(ValueError, match="pixels format"):
        make_env(1, pixels="png")
    with pytest.raises(ValueError, match="press_frames"):
        make_env(1, press_frames=30)

    class OtherGame(ReachGoal):
        rom_titles = ("POKEMON RED",)

    from torchrl_dreamer.envs.task import TaskMismatchError

    with pytest.raises(TaskMismatchError, match="POKEMON RED.*FAKEGAME"):
        GameBoyEnv(OtherGame(), backend=FAKE)


@requires_cuda
def test_cuda_env_outputs_stay_on_device():
    env = make_env(4, device="cuda")
    td = env.reset()
    assert td["pixels"].device.type == "cuda"
    roll = env.rollout(8, break_when_any_done=False)
    for key in ("pixels", "reward", "done", "is_first", "episode_id"):
        assert roll["next", key].device.type == "cuda", key
    out = env.fast_step(torch.full((4,), RIGHT, device="cuda"))
    assert out["pixels"].device.type == "cuda"


def test_reset_with_empty_mask_changes_nothing():
    env = make_env(2)
    td = env.reset()
    td = env.step(td.set("action", torch.tensor([RIGHT, RIGHT])))["next"]
    frames = env.gb.frame_count.clone()
    out = env.reset(td.set("_reset", torch.zeros(2, 1, dtype=torch.bool)))
    assert torch.equal(env.gb.frame_count, frames)
    assert out["pixels"][:, 0, 0, 0].tolist() == [1, 1]
    assert out["episode_id"].flatten().tolist() == [0, 0]


def test_video_recorder_from_render(tmp_path):
    pytest.importorskip("torchrl_dreamer.emulator.packed2")
    from torchrl.envs import Compose, TransformedEnv
    from torchrl.record import PixelRenderTransform, VideoRecorder
    from torchrl.record.loggers import CSVLogger

    logger = CSVLogger("run", log_dir=str(tmp_path), video_format="pt")
    env = TransformedEnv(
        make_env(1),
        Compose(PixelRenderTransform(out_keys=["rgb"]),
                VideoRecorder(logger, tag="play", in_keys=["rgb"])),
    )
    env.rollout(5)
    env.transform[-1].dump()
    video = torch.load(tmp_path / "run" / "videos" / "play_0.pt")
    assert video.shape[-3:] == (3, 72, 80) and video.dtype == torch.uint8
    assert video.shape[-4] >= 5


def test_one_hot_action_spec():
    from torchrl.envs.utils import check_env_specs

    env = make_env(2, one_hot_actions=True)
    assert env.action_spec.shape == (2, 5) and env.action_spec.dtype == torch.bool
    check_env_specs(env, seed=0)
    env.reset()
    one_hot = torch.nn.functional.one_hot(torch.tensor([RIGHT, LEFT]), 5)
    out = env.fast_step(one_hot)  # integer one-hot rows are accepted too
    assert out["pixels"][:, 0, 0, 0].tolist() == [1, 0]


class Ticker(Task):
    """Toy task with no reset hook: pays the frame counter's change (it moves every frame)."""

    name = "ticker_test"
    rom_titles = ("FAKEGAME",)
    default_action_set = "dpad"
    default_max_episode_steps = 3
    start_frames = 5

    def rom_path(self):
        return "fake.gb"

    def setup(self, num_envs, device):
        super().setup(num_envs, device)
        self.buffers["prev"] = torch.zeros(num_envs, dtype=torch.int64, device=device)

    def compute(self, gb, pixels, is_first):
        now = gb.read_memory(FRAMES)[:, 0].long()
        prev = self.buffers["prev"]
        reward = torch.where(is_first, 0, (now - prev) % 256).float()
        prev.copy_(now)
        return reward, torch.zeros_like(is_first)


def test_first_observation_is_the_start_state_and_no_reward_is_lost():
    env = GameBoyEnv(Ticker(), num_envs=2, backend=FAKE, frame_skip=4)
    assert not env.task.reset_runs_frames and ReachGoal().reset_runs_frames
    start = Ticker.start_frames
    td = env.reset()
    assert td["pixels"][:, 0, 0, 1].tolist() == [start, start]
    episode_returns, firsts = [], []
    ret = torch.zeros(2)
    for _ in range(9):
        td = env.step(td.set("action", torch.zeros(2, dtype=torch.long)))["next"]
        if td["is_first"].all():
            firsts.append(td["pixels"][:, 0, 0, 1].tolist())
            assert td["reward"].abs().sum() == 0
        ret += td["reward"].flatten()
        if td["done"].all():
            episode_returns.append(ret.tolist())
            ret = torch.zeros(2)
    # every restart shows the start state itself: nothing emulated in the reset step...
    assert firsts == [[start, start]] * 2
    # ... and an episode's rewards add up to everything the counter moved since its start
    assert episode_returns == [[12.0, 12.0]] * 2
