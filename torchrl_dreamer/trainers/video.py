"""World-model videos: real frames, reconstructions and open-loop imagination side by side.

DreamerV3's open-loop report shows what a world model has learned: for a few recorded
sequences, the posterior reconstructs the first ``context`` frames from observations, then the
prior rolls forward on the recorded actions alone and the decoder draws what it imagines. Three
panels per frame, left to right: real, reconstruction (posterior on every step), open loop
(posterior for ``context`` steps, prior after). A bar under the open-loop panel turns dark once
imagination starts.

Videos are written as MP4 through imageio and the ffmpeg binary its ``imageio-ffmpeg`` wheel
ships (Game Boy shades as a grey ramp, frames upscaled), with our own GIF writer as the fallback
when imageio or ffmpeg is missing or the path ends in ``.gif``.

Example:
    >>> import torch
    >>> from torchrl_dreamer.modules import make_dreamer
    >>> from torchrl_dreamer.trainers.video import open_loop_frames, write_video
    >>> wm, _, _ = make_dreamer("tiny", {"pixels": "packed2"}, action_dim=5)
    >>> T, B = 6, 2
    >>> pixels = torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8)
    >>> actions = torch.nn.functional.one_hot(torch.randint(0, 5, (T, B)), 5).float()
    >>> is_first = torch.zeros(T, B, dtype=torch.bool); is_first[0] = True
    >>> frames = open_loop_frames(wm, pixels, actions, is_first, context=3)
    >>> frames.shape, frames.dtype
    (torch.Size([2, 6, 76, 240]), torch.uint8)
    >>> path = write_video("/tmp/wm_report.gif", frames[0])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path

import torch

from torchrl_dreamer.emulator.packed2 import shades_to_grey
from torchrl_dreamer.modules.latent import latent_of
from torchrl_dreamer.trainers.gif import write_gif

__all__ = ["open_loop_frames", "replay_open_loop", "write_video", "BAR_ROWS"]

BAR_ROWS = 4
"""Rows of the context/imagination indicator bar under each frame."""


def _to_shades(x: torch.Tensor) -> torch.Tensor:
    """Decoder output in preprocessed space (``shade / 3 - 0.5``) to shades ``uint8 0..3``."""
    return ((x.float() + 0.5) * 3).round().clamp(0, 3).to(torch.uint8)


@torch.no_grad()
def open_loop_frames(world_model, pixels: torch.Tensor, prev_action: torch.Tensor,
                     is_first: torch.Tensor, context: int = 8, key: str = "pixels",
                     others: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
    """The open-loop report of ``world_model`` on recorded sequences, as shades.

    Args:
        world_model: a :class:`~torchrl_dreamer.modules.WorldModel` with a packed2 image key.
        pixels: ``uint8 [T, B, 1, 72, 20]`` packed2 observations (time-major, as the replay
            samples them).
        prev_action: ``[T, B, A]``: row ``t`` is the action taken before ``pixels[t]`` (the
            replay's row alignment; see docs/row_alignment.md).
        is_first: ``bool [T, B]``.
        context: observed steps before imagination starts (``1 <= context <= T``).
        key: the image observation key.
        others: the world model's other observations of the same steps (``[T, B, ...]``, e.g.
            a task's RAM vectors), which the posterior reads too; every key of
            ``world_model.obs_keys`` but ``key`` must be there.

    Returns:
        ``uint8 [B, T, 72 + BAR_ROWS, 3 * 80]``: real | reconstruction | open loop, shades 0..3.
    """
    T = pixels.shape[0]
    if not 1 <= context <= T:
        raise ValueError(f"context must lie in 1..{T} (the sequence length), got {context}")
    if key not in getattr(world_model, "decoders", {}):
        raise ValueError(f"the world model has no decoder for {key!r}; videos need an image key")
    was_training = world_model.training
    world_model.eval()
    try:
        inputs = world_model.preprocess({**(others or {}), key: pixels})
        post = world_model.rssm.observe(world_model.embed(inputs), prev_action, is_first)
        h, z = post["h"], post["z"]
        recon = world_model.decode(latent_of(z, h))[key]
        hc, zc = h[context - 1], z[context - 1]
        imagined = [latent_of(zc, hc)]
        for t in range(context, T):
            hc, zc = world_model.rssm.img_step(hc, zc, prev_action[t], sample=False)
            imagined.append(latent_of(zc, hc))
        open_loop = torch.cat([latent_of(z[: context - 1], h[: context - 1]),
                               torch.stack(imagined, 0)], 0)
        dream = world_model.decode(open_loop)[key]
    finally:
        world_model.train(was_training)
    real = _to_shades(inputs[key])[:, :, 0]
    panels = torch.cat([real, _to_shades(recon)[:, :, 0], _to_shades(dream)[:, :, 0]], -1)
    B, W = panels.shape[1], panels.shape[-1]
    bar = torch.zeros(T, B, BAR_ROWS, W, dtype=torch.uint8)
    bar[context:, :, :, 2 * W // 3:] = 3  # imagination: dark bar under the open-loop panel
    bar[:, :, 0] = 1  # a light separator line
    return torch.cat([panels.cpu(), bar], 2).transpose(0, 1).contiguous()


def replay_open_loop(world_model, storage, sequences: int = 4, length: int = 32,
                     context: int = 8, seed: int = 0) -> torch.Tensor | None:
    """The open-loop report on ``sequences`` random windows of a replay storage
    (:class:`~torchrl_dreamer.data.storage.TimeMajorStorage`), stacked vertically:
    ``uint8 [T, sequences * (72 + BAR_ROWS), 240]`` shades, or ``None`` while the replay holds
    fewer than ``length`` committed rows. Its own generator (``seed``): the training sampler's
    draws are left alone."""
    from torchrl_dreamer.data.dreamer_inputs import rssm_inputs
    from torchrl_dreamer.data.sampler import ChronologicalSliceSampler

    lo, hi = storage.sampleable_range()
    if hi - lo < length:
        return None
    sampler = ChronologicalSliceSampler(slice_len=length,
                                        generator=torch.Generator().manual_seed(seed))
    data, _ = sampler.sample_sequences(storage, sequences * length)  # [T, B]
    dev = next(world_model.parameters()).device
    prev_action, is_first = rssm_inputs(data.get("action").to(dev),
                                        data.get("is_first").reshape(length, sequences).to(dev),
                                        world_model.action_dim)
    others = {k: data.get(k).to(dev) for k in world_model.obs_keys if k != "pixels"}
    frames = open_loop_frames(world_model, data.get("pixels").to(dev), prev_action, is_first,
                              context=min(context, length), others=others)
    return torch.cat(list(frames), 1)


def write_video(path: str | Path, frames: torch.Tensor, fps: float = 8.0, scale: int = 2) -> Path:
    """Write ``frames`` (``uint8 [T, H, W]`` shades 0..3) as MP4, or as GIF for a ``.gif``
    path or when imageio/ffmpeg is unavailable (one warning; the path's suffix then becomes
    ``.gif``). Returns the path written."""
    path = Path(path)
    if frames.dim() != 3 or frames.dtype != torch.uint8:
        raise ValueError(f"frames must be uint8 [T, H, W] shades, got {frames.dtype} "
                         f"{tuple(frames.shape)}")
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() != ".gif":
        try:
            import imageio.v2 as imageio
            import imageio_ffmpeg  # noqa: F401  (ships the ffmpeg binary)

            rgb = shades_to_grey(frames).repeat_interleave(scale, 1).repeat_interleave(scale, 2)
            H, W = rgb.shape[1:]
            pad_h, pad_w = (-H) % 16, (-W) % 16  # codecs want multiples of 16
            rgb = torch.nn.functional.pad(rgb, (0, pad_w, 0, pad_h), value=255)
            rgb = rgb.unsqueeze(-1).expand(*rgb.shape, 3).numpy()
            with imageio.get_writer(path, fps=fps, codec="libx264", quality=8,
                                    macro_block_size=1, ffmpeg_log_level="error") as w:
                for frame in rgb:
                    w.append_data(frame)
            return path
        except ImportError as err:
            warnings.warn(f"cannot write MP4 ({err}); writing a GIF instead (pip install "
                          "imageio imageio-ffmpeg for MP4)", RuntimeWarning, stacklevel=2)
            path = path.with_suffix(".gif")
    return write_gif(path, frames, fps=fps, scale=scale)
