"""Hyper-parameters of the DreamerV3 losses, with named presets.

The optimizers' settings (learning rates, Adam eps, clipping, the world-model warm-up) belong to
the learner: :class:`~torchrl_dreamer.objectives.DreamerV3LearnerConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

__all__ = ["DreamerV3LossConfig", "LOSS_PRESETS"]


@dataclass(frozen=True)
class DreamerV3LossConfig:
    """Loss scales and imagination/return settings.

    The defaults are the ``sheeprl`` preset (sheeprl 0.8.4 = DreamerV3 2023): KL dyn 0.5 /
    rep 0.1 with free bits 1.0 after summing over categoricals, horizon 15,
    ``gamma = 1 - 1/333``, ``lambda = 0.95``, 5/95 percentile return scale (EMA decay 0.99,
    ``max(1, S)``), entropy 3e-4, slow-critic regulariser 1.0 (EMA 0.02, hard copy at step 0).

    ``prior_head_scale`` (0 in the reference): also train the reward and continue heads on
    *prior* latents ``[z ~ prior(h_t), h_t]``, the kind imagination feeds them, with this weight
    (loss keys ``loss_reward_prior`` / ``loss_continue_prior``). DreamerV3 trains the heads on
    posterior latents only; a rare event that the prior does not yet draw (a maze's win, ~0.3 %
    of the rows) then almost never appears in imagination, and shaped rewards paid on the
    way to it are all the critic sees. The gradient reaches the heads and ``h`` (the GRU), not
    the sampled ``z``. What it gave: ``docs/decisions/dreamer_options.md``.

    ``decode_stride`` (1 in the reference): reconstruct only every ``decode_stride``-th step of
    each sampled sequence (steps ``0, s, 2s, ...``; sequences start at random replay rows, so
    every stored frame is still decoded in some batches). The reconstruction loss is then the
    mean over the decoded steps, an estimate of the full mean with ``1/s`` of the decoder's
    work. Encoder, RSSM, KL, reward and continue terms see every step. Its measurements:
    ``docs/decisions/dreamer_options.md``.

    ``replay_value_scale`` (0 in the 2023 reference; 0.3 in the 2024 one): also train the
    critic on the replay sequences themselves, towards lambda-returns of the real rewards and
    continues bootstrapped from the imagined return of each replay state
    (:func:`~torchrl_dreamer.modules.functional.replay_lambda_returns`), with this weight. Real
    rewards then reach the critic over a whole sampled sequence, not only through the 15
    imagined steps. Unlike the 2024 reference the term trains the critic alone (the world model
    has stepped before the critic's loss is formed). With ``imagine_last`` only the last steps,
    whose imagined returns exist, are targets.

    Example:
        >>> DreamerV3LossConfig().with_(gamma=0.98).gamma
        0.98
    """

    # world model
    kl_dyn: float = 0.5
    kl_rep: float = 0.1
    free_bits: float = 1.0
    reconstruction_scale: float = 1.0
    reward_scale: float = 1.0
    continue_scale: float = 1.0
    prior_head_scale: float = 0.0
    decode_stride: int = 1
    # behaviour
    imagine_last: int = 0
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
    replay_value_scale: float = 0.0

    def __post_init__(self) -> None:
        if not self.prior_head_scale >= 0.0:
            raise ValueError(f"prior_head_scale must be >= 0, got {self.prior_head_scale}")
        if not self.replay_value_scale >= 0.0:
            raise ValueError(f"replay_value_scale must be >= 0, got {self.replay_value_scale}")
        if not isinstance(self.decode_stride, int) or self.decode_stride < 1:
            raise ValueError(f"decode_stride must be an integer >= 1 (1: decode every step), got "
                             f"{self.decode_stride!r}")
        if not isinstance(self.imagine_last, int) or self.imagine_last < 0:
            raise ValueError(f"imagine_last must be an integer >= 0 (0: imagine from every "
                             f"step), got {self.imagine_last!r}")

    @classmethod
    def sheeprl(cls) -> DreamerV3LossConfig:
        """sheeprl 0.8.4 / DreamerV3 2023 semantics (the default)."""
        return cls()

    def with_(self, **kwargs) -> DreamerV3LossConfig:
        """Copy with some fields changed (an optimizer setting raises, naming where it went)."""
        unknown = sorted(set(kwargs) - {f.name for f in fields(self)})
        if unknown:
            raise TypeError(
                f"{unknown} are not loss settings; learning rates, Adam eps, clipping and "
                "world_model_warmup are the learner's: DreamerV3Learner(..., "
                "optim=DreamerV3LearnerConfig().with_(...))."
            )
        return replace(self, **kwargs)


#: Loss presets by name: ``sheeprl`` (sheeprl 0.8.4 / DreamerV3 2023 semantics), and the loss side
#: of the learner presets of the same names (:data:`~torchrl_dreamer.objectives.LEARNER_PRESETS`
#: holds their learning rates): ``sheeprl-0.5`` and ``fast`` use the ``sheeprl`` losses,
#: ``fast-pixels`` the same with entropy 1e-3 (with ``fast-pixels``' high learning rates the
#: actor otherwise collapses to a deterministic policy on a world model still blind to our games'
#: sprites; see ``docs/learning_results.md``).
LOSS_PRESETS: dict[str, DreamerV3LossConfig] = {
    "sheeprl": DreamerV3LossConfig.sheeprl(),
    "sheeprl-0.5": DreamerV3LossConfig.sheeprl(),
    "fast": DreamerV3LossConfig.sheeprl(),
    "fast-pixels": DreamerV3LossConfig.sheeprl().with_(entropy_coef=1e-3),
}
