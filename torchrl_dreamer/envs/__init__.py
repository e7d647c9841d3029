"""torchrl_dreamer.envs: the Warp Game Boy emulator as a batched TorchRL env, with game tasks.

- :class:`GameBoyEnv` -- ``EnvBase`` over N consoles (deferred native auto-reset, packed2 pixels).
- :class:`Task` -- reward/termination/reset hook of a game (and :class:`RamObservation`, the
  observations it may add from RAM); :func:`make_task`,
  :func:`register_task`, :func:`list_tasks`, :func:`task_class` -- the task registry.
- :class:`ActionSet`, :func:`make_action_set` -- discrete actions to buttons masks.
- :func:`load_task_spec`, :class:`SpecTask`, :class:`TaskSpecError` -- tasks from YAML/JSON specs.
- :class:`UnpackPacked2` -- packed2 → shades (or RGB) observation transform.
"""

from torchrl_dreamer.envs.actions import ACTION_SETS, BUTTON_BITS, ActionSet, make_action_set
from torchrl_dreamer.envs.gameboy import PIXEL_FORMATS, GameBoyEnv
from torchrl_dreamer.envs.registry import list_tasks, make_task, register_task, task_class
from torchrl_dreamer.envs.spec import SpecTask, TaskSpecError, load_task_spec
from torchrl_dreamer.envs.task import RamObservation, Task, TaskMismatchError
from torchrl_dreamer.envs.transforms import UnpackPacked2

__all__ = [
    "ACTION_SETS",
    "BUTTON_BITS",
    "PIXEL_FORMATS",
    "ActionSet",
    "GameBoyEnv",
    "RamObservation",
    "SpecTask",
    "Task",
    "TaskMismatchError",
    "TaskSpecError",
    "UnpackPacked2",
    "list_tasks",
    "load_task_spec",
    "make_action_set",
    "make_task",
    "register_task",
    "task_class",
]
