"""Hyper-parameters of the DreamerV3 losses and optimizers, with named presets."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DreamerV3LossConfig", "LOSS_PRESETS"]


@dataclass(frozen=True)
class DreamerV3LossConfig:
    """Loss scales, imagination/return settings and optimizer settings.

    The defaults are the ``sheeprl`` preset (sheeprl 0.8.4 = DreamerV3 2023): KL dyn 0.5 /
    rep 0.1 with free bits 1.0 after summing over categoricals, horizon 15,
    ``gamma = 1 - 1/333``, ``lambda = 0.95``, 5/95 percentile return scale (EMA decay 0.99,
    ``max(1, S)``), entropy 3e-4, slow-critic regulariser 1.0 (EMA 0.02, hard copy at step 0),
    Adam world model lr 1e-4 / eps 1e-8 / clip 1000, actor and critic lr 3e-5 / eps 1e-5 / clip
    100.

    ``world_model_warmup`` (0 in the reference): the first that many gradient steps train the
    world model only (no imagination, no actor or critic step). DreamerV3 has no such phase; it
    is the "pretrain" phase of DreamerV1/V2 run on the first replay. It keeps the actor from
    fitting a world model that cannot yet see the small sprites of our games, and each warm-up
    step costs about half a full one (see ``docs/learning_results.md``).

    ``prior_head_scale`` (0 in the reference): also train the reward and continue heads on
    *prior* latents ``[z ~ prior(h_t), h_t]``, the kind imagination feeds them, with this weight
    (loss keys ``loss_reward_prior`` / ``loss_continue_prior``). DreamerV3 trains the heads on
    posterior latents only; a rare event that the prior does not yet draw (a maze's win, ~0.3 %
    of the rows) then almost never appears in imagination, and shaped rewards paid on the
    way to it are all the critic sees. The gradient reaches the heads and ``h`` (the GRU), not
    the sampled ``z``. On the maze it did not help (``docs/learning_results.md``, session 5:
    the critic's inflation came from the discount, not from the missing win).
    """

    # world model
    kl_dyn: float = 0.5
    kl_rep: float = 0.1
    free_bits: float = 1.0
    reconstruction_scale: float = 1.0
    reward_scale: float = 1.0
    continue_scale: float = 1.0
    prior_head_scale: float = 0.0
    # behaviour
    horizon: int = 15
    gamma: float = 1.0 - 1.0 / 333.0
    lmbda: float = 0.95
    entropy_coef: float = 3e-4
    return_percentiles: tuple[float, float] = (0.05, 0.95)
    return_ema_decay: float = 0.99
    return_max_scale: float = 1.0
    slow_critic_tau: float = 0.02
    slow_critic_reg: float = 1.0
    slow_critic_every: int = 1
    # optimizers
    wm_lr: float = 1e-4
    wm_eps: float = 1e-8
    wm_clip: float = 1000.0
    actor_lr: float = 3e-5
    actor_eps: float = 1e-5
    actor_clip: float = 100.0
    critic_lr: float = 3e-5
    critic_eps: float = 1e-5
    critic_clip: float = 100.0
    # schedule
    world_model_warmup: int = 0

    def __post_init__(self) -> None:
        if not self.prior_head_scale >= 0.0:
            raise ValueError(f"prior_head_scale must be >= 0, got {self.prior_head_scale}")

    @classmethod
    def sheeprl(cls) -> DreamerV3LossConfig:
        """sheeprl 0.8.4 / DreamerV3 2023 semantics (the default)."""
        return cls()

    def with_(self, **kwargs) -> DreamerV3LossConfig:
        """Copy with some fields changed."""
        return replace(self, **kwargs)


#: Loss presets by name: ``sheeprl`` (sheeprl 0.8.4 / DreamerV3 2023 semantics),
#: ``sheeprl-0.5`` (the same with sheeprl 0.5's actor/critic learning rate 8e-5) and ``fast``
#: (the same losses with 3x / 3.3x / 10x the world-model / actor / critic learning rates: for
#: short CPU runs of small models, where a few thousand gradient steps must do; see
#: ``docs/learning_results.md``) and ``fast-pixels`` (``fast`` with a 10x world-model rate and
#: entropy 1e-3: our games' key objects are sprites of 16-36 observation pixels, which a ``tiny``
#: world model at 3e-4 only starts to reconstruct after ~2,500 gradient steps, and the actor
#: collapses to a deterministic policy on the blind model before that).
LOSS_PRESETS: dict[str, DreamerV3LossConfig] = {
    "sheeprl": DreamerV3LossConfig.sheeprl(),
    # sheeprl 0.5.x used actor/critic lr 8e-5 (0.8.4 and the 2023 official code use 3e-5).
    "sheeprl-0.5": DreamerV3LossConfig.sheeprl().with_(actor_lr=8e-5, critic_lr=8e-5),
    "fast": DreamerV3LossConfig.sheeprl().with_(wm_lr=3e-4, actor_lr=1e-4, critic_lr=3e-4),
    "fast-pixels": DreamerV3LossConfig.sheeprl().with_(
        wm_lr=1e-3, actor_lr=1e-4, critic_lr=3e-4, entropy_coef=1e-3
    ),
}
