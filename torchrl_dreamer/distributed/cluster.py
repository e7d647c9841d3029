"""Ray plumbing: a loopback-only local cluster, and calls that work on actors or plain objects.

Why: every piece of the distributed data plane (replay service, weight store, env runner) is a
plain Python class first, and a Ray actor only when wrapped with :func:`remote_class`. The same
client code drives both through :func:`call`, so the protocol is tested in-process without Ray
(Ray needs ~4-15 s and ~0.5 GB to start) and on a real cluster in ``test/distributed/test_ray_cluster.py``.

Ray binds its services to the node IP by default (the host's routable address). On Linux it
treats ``127.0.0.1`` given as ``_node_ip_address`` as "resolve me to the routable address", so
:func:`init_ray` instead switches Ray's "single-machine" mode (the one it uses on macOS/Windows),
where every service binds to loopback. Pass ``address=`` to join an existing cluster instead
(opt-in networking).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["call", "call_async", "get", "init_ray", "is_actor", "put", "ray_available",
           "remote_class", "require_ray"]

_MISSING = (
    "the Ray backend needs the 'ray' package: pip install 'torchrl_dreamer[ray]' "
    "(or pip install 'ray[default]')."
)


def ray_available() -> bool:
    """Whether ``import ray`` works."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def require_ray() -> Any:
    """Imports and returns the ``ray`` module, or raises ``ImportError`` saying how to install it."""
    try:
        import ray
    except ImportError as err:
        raise ImportError(_MISSING) from err
    return ray


def init_ray(
    address: str | None = None,
    *,
    num_cpus: int | None = None,
    loopback: bool = True,
    **kwargs: Any,
) -> Any:
    """Starts (or joins) Ray; a new local cluster binds to 127.0.0.1 only unless ``loopback=False``.

    Args:
        address: an existing cluster (``"ray://host:port"`` or ``"host:port"``): opt-in
            networking. ``None`` starts a local cluster.
        num_cpus: CPUs the local cluster advertises.
        loopback: keep every service of a new local cluster on the loopback interface.
        **kwargs: passed to ``ray.init`` (defaults: ``include_dashboard=False``,
            ``log_to_driver=False``).

    Returns the ``ray`` module. A no-op when Ray is already initialized.

    Example:
        >>> ray = init_ray(num_cpus=2)
        >>> ray.get_runtime_context().gcs_address.startswith("127.0.0.1")
        True
    """
    ray = require_ray()
    if ray.is_initialized():
        return ray
    kwargs.setdefault("include_dashboard", False)
    kwargs.setdefault("log_to_driver", False)
    if address is None and loopback:
        import ray._private.ray_constants as ray_constants

        # Ray's single-machine mode: get_node_ip_address() returns 127.0.0.1 (checked at call
        # time), and child processes inherit the same setting.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        ray_constants.ENABLE_RAY_CLUSTER = False
    if num_cpus is not None and address is None:
        kwargs["num_cpus"] = int(num_cpus)
    ray.init(address=address, **kwargs)
    return ray


def remote_class(cls: type, **options: Any) -> Any:
    """``ray.remote(cls).options(**options)``-style actor class (``num_cpus=0`` by default).

    Actors default to 0 CPUs so a service, a weight store and several runners fit on a small
    cluster; give ``num_cpus`` to reserve cores.
    """
    ray = require_ray()
    options.setdefault("num_cpus", 0)
    return ray.remote(**options)(cls)


def is_actor(obj: Any) -> bool:
    """Whether ``obj`` is a Ray actor handle (else a plain in-process object)."""
    try:
        from ray.actor import ActorHandle
    except ImportError:
        return False
    return isinstance(obj, ActorHandle)


def _is_ref(obj: Any) -> bool:
    try:
        from ray import ObjectRef
    except ImportError:
        return False
    return isinstance(obj, ObjectRef)


def call_async(obj: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """Starts ``obj.method(*args)``: an ``ObjectRef`` for an actor, the result for a plain object."""
    if is_actor(obj):
        return getattr(obj, method).remote(*args, **kwargs)
    return getattr(obj, method)(*args, **kwargs)


def get(value: Any, timeout: float | None = None) -> Any:
    """``ray.get`` for object refs, identity for plain values."""
    if _is_ref(value):
        return require_ray().get(value, timeout=timeout)
    return value


def call(obj: Any, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
    """Calls ``obj.method(*args, **kwargs)`` and waits: same code for actors and plain objects."""
    return get(call_async(obj, method, *args, **kwargs), timeout=timeout)


def put(value: Any, use_ray: bool) -> Any:
    """``ray.put(value)`` when ``use_ray`` (the ref is shared through the object store), else value."""
    if use_ray:
        return require_ray().put(value)
    return value
