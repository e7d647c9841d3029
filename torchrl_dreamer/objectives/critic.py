"""``DreamerV3CriticLoss`` and the slow (EMA) critic.

Loss: ``mean(w[:-1] * (-log p(R) - reg * log p(sg(slow_critic.mean))))`` over the imagined
states ``[:-1]`` with two-hot (symlog) distributions; the slow critic is an EMA copy
(``tau = 0.02``) hard-copied at the first update.

Why our own EMA instead of ``torchrl.objectives.SoftUpdate``: ``SoftUpdate`` works on a
LossModule's functional ``target_*_params`` (``convert_to_functional``), which would turn our
plain ``nn.Module`` critic into a functional call on every forward; a plain module copy plus one
``torch._foreach_lerp_`` is cheaper, graph-friendly and makes the step-0 hard copy explicit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.objectives import LossModule

from torchrl_dreamer.modules.functional import replay_lambda_returns
from torchrl_dreamer.modules.heads import DreamerV3Critic
from torchrl_dreamer.objectives.config import DreamerV3LossConfig

__all__ = ["DreamerV3CriticLoss", "SlowCritic"]


class SlowCritic(nn.Module):
    """EMA copy of a critic: ``update()`` hard-copies on the first call, then lerps by ``tau``.

    Example:
        >>> critic = DreamerV3Critic(8, units=8, layers=1)
        >>> slow = SlowCritic(critic, tau=0.02)
        >>> slow.update()  # step 0: hard copy
        >>> bool(torch.equal(slow.module.out.weight, critic.out.weight))
        True
    """

    def __init__(self, critic: DreamerV3Critic, tau: float = 0.02, every: int = 1) -> None:
        super().__init__()
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau}")
        self.__dict__["source"] = critic  # not a submodule: its params belong to the critic
        self.module = copy.deepcopy(critic).requires_grad_(False)
        self.tau, self.every = tau, every
        device = next(critic.parameters()).device
        self.register_buffer("count", torch.zeros((), dtype=torch.long, device=device))
        self._calls = 0

    @torch.no_grad()
    def update(self) -> None:
        """Hard copy at the first call, then ``slow += tau (fast - slow)`` every ``every`` calls."""
        src = [p.detach() for p in self.source.parameters()]
        dst = list(self.module.parameters())
        if self._calls == 0:
            torch._foreach_copy_(dst, src)
        elif self._calls % self.every == 0:
            torch._foreach_lerp_(dst, src, self.tau)
        self._calls += 1
        self.count.add_(1)

    def resume_from_count(self) -> None:
        """Continue the update schedule from the ``count`` buffer (the updates done so far, as
        saved in a state dict): a restored slow critic must not be hard-copied again at the
        next update. Loading a state dict calls it; a trainer restoring a run may call it
        again."""
        self._calls = int(self.count)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.resume_from_count()

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """Slow-critic two-hot logits."""
        return self.module(latent)


class DreamerV3CriticLoss(LossModule):
    """Critic loss of DreamerV3 (2023 / sheeprl semantics) as a TorchRL ``LossModule``.

    Input: the actor loss's ``imagination`` TensorDict with ``latent [H+1, N, L]``,
    ``lambda_return [H, N]`` and ``weight [H+1, N]`` (keys via ``set_keys``); an optional
    ``critic_logits [H+1, N, bins]`` carrying its graph is used instead of recomputing the
    critic on ``latent`` (it must come from this critic's current parameters).
    With ``replay_value_scale`` and the imagination's ``replay`` rows, ``loss_critic`` adds
    that weight times :meth:`replay_loss` (metric ``critic_replay_loss``).
    Output keys: ``loss_critic``; metrics ``value_mean``, ``slow_value_mean``.
    """

    @dataclass
    class _AcceptedKeys:
        """Configurable input keys of the imagination TensorDict."""

        latent: str = "latent"
        lambda_return: str = "lambda_return"
        weight: str = "weight"
        critic_logits: str = "critic_logits"
        replay: str = "replay"

    default_keys = _AcceptedKeys
    tensor_keys: _AcceptedKeys
    out_keys = ["loss_critic", "value_mean", "slow_value_mean"]

    def __init__(self, critic: DreamerV3Critic, config: DreamerV3LossConfig | None = None):
        super().__init__()
        self.critic = critic
        self.config = config or DreamerV3LossConfig()
        self.slow_critic = SlowCritic(
            critic, self.config.slow_critic_tau, self.config.slow_critic_every
        )

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        pass

    @property
    def in_keys(self):
        k = self.tensor_keys
        return [k.latent, k.lambda_return, k.weight]

    def update_slow_critic(self) -> None:
        """Advance the slow critic (call once before each gradient step)."""
        self.slow_critic.update()

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Critic loss and value metrics from the actor loss's imagination TensorDict."""
        keys, cfg = self.tensor_keys, self.config
        latent = tensordict.get(keys.latent).detach()[:-1]
        target = tensordict.get(keys.lambda_return).detach()
        weight = tensordict.get(keys.weight).detach()[:-1]
        logits = tensordict.get(keys.critic_logits, None)
        if logits is None or not logits.requires_grad:
            logits = self.critic(latent)
        else:
            logits = logits[:-1]
        with torch.no_grad():
            slow_mean = self.critic.mean(self.slow_critic(latent))
        loss = (weight * self._nll(logits, target, slow_mean)).mean()
        out = {"value_mean": self.critic.mean(logits.detach()).mean(),
               "slow_value_mean": slow_mean.mean()}
        replay = tensordict.get(keys.replay, None)
        if cfg.replay_value_scale and replay is not None:
            K, B = replay.batch_size  # imagination starts at the replay states: reuse
            replay_loss = self.replay_loss(
                replay, logits[0].reshape(K, B, -1)[:-1], slow_mean[0].reshape(K, B)[:-1])
            loss = loss + cfg.replay_value_scale * replay_loss
            out["critic_replay_loss"] = replay_loss.detach()
        return TensorDict({"loss_critic": loss, **out}, [])

    def _nll(self, logits: torch.Tensor, target: torch.Tensor,
             slow_mean: torch.Tensor) -> torch.Tensor:
        """``-log p(target) - reg * log p(slow critic's mean)`` per state."""
        log_p = logits.float().log_softmax(-1)
        nll = -self.critic.log_prob(log_p, target, normalized=True)
        if self.config.slow_critic_reg:
            nll = nll - self.config.slow_critic_reg * self.critic.log_prob(log_p, slow_mean, True)
        return nll

    def replay_loss(self, replay: TensorDictBase, logits: torch.Tensor | None = None,
                    slow_mean: torch.Tensor | None = None) -> torch.Tensor:
        """The critic's loss on replay rows ``[K, B]`` (``latent``, ``reward``, ``continue_``,
        ``is_first``, ``boot``): towards
        :func:`~torchrl_dreamer.modules.functional.replay_lambda_returns`, with the slow
        critic's regulariser, over rows whose next transition is in the data (research hook).
        ``logits`` / ``slow_mean`` ``[K-1, B, ...]``: the critic's and the slow critic's outputs
        on ``latent[:-1]`` when already computed (the imagination's first states are these)."""
        cfg = self.config
        target, weight = replay_lambda_returns(
            replay.get("reward"), replay.get("continue_"), replay.get("is_first"),
            replay.get("boot"), cfg.gamma, cfg.lmbda)
        latent = replay.get("latent").detach()[:-1]
        if slow_mean is None:
            with torch.no_grad():
                slow_mean = self.critic.mean(self.slow_critic(latent))
        if logits is None:
            logits = self.critic(latent)
        nll = self._nll(logits, target.detach(), slow_mean)
        return (weight * nll).mean()
