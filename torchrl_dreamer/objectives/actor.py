"""``DreamerV3ActorLoss``: imagination from posterior states, lambda-returns, REINFORCE/backprop.

Starts: every posterior state of the replay batch (detached). The policy is rolled out through
the prior for ``horizon`` steps (16 states). Rewards are the two-hot means, continues the
Bernoulli *mode* with the first replaced by the data's ``continue_``. Returns are
``lambda_returns(r[1:], v[1:], gamma * c[1:])``, weights ``cumprod(gamma c) / gamma``, and
advantages ``(R - v) / max(1, P95 - P5)`` with EMA percentiles (TorchRL's
``PercentileValueNorm`` with rate 0.01 reproduces the reference ``Moments`` sequence exactly, so
it is reused). Discrete actions use REINFORCE, continuous ones backpropagate through the
dynamics; the entropy bonus is ``3e-4 * H``.

Gradients: imagination for discrete actors runs under ``no_grad``; for continuous actors the
world model and critic are held out (``requires_grad=False``) so only the actor receives
gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch.profiler import record_function
from torchrl.modules.value_norm import PercentileValueNorm
from torchrl.objectives import LossModule

from torchrl_dreamer.modules.functional import discount_weights, lambda_returns
from torchrl_dreamer.modules.heads import DreamerV3Actor, DreamerV3Critic
from torchrl_dreamer.modules.rssm import uses_fused_imagine
from torchrl_dreamer.modules.rssm_imagine import fused_imagine
from torchrl_dreamer.modules.world_model import WorldModel
from torchrl_dreamer.objectives.config import DreamerV3LossConfig
from torchrl_dreamer.objectives.utils import hold_out_params

__all__ = ["DreamerV3ActorLoss", "make_return_norm"]


def make_return_norm(
    config: DreamerV3LossConfig, device: torch.device | str | None = None
) -> PercentileValueNorm:
    """The 5/95 percentile EMA return normaliser (``Moments``) of the reference, its EMAs on
    ``device`` (the returns' device: they are updated in place from each batch)."""
    return PercentileValueNorm(
        shape=1,
        quantiles=config.return_percentiles,
        rate=1.0 - config.return_ema_decay,
        min_scale=config.return_max_scale,
        device=device,
    )


class DreamerV3ActorLoss(LossModule):
    """Actor loss of DreamerV3 (2023 / sheeprl semantics) as a TorchRL ``LossModule``.

    Input: a TensorDict of start states (any batch shape, flattened) with keys ``h``, ``z`` and
    ``continue_`` (``set_keys``), e.g. ``world_model_loss_output["posterior"]``.

    Output keys: ``loss_actor``; metrics ``actor_entropy``, ``return_mean``, ``return_scale``,
    ``advantage_mean``; and ``imagination``: a TensorDict (no batch dims) with detached
    ``latent [H+1, N, L]``, ``lambda_return [H, N]`` and ``weight [H+1, N]`` for the critic loss;
    with ``replay_value_scale`` also ``replay``: the start states' rows ``[K, B]`` (``latent``,
    ``reward``, ``continue_``, ``is_first``, and ``boot``, each one's imagined return).
    With a discrete actor and ``share_critic_logits=True`` it also holds ``critic_logits
    [H+1, N, bins]``, the critic's output on the (detached) latents *with* its graph: the critic
    loss reuses it instead of a second critic forward (the critic does not change between the
    two losses, so the value is identical).

    Research hooks: :meth:`imagine`, :meth:`predict`, :meth:`return_estimate`,
    :meth:`advantage`.
    """

    @dataclass
    class _AcceptedKeys:
        """Configurable input keys: deterministic ``h``, stochastic ``z``, ``continue_``."""

        h: str = "h"
        z: str = "z"
        continue_: str = "continue_"
        reward: str = "reward"
        is_first: str = "is_first"

    default_keys = _AcceptedKeys
    tensor_keys: _AcceptedKeys
    out_keys = [
        "loss_actor",
        "actor_entropy",
        "return_mean",
        "return_scale",
        "advantage_mean",
        "imagination",
    ]

    def __init__(
        self,
        world_model: WorldModel,
        actor: DreamerV3Actor,
        critic: DreamerV3Critic,
        config: DreamerV3LossConfig | None = None,
        *,
        share_critic_logits: bool = True,
    ) -> None:
        super().__init__()
        self.world_model, self.actor, self.critic = world_model, actor, critic
        self.config = config or DreamerV3LossConfig()
        # on the world model's device: a loss built around a CUDA agent must not keep CPU EMAs
        self.return_norm = make_return_norm(self.config, world_model.rssm.h0.device)
        # the entropy bonus's weight as a tensor, so that a schedule (set_entropy_coef) reaches
        # a captured update graph too; not persistent: a run's schedule sets it, old
        # checkpoints load unchanged
        self.register_buffer("entropy_weight",
                             torch.tensor(float(self.config.entropy_coef),
                                          device=world_model.rssm.h0.device),
                             persistent=False)
        self._share_critic = share_critic_logits
        self._last_critic_logits = None

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        pass

    def set_entropy_coef(self, value: float) -> None:
        """Set the entropy bonus's weight for the next updates (in place, so a captured update
        graph sees it); ``config.entropy_coef`` is where it starts. A schedule such as
        :attr:`~torchrl_dreamer.trainers.TrainConfig.entropy_final` calls this between updates.

        Example:
            >>> from torchrl_dreamer.modules import make_dreamer
            >>> from torchrl_dreamer.objectives import DreamerV3ActorLoss
            >>> wm, actor, critic = make_dreamer("tiny", {"obs": ("vector", 4)}, action_dim=2)
            >>> loss = DreamerV3ActorLoss(wm, actor, critic)
            >>> loss.set_entropy_coef(1e-3)
            >>> round(float(loss.entropy_weight), 6)
            0.001
        """
        if not value >= 0.0:
            raise ValueError(f"the entropy bonus's weight must be >= 0, got {value}")
        self.entropy_weight.fill_(float(value))

    @property
    def in_keys(self):
        k = self.tensor_keys
        return [k.h, k.z, k.continue_]

    # ------------------------------------------------------------------ hooks
    def imagine(self, h: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """Roll out the policy in the prior.

        Returns ``latents [H+1, N, L]``, ``actions [H, N, A]`` and the actor's outputs on states
        ``0..H-1`` (log-probs ``[H, N, A]``, or ``(mean, std)`` for continuous actors), computed
        with gradients so :meth:`forward` needs no second actor pass.

        Discrete actors sample the rollout's actions without a graph (REINFORCE needs none) and
        then run one batched actor pass over all ``H`` states for the loss, instead of ``H``
        small passes with a graph each; continuous actors backpropagate through the dynamics,
        so their per-step outputs keep the graph.
        """
        horizon = self.config.horizon
        if self.actor.discrete:
            rssm = self.world_model.rssm
            with torch.no_grad():
                if uses_fused_imagine(rssm, self.actor, h):
                    latents, actions = fused_imagine(rssm, self.actor, h, z, horizon)
                else:
                    latents, actions = rssm.imagine(h, z, self.actor.sample_action, horizon)
            with torch.enable_grad():
                params = self.actor(latents[:-1])
            return latents, actions, params
        outputs = []

        def policy(latent):
            params = self.actor(latent)
            outputs.append(params)
            return self.actor.sample(params)

        latents, actions = self.world_model.rssm.imagine(h, z, policy, horizon)
        return latents, actions, tuple(torch.stack(p, 0) for p in zip(*outputs))

    def predict(
        self, latents: torch.Tensor, first_continue: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rewards, values, continues)`` ``[H+1, N]`` along the imagined trajectory.

        ``rewards[0]`` is not used by the returns and is left at 0; ``continues[0]`` is the
        data's continue flag; later continues are the Bernoulli mode of the continue head.
        """
        wm = self.world_model
        nxt = latents[1:]
        rewards = wm.reward.mean(wm.reward(nxt))
        rewards = torch.cat([torch.zeros_like(rewards[:1]), rewards], 0)
        values = self.critic.mean(self._critic_logits(latents))
        cont = (wm.cont(nxt) > 0).to(rewards.dtype)
        cont = torch.cat([first_continue.to(cont.dtype).unsqueeze(0), cont], 0)
        return rewards, values, cont

    def _critic_logits(self, latents: torch.Tensor) -> torch.Tensor:
        """Critic logits; for discrete actors they keep their graph for the critic loss."""
        if self.actor.discrete and self._share_critic:
            with torch.enable_grad():
                logits = self.critic(latents.detach())
            self._last_critic_logits = logits
            return logits.detach()
        return self.critic(latents)

    def return_estimate(
        self, rewards: torch.Tensor, values: torch.Tensor, continues: torch.Tensor
    ) -> torch.Tensor:
        """lambda-returns ``[H, N]`` from ``[H+1, N]`` predictions."""
        cfg = self.config
        return lambda_returns(rewards[1:], values[1:], continues[1:] * cfg.gamma, cfg.lmbda)

    def advantage(self, returns: torch.Tensor, baseline: torch.Tensor) -> torch.Tensor:
        """``(R - v) / max(1, P95 - P5)`` after updating the percentile EMA with ``R``."""
        self.return_norm.update(returns.detach().reshape(-1, 1))
        offset = self.return_norm.low
        scale = self.return_norm.scale()
        return (returns - offset) / scale - (baseline - offset) / scale

    def _replay_rows(self, tensordict: TensorDictBase,
                     first_cont: torch.Tensor) -> dict[str, torch.Tensor]:
        """The replay rows of the start states (``replay_value_scale``): their ``reward``,
        ``continue_`` and ``is_first``, time-major ``[K, B]`` like ``first_cont``."""
        keys = self.tensor_keys
        if first_cont.dim() != 2 or first_cont.shape[0] < 2:
            raise ValueError(
                f"replay_value_scale > 0 needs time-major [T, B] start states with T >= 2 "
                f"(the world model loss's posterior), got {tuple(first_cont.shape)}"
            )
        K = first_cont.shape[0]
        missing = [k for k in (keys.reward, keys.is_first) if k not in tensordict.keys()]
        if missing:
            raise KeyError(f"replay_value_scale > 0 needs {missing} beside the start states "
                           f"(DreamerV3WorldModelLoss's posterior holds them)")
        return {"reward": tensordict.get(keys.reward)[-K:].detach().float(),
                "continue_": first_cont.detach().float(),
                "is_first": tensordict.get(keys.is_first)[-K:].bool()}

    # ------------------------------------------------------------------ forward
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Actor loss, metrics and the imagination TensorDict from posterior start states."""
        keys, cfg = self.tensor_keys, self.config
        h = tensordict.get(keys.h).detach()
        z = tensordict.get(keys.z).detach()
        first_cont = tensordict.get(keys.continue_)
        if cfg.imagine_last:  # starts from the last steps of each [T, B] sequence only
            h, z, first_cont = h[-cfg.imagine_last:], z[-cfg.imagine_last:], \
                first_cont[-cfg.imagine_last:]
        rows = self._replay_rows(tensordict, first_cont) if cfg.replay_value_scale else None
        h = h.reshape(-1, h.shape[-1])
        z = z.reshape(-1, z.shape[-1])
        first_cont = first_cont.reshape(-1).float()
        self._last_critic_logits = None
        if self.actor.discrete:
            with torch.no_grad(), record_function("actor/imagination"):
                latents, actions, params = self.imagine(h, z)
                rewards, values, cont = self.predict(latents, first_cont)
                returns = self.return_estimate(rewards, values, cont)
        else:
            with hold_out_params(self.world_model, self.critic):
                with record_function("actor/imagination"):
                    latents, actions, params = self.imagine(h, z)
                rewards, values, cont = self.predict(latents, first_cont)
                returns = self.return_estimate(rewards, values, cont)
        weight = discount_weights(cont, cfg.gamma).detach()
        adv = self.advantage(returns, values[:-1])
        if self.actor.discrete:
            objective = self.actor.log_prob(params, actions) * adv.detach()
        else:
            objective = adv
        entropy = self.actor.entropy(params)
        loss = -(weight[:-1] * (objective + self.entropy_weight * entropy)).mean()
        imagination = {
            "latent": latents.detach(),
            "lambda_return": returns.detach(),
            "weight": weight,
        }
        if rows is not None:  # the start states' imagined returns bootstrap the replay's
            K, B = rows["continue_"].shape
            rows["latent"] = latents[0].reshape(K, B, -1)
            rows["boot"] = returns[0].detach().reshape(K, B)
            imagination["replay"] = TensorDict(rows, [K, B])
        if self._last_critic_logits is not None:
            imagination["critic_logits"] = self._last_critic_logits
            self._last_critic_logits = None
        return TensorDict(
            {
                "loss_actor": loss,
                "actor_entropy": entropy.detach().mean(),
                "return_mean": returns.detach().mean(),
                "return_scale": self.return_norm.scale().detach().reshape(()),
                "advantage_mean": adv.detach().mean(),
                "imagination": TensorDict(imagination, []),
            },
            [],
        )
