"""Device-side ordering for the actor/learner choreography: no-ops on CPU, stream events on GPU.

The choreography (see :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`) is decided on
the host with threading events; what a GPU adds is that kernels are *enqueued*, not done, when the
host moves on. So each host-side hand-off has a device-side twin:

====================  ==================================  =====================================
hand-off              host (all backends)                 device (``cuda`` backend)
====================  ==================================  =====================================
run starts            ``iterator()``                      both streams wait on the caller's
                                                          stream (env reset, model init, a
                                                          loaded checkpoint were enqueued there)
rows committed        ``storage.commit(t)``               actor stream records ``commit``;
                                                          learner stream waits on it before
                                                          gathering
window finished       ``actor_idle`` event                actor stream records ``window_done``;
                                                          learner stream waits before copying
                                                          weights or reading the player's state
weights published     copy, THEN ``policy_ready`` event   learner stream copies, THEN records
                                                          ``policy_ready``; actor stream waits
                                                          on it before the next window
====================  ==================================  =====================================

Three implementations share one interface, so the collector's code path is the same for all:

- :class:`HostSync` (``reference`` / ``threaded``): every device method is a no-op, since on
  the CPU an op is done when it returns; busy intervals are host times.
- :class:`StreamSync` holds the two streams and the three events over a small *device API*
  (streams, events, the current stream). :class:`CudaSync` is :class:`StreamSync` over
  ``torch.cuda``; :class:`~torchrl_dreamer.collectors.stream_twin.StreamTwin` (``cuda-twin``) is
  the same class over host streams and events that model CUDA's ordering with vector clocks and
  check every op against it, so the CUDA choreography runs, and is checked, on a CPU.
- Busy intervals (:meth:`HostSync.timer_start` / :meth:`HostSync.timer_stop`) are timed by
  events recorded on the actor and learner streams, so ``overlap_eff`` of the ``cuda`` backend
  measures what the device did, not how long the host took to enqueue it.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import Any, Literal, Protocol

import torch

__all__ = ["CudaSync", "DeviceAPI", "HostSync", "StreamOrderError", "StreamSync"]

Side = Literal["actor", "learner"]


class StreamOrderError(RuntimeError):
    """The stream choreography was broken: an event recorded or waited from the wrong stream, a
    race between the actor's and the learner's streams, or a host sync inside a hot loop."""


class HostSync:
    """Device-side ordering for CPU backends: nothing to do (ops complete on return).

    Also the interface every sync implements; the collector calls only these methods.
    """

    device_type = "cpu"
    deferred = False
    """Whether device work may still be running when the host moves on (streams)."""

    def __init__(self) -> None:
        self._busy: dict[str, collections.deque] = {
            "actor": collections.deque(), "learner": collections.deque()}

    # ---------------------------------------------------------------- scopes
    def begin(self) -> None:
        """A run starts: order both sides after the work the caller enqueued before it."""

    def thread_scope(self) -> contextlib.AbstractContextManager:
        """Context a collector thread does its work in (the twin watches every op there)."""
        return contextlib.nullcontext()

    def actor_context(self) -> contextlib.AbstractContextManager:
        """Context the actor's window runs in (its stream on CUDA)."""
        return contextlib.nullcontext()

    def learner_context(self) -> contextlib.AbstractContextManager:
        """Context the learner's updates and copies run in (its stream on CUDA)."""
        return contextlib.nullcontext()

    def host_read(self) -> contextlib.AbstractContextManager:
        """A deliberate read of device values by the host (metrics and fail-fast flags, every
        ``log_every`` updates); the twin refuses host syncs in the hot loops outside it."""
        return contextlib.nullcontext()

    # ---------------------------------------------------------------- events
    def record_commit(self) -> None:
        """Actor: the rows written so far are complete on the device."""

    def learner_wait_commit(self) -> None:
        """Learner: order the next gather after the last commit."""

    def reader_wait_commit(self) -> None:
        """Any other reader (e.g. episode statistics): order the calling thread's current
        stream after the last commit, so the committed rows it reads next are complete."""

    def record_window_done(self) -> None:
        """Actor: the window's reads of the player weights and state are enqueued."""

    def learner_wait_window_done(self) -> None:
        """Learner: order the weight copy (and reads of the player's state) after the window."""

    def record_policy_ready(self) -> None:
        """Learner: the weight copy is enqueued; record ``policy_ready`` after it."""

    def actor_wait_policy_ready(self) -> None:
        """Actor: order the next window after ``policy_ready``."""

    def synchronize(self) -> None:
        """Wait for every enqueued op (end of run)."""

    def external_write(self, tensor: torch.Tensor) -> None:
        """The current stream's native code (not a torch op) wrote ``tensor``: the emulator
        rendering a frame into a replay row. Only the twin, which watches torch ops, needs it."""

    # ---------------------------------------------------------------- busy time
    def timer_start(self, side: Side) -> Any:
        """Start of a busy interval of ``side`` (a window or an update); returns a token."""
        return time.perf_counter()

    def timer_stop(self, side: Side, token: Any) -> None:
        """End of the busy interval started by ``token``."""
        self._busy[side].append((token, time.perf_counter()))

    def busy_intervals(self) -> dict[str, list[tuple[float, float]]]:
        """The finished busy intervals ``(start_s, end_s)`` of each side not returned before,
        in order (on streams: only those the device has completed)."""
        out: dict[str, list[tuple[float, float]]] = {}
        for side, q in self._busy.items():
            items = []
            while q:
                items.append(q.popleft())
            out[side] = items
        return out


class DeviceAPI(Protocol):
    """What :class:`StreamSync` needs from a device: ``torch.cuda`` has exactly these."""

    def Stream(self) -> Any: ...  # noqa: N802 - torch.cuda's names

    def Event(self, enable_timing: bool = False) -> Any: ...  # noqa: N802

    def stream(self, stream: Any) -> contextlib.AbstractContextManager: ...

    def current_stream(self) -> Any: ...


class StreamSync(HostSync):
    """Actor and learner streams with ``commit`` / ``window_done`` / ``policy_ready`` events.

    The host never blocks on these: ``wait_event`` only orders later work of one stream after
    the event's point in another stream. Each method also checks that it runs on the stream it
    orders (the collector calls it inside the matching context), raising
    :class:`StreamOrderError` otherwise: an event recorded on the wrong stream covers the
    wrong work.

    Args:
        api: the device API (``torch.cuda``-like: ``Stream``, ``Event``, ``stream``,
            ``current_stream``).
        device_type: ``"cuda"`` or ``"cpu"`` (the twin).
    """

    deferred = True

    def __init__(self, api: DeviceAPI, device_type: str) -> None:
        super().__init__()
        self.api = api
        self.device_type = device_type
        self.actor_stream = api.Stream()
        self.learner_stream = api.Stream()
        self.commit_event: Any = None
        self.window_done_event: Any = None
        self.policy_ready_event: Any = None
        self._base: Any = None
        self._lock = threading.Lock()

    def _streams(self, side: Side) -> Any:
        return self.actor_stream if side == "actor" else self.learner_stream

    def _current(self) -> Any:
        """The calling thread's current stream (on this sync's device)."""
        return self.api.current_stream()

    def _expect(self, stream: Any, what: str) -> None:
        """``what`` must run with ``stream`` current (events record the current stream's work)."""
        cur = self._current()
        if cur != stream:
            name = "actor" if stream == self.actor_stream else "learner"
            raise StreamOrderError(
                f"{what} must run on the {name} stream (inside the collector's {name}_context), "
                f"but the current stream is {cur}: the event would not cover the {name}'s work."
            )

    def begin(self) -> None:
        cur = self._current()
        base = self.api.Event(enable_timing=True)
        base.record(cur)
        self.actor_stream.wait_event(base)
        self.learner_stream.wait_event(base)
        with self._lock:
            self._base = base
            for q in self._busy.values():
                q.clear()

    def actor_context(self) -> contextlib.AbstractContextManager:
        return self.api.stream(self.actor_stream)

    def learner_context(self) -> contextlib.AbstractContextManager:
        return self.api.stream(self.learner_stream)

    def _record(self, stream: Any, what: str) -> Any:
        self._expect(stream, what)
        ev = self.api.Event()
        ev.record(stream)
        return ev

    def record_commit(self) -> None:
        self.commit_event = self._record(self.actor_stream, "record_commit")

    def learner_wait_commit(self) -> None:
        self._expect(self.learner_stream, "learner_wait_commit")
        ev = self.commit_event
        if ev is not None:
            self.learner_stream.wait_event(ev)

    def reader_wait_commit(self) -> None:
        ev = self.commit_event
        if ev is not None:
            self._current().wait_event(ev)

    def record_window_done(self) -> None:
        self.window_done_event = self._record(self.actor_stream, "record_window_done")

    def learner_wait_window_done(self) -> None:
        self._expect(self.learner_stream, "learner_wait_window_done")
        ev = self.window_done_event
        if ev is not None:
            self.learner_stream.wait_event(ev)

    def record_policy_ready(self) -> None:
        self.policy_ready_event = self._record(self.learner_stream, "record_policy_ready")

    def actor_wait_policy_ready(self) -> None:
        self._expect(self.actor_stream, "actor_wait_policy_ready")
        ev = self.policy_ready_event
        if ev is not None:
            self.actor_stream.wait_event(ev)

    def synchronize(self) -> None:
        self.actor_stream.synchronize()
        self.learner_stream.synchronize()

    def timer_start(self, side: Side) -> Any:
        stream = self._streams(side)
        self._expect(stream, f"timer_start({side!r})")
        ev = self.api.Event(enable_timing=True)
        ev.record(stream)
        return ev

    def timer_stop(self, side: Side, token: Any) -> None:
        stream = self._streams(side)
        self._expect(stream, f"timer_stop({side!r})")
        ev = self.api.Event(enable_timing=True)
        ev.record(stream)
        self._busy[side].append((token, ev))

    def busy_intervals(self) -> dict[str, list[tuple[float, float]]]:
        """Intervals whose end event has completed (``query()``, no host sync), in seconds from
        the run's start event; the rest stay queued for a later call."""
        out: dict[str, list[tuple[float, float]]] = {}
        with self._lock:
            base = self._base
            if base is None:  # no run began: nothing was timed
                return {side: [] for side in self._busy}
            for side, q in self._busy.items():
                items = []
                while q and q[0][1].query():
                    start, end = q.popleft()
                    items.append((base.elapsed_time(start) / 1e3, base.elapsed_time(end) / 1e3))
                out[side] = items
        return out


class CudaSync(StreamSync):
    """:class:`StreamSync` on two CUDA streams of ``device`` (the ``cuda`` backend).

    Args:
        device: the CUDA device both streams live on.
    """

    def __init__(self, device: torch.device | str) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError(
                "backend='cuda' needs CUDA, which is not available here; use backend='threaded' "
                "(or 'cuda-twin' to run the CUDA choreography's CPU twin)."
            )
        self.device = torch.device(device)
        with torch.cuda.device(self.device):
            super().__init__(torch.cuda, "cuda")

    def _current(self) -> Any:
        return torch.cuda.current_stream(self.device)

