"""Recurrent state-space model of DreamerV3 (2023 design, sheeprl 0.8.4 semantics).

State: deterministic ``h`` ``[..., deter]`` and stochastic ``z`` ``[..., stoch * classes]``
(flattened one-hots). One step: ``x = MLP([z, a])``, ``h' = LayerNormGRU(x, h)``,
prior ``p(z'|h')``, posterior ``q(z'|h', e)``; logits get 1% unimix, samples are one-hot with
straight-through gradients.

Why not ``torchrl.modules.RSSMRolloutV3``: it is batch-major, resets to a *zero* state (no
learnable ``tanh`` initial state, no prior-mode ``z``), and offers a plain GRUCell or an RMSNorm
block GRU rather than the LayerNorm GRU. Speed choices (same maths as the reference): the
observation half of the posterior's first layer is applied to the whole sequence at once, and
priors are computed for all steps after the scan.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from torchrl_dreamer.modules.functional import (
    straight_through_from_probs,
    straight_through_mode,
    straight_through_sample,
    unimix_logits,
    unimix_probs,
)
from torchrl_dreamer.modules.init import hafner_init_, uniform_init_
from torchrl_dreamer.modules.layers import LN_EPS, MLP, LayerNormGRUCell

__all__ = ["RSSM"]


class _LatentHead(nn.Module):
    """``Linear(no bias) -> LN -> SiLU -> Linear`` producing ``[..., stoch, classes]`` logits."""

    def __init__(self, in_features: int, hidden: int, stoch: int, classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, hidden, bias=False)
        self.norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.out = nn.Linear(hidden, stoch * classes)
        self.stoch, self.classes = stoch, classes

    def tail(self, x: torch.Tensor) -> torch.Tensor:
        y = self.out(F.silu(self.norm(x)))
        return y.reshape(*y.shape[:-1], self.stoch, self.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(self.linear(x))


class RSSM(nn.Module):
    """LayerNorm-GRU RSSM with learnable ``tanh`` initial state and discrete latents.

    Args:
        action_dim: size of the (one-hot or continuous) action vector.
        embed_dim: size of the observation embedding.
        deter: GRU state size. hidden: MLP width. stoch, classes: latent shape (32x32).
        unimix: uniform mix of prior/posterior probabilities (0.01).

    Example:
        >>> rssm = RSSM(action_dim=4, embed_dim=16, deter=32, hidden=32, stoch=4, classes=4)
        >>> out = rssm.observe(torch.zeros(5, 2, 16), torch.zeros(5, 2, 4),
        ...                    torch.ones(5, 2, dtype=torch.bool))
        >>> out["h"].shape, out["post_logits"].shape
        (torch.Size([5, 2, 32]), torch.Size([5, 2, 4, 4]))
    """

    def __init__(
        self,
        action_dim: int,
        embed_dim: int,
        deter: int = 512,
        hidden: int = 512,
        stoch: int = 32,
        classes: int = 32,
        unimix: float = 0.01,
    ) -> None:
        super().__init__()
        self.action_dim, self.embed_dim = action_dim, embed_dim
        self.deter, self.hidden, self.stoch, self.classes = deter, hidden, stoch, classes
        self.stoch_flat = stoch * classes
        self.unimix = unimix
        self.input_mlp = MLP(self.stoch_flat + action_dim, hidden, 1)
        self.gru = LayerNormGRUCell(hidden, deter)
        self.prior = _LatentHead(deter, hidden, stoch, classes)
        # posterior input is [h, embed]; its first weight is split by column in ``observe``.
        self.posterior = _LatentHead(deter + embed_dim, hidden, stoch, classes)
        self.h0 = nn.Parameter(torch.zeros(deter))
        hafner_init_(self)
        uniform_init_(self.prior.out, 1.0)
        uniform_init_(self.posterior.out, 1.0)

    @property
    def latent_dim(self) -> int:
        """Size of the feature ``[z, h]`` fed to heads and the actor."""
        return self.stoch_flat + self.deter

    # ------------------------------------------------------------------ pieces
    def prior_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Unimixed prior log-probs ``[..., stoch, classes]`` from ``h``."""
        return unimix_logits(self.prior(h), self.unimix)

    def posterior_logits(self, h: torch.Tensor, embed: torch.Tensor) -> torch.Tensor:
        """Unimixed posterior log-probs from ``h`` and the observation embedding."""
        return unimix_logits(self.posterior(torch.cat([h, embed], -1)), self.unimix)

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """Straight-through one-hot sample, flattened to ``[..., stoch * classes]``."""
        return straight_through_sample(logits).flatten(-2)

    def sample_probs(self, probs: torch.Tensor) -> torch.Tensor:
        """Like :meth:`sample` but from (unimixed) probabilities (skips a softmax)."""
        return straight_through_from_probs(probs).flatten(-2)

    def recurrent(self, z: torch.Tensor, action: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """GRU step ``h' = GRU(MLP([z, a]), h)``."""
        return self.gru(self.input_mlp(torch.cat([z, action.to(z.dtype)], -1)), h)

    def initial_state(
        self, batch_shape: tuple[int, ...] | torch.Size
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tanh(h0), prior mode)`` expanded to ``batch_shape`` (fresh, writable tensors)."""
        h = torch.tanh(self.h0)
        z = straight_through_mode(self.prior_logits(h)).flatten(-2)
        shape = tuple(batch_shape)
        return h.expand(*shape, -1).clone(), z.expand(*shape, -1).clone()

    def img_step(
        self, h: torch.Tensor, z: torch.Tensor, action: torch.Tensor, sample: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One imagination step: returns ``(h', z')`` with ``z'`` from the prior."""
        h = self.recurrent(z, action, h)
        probs = unimix_probs(self.prior(h), self.unimix)
        return h, straight_through_from_probs(probs, sample).flatten(-2)

    def obs_step(
        self,
        h: torch.Tensor,
        z: torch.Tensor,
        action: torch.Tensor,
        embed: torch.Tensor,
        is_first: torch.Tensor | None = None,
        sample: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One filtering step (resetting where ``is_first``): returns ``(h', z', post_logits)``."""
        if is_first is not None:
            h, z, action = self._reset(h, z, action, is_first)
        h = self.recurrent(z, action, h)
        logits = self.posterior_logits(h, embed)
        z = self.sample(logits) if sample else straight_through_mode(logits).flatten(-2)
        return h, z, logits

    def _reset(self, h, z, action, is_first):
        m = is_first.to(h.dtype).unsqueeze(-1)
        h0, z0 = self.initial_state(())
        keep = 1.0 - m
        return h * keep + h0 * m, z * keep + z0 * m, action * keep.to(action.dtype)

    # ------------------------------------------------------------------ scan
    def observe(
        self,
        embed: torch.Tensor,
        prev_action: torch.Tensor,
        is_first: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Time-major posterior scan over ``[T, B]``.

        Args:
            embed: ``[T, B, E]`` observation embeddings.
            prev_action: ``[T, B, A]``; row ``t`` is the action taken *before* ``o_t``.
            is_first: ``[T, B]`` bool; at flagged steps the action is zeroed, ``h`` becomes
                ``tanh(h0)`` and ``z`` the prior mode of that ``h`` before the step.
            state: optional ``(h, z)`` ``[B, ...]`` to start from (default: initial state).

        Returns:
            dict with ``h``, ``z`` ``[T, B, ...]``, ``post_logits`` and ``prior_logits``
            ``[T, B, stoch, classes]`` (unimixed log-probs).
        """
        T, B = embed.shape[:2]
        if prev_action.shape[:2] != (T, B) or is_first.shape[:2] != (T, B):
            raise ValueError(
                f"embed {tuple(embed.shape)}, prev_action {tuple(prev_action.shape)} and is_first "
                f"{tuple(is_first.shape)} must share the time-major [T, B] leading dims"
            )
        h, z = self.initial_state((B,)) if state is None else state
        h0, z0 = self.initial_state(())
        w = self.posterior.linear.weight
        e_proj = F.linear(embed, w[:, self.deter :])  # whole sequence at once
        w_h = w[:, : self.deter]
        mask = is_first.to(h.dtype).unsqueeze(-1)
        keep = 1.0 - mask
        actions = prev_action.to(h.dtype) * keep
        # reset values depend only on parameters: precompute the mixed-in part.
        h_reset = h0 * mask
        z_reset = z0 * mask
        hs, zs, logits = [], [], []
        for t in range(T):
            h = h * keep[t] + h_reset[t]
            z = z * keep[t] + z_reset[t]
            h = self.recurrent(z, actions[t], h)
            probs = unimix_probs(self.posterior.tail(F.linear(h, w_h) + e_proj[t]), self.unimix)
            z = self.sample_probs(probs)
            hs.append(h)
            zs.append(z)
            logits.append(probs)
        h_all = torch.stack(hs, 0)
        return {
            "h": h_all,
            "z": torch.stack(zs, 0),
            "post_logits": torch.stack(logits, 0).log(),
            "prior_logits": self.prior_logits(h_all),
        }

    def imagine(
        self,
        h: torch.Tensor,
        z: torch.Tensor,
        policy,
        horizon: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Roll the prior forward ``horizon`` steps from ``(h, z)`` ``[N, ...]`` under ``policy``.

        ``policy(latent) -> action`` is called on ``[z, h]`` of states ``0..H-1`` (the action
        of the last state is never used by the losses, so it is not computed).

        Returns:
            ``latents [H+1, N, latent_dim]`` and ``actions [H, N, A]`` (action ``t`` leads from
            state ``t`` to ``t + 1``).
        """
        latent = torch.cat([z, h], -1)
        latents, actions = [latent], []
        for _ in range(horizon):
            a = policy(latent)
            actions.append(a)
            h, z = self.img_step(h, z, a)
            latent = torch.cat([z, h], -1)
            latents.append(latent)
        return torch.stack(latents, 0), torch.stack(actions, 0)
