"""The ``cuda`` backend's CPU twin: CUDA streams and events modelled on the host, every op checked.

On a GPU, ``backend="cuda"`` runs the actor on one CUDA stream and the learner on another and
orders them with events (:class:`~torchrl_dreamer.collectors.streams.CudaSync`). Kernels are
*enqueued* when the host moves on, so a missing ``wait_event`` is a race that only shows, now and
then, on a GPU. On a CPU every op is done when it returns, so running the same code there proves
nothing about its ordering by itself. :class:`StreamTwin` is the same
:class:`~torchrl_dreamer.collectors.streams.StreamSync` class over host *twin* streams and events
that carry vector clocks (the happens-before relation CUDA guarantees), and it watches every op
the collector's threads dispatch (a ``TorchDispatchMode``):

- each op is placed on the calling thread's current twin stream (the actor's, the learner's, or
  the shared default stream outside both contexts) and ticks that stream's clock;
- ``Event.record`` copies the stream's clock, ``Stream.wait_event`` joins it: exactly what CUDA
  orders, and nothing the host's own timing happens to order;
- every read and write is remembered by byte range of its storage (``index_select`` /
  ``index`` gathers by the rows they actually read, so the replay ring's rows are tracked one by
  one). An access that conflicts (one of the two writes) with an access of another stream not
  ordered before it is a race that a GPU could hit: :class:`StreamOrderError`, naming both ops,
  both streams and where each was issued;
- memory freed and reused by the stream that allocated it while another stream's access is not
  ordered before it is the CUDA caching allocator's hazard (a cross-stream tensor without
  ``record_stream``);
- an op that makes a CUDA host wait (``.item()``, ``bool(t)``, ``nonzero``, ...) inside the
  actor's or learner's stream is a host sync in a hot loop, refused unless the collector marked
  it as a deliberate read (:meth:`StreamSync.host_read`: metrics and fail-fast flags every
  ``log_every`` updates).

What it cannot see: memory written behind PyTorch's back (Warp kernels write the emulator's
frames straight into replay rows; the collector reports those with
:meth:`HostSync.external_write`), and the default stream is only watched inside the collector's
threads. A checked run is several times slower than the ``threaded`` backend; without checks
(``StreamTwin(check=False)``) it is as fast and still exercises the CUDA code path.

Example:
    A learner stream that reads the actor's rows without waiting on the commit event:

    >>> twin = StreamTwin()
    >>> twin.begin()
    >>> rows = torch.zeros(8, 4)
    >>> with twin.thread_scope():
    ...     with twin.actor_context():
    ...         _ = rows[3].fill_(1.0)
    ...         twin.record_commit()
    ...     with twin.learner_context():
    ...         twin.learner_wait_commit()
    ...         ok = rows[3].sum()  # ordered after the commit: fine
    >>> with twin.thread_scope():
    ...     with twin.actor_context():
    ...         _ = rows[4].fill_(1.0)
    ...     with twin.learner_context():
    ...         rows[4].sum()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    torchrl_dreamer.collectors.streams.StreamOrderError: race on the learner stream: ...
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchrl_dreamer.collectors.streams import StreamOrderError, StreamSync

__all__ = ["StreamTwin", "TwinDevice", "TwinEvent", "TwinStream"]

# Ops that make the host wait for the device on CUDA (a value read back, or an output whose
# shape depends on the data).
HOST_SYNC_OPS = frozenset({
    "_local_scalar_dense", "nonzero", "is_nonzero", "masked_select", "unique", "_unique",
    "_unique2", "unique_consecutive", "nonzero_static", "item",
})

_TWIN_FILE = __file__
_TORCH_DIR = torch.__file__.rsplit("/", 1)[0]


def _site() -> str:
    """``file:line (function)`` of the innermost caller outside torch, tensordict and this file."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name != _TWIN_FILE and not name.startswith(_TORCH_DIR) and "tensordict" not in name \
                and not name.endswith("contextlib.py"):
            return f"{os.path.basename(name)}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back
    return "?"


class TwinStream:
    """A twin of ``torch.cuda.Stream``: ops placed on it run in order; it carries a vector clock
    (``vc[stream id]`` = how many of that stream's ops it is ordered after)."""

    def __init__(self, device: TwinDevice, name: str, sid: int) -> None:
        self.device, self.name, self.sid = device, name, sid
        self.vc: dict[int, int] = {sid: 0}

    def wait_event(self, event: TwinEvent) -> None:
        """Later ops of this stream are ordered after the event's point (an unrecorded event is
        complete, as on CUDA)."""
        if event.vc is not None:
            with self.device.lock:
                _join(self.vc, event.vc)

    def wait_stream(self, stream: TwinStream) -> None:
        """Later ops of this stream are ordered after everything enqueued on ``stream``."""
        with self.device.lock:
            _join(self.vc, stream.vc)

    def synchronize(self) -> None:
        """The host waits for this stream: its later ops on any stream come after."""
        self.device.host_learns(self.vc)

    def query(self) -> bool:
        """Always done (a CPU op completes before the host moves on)."""
        return True

    def __repr__(self) -> str:
        return f"<twin stream {self.name}>"


class TwinEvent:
    """A twin of ``torch.cuda.Event``: ``record`` takes the stream's clock and the host time."""

    def __init__(self, device: TwinDevice, enable_timing: bool = False) -> None:
        self.device = device
        self.enable_timing = enable_timing
        self.vc: dict[int, int] | None = None
        self.stream: TwinStream | None = None
        self.time_s = 0.0

    def record(self, stream: TwinStream | None = None) -> None:
        stream = stream if stream is not None else self.device.current_stream()
        with self.device.lock:
            self.vc = dict(stream.vc)
        self.stream = stream
        self.time_s = time.perf_counter()

    def query(self) -> bool:
        return True

    def wait(self, stream: TwinStream | None = None) -> None:
        (stream if stream is not None else self.device.current_stream()).wait_event(self)

    def synchronize(self) -> None:
        if self.vc is not None:
            self.device.host_learns(self.vc)

    def elapsed_time(self, end: TwinEvent) -> float:
        """Milliseconds from this event to ``end`` (host times of their records)."""
        return 1e3 * (end.time_s - self.time_s)


def _join(into: dict[int, int], other: dict[int, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


@dataclass(slots=True)
class _Access:
    sid: int
    clock: int
    write: bool
    lo: int
    hi: int
    op: str
    site: str


@dataclass(slots=True)
class _History:
    nbytes: int
    alloc_sid: int | None
    accesses: list[_Access] = field(default_factory=list)
    limit: int = 32


@dataclass(frozen=True, slots=True)
class _OpInfo:
    name: str
    view_only: bool
    writes: frozenset[str]
    fresh_out: bool
    host_sync: bool


def _op_info(func: Any) -> _OpInfo:
    schema = func._schema
    writes = frozenset(a.name for a in schema.arguments
                       if a.alias_info is not None and a.alias_info.is_write)
    rets_alias = [r.alias_info is not None for r in schema.returns]
    name = func.overloadpacket.__name__
    view_only = not writes and bool(rets_alias) and all(rets_alias)
    return _OpInfo(name, view_only, writes, not any(rets_alias), name in HOST_SYNC_OPS)


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    """Bytes ``[lo, hi)`` of ``t``'s storage that the view spans (its bounding range)."""
    es = t.element_size()
    lo = t.storage_offset() * es
    extent = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()) if n > 0)
    return lo, lo + extent * es


def _rows_read(src: torch.Tensor, dim: int, index: torch.Tensor) -> list[tuple[int, int]]:
    """Byte ranges of ``src`` that ``index_select(src, dim, index)`` reads, merged."""
    es = src.element_size()
    dim = dim % src.dim()
    base = src.storage_offset() * es
    step = src.stride(dim) * es
    sub = 1 + sum((n - 1) * abs(s) for d, (n, s) in enumerate(zip(src.shape, src.stride()))
                  if d != dim and n > 0)
    sub *= es
    ranges: list[tuple[int, int]] = []
    for i in sorted(set(index.reshape(-1).tolist())):
        lo = base + int(i) * step
        if ranges and lo <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], lo + sub))
        else:
            ranges.append((lo, lo + sub))
    return ranges


def _overlaps(ranges: list[tuple[int, int]], starts: list[int], lo: int, hi: int) -> bool:
    i = bisect.bisect_right(starts, lo) - 1
    if i >= 0 and ranges[i][1] > lo:
        return True
    i += 1
    return i < len(ranges) and ranges[i][0] < hi


class _Mode(TorchDispatchMode):
    def __init__(self, device: TwinDevice) -> None:
        super().__init__()
        self.device = device

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.device.on_op(func, args, kwargs or {})


class TwinDevice:
    """The host twin of ``torch.cuda``'s stream API (``Stream``, ``Event``, ``stream``,
    ``current_stream``), plus the checker of the ops dispatched under :meth:`watch`.

    Args:
        check: watch ops (races, allocator reuse, host syncs); ``False`` keeps only the
            stream/event discipline checks of :class:`StreamSync` (fast).
        raise_errors: raise :class:`StreamOrderError` at the first violation (else only collect
            them in :attr:`errors`).
        host_syncs: refuse host syncs in the actor's and learner's streams (outside
            :meth:`allow_host_sync`). ``GameBoyEnv`` on a CPU device tests for resets on the
            host, which its CUDA path never does: check a CPU maze run with ``False``.
    """

    def __init__(self, check: bool = True, raise_errors: bool = True,
                 host_syncs: bool = True) -> None:
        self.check = check
        self.raise_errors = raise_errors
        self.host_syncs = host_syncs
        self.lock = threading.RLock()
        self._tls = threading.local()
        self._ids = itertools.count()
        self.default = TwinStream(self, "default", next(self._ids))
        self.streams: list[TwinStream] = [self.default]
        self._history: dict[int, _History] = {}
        self._infos: dict[Any, _OpInfo] = {}
        self._default_active = False
        self.errors: list[str] = []
        self.ops = 0
        self.syncs = 0

    # ------------------------------------------------------------------ torch.cuda's API
    def Stream(self) -> TwinStream:  # noqa: N802 - torch.cuda's name
        """A new twin stream."""
        with self.lock:
            s = TwinStream(self, f"stream{len(self.streams)}", next(self._ids))
            self.streams.append(s)
        return s

    def Event(self, enable_timing: bool = False) -> TwinEvent:  # noqa: N802
        """A new twin event."""
        return TwinEvent(self, enable_timing)

    def current_stream(self) -> TwinStream:
        """The calling thread's current twin stream (the default stream outside contexts)."""
        stack = getattr(self._tls, "stack", None)
        return stack[-1] if stack else self.default

    @contextlib.contextmanager
    def stream(self, stream: TwinStream) -> Iterator[None]:
        """Make ``stream`` the calling thread's current stream (``torch.cuda.stream``)."""
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        stack.append(stream)
        try:
            yield
        finally:
            stack.pop()

    # ------------------------------------------------------------------ host knowledge
    def _host_vc(self) -> dict[int, int]:
        vc = getattr(self._tls, "host_vc", None)
        if vc is None:
            vc = self._tls.host_vc = {}
        return vc

    def host_learns(self, vc: dict[int, int]) -> None:
        """The calling thread waited for the device up to ``vc``: its later ops come after."""
        with self.lock:
            _join(self._host_vc(), vc)

    def reset(self) -> None:
        """Forget every access (a new run: the host has waited for both streams)."""
        with self.lock:
            self._history.clear()
            self._default_active = False

    # ------------------------------------------------------------------ watching
    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Check every op the calling thread dispatches inside (re-entrant)."""
        depth = getattr(self._tls, "depth", 0)
        if not self.check or depth:
            self._tls.depth = depth + 1
            try:
                yield
            finally:
                self._tls.depth = depth
            return
        self._tls.depth = 1
        try:
            with _Mode(self):
                yield
        finally:
            self._tls.depth = 0

    @contextlib.contextmanager
    def allow_host_sync(self) -> Iterator[None]:
        """Host syncs inside are deliberate (a periodic read of device values)."""
        prev = getattr(self._tls, "allow_sync", False)
        self._tls.allow_sync = True
        try:
            yield
        finally:
            self._tls.allow_sync = prev

    def _fail(self, message: str) -> None:
        self.errors.append(message)
        if self.raise_errors:
            raise StreamOrderError(message)

    def _info(self, func: Any) -> _OpInfo:
        info = self._infos.get(func)
        if info is None:
            info = self._infos[func] = _op_info(func)
        return info

    def on_op(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Checks and records one dispatched op, then runs it."""
        info = self._info(func)
        if info.view_only:
            return func(*args, **kwargs)
        stream = self.current_stream()
        if info.host_sync:
            self._host_sync(info, stream)
        reads: list[tuple[torch.Tensor, list[tuple[int, int]] | None]] = []
        writes: list[torch.Tensor] = []
        names = [a.name for a in func._schema.arguments]
        values = list(zip(names, args)) + list(kwargs.items())
        gathered = None
        if info.name in ("index_select", "index") and len(args) >= 2:
            gathered = self._gather_ranges(info.name, args)
        for name, val in values:
            tensors = [val] if isinstance(val, torch.Tensor) else (
                [v for v in val if isinstance(v, torch.Tensor)]
                if isinstance(val, (list, tuple)) else [])
            for t in tensors:
                if name in info.writes:
                    writes.append(t)
                elif gathered is not None and t is args[0]:
                    reads.append((t, gathered))
                else:
                    reads.append((t, None))
        site = _site()
        with self.lock:
            self.ops += 1
            if stream is self.default:
                self._default_active = True
            _join(stream.vc, self._host_vc())
            stream.vc[stream.sid] += 1
            for t in writes:
                self._access(t, stream, True, None, info.name, site)
            for t, ranges in reads:
                self._access(t, stream, False, ranges, info.name, site)
        out = func(*args, **kwargs)
        if info.fresh_out:
            outs = out if isinstance(out, (list, tuple)) else (out,)
            ins = {t.untyped_storage().data_ptr() for t, _ in reads if t.numel()}
            with self.lock:
                for t in outs:
                    if isinstance(t, torch.Tensor) and t.numel() and \
                            t.untyped_storage().data_ptr() not in ins:
                        self._fresh(t, stream, info.name, site)
        return out

    def note_write(self, tensor: torch.Tensor, what: str) -> None:
        """Record a write to ``tensor`` on the current stream that no op dispatched (native code
        writing through a pointer, e.g. the emulator rendering into a replay row)."""
        if not self.check or not getattr(self._tls, "depth", 0):
            return
        stream = self.current_stream()
        with self.lock:
            stream.vc[stream.sid] += 1
            self._access(tensor, stream, True, None, what, _site())

    def _gather_ranges(self, name: str, args: tuple) -> list[tuple[int, int]] | None:
        src = args[0]
        if not isinstance(src, torch.Tensor) or src.dim() == 0 or src.numel() == 0:
            return None
        if name == "index_select":
            dim, index = args[1], args[2]
        else:  # aten.index.Tensor: only a single index on dim 0 is read row by row
            idx = args[1]
            if len(idx) != 1 or not isinstance(idx[0], torch.Tensor) or idx[0].dtype == torch.bool:
                return None
            dim, index = 0, idx[0]
        if not isinstance(index, torch.Tensor) or index.numel() == 0:
            return None
        return _rows_read(src, int(dim), index)

    def _host_sync(self, info: _OpInfo, stream: TwinStream) -> None:
        self.syncs += 1
        if self.host_syncs and stream is not self.default \
                and not getattr(self._tls, "allow_sync", False):
            self._fail(
                f"host sync in the {stream.name} stream's hot loop: aten.{info.name} at "
                f"{_site()} makes the host wait for the device on CUDA. Keep the value on the "
                "device, or read it in the collector's periodic host_read()."
            )
        self.host_learns(stream.vc)

    def _access(self, t: torch.Tensor, stream: TwinStream, write: bool,
                ranges: list[tuple[int, int]] | None, op: str, site: str) -> None:
        if t.numel() == 0 or t.device.type == "meta":
            return
        st = t.untyped_storage()
        key, nbytes = st.data_ptr(), st.nbytes()
        hist = self._history.get(key)
        if hist is None or hist.nbytes != nbytes:
            hist = self._history[key] = _History(nbytes, None)
        if ranges is None:
            ranges = [_byte_range(t)]
        starts = [r[0] for r in ranges]
        vc, sid = stream.vc, stream.sid
        for a in hist.accesses:
            if a.sid != sid and (write or a.write) and vc.get(a.sid, 0) < a.clock \
                    and _overlaps(ranges, starts, a.lo, a.hi):
                other = self._name(a.sid)
                self._fail(
                    f"race on the {stream.name} stream: aten.{op} "
                    f"{'writes' if write else 'reads'} {tuple(t.shape)} {t.dtype} at {site}, "
                    f"but the {other} stream's aten.{a.op} ({'write' if a.write else 'read'} at "
                    f"{a.site}) on the same bytes is not ordered before it (no wait_event on an "
                    f"event recorded after it: {stream.name} has seen {vc.get(a.sid, 0)} of "
                    f"{other}'s ops, that access was op {a.clock})."
                )
                break
        clock = vc[sid]
        if len(ranges) == 1:
            lo, hi = ranges[0]
            hist.accesses = [a for a in hist.accesses if not (
                a.sid == sid and lo <= a.lo and a.hi <= hi and (write or not a.write))]
        hist.accesses.extend(_Access(sid, clock, write, lo, hi, op, site) for lo, hi in ranges)
        if len(hist.accesses) > hist.limit:
            self._prune(hist)

    def _fresh(self, t: torch.Tensor, stream: TwinStream, op: str, site: str) -> None:
        st = t.untyped_storage()
        key, nbytes = st.data_ptr(), st.nbytes()
        old = self._history.get(key)
        if old is not None and old.alloc_sid == stream.sid:
            vc = stream.vc
            for a in old.accesses:
                if a.sid != stream.sid and vc.get(a.sid, 0) < a.clock:
                    self._fail(
                        f"memory reuse hazard on the {stream.name} stream: aten.{op} at {site} "
                        f"got memory that the {stream.name} stream allocated and the host freed "
                        f"while the {self._name(a.sid)} stream's aten.{a.op} at {a.site} may "
                        "still use it (CUDA's caching allocator hands it back to its stream at "
                        "once): keep a reference until that stream is done, or record_stream."
                    )
                    break
        hist = self._history[key] = _History(nbytes, stream.sid)
        hist.accesses.append(_Access(stream.sid, stream.vc[stream.sid], True, 0, nbytes, op, site))

    def _prune(self, hist: _History) -> None:
        """Drop accesses every other stream is ordered after (they can no longer race)."""
        floors: dict[int, int] = {}
        streams = [s for s in self.streams if s is not self.default or self._default_active]
        for s in streams:
            others = [o.vc.get(s.sid, 0) for o in streams if o is not s]
            floors[s.sid] = min(others) if others else 0
        hist.accesses = [a for a in hist.accesses if a.clock > floors.get(a.sid, 0)]
        hist.limit = max(32, 2 * len(hist.accesses))

    def _name(self, sid: int) -> str:
        for s in self.streams:
            if s.sid == sid:
                return s.name
        return f"stream{sid}"


class StreamTwin(StreamSync):
    """:class:`StreamSync` over :class:`TwinDevice`: the ``cuda`` backend's code path on a CPU,
    with its ordering checked (backend ``"cuda-twin"``).

    Args:
        check: watch every op of the collector's threads for races, allocator reuse and host
            syncs in the hot loops (several times slower); ``False`` keeps only the stream
            discipline checks.
        raise_errors: raise at the first violation (else collect them in :attr:`errors`).
        host_syncs: refuse host syncs in the hot loops (see :class:`TwinDevice`).
    """

    def __init__(self, check: bool = True, raise_errors: bool = True,
                 host_syncs: bool = True) -> None:
        self.twin = TwinDevice(check=check, raise_errors=raise_errors, host_syncs=host_syncs)
        super().__init__(self.twin, "cpu")
        self.actor_stream.name = "actor"
        self.learner_stream.name = "learner"

    @property
    def errors(self) -> list[str]:
        """Violations found so far (also raised when ``raise_errors``)."""
        return self.twin.errors

    def synchronize(self) -> None:
        super().synchronize()
        self.twin.reset()  # the host waited for both streams: no earlier access can race

    def thread_scope(self) -> contextlib.AbstractContextManager:
        return self.twin.watch()

    def host_read(self) -> contextlib.AbstractContextManager:
        return self.twin.allow_host_sync()

    def external_write(self, tensor: torch.Tensor) -> None:
        self.twin.note_write(tensor, "external_write")
