"""The joypad: FF00 selects the direction and/or action group; pressed buttons read as 0.

Buttons are a bit mask in state column ``JOY`` (``BUTTON_*`` in :mod:`torchrl_dreamer.emulator`:
low nibble directions, high nibble actions). A selected line going low requests the joypad
interrupt. Facts: Pan Docs "Joypad Input".
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.interrupts import raise_irq
from torchrl_dreamer.emulator.layout import S_JOY
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import IRQ_JOYPAD, R_JOYP

__all__ = ["joyp_value", "set_joypad", "joyp_write"]


@wp.func
def joyp_value(i: int, m: wp.ref[Mem]) -> int:
    """FF00 as read: selected button groups pulled low by the pressed buttons."""
    i = console(i)
    sel = int(m.hram[i, R_JOYP]) & 0x30
    joy = m.st[i, S_JOY]
    v = 0x0F
    if (sel & 0x10) == 0:
        v = v & (((joy >> 4) & 0x0F) ^ 0x0F)
    if (sel & 0x20) == 0:
        v = v & ((joy & 0x0F) ^ 0x0F)
    return 0xC0 | sel | v


@wp.func(inline=False)
def set_joypad(i: int, m: wp.ref[Mem], buttons: int):
    """Set the held buttons; a newly pulled-low selected line raises the joypad interrupt."""
    i = console(i)
    before = joyp_value(i, m) & 0x0F
    m.st[i, S_JOY] = buttons
    after = joyp_value(i, m) & 0x0F
    if (before & (after ^ 0x0F)) != 0:
        raise_irq(i, m, IRQ_JOYPAD)


@wp.func(inline=False)
def joyp_write(i: int, m: wp.ref[Mem], v: int):
    """FF00: select groups; a newly selected pressed button raises the joypad interrupt."""
    i = console(i)
    before = joyp_value(i, m) & 0x0F
    m.hram[i, R_JOYP] = wp.uint8(v & 0x30)
    after = joyp_value(i, m) & 0x0F
    if (before & (after ^ 0x0F)) != 0:
        raise_irq(i, m, IRQ_JOYPAD)
