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
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.collectors import BaseCollector

from torchrl_dreamer.collectors.config import AsyncCollectorConfig
from torchrl_dreamer.collectors.env_driver import EnvDriver
from torchrl_dreamer.collectors.failfast import FailFast
from torchrl_dreamer.collectors.metrics import MetricsAccumulator, OverlapMeter
from torchrl_dreamer.collectors.protocols import (
    Autocasting,
    Checkpointable,
    DreamerParts,
    Learner,
    LoadsWeights,
    RecurrentPolicy,
    ReplayStorage,
    Seedable,
    SequenceSampler,
)
from torchrl_dreamer.collectors.rate_limiter import RateLimiter
from torchrl_dreamer.collectors.ratio import UpdateSchedule
from torchrl_dreamer.collectors.stream_twin import StreamTwin
from torchrl_dreamer.collectors.streams import CudaSync, HostSync

__all__ = ["AsyncDreamerCollector", "CollectorTimeout", "default_weight_sync", "make_sync"]


def make_sync(backend: str, device: torch.device | str) -> HostSync:
    """:class:`CudaSync` for ``backend="cuda"``, the CPU twin
    (:class:`~torchrl_dreamer.collectors.stream_twin.StreamTwin`) for ``"cuda-twin"``, else
    :class:`HostSync`. It lives here, above :mod:`.streams` and :mod:`.stream_twin`, so that
    ``streams`` never imports the twin built on it."""
    if backend == "cuda":
        return CudaSync(device)
    if backend == "cuda-twin":
        return StreamTwin()
    return HostSync()


class CollectorTimeout(TimeoutError):
    """One side waited ``timeout_s`` without the other making progress (a stall or deadlock)."""


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


class AsyncDreamerCollector(BaseCollector):
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
        self._check_storage(storage, cfg)
        self._check_sampler(sampler, cfg)
        if not isinstance(learner, Learner):
            raise TypeError(
                f"learner {type(learner).__name__} has no update(batch) method; pass a "
                "DreamerV3Learner or an object with update(batch) -> metrics."
            )
        self._check_learner(learner, cfg)
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
    @staticmethod
    def _check_storage(storage: Any, cfg: AsyncCollectorConfig) -> None:
        if not isinstance(storage, ReplayStorage):
            missing = [a for a in ("write", "commit", "committed_t", "sampleable_range",
                                   "capacity", "safety_margin", "auto_commit")
                       if not hasattr(storage, a)]
            raise TypeError(
                f"storage {type(storage).__name__} is not a ReplayStorage (lacks {missing}); "
                "use torchrl_dreamer.data.TimeMajorStorage."
            )
        if storage.auto_commit:
            raise ValueError(
                "storage.auto_commit is True: the collector commits rows itself every "
                "commit_stride steps; build TimeMajorStorage(..., auto_commit=False)."
            )
        if storage.safety_margin < cfg.safety_margin:
            raise ValueError(
                f"storage.safety_margin={storage.safety_margin} < config.safety_margin="
                f"{cfg.safety_margin}; build TimeMajorStorage(..., safety_margin="
                f"{cfg.safety_margin})."
            )
        margin = max(storage.safety_margin, AsyncDreamerCollector.writer_margin(cfg))
        need = margin + cfg.seq_len + cfg.commit_stride
        if storage.capacity < need:
            raise ValueError(
                f"storage.capacity={storage.capacity} is too small: it must hold safety_margin + "
                f"seq_len + commit_stride = {margin} + {cfg.seq_len} + {cfg.commit_stride} = "
                f"{need} rows so a full sequence stays sampleable while the actor writes ahead "
                "of its last commit and over the oldest rows."
            )

    @staticmethod
    def writer_margin(cfg: AsyncCollectorConfig) -> int:
        """The fewest oldest ring rows kept out of sampling while the actor runs concurrently.

        A batch the learner samples is read (gathered) later: on the host a moment later, on a
        CUDA stream whenever the stream gets there. Until the actor's next window, which waits
        on ``policy_ready`` (published after that gather), the actor may still write the rest of
        its window, ``steps_per_rollout`` rows, plus the next row the env renders ahead (zero
        copy), each over the oldest row of a full ring. So those rows must not be sampled:
        ``steps_per_rollout + 1`` (0 for ``reference``: it never acts while it samples).
        """
        return 0 if cfg.backend == "reference" else cfg.steps_per_rollout + 1

    def _apply_writer_margin(self) -> None:
        """Raise ``storage.safety_margin`` to :meth:`writer_margin` (again after a replay load,
        which restores the margin it was saved with)."""
        need = self.writer_margin(self.config)
        if self.storage.safety_margin < need:
            self.storage.safety_margin = need

    @staticmethod
    def _check_sampler(sampler: Any, cfg: AsyncCollectorConfig) -> None:
        if not isinstance(sampler, SequenceSampler):
            raise TypeError(
                f"sampler {type(sampler).__name__} lacks sample(storage, batch_size) / resolve(); "
                "use torchrl_dreamer.data.ChronologicalSliceSampler."
            )
        if getattr(sampler, "generator", None) is None:
            raise ValueError(
                "the sampler has no torch.Generator; build ChronologicalSliceSampler("
                "slice_len=..., generator=torch.Generator().manual_seed(seed))."
            )
        if getattr(sampler, "n_samples", None) not in (None, 1):
            raise ValueError("the collector samples one batch per gradient step: n_samples=None.")
        try:
            b, t = sampler.resolve(cfg.batch_size * cfg.seq_len)
        except ValueError:
            b, t = None, getattr(sampler, "slice_len", None)
        if (b, t) != (cfg.batch_size, cfg.seq_len):
            raise ValueError(
                f"the sampler gives batches of {b} x {t} but config asks batch_size="
                f"{cfg.batch_size}, seq_len={cfg.seq_len}; build the sampler with "
                f"slice_len={cfg.seq_len}."
            )

    @staticmethod
    def _check_learner(learner: Any, cfg: AsyncCollectorConfig) -> None:
        params = list(learner.parameters()) if isinstance(learner, torch.nn.Module) else []
        want = torch.device(cfg.device)
        if params and params[0].device.type != want.type:
            raise ValueError(
                f"the learner's parameters are on {params[0].device} but config.device="
                f"{cfg.device!r}; move the modules (make_dreamer(...) then .to(device)) or set "
                "config.device to match."
            )
        if isinstance(learner, Autocasting):
            have = learner.autocast_dtype
            if cfg.precision == "fp32" and have not in (None, torch.float32):
                raise ValueError(
                    f"config.precision='fp32' but the learner autocasts to {have}; set "
                    "config.precision to match the learner's autocast_dtype."
                )
            if cfg.precision != "fp32" and have != cfg.autocast_dtype:
                raise ValueError(
                    f"config.precision={cfg.precision!r} but the learner's autocast_dtype is "
                    f"{have}; build DreamerV3Learner(..., autocast_dtype={cfg.autocast_dtype})."
                )

    def _learner_autocast(self):
        """Autocast for learners that do not handle precision themselves (no autocast_dtype)."""
        if self.config.precision == "fp32" or isinstance(self.learner, Autocasting):
            return contextlib.nullcontext()
        return torch.autocast(self.learner_device.type, dtype=self.config.autocast_dtype)

    def _reset_counters(self) -> None:
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

    def replay_ratio_actual(self) -> float:
        """Gradient steps per policy step counted by the schedule (sheeprl's ``ratio_steps``)."""
        committed = (self.storage.committed_t + 1) * self.num_envs
        rs = self.schedule.ratio_steps(committed)
        return self.updates / rs if rs > 0 else 0.0

    def _trace(self, *event: Any) -> None:
        if self.trace is not None:
            self.trace.append(event)

    def _done_collecting(self) -> bool:
        return self._stop or (0 <= self.total_frames <= self.policy_steps)

    # ------------------------------------------------------------------ actor side
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

    def _actor_window(self, on_commit: Callable[[], None] | None = None) -> None:
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
                    if on_commit is not None:  # reference backend: the learner's turn
                        sync.timer_stop("actor", busy)
                        learner_start = time.perf_counter()
                        on_commit()
                        start += time.perf_counter() - learner_start
                        busy = sync.timer_start("actor")
            sync.record_window_done()
            sync.timer_stop("actor", busy)
        self._trace("window_end", self.windows)
        self.windows += 1
        self._actor_busy += time.perf_counter() - start

    def _final_commit(self) -> None:
        if self.storage.total_steps > 0:
            with self._sync.actor_context():
                self._commit(self.storage.total_steps - 1)

    # ------------------------------------------------------------------ learner side
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
            if data.device != self.learner_device:
                data = data.to(self.learner_device, non_blocking=True)
            with self._learner_autocast():
                out = self.learner.update(data)
            metrics = {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
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

    def _feed_overlap(self) -> None:
        """Busy intervals the sync has finished timing (device events on streams) -> meter."""
        self.overlap.add_all(self._sync.busy_intervals())

    def _log(self) -> None:
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
        while self._log_queue:
            values = self._log_queue.pop(0)
            yield TensorDict({k: torch.tensor(v) for k, v in values.items()}, [])

    # ------------------------------------------------------------------ reference backend
    def _learner_burst(self, tick: list[int]) -> None:
        k = self.config.max_learner_steps_per_tick
        while tick[0] < k and self.limiter.can_sample(1):
            self._update()
            tick[0] += 1

    def _run_reference(self) -> Iterator[TensorDictBase]:
        """The sequential loop: sync the player's weights, act for one window (each step written
        to the ring, committed every ``commit_stride`` steps, after each commit as many updates
        as the replay ratio allows), repeat. No threads; the device-ordering calls it shares
        with the threaded backend (``self._sync``) do nothing on the CPU."""
        tick = [0]
        while not self._done_collecting():
            self._publish()
            tick[0] = 0
            while not self.limiter.can_insert(0):  # Atropos pause: the learner catches up.
                self._learner_burst(tick)
                self._publish()
                tick[0] = 0
            self.policy_ready.clear()
            self._actor_window(on_commit=lambda: self._learner_burst(tick))
            yield from self._drain_logs()
        self._final_commit()
        yield from self._finish_reference(tick)

    def _finish_reference(self, tick: list[int]) -> Iterator[TensorDictBase]:
        while self.limiter.can_sample(1) and not self._stop:
            tick[0] = 0
            self._learner_burst(tick)
            self._publish()
            yield from self._drain_logs()
        self._publish()
        yield from self._drain_logs()

    # ------------------------------------------------------------------ threaded / cuda
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
        th = self._actor_thread
        if th is not None and th.is_alive():
            self._stop = True
            self.policy_ready.set()
            self.limiter.notify()
            th.join(self.config.timeout_s)

    def _diagnostic(self) -> str:
        return (
            f"env_steps={self.env_steps}, committed_t={self.storage.committed_t}, "
            f"updates={self.updates}, granted={self.limiter.inserts}, "
            f"backlog={self.limiter.queued}, actor_idle={self.actor_idle.is_set()}, "
            f"paused={self._paused}, policy_ready={self.policy_ready.is_set()}, "
            f"versions={self.versions}"
        )

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

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(backend={self.config.backend!r}, num_envs={self.num_envs}, "
            f"env_steps={self.env_steps}, updates={self.updates}, versions={self.versions})"
        )
