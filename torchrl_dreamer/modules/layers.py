"""Building blocks: LayerNorm+SiLU MLP, channel LayerNorm for images, LayerNorm GRU cell.

Written here (not ``torchrl.modules.MLP`` / ``DreamerV3MLP``) because the 2023 design needs
``Linear(bias=False) -> LayerNorm(eps=1e-3) -> SiLU`` blocks and a LayerNorm GRU with update bias
-1, neither of which TorchRL ships (it has plain ``GRUCell`` or an RMSNorm block GRU).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MLP", "ChannelLayerNorm", "LayerNormGRUCell"]

LN_EPS = 1e-3


class MLP(nn.Sequential):
    """``layers`` blocks of ``Linear(no bias) -> LayerNorm(1e-3) -> SiLU``.

    Example:
        >>> MLP(10, 32, layers=2)(torch.zeros(4, 10)).shape
        torch.Size([4, 32])
    """

    def __init__(self, in_features: int, units: int, layers: int = 1) -> None:
        if layers < 1:
            raise ValueError(f"MLP needs layers >= 1, got {layers}")
        mods: list[nn.Module] = []
        for i in range(layers):
            mods += [
                nn.Linear(in_features if i == 0 else units, units, bias=False),
                nn.LayerNorm(units, eps=LN_EPS),
                nn.SiLU(),
            ]
        super().__init__(*mods)
        self.out_features = units


class ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over the channel dim of an ``[N, C, H, W]`` image (per pixel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class LayerNormGRUCell(nn.Module):
    """GRU cell of DreamerV3: ``LN(W [x, h])`` split into reset, candidate, update.

    ``r = sigmoid(r)``, ``c = tanh(r * c)``, ``u = sigmoid(u - 1)``, ``h' = u c + (1 - u) h``.
    The cell always computes in fp32, even under autocast, so the recurrent state does not drift
    in low precision over long scans.

    Example:
        >>> cell = LayerNormGRUCell(8, 16)
        >>> cell(torch.zeros(2, 8), torch.zeros(2, 16)).shape
        torch.Size([2, 16])
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.linear = nn.Linear(input_size + hidden_size, 3 * hidden_size, bias=False)
        self.norm = nn.LayerNorm(3 * hidden_size, eps=LN_EPS)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """Next hidden state ``[..., hidden]`` (fp32 or wider) from input ``x`` and state ``h``."""
        return self.step(x, h, self.linear.weight.t())

    def step(self, x: torch.Tensor, h: torch.Tensor, weight_t: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` with the transposed weight given (``self.linear.weight.t()``).

        A scan takes the transpose once instead of once per step (``F.linear`` transposes on
        every call, one more dispatched op each time).
        """
        # at least fp32 (torch.promote_types would be one more dispatched op per step)
        dtype = h.dtype if h.dtype in (torch.float32, torch.float64) else torch.float32
        with _no_autocast(h):
            h = h.to(dtype)
            xh = torch.cat([x.to(dtype), h], -1)
            parts = self.norm(xh @ weight_t.to(dtype))
            reset, cand, update = parts.chunk(3, -1)
            cand = torch.tanh(torch.sigmoid(reset) * cand)
            update = torch.sigmoid(update - 1.0)
            # u c + (1 - u) h as one op
            return torch.lerp(h, cand, update)


def _no_autocast(x: torch.Tensor) -> contextlib.AbstractContextManager:
    """Disable autocast on ``x``'s device if it is on (entering the context costs a little)."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.autocast(device_type=x.device.type, enabled=False)
    return contextlib.nullcontext()
