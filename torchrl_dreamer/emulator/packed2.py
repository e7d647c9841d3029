"""The ``packed2`` observation format: 80x72 DMG shades, 2 bits per pixel, 4 pixels per byte.

A Game Boy frame is 160x144 pixels of 4 shades. ``packed2`` keeps every other pixel in both
directions (pure decimation: output ``(ox, oy)`` is source pixel ``(2*ox, 2*oy)``, the top-left of
each 2x2 block) and packs 4 consecutive pixels of a row into one byte, pixel ``k`` of the group at
bits ``2k..2k+1`` (leftmost pixel in the low bits). A frame is ``uint8[1, 72, 20]`` = 1,440 bytes,
16x smaller than a ``uint8[144, 160]`` frame, which is what makes a pixel replay buffer of millions
of frames fit in GPU memory. The emulator kernel writes it directly (see
:func:`torchrl_dreamer.emulator.render.pack_line_packed2`); these torch helpers pack, unpack and
colour it outside the kernel. The full spec is ``docs/packed2.md``.

Shades are palette-mapped DMG shades: 0 is the lightest (white), 3 the darkest (black).

Example:
    >>> import torch
    >>> from torchrl_dreamer.emulator.packed2 import pack_packed2, unpack_packed2
    >>> fb = torch.randint(0, 4, (2, 144, 160), dtype=torch.uint8)
    >>> obs = pack_packed2(fb)
    >>> obs.shape
    torch.Size([2, 1, 72, 20])
    >>> bool((unpack_packed2(obs) == fb[:, None, ::2, ::2]).all())
    True
"""

from __future__ import annotations

import torch

__all__ = [
    "SCREEN_HEIGHT",
    "SCREEN_WIDTH",
    "PACKED2_HEIGHT",
    "PACKED2_WIDTH",
    "PACKED2_ROW_BYTES",
    "PACKED2_SHAPE",
    "PACKED2_FRAME_BYTES",
    "PIXELS_PER_BYTE",
    "DMG_SHADES_RGB",
    "packed2_lut",
    "packed2_normalized_lut",
    "gather_packed2",
    "pack_packed2",
    "unpack_packed2",
    "shades_to_rgb",
    "shades_to_grey",
    "normalize_shades",
]

SCREEN_HEIGHT = 144
"""Game Boy screen height in pixels."""
SCREEN_WIDTH = 160
"""Game Boy screen width in pixels."""
PACKED2_HEIGHT = SCREEN_HEIGHT // 2
"""Rows of a packed2 frame (72): every other screen line."""
PACKED2_WIDTH = SCREEN_WIDTH // 2
"""Pixels per packed2 row once unpacked (80): every other screen column."""
PIXELS_PER_BYTE = 4
"""Four 2-bit shades per byte."""
PACKED2_ROW_BYTES = PACKED2_WIDTH // PIXELS_PER_BYTE
"""Bytes per packed2 row (20)."""
PACKED2_SHAPE = (1, PACKED2_HEIGHT, PACKED2_ROW_BYTES)
"""Shape of one packed2 observation, channel-first like TorchRL pixels: ``(1, 72, 20)``."""
PACKED2_FRAME_BYTES = PACKED2_HEIGHT * PACKED2_ROW_BYTES
"""Bytes per packed2 frame (1,440)."""

DMG_SHADES_RGB = ((0xFF, 0xFF, 0xFF), (0xAA, 0xAA, 0xAA), (0x55, 0x55, 0x55), (0x00, 0x00, 0x00))
"""RGB of shades 0..3: the grey ramp PyBoy uses with ``color_palette=(0xFFFFFF, 0xAAAAAA,
0x555555, 0x000000)`` and that screenshot test suites use. The one palette of the package: the
env's RGB view, the eval GIFs and videos, the PNGs of ``spec_check`` and the play tool all colour
shades with it."""

_LUT_CACHE: dict[torch.device, torch.Tensor] = {}


def packed2_lut(device: torch.device | str = "cpu") -> torch.Tensor:
    """The ``uint8[256, 4]`` unpacking table: ``lut[byte, k]`` is the shade of pixel ``k``.

    Cached per device so repeated unpacking on the GPU does not re-upload it.
    """
    device = torch.device(device)
    lut = _LUT_CACHE.get(device)
    if lut is None:
        byte = torch.arange(256, dtype=torch.int32)
        shifts = torch.arange(PIXELS_PER_BYTE, dtype=torch.int32) * 2
        lut = ((byte[:, None] >> shifts[None, :]) & 3).to(torch.uint8).to(device)
        _LUT_CACHE[device] = lut
    return lut


def packed2_normalized_lut(
    device: torch.device | str | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The ``[256, 4]`` table of :func:`packed2_lut` in the encoders' input scale
    (:func:`normalize_shades`: ``shade / 3 - 0.5``), so one gather unpacks and normalises.

    Example:
        >>> [round(v, 4) for v in packed2_normalized_lut()[0b11100100].tolist()]
        [-0.5, -0.1667, 0.1667, 0.5]
    """
    return normalize_shades(packed2_lut("cpu" if device is None else device), dtype).contiguous()


def gather_packed2(packed: torch.Tensor, lut: torch.Tensor) -> torch.Tensor:
    """Unpack bytes ``uint8[..., W/4]`` through a ``[256, 4]`` table into ``[..., W]`` of the
    table's dtype (pixel ``k`` of a byte is ``lut[byte, k]``), on ``packed``'s device.

    The one unpacking gather: :func:`unpack_packed2` passes :func:`packed2_lut` (shades), the
    encoders :func:`packed2_normalized_lut` (their float input). ``index_select`` with int32
    indices takes a third of the time of ``lut[packed.long()]`` on CPU.

    Example:
        >>> x = torch.tensor([[0b11100100, 0b00000011]], dtype=torch.uint8)
        >>> gather_packed2(x, packed2_lut()).tolist()
        [[0, 1, 2, 3, 3, 0, 0, 0]]
    """
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed2 observations must be uint8, got {packed.dtype}")
    out = lut.index_select(0, packed.reshape(-1).int())
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * PIXELS_PER_BYTE)


def _check_shades(x: torch.Tensor, validate: bool) -> None:
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(
            f"shades must be an integer tensor (values 0..3), got dtype {x.dtype}; "
            "convert with .round().to(torch.uint8) first"
        )
    if validate and x.numel() and bool(((x < 0) | (x > 3)).any()):
        raise ValueError(
            "shades must lie in 0..3 (palette-mapped DMG shades); got values outside that range. "
            "Map colour indices through BGP/OBP first, or pass validate=False if you already know "
            "the range (the values are then masked to 2 bits)."
        )


def pack_packed2(x: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """Pack shades into ``packed2`` bytes.

    Args:
        x: either full frames ``[*B, 144, 160]`` (decimated here: top-left pixel of each 2x2
            block) or already-decimated shades ``[*B, 1, 72, 80]``. Integer dtype, values 0..3.
        validate: check the value range (a host sync); pass ``False`` in hot loops.

    Returns:
        ``uint8[*B, 1, 72, 20]`` on ``x``'s device.
    """
    _check_shades(x, validate)
    if x.dim() >= 2 and tuple(x.shape[-2:]) == (SCREEN_HEIGHT, SCREEN_WIDTH):
        shades = x[..., ::2, ::2].unsqueeze(-3)
    elif x.dim() >= 3 and tuple(x.shape[-3:]) == (1, PACKED2_HEIGHT, PACKED2_WIDTH):
        shades = x
    else:
        raise ValueError(
            f"pack_packed2 expects frames [*B, {SCREEN_HEIGHT}, {SCREEN_WIDTH}] or decimated "
            f"shades [*B, 1, {PACKED2_HEIGHT}, {PACKED2_WIDTH}], got shape {tuple(x.shape)}"
        )
    groups = (shades.to(torch.int32) & 3).unflatten(-1, (PACKED2_ROW_BYTES, PIXELS_PER_BYTE))
    shifts = torch.arange(PIXELS_PER_BYTE, dtype=torch.int32, device=x.device) * 2
    return (groups << shifts).sum(-1).to(torch.uint8)


def unpack_packed2(x: torch.Tensor) -> torch.Tensor:
    """Unpack ``packed2`` bytes ``uint8[*B, 1, 72, 20]`` into shades ``uint8[*B, 1, 72, 80]``.

    Uses the 256x4 table of :func:`packed2_lut` on ``x``'s device (one gather, no Python loop).
    """
    if x.dtype != torch.uint8:
        raise TypeError(f"packed2 observations are uint8, got dtype {x.dtype}")
    if x.dim() < 3 or tuple(x.shape[-3:]) != PACKED2_SHAPE:
        raise ValueError(
            f"unpack_packed2 expects [*B, {', '.join(map(str, PACKED2_SHAPE))}], "
            f"got shape {tuple(x.shape)}"
        )
    return gather_packed2(x, packed2_lut(x.device))


def shades_to_rgb(
    shades: torch.Tensor,
    palette: tuple[tuple[int, int, int], ...] | torch.Tensor = DMG_SHADES_RGB,
    channels_last: bool = False,
) -> torch.Tensor:
    """Colour shades ``[*B, H, W]`` (values 0..3) as ``uint8`` RGB for videos and viewing.

    Returns ``[*B, 3, H, W]`` (TorchRL's channel-first pixel layout) or ``[*B, H, W, 3]`` with
    ``channels_last=True``. Unpacked packed2 frames ``[N, 1, 72, 80]`` give ``[N, 1, 3, 72, 80]``;
    squeeze the channel first (``shades.squeeze(-3)``) for ``[N, 3, 72, 80]``.

    Args:
        shades: integer tensor of shades 0..3.
        palette: 4 RGB triples (``uint8[4, 3]``), lightest first; defaults to the grey ramp.
        channels_last: put the colour channel last instead of before ``H, W``.
    """
    _check_shades(shades, validate=False)
    if shades.dim() < 2:
        raise ValueError(f"shades_to_rgb expects [*B, H, W], got shape {tuple(shades.shape)}")
    pal = torch.as_tensor(palette, dtype=torch.uint8, device=shades.device)
    if tuple(pal.shape) != (4, 3):
        raise ValueError(f"palette must be 4 RGB triples (shape (4, 3)), got {tuple(pal.shape)}")
    rgb = pal[(shades.long() & 3)]
    return rgb if channels_last else rgb.movedim(-1, -3)


def shades_to_grey(shades: torch.Tensor) -> torch.Tensor:
    """Shades ``0..3`` (any shape; out-of-range values clamped) as ``uint8`` grey levels of
    :data:`DMG_SHADES_RGB` (255, 170, 85, 0), on ``shades``' device: the picture of a frame in
    the videos, the TensorBoard logger and the PNG files.

    Example:
        >>> shades_to_grey(torch.arange(4)).tolist()
        [255, 170, 85, 0]
    """
    grey = torch.tensor([c[0] for c in DMG_SHADES_RGB], dtype=torch.uint8, device=shades.device)
    return grey[shades.long().clamp(0, 3)]


def normalize_shades(shades: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Map shades 0..3 to ``shade / 3 - 0.5`` in ``[-0.5, 0.5]``, the encoders' input scale."""
    return shades.to(dtype) / 3.0 - 0.5
