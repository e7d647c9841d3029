"""The ``cuda`` and ``cuda-twin`` backends: the threaded loop, its work ordered on two streams.

Their loop is :class:`~.backend_threaded.ThreadedLoop`, line for line; what differs is the
device-ordering object every step of the actor and the learner goes through, chosen here by
:func:`make_sync`:

- ``cuda``: :class:`~.streams.CudaSync`, an actor stream and a learner stream ordered by CUDA
  events (commit, window done, policy ready); metrics are reduced on the device and read every
  ``log_every`` updates on the learner stream, busy time is timed by stream events;
- ``cuda-twin``: :class:`~.stream_twin.StreamTwin`, the same calls on a CPU over host streams
  and events with vector clocks, every op checked against their ordering;
- ``reference`` and ``threaded``: :class:`~.streams.HostSync`, whose device calls do nothing.

:func:`make_sync` lives here, above :mod:`.streams` and :mod:`.stream_twin`, so that ``streams``
never imports the twin built on it.
"""

from __future__ import annotations

import torch

from torchrl_dreamer.collectors.stream_twin import StreamTwin
from torchrl_dreamer.collectors.streams import CudaSync, HostSync

__all__ = ["make_sync"]


def make_sync(backend: str, device: torch.device | str) -> HostSync:
    """:class:`CudaSync` for ``backend="cuda"``, the CPU twin
    (:class:`~torchrl_dreamer.collectors.stream_twin.StreamTwin`) for ``"cuda-twin"``, else
    :class:`HostSync`.

    Example:
        >>> type(make_sync("threaded", "cpu")).__name__, type(make_sync("cuda-twin", "cpu")).__name__
        ('HostSync', 'StreamTwin')
    """
    if backend == "cuda":
        return CudaSync(device)
    if backend == "cuda-twin":
        return StreamTwin()
    return HostSync()
