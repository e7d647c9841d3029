"""The model state layout: ``latent = [z, h]`` along the last dim.

Every head of the world model (decoders, reward, continue) and the actor and critic read the
RSSM state as one vector: the flattened stochastic state ``z`` (``stoch * classes``) followed by
the deterministic state ``h`` (``deter``). :func:`latent_of` is the one place that order is
written; the RSSM's filtering and imagination (eager, scanned and compiled alike), the acting
player, the world-model loss and the videos all build their latents with it. A plain
``torch.cat``, so compiled graphs see the same op and the numbers are bit-identical.

This module imports nothing of the package, so the RSSM and its fused rollout and scan modules
can all import it.

Example:
    >>> import torch
    >>> latent_of(torch.zeros(2, 3), torch.ones(2, 4))[0].tolist()
    [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

import torch

__all__ = ["latent_of"]


def latent_of(z: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The latent ``[..., stoch * classes + deter]`` of flattened ``z`` ``[..., stoch * classes]``
    and ``h`` ``[..., deter]`` (same leading dims)."""
    return torch.cat([z, h], -1)
