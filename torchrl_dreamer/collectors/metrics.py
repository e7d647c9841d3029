"""Metric accumulation without host syncs in the hot loop, logged through TorchRL loggers.

Per-update tensors (losses, entropies, ...) are summed on their device in place; host-side numbers
(timings, counters) are summed on the host. :meth:`MetricsAccumulator.read` turns everything into
means with one device-to-host transfer; the collector calls it every ``log_every`` updates and
hands the result to any :class:`torchrl.record.loggers.Logger` (CSV, TensorBoard, ...) via
``log_metrics``. TorchRL has loggers but no device-side accumulator, hence this small class.

:class:`OverlapMeter` measures how much of the actor's and the learner's busy time overlapped;
:class:`CollectorGauges` is the collector's part that builds the logged rows (the learner's
means plus the run's gauges), its :meth:`~CollectorGauges.summary` and
:meth:`~CollectorGauges.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = ["CollectorGauges", "MetricsAccumulator", "OverlapMeter"]


class MetricsAccumulator:
    """Running sums of named metrics; :meth:`read` returns means and resets.

    Examples:
        >>> m = MetricsAccumulator()
        >>> m.add({"loss": torch.tensor(1.0)}); m.add({"loss": torch.tensor(3.0)})
        >>> m.add_host({"actor_ms": 2.0})
        >>> m.read()
        {'loss': 2.0, 'actor_ms': 2.0}
    """

    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}
        self._host: dict[str, float] = {}
        self._host_counts: dict[str, int] = {}
        self._last: dict[str, float] = {}

    def add(self, metrics: Mapping[str, Any]) -> None:
        """Adds tensor metrics (reduced to their mean) on their device; no host sync."""
        for key, val in metrics.items():
            if not isinstance(val, torch.Tensor):
                self.add_host({key: float(val)})
                continue
            v = val.detach()
            v = v.float().mean() if v.numel() != 1 else v.float().reshape(())
            if key in self._sums:
                self._sums[key].add_(v)
                self._counts[key] += 1
            else:
                self._sums[key] = v.clone()
                self._counts[key] = 1

    def add_host(self, metrics: Mapping[str, float]) -> None:
        """Adds host-side numbers (timings, counters)."""
        for key, val in metrics.items():
            self._host[key] = self._host.get(key, 0.0) + float(val)
            self._host_counts[key] = self._host_counts.get(key, 0) + 1

    def set_host(self, metrics: Mapping[str, float]) -> None:
        """Sets gauges (last value wins: fill level, committed_t, lag)."""
        for key, val in metrics.items():
            self._host[key] = float(val)
            self._host_counts[key] = 1

    def __len__(self) -> int:
        return len(self._sums) + len(self._host)

    def read(self) -> dict[str, float]:
        """Means since the last read (one device→host copy per device holding metrics); resets."""
        out: dict[str, float] = {}
        by_device: dict[torch.device, list[str]] = {}
        for key, total in self._sums.items():  # e.g. CUDA losses and CPU sampler statistics
            by_device.setdefault(total.device, []).append(key)
        means: dict[str, float] = {}
        for keys in by_device.values():
            stacked = torch.stack([self._sums[k] / self._counts[k] for k in keys]).cpu()
            means.update(zip(keys, stacked.tolist()))
        out.update({k: float(means[k]) for k in self._sums})
        out.update({k: self._host[k] / self._host_counts[k] for k in self._host})
        self._sums.clear()
        self._counts.clear()
        self._host.clear()
        self._host_counts.clear()
        self._last = dict(out)
        return out

    @property
    def last(self) -> dict[str, float]:
        """What the previous :meth:`read` returned."""
        return dict(self._last)

    def log(self, logger: Any, step: int) -> dict[str, float]:
        """:meth:`read` then ``logger.log_metrics(values, step)`` (a TorchRL ``Logger``)."""
        values = self.read()
        if logger is not None and values:
            logger.log_metrics(values, step=step)
        return values


class OverlapMeter:
    """Busy time of the actor and of the learner, and how much of it ran at the same time.

    Each side reports its busy intervals (a window, an update) in order, as host times or as
    device times of stream events; each side is serial, so its intervals never overlap each
    other. ``efficiency = overlap / min(actor_busy, learner_busy)``: 0 when the two sides took
    turns (the ``reference`` backend), 1 when the shorter one was entirely hidden behind the
    other. Intervals are kept only until no later interval of the other side can meet them.

    Examples:
        >>> m = OverlapMeter()
        >>> m.add("actor", 0.0, 4.0); m.add("learner", 1.0, 2.0); m.add("learner", 3.0, 5.0)
        >>> m.busy, m.overlap, m.efficiency()
        ({'actor': 4.0, 'learner': 3.0}, 2.0, 0.6666666666666666)
    """

    SIDES = ("actor", "learner")

    def __init__(self) -> None:
        self.busy = {"actor": 0.0, "learner": 0.0}
        self.intervals = {"actor": 0, "learner": 0}
        self.overlap = 0.0
        self._open: dict[str, list[tuple[float, float]]] = {"actor": [], "learner": []}
        self._last_end = {"actor": -math.inf, "learner": -math.inf}

    def restart(self) -> None:
        """A new run whose times may start over: earlier intervals meet no later one."""
        self._open = {"actor": [], "learner": []}
        self._last_end = {"actor": -math.inf, "learner": -math.inf}

    def add(self, side: str, start: float, end: float) -> None:
        """One busy interval ``[start, end]`` (seconds) of ``side``, after its earlier ones."""
        other = "learner" if side == "actor" else "actor"
        self.busy[side] += max(0.0, end - start)
        self.intervals[side] += 1
        for s, e in self._open[other]:
            both = min(e, end) - max(s, start)
            if both > 0:
                self.overlap += both
        self._open[side].append((start, end))
        self._last_end[side] = max(self._last_end[side], end)
        # an interval no later interval of the other side can reach is done
        self._open[side] = [iv for iv in self._open[side] if iv[1] > self._last_end[other]]
        self._open[other] = [iv for iv in self._open[other] if iv[1] > self._last_end[side]]

    def add_all(self, intervals: Mapping[str, list[tuple[float, float]]]) -> None:
        """:meth:`add` every interval of ``{side: [(start, end), ...]}``."""
        for side in self.SIDES:
            for start, end in intervals.get(side, ()):
                self.add(side, start, end)

    def snapshot(self) -> tuple[float, float, float]:
        """``(actor_busy, learner_busy, overlap)`` so far."""
        return self.busy["actor"], self.busy["learner"], self.overlap

    @staticmethod
    def efficiency_of(actor: float, learner: float, overlap: float) -> float:
        """``overlap / min(actor, learner)`` in [0, 1] (0 when a side never ran)."""
        shorter = min(actor, learner)
        return 0.0 if shorter <= 0 else max(0.0, min(1.0, overlap / shorter))

    def efficiency(self) -> float:
        """Overlap efficiency over everything added."""
        return self.efficiency_of(*self.snapshot())


class CollectorGauges:
    """The gauges and metric yields of :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`.

    A part of the collector class: it reads the collector's counters, storage, rate limiter,
    :class:`MetricsAccumulator` (``metrics``) and :class:`OverlapMeter` (``overlap``). Every
    ``log_every`` gradient steps :meth:`_log` adds the gauges (achieved replay ratio, replay
    fill, versions and lag, backlog, the actor's time per window and the overlap since the last
    log) to the means of the learner's metrics, sends them to the logger and queues them for
    the iterator (:meth:`_drain_logs`).
    """

    def replay_ratio_actual(self) -> float:
        """Gradient steps per policy step counted by the schedule (sheeprl's ``ratio_steps``)."""
        committed = (self.storage.committed_t + 1) * self.num_envs
        rs = self.schedule.ratio_steps(committed)
        return self.updates / rs if rs > 0 else 0.0

    def _feed_overlap(self) -> None:
        """Busy intervals the sync has finished timing (device events on streams) -> meter."""
        self.overlap.add_all(self._sync.busy_intervals())

    def _log(self) -> None:
        """The means since the last log plus the gauges -> logger, ``last_metrics``, the queue."""
        self._feed_overlap()
        (a0, l0, o0), host_a0, w0 = self._log_marks
        busy_a, busy_l, both = self.overlap.snapshot()
        windows = self.windows - w0
        overlap = OverlapMeter.efficiency_of(busy_a - a0, busy_l - l0, both - o0)
        host_a = self._actor_busy - host_a0
        self._log_marks = (self.overlap.snapshot(), self._actor_busy, self.windows)
        gauges = {
            "replay_ratio_actual": self.replay_ratio_actual(),
            "replay_ratio_target": self.config.replay_ratio,
            "replay_fill": self.storage.size / self.storage.capacity,
            "committed_t": float(self.storage.committed_t),
            "policy_lag": float(self.learner_version - self.actor_version),
            "actor_version": float(self.actor_version),
            "learner_version": float(self.learner_version),
            "env_steps": float(self.env_steps),
            "policy_steps": float(self.policy_steps),
            "updates": float(self.updates),
            "backlog": float(self.limiter.queued),
            "overlap_eff": overlap,
        }
        if windows > 0:
            gauges["actor_ms"] = 1000.0 * host_a / windows
        self.metrics.set_host(gauges)
        values = self.metrics.log(self.logger, step=self.updates)
        self.last_metrics = values
        self._log_queue.append(values)

    def _drain_logs(self) -> Iterator[TensorDictBase]:
        """Yields the queued logs, oldest first, as TensorDicts of scalars."""
        while self._log_queue:
            values = self._log_queue.pop(0)
            yield TensorDict({k: torch.tensor(v) for k, v in values.items()}, [])

    def overlap_efficiency(self) -> float:
        """Over all runs so far: the time the actor and the learner were busy at once, over the
        shorter side's busy time, in [0, 1] (:class:`~.metrics.OverlapMeter`).

        0 means the two sides never ran at the same time (``reference``), 1 that the shorter one
        was entirely hidden behind the longer one. Busy intervals are windows and updates,
        timed on the host, or on the device by events of the actor and learner streams
        (``cuda``: what the GPU did, not how long the host took to enqueue it).
        """
        self._feed_overlap()
        return self.overlap.efficiency()

    def summary(self) -> dict[str, float]:
        """Counters, versions and achieved ratio, plus the last logged metrics."""
        return {
            **self.last_metrics,
            "actor_ms": 1000.0 * self._actor_busy / max(1, self.windows),
            "learner_ms": 1000.0 * self._learner_busy / max(1, self.updates),
            "overlap_eff": self.overlap_efficiency(),
            "actor_busy_s": self.overlap.busy["actor"],
            "learner_busy_s": self.overlap.busy["learner"],
            "overlap_s": self.overlap.overlap,
            "wall_s": self._wall,
            "env_steps": float(self.env_steps),
            "policy_steps": float(self.policy_steps),
            "updates": float(self.updates),
            "windows": float(self.windows),
            "publications": float(self.publications),
            "actor_version": float(self.actor_version),
            "learner_version": float(self.learner_version),
            "replay_ratio_actual": self.replay_ratio_actual(),
            "granted": float(self.limiter.inserts),
        }

    def stats(self) -> dict[str, int | float | bool]:
        """Cheap progress snapshot (TorchRL's ``stats()``, plus versions and the ratio)."""
        out: dict[str, int | float | bool] = {
            "frames": self.policy_steps,
            "updates": self.updates,
            "policy_version": self.actor_version,
            "learner_version": self.learner_version,
            "policy_lag": self.learner_version - self.actor_version,
            "replay_ratio_actual": self.replay_ratio_actual(),
        }
        if self.total_frames >= 0:
            out["total_frames"] = self.total_frames
            out["completed"] = self.policy_steps >= self.total_frames
        return out

