"""Shared reset protocol of the games we ship (``torchrl_dreamer/roms/<game>/``).

Both games expose the same RAM interface (documented in ``docs/roms.md`` and at the top of each
``.asm``): a ``GAME_STATE`` byte (0 waiting for a new game, 1 playing, 2 won/over), a
``SEED``/layout byte and a ``NEW_GAME`` request byte. Episodes start by restoring a snapshot taken
while the game waits, writing a random seed byte and setting the request; the game starts on the
next frame, inside the env step that renders the first observation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch

from torchrl_dreamer.envs.task import Task

__all__ = ["ShippedGameTask"]


class ShippedGameTask(Task):
    """Base of the tasks on our own games: ROM, title and RAM map from :mod:`torchrl_dreamer.roms`.

    The RAM map is read from the game's assembled source (:func:`torchrl_dreamer.roms.ram_map`),
    so the task and the ROM cannot disagree on an address: ``self.ram["GAME_STATE"]`` etc.

    Class attributes (subclasses):
        game: the shipped game's name (``roms/<game>/<game>.gb``).
        num_seeds: seeds are drawn uniformly from ``0..num_seeds-1``.

    Args:
        rom: ROM path (default: the shipped build).
        seed_values: optional fixed list of seed bytes to draw from (e.g. ``[0]`` to always play
            maze layout 0, or held-out layouts for evaluation).
        state: optional savestate to start from instead of booting.
    """

    game: ClassVar[str] = ""
    num_seeds: ClassVar[int] = 256
    start_frames = 30
    rom_has_logo = False

    def __init__(self, rom: str | Path | None = None, seed_values: list[int] | None = None,
                 state: Any = None):
        super().__init__(rom=rom, state=state)
        from torchrl_dreamer import roms

        self.ram: dict[str, int] = roms.ram_map(self.game)
        self.rom_titles = (roms.GAMES[self.game].title,)
        if seed_values is not None:
            seed_values = [int(v) for v in seed_values]
            if not seed_values or not all(0 <= v < 256 for v in seed_values):
                raise ValueError(f"seed_values must be a non-empty list of bytes, got {seed_values}")
        self.seed_values = seed_values

    def default_rom(self) -> Path:
        from torchrl_dreamer import roms

        return roms.rom_path(self.game)

    def setup(self, num_envs: int, device: torch.device) -> None:
        super().setup(num_envs, device)
        values = self.seed_values if self.seed_values is not None else range(self.num_seeds)
        self._seed_table = torch.tensor(list(values), dtype=torch.uint8, device=self.device)

    def on_reset(self, gb: Any, mask: torch.Tensor, generator: torch.Generator | None) -> None:
        idx = torch.randint(0, len(self._seed_table), (gb.num_envs,), generator=generator,
                            device=self.device)
        # values [N, 1]: one byte per env (a 1-D tensor would be one [length] row for all envs)
        gb.write_memory(self.ram["SEED"], self._seed_table[idx].unsqueeze(1), mask=mask)
        gb.write_memory(self.ram["NEW_GAME"], 1, mask=mask)

    def game_state(self, gb: Any) -> torch.Tensor:
        """``GAME_STATE`` of every console, ``uint8[N]``."""
        return gb.read_memory(self.ram["GAME_STATE"])[:, 0]
