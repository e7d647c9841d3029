"""Steps that end at a game's own tick: run each console until a RAM byte it watches changes.

A fixed frame skip cuts a game's time into equal slices, but many games act on their own clock:
a snake moves one cell every 7 or 8 frames depending on where its tail is, a puzzle
game takes one move per input. A decision every ``frame_skip`` frames then drifts against the
game's tick (some steps see two moves, some none), and the agent cannot tell from one picture
which. :func:`step_until_change` runs each console frame by frame and stops it at the end of
the first frame after which one of the watched bytes (a position, a move counter) differs from
its value at the step's start, or after ``max_frames`` frames: each step then holds exactly one
game tick. Task specs ask for it with a ``decision:`` section (``docs/writing_a_task.md``).

How a console is stopped: a console that has reached its decision point is marked in its
``LOCKED`` state field with :data:`PAUSED` (the kernel returns at once for any non-zero value,
the same test an illegal-opcode lock-up uses) and unmarked when the step is over, so the
consoles of the batch keep running in one launch per frame while the stopped ones wait.

Example:
    >>> import torch
    >>> from torchrl_dreamer.emulator import GameBoy
    >>> from torchrl_dreamer.roms import rom_path, ram_map
    >>> gb = GameBoy(rom_path("catch"), num_envs=2, check_header=False)
    >>> gb.run_frames(120)
    >>> frames = gb.step_until(None, watch=[ram_map("catch")["OBJ_Y"]], max_frames=60)
    >>> bool((frames >= 1).all() and (frames <= 60).all())
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["PAUSED", "MAX_DECISION_FRAMES", "check_watch", "step_until_change"]

PAUSED = 2
"""``LOCKED`` value of a console that has reached its decision point within a step (an
illegal-opcode lock-up is 1); any non-zero value makes the kernel skip the console."""

MAX_DECISION_FRAMES = 600
"""Most frames one decision step may run (10 s of game): a bound on a watch that never changes."""


def check_watch(watch: Sequence[int], max_frames: int) -> tuple[tuple[int, ...], int]:
    """Validate a watch list and a frame bound; returns them as ``(addresses, max_frames)``.

    Raises ``ValueError`` naming the bad value: the addresses must be a non-empty list of
    0..0xFFFF, ``max_frames`` in 1..:data:`MAX_DECISION_FRAMES`."""
    addrs = tuple(watch)
    if not addrs:
        raise ValueError("watch must name at least one address (the bytes whose change ends a step)")
    for a in addrs:
        if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a <= 0xFFFF:
            raise ValueError(f"watch addresses must be ints in 0..0xFFFF, got {a!r}")
    if isinstance(max_frames, bool) or not isinstance(max_frames, int) \
            or not 1 <= max_frames <= MAX_DECISION_FRAMES:
        raise ValueError(f"max_frames must be an int in 1..{MAX_DECISION_FRAMES}, got {max_frames!r}")
    return addrs, int(max_frames)


def _runs(addrs: tuple[int, ...]) -> list[tuple[int, int]]:
    """Group sorted distinct addresses into ``(start, length)`` runs of neighbours (one memory
    read each)."""
    runs: list[list[int]] = []
    for a in sorted(set(addrs)):
        if runs and a == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([a, 1])
    return [(a, n) for a, n in runs]


def _read(gb: Any, runs: list[tuple[int, int]]) -> torch.Tensor:
    """``uint8 [N, bytes]`` of the watched addresses through each console's bus view."""
    parts = [gb.read_memory(a, n) for a, n in runs]
    return parts[0].clone() if len(parts) == 1 else torch.cat(parts, dim=1)


def step_until_change(gb: Any, buttons: torch.Tensor | int | None, watch: Sequence[int],
                      max_frames: int, press_frames: int,
                      obs_out: torch.Tensor | None = None) -> torch.Tensor:
    """Run every console of ``gb`` until one of its ``watch`` bytes changes, at most ``max_frames``.

    ``buttons`` are held for the first ``press_frames`` frames of the step (as in
    :meth:`~torchrl_dreamer.emulator.gameboy.GameBoy.step`). A console stops at the end of the
    first frame after which a watched byte differs from its value at the step's start; its
    packed2 observation (in ``obs_out`` or ``gb.packed2``) is that frame's. Returns the frames
    each console ran (``int32 [N]``, 1..``max_frames``): ``max_frames`` where nothing changed.
    Every console ends in the state a plain ``gb.step(buttons, frames=k, ...)`` of its own ``k``
    frames would leave (``test/emulator/test_decision.py``).

    On the CPU the step returns as soon as every console has stopped; on CUDA it always runs
    ``max_frames`` launches (stopped consoles return at once), so nothing syncs the host.
    """
    from torchrl_dreamer.emulator import layout  # Warp-backed: not at import (specs import this)

    addrs, max_frames = check_watch(watch, max_frames)
    runs = _runs(addrs)
    n = gb.num_envs
    lock = gb._st[:, layout.FIELDS["LOCKED"]]
    before = _read(gb, runs)
    frames = torch.zeros(n, dtype=torch.int32, device=gb.device)
    stopped = torch.zeros(n, dtype=torch.bool, device=gb.device)
    sync_free = gb.device.type == "cuda"
    try:
        for f in range(max_frames):
            held = f < press_frames
            gb._run(buttons if held else None, 1, 1 if held else 0, 1, out=obs_out)
            frames += (~stopped).to(torch.int32)
            changed = (_read(gb, runs) != before).any(dim=1) & ~stopped
            stopped |= changed
            lock.masked_fill_(changed & (lock == 0), PAUSED)
            if not sync_free and bool(stopped.all()):
                break
    finally:
        lock.masked_fill_(lock == PAUSED, 0)
    return frames
