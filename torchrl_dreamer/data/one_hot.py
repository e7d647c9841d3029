"""One-hot encoding: the package's one definition, below every layer that encodes.

The replay's action columns (:mod:`~torchrl_dreamer.data.dreamer_inputs`, demonstrations), the
model's categorical samples and two-hot bins (:mod:`~torchrl_dreamer.modules.functional`, which
re-exports :func:`one_hot`), the actor's actions and the collectors' action specs all encode
with :func:`one_hot`. It lives in ``data``, the lowest layer that needs it, so the replay code
does not import the model package for it. It imports nothing of the package.

Example:
    >>> import torch
    >>> one_hot_actions(torch.tensor([1, 0]), 2).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
"""

from __future__ import annotations

import torch

__all__ = ["one_hot", "one_hot_actions"]


def one_hot(
    index: torch.Tensor,
    num_classes: int,
    dtype: torch.dtype = torch.float32,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``F.one_hot`` without its value-range check (which syncs with the host): integer
    ``index`` ``[...]`` -> ``[..., num_classes]`` of ``dtype``, written into ``out`` when given
    (a zeroed ``[..., num_classes]`` tensor, e.g. a reused buffer; ``dtype`` is then its own).

    Example:
        >>> one_hot(torch.tensor([2, 0]), 3).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if out is None:
        out = torch.zeros(*index.shape, num_classes, dtype=dtype, device=index.device)
    return out.scatter_(-1, index.unsqueeze(-1), 1.0)


def one_hot_actions(action: torch.Tensor, action_dim: int) -> torch.Tensor:
    """Integer indices ``[...]`` -> float one-hot ``[..., A]``; float actions pass through."""
    if action.dtype.is_floating_point:
        if action.shape[-1] != action_dim:
            raise ValueError(
                f"float actions must have last dim action_dim={action_dim}, got {tuple(action.shape)}"
            )
        return action
    return one_hot(action.long(), action_dim)
