"""Backpressure between the actor and the learner: Reverb's samples-per-insert rate limiter.

TorchRL has no rate limiter on replay (``UTDRHook`` only logs the update-to-data ratio), so this is
our own, written from Reverb's documented semantics (``SampleToInsertRatio``):

- state: ``inserts``, ``samples``, ``deletes``; ``size = inserts - deletes``;
- ``can_sample(n)``: ``size >= min_size_to_sample`` and
  ``inserts * samples_per_insert - samples - n >= min_diff``;
- ``can_insert(n)``: true while ``size + n <= min_size_to_sample``, else
  ``(inserts + n) * samples_per_insert - samples <= max_diff``;
- a scalar ``error_buffer`` gives ``min_diff, max_diff = spi * min_size -/+ error_buffer``; a pair
  is used as is. A range narrower than ``2 * max(1, spi)`` or ``min_diff > spi * min_size`` (a
  certain deadlock) is a ``ValueError``; ``max_diff < spi * min_size`` warns (it deadlocks unless
  sampling runs concurrently).

:meth:`RateLimiter.insert` / :meth:`RateLimiter.sample` block (with a timeout) until allowed;
:meth:`RateLimiter.await_insert` / :meth:`RateLimiter.await_sample` only wait. The Atropos pause
rule ("pause the env while queued data exceeds off-policy tolerance × batch") is the special case
built by :meth:`RateLimiter.queue`: ``spi = 1``, ``min_diff = 0``, ``max_diff = tolerance × batch``.

How the collector uses it: in *gradient-step units*. Each commit inserts the gradient steps that
the :class:`~torchrl_dreamer.collectors.UpdateSchedule` grants for the newly committed policy steps
(``spi = 1``), each gradient step samples 1. So the learner blocks when starved (no granted step
left), and the actor pauses before its next window while more than ``off_policy_tolerance``
windows' worth of granted steps are queued; the schedule keeps sheeprl's exact integer counts.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Mapping
from typing import Any

from torchrl_dreamer.collectors.defaults import invalid

__all__ = ["RateLimiter", "RateLimiterClosed", "RateLimiterTimeout"]


class RateLimiterTimeout(TimeoutError):
    """A blocking insert/sample waited longer than its timeout (Reverb's ``RateLimiterTimeout``)."""


class RateLimiterClosed(RuntimeError):
    """The limiter was closed (collector shutdown) while a caller was waiting on it."""


class RateLimiter:
    """Samples-per-insert rate limiter with Reverb semantics, thread-safe, blocking with timeouts.

    Args:
        samples_per_insert: target samples per inserted item (``> 0``).
        min_size_to_sample: items needed before any sample (``>= 1``).
        error_buffer: tolerance around the target: a scalar ``e`` (``min/max_diff = spi ×
            min_size ∓ e``) or an explicit ``(min_diff, max_diff)``.

    Examples:
        >>> rl = RateLimiter(samples_per_insert=2.0, min_size_to_sample=2, error_buffer=4.0)
        >>> rl.can_sample(), rl.insert(2), rl.can_sample()
        (False, None, True)
        >>> rl.sample(4, timeout=0)  # 2 inserts × 2 samples each
    """

    def __init__(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        error_buffer: float | tuple[float, float],
    ) -> None:
        spi = float(samples_per_insert)
        if not math.isfinite(spi) or spi <= 0:
            raise invalid("RateLimiter", "samples_per_insert", samples_per_insert,
                          "must be a finite number > 0.")
        if int(min_size_to_sample) != min_size_to_sample or min_size_to_sample < 1:
            raise invalid("RateLimiter", "min_size_to_sample", min_size_to_sample,
                          "must be an integer >= 1.")
        offset = spi * min_size_to_sample
        if isinstance(error_buffer, (tuple, list)):
            if len(error_buffer) != 2:
                raise invalid("RateLimiter", "error_buffer", error_buffer,
                              "as a range it must be (min_diff, max_diff).")
            min_diff, max_diff = float(error_buffer[0]), float(error_buffer[1])
        else:
            if error_buffer < 0:
                raise invalid("RateLimiter", "error_buffer", error_buffer, "must be >= 0.")
            min_diff, max_diff = offset - float(error_buffer), offset + float(error_buffer)
        if max_diff - min_diff < 2 * max(1.0, spi):
            raise ValueError(
                f"RateLimiter: error_buffer range [{min_diff}, {max_diff}] is narrower than "
                f"2 * max(1, samples_per_insert) = {2 * max(1.0, spi)}; inserts and samples "
                "would block each other. Widen error_buffer."
            )
        if min_diff > offset:
            raise ValueError(
                f"RateLimiter: min_diff={min_diff} > samples_per_insert * min_size_to_sample="
                f"{offset}: sampling could never start (guaranteed deadlock). Lower min_diff."
            )
        if max_diff < offset:
            warnings.warn(
                f"RateLimiter: max_diff={max_diff} < samples_per_insert * min_size_to_sample="
                f"{offset}; inserts deadlock unless sampling runs concurrently.",
                UserWarning,
                stacklevel=2,
            )
        self.samples_per_insert = spi
        self.min_size_to_sample = int(min_size_to_sample)
        self.min_diff = min_diff
        self.max_diff = max_diff
        self.inserts = 0
        self.samples = 0
        self.deletes = 0
        self._closed = False
        self._cond = threading.Condition()
        self.blocked_insert_s = 0.0
        self.blocked_sample_s = 0.0

    @classmethod
    def queue(cls, max_queued: float) -> RateLimiter:
        """The Atropos pause rule: one sample per insert, inserts pause while ``> max_queued`` wait.

        ``max_queued`` is ``off_policy_tolerance × batch`` in the caller's units (``>= 2``).
        """
        return cls(1.0, 1, (0.0, float(max_queued)))

    # ----------------------------------------------------------------- predicates
    @property
    def size(self) -> int:
        """Items held: ``inserts - deletes``."""
        return self.inserts - self.deletes

    @property
    def queued(self) -> float:
        """Samples owed but not taken: ``inserts × spi - samples``."""
        return self.inserts * self.samples_per_insert - self.samples

    def can_sample(self, n: int = 1) -> bool:
        """Whether ``n`` samples may be taken now."""
        if self.size < self.min_size_to_sample:
            return False
        return self.inserts * self.samples_per_insert - self.samples - n >= self.min_diff

    def can_insert(self, n: int = 1) -> bool:
        """Whether ``n`` items may be inserted now."""
        if self.size + n <= self.min_size_to_sample:
            return True
        return (self.inserts + n) * self.samples_per_insert - self.samples <= self.max_diff

    # ----------------------------------------------------------------- blocking
    def _wait(self, pred, timeout: float | None, what: str) -> float:
        """Waits (lock held) until ``pred()``; returns seconds blocked."""
        if pred():
            return 0.0
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        while not pred():
            if self._closed:
                raise RateLimiterClosed(f"RateLimiter closed while waiting to {what}.")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise RateLimiterTimeout(
                    f"RateLimiter: could not {what} within {timeout}s (inserts={self.inserts}, "
                    f"samples={self.samples}, size={self.size}, spi={self.samples_per_insert}, "
                    f"diff range=[{self.min_diff}, {self.max_diff}]). The other side is stalled "
                    "or the limits cannot be met."
                )
            self._cond.wait(remaining if remaining is not None else 1.0)
        return time.monotonic() - start

    def insert(self, n: int = 1, timeout: float | None = None) -> None:
        """Records ``n`` inserts, first blocking until :meth:`can_insert` (``timeout`` s at most)."""
        with self._cond:
            self.blocked_insert_s += self._wait(lambda: self.can_insert(n), timeout, f"insert {n}")
            self.inserts += n
            self._cond.notify_all()

    def force_insert(self, n: int = 1) -> None:
        """Records ``n`` inserts without waiting (data already written; the pause happens later)."""
        with self._cond:
            self.inserts += n
            self._cond.notify_all()

    def sample(self, n: int = 1, timeout: float | None = None) -> None:
        """Records ``n`` samples, first blocking until :meth:`can_sample` (``timeout`` s at most)."""
        with self._cond:
            self.blocked_sample_s += self._wait(lambda: self.can_sample(n), timeout, f"sample {n}")
            self.samples += n
            self._cond.notify_all()

    def await_insert(self, n: int = 1, timeout: float | None = None) -> None:
        """Blocks until ``n`` inserts would be allowed, without recording them (a pause)."""
        with self._cond:
            self.blocked_insert_s += self._wait(lambda: self.can_insert(n), timeout, f"insert {n}")

    def await_sample(self, n: int = 1, timeout: float | None = None) -> None:
        """Blocks until ``n`` samples would be allowed, without recording them (starvation)."""
        with self._cond:
            self.blocked_sample_s += self._wait(lambda: self.can_sample(n), timeout, f"sample {n}")

    def delete(self, n: int = 1) -> None:
        """Records ``n`` deletions (items evicted from the table)."""
        with self._cond:
            self.deletes += n
            self._cond.notify_all()

    def close(self) -> None:
        """Wakes every waiter with :class:`RateLimiterClosed` (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def notify(self) -> None:
        """Wakes waiters so they re-check their predicate (and the closed flag)."""
        with self._cond:
            self._cond.notify_all()

    # ----------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict[str, Any]:
        """Counters and limits (Reverb checkpoints its limiter counters with the table)."""
        return {
            "samples_per_insert": self.samples_per_insert,
            "min_size_to_sample": self.min_size_to_sample,
            "min_diff": self.min_diff,
            "max_diff": self.max_diff,
            "inserts": self.inserts,
            "samples": self.samples,
            "deletes": self.deletes,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        with self._cond:
            self.samples_per_insert = float(state_dict["samples_per_insert"])
            self.min_size_to_sample = int(state_dict["min_size_to_sample"])
            self.min_diff = float(state_dict["min_diff"])
            self.max_diff = float(state_dict["max_diff"])
            self.inserts = int(state_dict["inserts"])
            self.samples = int(state_dict["samples"])
            self.deletes = int(state_dict["deletes"])
            self._cond.notify_all()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(spi={self.samples_per_insert}, min_size="
            f"{self.min_size_to_sample}, diff=[{self.min_diff}, {self.max_diff}], "
            f"inserts={self.inserts}, samples={self.samples}, deletes={self.deletes})"
        )
