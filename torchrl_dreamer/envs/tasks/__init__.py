"""Built-in tasks; importing this package registers them (see :func:`~torchrl_dreamer.envs.list_tasks`).

- ``maze`` (distance-shaped), ``maze-sparse`` (+1 at the exit only), ``catch``: the games shipped in
  :mod:`torchrl_dreamer.roms` (default tasks).
- ``snake``: test-only task on the homebrew snake ROM of the shared test data (not shipped).
- ``pokemon_red_exit_lab``: a user-supplied commercial game (ROM and state file from the user).
"""

from torchrl_dreamer.envs.tasks.catch import CatchTask
from torchrl_dreamer.envs.tasks.homebrew import SnakeTask
from torchrl_dreamer.envs.tasks.maze import MazeSparseTask, MazeTask, maze_distances
from torchrl_dreamer.envs.tasks.pokemon import PokemonRedExitLabTask

__all__ = [
    "CatchTask",
    "MazeTask",
    "MazeSparseTask",
    "maze_distances",
    "PokemonRedExitLabTask",
    "SnakeTask",
]
