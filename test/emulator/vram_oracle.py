"""The oracle of the VRAM fast-path tests (``test_vram_fast_path``, ``test_vram_stat_bound``,
``test_vram_read_bound``): the same ROM run one instruction a launch with the bus's VRAM bound
cleared before each, so that every VRAM access goes through ``cpu_read`` / ``cpu_write``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS


def run_bound_cleared(gb: GameBoy, done: int, limit: int,
                      after_step: Callable[[torch.Tensor], None] | None = None) -> None:
    """Step console 0 of ``gb`` with ``VRAM_OPEN`` cleared before every instruction until the ROM
    writes 1 at ``done``; ``after_step`` sees the state row after each step (with the bound that
    step stored). Fails after ``limit`` instructions."""
    st = gb.state_tensors()["st"]
    col = FIELDS["VRAM_OPEN"]
    for _ in range(limit):
        st[0, col] = 0
        gb.step_instructions(1)
        if after_step is not None:
            after_step(st[0])
        if gb.read_memory(done, 1)[0, 0] == 1:
            return
    raise AssertionError(f"the ROM did not finish in {limit:,} instructions")
