"""Task registry: build a :class:`~torchrl_dreamer.envs.task.Task` from its name.

Example:
    >>> from torchrl_dreamer.envs import make_task, list_tasks
    >>> "maze" in list_tasks()
    True
    >>> make_task("maze").name
    'maze'
"""

from __future__ import annotations

from typing import Any

from torchrl_dreamer.envs.task import Task

__all__ = ["register_task", "make_task", "list_tasks", "task_class"]

_TASKS: dict[str, type[Task]] = {}


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator adding a :class:`Task` subclass to the registry under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TypeError(f"register_task expects a Task subclass, got {cls!r}")
    key = cls.name.lower()
    other = _TASKS.get(key)
    if other is not None and other is not cls:
        raise ValueError(f"a task named {cls.name!r} is already registered ({other.__name__})")
    _TASKS[key] = cls
    return cls


def list_tasks() -> list[str]:
    """Names of the registered tasks, sorted."""
    _load_builtin()
    return sorted(_TASKS)


def task_class(name: str) -> type[Task]:
    """The registered :class:`Task` subclass of that name (not built: no ROM is read).

    Raises:
        ValueError: unknown name (the message lists the registered tasks).
    """
    _load_builtin()
    cls = _TASKS.get(name.lower())
    if cls is None:
        raise ValueError(
            f"unknown task {name!r}; registered tasks: {', '.join(sorted(_TASKS))}. "
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


def _load_builtin() -> None:
    # Importing the package registers the built-in tasks.
    import torchrl_dreamer.envs.tasks  # noqa: F401
