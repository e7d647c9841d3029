"""Small helpers shared by the DreamerV3 losses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from tensordict import TensorDictBase
from torch import nn

__all__ = ["total_loss", "hold_out_params"]


def total_loss(losses: TensorDictBase) -> torch.Tensor:
    """Sum of the ``loss_*`` entries of a loss output (the TorchRL convention)."""
    return sum(v for k, v in losses.items() if isinstance(k, str) and k.startswith("loss_"))


@contextlib.contextmanager
def hold_out_params(*modules: nn.Module) -> Iterator[None]:
    """Temporarily mark the parameters of ``modules`` as constants (``requires_grad=False``).

    Used when gradients must flow *through* a network (dynamics backprop for continuous actors)
    without producing gradients *for* it, so the actor loss never touches world-model params.
    """
    params = [p for m in modules for p in m.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)
