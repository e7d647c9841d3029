"""``DeferredResetGymEnv``: N gymnasium envs (through TorchRL's ``GymEnv``) with a deferred reset.

Dreamer's collector writes one replay row per step and needs envs that mark reset observations
with ``is_first`` and reset themselves on the step AFTER an episode ends (the final observation
is kept, as in :class:`~torchrl_dreamer.envs.GameBoyEnv`). TorchRL's ``GymEnv`` resets only when
asked and its batched wrappers step every env together, so this small ``EnvBase`` holds one
``GymEnv`` per env and, on each step, resets the envs whose previous step ended and steps the
others. It is what ``--task gym:CartPole-v1`` builds.

Example:
    >>> env = DeferredResetGymEnv("CartPole-v1", num_envs=4, seed=0)
    >>> td = env.rollout(600, break_when_any_done=False)
    >>> bool(td["next", "is_first"].any())  # episodes restarted on their own
    True
"""

from __future__ import annotations

from types import MappingProxyType

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

__all__ = ["DeferredResetGymEnv"]


class DeferredResetGymEnv(EnvBase):
    """Batch of ``GymEnv(env_id)`` with vector observations and discrete actions.

    Args:
        env_id: gymnasium id, e.g. ``"CartPole-v1"`` (needs ``pip install gymnasium``).
        num_envs: envs in the batch.
        seed: env ``i`` is seeded ``seed + i``.
        max_episode_steps: the env's time limit (read from gymnasium's registry when None).

    Attributes:
        success_rule: ``"truncated"``: an episode counts as a success when it reaches the time
            limit (CartPole: the pole stayed up), used by the trainer's episode statistics.
    """

    success_rule = "truncated"
    #: Training defaults of ``gym:`` tasks (measured on CartPole-v1, ``docs/learning_results.md``).
    train_defaults = MappingProxyType({"replay_ratio": 0.5})

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0,
                 max_episode_steps: int | None = None) -> None:
        from torchrl.envs import GymEnv

        super().__init__(batch_size=torch.Size([num_envs]))
        self.env_id, self.num_envs = env_id, int(num_envs)
        self.envs = [GymEnv(env_id, categorical_action_encoding=True) for _ in range(num_envs)]
        obs_spec = self.envs[0].observation_spec["observation"]
        act_spec = self.envs[0].action_spec
        if not isinstance(act_spec, Categorical):
            raise ValueError(f"{env_id}: only discrete action spaces are supported, got "
                             f"{type(act_spec).__name__}")
        if len(obs_spec.shape) != 1:
            raise ValueError(f"{env_id}: vector observations only, got shape {obs_spec.shape}")
        n, d = self.num_envs, obs_spec.shape[0]
        self.observation_spec = Composite(
            observation=Unbounded(shape=(n, d), dtype=torch.float32),
            is_first=Categorical(2, shape=(n, 1), dtype=torch.bool), shape=(n,))
        self.action_spec = Categorical(act_spec.space.n, shape=(n,), dtype=torch.int64)
        self.reward_spec = Unbounded(shape=(n, 1), dtype=torch.float32)
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool)
        self.done_spec = Composite(done=flag.clone(), terminated=flag.clone(),
                                   truncated=flag.clone(), shape=(n,))
        if max_episode_steps is None:
            import gymnasium

            max_episode_steps = gymnasium.spec(env_id).max_episode_steps or 0
        self.max_episode_steps = int(max_episode_steps)
        self._pending = torch.zeros(n, dtype=torch.bool)
        self._seed = int(seed)
        self._seeded = False
        # We reset ourselves (deferred): TorchRL's rollout/collectors must not call reset on done.
        self._torchrl_native_autoreset = True

    def _one_reset(self, i: int) -> torch.Tensor:
        if not self._seeded:
            self.envs[i].set_seed(self._seed + i)
        return self.envs[i].reset()["observation"].float()

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        n = self.num_envs
        mask = torch.ones(n, dtype=torch.bool)
        if tensordict is not None and "_reset" in tensordict.keys():
            mask = tensordict["_reset"].reshape(n)
        obs = torch.zeros(n, self.observation_spec["observation"].shape[-1])
        for i in range(n):
            if mask[i]:
                obs[i] = self._one_reset(i)
        self._seeded = True
        self._pending &= ~mask
        no = torch.zeros(n, 1, dtype=torch.bool)
        return TensorDict({"observation": obs, "is_first": mask.reshape(n, 1).clone(),
                           "done": no, "terminated": no.clone(), "truncated": no.clone()}, [n])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        n = self.num_envs
        action = tensordict["action"].reshape(n)
        obs = torch.zeros(n, self.observation_spec["observation"].shape[-1])
        reward = torch.zeros(n, 1)
        term = torch.zeros(n, 1, dtype=torch.bool)
        trunc = torch.zeros(n, 1, dtype=torch.bool)
        first = self._pending.clone()
        for i in range(n):
            if first[i]:
                obs[i] = self._one_reset(i)
                continue
            td = TensorDict({"action": action[i]}, [])
            out = self.envs[i].step(td)["next"]
            obs[i] = out["observation"].float()
            reward[i] = out["reward"].float()
            term[i] = out["terminated"]
            trunc[i] = out["truncated"]
        done = term | trunc
        self._pending = done.reshape(n).clone()
        return TensorDict({"observation": obs, "reward": reward, "done": done,
                           "terminated": term, "truncated": trunc,
                           "is_first": first.reshape(n, 1)}, [n])

    def _set_seed(self, seed: int | None) -> None:
        self._seed = int(seed or 0)
        self._seeded = False

    def _native_autoreset_set_invalid_next_observation(self, tensordict):
        return {}
