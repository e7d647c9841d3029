"""Synthetic env steps that follow our row alignment (deferred reset), for demos, tests, benchmarks.

A real env is not needed to exercise the replay: :class:`SyntheticSteps` produces rows exactly as
the deferred-reset envs do (``docs/row_alignment.md``): an episode ends on a row with
``terminated`` or ``truncated`` (the real final observation); the next row of that env is the reset
observation with ``is_first=True``, ``reward=0`` and ``episode_id + 1``. Pixels hold
``t % 256`` so a gathered sequence shows which steps it came from.
"""

from __future__ import annotations

import torch

from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE


class SyntheticSteps:
    """Generates Dreamer-schema rows (``[num_envs]`` dicts) with random episode ends.

    Args:
        num_envs: envs per row.
        generator: drives rewards and episode ends (explicit for reproducibility).

    Keyword Args:
        end_prob: per-step chance that an env's episode ends on this row.
        truncate_frac: fraction of those ends that are truncations (else true terminals).
        pixel_shape: per-env pixel shape (packed2 ``[1, 72, 20]`` by default).
        num_actions: actions are int64 indices in ``[0, num_actions)``.
        device: where the tensors are made.

    Example:
        >>> steps = SyntheticSteps(16, torch.Generator().manual_seed(0))
        >>> row = steps.step()
        >>> bool(row["is_first"].all())  # the very first row starts every episode
        True
    """

    def __init__(
        self,
        num_envs: int,
        generator: torch.Generator,
        *,
        end_prob: float = 0.05,
        truncate_frac: float = 0.3,
        pixel_shape: tuple[int, ...] = PACKED2_SHAPE,
        num_actions: int = 8,
        device: torch.device | str = "cpu",
    ) -> None:
        if not isinstance(generator, torch.Generator):
            raise TypeError("SyntheticSteps needs an explicit torch.Generator.")
        self.num_envs = int(num_envs)
        self.generator = generator
        self.end_prob = float(end_prob)
        self.truncate_frac = float(truncate_frac)
        self.pixel_shape = tuple(pixel_shape)
        self.num_actions = int(num_actions)
        self.device = torch.device(device)
        self.t = 0
        self._pending_reset = torch.ones(self.num_envs, dtype=torch.bool)
        self._episode_id = torch.full((self.num_envs,), -1, dtype=torch.int32)

    def step_pixels(self, t: int | None = None) -> torch.Tensor:
        """Pixels of row ``t`` (default: the next row), for rendering into ``obs_slot``."""
        return self._pixels(self.t if t is None else int(t), self.device)

    def _pixels(self, t: int, device: torch.device) -> torch.Tensor:
        return torch.full(
            (self.num_envs, *self.pixel_shape), t % 256, dtype=torch.uint8, device=device
        )

    def step(self) -> dict[str, torch.Tensor]:
        """The next row (every field ``[num_envs, ...]``)."""
        n, g = self.num_envs, self.generator
        first = self._pending_reset.clone()
        self._episode_id += first.int()
        u = torch.rand(n, generator=g)
        ends = (u < self.end_prob) & ~first
        trunc = ends & (torch.rand(n, generator=g) < self.truncate_frac)
        term = ends & ~trunc
        reward = torch.randn(n, generator=g).masked_fill_(first, 0.0)
        action = torch.randint(self.num_actions, (n,), generator=g)
        self._pending_reset = ends
        row = {
            "pixels": self._pixels(self.t, torch.device("cpu")),
            "action": action,
            "reward": reward,
            "is_first": first,
            "continue_": (~term).float(),
            "terminated": term,
            "truncated": trunc,
            "episode_id": self._episode_id.clone(),
        }
        self.t += 1
        if self.device.type != "cpu":
            row = {k: v.to(self.device) for k, v in row.items()}
        return row
