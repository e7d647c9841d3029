"""The ``reference`` backend: actor and learner take turns in the calling thread.

No threads and no streams: the same seed gives bit-identical losses and replay. The loop:

1. publish the learner's weights into the player (``policy_ready``);
2. while the rate limiter is full (Atropos pause), the learner catches up: a turn of updates,
   then publish again;
3. one window of the actor; after each commit the learner takes its turn, as many updates as
   the replay ratio has granted, at most ``max_learner_steps_per_tick`` per window;
4. when collection is done: a last commit, then turns of updates and publications until the
   grants are used up.

The device-ordering calls it shares with the concurrent backends do nothing here (``HostSync``).
"""

from __future__ import annotations

from collections.abc import Iterator

from tensordict import TensorDictBase

__all__ = ["ReferenceLoop"]


class ReferenceLoop:
    """The sequential loop of :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`.

    A part of the collector class: it drives the actor's windows
    (:class:`~.actor_side.ActorSide`) and the learner's updates and publications
    (:class:`~.learner_side.LearnerSide`) in turn.
    """

    def _learner_turn(self, max_steps: int) -> int:
        """Up to ``max_steps`` gradient steps, while the rate limiter grants them; returns how
        many were taken."""
        taken = 0
        while taken < max_steps and self.limiter.can_sample(1):
            self._update()
            taken += 1
        return taken

    def _run_reference(self) -> Iterator[TensorDictBase]:
        """Publish, act one window with the learner's turns at its commits, repeat; then drain
        the grants left."""
        per_window = self.config.max_learner_steps_per_tick
        while not self._done_collecting():
            self._publish()
            while not self.limiter.can_insert(0):  # Atropos pause: the learner catches up.
                self._learner_turn(per_window)
                self._publish()
            self.policy_ready.clear()
            steps_this_window = 0  # the learner's steps since the publication above
            for _committed_t in self._actor_steps(pause_at_commits=True):
                steps_this_window += self._learner_turn(per_window - steps_this_window)
            yield from self._drain_logs()
        self._final_commit()
        while self.limiter.can_sample(1) and not self._stop:
            self._learner_turn(per_window)
            self._publish()
            yield from self._drain_logs()
        self._publish()
        yield from self._drain_logs()
