"""A decoder-free world-model loss: the latent learns the observation by contrast, not by
reconstruction.

DreamerV3 makes its latent hold what the screen shows by decoding every latent back to pixels.
On a CPU that decoder is a fifth of a Game Boy update (the ``tiny`` model, snake, B8 x T32:
about 32 of 155 ms with ``decode_stride=2``). :class:`ContrastiveWorldModelLoss` replaces the
reconstruction with an InfoNCE term between the posterior latent of each step and the
encoder's embedding of the same step's observation (in the spirit of "Dreaming", Okada and
Taniguchi 2021, without its augmentations): both are projected to a small space, normalised,
and each latent must pick its own step's embedding out of every embedding of the batch. The
other steps of the same sequence are the hard negatives (neighbouring frames that differ in a
sprite or two), the other sequences the easy ones. The KL, reward and continue terms are
DreamerV3's. A variant through :meth:`representation_loss` (the decoder is still built, so
checkpoints and players are unchanged, but it is neither run nor trained): choose it with
``world_model_loss_cls`` or, in a run, ``--representation contrastive``. Game Boy tasks train
with it by default (``GAME_TRAIN_DEFAULTS``; the measurements:
``docs/decisions/training_defaults.md``).
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from torchrl_dreamer.modules.world_model import WorldModel
from torchrl_dreamer.objectives.config import DreamerV3LossConfig
from torchrl_dreamer.objectives.world_model import DreamerV3WorldModelLoss

__all__ = ["ContrastiveWorldModelLoss", "info_nce"]


def info_nce(queries: torch.Tensor, keys: torch.Tensor, temperature: float) -> torch.Tensor:
    """Symmetric InfoNCE of ``N`` matched pairs: row ``i`` of ``queries`` ``[N, P]`` against
    row ``i`` of ``keys`` ``[N, P]`` (both L2-normalised here), every other row the negatives;
    the mean of the two directions' cross-entropies, per pair ``[N]``.

    Example:
        >>> q = torch.eye(4)
        >>> info_nce(q, q, temperature=0.1) < info_nce(q, q.roll(1, 0), temperature=0.1)
        tensor([True, True, True, True])
    """
    q = F.normalize(queries.float(), dim=-1)
    k = F.normalize(keys.float(), dim=-1)
    logits = q @ k.T / temperature
    target = torch.arange(len(q), device=q.device)
    return 0.5 * (F.cross_entropy(logits, target, reduction="none")
                  + F.cross_entropy(logits.T, target, reduction="none"))


class ContrastiveWorldModelLoss(DreamerV3WorldModelLoss):
    """DreamerV3's world-model loss with the decoder's reconstruction replaced by an InfoNCE
    term between latents and embeddings (``loss_contrastive``, weighed by the config's
    ``reconstruction_scale``; see the module's docstring for why).

    The two projections (latent -> :attr:`projection_dim`, embedding -> the same) are this
    loss's own modules; the learner's world-model optimizer trains them with the world model
    and its checkpoints hold them. :attr:`temperature` and :attr:`projection_dim` are class
    attributes: a subclass changes them.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_dreamer.modules import make_dreamer
        >>> wm, _, _ = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
        >>> loss = ContrastiveWorldModelLoss(wm)
        >>> T, B = 4, 2
        >>> td = TensorDict({"obs": torch.randn(T, B, 3), "action": torch.zeros(T, B).long(),
        ...     "reward": torch.zeros(T, B), "is_first": torch.zeros(T, B, dtype=torch.bool),
        ...     "continue_": torch.ones(T, B)}, [T, B])
        >>> out = loss(td)
        >>> "loss_contrastive" in out.keys(), "loss_reconstruction" in out.keys()
        (True, False)
    """

    representation_key: ClassVar[str] = "loss_contrastive"
    trains_decoder: ClassVar[bool] = False
    loss_scales: ClassVar[dict[str, tuple[str, ...]]] = {
        ("loss_contrastive" if k == "loss_reconstruction" else k): v
        for k, v in DreamerV3WorldModelLoss.loss_scales.items()
    }
    out_keys = [k if k != "loss_reconstruction" else "loss_contrastive"
                for k in DreamerV3WorldModelLoss.out_keys]
    #: Width of the space latents and embeddings are compared in.
    projection_dim: ClassVar[int] = 128
    #: Softmax temperature of the cosine similarities.
    temperature: ClassVar[float] = 0.1

    def __init__(self, world_model: WorldModel, config: DreamerV3LossConfig | None = None, *,
                 batch_major: bool = False) -> None:
        super().__init__(world_model, config, batch_major=batch_major)
        embed = sum(e.out_features for e in world_model.encoders.values())
        device = world_model.rssm.h0.device
        self.latent_projection = nn.Linear(world_model.latent_dim, self.projection_dim,
                                           device=device)
        self.embed_projection = nn.Linear(embed, self.projection_dim, device=device)

    def representation_loss(self, latent: torch.Tensor, embed: torch.Tensor,
                            targets: dict[str, torch.Tensor]) -> torch.Tensor:
        """InfoNCE of every step's posterior latent against its own step's embedding, the
        batch's other ``T x B - 1`` embeddings the negatives: ``[T, B]`` (no decoder runs, and
        ``decode_stride`` does not apply: every step is contrasted, which costs less than
        decoding one in two)."""
        T, B = latent.shape[:2]
        q = self.latent_projection(latent.reshape(T * B, -1))
        k = self.embed_projection(embed.reshape(T * B, -1))
        return info_nce(q, k, self.temperature).reshape(T, B)
