"""Replay-ratio schedulers: how many gradient steps a count of policy steps buys.

:class:`Ratio` reproduces sheeprl's ``Ratio`` (itself danijar's ``when.Ratio``) call by call, and
:class:`UpdateSchedule` adds sheeprl's ``learning_starts`` prefill and ``train_starts`` alignment on
top, so that a run here owes exactly the gradient steps a sheeprl run with the same settings takes.

Why not TorchRL's :class:`~torchrl.trainers.algorithms.DreamerV3UpdateRatio`: its first call always
returns 1 (danijar's convention), whereas sheeprl's first call returns ``int(step * ratio)`` and
handles ``pretrain_steps``. ``Ratio(r, first_call="one")`` reproduces TorchRL's schedule exactly
(tested against it), so either convention is available under one API.

A *policy step* is one action of one environment (``num_envs`` policy steps per vectorised env
step), without action repeat; the replay ratio is gradient steps per policy step.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, Literal

from torchrl_dreamer.collectors.defaults import invalid

__all__ = ["Ratio", "UpdateSchedule"]


class Ratio:
    """Gradient steps owed for a cumulative count of policy steps (sheeprl / Hafner semantics).

    Each call takes the cumulative policy-step count and returns how many gradient steps to take
    now; the fractional remainder is carried, so over a run the total is ``ratio`` × steps.

    - first call: ``int(step * ratio)`` (``first_call="floor"``, sheeprl) or ``1``
      (``first_call="one"``, danijar / TorchRL ``DreamerV3UpdateRatio``);
    - later calls: ``rep = int((step - prev) * ratio)``; ``prev += rep / ratio``.

    ``pretrain_steps`` applies to the first call only:

    - ``pretrain_mode="replace"`` (sheeprl 0.5.x): the first call returns
      ``int(min(pretrain_steps, step) * ratio)``; a ``pretrain_steps`` above ``step`` is capped with
      a warning (so with ``num_envs`` as first step it is effectively a no-op);
    - ``pretrain_mode="add"`` (sheeprl 0.8.4): ``pretrain_steps`` extra steps on top of the first
      call's ratio steps.

    Args:
        ratio: gradient steps per policy step (``>= 0``; 0 disables training).
        pretrain_steps: extra/replacement gradient steps on the first call (``>= 0``).
        first_call: ``"floor"`` (sheeprl) or ``"one"`` (danijar / TorchRL).
        pretrain_mode: ``"replace"`` (sheeprl 0.5.x) or ``"add"`` (sheeprl 0.8.4).

    Examples:
        >>> r = Ratio(0.5)
        >>> [r(s) for s in (4, 8, 12, 13, 14, 16)]
        [2, 2, 2, 0, 1, 1]
        >>> r = Ratio(0.25, first_call="one")
        >>> [r(s) for s in (4, 6, 8)]
        [1, 0, 1]
    """

    def __init__(
        self,
        ratio: float,
        pretrain_steps: int = 0,
        *,
        first_call: Literal["floor", "one"] = "floor",
        pretrain_mode: Literal["replace", "add"] = "replace",
    ) -> None:
        if not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio < 0:
            raise invalid("Ratio", "ratio", ratio,
                          "must be a finite number >= 0 (gradient steps per policy step).")
        if int(pretrain_steps) != pretrain_steps or pretrain_steps < 0:
            raise invalid("Ratio", "pretrain_steps", pretrain_steps, "must be an integer >= 0.")
        if first_call not in ("floor", "one"):
            raise invalid("Ratio", "first_call", first_call,
                          "must be 'floor' (sheeprl) or 'one' (danijar/TorchRL).")
        if pretrain_mode not in ("replace", "add"):
            raise invalid("Ratio", "pretrain_mode", pretrain_mode,
                          "must be 'replace' (sheeprl 0.5.x) or 'add' (sheeprl 0.8.4).")
        self.ratio = float(ratio)
        self.pretrain_steps = int(pretrain_steps)
        self.first_call = first_call
        self.pretrain_mode = pretrain_mode
        self._prev: float | None = None

    def __call__(self, step: int) -> int:
        """Gradient steps to take now, given the cumulative policy-step count ``step``."""
        if step < 0:
            raise ValueError(f"Ratio: step must be >= 0 (a cumulative count), got {step}.")
        if self.ratio == 0:
            return 0
        if self._prev is None:
            self._prev = float(step)
            repeats = 1 if self.first_call == "one" else int(step * self.ratio)
            if self.pretrain_steps > 0:
                if self.pretrain_mode == "add":
                    repeats += self.pretrain_steps
                else:
                    if step < self.pretrain_steps:
                        warnings.warn(
                            f"Ratio: pretrain_steps={self.pretrain_steps} is larger than the first "
                            f"step {step}; capping it to {step} (sheeprl 0.5.x behaviour).",
                            stacklevel=2,
                        )
                        self.pretrain_steps = int(step)
                    repeats = int(self.pretrain_steps * self.ratio)
            return repeats
        if step < self._prev:
            raise ValueError(
                f"Ratio: step went backwards ({step} < {self._prev}); pass the cumulative "
                "policy-step count, or call reset()."
            )
        repeats = int((step - self._prev) * self.ratio)
        self._prev += repeats / self.ratio
        return repeats

    def reset(self, step: int | None = None) -> None:
        """Forget progress: the next call is a first call (``step=None``) or counts from ``step``."""
        self._prev = None if step is None else float(step)

    def state_dict(self) -> dict[str, Any]:
        """Ratio, pretrain settings and carried progress (the fractional remainder included)."""
        return {
            "ratio": self.ratio,
            "pretrain_steps": self.pretrain_steps,
            "first_call": self.first_call,
            "pretrain_mode": self.pretrain_mode,
            "prev": self._prev,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.ratio = float(state_dict["ratio"])
        self.pretrain_steps = int(state_dict["pretrain_steps"])
        self.first_call = state_dict["first_call"]
        self.pretrain_mode = state_dict["pretrain_mode"]
        self._prev = state_dict["prev"]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(ratio={self.ratio}, pretrain_steps={self.pretrain_steps}, "
            f"first_call={self.first_call!r}, pretrain_mode={self.pretrain_mode!r})"
        )


class UpdateSchedule:
    """sheeprl's training schedule: random prefill, then :class:`Ratio` from ``train_starts``.

    Call it with the cumulative policy-step count after each vectorised step (or after any number
    of them: the remainder is carried). ``policy_steps_per_iter`` is ``num_envs × world_size``.

    - ``version="0.8"`` (sheeprl 0.8.4): training starts at iteration
      ``train_starts = max(learning_starts // ppi, seq_len, 1)`` and ``pretrain_steps`` are added
      on the first training call;
    - ``version="0.5"`` (sheeprl 0.5.x): training starts at iteration ``learning_starts // ppi``
      and ``pretrain_steps`` replace the first call's count (capped).

    From then on ``Ratio(replay_ratio)(policy_step - (train_starts - 1) * ppi)`` gradient steps are
    owed. Iteration ``i`` ends at policy step ``i * ppi``.

    Args:
        replay_ratio: gradient steps per policy step.
        learning_starts: policy steps of random prefill.
        policy_steps_per_iter: ``num_envs`` (× world size).
        seq_len: sequence length (``0.8`` waits until every env holds that many steps).
        pretrain_steps: see :class:`Ratio`.
        version: ``"0.8"`` or ``"0.5"``.

    Examples:
        >>> s = UpdateSchedule(0.5, learning_starts=1024, policy_steps_per_iter=4, version="0.5")
        >>> s(1020), s(1024), s(1028)
        (0, 2, 2)
    """

    def __init__(
        self,
        replay_ratio: float,
        learning_starts: int,
        policy_steps_per_iter: int,
        *,
        seq_len: int = 1,
        pretrain_steps: int = 0,
        version: Literal["0.8", "0.5"] = "0.8",
    ) -> None:
        if policy_steps_per_iter < 1:
            raise invalid("UpdateSchedule", "policy_steps_per_iter", policy_steps_per_iter,
                          "must be >= 1 (num_envs).")
        if learning_starts < 0:
            raise invalid("UpdateSchedule", "learning_starts", learning_starts, "must be >= 0.")
        if version not in ("0.8", "0.5"):
            raise invalid("UpdateSchedule", "version", version, "must be '0.8' or '0.5'.")
        self.ppi = int(policy_steps_per_iter)
        self.version = version
        ls_iter = int(learning_starts) // self.ppi
        if version == "0.8":
            self.train_starts_iter = max(ls_iter, int(seq_len), 1)
            mode = "add"
        else:
            self.train_starts_iter = max(ls_iter, 1)
            mode = "replace"
        self.ratio = Ratio(replay_ratio, pretrain_steps, pretrain_mode=mode)

    @property
    def first_train_step(self) -> int:
        """The policy step at which the first gradient steps are owed."""
        return self.train_starts_iter * self.ppi

    def ratio_steps(self, policy_step: int) -> int:
        """Policy steps counted by the ratio at ``policy_step`` (0 before training starts)."""
        return max(0, policy_step - (self.train_starts_iter - 1) * self.ppi)

    def __call__(self, policy_step: int) -> int:
        """Gradient steps owed now at cumulative ``policy_step`` (0 during the prefill)."""
        if policy_step < self.first_train_step:
            return 0
        return self.ratio(self.ratio_steps(policy_step))

    def state_dict(self) -> dict[str, Any]:
        """Schedule constants and the inner :class:`Ratio` progress."""
        return {
            "ppi": self.ppi,
            "version": self.version,
            "train_starts_iter": self.train_starts_iter,
            "ratio": self.ratio.state_dict(),
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.ppi = int(state_dict["ppi"])
        self.version = state_dict["version"]
        self.train_starts_iter = int(state_dict["train_starts_iter"])
        self.ratio.load_state_dict(state_dict["ratio"])
