"""``pokemon_red_exit_lab``: walk out of Professor Oak's lab in Pokémon Red (user-supplied files).

Nothing of the game ships with torchrl_dreamer: pass your own cartridge dump and a savestate taken
inside Oak's lab (``GameBoyEnv("pokemon_red_exit_lab", rom=..., state=...)``, or set the
``TORCHRL_DREAMER_POKEMON_RED_ROM`` / ``TORCHRL_DREAMER_POKEMON_RED_STATE`` environment variables).
A state file made for another ROM is rejected by the emulator's savestate check.

RAM addresses (public ``pret/pokered`` disassembly, ``ram/wram.asm`` and
``constants/map_constants.asm``): ``wCurMap`` = ``0xD35E``, ``wYCoord`` = ``0xD361``,
``wXCoord`` = ``0xD362``; map ids ``OAKS_LAB`` = ``0x28``, ``PALLET_TOWN`` = ``0x00``.

Reward: +1 and ``terminated`` on the step the current map becomes Pallet Town; a small shaping
term of +0.01 per tile of new maximum distance walked south (larger ``wYCoord``) inside the lab,
since the exit is the door at the bottom. Actions: ``"minimal"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.envs.task import Task
from torchrl_dreamer.envs.task_table import register_task

__all__ = ["PokemonRedExitLabTask"]

W_CUR_MAP = 0xD35E
W_Y_COORD = 0xD361
OAKS_LAB = 0x28
PALLET_TOWN = 0x00


@register_task
class PokemonRedExitLabTask(Task):
    """Leave Oak's lab (see the module docstring). Needs ``rom`` and ``state`` from the user."""

    name = "pokemon_red_exit_lab"
    rom_titles = ("POKEMON RED",)
    default_action_set = "minimal"
    default_max_episode_steps = 500

    def __init__(self, rom: str | Path | None = None, state: Any = None):
        rom = rom or os.environ.get("TORCHRL_DREAMER_POKEMON_RED_ROM") or None
        state = state or os.environ.get("TORCHRL_DREAMER_POKEMON_RED_STATE") or None
        super().__init__(rom=rom, state=state)

    def default_rom(self) -> Path:
        raise FileNotFoundError(
            "task 'pokemon_red_exit_lab' needs your own Pokémon Red ROM: pass rom=PATH (and "
            "state=PATH, a savestate taken inside Oak's lab) or set "
            "TORCHRL_DREAMER_POKEMON_RED_ROM / TORCHRL_DREAMER_POKEMON_RED_STATE"
        )

    def prepare(self, gb: Any) -> None:
        if self.state is None:
            raise FileNotFoundError(
                "task 'pokemon_red_exit_lab' starts from your savestate inside Oak's lab: pass "
                "state=PATH or set TORCHRL_DREAMER_POKEMON_RED_STATE"
            )
        super().prepare(gb)
        cur_map = gb.read_memory(W_CUR_MAP)[:, 0]
        if bool((cur_map != OAKS_LAB).any()):
            raise ValueError(
                f"the start state is on map {int(cur_map[0]):#04x}, not Oak's lab "
                f"({OAKS_LAB:#04x}); save the state inside the lab"
            )

    def setup(self, num_envs: int, device: torch.device) -> None:
        super().setup(num_envs, device)
        self.buffers["best_y"] = torch.zeros(num_envs, dtype=torch.int32, device=self.device)

    def compute(self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor):
        ram = gb.read_memory(W_CUR_MAP, 4).to(torch.int32)
        cur_map, y = ram[:, 0], ram[:, 3]
        best = self.buffers["best_y"]
        in_lab = cur_map == OAKS_LAB
        gain = torch.where(in_lab & ~is_first, (y - best).clamp(min=0), torch.zeros_like(y))
        best.copy_(torch.where(is_first, y, torch.where(in_lab, torch.maximum(best, y), best)))
        out = cur_map == PALLET_TOWN
        reward = out.to(torch.float32) + 0.01 * gain.to(torch.float32)
        return reward, out
