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

from collections.abc import Callable, Sequence

import torch

from torchrl_dreamer.emulator.ram_reads import RamReader

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


def step_until_change(run_frame: Callable[[bool], None],
                      read_memory: Callable[[int, int], torch.Tensor], lock: torch.Tensor,
                      watch: Sequence[int], max_frames: int, press_frames: int) -> torch.Tensor:
    """Run every console until one of its ``watch`` bytes changes, at most ``max_frames`` frames.

    The emulator side, as :meth:`~torchrl_dreamer.emulator.gameboy.GameBoy.step_until` passes
    it: ``run_frame(held)`` emulates one frame of every console not paused (the step's buttons
    held when ``held``, which is true for the first ``press_frames`` frames) and renders its
    packed2 picture; ``read_memory(addr, length)`` reads ``uint8 [N, length]`` through each
    console's bus; ``lock`` is the consoles' ``LOCKED`` state field (``[N]``, written in place).

    A console stops at the end of the first frame after which a watched byte differs from its
    value at the step's start, so its picture is that frame's. Returns the frames each console
    ran (``int32 [N]``, 1..``max_frames``): ``max_frames`` where nothing changed. Every console
    ends in the state a plain ``step`` of its own frame count would leave
    (``test/emulator/test_decision.py``). On the CPU the step returns as soon as every console
    has stopped; on CUDA it always runs ``max_frames`` frames (stopped consoles return at
    once), so nothing syncs the host.
    """
    addrs, max_frames = check_watch(watch, max_frames)
    reader = RamReader(addrs)
    before = reader.read(read_memory)
    frames = torch.zeros(lock.shape[0], dtype=torch.int32, device=lock.device)
    stopped = torch.zeros(lock.shape[0], dtype=torch.bool, device=lock.device)
    sync_free = lock.device.type == "cuda"
    try:
        for f in range(max_frames):
            run_frame(f < press_frames)
            frames += (~stopped).to(torch.int32)
            changed = (reader.read(read_memory) != before).any(dim=1) & ~stopped
            stopped |= changed
            lock.masked_fill_(changed & (lock == 0), PAUSED)
            if not sync_free and bool(stopped.all()):
                break
    finally:
        lock.masked_fill_(lock == PAUSED, 0)
    return frames
