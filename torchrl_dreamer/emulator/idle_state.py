"""What a fast-forward hands back to the kernel: the registers, PC and clock it leaves.

The fast-forwards (:mod:`~torchrl_dreamer.emulator.idle` and its copy family,
:mod:`~torchrl_dreamer.emulator.idle_copy`) run out of line from the kernel's locals: they write
what the skipped iterations leave into the state row, and the kernel reloads its locals from it.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_A,
    S_B,
    S_C,
    S_CLK,
    S_CYCLES,
    S_D,
    S_E,
    S_F,
    S_H,
    S_L,
    S_PC,
)
from torchrl_dreamer.emulator.memory import Mem, console

__all__ = ["store_regs"]


@wp.func
def store_regs(i: int, m: wp.ref[Mem], a: int, f: int, b: int, c: int, d: int, e: int, h: int, l: int,  # noqa: E741
               pc: int, clk: int, skipped: int):
    """Hand the registers, PC and clock after a fast-forward back to the kernel (which reloads
    them), and add the ``skipped`` instructions to ``S_CYCLES``."""
    i = console(i)
    m.st[i, S_PC] = pc
    m.st[i, S_A] = a
    m.st[i, S_F] = f
    m.st[i, S_B] = b
    m.st[i, S_C] = c
    m.st[i, S_D] = d
    m.st[i, S_E] = e
    m.st[i, S_H] = h
    m.st[i, S_L] = l
    m.st[i, S_CLK] = clk
    m.st[i, S_CYCLES] = m.st[i, S_CYCLES] + skipped
