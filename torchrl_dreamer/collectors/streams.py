"""Device-side ordering for the actor/learner choreography: no-ops on CPU, CUDA events on GPU.

The choreography (see :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`) is decided on
the host with threading events; what a GPU adds is that kernels are *enqueued*, not done, when the
host moves on. So each host-side hand-off has a device-side twin:

====================  ==================================  =====================================
hand-off              host (all backends)                 device (``cuda`` backend)
====================  ==================================  =====================================
rows committed        ``storage.commit(t)``               actor stream records ``commit``;
                                                          learner stream waits on it before
                                                          sampling
window finished       ``actor_idle`` event                actor stream records ``window_done``;
                                                          learner stream waits before copying
weights published     copy, THEN ``policy_ready`` event   learner stream copies, THEN records
                                                          ``policy_ready``; actor stream waits
                                                          on it before the next window
====================  ==================================  =====================================

:class:`HostSync` (reference / threaded) makes every device method a no-op: on CPU an op is done
when it returns. :class:`CudaSync` holds the two streams and the three events. Both expose the
same methods, so the collector's code path is identical and the CPU twin tests it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

__all__ = ["CudaSync", "HostSync", "make_sync"]


class HostSync:
    """Device-side ordering for CPU backends: nothing to do (ops complete on return)."""

    device_type = "cpu"

    def actor_context(self) -> contextlib.AbstractContextManager:
        """Context the actor's window runs in (its stream on CUDA)."""
        return contextlib.nullcontext()

    def learner_context(self) -> contextlib.AbstractContextManager:
        """Context the learner's updates and copies run in (its stream on CUDA)."""
        return contextlib.nullcontext()

    def record_commit(self) -> None:
        """Actor: the rows written so far are complete on the device."""

    def learner_wait_commit(self) -> None:
        """Learner: order the next sample after the last commit."""

    def record_window_done(self) -> None:
        """Actor: the window's reads of the player weights are enqueued."""

    def learner_wait_window_done(self) -> None:
        """Learner: order the weight copy after the actor's last window."""

    def record_policy_ready(self) -> None:
        """Learner: the weight copy is enqueued; record ``policy_ready`` after it."""

    def actor_wait_policy_ready(self) -> None:
        """Actor: order the next window after ``policy_ready``."""

    def synchronize(self) -> None:
        """Wait for every enqueued op (end of run)."""


class CudaSync(HostSync):
    """Actor and learner CUDA streams with ``commit`` / ``window_done`` / ``policy_ready`` events.

    The host never blocks on these: ``wait_event`` only orders later kernels of one stream after
    the event's point in another stream.

    Args:
        device: the CUDA device both streams live on.
    """

    device_type = "cuda"

    def __init__(self, device: torch.device | str) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError(
                "backend='cuda' needs CUDA, which is not available here; use backend='threaded'."
            )
        self.device = torch.device(device)
        self.actor_stream = torch.cuda.Stream(device=self.device)
        self.learner_stream = torch.cuda.Stream(device=self.device)
        self.commit_event: Any = None
        self.window_done_event: Any = None
        self.policy_ready_event: Any = None

    def actor_context(self) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self.actor_stream)

    def learner_context(self) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self.learner_stream)

    def record_commit(self) -> None:
        ev = torch.cuda.Event()
        ev.record(self.actor_stream)
        self.commit_event = ev

    def learner_wait_commit(self) -> None:
        ev = self.commit_event
        if ev is not None:
            self.learner_stream.wait_event(ev)

    def record_window_done(self) -> None:
        ev = torch.cuda.Event()
        ev.record(self.actor_stream)
        self.window_done_event = ev

    def learner_wait_window_done(self) -> None:
        ev = self.window_done_event
        if ev is not None:
            self.learner_stream.wait_event(ev)

    def record_policy_ready(self) -> None:
        ev = torch.cuda.Event()
        ev.record(self.learner_stream)
        self.policy_ready_event = ev

    def actor_wait_policy_ready(self) -> None:
        ev = self.policy_ready_event
        if ev is not None:
            self.actor_stream.wait_event(ev)

    def synchronize(self) -> None:
        self.actor_stream.synchronize()
        self.learner_stream.synchronize()


def make_sync(backend: str, device: torch.device | str) -> HostSync:
    """:class:`CudaSync` for ``backend="cuda"``, else :class:`HostSync`."""
    if backend == "cuda":
        return CudaSync(device)
    return HostSync()
