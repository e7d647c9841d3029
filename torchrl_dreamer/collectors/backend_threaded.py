"""The ``threaded`` backend (and ``cuda`` / ``cuda-twin``): the actor in a thread, the learner in
the caller's, truly concurrent.

The actor thread (:meth:`ThreadedLoop._actor_loop`) goes idle between windows and waits on
``policy_ready``; it pauses (Atropos rule) while more than ``off_policy_tolerance`` windows'
worth of granted gradient steps are queued. The learner (:meth:`ThreadedLoop._run_threaded`)
updates while grants remain, and publishes the weights whenever the actor is idle. Either side
waiting ``timeout_s`` without progress of the other raises :class:`CollectorTimeout` with a
diagnostic; an error in the actor thread is re-raised in the learner's.

The ``cuda`` backends run this same loop; what differs is the device ordering
(:mod:`.backend_cuda`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from tensordict import TensorDictBase

__all__ = ["CollectorTimeout", "ThreadedLoop"]


class CollectorTimeout(TimeoutError):
    """One side waited ``timeout_s`` without the other making progress (a stall or deadlock)."""


class ThreadedLoop:
    """The concurrent loop of :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`.

    A part of the collector class: it drives the actor's windows (:class:`~.actor_side.ActorSide`)
    and the learner's updates and publications (:class:`~.learner_side.LearnerSide`) through the
    collector's hand-off events, rate limiter and counters.
    """

    def _await_policy(self, paused: bool) -> None:
        """Actor: go idle (``paused`` = backpressure) and wait for ``policy_ready``."""
        self._paused = paused
        self.policy_ready.clear()
        self.actor_idle.set()
        self._wake.set()
        timeout = self.config.timeout_s
        mark, since = (self.updates, self.publications), time.monotonic()
        while not self.policy_ready.wait(min(0.25, timeout)):
            if self._stop:
                return
            now_mark = (self.updates, self.publications)
            if now_mark != mark:
                mark, since = now_mark, time.monotonic()
            elif time.monotonic() - since > timeout:
                raise CollectorTimeout(
                    f"actor waited {timeout}s for policy_ready without learner progress "
                    f"({self._diagnostic()})."
                )

    def _actor_loop(self) -> None:
        """The actor thread: wait for a policy, act one window, repeat; errors go to the learner."""
        try:
            with self._sync.thread_scope():
                while not self._done_collecting():
                    self._await_policy(paused=False)
                    while not self._stop and not self.limiter.can_insert(0):
                        self._await_policy(paused=True)
                    self._paused = False
                    if self._stop:
                        break
                    self._actor_window()
                self._final_commit()
        except BaseException as err:  # re-raised in the learner's thread
            self._actor_error = err
        finally:
            self._actor_done = True
            self._wake.set()

    def _run_threaded(self) -> Iterator[TensorDictBase]:
        """The learner's loop in the caller's thread, the actor in its own; one turn at a time:
        update while granted (at most ``max_learner_steps_per_tick`` between publications),
        publish when the actor is idle (updating first while it is paused by backpressure),
        stop when the actor is done and the grants are used up."""
        cfg = self.config
        k = cfg.max_learner_steps_per_tick
        self._actor_thread = threading.Thread(
            target=self._actor_loop, name="dreamer-actor", daemon=True
        )
        self._actor_thread.start()
        tick = 0
        mark, since = (self.env_steps, self.windows), time.monotonic()
        try:
            while True:
                # the work of one turn in the collector's thread scope (the twin watches it);
                # the yield below hands control to the caller outside it
                with self._sync.thread_scope():
                    self._wake.clear()
                    if self._actor_error is not None:
                        raise self._actor_error
                    if self._stop:
                        break
                    if self.actor_idle.is_set():
                        if self._paused and tick < k and self.limiter.can_sample(1):
                            self._update()
                            tick += 1
                        else:
                            self._publish()
                            tick = 0
                    elif tick < k and self.limiter.can_sample(1):
                        self._update()
                        tick += 1
                    elif self._actor_done:
                        if not self.limiter.can_sample(1):
                            break
                        tick = 0  # the actor is gone: no boundary to wait for
                    elif not self._wake.wait(min(0.25, cfg.timeout_s)):
                        now_mark = (self.env_steps, self.windows)
                        if now_mark != mark:
                            mark, since = now_mark, time.monotonic()
                        elif time.monotonic() - since > cfg.timeout_s:
                            raise CollectorTimeout(
                                f"learner waited {cfg.timeout_s}s without actor progress "
                                f"({self._diagnostic()})."
                            )
                    else:
                        mark, since = (self.env_steps, self.windows), time.monotonic()
                yield from self._drain_logs()
            self._actor_thread.join(cfg.timeout_s)
            if self._actor_error is not None:
                raise self._actor_error
            with self._sync.thread_scope():
                if not self._stop:
                    self._publish()
                self._sync.synchronize()
                self._feed_overlap()
            yield from self._drain_logs()
        finally:
            self._stop_actor()

    def _stop_actor(self) -> None:
        """Stop the actor thread and release its waits."""
        th = self._actor_thread
        if th is not None and th.is_alive():
            self._stop = True
            self.policy_ready.set()
            self.limiter.notify()
            th.join(self.config.timeout_s)

    def _diagnostic(self) -> str:
        """The state of both sides, for timeout messages."""
        return (
            f"env_steps={self.env_steps}, committed_t={self.storage.committed_t}, "
            f"updates={self.updates}, granted={self.limiter.inserts}, "
            f"backlog={self.limiter.queued}, actor_idle={self.actor_idle.is_set()}, "
            f"paused={self._paused}, policy_ready={self.policy_ready.is_set()}, "
            f"versions={self.versions}"
        )
