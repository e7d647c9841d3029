"""The learner's side of the collector: gradient steps on committed rows, weights to the player.

- :func:`learner_step`: one gradient step on a sampled batch (to the learner's device, under the
  run's autocast, ``learner.update``, the tensor metrics). The Ray learner
  (:class:`~torchrl_dreamer.distributed.RayDreamerTrainer`) takes its steps with it too.
- :meth:`LearnerSide._update`: a step of the collector. It takes a grant from the rate limiter,
  samples indices from the committed rows, waits on the latest commit event, gathers, steps
  (:func:`learner_step`), accumulates the metrics on the device, counts the version, checks
  for non-finite values and logs every ``log_every`` steps.
- :meth:`LearnerSide._publish`: copies the weights into the idle player (``weight_sync``,
  :func:`default_weight_sync`), THEN sets ``policy_ready``: no window starts on a policy older
  than the learner's last finished update.
"""

from __future__ import annotations

import contextlib
import time
from contextlib import AbstractContextManager
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl_dreamer.collectors.protocols import Autocasting, DreamerParts, LoadsWeights

__all__ = ["LearnerSide", "default_weight_sync", "learner_step"]


def learner_step(learner: Any, batch: TensorDictBase, device: torch.device,
                 autocast: AbstractContextManager | None = None) -> dict[str, torch.Tensor]:
    """One gradient step on ``batch``: moved to ``device`` (without blocking the host), then
    ``learner.update`` under ``autocast`` (none by default); returns its tensor metrics.

    Example:
        >>> class Mean:
        ...     def update(self, batch):
        ...         return {"loss": batch["x"].mean(), "note": "not a tensor"}
        >>> from tensordict import TensorDict
        >>> learner_step(Mean(), TensorDict({"x": torch.ones(2, 3)}, [2, 3]), torch.device("cpu"))
        {'loss': tensor(1.)}
    """
    if batch.device != device:
        batch = batch.to(device, non_blocking=True)
    with autocast if autocast is not None else contextlib.nullcontext():
        out = learner.update(batch)
    return {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}


def default_weight_sync(player: Any, learner: Any) -> None:
    """Copies the learner's weights into the player: ``player.load_from(wm, actor)``.

    Works with :class:`~torchrl_dreamer.modules.DreamerPlayer` and
    :class:`~torchrl_dreamer.objectives.DreamerV3Learner`; pass ``weight_sync=`` to the collector
    for other pairs.
    """
    if isinstance(player, LoadsWeights) and isinstance(learner, DreamerParts):
        player.load_from(learner.world_model, learner.actor)
        return
    raise TypeError(
        f"cannot copy weights from {type(learner).__name__} into {type(player).__name__}: "
        "pass weight_sync=callable(player, learner) to AsyncDreamerCollector."
    )


class LearnerSide:
    """The learner's steps of :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`.

    A part of the collector class, not a class of its own: it works on the collector's config,
    storage, sampler, learner, player, rate limiter, metrics, fail-fast guard, device ordering
    (``_sync``), counters and hand-off events, all set up in ``AsyncDreamerCollector.__init__``.
    """

    def _learner_autocast(self) -> AbstractContextManager:
        """Autocast for learners that do not handle precision themselves (no autocast_dtype)."""
        if self.config.precision == "fp32" or isinstance(self.learner, Autocasting):
            return contextlib.nullcontext()
        return torch.autocast(self.learner_device.type, dtype=self.config.autocast_dtype)

    def _update(self) -> None:
        """One gradient step on a sequence batch of committed rows."""
        cfg = self.config
        sync = self._sync
        self.limiter.sample(1, timeout=cfg.timeout_s)
        start = time.perf_counter()
        # Everything that touches the learner's tensors runs on its stream, the metrics and
        # fail-fast flags included: on another stream they would race with the update.
        with sync.learner_context():
            busy = sync.timer_start("learner")
            # Indices first (from the committed_t seen now), THEN wait on the latest commit
            # event (recorded before that commit), THEN gather: never reads unfinished rows.
            index, info = self.sampler.sample(self.storage, cfg.batch_size * cfg.seq_len)
            sync.learner_wait_commit()
            data = self.storage.get(index)
            metrics = learner_step(self.learner, data, self.learner_device,
                                   self._learner_autocast())
            starts = info["start"]
            per_seq = starts[0] if getattr(self.sampler, "time_major", True) else starts[..., 0]
            envs = info["env_idx"]
            per_env = envs[0] if getattr(self.sampler, "time_major", True) else envs[..., 0]
            self.metrics.add(metrics)
            self.metrics.add({"sample_t_min": per_seq.min(),
                              "sample_t_max": per_seq.max() + (cfg.seq_len - 1)})
            sync.timer_stop("learner", busy)
            self._learner_busy += time.perf_counter() - start
            self.updates += 1
            self.learner_version += 1
            self._trace("update", self.learner_version)
            self.metrics.add_host({"learner_ms": 1000.0 * (time.perf_counter() - start)})
            with sync.host_read() if self.failfast.due else contextlib.nullcontext():
                self.failfast.watch(self.updates, metrics, {"env_idx": per_env, "start": per_seq})
            if self.updates % cfg.log_every == 0:
                with sync.host_read():
                    self._log()

    def _publish(self) -> None:
        """Copy the learner's weights into the (idle) player, THEN signal ``policy_ready``."""
        self.actor_idle.clear()
        self.policy_ready.clear()  # the actor is idle (or gone): nobody is released early
        sync = self._sync
        with sync.learner_context():
            # the copy overwrites weights the window read, and the watch reads the state it
            # wrote: both after the window; policy_ready after both (the next window writes
            # the state again)
            sync.learner_wait_window_done()
            if self.learner_version != self.actor_version:
                self.weight_sync(self.player, self.learner)
                self._trace("copy_done", self.learner_version)
            self._watch_player()
            sync.record_policy_ready()
        self.actor_version = self.learner_version
        self.publications += 1
        self._trace("policy_ready", self.actor_version)
        self.policy_ready.set()

    def _watch_player(self) -> None:
        """Fail fast on non-finite recurrent states of the player (between windows)."""
        states = {f"player.{k}": getattr(self.player, k) for k in ("h", "z")
                  if isinstance(getattr(self.player, k, None), torch.Tensor)}
        if states:
            with self._sync.host_read() if self.failfast.due else contextlib.nullcontext():
                self.failfast.watch(self.updates, states)
