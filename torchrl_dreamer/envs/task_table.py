"""The table of registered :class:`~torchrl_dreamer.envs.task.Task` classes, by name.

Tasks add themselves with :func:`register_task`; :mod:`torchrl_dreamer.envs.registry` looks
them up (and imports the built-in tasks first). The table sits below both, so a task module
imports only this one and the registry imports the tasks: no import circle.

Example:
    >>> from torchrl_dreamer.envs.task import Task
    >>> class Probe(Task):
    ...     name = "task-table-doctest"
    >>> register_task(Probe) is Probe, registered_tasks()["task-table-doctest"] is Probe
    (True, True)
    >>> unregister_task("task-table-doctest") is Probe, "task-table-doctest" in registered_tasks()
    (True, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from torchrl_dreamer.envs.task import Task

__all__ = ["register_task", "registered_tasks", "unregister_task"]

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


def unregister_task(name: str) -> type[Task]:
    """Remove the task registered under ``name`` (case-insensitive) and return its class, so
    a test or a notebook can register a throw-away task and take it back.

    Raises:
        KeyError: nothing is registered under that name.
    """
    return _TASKS.pop(name.lower())


def registered_tasks() -> Mapping[str, type[Task]]:
    """Read-only live view of the table: lower-case name -> :class:`Task` subclass (only the
    tasks registered so far; :func:`~torchrl_dreamer.envs.registry.list_tasks` loads the
    built-in ones first)."""
    return MappingProxyType(_TASKS)
