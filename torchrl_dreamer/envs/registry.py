"""Task registry: build a :class:`~torchrl_dreamer.envs.task.Task` from its name.

The table itself (:func:`register_task`, :func:`unregister_task`) lives in
:mod:`torchrl_dreamer.envs.task_table`, below the built-in tasks that register into it; this
module imports those tasks, then looks names up.

Example:
    >>> from torchrl_dreamer.envs import make_task, list_tasks
    >>> "maze" in list_tasks()
    True
    >>> make_task("maze").name
    'maze'
"""

from __future__ import annotations

from typing import Any

# importing the package registers the built-in tasks (into the table below it)
import torchrl_dreamer.envs.tasks  # noqa: F401
from torchrl_dreamer.envs.task import Task
from torchrl_dreamer.envs.task_table import register_task, registered_tasks, unregister_task

__all__ = ["register_task", "unregister_task", "make_task", "list_tasks", "task_class"]


def list_tasks() -> list[str]:
    """Names of the registered tasks, sorted."""
    return sorted(registered_tasks())


def task_class(name: str) -> type[Task]:
    """The registered :class:`Task` subclass of that name (not built: no ROM is read).

    Raises:
        ValueError: unknown name (the message lists the registered tasks).
    """
    cls = registered_tasks().get(name.lower())
    if cls is None:
        raise ValueError(
            f"unknown task {name!r}; registered tasks: {', '.join(list_tasks())}. "
            "Register your own with @register_task (see docs/writing_a_task.md)"
        )
    return cls


def make_task(task: str | Task, **kwargs: Any) -> Task:
    """Return ``task`` if it is a :class:`Task`, else build the registered task of that name.

    Raises:
        ValueError: unknown name (the message lists the registered tasks).
    """
    if isinstance(task, Task):
        if kwargs:
            raise ValueError(f"task options {sorted(kwargs)} given with an already built task")
        return task
    if not isinstance(task, str):
        raise TypeError(f"task must be a name or a Task instance, got {type(task).__name__}")
    return task_class(task)(**kwargs)

