"""Hafner initialisation used by DreamerV3 (2023 / sheeprl 0.8.4).

Hidden ``Linear``/``Conv``/``ConvTranspose`` weights: truncated normal with
``std = sqrt(1 / fan_avg) / 0.8796`` truncated at +-2 std; biases zero; norms ``(1, 0)``.
Output layers use a uniform ``U(-l, l)`` with ``l = sqrt(3 * scale / fan_avg)`` (``scale=1`` for
actor, latent logits, continue and decoder outputs; ``scale=0``, i.e. zeros, for reward and
critic). Written here because TorchRL's ``_dreamer_v3_init`` targets the 2024 design.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["fan_avg", "hafner_init_", "uniform_init_"]

_TRUNC_STD = 0.87962566103423978  # std of a unit normal truncated at +-2


def fan_avg(weight: torch.Tensor) -> float:
    """Mean of fan-in and fan-out of a Linear/Conv weight (kernel area included)."""
    if weight.dim() < 2:
        raise ValueError(f"fan_avg needs a weight with >= 2 dims, got shape {tuple(weight.shape)}")
    receptive = weight[0, 0].numel()
    return (weight.shape[0] + weight.shape[1]) * receptive / 2.0


@torch.no_grad()
def hafner_init_(module: nn.Module) -> nn.Module:
    """Apply the truncated-normal init to every Linear/Conv/ConvTranspose in ``module``.

    Example:
        >>> lin = hafner_init_(nn.Linear(512, 512))
        >>> round(math.sqrt(1 / 512) / 0.8796, 5)
        0.05024
    """
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            std = math.sqrt(1.0 / fan_avg(m.weight)) / _TRUNC_STD
            nn.init.trunc_normal_(m.weight, 0.0, std, -2.0 * std, 2.0 * std)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            m.weight.fill_(1.0)
            if m.bias is not None:
                m.bias.zero_()
    return module


@torch.no_grad()
def uniform_init_(layer: nn.Module, scale: float = 1.0) -> nn.Module:
    """Uniform output-layer init with the given ``scale`` (``0`` gives an all-zero layer)."""
    if scale == 0.0:
        layer.weight.zero_()
    else:
        limit = math.sqrt(3.0 * scale / fan_avg(layer.weight))
        nn.init.uniform_(layer.weight, -limit, limit)
    if getattr(layer, "bias", None) is not None:
        layer.bias.zero_()
    return layer
