"""``DreamerV3WorldModelLoss``: reconstruction, reward, continue and KL terms on replay sequences.

Row alignment (the replay's data contract): row ``t`` holds ``o_t``, ``a_t`` (chosen after
``o_t``), ``r_t`` (reward on arriving at ``o_t``), ``is_first_t`` and ``continue_t``. The RSSM step
at ``t`` therefore consumes ``a_{t-1}``: :func:`~torchrl_dreamer.data.dreamer_inputs.rssm_inputs`
prepends a zero action and drops the last, and forces ``is_first[0]`` True so each sampled
sequence starts from the learned initial state (as sheeprl and the 2023 replay do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase
from torchrl.objectives import LossModule

from torchrl_dreamer.data.dreamer_inputs import action_to_vector, rssm_inputs
from torchrl_dreamer.modules.functional import categorical_kl, two_hot_log_prob
from torchrl_dreamer.modules.latent import latent_of
from torchrl_dreamer.modules.world_model import WorldModel
from torchrl_dreamer.objectives.config import DreamerV3LossConfig

__all__ = ["DreamerV3WorldModelLoss", "action_to_vector"]


class DreamerV3WorldModelLoss(LossModule):
    """World-model loss of DreamerV3 (2023 / sheeprl semantics) as a TorchRL ``LossModule``.

    Per ``(t, b)``: ``kl_dyn * max(fb, KL(sg(q) || p)) + kl_rep * max(fb, KL(q || sg(p)))``
    + reconstruction (squared error *summed* over pixels / features) + two-hot reward NLL
    + ``continue_scale`` * Bernoulli NLL; each term is averaged over ``T x B``.

    Input keys (``set_keys``): observation keys of the world model, ``action``, ``reward``,
    ``is_first``, ``continue_`` (falls back to ``1 - terminated``), ``terminated``, and
    optionally ``bonus`` (the exploration bonus's part of ``reward``, weighed by
    :meth:`set_bonus_weight`). Batch ``[T, B]`` (``batch_major=True`` for ``[B, T]``).

    Output keys: ``loss_reconstruction``, ``loss_reward``, ``loss_continue``, ``loss_kl_dyn``,
    ``loss_kl_rep`` (their sum is the objective), metrics ``kl``, ``posterior_entropy``,
    ``prior_entropy``, ``reward_pred_mean``, and ``posterior``: a detached ``[T, B]`` TensorDict
    with ``h``, ``z`` and ``continue_`` (start states for the actor loss), and the rows'
    ``reward`` (:meth:`reward_target`) and ``is_first`` (the critic's replay targets,
    ``replay_value_scale``).

    Research hooks (override in a subclass): :meth:`representation_loss` (the decoder's
    reconstruction by default), :meth:`reconstruction_loss`, :meth:`kl_loss`,
    :meth:`reward_loss`, :meth:`continue_loss`, :meth:`reward_target`. A subclass's own
    modules (a variant's heads) are trained with the world model by the learner's world-model
    optimizer, which holds all of this loss's parameters.

    Example:
        >>> from torchrl_dreamer.modules import make_dreamer
        >>> wm, _, _ = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
        >>> loss = DreamerV3WorldModelLoss(wm)
        >>> T, B = 4, 2
        >>> td = TensorDict({"obs": torch.randn(T, B, 3), "action": torch.zeros(T, B).long(),
        ...     "reward": torch.zeros(T, B), "is_first": torch.zeros(T, B, dtype=torch.bool),
        ...     "continue_": torch.ones(T, B)}, [T, B])
        >>> out = loss(td)
        >>> round(float(out["loss_reward"]), 4)  # zero-initialised reward head: ln 255
        5.5413
    """

    @dataclass
    class _AcceptedKeys:
        """Configurable input keys.

        Attributes:
            action: actions ``a_t`` (int index or float vector). reward: ``r_t``.
            is_first: episode-start flags. continue_: ``1 - terminated`` target.
            terminated: used when ``continue_`` is absent.
            bonus: the exploration bonus's part of ``reward`` (optional: where the batch has
            it, :meth:`set_bonus_weight` weighs it).
        """

        action: str = "action"
        reward: str = "reward"
        is_first: str = "is_first"
        continue_: str = "continue_"
        terminated: str = "terminated"
        bonus: str = "bonus"

    default_keys = _AcceptedKeys
    tensor_keys: _AcceptedKeys
    #: Each loss term and the :class:`DreamerV3LossConfig` fields whose product scales it (the
    #: prior-head terms are emitted only when ``prior_head_scale > 0``; ``test_objectives``
    #: checks ``forward`` against this).
    loss_scales: ClassVar[dict[str, tuple[str, ...]]] = {
        "loss_reconstruction": ("reconstruction_scale",),
        "loss_reward": ("reward_scale",),
        "loss_continue": ("continue_scale",),
        "loss_kl_dyn": ("kl_dyn",),
        "loss_kl_rep": ("kl_rep",),
        "loss_reward_prior": ("prior_head_scale", "reward_scale"),
        "loss_continue_prior": ("prior_head_scale", "continue_scale"),
    }
    #: The output key of :meth:`representation_loss`'s term (one of :attr:`loss_scales`).
    representation_key: ClassVar[str] = "loss_reconstruction"
    #: Whether :meth:`representation_loss` trains the world model's decoders (what draws its
    #: reconstructions and imagined frames): False for a decoder-free variant.
    trains_decoder: ClassVar[bool] = True
    out_keys = [
        *loss_scales,
        "kl",
        "posterior_entropy",
        "prior_entropy",
        "reward_pred_mean",
        "posterior",
    ]

    def __init__(
        self,
        world_model: WorldModel,
        config: DreamerV3LossConfig | None = None,
        *,
        batch_major: bool = False,
    ) -> None:
        super().__init__()
        self.world_model = world_model
        self.config = config or DreamerV3LossConfig()
        self.batch_major = batch_major
        unscaled = sorted(k for k, fs in self.loss_scales.items()
                          if not all(hasattr(self.config, f) for f in fs))
        if unscaled:
            raise ValueError(
                f"{type(self).__name__}: loss terms {unscaled} name scales that "
                f"{type(self.config).__name__} lacks; add the field or fix loss_scales."
            )
        # the exploration bonus's weight in the reward target, as a tensor so that a schedule
        # (set_bonus_weight) reaches a captured update graph too; not persistent, like the
        # actor loss's entropy weight
        self.register_buffer("bonus_weight", torch.ones((), device=world_model.rssm.h0.device),
                             persistent=False)

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        pass

    def set_bonus_weight(self, value: float) -> None:
        """Weigh the exploration bonus in the reward target by ``value`` for the next updates:
        the target is ``reward - (1 - value) * bonus`` for batches that carry the ``bonus`` key
        (1, the start: the reward as the env paid it; 0: the reward without the bonus). In
        place, so a captured update graph sees it. A schedule such as
        :attr:`~torchrl_dreamer.trainers.TrainConfig.bonus_final` calls this between updates,
        so that a run explores with the bonus and ends optimising the game's reward.

        Example:
            >>> from torchrl_dreamer.modules import make_dreamer
            >>> wm, _, _ = make_dreamer("tiny", {"obs": ("vector", 4)}, action_dim=2)
            >>> loss = DreamerV3WorldModelLoss(wm)
            >>> loss.set_bonus_weight(0.25)
            >>> float(loss.bonus_weight)
            0.25
        """
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"the exploration bonus's weight must be in [0, 1], got {value}")
        self.bonus_weight.fill_(float(value))

    def reward_target(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``[T, B]`` reward the reward head learns and the critic's replay targets use: the
        batch's ``reward``, less ``(1 - bonus_weight)`` of its ``bonus`` where it has one."""
        keys = self.tensor_keys
        reward = self._get(tensordict, keys.reward).float()
        if reward.dim() == 3:
            reward = reward.squeeze(-1)
        if keys.bonus in tensordict.keys():
            bonus = self._get(tensordict, keys.bonus).float().reshape(reward.shape)
            reward = reward - (1.0 - self.bonus_weight) * bonus
        return reward

    @property
    def in_keys(self):
        k = self.tensor_keys
        return [*self.world_model.obs_keys, k.action, k.reward, k.is_first, k.continue_]

    # ------------------------------------------------------------------ hooks
    def representation_loss(self, latent: torch.Tensor, embed: torch.Tensor,
                            targets: dict[str, torch.Tensor]) -> torch.Tensor:
        """The term that makes the latent hold what the observations show, per step: here the
        decoder's reconstruction (:meth:`reconstruction_loss`) of every ``decode_stride``-th
        step, ``[ceil(T / s), B]``. ``latent`` ``[T, B, L]`` are the posterior latents, ``embed``
        ``[T, B, E]`` the encoder's embeddings, ``targets`` the preprocessed observations.
        :attr:`representation_key` names the term; a decoder-free variant overrides both
        (:class:`~torchrl_dreamer.objectives.ContrastiveWorldModelLoss`)."""
        stride = self.config.decode_stride
        if stride > 1:
            latent = latent[::stride]
            targets = {k: v[::stride] for k, v in targets.items()}
        return self.reconstruction_loss(self.world_model.decode(latent), targets)

    def reconstruction_loss(
        self, recon: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """Sum over keys of squared errors summed over each observation's feature dims: ``[T, B]``."""
        total = 0.0
        for k, x in recon.items():
            err = (x.float() - targets[k]).square()
            nd = len(self.world_model.decoders[k].shape)
            total = total + err.sum(tuple(range(-nd, 0)))
        return total

    def kl_loss(
        self, post_logits: torch.Tensor, prior_logits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(dyn, rep, kl)`` per ``[T, B]``; free bits clip the *summed* KL.

        Inputs are the RSSM's unimixed log-probabilities ``[T, B, stoch, classes]``.
        """
        fb = self.config.free_bits
        dyn = categorical_kl(post_logits.detach(), prior_logits, normalized=True)
        rep = categorical_kl(post_logits, prior_logits.detach(), normalized=True)
        return dyn.clamp_min(fb), rep.clamp_min(fb), dyn.detach()

    def reward_loss(self, logits: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
        """Two-hot (symlog bins) NLL of the reward ``[T, B]``."""
        return -two_hot_log_prob(logits, reward, self.world_model.reward.bins)

    def continue_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Bernoulli NLL of the continue flag ``[T, B]``."""
        return F.binary_cross_entropy_with_logits(logits.float(), target, reduction="none")

    # ------------------------------------------------------------------ forward
    def _get(self, td: TensorDictBase, key: str) -> torch.Tensor:
        x = td.get(key)
        return x.transpose(0, 1) if self.batch_major else x

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Loss terms, metrics and detached posterior states for a ``[T, B]`` replay sample."""
        wm, keys, cfg = self.world_model, self.tensor_keys, self.config
        if tensordict.batch_dims < 2:
            raise ValueError(
                f"expected a [T, B] (or [B, T] with batch_major=True) batch, got batch_size "
                f"{tuple(tensordict.batch_size)}"
            )
        obs = {k: self._get(tensordict, k) for k in wm.obs_keys}
        targets = wm.preprocess(obs)
        reward = self.reward_target(tensordict)
        prev_action, is_first = rssm_inputs(
            self._get(tensordict, keys.action),
            self._get(tensordict, keys.is_first).reshape(reward.shape),
            wm.action_dim,
        )
        if keys.continue_ in tensordict.keys():
            cont = self._get(tensordict, keys.continue_).float().reshape(reward.shape)
        else:
            cont = 1.0 - self._get(tensordict, keys.terminated).float().reshape(reward.shape)

        embed = wm.embed(targets)
        out = wm.rssm.observe(embed, prev_action, is_first)
        latent = latent_of(out["z"], out["h"])
        rew_logits = wm.reward(latent)
        dyn, rep, kl = self.kl_loss(out["post_logits"], out["prior_logits"])
        post, prior = out["post_logits"], out["prior_logits"]
        with torch.no_grad():
            post_ent = -(post.exp() * post).sum((-2, -1)).mean()
            prior_ent = -(prior.exp() * prior).sum((-2, -1)).mean()
            rew_pred = wm.reward.mean(rew_logits).mean()
        T, B = reward.shape
        extra = {}
        if cfg.prior_head_scale > 0:
            z_prior = wm.rssm.sample(prior.detach())  # no gradient to the prior
            prior_latent = latent_of(z_prior, out["h"])
            extra = {
                "loss_reward_prior": cfg.prior_head_scale * cfg.reward_scale
                * self.reward_loss(wm.reward(prior_latent), reward).mean(),
                "loss_continue_prior": cfg.prior_head_scale * cfg.continue_scale
                * self.continue_loss(wm.cont(prior_latent), cont).mean(),
            }
        return TensorDict(
            {
                **extra,
                self.representation_key: cfg.reconstruction_scale
                * self.representation_loss(latent, embed, targets).mean(),
                "loss_reward": cfg.reward_scale * self.reward_loss(rew_logits, reward).mean(),
                "loss_continue": cfg.continue_scale
                * self.continue_loss(wm.cont(latent), cont).mean(),
                "loss_kl_dyn": cfg.kl_dyn * dyn.mean(),
                "loss_kl_rep": cfg.kl_rep * rep.mean(),
                "kl": kl.mean(),
                "posterior_entropy": post_ent,
                "prior_entropy": prior_ent,
                "reward_pred_mean": rew_pred,
                "posterior": TensorDict(
                    {"h": out["h"].detach(), "z": out["z"].detach(), "continue_": cont,
                     "reward": reward, "is_first": is_first},
                    [T, B],
                ),
            },
            [],
        )
