"""Running a console batch on several CPU cores: ``GameBoy(..., workers=K)``.

A Warp CPU launch runs its threads one after another on the calling core, so one launch over N
consoles uses one core however many the machine has. :class:`~.gameboy.GameBoy` with
``workers=K`` splits its consoles into K contiguous slices (:func:`slice_bounds`), records one
launch per slice (views of the same state tensors, so nothing is copied) and starts the slices'
launches together on a :class:`LaunchPool`: K - 1 worker threads plus the calling thread.

Threads work because Warp calls a CPU kernel through a ``ctypes.CFUNCTYPE`` function pointer,
and ctypes releases the GIL for the duration of a foreign call: while one thread is inside a
launch, others run Python and their own launches (the measurement:
``docs/decisions/kernel_shape.md``, "Several CPU cores with threads").
Consoles never touch each other's state, so a slice's launch gives exactly the bytes that the
same consoles get in one launch over the whole batch.

Why our own: ``concurrent.futures`` alone does not know about console slices, about a pool that
a forked child inherits without its threads (it would wait forever), or about the launch-sized
jobs whose errors must surface only after every slice has finished.

Example:
    >>> slice_bounds(7, 2)
    [(0, 3), (3, 7)]
    >>> pool = LaunchPool(2)
    >>> out = []
    >>> pool.run([lambda: out.append("a"), lambda: out.append("b")])
    >>> sorted(out)
    ['a', 'b']
    >>> pool.close()
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import torch

__all__ = ["available_cores", "check_workers", "slice_bounds", "LaunchPool"]


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity API (macOS, Windows)
        return os.cpu_count() or 1


def check_workers(workers: object, device: torch.device) -> int:
    """Validate a ``workers`` argument for ``device`` and return it as an int.

    Raises:
        ValueError: not an int >= 1, more than :func:`available_cores`, or > 1 on a CUDA
            device (the message says what to pass instead).

    Example:
        >>> check_workers(1, torch.device("cpu"))
        1
        >>> check_workers(0, torch.device("cpu"))
        Traceback (most recent call last):
        ...
        ValueError: workers must be an int >= 1 (the number of CPU cores to emulate on), got 0
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(
            f"workers must be an int >= 1 (the number of CPU cores to emulate on), got {workers!r}"
        )
    if workers == 1:
        return 1
    if device.type != "cpu":
        raise ValueError(
            f"workers={workers} splits the consoles over CPU cores; on {device} one launch already "
            "runs every console in parallel on the GPU: pass workers=1 (the default)"
        )
    cores = available_cores()
    if workers > cores:
        raise ValueError(
            f"workers={workers} is more than the {cores} CPU cores this process may use "
            f"(os.sched_getaffinity / os.cpu_count): pass workers <= {cores} (extra threads would "
            "only take turns on the same cores)"
        )
    return workers


def slice_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """``k`` contiguous ``(lo, hi)`` ranges covering ``0..n`` whose sizes differ by at most one
    (``k <= n``)."""
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    return [(n * j // k, n * (j + 1) // k) for j in range(k)]


def _shutdown(executor: ThreadPoolExecutor | None) -> None:
    if executor is not None:
        executor.shutdown(wait=False)


class LaunchPool:
    """Run ``workers`` jobs at once: ``workers - 1`` pool threads plus the calling thread.

    :meth:`run` returns only when every job has finished, so no launch is ever still running
    when the caller touches the consoles again; the first error raised by a job is re-raised
    then. A process forked from one that used the pool gets fresh threads on its first
    :meth:`run` (a forked child inherits the executor but not its threads).

    Args:
        workers: number of jobs :meth:`run` runs at once (>= 1; 1 runs them on the caller).
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._pid = -1
        self._finalizer: weakref.finalize | None = None

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None or self._pid != os.getpid():
            # first use, or a forked child holding its parent's executor without the threads
            self._executor = ThreadPoolExecutor(self.workers - 1,
                                                thread_name_prefix="gameboy-worker")
            self._pid = os.getpid()
            if self._finalizer is not None:
                self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _shutdown, self._executor)
        return self._executor

    def run(self, jobs: Sequence[Callable[[], None]]) -> None:
        """Run ``jobs`` (at most ``workers``) concurrently; the first runs on this thread."""
        if len(jobs) > self.workers:
            raise ValueError(f"{len(jobs)} jobs for a pool of {self.workers} workers")
        if len(jobs) == 1:
            jobs[0]()
            return
        pool = self._pool()
        futures: list[Future] = [pool.submit(job) for job in jobs[1:]]
        error: BaseException | None = None
        try:
            jobs[0]()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the other jobs
            error = exc
        for fut in futures:
            try:
                fut.result()
            except BaseException as exc:  # noqa: BLE001 - the first error wins
                if error is None:
                    error = exc
        if error is not None:
            raise error

    def close(self) -> None:
        """Let the pool's threads exit (they are idle between runs); a later :meth:`run`
        starts new ones."""
        if self._finalizer is not None:
            self._finalizer()
        self._executor = None
        self._finalizer = None
