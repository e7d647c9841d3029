"""Prediction heads on the latent ``[z, h]``: two-hot (reward, critic), continue, actor.

The two-hot heads use symlog-space bins ``linspace(-20, 20, 255)`` and a zero-initialised output
layer, so predictions are exactly 0 at initialisation (2023 design; see ``functional.py`` for why
TorchRL's 2024 two-hot is not used).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Independent, Normal

from torchrl_dreamer.data.one_hot import one_hot_actions  # re-exported
from torchrl_dreamer.modules.functional import (
    at_least_fp32,
    sample_one_hot,
    straight_through_mode,
    straight_through_sample,
    symlog_bins,
    two_hot_log_prob,
    two_hot_mean,
    unimix_logits,
    unimix_probs,
)
from torchrl_dreamer.modules.init import hafner_init_, uniform_init_
from torchrl_dreamer.modules.layers import MLP

__all__ = [
    "TwoHotHead",
    "ContinueHead",
    "DreamerV3Actor",
    "DreamerV3Critic",
    "one_hot_actions",
]


class TwoHotHead(nn.Module):
    """MLP + 255-bin two-hot output in symlog space (reward head, critic).

    Example:
        >>> head = TwoHotHead(16, units=32, layers=1)
        >>> head.mean(head(torch.randn(4, 16))).abs().max().item()
        0.0
    """

    def __init__(
        self, in_features: int, units: int = 512, layers: int = 2, num_bins: int = 255
    ) -> None:
        super().__init__()
        self.net = MLP(in_features, units, layers)
        self.out = nn.Linear(units, num_bins)
        self.register_buffer("bins", symlog_bins(num_bins), persistent=False)
        hafner_init_(self)
        uniform_init_(self.out, 0.0)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """Two-hot logits ``[..., num_bins]``."""
        return self.out(self.net(latent))

    def mean(self, logits: torch.Tensor) -> torch.Tensor:
        """Predicted raw value ``[...]``."""
        return two_hot_mean(logits, self.bins)

    def log_prob(
        self, logits: torch.Tensor, target: torch.Tensor, normalized: bool = False
    ) -> torch.Tensor:
        """Two-hot log-likelihood ``[...]`` of raw ``target`` (``normalized``: log-probs given)."""
        return two_hot_log_prob(logits, target, self.bins, normalized)


class DreamerV3Critic(TwoHotHead):
    """Critic ``v(latent)`` as a two-hot head (zero-initialised output)."""


class ContinueHead(nn.Module):
    """Bernoulli continue head; ``forward`` returns logits ``[...]``."""

    def __init__(self, in_features: int, units: int = 512, layers: int = 2) -> None:
        super().__init__()
        self.net = MLP(in_features, units, layers)
        self.out = nn.Linear(units, 1)
        hafner_init_(self)
        uniform_init_(self.out, 1.0)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """Continue logits ``[...]``."""
        return self.out(self.net(latent)).squeeze(-1)


class DreamerV3Actor(nn.Module):
    """Policy on the latent: discrete one-hot (1% unimix) or bounded continuous Normal.

    Discrete: ``forward`` returns unimixed log-probs ``[..., A]``; ``sample`` gives one-hot actions
    with straight-through gradients. Continuous: ``forward`` returns ``(mean, std)`` with
    ``mean = tanh(m)``, ``std = (max-min) sigmoid(s + 2) + min`` (0.9, 0.1); samples are clipped
    to magnitude 1 with a straight-through rescale.

    Example:
        >>> actor = DreamerV3Actor(16, action_dim=4, units=32, layers=1)
        >>> [round(x, 5) for x in actor.sample(actor(torch.randn(5, 16))).sum(-1).tolist()]
        [1.0, 1.0, 1.0, 1.0, 1.0]
    """

    def __init__(
        self,
        in_features: int,
        action_dim: int,
        units: int = 512,
        layers: int = 2,
        discrete: bool = True,
        unimix: float = 0.01,
        min_std: float = 0.1,
        max_std: float = 1.0,
        init_std: float = 2.0,
    ) -> None:
        super().__init__()
        self.action_dim, self.discrete, self.unimix = action_dim, discrete, unimix
        self.min_std, self.max_std, self.init_std = min_std, max_std, init_std
        self.net = MLP(in_features, units, layers)
        self.out = nn.Linear(units, action_dim if discrete else 2 * action_dim)
        hafner_init_(self)
        uniform_init_(self.out, 1.0)

    def forward(self, latent: torch.Tensor):
        """Discrete: unimixed log-probs ``[..., A]``; continuous: ``(mean, std)``."""
        y = self.out(self.net(latent))
        if self.discrete:
            return unimix_logits(y, self.unimix)
        mean, std = at_least_fp32(y).chunk(2, -1)
        std = (self.max_std - self.min_std) * torch.sigmoid(std + self.init_std) + self.min_std
        return torch.tanh(mean), std

    def sample(
        self, params, greedy: bool = False, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Action from ``forward``'s output (one-hot for discrete; clipped for continuous),
        drawn from ``generator`` (the global one when None)."""
        if self.discrete:
            if greedy:
                return straight_through_mode(params)
            return straight_through_sample(params, generator)
        mean, std = params
        if greedy:
            a = mean
        else:
            noise = torch.randn(mean.shape, dtype=mean.dtype, device=mean.device,
                                generator=generator)
            a = mean + std * noise
        return a / a.detach().abs().clamp_min(1.0)

    @torch.no_grad()
    def sample_action(self, latent: torch.Tensor) -> torch.Tensor:
        """A sampled action for ``latent`` without a graph (rollouts whose loss re-runs the actor).

        Discrete: a one-hot drawn from the unimixed probabilities directly (no log-probs, no
        straight-through terms); continuous: :meth:`act`.
        """
        if not self.discrete:
            return self.act(latent)
        probs = unimix_probs(self.out(self.net(latent)), self.unimix)
        return sample_one_hot(probs)

    def log_prob(self, params, action: torch.Tensor) -> torch.Tensor:
        """Log-probability ``[...]`` of ``action`` (one-hot for discrete)."""
        if self.discrete:
            return (params * action).sum(-1)
        return self.distribution(params).log_prob(action)

    def entropy(self, params) -> torch.Tensor:
        """Entropy ``[...]`` of the action distribution."""
        if self.discrete:
            return -(params.exp() * params).sum(-1)
        return self.distribution(params).entropy()

    def distribution(self, params) -> Independent:
        """Continuous-action distribution ``Independent(Normal(mean, std), 1)``."""
        if self.discrete:
            raise TypeError("distribution() is for continuous actors; use the log-probs directly")
        mean, std = params
        return Independent(Normal(mean, std), 1)

    def act(
        self, latent: torch.Tensor, greedy: bool = False, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """``sample(forward(latent))``: the action for ``latent`` (drawn from ``generator``)."""
        return self.sample(self(latent), greedy, generator)


