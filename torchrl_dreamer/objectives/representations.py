"""How the world model's latent learns what the screen shows, by name: the choices of a run's
``representation`` setting and the world-model loss class of each.

Example:
    >>> REPRESENTATIONS
    ('decoder', 'contrastive')
    >>> WORLD_MODEL_LOSSES["contrastive"].__name__
    'ContrastiveWorldModelLoss'
"""

from __future__ import annotations

from typing import Literal, get_args

from torchrl_dreamer.objectives.contrastive import ContrastiveWorldModelLoss
from torchrl_dreamer.objectives.world_model import DreamerV3WorldModelLoss

__all__ = ["REPRESENTATIONS", "WORLD_MODEL_LOSSES", "Representation", "trains_decoder"]

Representation = Literal["decoder", "contrastive"]
"""``decoder``: DreamerV3's reconstruction (:class:`DreamerV3WorldModelLoss`); ``contrastive``:
no decoder, an InfoNCE term between latents and embeddings
(:class:`ContrastiveWorldModelLoss`)."""

REPRESENTATIONS: tuple[str, ...] = get_args(Representation)
"""The names a run's ``representation`` setting takes."""

WORLD_MODEL_LOSSES: dict[str, type[DreamerV3WorldModelLoss]] = {
    "decoder": DreamerV3WorldModelLoss,
    "contrastive": ContrastiveWorldModelLoss,
}
"""The world-model loss class of each representation."""


def trains_decoder(representation: str) -> bool:
    """Whether a run of ``representation`` trains the decoder that world-model videos draw with
    (the loss class's ``trains_decoder``).

    Example:
        >>> trains_decoder("decoder"), trains_decoder("contrastive")
        (True, False)
    """
    return WORLD_MODEL_LOSSES[representation].trains_decoder
