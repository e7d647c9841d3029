"""Observation encoders and decoders: packed2 Game Boy frames, generic images, vectors.

Every encoder exposes ``preprocess(obs) -> float tensor`` (also the reconstruction target) and
``forward(preprocessed) -> embedding``; the matching decoder maps the latent back to the
preprocessed space. Leading batch dims (e.g. time-major ``[T, B]``) are kept.

CNN activations and weights use the channels-last memory format: the per-pixel channel
LayerNorm then reads contiguous memory and oneDNN/cuDNN convolutions prefer NHWC (about 6% faster
on CPU at size S); parameter values and shapes are unchanged.

Why our own: TorchRL's ``DreamerV3ImageDecoder`` requires H, W divisible by ``2**stages`` and so
cannot run 4 stages at 72x80; ours mirrors the encoder's exact stage sizes with
``output_padding``. Conv blocks follow the 2023 design (``Conv(k4, s2, p1, no bias) ->
channel LayerNorm(1e-3) -> SiLU``, channels ``[1, 2, 4, 8] * mult``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE, gather_packed2, packed2_normalized_lut
from torchrl_dreamer.modules.functional import at_least_fp32, symlog
from torchrl_dreamer.modules.init import hafner_init_, uniform_init_
from torchrl_dreamer.modules.layers import LN_EPS, MLP, ChannelLayerNorm

__all__ = [
    "conv_stage_sizes",
    "SpaceToDepth",
    "DepthToSpace",
    "ImageEncoder",
    "Packed2Encoder",
    "VectorEncoder",
    "ImageDecoder",
    "VectorDecoder",
]

def conv_stage_sizes(size: int, stages: int) -> list[int]:
    """Spatial sizes after each ``Conv(k4, s2, p1)`` stage, input first (72 -> 36, 18, 9, 4)."""
    sizes = [size]
    for _ in range(stages):
        size = (size - 2) // 2 + 1
        if size < 1:
            raise ValueError(f"image too small for {stages} conv stages")
        sizes.append(size)
    return sizes


#: A dtype whose one element spans this many bytes (the "group" view of ``_groups``).
_GROUP_DTYPE = {4: torch.int32, 8: torch.int64, 16: torch.complex128}


def _groups(x: torch.Tensor, r: int) -> torch.Tensor | None:
    """``x`` (contiguous, last dim divisible by ``r``) viewed with each ``r`` neighbours of its
    last dim as one element, or ``None`` where that view does not exist.

    A permute that keeps horizontal runs of ``r`` pixels together then copies 8- or 16-byte
    elements instead of strided 4-byte ones: the rearrangements below cost a seventh of a plain
    permuted copy on CPU (2x2 blocks: 0.19 ms against 1.25 ms for 256 72x80 frames; 4x4 blocks:
    0.25 against 1.9 ms; one thread). Inside ``torch.compile`` the plain permute is left to the
    compiler.
    """
    group = _GROUP_DTYPE.get(x.element_size() * r)
    if torch.compiler.is_compiling():  # a compiled graph fuses the plain permute by itself
        return None
    if group is None or x.is_complex() or x.shape[-1] % r or x.storage_offset() % r:
        return None
    return x.view(group)


def _space_to_depth(x: torch.Tensor, r: int = 2) -> torch.Tensor:
    """``[N, C, H, W] -> [N, r*r*C, H/r, W/r]`` (``PixelUnshuffle(r)`` layout) in the
    channels-last memory format."""
    n, c, h, w = x.shape
    runs = _groups(x.contiguous(), r)
    if runs is None:
        y = x.reshape(n, c, h // r, r, w // r, r).permute(0, 2, 4, 1, 3, 5)
        return y.reshape(n, h // r, w // r, c * r * r).permute(0, 3, 1, 2)
    # memory [N, C, H/r, dy, W/r] (runs of r dx) -> [N, H/r, W/r, C, dy]
    y = runs.reshape(n, c, h // r, r, w // r).permute(0, 2, 4, 1, 3).contiguous()
    return y.view(x.dtype).reshape(n, h // r, w // r, c * r * r).permute(0, 3, 1, 2)


def _depth_to_space(x: torch.Tensor, r: int = 2) -> torch.Tensor:
    """``[N, r*r*C, H, W]`` (any memory format) ``-> [N, C, r*H, r*W]``, contiguous
    (``PixelShuffle(r)`` layout)."""
    n, crr, h, w = x.shape
    c = crr // (r * r)
    hwc = x.permute(0, 2, 3, 1).contiguous()  # a view for channels-last inputs
    runs = _groups(hwc, r)
    if runs is None:
        y = hwc.reshape(n, h, w, c, r, r).permute(0, 3, 1, 4, 2, 5)
        return y.reshape(n, c, h * r, w * r)
    # memory [N, H, W, C, dy] (runs of r dx) -> [N, C, H, dy, W]
    y = runs.reshape(n, h, w, c, r).permute(0, 3, 1, 4, 2).contiguous()
    return y.view(x.dtype).reshape(n, c, h * r, w * r)


class _SpaceToDepthFn(torch.autograd.Function):
    """2x2 space-to-depth with the grouped copies in both directions."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return _space_to_depth(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return _depth_to_space(grad)


class _DepthToSpaceFn(torch.autograd.Function):
    """``r x r`` depth-to-space with the grouped copies in both directions."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, r: int) -> torch.Tensor:  # noqa: D102
        ctx.r = r
        return _depth_to_space(x, r)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: D102
        return _space_to_depth(grad, ctx.r), None


class SpaceToDepth(nn.Module):
    """2x2 space-to-depth ``[N, C, H, W] -> [N, 4C, H/2, W/2]`` (``PixelUnshuffle(2)`` layout).

    The output is channels-last, as the convolution after it wants it, and is made by one copy
    that moves horizontal pixel pairs as single 8-byte elements (see ``_groups``): about a third
    of the time of ``reshape/permute`` plus the convolution's own channels-last conversion, and
    a seventh of ``nn.PixelUnshuffle``'s.

    Example:
        >>> x = torch.arange(16.0).reshape(1, 1, 4, 4)
        >>> torch.equal(SpaceToDepth()(x), torch.nn.functional.pixel_unshuffle(x, 2))
        True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, C, H, W] -> [N, 4C, H/2, W/2]`` (channels-last memory)."""
        return _SpaceToDepthFn.apply(x)


class DepthToSpace(nn.Module):
    """Inverse of :class:`SpaceToDepth` (``PixelShuffle(2)`` layout), by the same grouped copies.

    Example:
        >>> y = torch.arange(16.0).reshape(1, 4, 2, 2)
        >>> torch.equal(DepthToSpace()(y), torch.nn.functional.pixel_shuffle(y, 2))
        True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, 4C, H, W] -> [N, C, 2H, 2W]`` (contiguous)."""
        return _DepthToSpaceFn.apply(x, 2)


def _stem_stages(stem: str, shape: tuple[int, int, int]) -> int:
    """Number of stages replaced by the stem: 0 for ``"conv"``, 1 for ``"space_to_depth"``."""
    if stem == "conv":
        return 0
    if stem == "space_to_depth":
        if shape[1] % 2 or shape[2] % 2:
            raise ValueError(f"stem='space_to_depth' needs even H and W, got {shape}")
        return 1
    raise ValueError(f"stem must be 'conv' or 'space_to_depth', got {stem!r}")


class ImageEncoder(nn.Module):
    """Strided CNN encoder for ``[..., C, H, W]`` images (uint8 -> ``x/255 - 0.5``; float as is).

    ``stem="space_to_depth"`` replaces the first strided conv by a parameter-free 2x2
    ``PixelUnshuffle`` (same output grid, ~3x cheaper on CPU: the full-resolution conv and its
    4-channel LayerNorm dominate small models); the ``tiny`` preset uses it. The reference
    design (and XS..XL) uses ``stem="conv"``.

    Example:
        >>> enc = ImageEncoder((1, 72, 80), mult=4)
        >>> enc(enc.preprocess(torch.zeros(3, 2, 1, 72, 80))).shape
        torch.Size([3, 2, 640])
    """

    def __init__(
        self,
        shape: tuple[int, int, int],
        mult: int = 32,
        stages: int = 4,
        stem: str = "conv",
    ) -> None:
        super().__init__()
        if len(shape) != 3:
            raise ValueError(f"image shape must be (C, H, W), got {shape}")
        self.shape = tuple(shape)
        c, h, w = shape
        chans = [c] + [mult * 2**i for i in range(stages)]
        layers: list[nn.Module] = []
        first = _stem_stages(stem, shape)
        if first:
            layers.append(SpaceToDepth())
            chans[1] = c * 4
        for i in range(first, stages):
            layers += [
                nn.Conv2d(chans[i], chans[i + 1], 4, 2, 1, bias=False),
                ChannelLayerNorm(chans[i + 1], eps=LN_EPS),
                nn.SiLU(),
            ]
        self.net = nn.Sequential(*layers)
        self.hs, self.ws = conv_stage_sizes(h, stages), conv_stage_sizes(w, stages)
        self.channels, self.stem = chans, stem
        self.out_features = chans[-1] * self.hs[-1] * self.ws[-1]
        hafner_init_(self)
        self.to(memory_format=torch.channels_last)

    def preprocess(self, obs: torch.Tensor) -> torch.Tensor:
        """uint8 images -> ``x / 255 - 0.5``; float images are returned unchanged."""
        if obs.dtype == torch.uint8:
            return obs.float() / 255.0 - 0.5
        return at_least_fp32(obs) if obs.is_floating_point() else obs.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embedding ``[..., out_features]`` of preprocessed images ``[..., C, H, W]``."""
        lead = x.shape[:-3]
        x = x.reshape(-1, *x.shape[-3:]).contiguous(memory_format=torch.channels_last)
        return self.net(x).reshape(*lead, -1)


class Packed2Encoder(ImageEncoder):
    """Encoder for packed2 Game Boy frames ``uint8 [..., 1, 72, 20]`` (4 shades per byte).

    Unpacks on the tensor's device with the 256x4 lookup table of
    :func:`~torchrl_dreamer.emulator.packed2.packed2_normalized_lut` into ``[..., 1, 72, 80]``
    shades ``x / 3 - 0.5``, then runs the image CNN.
    """

    def __init__(
        self, mult: int = 32, stages: int = 4, packed_shape=PACKED2_SHAPE, stem: str = "conv"
    ) -> None:
        c, h, w4 = packed_shape
        super().__init__((c, h, w4 * 4), mult=mult, stages=stages, stem=stem)
        self.packed_shape = tuple(packed_shape)
        self.register_buffer("lut", packed2_normalized_lut(), persistent=False)

    def preprocess(self, obs: torch.Tensor) -> torch.Tensor:
        """Unpack packed2 bytes to float shades ``[..., 1, 72, 80]`` (``x / 3 - 0.5``)."""
        if obs.dtype != torch.uint8 or tuple(obs.shape[-3:]) != self.packed_shape:
            raise ValueError(
                f"packed2 observations must be uint8 [..., {', '.join(map(str, self.packed_shape))}]"
                f", got {obs.dtype} {tuple(obs.shape)}; use ImageEncoder for unpacked images"
            )
        return gather_packed2(obs, self.lut)


class VectorEncoder(nn.Module):
    """MLP encoder for vector observations ``[..., D]``; inputs are symlog-squashed first."""

    def __init__(self, in_features: int, units: int = 512, layers: int = 2) -> None:
        super().__init__()
        self.net = MLP(in_features, units, layers)
        self.in_features = in_features
        self.out_features = units
        hafner_init_(self)

    def preprocess(self, obs: torch.Tensor) -> torch.Tensor:
        """``symlog(obs)`` as float (the encoder input and the decoder target)."""
        return symlog(at_least_fp32(obs) if obs.is_floating_point() else obs.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embedding ``[..., units]`` of symlog-squashed vectors."""
        return self.net(x)


class ImageDecoder(nn.Module):
    """Transposed-CNN decoder from the latent to an image of exactly ``shape`` (e.g. 1x72x80).

    ``Linear -> [ConvT(k4, s2, p1) -> LN -> SiLU] * (stages-1) -> ConvT``; each stage uses
    ``output_padding`` so it reproduces the encoder's stage sizes (72 <- 36 <- 18 <- 9 <- 4).

    ``subpixel`` (set where the output stage has no ``output_padding``): the output ConvT and
    the stem's depth-to-space run as one 3x3 conv to all output phases plus one copy
    (:meth:`_subpixel_out`), same parameters and maths; ``False`` runs the modules of ``net``.

    Example:
        >>> dec = ImageDecoder(64, (1, 72, 80), mult=4)
        >>> dec(torch.zeros(3, 2, 64)).shape
        torch.Size([3, 2, 1, 72, 80])
    """

    def __init__(
        self,
        in_features: int,
        shape: tuple[int, int, int],
        mult: int = 32,
        stages: int = 4,
        stem: str = "conv",
    ) -> None:
        super().__init__()
        c, h, w = shape
        self.shape = tuple(shape)
        hs, ws = conv_stage_sizes(h, stages), conv_stage_sizes(w, stages)
        chans = [c] + [mult * 2**i for i in range(stages)]
        first = _stem_stages(stem, shape)
        if first:
            chans[1] = c * 4
        self.start = (chans[-1], hs[-1], ws[-1])
        self.linear = nn.Linear(in_features, chans[-1] * hs[-1] * ws[-1])
        layers: list[nn.Module] = []
        for i in range(stages, first, -1):
            pad = (hs[i - 1] - 2 * hs[i], ws[i - 1] - 2 * ws[i])
            last = i == first + 1
            layers.append(
                nn.ConvTranspose2d(chans[i], chans[i - 1], 4, 2, 1, output_padding=pad, bias=last)
            )
            if not last:
                layers += [ChannelLayerNorm(chans[i - 1], eps=LN_EPS), nn.SiLU()]
        out_layer = layers[-1]
        self._body = len(layers) - 1  # the layers before the output ConvT
        if first:
            layers.append(DepthToSpace())
        self.net = nn.Sequential(*layers)
        hafner_init_(self)
        uniform_init_(out_layer, 1.0)
        self.to(memory_format=torch.channels_last)
        # the output ConvT (and the stem's DepthToSpace) as a sub-pixel conv where it has no
        # output_padding; ``net`` keeps the modules (and the state dict) of the reference path
        self.subpixel = out_layer.output_padding == (0, 0)
        self._block = 4 if first else 2
        index, bias_index = _subpixel_indices(out_layer, self._block)
        self.register_buffer("_subpixel_index", index, persistent=False)
        self.register_buffer("_subpixel_bias_index", bias_index, persistent=False)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """Reconstructed image ``[..., C, H, W]`` (preprocessed space) from ``[..., latent]``."""
        lead = latent.shape[:-1]
        x = self.linear(latent.reshape(-1, latent.shape[-1])).reshape(-1, *self.start)
        x = x.contiguous(memory_format=torch.channels_last)
        if self.subpixel:
            x = self._subpixel_out(self.net[: self._body](x))
        else:
            x = self.net(x)
        return x.contiguous().reshape(*lead, *self.shape)

    def _subpixel_out(self, x: torch.Tensor) -> torch.Tensor:
        """The output ``ConvT(k4, s2, p1)`` (and the stem's 2x2 ``DepthToSpace``) as one 3x3
        conv to every output phase's channels plus one ``r x r`` depth-to-space.

        Each output pixel of the ConvT sees a 2x2 window of input pixels, so one 3x3 conv with
        ``4 x C_out`` channels (phase ``(a, b)`` reading its own four taps, zeros elsewhere)
        gives every phase at once; its weight is gathered from the ConvT's. The backward is the
        ConvT's own (``aten.convolution_backward``), which has no zero taps to multiply. Same
        maths as ``net`` (outputs and gradients equal to float rounding); on CPU oneDNN's
        transposed convolution to a few channels is slow: the maze decoder's output layer
        takes 9 ms forward and backward at B8xT32 instead of 16.7 (one thread).
        """
        conv = self.net[self._body]
        return _SubpixelConvT.apply(
            x, conv.weight, conv.bias, self._subpixel_index, self._subpixel_bias_index,
            self._block,
        )


class _SubpixelConvT(torch.autograd.Function):
    """``ConvT(k4, s2, p1)`` (+ 2x2 depth-to-space for ``block`` 4): sub-pixel 3x3 conv
    forward, the transposed convolution's backward.

    Under autocast both run in the autocast dtype, as the convolutions they replace would (the
    backward is not an autocast op, so the cast is done here); gradients come back in each
    input's own dtype.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, index, bias_index, block):  # noqa: D102
        device = x.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
        ctx.dtypes = (x.dtype, weight.dtype, None if bias is None else bias.dtype)
        with torch.autocast(device, enabled=False):
            x, weight = x.to(dtype), weight.to(dtype)
            flat = F.pad(weight.reshape(-1), (0, 1))  # the last entry is the zero tap
            k = flat.index_select(0, index.reshape(-1)).view(index.shape)
            b = None if bias is None else bias.to(dtype).index_select(0, bias_index)
            y = F.conv2d(x, k.contiguous(memory_format=torch.channels_last), b, 1, 1)
        ctx.save_for_backward(x, weight)
        ctx.block, ctx.has_bias = block, bias is not None
        return _depth_to_space(y, block)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        x, weight = ctx.saved_tensors
        # the gradient in the ConvT output's own layout (channels-last)
        if ctx.block == 4:
            grad = _space_to_depth(grad, 2)
        else:
            grad = grad.contiguous(memory_format=torch.channels_last)
        need = ctx.needs_input_grad
        gx, gw, gb = torch.ops.aten.convolution_backward(
            grad.to(x.dtype), x, weight, [weight.shape[1]] if ctx.has_bias else None, [2, 2],
            [1, 1], [1, 1], True, [0, 0], 1, [need[0], need[1], need[2] and ctx.has_bias],
        )
        back = [g if g is None else g.to(dt) for g, dt in zip((gx, gw, gb), ctx.dtypes)]
        return *back, None, None, None


# ConvT(k4, s2, p1): output row 2i + a reads input rows i + dy through kernel row k
_SUBPIXEL_TAPS = ({-1: 3, 0: 1}, {0: 2, 1: 0})  # per phase a: {dy: k}


def _subpixel_indices(conv: nn.ConvTranspose2d, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather indices turning ``conv``'s weight ``[C_in, C_out, 4, 4]`` (flattened, plus a zero
    at the end) into a 3x3 conv weight ``[4 C_out, C_in, 3, 3]`` and its bias ``[C_out]`` into
    ``[4 C_out]``, with output channels in ``PixelShuffle(block)`` order of the final image.

    ``block`` 2: the ConvT's output is the image, channel ``c`` at phase ``(a, b)`` is output
    channel ``(c, a, b)``. ``block`` 4: a 2x2 ``DepthToSpace`` follows, so ConvT channel
    ``(c, dy, dx)`` at phase ``(a, b)`` is image channel ``c`` at ``(2a + dy, 2b + dx)``.
    """
    c_in, c_out = conv.in_channels, conv.out_channels
    zero = c_in * c_out * 16
    index = torch.full((4 * c_out, c_in, 3, 3), zero, dtype=torch.long)
    bias_index = torch.zeros(4 * c_out, dtype=torch.long)
    per = block * block
    for oc in range(4 * c_out):
        c, ry, rx = oc // per, oc % per // block, oc % block
        if block == 2:
            co, a, b = c, ry, rx
        else:
            co, a, b = c * 4 + (ry % 2) * 2 + rx % 2, ry // 2, rx // 2
        bias_index[oc] = co
        for dy, ky in _SUBPIXEL_TAPS[a].items():
            for dx, kx in _SUBPIXEL_TAPS[b].items():
                for ci in range(c_in):
                    index[oc, ci, dy + 1, dx + 1] = ((ci * c_out + co) * 4 + ky) * 4 + kx
    return index, bias_index


class VectorDecoder(nn.Module):
    """MLP decoder from the latent to a vector ``[..., D]`` in symlog space."""

    def __init__(self, in_features: int, out_features: int, units: int = 512, layers: int = 2):
        super().__init__()
        self.net = MLP(in_features, units, layers)
        self.out = nn.Linear(units, out_features)
        self.shape = (out_features,)
        hafner_init_(self)
        uniform_init_(self.out, 1.0)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """Reconstructed vector ``[..., D]`` in symlog space."""
        return self.out(self.net(latent))
