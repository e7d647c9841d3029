"""Test-only tasks on the homebrew games of the shared test data (ROMs never shipped).

``snake`` runs ``games/gb_raw_snake/snake.gb`` (theisolinearchip/gb_raw_snake, Unlicense) found
through :func:`torchrl_dreamer._roms.roms_dir` (``$TORCHRL_DREAMER_ROMS``). Its RAM layout was
read off the running game (no source needed):

- ``0xC004``/``0xC005``: head y/x in pixels; the head moves 8 px per 8 frames.
- ``0xC008``/``0xC009``: food y/x; they change when the food is eaten.
- On death the game respawns the snake at once (there is no game-over byte): the head jumps back
  to the spawn point, far more than the 24 px a head can move in one 24-frame step.

Reward: +1 when the food moves (eaten), -1 on death; death ``terminates`` the episode (the env then
restores its own start snapshot). With another ``frame_skip`` the jump threshold scales.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer._roms import roms_dir
from torchrl_dreamer.envs.task import Task
from torchrl_dreamer.envs.task_table import register_task

__all__ = ["SnakeTask"]


@register_task
class SnakeTask(Task):
    """Test-only snake task (see the module docstring)."""

    name = "snake"
    # the ROM's header title is blank: check the image itself (commit 1be317f of the repo)
    rom_sha256 = ("0fdae5875ada46cff93b8f3cfbe93f814bd77febf3d2cff162707a81d1f35fac",)
    default_action_set = "dpad"
    default_max_episode_steps = 200
    HEAD = 0xC004
    FOOD = 0xC008

    def default_rom(self) -> Path:
        return roms_dir() / "games" / "gb_raw_snake" / "snake.gb"

    def prepare(self, gb: Any) -> None:
        if self.state is not None:
            return super().prepare(gb)
        gb.run_frames(120)
        gb.run_frames(24, buttons=8)  # START: leave the title screen

    def setup(self, num_envs: int, device: torch.device) -> None:
        super().setup(num_envs, device)
        self.buffers["head"] = torch.zeros(num_envs, 2, dtype=torch.int32, device=self.device)
        self.buffers["food"] = torch.zeros(num_envs, 2, dtype=torch.int32, device=self.device)

    def compute(self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor):
        ram = gb.read_memory(self.HEAD, 6).to(torch.int32)
        head, food = ram[:, 0:2], ram[:, 4:6]
        moved = (head - self.buffers["head"]).abs().amax(-1)
        died = (moved > 32) & ~is_first
        ate = (food != self.buffers["food"]).any(-1) & ~died
        self.buffers["head"].copy_(head)
        self.buffers["food"].copy_(food)
        reward = ate.to(torch.float32) - died.to(torch.float32)
        return reward, died
