"""The collector's state: its counters and its side of a checkpoint, in one place.

What a checkpoint of :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector` holds
(:meth:`CollectorState.state_dict`): the update schedule and rate limiter, the counters (gradient
steps, versions, publications, windows, env steps, whether the policy has started), the
random-action generator, the player's and the sampler's state. The learner's state is the
trainer's (:mod:`torchrl_dreamer.trainers.checkpoint`). The env mid-run
(:meth:`CollectorState.env_state`) and the replay ring (:meth:`CollectorState.save_replay`) are
saved beside it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from torchrl_dreamer.collectors.metrics import OverlapMeter
from torchrl_dreamer.collectors.protocols import Checkpointable

__all__ = ["CollectorState"]


class CollectorState:
    """Counters, ``state_dict`` / ``load_state_dict``, env snapshot and replay of
    :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`.

    A part of the collector class: it works on the collector's schedule, rate limiter, driver,
    env, storage, player, sampler and random-action generator.
    """

    def _reset_counters(self) -> None:
        """Every counter and the run state at zero: versions, hand-off flags, threads, busy
        times, the overlap meter and the log queue (a new collector)."""
        self.updates = 0
        self.learner_version = 0
        self.actor_version = 0
        self.publications = 0
        self.windows = 0
        self._stop = False
        self._paused = False
        self._actor_done = False
        self._actor_error: BaseException | None = None
        self._actor_thread: threading.Thread | None = None
        self._bg_thread: threading.Thread | None = None
        self._actor_busy = 0.0
        self._learner_busy = 0.0
        self._wall = 0.0
        self.overlap = OverlapMeter()
        self._log_marks = (self.overlap.snapshot(), 0.0, 0)
        self._log_queue: list[dict[str, float]] = []
        self._policy_started = False
        self.last_metrics: dict[str, float] = {}

    def state_dict(self) -> OrderedDict:
        """Schedule, limiter, counters, player and sampler state (not the learner's)."""
        sd = OrderedDict(
            schedule=self.schedule.state_dict(),
            limiter=self.limiter.state_dict(),
            counters={
                "updates": self.updates,
                "learner_version": self.learner_version,
                "actor_version": self.actor_version,
                "publications": self.publications,
                "windows": self.windows,
                "env_steps": self.driver.env_steps,
                "policy_started": self._policy_started,
            },
            random_generator=self._random_gen.get_state(),
        )
        if isinstance(self.player, Checkpointable):
            sd["player"] = self.player.state_dict()
        if isinstance(self.sampler, Checkpointable):
            sd["sampler"] = self.sampler.state_dict()
        return sd

    def load_state_dict(self, state_dict: OrderedDict, keep_schedule: bool = False) -> None:
        """Restores what :meth:`state_dict` returned (the env restarts from a reset; see
        :meth:`load_env_state`). ``keep_schedule``: leave the update schedule and rate limiter
        as they are (a run resumed without its replay waits for a new prefill)."""
        if not keep_schedule:
            self.schedule.load_state_dict(state_dict["schedule"])
            self.limiter.load_state_dict(state_dict["limiter"])
        c = state_dict["counters"]
        self.updates = int(c["updates"])
        self.learner_version = int(c["learner_version"])
        self.actor_version = int(c["actor_version"])
        self.publications = int(c["publications"])
        self.windows = int(c["windows"])
        self.driver.env_steps = int(c["env_steps"])
        self._policy_started = bool(c["policy_started"])
        self._random_gen.set_state(state_dict["random_generator"])
        if "player" in state_dict and isinstance(self.player, Checkpointable):
            self.player.load_state_dict(state_dict["player"])
        if "sampler" in state_dict and isinstance(self.sampler, Checkpointable):
            self.sampler.load_state_dict(state_dict["sampler"])

    def env_state(self) -> dict[str, Any]:
        """The env mid-run (``GameBoyEnv.state_dict()``; ``None`` for envs without a snapshot)
        and the driver's pending output, for checkpoints."""
        from torchrl_dreamer.envs import GameBoyEnv

        env = self.env.state_dict() if isinstance(self.env, GameBoyEnv) else None
        return {"env": env, "driver": self.driver.state_dict()}

    def load_env_state(self, state: dict[str, Any] | None) -> bool:
        """Restore :meth:`env_state` (load the replay first); without an env snapshot the envs
        reset. Returns whether the env continues where it was."""
        if state is None or state.get("env") is None:
            self.driver.reset()
            return False
        self.env.load_state_dict(state["env"])
        self.driver.load_state_dict(state["driver"])
        return True

    def save_replay(self, path: Path) -> None:
        """Write the replay ring under ``path`` (checkpoints)."""
        self.storage.dumps(path)

    def load_replay(self, path: Path) -> None:
        """Read a replay ring written by :meth:`save_replay` (``ValueError`` if it does not fit)."""
        self.storage.loads(path)
