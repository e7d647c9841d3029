"""Remote collection: backends whose envs, players and replay live elsewhere (Ray actors).

A run is composed once, by :func:`~torchrl_dreamer.trainers.build_run`, from its factories. For
``backend="ray"`` the envs, players and replay run in actors, so the composer asks the backend
for three things (:class:`RemoteCollection`): how many envs each runner steps, the run's
demonstrations in the backend's row format, and the collector that drives the actors. The
backend registers itself here, in the collector layer both sides import
(:mod:`torchrl_dreamer.distributed` does on import), so the trainers never import
``distributed`` and ``distributed`` never imports the trainers.

Example:
    >>> class Inline:
    ...     def envs_per_runner(self, config): return config.num_envs
    ...     def load_demonstrations(self, paths, probe_env): return None
    ...     def collector(self, config, env_factory, policy_factory, learner, *, logger=None,
    ...                   demonstrations=None): return "a collector"
    >>> isinstance(Inline(), RemoteCollection)
    True
    >>> _ = register_remote_collection("inline-example", Inline())
    >>> remote_collection("inline-example").collector(None, None, None, None)
    'a collector'
    >>> unregister_remote_collection("inline-example")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "RemoteCollection",
    "register_remote_collection",
    "remote_collection",
    "unregister_remote_collection",
]


@runtime_checkable
class RemoteCollection(Protocol):
    """What the composition root needs of a backend that collects in other processes.

    ``config`` is the run's :class:`~torchrl_dreamer.trainers.TrainConfig` (read through its
    sections and flat names; the backend derives its own config from it).
    """

    def envs_per_runner(self, config: Any) -> int:
        """Envs each runner steps (the runners' factories are the run's with this ``num_envs``)."""
        ...

    def load_demonstrations(self, paths: Sequence[str], probe_env: Any) -> Any:
        """The demonstration files ``paths``, checked against ``probe_env``, as the backend's rows
        (a bad file raises the data layer's ``DemonstrationError`` or ``FileNotFoundError``)."""
        ...

    def collector(self, config: Any, env_factory: Callable[[], Any],
                  policy_factory: Callable[[Any], Any], learner: Any, *, logger: Any = None,
                  demonstrations: Any = None) -> Any:
        """The collector the trainer drives (``iterator``, ``state_dict``, ``save_replay``...):
        runners built with ``env_factory`` / ``policy_factory``, ``learner`` trained here."""
        ...


_REMOTE: dict[str, RemoteCollection] = {}


def register_remote_collection(backend: str, collection: RemoteCollection) -> RemoteCollection:
    """Make ``build_run`` collect runs of ``backend`` with ``collection`` (dependency injection:
    the layer that owns such a collector registers it on import). Returns ``collection``.

    Raises:
        TypeError: ``collection`` lacks a method of :class:`RemoteCollection`.
        ValueError: another collection is already registered for ``backend``.
    """
    if not isinstance(collection, RemoteCollection):
        raise TypeError(f"{type(collection).__name__} is not a RemoteCollection: it needs "
                        "envs_per_runner, load_demonstrations and collector.")
    other = _REMOTE.get(backend)
    if other is not None and type(other) is not type(collection):
        raise ValueError(f"backend {backend!r} already collects with {other!r}")
    _REMOTE[backend] = collection
    return collection


def unregister_remote_collection(backend: str) -> None:
    """Forget the collection of ``backend`` (tests; nothing happens when none is registered)."""
    _REMOTE.pop(backend, None)


def remote_collection(backend: str) -> RemoteCollection | None:
    """The collection registered for ``backend``, or ``None`` (a local backend, or one whose
    package was not imported)."""
    return _REMOTE.get(backend)
