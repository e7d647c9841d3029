"""torchrl_dreamer.emulator: a DMG Game Boy in NVIDIA Warp, one thread per console.

:class:`GameBoy` is the entry point (``docs/emulator.md``); :class:`ResetCache` restores masked
envs from a snapshot on the device. Heavy modules (Warp kernels) load lazily on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GameBoy",
    "ResetCache",
    "EmulatorState",
    "Cartridge",
    "CartridgeError",
    "SavestateError",
    "BUTTON_A",
    "BUTTON_B",
    "BUTTON_SELECT",
    "BUTTON_START",
    "BUTTON_RIGHT",
    "BUTTON_LEFT",
    "BUTTON_UP",
    "BUTTON_DOWN",
]

BUTTON_A = 1
BUTTON_B = 2
BUTTON_SELECT = 4
BUTTON_START = 8
BUTTON_RIGHT = 16
BUTTON_LEFT = 32
BUTTON_UP = 64
BUTTON_DOWN = 128

_LAZY = {
    "GameBoy": "torchrl_dreamer.emulator.gameboy",
    "ResetCache": "torchrl_dreamer.emulator.reset",
    "EmulatorState": "torchrl_dreamer.emulator.state",
    "SavestateError": "torchrl_dreamer.emulator.state",
    "Cartridge": "torchrl_dreamer.emulator.cartridge",
    "CartridgeError": "torchrl_dreamer.emulator.cartridge",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'torchrl_dreamer.emulator' has no attribute {name!r}")
