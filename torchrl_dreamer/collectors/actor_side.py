"""The actor's side of the collector: windows of env steps, each row written, committed in strides.

A window is ``steps_per_rollout`` env steps of all envs (:class:`~.env_driver.EnvDriver` acts,
writes one replay row and steps the env). Random actions until ``learning_starts`` policy steps;
the first policy step resets the player's recurrent state. Every ``commit_stride`` steps the rows
so far are committed (:meth:`ActorSide._commit`): the device event first (so a reader on another
stream can wait for the rows), then ``storage.commit``, then the gradient steps the
:class:`~.ratio.UpdateSchedule` grants for them go into the rate limiter.

The concurrent backends run a window straight through (:meth:`ActorSide._actor_window`); the
reference backend pauses it at each commit to give the learner its turn
(:meth:`ActorSide._actor_steps` with ``pause_at_commits=True``), off the actor's clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from torchrl_dreamer.collectors.protocols import RecurrentPolicy

__all__ = ["ActorSide"]


class ActorSide:
    """The actor's steps of :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`.

    A part of the collector class, not a class of its own: it works on the collector's config,
    storage, driver, player, schedule, rate limiter, device ordering (``_sync``), counters and
    hand-off events, all set up in ``AsyncDreamerCollector.__init__``.
    """

    def _commit(self, t: int) -> None:
        """Rows ``<= t`` are complete: record the device event, commit, grant gradient steps."""
        if t <= self.storage.committed_t:
            return
        self._sync.record_commit()
        self.storage.commit(t)
        granted = self.schedule((t + 1) * self.num_envs)
        if granted:
            self.limiter.force_insert(granted)
        self._trace("commit", t, granted)
        self.commit_event.set()
        self._wake.set()

    def _actor_window(self) -> None:
        """One window, straight through (the concurrent backends)."""
        for _ in self._actor_steps(pause_at_commits=False):
            pass

    def _actor_steps(self, pause_at_commits: bool) -> Iterator[int]:
        """One window of ``steps_per_rollout`` env steps (fewer once collection is done).

        With ``pause_at_commits`` it yields the committed step after each commit, its busy
        timer stopped, so the caller (the reference backend) can run the learner in between:
        that time counts neither as the actor's busy time nor as its wall time.
        """
        cfg = self.config
        sync = self._sync
        start = time.perf_counter()
        with sync.actor_context():
            sync.actor_wait_policy_ready()
            busy = sync.timer_start("actor")
            self._trace("window_start", self.windows, self.actor_version, self.limiter.queued)
            for _ in range(cfg.steps_per_rollout):
                if self._done_collecting():
                    break
                random = self.policy_steps < cfg.learning_starts
                if not random and not self._policy_started:
                    self._policy_started = True
                    if isinstance(self.player, RecurrentPolicy):
                        self.player.init_states()
                t = self.driver.step(random=random)
                if self.driver.rendered is not None:  # the env wrote the next row natively
                    sync.external_write(self.driver.rendered)
                if (t + 1) % cfg.commit_stride == 0:
                    self._commit(t)
                    if pause_at_commits:  # reference backend: the learner's turn
                        sync.timer_stop("actor", busy)
                        paused = time.perf_counter()
                        yield t
                        start += time.perf_counter() - paused
                        busy = sync.timer_start("actor")
            sync.record_window_done()
            sync.timer_stop("actor", busy)
        self._trace("window_end", self.windows)
        self.windows += 1
        self._actor_busy += time.perf_counter() - start

    def _final_commit(self) -> None:
        """Commit every row written (the end of collection)."""
        if self.storage.total_steps > 0:
            with self._sync.actor_context():
                self._commit(self.storage.total_steps - 1)
