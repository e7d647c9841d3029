"""``maze``: reach the exit of a tile maze (our shipped game ``roms/maze``).

Reward: +1 on the step the player reaches the exit (the game sets ``GAME_STATE=2``, ``WON=1``),
0 otherwise; that step is ``terminated``. Episodes are truncated after 100 steps by default.
A layout (16, ``LAYOUT & 15``) is drawn at every reset; ``seed_values=[...]`` restricts them
(e.g. hold some out for evaluation). Actions: ``"dpad"`` (NOOP + 4 directions; a held direction
moves exactly one cell per 24-frame step).
"""

from __future__ import annotations

from typing import Any

import torch

from torchrl_dreamer.envs.registry import register_task
from torchrl_dreamer.envs.tasks._shipped import ShippedGameTask

__all__ = ["MazeTask"]


@register_task
class MazeTask(ShippedGameTask):
    """Maze task (see the module docstring for the reward)."""

    name = "maze"
    game = "maze"
    default_action_set = "dpad"
    default_max_episode_steps = 100
    num_seeds = 16

    def compute(self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor):
        won = self.game_state(gb) == 2
        return won.to(torch.float32), won
