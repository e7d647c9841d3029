"""No mapper: a 32 KiB ROM, optionally with up to 8 KiB of RAM at A000-BFFF (types 00, 08, 09).

Writes to 0000-7FFF are ignored. Nothing sets ``RAM_EN`` on such a cartridge, so its RAM stays
disabled (A000-BFFF reads FF) unless a state sets the column; no test ROM or game here uses
types 08/09.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.mappers.base import CartType, Mapper

__all__ = ["MBC_NONE", "MAPPER"]

MBC_NONE = wp.constant(0)
"""Mapper id (state column ``MBC``) of a cartridge without a mapper."""

MAPPER = Mapper(
    id=MBC_NONE,
    name="ROM only",
    cartridge_types={
        0x00: CartType(False, False, False, "ROM ONLY"),
        0x08: CartType(True, False, False, "ROM+RAM"),
        0x09: CartType(True, True, False, "ROM+RAM+BATTERY"),
    },
)
"""The table row of a cartridge without a mapper (control writes ignored, plain RAM)."""
