"""Small real pieces for the collector tests: a deferred-reset TorchRL env and a factory.

The factory wires the real replay (``TimeMajorStorage``, ``ChronologicalSliceSampler``), the real
``DreamerPlayer`` and ``DreamerV3Learner`` (``tiny`` preset, vector observations) to the
collector, at sizes that run in seconds on one CPU core.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from torchrl_dreamer.collectors import AsyncCollectorConfig, AsyncDreamerCollector
from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage
from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
from torchrl_dreamer.objectives import DreamerV3Learner


class LineWalkEnv(EnvBase):
    """N walkers on a line; +1 reward and ``terminated`` at the right end, ``truncated`` at
    ``max_steps``. Deferred reset: the step after a done one ignores its action and returns the
    start observation with ``is_first=True``, reward 0 (like ``GameBoyEnv``)."""

    def __init__(self, num_envs: int = 4, length: int = 3, max_steps: int = 12, seed: int = 0):
        super().__init__(batch_size=torch.Size([num_envs]), device="cpu")
        n = num_envs
        self.length, self.max_steps = length, max_steps
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool)
        self.observation_spec = Composite(
            obs=Unbounded(shape=(n, 3)), is_first=flag.clone(), shape=(n,)
        )
        self.action_spec = Categorical(2, shape=(n,), dtype=torch.int64)
        self.reward_spec = Unbounded(shape=(n, 1))
        self.done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=(n,)
        )
        self._torchrl_native_autoreset = True
        self._pos = torch.zeros(n, dtype=torch.long)
        self._t = torch.zeros(n, dtype=torch.long)
        self._pending = torch.zeros(n, dtype=torch.bool)

    def _obs(self):
        return torch.stack(
            [self._pos.float() / self.length, self._t.float() / self.max_steps,
             torch.ones_like(self._pos, dtype=torch.float)], -1)

    def _out(self, reward, term, trunc, first):
        return TensorDict(
            {"obs": self._obs(), "reward": reward.reshape(-1, 1).float(),
             "terminated": term.reshape(-1, 1), "truncated": trunc.reshape(-1, 1),
             "done": (term | trunc).reshape(-1, 1), "is_first": first.reshape(-1, 1)},
            batch_size=self.batch_size,
        )

    def _reset(self, tensordict=None, **kwargs):
        self._pos.zero_()
        self._t.zero_()
        self._pending.zero_()
        n = self.batch_size[0]
        no = torch.zeros(n, dtype=torch.bool)
        out = self._out(torch.zeros(n), no, no, torch.ones(n, dtype=torch.bool))
        del out["reward"]
        return out

    def _step(self, tensordict):
        action = tensordict.get("action").reshape(-1)
        first = self._pending.clone()
        move = action * 2 - 1
        self._pos = torch.where(first, 0, (self._pos + move).clamp(min=-self.length))
        self._t = torch.where(first, 0, self._t + 1)
        term = (self._pos >= self.length) & ~first
        trunc = (self._t >= self.max_steps) & ~term & ~first
        reward = term.float()
        self._pending = term | trunc
        return self._out(reward, term, trunc, first)

    def _set_seed(self, seed):
        return seed


def make_collector(
    backend: str = "reference",
    num_envs: int = 4,
    capacity: int = 256,
    seed: int = 0,
    record_trace: bool = False,
    total_frames: int = 400,
    capture: bool = False,
    **cfg_overrides,
) -> AsyncDreamerCollector:
    """Real storage, sampler, player and learner (tiny preset) on ``LineWalkEnv``;
    ``capture=True`` gives the learner's static-buffer path (CUDA graphs on a GPU)."""
    torch.manual_seed(seed)
    kw = dict(
        steps_per_rollout=8, commit_stride=4, seq_len=8, batch_size=4, replay_ratio=0.25,
        learning_starts=32, min_ready_steps=8, safety_margin=8, max_learner_steps_per_tick=4,
        log_every=2, backend=backend, seed=seed, timeout_s=60.0,
    )
    kw.update(cfg_overrides)
    cfg = AsyncCollectorConfig(**kw)
    env = LineWalkEnv(num_envs)
    storage = TimeMajorStorage(capacity, num_envs, auto_commit=False,
                               safety_margin=cfg.safety_margin)
    sampler = ChronologicalSliceSampler(slice_len=cfg.seq_len,
                                        generator=torch.Generator().manual_seed(seed))
    wm, actor, critic = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
    learner = DreamerV3Learner(wm, actor, critic, capture=capture)
    player = DreamerPlayer(wm, actor, num_envs=num_envs)
    return AsyncDreamerCollector(env, storage, sampler, player, learner, cfg,
                                 total_frames=total_frames, record_trace=record_trace)


# ---------------------------------------------------------------------------------------------
# Fast pieces for the backend fuzz: an env whose observations say which step they are, a stub
# learner that checks every batch it gets on the device, and a stub player that keeps the
# version of the weights it acted with.


class CounterEnv(EnvBase):
    """N envs whose observation at replay row ``t`` is ``[t, env, episode step, 1]``, with a
    ``fast_step`` (the driver's GameBoyEnv path: no TensorDict round trip).

    Episodes end (``terminated``) after ``3 + (7 * env + episode) % 11`` steps; deferred reset
    like ``GameBoyEnv``: the step after a done one ignores the action and returns the first
    observation with ``is_first=True`` and reward 0. Reward = the action taken.
    """

    def __init__(self, num_envs: int = 4, device: str | torch.device = "cpu"):
        super().__init__(batch_size=torch.Size([num_envs]), device=device)
        n, dev = num_envs, self.device
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool, device=dev)
        self.observation_spec = Composite(
            obs=Unbounded(shape=(n, 4), device=dev), is_first=flag.clone(), shape=(n,),
            device=dev,
        )
        self.action_spec = Categorical(2, shape=(n,), dtype=torch.int64, device=dev)
        self.reward_spec = Unbounded(shape=(n, 1), device=dev)
        self.done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=(n,),
            device=dev,
        )
        self._torchrl_native_autoreset = True
        self._env = torch.arange(n, dtype=torch.float32, device=dev)
        self._t = torch.zeros((), dtype=torch.float32, device=dev)
        self._k = torch.zeros(n, dtype=torch.float32, device=dev)
        self._ep = torch.zeros(n, dtype=torch.float32, device=dev)
        self._pending = torch.zeros(n, dtype=torch.bool, device=dev)

    def _length(self):
        return 3 + torch.remainder(7 * self._env + self._ep, 11)

    def _out(self, reward, term, first):
        obs = torch.stack([self._t.expand_as(self._k), self._env, self._k,
                           torch.ones_like(self._k)], -1)
        no = torch.zeros_like(term)
        return TensorDict(
            {"obs": obs, "reward": reward.reshape(-1, 1), "terminated": term.reshape(-1, 1),
             "truncated": no.reshape(-1, 1), "done": term.reshape(-1, 1).clone(),
             "is_first": first.reshape(-1, 1)},
            batch_size=self.batch_size, device=self.device,
        )

    def _reset(self, tensordict=None, **kwargs):
        self._t.zero_()
        self._k.zero_()
        self._ep.zero_()
        self._pending.zero_()
        out = self._out(torch.zeros_like(self._k), self._pending.clone(),
                        torch.ones_like(self._pending))
        del out["reward"]
        return out

    def fast_step(self, action: torch.Tensor):
        first = self._pending.clone()
        self._t.add_(1)
        self._ep.add_(first.float())
        self._k.copy_(torch.where(first, torch.zeros_like(self._k), self._k + 1))
        term = (self._k >= self._length()) & ~first
        self._pending.copy_(term)
        reward = torch.where(first, torch.zeros_like(self._k), action.reshape(-1).float())
        return self._out(reward, term, first)

    def _step(self, tensordict):
        return self.fast_step(tensordict.get("action"))

    def _set_seed(self, seed):
        return seed


class RecordingSampler(ChronologicalSliceSampler):
    """A ``ChronologicalSliceSampler`` that keeps, for the learner, what the storage looked like
    when it drew the batch: ``(lo, hi, committed_t)`` and the starts it drew."""

    def sample(self, storage, batch_size):
        lo, hi = storage.sampleable_range()
        committed = storage.committed_t
        index, info = super().sample(storage, batch_size)
        self.last = (lo, hi, committed, info["start"])
        return index, info


class StubLearner(torch.nn.Module):
    """A learner with a real (tiny) gradient step that checks each ``[T, B]`` batch on the
    device, without a host sync: every sequence must be contiguous in ``t`` (no jump across the
    write pointer or the ring's seam), hold the rows the sampler meant (``t == start + k``: not
    overwritten), lie inside the sampleable range and at or below the commit mark seen at
    sampling. ``bad`` counts sequences that broke a rule, ``checked`` those seen."""

    def __init__(self, sampler: RecordingSampler, seq_len: int):
        super().__init__()
        self.sampler, self.seq_len = sampler, seq_len
        self.w = torch.nn.Parameter(torch.zeros(3))
        self.register_buffer("version", torch.zeros((), dtype=torch.int64))
        self.register_buffer("bad", torch.zeros((), dtype=torch.int64))
        self.register_buffer("checked", torch.zeros((), dtype=torch.int64))
        self.opt = torch.optim.SGD([self.w], lr=1e-3)

    def update(self, batch):
        lo, hi, committed, start = self.sampler.last
        obs = batch["obs"]  # [T, B, 4]
        t = obs[..., 0]
        ok = (t[1:] - t[:-1] == 1).all(0)
        k = torch.arange(t.shape[0], dtype=t.dtype, device=t.device).unsqueeze(-1)
        ok &= (t == start.to(t) + k).all(0)
        ok &= (t >= lo).all(0) & (t < hi).all(0) & (t <= committed).all(0)
        self.bad.add_((~ok).sum())
        self.checked.add_(ok.numel())
        loss = ((0.1 * obs[..., 1:] @ self.w) - batch["reward"]).pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.version.add_(1)
        return TensorDict({"loss": loss.detach()}, [])


class StubPlayer(torch.nn.Module):
    """Acts from a copy of the learner's weights and a recurrent state ``h`` (which the collector
    watches between windows); keeps, per act, the weights' version (a device tensor) next to the
    version the collector said the actor had (host)."""

    def __init__(self, collector_ref: list, num_envs: int):
        super().__init__()
        self.collector_ref = collector_ref
        self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)
        self.register_buffer("version", torch.zeros((), dtype=torch.int64))
        self.register_buffer("h", torch.zeros(num_envs, 3))
        self.acted: list[tuple[torch.Tensor, int]] = []

    def forward(self, td):
        self.acted.append((self.version.clone(), self.collector_ref[0].actor_version))
        self.h.mul_(0.5).add_(0.01 * td["obs"][..., 1:])
        action = ((td["obs"][..., 1:] + self.h) @ self.w > 0).long()
        return td.set("action", action)


def stub_weight_sync(player: StubPlayer, learner: StubLearner) -> None:
    with torch.no_grad():
        player.w.copy_(learner.w)
        player.version.copy_(learner.version)


def make_stub_collector(
    backend: str = "reference",
    num_envs: int = 4,
    capacity: int = 64,
    seed: int = 0,
    total_frames: int = 256,
    record_trace: bool = False,
    device: str = "cpu",
    **cfg_overrides,
) -> AsyncDreamerCollector:
    """``CounterEnv`` + ``StubLearner`` + ``StubPlayer``: the collector's choreography at
    a fraction of a millisecond per update (everything on ``device``)."""
    torch.manual_seed(seed)
    kw = dict(
        steps_per_rollout=8, commit_stride=4, seq_len=8, batch_size=4, replay_ratio=0.25,
        learning_starts=16, min_ready_steps=8, safety_margin=8, max_learner_steps_per_tick=4,
        log_every=2, backend=backend, seed=seed, timeout_s=30.0, device=device,
    )
    kw.update(cfg_overrides)
    cfg = AsyncCollectorConfig(**kw)
    env = CounterEnv(num_envs, device=device)
    storage = TimeMajorStorage(capacity, num_envs, auto_commit=False,
                               safety_margin=cfg.safety_margin, device=device)
    sampler = RecordingSampler(slice_len=cfg.seq_len,
                               generator=torch.Generator().manual_seed(seed))
    learner = StubLearner(sampler, cfg.seq_len).to(device)
    ref: list = []
    player = StubPlayer(ref, num_envs).to(device)
    c = AsyncDreamerCollector(env, storage, sampler, player, learner, cfg,
                              total_frames=total_frames, weight_sync=stub_weight_sync,
                              record_trace=record_trace)
    ref.append(c)
    return c
