"""Interrupt requests: IF (FF0F) and IE (FFFF) live in ``hram``; bits are ``IRQ_*``.

Dispatch itself (when the CPU takes an interrupt, its 5 M-cycles) is part of the generated CPU
kernel (:mod:`~torchrl_dreamer.emulator.codegen`), since it pushes the CPU's registers.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import IRQ_MASK, R_IE, R_IF

__all__ = ["raise_irq", "pending_irqs"]


@wp.func
def raise_irq(i: int, m: wp.ref[Mem], bit: int):
    """Request interrupt ``bit`` (an ``IRQ_*`` value): set it in IF."""
    i = console(i)
    m.hram[i, R_IF] = wp.uint8(int(m.hram[i, R_IF]) | bit)


@wp.func(inline=True)
def pending_irqs(i: int, m: wp.ref[Mem]) -> int:
    """Requested and enabled interrupts (IF & IE, 5 bits)."""
    i = console(i)
    return int(m.hram[i, R_IF]) & int(m.hram[i, R_IE]) & IRQ_MASK
