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
    **cfg_overrides,
) -> AsyncDreamerCollector:
    """Real storage, sampler, player and learner (tiny preset) on ``LineWalkEnv``."""
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
    learner = DreamerV3Learner(wm, actor, critic)
    player = DreamerPlayer(wm, actor, num_envs=num_envs)
    return AsyncDreamerCollector(env, storage, sampler, player, learner, cfg,
                                 total_frames=total_frames, record_trace=record_trace)
