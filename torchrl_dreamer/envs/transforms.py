"""Observation transforms for Game Boy pixels.

:class:`UnpackPacked2` turns the compact packed2 observation (``uint8[*B, 1, 72, 20]``, 4 pixels
per byte) into shades ``uint8[*B, 1, 72, 80]`` (0..3) that image encoders and TorchRL's image
transforms (``ToTensorImage``, ``Resize``...) understand. It is ours because TorchRL has no notion
of the packed2 format; it is a plain :class:`~torchrl.envs.transforms.ObservationTransform`, so it
composes with any env or replay pipeline.

Example:
    >>> from torchrl.envs import TransformedEnv
    >>> from torchrl_dreamer.envs import GameBoyEnv, UnpackPacked2
    >>> env = TransformedEnv(GameBoyEnv("maze", num_envs=2), UnpackPacked2())  # the shipped maze
    >>> env.reset()["pixels"].shape
    torch.Size([2, 1, 72, 80])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchrl.data import Bounded
from torchrl.envs.transforms import ObservationTransform

from torchrl_dreamer.emulator.packed2 import (
    PACKED2_HEIGHT,
    PACKED2_SHAPE,
    PACKED2_WIDTH,
    shades_to_rgb,
    unpack_packed2,
)

__all__ = ["UnpackPacked2"]


class UnpackPacked2(ObservationTransform):
    """Unpack packed2 pixels into 2-bit shades (``[..., 1, 72, 20]`` → ``[..., 1, 72, 80]``).

    Args:
        in_keys: packed2 keys to read (default ``["pixels"]``).
        out_keys: where to write the shades (default: same as ``in_keys``, replacing them).
        rgb: write ``uint8[..., 3, 72, 80]`` RGB (grey ramp) instead of shades.
    """

    def __init__(
        self,
        in_keys: Sequence[str] | None = None,
        out_keys: Sequence[str] | None = None,
        rgb: bool = False,
    ):
        in_keys = list(in_keys) if in_keys is not None else ["pixels"]
        out_keys = list(out_keys) if out_keys is not None else list(in_keys)
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.rgb = bool(rgb)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        shades = unpack_packed2(obs)
        if self.rgb:
            return shades_to_rgb(shades.squeeze(-3))
        return shades

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            spec = observation_spec[in_key]
            if tuple(spec.shape[-3:]) != PACKED2_SHAPE:
                raise ValueError(
                    f"UnpackPacked2 expects packed2 specs [..., 1, 72, 20] at {in_key!r}, got "
                    f"{tuple(spec.shape)}; is the env already unpacked (pixels='shades')?"
                )
            batch = tuple(spec.shape[:-3])
            chans, high = (3, 255) if self.rgb else (1, 3)
            observation_spec[out_key] = Bounded(
                0, high, shape=(*batch, chans, PACKED2_HEIGHT, PACKED2_WIDTH), dtype=torch.uint8, device=spec.device
            )
        return observation_spec
