"""torchrl_dreamer.emulator: the Game Boy (DMG) and Game Boy Color in NVIDIA Warp, one thread
per console.

:class:`GameBoy` is the entry point (``docs/emulator.md``; ``model="cgb"`` for the Color, see
:data:`MODELS`); :class:`ResetCache` restores masked
envs from a snapshot on the device; :func:`load_pyboy_state` reads PyBoy 2.8 ``.state`` files. Heavy modules (Warp kernels) load lazily on first use.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

__all__ = [
    "GameBoy",
    "ResetCache",
    "EmulatorState",
    "Cartridge",
    "CartridgeError",
    "ColorOnlyCartridgeError",
    "SavestateError",
    "MODELS",
    "resolve_model",
    "COLOR_SHAPE",
    "color_frame",
    "BUTTON_A",
    "BUTTON_B",
    "BUTTON_SELECT",
    "BUTTON_START",
    "BUTTON_RIGHT",
    "BUTTON_LEFT",
    "BUTTON_UP",
    "BUTTON_DOWN",
    "load_pyboy_state",
    "parse_pyboy_state",
    "set_pyboy_timing",
    "PyBoyState",
    "PyBoyStateError",
    "PYBOY_STATE_VERSIONS",
    "PpuMode",
    "PPU_MODES",
    "DEFAULT_PPU",
]

PpuMode = Literal["fifo", "line"]
"""A PPU mode of ``GameBoy(ppu=...)`` (and ``GameBoyEnv`` / ``TrainConfig.ppu``)."""

PPU_MODES: tuple[str, ...] = get_args(PpuMode)
"""Values of ``GameBoy(ppu=...)``: ``"fifo"`` runs the mode-3 pixel pipeline on lines where an
LCD register is written during mode 3 (mid-scanline effects land on the right pixel; other
lines are drawn whole); ``"line"`` draws every line whole from the registers at the end of its
mode 3 (see docs/emulator.md for the trade-off)."""

DEFAULT_PPU: PpuMode = "fifo"
"""The default PPU mode: ``fifo``, which measured within noise of ``line`` on every game
(``benchmarks/ppu_modes.py``, docs/emulator.md "PPU modes")."""

BUTTON_A = 1
"""Button mask bit for A (bit 0 of the ``uint8 [N]`` buttons tensor)."""
BUTTON_B = 2
"""Button mask bit for B."""
BUTTON_SELECT = 4
"""Button mask bit for SELECT."""
BUTTON_START = 8
"""Button mask bit for START."""
BUTTON_RIGHT = 16
"""Button mask bit for RIGHT."""
BUTTON_LEFT = 32
"""Button mask bit for LEFT."""
BUTTON_UP = 64
"""Button mask bit for UP."""
BUTTON_DOWN = 128
"""Button mask bit for DOWN."""

_LAZY = {
    "GameBoy": "torchrl_dreamer.emulator.gameboy",
    "ResetCache": "torchrl_dreamer.emulator.reset",
    "EmulatorState": "torchrl_dreamer.emulator.state",
    "SavestateError": "torchrl_dreamer.emulator.state",
    "Cartridge": "torchrl_dreamer.emulator.cartridge",
    "CartridgeError": "torchrl_dreamer.emulator.cartridge",
    "ColorOnlyCartridgeError": "torchrl_dreamer.emulator.cartridge",
    "MODELS": "torchrl_dreamer.emulator.model",
    "resolve_model": "torchrl_dreamer.emulator.model",
    "COLOR_SHAPE": "torchrl_dreamer.emulator.color_obs",
    "color_frame": "torchrl_dreamer.emulator.color_obs",
    "load_pyboy_state": "torchrl_dreamer.emulator.pyboy_state",
    "parse_pyboy_state": "torchrl_dreamer.emulator.pyboy_state",
    "set_pyboy_timing": "torchrl_dreamer.emulator.pyboy_state",
    "PyBoyState": "torchrl_dreamer.emulator.pyboy_state",
    "PyBoyStateError": "torchrl_dreamer.emulator.pyboy_state",
    "PYBOY_STATE_VERSIONS": "torchrl_dreamer.emulator.pyboy_state",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'torchrl_dreamer.emulator' has no attribute {name!r}")
