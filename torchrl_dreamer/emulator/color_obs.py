"""The opt-in colour observation of a Game Boy Color frame: ``uint8 [N, 3, 72, 80]``.

Same geometry as packed2 (``docs/packed2.md``): output pixel ``(ox, oy)`` is screen pixel
``(2*ox, 2*oy)`` of the last frame run, no averaging. Each RGB555 channel ``c`` (0..31, from
:attr:`~.gameboy.GameBoy.rgb555`) becomes 8 bits as ``c << 3 | c >> 2`` (0 -> 0, 31 -> 255), no
colour correction: the values the game wrote into palette memory, scaled. 17,280 bytes a frame
(12x packed2), for models that want colour; the default observation stays packed2 (the frame's
luminance shades). Host-side torch code, on the frame's device.

Example:
    >>> import torch
    >>> rgb555 = torch.full((1, 144, 160), 0x001F, dtype=torch.int16)  # pure red
    >>> color_frame(rgb555)[0, :, 0, 0].tolist()
    [255, 0, 0]
"""

from __future__ import annotations

import torch

from torchrl_dreamer.emulator.packed2 import PACKED2_HEIGHT, PACKED2_WIDTH

__all__ = ["COLOR_SHAPE", "color_frame"]

COLOR_SHAPE = (3, PACKED2_HEIGHT, PACKED2_WIDTH)
"""Shape of one colour observation: RGB channels, 72 rows, 80 columns."""


def color_frame(rgb555: torch.Tensor) -> torch.Tensor:
    """``uint8 [N, 3, 72, 80]`` colour observation of RGB555 frames ``int16 [N, 144, 160]``."""
    if rgb555.dim() != 3 or tuple(rgb555.shape[1:]) != (2 * PACKED2_HEIGHT, 2 * PACKED2_WIDTH):
        raise ValueError(f"rgb555 must be [N, 144, 160], got {tuple(rgb555.shape)}")
    x = rgb555[:, ::2, ::2].to(torch.int32)
    c = torch.stack([x & 31, (x >> 5) & 31, (x >> 10) & 31], dim=1)
    return ((c << 3) | (c >> 2)).to(torch.uint8)
