"""``maze``: reach the exit of a tile maze (our shipped game ``roms/maze``).

Reward: +1 on the step the player reaches the exit (the game sets ``GAME_STATE=2``, ``WON=1``);
that step is ``terminated``. Episodes are truncated after 100 steps by default. A layout (16,
``LAYOUT & 15``) is drawn at every reset; ``seed_values=[...]`` restricts them (e.g. hold some
out for evaluation). Actions: ``"dpad"`` (NOOP + 4 directions; a held direction moves exactly one
cell per 24-frame step).

Shaping (``shaping=alpha``, 0 for ``maze-sparse``) uses the shortest-path (BFS) distance ``d``,
in moves, from the player's cell to the exit through the maze, in one of two forms
(``shaping_kind``, see :data:`SHAPING_KINDS`):

- ``"distance"``: each step pays ``-alpha * d(s')``, the distance *after* the step (0 on the
  winning step, which pays exactly 1). The shortest path is still optimal (it visits every
  distance from ``d_start - 1`` down to 0 once, the least a path can), and every reward except
  the win is <= 0, so no loop can collect reward: a world model that misjudges a few moves
  cannot make walking back and forth look profitable, and the reward depends on the current
  frame only (the player's cell), not on the previous one.
- ``"potential"``: each step pays ``alpha * (d_before - d_after)``, potential-based shaping with
  potential ``-alpha * d`` (Ng, Harada & Russell 1999); a whole optimal episode pays
  ``1 + alpha * d_start``. Every step towards the exit pays +alpha and every step away
  -alpha, so an imagined rollout that keeps "approaching" an exit its model never reaches
  collects reward without end; ``docs/learning_results.md`` shows DreamerV3's critic inflating
  exactly that way on this task.

Success (reaching the exit) is the same under both. The distances are computed once per layout
from the ROM's own layout table (read at the address the assembled source gives
``layout_table``), and looked up per step on the device: no host sync.
"""

from __future__ import annotations

from collections import deque
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from torchrl_dreamer.envs.task_table import register_task
from torchrl_dreamer.envs.tasks._shipped import ShippedGameTask

__all__ = ["MazeTask", "MazeSparseTask", "maze_distances", "SHAPING_KINDS"]

_SIDE = 9  # cells per row / column
_WALL = 1
_EXIT = 2

SHAPING_KINDS = ("distance", "potential")
"""``shaping_kind`` values of :class:`MazeTask` (see the module docstring)."""


def _bad_layout(k: int, base: int) -> ValueError:
    return ValueError(
        f"maze layout {k}: this ROM's layout table (at {base:#06x}, the address in the shipped "
        "maze source) does not hold a valid 9x9 layout; a ROM built from other source needs "
        "shaping=0 (task 'maze-sparse')"
    )


@cache
def _layout_table_address() -> int:
    from torchrl_dreamer import roms

    return int(roms.assemble_game("maze").symbols["layout_table"])


def maze_distances(rom: bytes, num_layouts: int = 16) -> torch.Tensor:
    """BFS distance (moves) from every cell to the exit, per layout: ``float32[L, 9, 9]``.

    Read from the maze ROM image: ``layout_table`` holds one little-endian pointer per layout to
    81 cells (row-major; 0 floor, 1 wall, 2 exit) followed by start x, y and exit x, y. Walls and
    cells cut off from the exit get distance ``-1``.
    """
    base = _layout_table_address()
    out = torch.full((num_layouts, _SIDE, _SIDE), -1.0)
    for k in range(num_layouts):
        if base + 2 * k + 1 >= len(rom):
            raise _bad_layout(k, base)
        ptr = rom[base + 2 * k] | (rom[base + 2 * k + 1] << 8)
        if ptr + _SIDE * _SIDE + 3 >= len(rom):
            raise _bad_layout(k, base)
        cells = rom[ptr:ptr + _SIDE * _SIDE]
        ex, ey = rom[ptr + _SIDE * _SIDE + 2], rom[ptr + _SIDE * _SIDE + 3]
        if not (0 <= ex < _SIDE and 0 <= ey < _SIDE) or cells[ey * _SIDE + ex] != _EXIT:
            raise _bad_layout(k, base)
        dist = out[k]
        dist[ey, ex] = 0.0
        todo = deque([(ex, ey)])
        while todo:
            x, y = todo.popleft()
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                nx, ny = x + dx, y + dy
                if (0 <= nx < _SIDE and 0 <= ny < _SIDE and dist[ny, nx] < 0
                        and cells[ny * _SIDE + nx] != _WALL):
                    dist[ny, nx] = dist[y, x] + 1.0
                    todo.append((nx, ny))
    return out


@register_task
class MazeTask(ShippedGameTask):
    """Maze task (see the module docstring for the reward and the shaping).

    Args:
        shaping: ``alpha`` of the distance shaping (0 = the sparse +1 only; default
            ``default_shaping``).
        shaping_kind: ``"distance"`` or ``"potential"`` (default ``default_shaping_kind``).
        rom, seed_values, state: as :class:`ShippedGameTask`.
    """

    name = "maze"
    game = "maze"
    default_action_set = "dpad"
    default_max_episode_steps = 100
    num_seeds = 16
    default_shaping = 0.1
    default_shaping_kind = "potential"
    # The measured best (99-100 % training success in 50k steps; why each value:
    # docs/learning_results.md, "Training defaults of the maze"). frame_skip 24: a held
    # direction moves the player exactly one cell per 24 frames. Its gamma, 0.98, is what the
    # Game Boy rule (a 20-second horizon) gives at 24 frames a step. An overlay of the Game Boy
    # defaults: only what differs (their batch 8 and entropy bonus 5e-3 are the maze's too).
    train_defaults = MappingProxyType({
        "replay_ratio": 0.18, "learning_starts": 2048, "frame_skip": 24, "decode_stride": 1,
        "imagine_last": 0, "representation": "decoder",
    })
    # Every episode draws its layout at reset, and the maze waits for input: no-op frames would
    # only move the clock.
    default_noop_max = 0

    def __init__(self, rom: str | Path | None = None, seed_values: list[int] | None = None,
                 state: Any = None, shaping: float | None = None,
                 shaping_kind: str | None = None):
        super().__init__(rom=rom, seed_values=seed_values, state=state)
        shaping = self.default_shaping if shaping is None else float(shaping)
        if not shaping >= 0.0:
            raise ValueError(f"shaping must be >= 0, got {shaping}")
        kind = self.default_shaping_kind if shaping_kind is None else shaping_kind
        if kind not in SHAPING_KINDS:
            raise ValueError(f"unknown shaping_kind {kind!r}; choose one of {SHAPING_KINDS}")
        self.shaping = shaping
        self.shaping_kind = kind

    def setup(self, num_envs: int, device: torch.device) -> None:
        super().setup(num_envs, device)
        if self.shaping > 0:
            if self.ram["PLAYER_Y"] != self.ram["PLAYER_X"] + 1:
                raise ValueError("the maze source must keep PLAYER_Y right after PLAYER_X "
                                 "(distance() reads both in one access)")
            rom = self.rom_path().read_bytes()
            self._dist = maze_distances(rom).clamp_min(0.0).to(self.device)
            if self.shaping_kind == "potential":  # "distance" needs no memory of the last step
                self.buffers["prev_dist"] = torch.zeros(self.num_envs, device=self.device)

    def distance(self, gb: Any) -> torch.Tensor:
        """Shortest-path distance (moves) of every player to its exit, ``float32[N]``."""
        r = self.ram
        layout = gb.read_memory(r["ACTIVE_LAYOUT"])[:, 0].long() & 15
        xy = gb.read_memory(r["PLAYER_X"], 2).long().clamp_max(_SIDE - 1)  # PLAYER_X, PLAYER_Y
        return self._dist[layout, xy[:, 1], xy[:, 0]]

    def compute(self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor):
        won = self.game_state(gb) == 2
        reward = won.to(torch.float32)
        if self.shaping > 0:
            d = self.distance(gb)
            zero = torch.zeros_like(d)
            if self.shaping_kind == "potential":
                prev = self.buffers["prev_dist"]
                reward = reward + self.shaping * torch.where(is_first, zero, prev - d)
                prev.copy_(d)
            else:  # "distance": pay -alpha * d(s') (d = 0 on the winning step)
                reward = reward - self.shaping * torch.where(is_first, zero, d)
        return reward, won


@register_task
class MazeSparseTask(MazeTask):
    """The maze with the sparse reward only (+1 at the exit, no distance shaping)."""

    name = "maze-sparse"
    default_shaping = 0.0
    train_defaults = MappingProxyType({"replay_ratio": 0.08, "frame_skip": 24, "batch_size": 16,
                                       "decode_stride": 1, "imagine_last": 0,
                                       "representation": "decoder"})
