"""``catch``: catch falling blocks with a paddle (our shipped game ``roms/catch``).

Reward: +1 per point of ``SCORE`` gained in the step (a block caught), -1 per life lost (a block
missed), 0 otherwise. The episode is ``terminated`` when the last life is lost
(``GAME_STATE=2``) and truncated after 1000 steps by default. The drop columns come from the
seed byte written at reset. Actions: ``"dpad"`` (LEFT/RIGHT move the paddle 16 px per step).
"""

from __future__ import annotations

from typing import Any

import torch

from torchrl_dreamer.envs.registry import register_task
from torchrl_dreamer.envs.tasks._shipped import ShippedGameTask

__all__ = ["CatchTask"]


@register_task
class CatchTask(ShippedGameTask):
    """Catch task (see the module docstring for the reward)."""

    name = "catch"
    game = "catch"
    default_action_set = "dpad"
    default_max_episode_steps = 1000

    def setup(self, num_envs: int, device: torch.device) -> None:
        super().setup(num_envs, device)
        if self.ram["SCORE"] != self.ram["LIVES"] + 1:
            raise RuntimeError("catch RAM map changed: LIVES and SCORE are no longer adjacent")
        self.buffers["score"] = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        self.buffers["lives"] = torch.zeros(num_envs, dtype=torch.int32, device=self.device)

    def compute(self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor):
        # LIVES at $C003, SCORE (16-bit little-endian) at $C004-$C005: one read.
        ram = gb.read_memory(self.ram["LIVES"], 3).to(torch.int32)
        lives = ram[:, 0]
        score = ram[:, 1] | (ram[:, 2] << 8)
        prev_score, prev_lives = self.buffers["score"], self.buffers["lives"]
        caught = (score - prev_score) % 65536
        lost = (prev_lives - lives).clamp(min=0)
        reward = (caught - lost).to(torch.float32)
        prev_score.copy_(score)
        prev_lives.copy_(lives)
        over = self.game_state(gb) == 2
        return reward, over
