"""How a call's frames are cut into kernel launches (``GameBoy(launch_frames=...)``).

A :meth:`~torchrl_dreamer.emulator.gameboy.GameBoy.step` of ``frames`` frames can run as one
kernel launch or as several launches of ``k`` frames each. The results are the same bit for
bit (``test/emulator/test_launch_frames.py``); what differs is how the consoles of a GPU warp
line up. In one launch they drift apart by instruction counts and the warp issues each
instruction for few lanes; a launch per frame makes them wait for each other at every frame end
and start the next frame together.

On CUDA a launch per frame was measured faster on every game, so the default (``"auto"``) is
a launch per frame there and one launch a call on the CPU, where every launch only costs its
overhead. Why and the figures: ``docs/decisions/kernel_shape.md``, "A launch per frame on CUDA".

Example:
    >>> resolve_launch_frames("auto", "cuda"), resolve_launch_frames("auto", "cpu")
    (1, None)
    >>> launch_plan(frames=5, press_frames=3, pack=1, launch_frames=2)
    [(2, 2, 0), (2, 1, 0), (1, 0, 1)]
"""

from __future__ import annotations

from typing import Literal

import torch

LaunchFrames = int | None | Literal["auto"]
"""``k`` frames a launch, ``None`` (a whole call in one launch) or ``"auto"`` (by device)."""

AUTO = "auto"
CUDA_LAUNCH_FRAMES = 1
"""Frames a launch on CUDA under ``"auto"``: one, measured fastest on every game (above)."""


def resolve_launch_frames(launch_frames: LaunchFrames, device: str | torch.device) -> int | None:
    """The frames a launch that ``launch_frames`` means on ``device``.

    ``"auto"`` is :data:`CUDA_LAUNCH_FRAMES` on a CUDA device and ``None`` (one launch a call)
    elsewhere; an int ``>= 1`` or ``None`` is kept. Anything else is a ``ValueError`` that
    names the accepted values."""
    if isinstance(launch_frames, str) and launch_frames == AUTO:
        return CUDA_LAUNCH_FRAMES if torch.device(device).type == "cuda" else None
    if launch_frames is not None and (isinstance(launch_frames, bool)
                                      or not isinstance(launch_frames, int) or launch_frames < 1):
        raise ValueError(f"launch_frames must be an int >= 1, None (a call in one launch) or "
                         f"'auto' (a launch per frame on CUDA, one a call on the CPU), got "
                         f"{launch_frames!r}")
    return launch_frames


def launch_plan(frames: int, press_frames: int, pack: int,
                launch_frames: int | None) -> list[tuple[int, int, int]]:
    """The ``(frames, press_frames, pack)`` of each launch of a call: the buttons held for what
    is left of the press, the frame observed (``pack``) only by the call's last launch."""
    k = launch_frames
    if k is None or frames <= k:
        return [(int(frames), int(press_frames), int(pack))]
    return [(min(k, frames - f), min(max(press_frames - f, 0), k), int(pack) if f + k >= frames
             else 0) for f in range(0, frames, k)]
