"""Small real pieces shared by the Ray tests: a deferred-reset toy env and Dreamer factories.

``TickEnv`` is a TorchRL env (``batch_size=[N]``) that returns ``is_first`` and resets itself on
the step after an episode ends, like ``GameBoyEnv``, but costs microseconds per step. The factories
build the real tiny ``DreamerPlayer`` / ``DreamerV3Learner`` for its vector observation. They are
module-level (picklable by value on Ray workers, see ``register_for_ray``).
"""

from __future__ import annotations

import sys

import torch
from tensordict import TensorDict
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

OBS_DIM = 4
ACTIONS = 3


class TickEnv(EnvBase):
    """N counters: action 1 adds +1 reward; episodes last ``length`` steps (truncated), deferred
    reset with ``is_first``. The observation encodes env index, time and last action, so rows of
    different envs and steps are distinguishable in replay checks."""

    def __init__(self, num_envs: int = 2, length: int = 5, seed: int = 0):
        super().__init__(batch_size=torch.Size([num_envs]), device="cpu")
        n = num_envs
        self.length = length
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool)
        self.observation_spec = Composite(
            obs=Unbounded(shape=(n, OBS_DIM)), is_first=flag.clone(), shape=(n,)
        )
        self.action_spec = Categorical(ACTIONS, shape=(n,), dtype=torch.int64)
        self.reward_spec = Unbounded(shape=(n, 1))
        self.done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=(n,)
        )
        self._torchrl_native_autoreset = True
        self._t = torch.zeros(n, dtype=torch.long)
        self._last = torch.zeros(n, dtype=torch.long)
        self._pending = torch.zeros(n, dtype=torch.bool)

    def _obs(self):
        n = self.batch_size[0]
        return torch.stack([torch.arange(n, dtype=torch.float32), self._t.float(),
                            self._last.float(), torch.ones(n)], -1)

    def _out(self, reward, trunc, first):
        no = torch.zeros_like(trunc)
        return TensorDict(
            {"obs": self._obs(), "reward": reward.reshape(-1, 1).float(),
             "terminated": no.reshape(-1, 1), "truncated": trunc.reshape(-1, 1),
             "done": trunc.reshape(-1, 1), "is_first": first.reshape(-1, 1)},
            batch_size=self.batch_size,
        )

    def _reset(self, tensordict=None, **kwargs):
        self._t.zero_()
        self._last.zero_()
        self._pending.zero_()
        n = self.batch_size[0]
        out = self._out(torch.zeros(n), torch.zeros(n, dtype=torch.bool),
                        torch.ones(n, dtype=torch.bool))
        del out["reward"]
        return out

    def _step(self, tensordict):
        action = tensordict.get("action").reshape(-1)
        first = self._pending.clone()
        self._t = torch.where(first, 0, self._t + 1)
        self._last = torch.where(first, 0, action)
        trunc = (self._t >= self.length) & ~first
        reward = torch.where(first, 0.0, (action == 1).float())
        self._pending = trunc
        return self._out(reward, trunc, first)

    def _set_seed(self, seed):
        return seed


class TickFactory:
    """Picklable factories: ``env()``, ``policy(env)`` (tiny DreamerPlayer), ``learner()``."""

    def __init__(self, num_envs: int = 2, length: int = 5, random_policy: bool = False):
        self.num_envs, self.length, self.random_policy = num_envs, length, random_policy

    def env(self):
        return TickEnv(self.num_envs, self.length)

    def _nets(self):
        from torchrl_dreamer.modules import make_dreamer

        torch.manual_seed(0)
        return make_dreamer("tiny", {"obs": ("vector", OBS_DIM)}, action_dim=ACTIONS)

    def policy(self, env):
        from torchrl_dreamer.modules import DreamerPlayer

        wm, actor, _ = self._nets()
        return DreamerPlayer(wm, actor, num_envs=int(env.batch_size[0]))

    def learner(self):
        from torchrl_dreamer.objectives import DreamerV3Learner

        return DreamerV3Learner(*self._nets())


def register_for_ray() -> None:
    """Lets Ray workers unpickle this module's classes by value (the test dir is not importable
    there)."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
