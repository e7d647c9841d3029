"""The actor's inner step: act, write one replay row for all envs, step the env.

Row alignment (``docs/row_alignment.md``): row ``t`` holds ``o_t``, the action ``a_t`` chosen after
seeing it, the reward ``r_t`` received on arriving at ``o_t`` and the flags of ``o_t``
(``is_first``, ``terminated``, ``truncated``, ``continue_ = 1 - terminated``, ``episode_id``).
So one step is: ``a_t = policy(o_t)``, write row ``t``, then ``o_{t+1}, r_{t+1}, ... = env(a_t)``.

The env may be any TorchRL :class:`~torchrl.envs.EnvBase` with ``batch_size=[N]`` whose steps
return ``is_first`` (a *deferred reset*: after a done step, the next step ignores the action and
returns the reset observation with ``is_first=True``), e.g.
:class:`~torchrl_dreamer.envs.GameBoyEnv`. When the env offers ``fast_step(action, obs_out=...)``
(GameBoyEnv does) the driver skips TorchRL's step wrapping and, for packed2 pixels, lets the
emulator render the next frame straight into the replay row (:meth:`TimeMajorStorage.obs_slot`).
TorchRL's collectors cannot do this: they own the rollout buffer and write ``("next", obs)``.

**An env on another device than the replay** (the hybrid run: consoles on the CPU cores, replay,
player and learner on the GPU): each env output is copied to the replay's device through
page-locked staging buffers, asynchronously, and each action back to the env's device; the
policy, the replay rows and the episode ids all live on the replay's device. A staging buffer is
refilled only after the copy out of it has finished (a CUDA event), so the next env step can
overlap nothing it must not.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, OneHot

from torchrl_dreamer.collectors.protocols import FastStepEnv
from torchrl_dreamer.data.one_hot import one_hot
from torchrl_dreamer.envs.task import BOOKKEEPING_KEYS

__all__ = ["EnvDriver"]

_FLAG_KEYS = ("is_first", "terminated", "truncated")
_NON_OBS = BOOKKEEPING_KEYS | {"reward", "done", "terminated", "truncated", "action"}


def _squeeze_last(x: torch.Tensor, n: int) -> torch.Tensor:
    """``[N, 1]`` -> ``[N]`` for scalar-per-env fields."""
    return x.reshape(n) if x.numel() == n else x


class EnvDriver:
    """Steps a batched env and writes one replay row per env step (the actor's hot loop).

    Args:
        env: TorchRL env, ``batch_size=[N]``, returning ``is_first`` (deferred reset).
        storage: a :class:`~torchrl_dreamer.data.TimeMajorStorage` with ``num_envs == N``.
        policy: ``td -> td`` writing ``"action"`` (e.g. :class:`~torchrl_dreamer.modules.DreamerPlayer`),
            reading the observation keys and ``is_first``.
        generator: draws the random prefill actions (explicit, for reproducibility).
        zero_copy: render packed2 pixels straight into the next replay row when possible.
        transfer: copy each env output to the storage's device through staging buffers
            (``None``: exactly when the env's device differs from the storage's; ``True`` on
            one device runs the same copies, which tests the path without a GPU).

    Example:
        The shipped maze; compiles the emulator kernel once.

        >>> from torchrl_dreamer.data import TimeMajorStorage, dreamer_schema
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> env = GameBoyEnv("maze", num_envs=2)
        >>> storage = TimeMajorStorage(16, 2, spec=dreamer_schema())
        >>> driver = EnvDriver(env, storage, policy=None, generator=torch.Generator().manual_seed(0))
        >>> _ = driver.reset()
        >>> driver.step(random=True)  # row 0 written (random actions); env advanced one step
        0
        >>> bool(storage.fields["is_first"][0].all())  # every episode starts at row 0
        True
    """

    def __init__(
        self,
        env: Any,
        storage: Any,
        policy: Any,
        generator: torch.Generator,
        *,
        zero_copy: bool = True,
        transfer: bool | None = None,
    ) -> None:
        bs = tuple(env.batch_size)
        if len(bs) != 1:
            raise ValueError(
                f"EnvDriver needs an env with batch_size [N] (one batch dim), got {list(bs)}; "
                "wrap several envs in one batched env (e.g. ParallelEnv) first."
            )
        self.num_envs = bs[0]
        if storage.num_envs != self.num_envs:
            raise ValueError(
                f"storage.num_envs={storage.num_envs} but the env has {self.num_envs} envs; build "
                f"TimeMajorStorage(capacity, num_envs={self.num_envs}, ...)."
            )
        if "is_first" not in env.observation_spec.keys():
            raise ValueError(
                "the env's observation_spec has no 'is_first': the collector needs envs that "
                "mark reset observations (deferred reset, e.g. GameBoyEnv, or TorchRL's "
                "InitTracker(init_key='is_first') on an env that resets itself)."
            )
        self.env, self.storage, self.policy = env, storage, policy
        self.generator = generator
        self.obs_keys = [k for k in env.observation_spec.keys(True, True)
                         if k not in _NON_OBS and not (isinstance(k, tuple) and k[0] == "next")]
        self.action_spec = env.action_spec
        self._fast = isinstance(env, FastStepEnv)
        self.device = torch.device(getattr(storage, "device", None) or env.device or "cpu")
        """Where the policy, the replay rows and the episode ids live (the storage's device)."""
        if transfer is None:
            transfer = torch.device(env.device or "cpu") != self.device
        self.transfer = bool(transfer)
        self._staging: dict[Any, torch.Tensor] = {}
        self._staged: Any = None  # CUDA event after the last copies out of the staging buffers
        self._zero_copy_key = None
        if (zero_copy and self._fast and not self.transfer
                and getattr(env, "pixels_format", None) == "packed2"):
            self._zero_copy_key = "pixels"
        self._episode_id = torch.full((self.num_envs,), -1, dtype=torch.int32, device=self.device)
        self._cur: TensorDictBase | None = None
        self._prefilled = None  # field of the next row already rendered in place (zero copy)
        self.rendered: torch.Tensor | None = None
        """The replay slot the env's last step rendered into natively (zero copy), else None."""
        self.env_steps = 0

    # ------------------------------------------------------------------ helpers
    def random_action(self) -> torch.Tensor:
        """A uniform random action for every env, drawn from ``generator``."""
        spec, n, g = self.action_spec, self.num_envs, self.generator
        if isinstance(spec, Categorical):
            k = spec.space.n
            a = torch.randint(k, (n,), generator=g, device=g.device)
            return a.to(spec.device, spec.dtype).reshape(spec.shape)
        if isinstance(spec, OneHot):
            k = spec.space.n
            a = torch.randint(k, (n,), generator=g, device=g.device)
            return one_hot(a, k, spec.dtype).to(spec.device).reshape(spec.shape)
        if isinstance(spec, Bounded):
            u = torch.rand(spec.shape, generator=g, device=g.device).to(spec.device)
            return (spec.space.low + u * (spec.space.high - spec.space.low)).to(spec.dtype)
        return spec.rand()

    def _row_value(self, key, cur: TensorDictBase, action: torch.Tensor, dst: torch.Tensor | None):
        n = self.num_envs
        if key == "action":
            val = action
        elif key == "continue_":
            term = cur.get("terminated", None)
            val = (torch.ones(n, device=action.device) if term is None
                   else 1.0 - _squeeze_last(term, n).float())
        elif key == "episode_id" and key not in cur.keys():
            val = self._episode_id
        elif key in cur.keys(True, True):
            val = cur.get(key)
        elif key in ("reward", "terminated", "truncated"):
            val = torch.zeros(n, device=action.device)
        else:
            raise KeyError(
                f"the replay schema has field {key!r} but the env step does not provide it; "
                f"env keys: {sorted(map(str, cur.keys(True, True)))}."
            )
        if dst is None:
            if key in ("reward", "continue_", "episode_id", *_FLAG_KEYS):
                val = _squeeze_last(val, n)
            if key in _FLAG_KEYS:
                val = val.bool()
            elif key == "reward" or key == "continue_":
                val = val.float()
            elif key == "episode_id":
                val = val.to(torch.int32)
            return val
        if val.shape != dst.shape:
            val = val.reshape(dst.shape)
        if val.dtype != dst.dtype:
            val = val.to(dst.dtype)
        return val

    def _row(self, cur: TensorDictBase, action: torch.Tensor) -> dict:
        st = self.storage
        if st.initialized:
            fields = st.fields
            keys = [k for k in fields if k != self._prefilled]
            return {k: self._row_value(k, cur, action, fields[k][0]) for k in keys}
        keys = [*self.obs_keys, "action", "reward", *_FLAG_KEYS, "continue_", "episode_id"]
        return {k: self._row_value(k, cur, action, None) for k in keys}

    def to_model(self, td: TensorDictBase) -> TensorDictBase:
        """``td`` (an env output) on the storage's device: as it is without :attr:`transfer`,
        else copied through this driver's staging buffers (page-locked when the target is a
        CUDA device, so the copy is asynchronous)."""
        if not self.transfer:
            return td
        if self._staged is not None:
            self._staged.synchronize()  # the previous copies out of the buffers are done
        pin = self.device.type == "cuda" and torch.cuda.is_available()
        out = TensorDict({}, batch_size=td.batch_size, device=self.device)
        for key, val in td.items(include_nested=True, leaves_only=True):
            buf = self._staging.get(key)
            if buf is None or buf.shape != val.shape or buf.dtype != val.dtype:
                buf = torch.empty(val.shape, dtype=val.dtype, pin_memory=pin)
                self._staging[key] = buf
            buf.copy_(val)
            out.set(key, buf.to(self.device, non_blocking=pin))
        if pin:
            self._staged = torch.cuda.Event()
            self._staged.record()
        return out

    @property
    def staging(self) -> dict[Any, torch.Tensor]:
        """The staging buffer of each env output key (empty without :attr:`transfer`)."""
        return dict(self._staging)

    def _to_env(self, action: torch.Tensor) -> torch.Tensor:
        return action.to(self.env.device) if self.transfer else action

    def _to_env_td(self, td: TensorDictBase) -> TensorDictBase:
        return td.to(self.env.device) if self.transfer else td

    def _track_episodes(self, cur: TensorDictBase) -> None:
        if "episode_id" not in cur.keys():
            first = _squeeze_last(cur.get("is_first"), self.num_envs).bool()
            self._episode_id += first.to(torch.int32)

    # ------------------------------------------------------------------ stepping
    def reset(self) -> TensorDictBase:
        """Resets every env; the first row written next has ``is_first=True`` everywhere."""
        td = self.to_model(self.env.reset())
        n = self.num_envs
        if "reward" not in td.keys():
            td.set("reward", torch.zeros(n, 1, device=td.device))
        for k in ("terminated", "truncated"):
            if k not in td.keys():
                td.set(k, torch.zeros(n, 1, dtype=torch.bool, device=td.device))
        self._track_episodes(td)
        self._cur = td
        return td

    def state_dict(self) -> dict[str, Any]:
        """The env output the actor acts on next, episode ids and the step count (CPU copies).

        With the replay ring and the env's own state this resumes the actor exactly.
        """
        cur = self.current
        return {
            "current": {k: v.detach().to("cpu", copy=True)
                        for k, v in cur.items(include_nested=True, leaves_only=True)},
            "episode_id": self._episode_id.detach().to("cpu", copy=True),
            "env_steps": self.env_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict`; re-renders a zero-copy pixel slot at the replay's head.

        Load the storage first: the next row's pixels are written into its head slot.
        """
        dev = self.device
        cur = {k: v.to(dev) for k, v in state["current"].items()}
        self._prefilled = None
        key, st = self._zero_copy_key, self.storage
        if key is not None and key in cur and st.initialized and key in st.fields:
            slot = st.obs_slot(st.total_steps, key)
            slot.copy_(cur[key].to(slot.device))
            cur[key] = slot
            self._prefilled = key
        self._cur = TensorDict(cur, batch_size=[self.num_envs], device=dev)
        self._episode_id = state["episode_id"].to(dev)
        self.env_steps = int(state["env_steps"])

    @property
    def started(self) -> bool:
        """Whether :meth:`reset` (or :meth:`load_state_dict`) gave the driver an env output."""
        return self._cur is not None

    @property
    def current(self) -> TensorDictBase:
        """The latest env output (``o_t`` and its flags), read by the policy next."""
        if self._cur is None:
            raise RuntimeError("EnvDriver.reset() must be called before stepping.")
        return self._cur

    def step(self, random: bool = False) -> int:
        """One env step for all envs: act, write row ``t`` (returned), advance the env."""
        cur = self.current
        if random:
            action = self.random_action()
        else:
            obs = TensorDict({k: cur.get(k) for k in (*self.obs_keys, "is_first")},
                             batch_size=cur.batch_size, device=cur.device)
            action = self.policy(obs).get("action")
        t = self.storage.write(self._row(cur, action))
        self._prefilled = None
        self.rendered = None
        env_action = self._to_env(action)
        if self._fast:
            key = self._zero_copy_key
            if key is not None and key in self.storage.fields:
                slot = self.storage.obs_slot(t + 1, key)
                nxt = self.env.fast_step(env_action, obs_out=slot)
                self._prefilled = key
                self.rendered = slot
            else:
                nxt = self.env.fast_step(env_action)
        else:
            td = self._to_env_td(cur).select(*self.obs_keys, "is_first").set("action", env_action)
            nxt = self.env.step(td).get("next")
        nxt = self.to_model(nxt)
        self._track_episodes(nxt)
        self._cur = nxt
        self.env_steps += 1
        return t
