"""``AsyncDreamerCollector``: the actor/learner choreography of a Dreamer run, three backends.

TorchRL's collectors yield rollouts for a training loop to consume; Dreamer's loop is the other
way round (the actor writes replay rows, the learner samples sequences at a replay ratio), and
nothing in TorchRL provides commit markers, a ``policy_ready`` hand-off or CUDA-stream
choreography (``torchrl-notes.md`` §4-5). So this is our own :class:`~torchrl.collectors.BaseCollector`.

The choreography (identical in every backend):

- **actor**: runs windows of ``steps_per_rollout`` env steps. Each step writes one replay row for
  all envs (:class:`~torchrl_dreamer.collectors.EnvDriver`); every ``commit_stride`` steps it
  commits the rows (``storage.commit``) and inserts into the rate limiter the gradient steps the
  :class:`~torchrl_dreamer.collectors.UpdateSchedule` grants for them. Random actions until
  ``learning_starts`` policy steps. Between windows it goes idle and waits on ``policy_ready``;
  it pauses (Atropos rule) while more than ``off_policy_tolerance`` windows' worth of granted
  gradient steps are queued.
- **learner**: while granted steps remain (and at most ``max_learner_steps_per_tick`` per tick),
  samples committed rows only (``ChronologicalSliceSampler`` reads ``storage.sampleable_range``:
  rows ``<= committed_t``, ``safety_margin`` rows away from the overwrite seam) and runs
  world model -> actor -> critic (``learner.update``). When the actor is idle it copies the
  weights into the player, THEN sets ``policy_ready``; so no window ever starts on a policy
  older than the learner's last finished update.
- **versions**: ``learner_version`` counts gradient steps, ``actor_version`` is the learner
  version last copied into the player, ``lag = learner - actor``.

Backends: ``"reference"`` runs both sides in the calling thread (the learner's steps are
interleaved at each commit; same seed -> bit-identical losses and replay); ``"threaded"`` runs the
actor in a thread and the learner in the caller, truly concurrent; ``"cuda"`` is ``"threaded"``
plus an actor stream and a learner stream ordered by CUDA events (:mod:`.streams`), with metrics
reduced on the device and read every ``log_every`` on the learner stream (no host sync in the
hot loops); ``"cuda-twin"`` is ``"cuda"`` on a CPU, its streams and events modelled on the host
and every op checked against them (:mod:`.stream_twin`).

Where each part lives (the collector class is put together from them):

- :mod:`.validation`: the checks of the storage, sampler and learner against the config;
- :mod:`.actor_side`: windows, commits, grants; :mod:`.learner_side`: updates, publications;
- :mod:`.backend_reference`, :mod:`.backend_threaded`: the two loops; :mod:`.backend_cuda`: the
  device ordering of each backend (``cuda`` runs the threaded loop);
- :mod:`.metrics`: the logged rows, gauges and summary; :mod:`.state`: counters and checkpoints.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.collectors import BaseCollector

from torchrl_dreamer.collectors.actor_side import ActorSide
from torchrl_dreamer.collectors.backend_cuda import make_sync
from torchrl_dreamer.collectors.backend_reference import ReferenceLoop
from torchrl_dreamer.collectors.backend_threaded import CollectorTimeout, ThreadedLoop
from torchrl_dreamer.collectors.config import AsyncCollectorConfig
from torchrl_dreamer.collectors.env_driver import EnvDriver
from torchrl_dreamer.collectors.failfast import FailFast
from torchrl_dreamer.collectors.learner_side import LearnerSide, default_weight_sync
from torchrl_dreamer.collectors.metrics import CollectorGauges, MetricsAccumulator
from torchrl_dreamer.collectors.protocols import Learner, ReplayStorage, Seedable, SequenceSampler
from torchrl_dreamer.collectors.rate_limiter import RateLimiter
from torchrl_dreamer.collectors.ratio import UpdateSchedule
from torchrl_dreamer.collectors.state import CollectorState
from torchrl_dreamer.collectors.validation import check_inputs, writer_margin

__all__ = ["AsyncDreamerCollector", "CollectorTimeout", "default_weight_sync", "make_sync"]


class AsyncDreamerCollector(ReferenceLoop, ThreadedLoop, ActorSide, LearnerSide, CollectorGauges,
                            CollectorState, BaseCollector):
    """Actor/learner Dreamer collector: env -> replay -> learner -> player, at a replay ratio.

    Args:
        env: TorchRL env with ``batch_size=[N]`` whose steps return ``is_first`` (deferred
            reset), e.g. :class:`~torchrl_dreamer.envs.GameBoyEnv`.
        storage: :class:`~torchrl_dreamer.data.TimeMajorStorage` built with ``auto_commit=False``
            and ``safety_margin >= config.safety_margin``.
        sampler: :class:`~torchrl_dreamer.data.ChronologicalSliceSampler` with a generator and
            ``slice_len == config.seq_len``.
        player: acting policy ``td -> td`` with ``"action"`` (e.g.
            :class:`~torchrl_dreamer.modules.DreamerPlayer`, owning copies of the weights).
        learner: has ``update(batch [T, B]) -> metrics`` (e.g.
            :class:`~torchrl_dreamer.objectives.DreamerV3Learner`).
        config: :class:`AsyncCollectorConfig`.

    Keyword Args:
        total_frames: policy steps (env steps × N) to collect; ``-1``: until :meth:`shutdown`.
        weight_sync: ``callable(player, learner)`` copying the weights (default
            :func:`default_weight_sync`).
        logger: a TorchRL :class:`~torchrl.record.loggers.Logger` (CSV, TensorBoard, ...).
        bundle_dir: where failure bundles go on non-finite values (``./dreamer_failures``).
        zero_copy: let ``GameBoyEnv`` render packed2 frames straight into replay rows.
        record_trace: keep an ordered event trace (``self.trace``) of commits, copies,
            ``policy_ready`` and window starts, for tests and debugging.

    Iterating yields one metrics TensorDict every ``log_every`` gradient steps (also sent to the
    logger): ``actor_ms``, ``learner_ms``, ``overlap_eff``, the learner's losses,
    ``replay_ratio_actual``, ``replay_fill``, ``committed_t``, ``sample_t_min/max``,
    ``policy_lag``, versions and counters.

    Example:
        The shipped maze; compiles the emulator kernel once.

        >>> from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage
        >>> from torchrl_dreamer.data import dreamer_schema
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
        >>> from torchrl_dreamer.objectives import DreamerV3Learner
        >>> env = GameBoyEnv("maze", num_envs=4)
        >>> storage = TimeMajorStorage(128, 4, spec=dreamer_schema(), safety_margin=8,
        ...                            auto_commit=False)
        >>> sampler = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(0))
        >>> wm, actor, critic = make_dreamer("tiny", {"pixels": "packed2"}, env.action_spec.space.n)
        >>> cfg = AsyncCollectorConfig(seq_len=8, batch_size=2, min_ready_steps=8, safety_margin=8,
        ...                            commit_stride=4, learning_starts=32, replay_ratio=0.1)
        >>> collector = AsyncDreamerCollector(
        ...     env, storage, sampler, DreamerPlayer(wm, actor, num_envs=4),
        ...     DreamerV3Learner(wm, actor, critic, "fast-pixels"), cfg, total_frames=64,
        ...     bundle_dir=getfixture("tmp_path"))
        >>> for metrics in collector:  # every log_every gradient steps
        ...     assert "loss_world_model" in metrics.keys()
        >>> summary = collector.summary()
        >>> summary["policy_steps"], summary["updates"] > 0
        (64.0, True)
        >>> collector.shutdown()
    """

    def __init__(
        self,
        env: Any,
        storage: ReplayStorage,
        sampler: SequenceSampler,
        player: Any,
        learner: Learner,
        config: AsyncCollectorConfig | None = None,
        *,
        total_frames: int = -1,
        weight_sync: Callable[[Any, Any], None] | None = None,
        logger: Any = None,
        bundle_dir: str | Path | None = None,
        zero_copy: bool = True,
        record_trace: bool = False,
    ) -> None:
        super().__init__()
        cfg = config if config is not None else AsyncCollectorConfig()
        if not isinstance(cfg, AsyncCollectorConfig):
            raise TypeError(f"config must be an AsyncCollectorConfig, got {type(cfg).__name__}.")
        self.config = cfg
        check_inputs(storage, sampler, learner, cfg)
        self.env, self.storage, self.sampler = env, storage, sampler
        self.player, self.learner = player, learner
        self.learner_device = torch.device(cfg.device)
        self.weight_sync = weight_sync if weight_sync is not None else default_weight_sync
        self.logger = logger
        self._random_gen = torch.Generator(device=getattr(env, "device", None) or "cpu")
        self.driver = EnvDriver(env, storage, player, self._random_gen, zero_copy=zero_copy)
        self.num_envs = self.driver.num_envs
        n = self.num_envs
        self.total_frames = int(total_frames)
        self.requested_frames_per_batch = self.frames_per_batch = n * cfg.steps_per_rollout
        self.schedule = UpdateSchedule(
            cfg.replay_ratio, cfg.learning_starts, n, seq_len=cfg.min_ready_steps,
            pretrain_steps=cfg.pretrain_steps, version="0.8",
        )
        per_window = max(1, math.ceil(cfg.replay_ratio * n * cfg.steps_per_rollout))
        self.max_backlog = max(2, math.ceil(cfg.off_policy_tolerance * per_window))
        self.limiter = RateLimiter.queue(self.max_backlog)
        self._sync = make_sync(cfg.backend, cfg.device)
        self.metrics = MetricsAccumulator()
        self.failfast = FailFast(
            bundle_dir if bundle_dir is not None else "dreamer_failures",
            cfg.to_dict(),
            # on streams a check reads a device flag: a host sync, so only every log_every
            check_every=cfg.log_every if self._sync.deferred else 1,
        )
        # Host-side hand-offs (threading events, shared by every backend).
        self.commit_event = threading.Event()
        self.policy_ready = threading.Event()
        self.actor_idle = threading.Event()
        self._wake = threading.Event()
        self.trace: list[tuple] | None = [] if record_trace else None
        self._reset_counters()
        self.set_seed(cfg.seed)

    # ------------------------------------------------------------------ validation
    writer_margin = staticmethod(writer_margin)

    def _apply_writer_margin(self) -> None:
        """Raise ``storage.safety_margin`` to :meth:`writer_margin` (again after a replay load,
        which restores the margin it was saved with)."""
        need = self.writer_margin(self.config)
        if self.storage.safety_margin < need:
            self.storage.safety_margin = need

    # ------------------------------------------------------------------ properties
    @property
    def stream_sync(self) -> Any:
        """The device-ordering object of the backend (:mod:`.streams`): ``HostSync``,
        ``CudaSync``, or the CPU twin ``StreamTwin`` (``backend="cuda-twin"``)."""
        return self._sync

    @property
    def env_steps(self) -> int:
        """Vectorised env steps taken (rows written)."""
        return self.driver.env_steps

    @property
    def policy_steps(self) -> int:
        """Policy steps (one action of one env): ``env_steps × num_envs``."""
        return self.driver.env_steps * self.num_envs

    @property
    def policy_version(self) -> int:
        """The learner version the player's weights come from (TorchRL's ``policy_version``)."""
        return self.actor_version

    @property
    def versions(self) -> dict[str, int]:
        """``{"actor": ..., "learner": ..., "lag": learner - actor}`` (in gradient steps)."""
        return {
            "actor": self.actor_version,
            "learner": self.learner_version,
            "lag": self.learner_version - self.actor_version,
        }

    def readable_committed_t(self) -> int:
        """The last committed step, with the calling thread's current stream ordered after the
        rows up to it: read committed rows from outside the collector (episode statistics)
        only up to this value, after this call. On the ``cuda`` backend a commit is an event on
        the actor stream, not a host wait, so a row committed on the host may still be in
        flight for a reader on another stream; on the CPU backends this is ``committed_t``."""
        t = self.storage.committed_t
        self._sync.reader_wait_commit()  # the latest commit event: recorded before t's commit
        return t

    def _trace(self, *event: Any) -> None:
        """Append ``event`` to ``self.trace`` when recording one (``record_trace=True``)."""
        if self.trace is not None:
            self.trace.append(event)

    def _done_collecting(self) -> bool:
        """Stopped, or ``total_frames`` policy steps collected (never, for ``-1``)."""
        return self._stop or (0 <= self.total_frames <= self.policy_steps)

    # ------------------------------------------------------------------ BaseCollector API
    def iterator(self) -> Iterator[TensorDictBase]:
        """Runs the choreography; yields a metrics TensorDict every ``log_every`` updates."""
        self._apply_writer_margin()
        with self._sync.thread_scope():
            if not self.driver.started:
                self.driver.reset()
            self._sync.begin()  # both streams after what the caller enqueued (env reset, models)
        self._stop = False
        self._actor_done = False
        self.overlap.restart()
        start = time.perf_counter()
        try:
            if self.config.backend == "reference":
                yield from self._run_reference()
            else:
                yield from self._run_threaded()
        finally:
            self._wall += time.perf_counter() - start

    def run(self, total_frames: int | None = None) -> dict[str, float]:
        """Collects ``total_frames`` policy steps (or the constructor's) and trains along.

        Returns a summary: counters, versions, the achieved replay ratio and the last metrics.
        """
        if total_frames is not None:
            self.total_frames = int(total_frames)
        if self.total_frames < 0:
            raise ValueError("run() needs a finite total_frames (policy steps to collect).")
        for _ in self.iterator():
            pass
        return self.summary()

    def start(self) -> None:
        """Runs :meth:`run` in a background thread (metrics go to the logger only)."""
        if self._bg_thread is not None and self._bg_thread.is_alive():
            raise RuntimeError("the collector is already running; call async_shutdown() first.")

        def _bg() -> None:
            for _ in self.iterator():
                pass

        self._bg_thread = threading.Thread(target=_bg, name="dreamer-collector", daemon=True)
        self._bg_thread.start()

    def shutdown(
        self,
        timeout: float | None = None,
        close_env: bool = True,
        raise_on_error: bool = True,
    ) -> None:
        """Stops both sides, releases every waiter, joins threads; closes the env if asked."""
        self._stop = True
        self.policy_ready.set()
        self._wake.set()
        self.limiter.notify()
        for th in (self._actor_thread, self._bg_thread):
            if th is not None and th.is_alive() and th is not threading.current_thread():
                th.join(timeout if timeout is not None else self.config.timeout_s)
        if close_env and hasattr(self.env, "close") and not getattr(self.env, "is_closed", True):
            self.env.close()

    def async_shutdown(self, timeout: float | None = None, close_env: bool = True) -> None:
        """Stops a collector started with :meth:`start`."""
        self.shutdown(timeout=timeout, close_env=close_env)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds torch, the env, the random-action generator and the sampler's generator."""
        torch.manual_seed(seed)
        if isinstance(self.env, Seedable):
            self.env.set_seed(seed, static_seed=static_seed)
        self._random_gen.manual_seed(seed + 1)
        self.sampler.generator.manual_seed(seed + 2)
        return seed

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(backend={self.config.backend!r}, num_envs={self.num_envs}, "
            f"env_steps={self.env_steps}, updates={self.updates}, versions={self.versions})"
        )
