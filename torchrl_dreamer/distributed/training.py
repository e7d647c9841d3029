"""``run_ray_training``: the Dreamer job on Ray (env runners, replay service, learner in the driver).

Topology (``distributed-notes.md`` §5): N :class:`EnvRunner` actors step their envs and commit
chunks to a :class:`ReplayService` actor (two, mixed by a :class:`ControlModeRouter`, when
human-in-the-loop runners exist or demonstrations are loaded into the human one); the learner
runs in the driver, samples ``[T, B]`` batches from the service (one request kept in flight, so
the next batch travels while the learner computes), updates, and publishes versioned weights
to a :class:`WeightStore` actor every ``publish_every`` gradient steps. Backpressure is the
service's rate limiter: runners pause while the learner lags, the learner polls while starved.
A :class:`RunnerPool` restarts runners that die.

``use_ray=False`` runs the same objects in-process (runners stepped one chunk in turn), which
is how most of the protocol is tested without starting Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl_dreamer.collectors.learner_side import learner_step
from torchrl_dreamer.collectors.learner_state import learner_state, load_learner_state
from torchrl_dreamer.collectors.protocols import Checkpointable, Learner
from torchrl_dreamer.distributed.cluster import call, call_async, get, init_ray, is_actor, put
from torchrl_dreamer.distributed.config import RayTrainingConfig
from torchrl_dreamer.distributed.demonstrations import DEMO_SLOT
from torchrl_dreamer.distributed.pool import RunnerPool
from torchrl_dreamer.distributed.replay_service import ReplayService, batch_from_numpy
from torchrl_dreamer.distributed.routing import AGENT, HUMAN, ControlModeRouter
from torchrl_dreamer.distributed.runner import EnvRunner
from torchrl_dreamer.distributed.weights import WeightStore, extract_weights, pack_weights

__all__ = ["RayDreamerTrainer", "TrainingTimeout", "ray_config", "run_ray_training"]


class TrainingTimeout(TimeoutError):
    """The learner waited ``timeout_s`` without runner progress (stalled or dead cluster)."""


class RayDreamerTrainer:
    """Builds the cluster pieces and runs the learner loop (see :func:`run_ray_training`).

    Use it directly to drive a run in steps (tests, notebooks): :meth:`start`, then
    :meth:`run` (repeatedly, with ``max_updates``), then :meth:`shutdown`.

    Args:
        config: :class:`RayTrainingConfig`.
        env_factory: ``() -> env`` for each runner (its ``envs_per_runner`` is yours to honour),
            or ``{group: factory}`` to run a different env (task) per runner group, e.g. several
            tasks at once with ``runner_groups`` and ``group_weights``; a ``"human"`` entry
            serves the human-in-the-loop runners.
        policy_factory: ``(env) -> policy`` for each runner (``None``: random actions).
        learner_factory: ``() -> learner`` with ``update(batch [T, B]) -> metrics``.

    Keyword Args:
        extract_fn: ``learner -> {name: tensor}`` published (default
            :func:`~torchrl_dreamer.distributed.extract_weights`).
        apply_fn: ``(policy, weights)`` in runners (default
            :func:`~torchrl_dreamer.distributed.apply_weights`).
        logger: a TorchRL logger; scalars are logged every ``log_every`` updates.
        log_every: updates between logged metrics.
        demonstrations: human demonstration rows ``[L, 1]`` in the runners' format
            (:func:`~torchrl_dreamer.distributed.demonstrations.load_demonstration_rows`), loaded
            into the human service as a static slot when the run starts; every batch then draws
            exactly ``demo_sequences(human_proportion, batch_size)`` sequences from them. Not
            with ``human_runners`` (both would share the human service's part of the batch).
    """

    def __init__(
        self,
        config: RayTrainingConfig,
        env_factory: Callable[[], Any],
        policy_factory: Callable[[Any], Any] | None,
        learner_factory: Callable[[], Any],
        *,
        extract_fn: Callable[[Any], dict] | None = None,
        apply_fn: Callable[[Any, dict], None] | None = None,
        logger: Any = None,
        log_every: int = 10,
        demonstrations: TensorDictBase | None = None,
    ) -> None:
        if not isinstance(config, RayTrainingConfig):
            raise TypeError(f"config must be a RayTrainingConfig, got {type(config).__name__}.")
        self.config = cfg = config
        if demonstrations is not None:
            _check_demonstrations(cfg, demonstrations)
        self.demonstrations = demonstrations
        self.env_factory, self.policy_factory = env_factory, policy_factory
        self.extract_fn = extract_fn if extract_fn is not None else extract_weights
        self.apply_fn = apply_fn
        self.logger, self.log_every = logger, int(log_every)
        self.use_ray = cfg.use_ray
        torch.manual_seed(cfg.seed)
        self.learner = learner_factory()
        if not isinstance(self.learner, Learner):
            raise TypeError(
                f"learner {type(self.learner).__name__} has no update(batch); pass a "
                "DreamerV3Learner factory or an object with update(batch) -> metrics."
            )
        params = getattr(self.learner, "parameters", None)
        first = next(iter(params()), None) if callable(params) else None
        #: Where batches go before ``learner.update`` (the learner's parameters' device).
        self.learner_device = first.device if first is not None else torch.device("cpu")
        self.updates = 0
        #: Sequences the learner trained on, by the service they came from (``"agent"``,
        #: ``"human"``): a run's realised human / demonstration share.
        self.sequences = {"agent": 0, "human": 0}
        self.version = 0
        self.max_lag_seen = 0
        self.publish_s: list[float] = []
        self.sample_wait_s = 0.0
        self.last_metrics: dict[str, float] = {}
        self._pending = None
        self._started = False
        self._checkpoints = 0
        self.resumed_from: str | None = None
        self._owns_ray = False

    # ------------------------------------------------------------------ construction
    def _make(self, cls: type, *args: Any, _options: dict | None = None, **kwargs: Any) -> Any:
        if not self.use_ray:
            return cls(*args, **kwargs)
        from torchrl_dreamer.distributed.cluster import remote_class

        return remote_class(cls, **(_options or {})).remote(*args, **kwargs)

    def start(self) -> None:
        """Starts Ray (if needed), the services, the weight store and the runners."""
        cfg = self.config
        if self.use_ray:
            from torchrl_dreamer.distributed.cluster import require_ray

            self._owns_ray = not require_ray().is_initialized()
            init_ray(cfg.address, num_cpus=cfg.num_cpus)
        root = None if cfg.replay_dir is None else Path(cfg.replay_dir)
        common = dict(seq_len=cfg.seq_len, replay_ratio=cfg.replay_ratio,
                      learning_starts=cfg.learning_starts, policy_steps_per_iter=cfg.total_envs,
                      max_queued=cfg.max_queued)
        # the biased draw applies to the agent's own rows, as the local replay's does
        self.service = self._make(ReplayService, cfg.capacity, **common,
                                  event_fraction=cfg.event_fraction,
                                  event_key=cfg.event_key if cfg.event_fraction else None,
                                  root_dir=None if root is None else root / "agent",
                                  seed=cfg.seed, name="agent")
        self.human_service = None
        #: where runners send chunks, and where the learner's batches come from
        self.sink: Any = self.service
        self.source: Any = self.service
        demos = self.demonstrations is not None
        if cfg.human_runners or demos:
            self.human_service = self._make(
                ReplayService, cfg.capacity, **common, rate_limited=False,
                root_dir=None if root is None else root / "human", seed=cfg.seed + 1,
                name="human")
            self.source = ControlModeRouter(
                {AGENT: self.service, HUMAN: self.human_service},
                {AGENT: 1.0 - cfg.human_proportion, HUMAN: cfg.human_proportion},
                seed=cfg.seed, exact=demos,
            )
            if cfg.human_runners:
                self.sink = self.source
        if cfg.resume_from is not None:
            self._resume(Path(cfg.resume_from))
        if demos:  # after a restore: static slots are not in checkpoints
            call(self.human_service, "load_static", DEMO_SLOT, self.demonstrations,
                 group=DEMO_SLOT)
        for g, w in (cfg.group_weights or {}).items():
            call(self.service, "set_group_weight", g, w)
        self.store = self._make(WeightStore)
        self.publish()  # version 1: runners act with the learner's initial weights
        names = [f"runner-{i}" for i in range(cfg.num_runners)]
        names += [f"human-{i}" for i in range(cfg.human_runners)]
        self.pool = RunnerPool(names, self._make_runner, use_ray=self.use_ray,
                               max_restarts=cfg.max_restarts, weights=self.store)
        self.pool.start()
        self._started = True
        self._progress = (0, time.monotonic())

    def _make_runner(self, i: int) -> Any:
        cfg = self.config
        human = i >= cfg.num_runners
        groups = cfg.runner_groups or ["default"] * cfg.num_runners
        kwargs = dict(
            chunk_len=cfg.steps_per_rollout,
            group="human" if human else groups[i],
            weight=1.0 if human else float((cfg.group_weights or {}).get(groups[i], 1.0)),
            learning_starts=cfg.learning_starts,
            control_mode=(HUMAN if human else AGENT) if cfg.human_runners else None,
            apply_fn=self.apply_fn,
            seed=cfg.seed + 1000 * (i + 1) + 7919 * self.pool_restarts(i),
        )
        name = (f"human-{i - cfg.num_runners}" if human else f"runner-{i}")
        env_factory = self.env_factory
        if isinstance(env_factory, Mapping):  # one env factory per group (several tasks)
            group = kwargs["group"]
            if group not in env_factory:
                raise KeyError(
                    f"env_factory has no entry for runner group {group!r} (groups: "
                    f"{sorted(env_factory)}); give one factory per group in runner_groups."
                )
            env_factory = env_factory[group]
        options = {"num_gpus": cfg.runner_gpus} if cfg.runner_gpus else None
        return self._make(EnvRunner, name, env_factory, self.policy_factory, self.sink,
                          self.store, _options=options, **kwargs)

    def pool_restarts(self, i: int) -> int:
        """How often runner ``i`` was restarted (0 before the pool exists)."""
        pool = getattr(self, "pool", None)
        return 0 if pool is None else pool.restarts[i]

    # ------------------------------------------------------------------ weights
    def publish(self) -> float:
        """Publishes the learner's weights as the next version; returns seconds taken."""
        start = time.perf_counter()
        self.version += 1
        packet = pack_weights(self.extract_fn(self.learner), self.version)
        call(self.store, "publish", self.version, [put(packet, self.use_ray)])
        call_async(self.service, "set_learner_version", self.version)
        dt = time.perf_counter() - start
        self.publish_s.append(dt)
        return dt

    def wait_for_lag(self) -> None:
        """Blocks (stepping/supervising runners) while publishing would exceed max_weight_lag.

        Raises :class:`TrainingTimeout` when a runner stays too far behind for ``timeout_s``.
        """
        cfg = self.config
        since = time.monotonic()
        while True:
            lag = int(call(self.store, "max_lag"))
            self.max_lag_seen = max(self.max_lag_seen, lag)
            if lag + 1 <= cfg.max_weight_lag:
                return
            self._tend_runners()
            if time.monotonic() - since > cfg.timeout_s:
                raise TrainingTimeout(
                    f"runners stayed {lag} versions behind (max_weight_lag={cfg.max_weight_lag}) "
                    f"for {cfg.timeout_s}s: {call(self.store, 'stats')}"
                )
            if self.use_ray:
                time.sleep(0.005)

    # ------------------------------------------------------------------ loop
    def _tend_runners(self) -> int:
        if self.use_ray:
            return self.pool.poll()
        self.pool.step()
        return self.pool.running

    def _request_sample(self) -> Any:
        if is_actor(self.source):  # numpy arrays travel zero-copy through the object store
            return call_async(self.source, "sample_numpy", self.config.batch_size)
        return call_async(self.source, "sample", self.config.batch_size)

    def _next_batch(self) -> Any:
        if self._pending is None:
            self._pending = self._request_sample()
        out = get(self._pending, timeout=self.config.timeout_s)
        self._pending = None
        if out is not None and is_actor(self.source):
            out = batch_from_numpy(out)
        if out is not None and is_actor(self.source):
            self._pending = self._request_sample()  # prefetch the next batch
        return out

    @property
    def started(self) -> bool:
        """Whether :meth:`start` brought the services and runners up (and no shutdown since)."""
        return self._started

    def policy_steps(self) -> int:
        """Policy steps committed to the replay service(s) so far (all runners)."""
        steps = call(self.service, "stats")["policy_steps"]
        if self.human_service is not None:
            steps += call(self.human_service, "stats")["policy_steps"]
        return int(steps)

    def _collecting_done(self) -> bool:
        return self.policy_steps() >= self.config.total_steps

    def run(self, max_updates: int | None = None,
            until_steps: int | None = None) -> dict[str, Any]:
        """Trains until collection is done and grants are used up, or ``max_updates`` more steps,
        or (``until_steps`` below ``total_steps``) until that many policy steps are collected,
        leaving the runners running (a pause, e.g. to checkpoint).

        Returns :meth:`summary`.
        """
        if not self._started:
            self.start()
        cfg = self.config
        goal = None if max_updates is None else self.updates + int(max_updates)
        pause = until_steps is not None and until_steps < cfg.total_steps
        stopping = False
        while True:
            if goal is not None and self.updates >= goal:
                break
            if pause and self.policy_steps() >= until_steps:
                break
            if cfg.max_updates is not None and self.updates >= cfg.max_updates:
                stopping = True
            running = self._tend_runners()
            if not stopping and self._collecting_done():
                stopping = True
            if stopping:
                self._stop_collection()
                if cfg.max_updates is not None and self.updates >= cfg.max_updates:
                    break
            out = self._next_batch()
            if out is None:
                if stopping and running == 0:
                    break  # nothing more will arrive, grants used up
                self._starved()
                continue
            self._update(out)
        return self.summary()

    def _starved(self) -> None:
        cfg = self.config
        steps = call(self.service, "stats")["policy_steps"]
        if steps != self._progress[0]:
            self._progress = (steps, time.monotonic())
        elif time.monotonic() - self._progress[1] > cfg.timeout_s:
            raise TrainingTimeout(
                f"the learner was starved for {cfg.timeout_s}s with no new env steps "
                f"(service: {call(self.service, 'stats')}; runners: {self.pool.events[-5:]})."
            )
        if self.use_ray:
            time.sleep(0.002)

    def _update(self, out: Any) -> None:
        """One gradient step on a batch from the replay service, then this path's bookkeeping.

        The step itself is the local collector's
        (:func:`~torchrl_dreamer.collectors.learner_side.learner_step`: to the learner's device,
        ``learner.update``, its tensor metrics). The rest differs from
        the collector's step because the replay and the players are remote: the batch was
        sampled, and its grant taken, in the :class:`ReplayService` (and prefetched), so there is
        no commit event to wait on; the weights go to a :class:`WeightStore` as a new version
        every ``publish_every`` steps, held back while a runner lags ``max_weight_lag`` versions,
        not into an in-process player between windows; the logged metrics are the scalars of the
        latest step (the collector's are means over ``log_every`` steps, reduced on the device);
        and checkpoints are taken here every ``checkpoint_every_updates``.
        """
        batch, info = out
        metrics = learner_step(self.learner, batch, self.learner_device)
        self.updates += 1
        mode = info.get("mode")
        human = 0 if mode is None else int((mode == HUMAN).sum())
        self.sequences["human"] += human
        self.sequences["agent"] += int(batch.batch_size[1]) - human
        if self.updates % self.config.publish_every == 0:
            self.wait_for_lag()
            self.publish()
        if self.updates % self.log_every == 0:
            self.last_metrics = {k: float(v) for k, v in metrics.items() if v.numel() == 1}
            if self.logger is not None:
                for k, v in self.last_metrics.items():
                    self.logger.log_scalar(k, v, step=self.updates)
        ce = self.config.checkpoint_every_updates
        if ce and self.updates % ce == 0:
            self.checkpoint()

    def _stop_collection(self) -> None:
        for svc in (self.service, self.human_service):
            if svc is not None:
                call(svc, "request_stop")

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, path: str | Path | None = None) -> str:
        """Checkpoints the replay service(s), the learner (state_dict, update count, optimizers)
        and counters.

        Resume with ``RayTrainingConfig(resume_from=<this directory>)``. The learner's part is
        the local trainer's (:func:`~torchrl_dreamer.collectors.learner_state.learner_state`); the
        rest is this path's own layout: the replay lives in the service actors, which write
        their own snapshots (``replay_agent/``, ``replay_human/``), beside a ``learner.pt``
        with the learner's state and this trainer's ``updates`` and weight ``version``. (A
        ``TrainConfig`` run on Ray, :class:`~torchrl_dreamer.distributed.RayCollector`, goes
        through the local trainer's checkpoints instead.)
        """
        base = Path(path if path is not None else self.config.checkpoint_dir)
        base.mkdir(parents=True, exist_ok=True)
        call(self.service, "checkpoint", str(base / "replay_agent"))
        if self.human_service is not None:
            call(self.human_service, "checkpoint", str(base / "replay_human"))
        if isinstance(self.learner, Checkpointable):
            state = {**learner_state(self.learner), "updates": self.updates,
                     "version": self.version}
            torch.save(state, base / "learner.pt")
        self._checkpoints += 1
        return str(base)

    def _resume(self, base: Path) -> None:
        """Restores what :meth:`checkpoint` wrote into ``base`` (services, learner, counters)."""
        if not (base / "replay_agent").is_dir():
            raise FileNotFoundError(
                f"{base / 'replay_agent'} not found: resume_from must be a checkpoint_dir "
                "written by RayDreamerTrainer.checkpoint()."
            )
        call(self.service, "restore", str(base / "replay_agent"))
        if self.human_service is not None and (base / "replay_human").is_dir():
            call(self.human_service, "restore", str(base / "replay_human"))
        learner_file = base / "learner.pt"
        if learner_file.is_file() and isinstance(self.learner, Checkpointable):
            state = torch.load(learner_file, map_location=self.learner_device)
            load_learner_state(self.learner, state)
            self.updates = int(state["updates"])
            self.version = int(state["version"])
        self.resumed_from = str(base)

    # ------------------------------------------------------------------ end
    def summary(self) -> dict[str, Any]:
        """Counters: updates, versions and lag, publish latency, service and runner stats."""
        if self._pending is not None:  # resolve the prefetched batch (it took a grant)
            self._pending = get(self._pending, timeout=self.config.timeout_s)
        svc = call(self.service, "stats")
        store = call(self.store, "stats")
        pub = sorted(self.publish_s)
        return {
            "updates": self.updates,
            "prefetched": int(self._pending is not None),
            "version": self.version,
            "policy_steps": svc["policy_steps"],
            "max_lag_seen": max(self.max_lag_seen, store["max_lag"]),
            "max_version_lag_in_replay": svc["max_version_lag"],
            "publish_ms_median": 1000 * pub[len(pub) // 2] if pub else 0.0,
            "restarts": sum(self.pool.restarts),
            "runner_events": list(self.pool.events),
            "runners": dict(self.pool.finished),
            "service": svc,
            "human_service": None if self.human_service is None
            else call(self.human_service, "stats"),
            "sequences": dict(self.sequences),
            "weights": store,
            "metrics": dict(self.last_metrics),
        }

    def stop_runners(self) -> dict[str, Any]:
        """Asks every runner to stop, waits for them to disconnect; returns :meth:`summary`."""
        if self._started:
            self._stop_collection()
            self.pool.stop(timeout=min(60.0, self.config.timeout_s))
        return self.summary()

    def shutdown(self) -> None:
        """Stops the runners and drops the actors; shuts Ray down if :meth:`start` started it."""
        if not self._started:
            return
        self._stop_collection()
        self.pool.stop(timeout=min(60.0, self.config.timeout_s))
        if self.use_ray:
            import ray

            for actor in (self.service, self.human_service, self.store):
                if actor is not None:
                    ray.kill(actor, no_restart=True)
            if self._owns_ray:  # we started it: leave nothing running behind
                ray.shutdown()
        self._started = False


def _check_demonstrations(cfg: RayTrainingConfig, rows: TensorDictBase) -> None:
    """Refuse demonstrations a run cannot mix as asked, before anything starts."""
    if cfg.human_runners:
        raise ValueError(
            f"demonstrations and human_runners={cfg.human_runners} would share the human replay "
            "service, whose part of each batch (human_proportion) is split between its slots by "
            "their size, so neither share would hold: run with demonstrations or with human "
            "runners, not both."
        )
    if not isinstance(rows, TensorDictBase) or rows.batch_dims != 2 or rows.batch_size[1] != 1:
        raise ValueError(
            "demonstrations must be [L, 1] rows (load_demonstration_rows(paths, probe_env)), got "
            f"{type(rows).__name__} {list(getattr(rows, 'batch_size', []))}."
        )
    if cfg.human_proportion > 0 and rows.batch_size[0] < cfg.seq_len:
        raise ValueError(
            f"the demonstrations hold {rows.batch_size[0]} steps, fewer than one sequence of "
            f"seq_len={cfg.seq_len}; record longer demonstrations or set the share to 0."
        )


def ray_config(train_config: Any, **overrides: Any) -> RayTrainingConfig:
    """The :class:`RayTrainingConfig` of a run's ``TrainConfig``: the settings of the same name
    copied as they are (``TrainConfig.shared_settings``), the rest derived below.

    ``num_envs`` is split evenly over ``ray.num_runners`` runners (unset: its default, at most
    ``num_envs``); each
    runner slot of the replay service holds
    :func:`~torchrl_dreamer.data.ring_rows` of its share of ``replay_capacity`` (one chunk of
    ``steps_per_rollout`` rows written ahead); memmap replay goes under ``log_dir``. Checkpoints
    are the trainer's (every ``checkpoint_every`` policy steps), so the service's own
    update-count checkpoints stay off. With ``demos`` the demonstrations' share of each batch,
    ``demo_share``, is the human service's ``human_proportion``. ``overrides`` set any
    :class:`RayTrainingConfig` field.

    Example:
        >>> from torchrl_dreamer.trainers import TrainConfig
        >>> rc = ray_config(TrainConfig(num_envs=4, replay_capacity=400, seq_len=8))
        >>> rc.num_runners, rc.envs_per_runner, rc.capacity, rc.steps_per_rollout
        (2, 2, 124, 16)
    """
    from torchrl_dreamer.data import ring_rows

    tc = train_config
    # ray.num_runners as given, else its default capped at num_envs (a 1-env run: one runner)
    runners = tc.ray.num_runners
    if "num_runners" not in tc.given:
        runners = min(runners, tc.num_envs)
    runners = int(overrides.pop("num_runners", runners))
    if runners < 1 or tc.num_envs % runners:
        raise ValueError(
            f"num_envs={tc.num_envs} cannot be split evenly over {runners} Ray runners; pass a "
            "num_envs that is a multiple of the runner count (2 by default)."
        )
    fields = dict(
        tc.shared_settings(RayTrainingConfig),  # seq_len, batch_size, replay_ratio, seed, ...
        num_runners=runners,
        envs_per_runner=tc.num_envs // runners,
        capacity=ring_rows(tc.replay_capacity, tc.num_envs, tc.seq_len, tc.steps_per_rollout),
        replay_dir=str(Path(tc.log_dir) / "replay") if tc.replay_backing == "memmap" else None,
        # CUDA envs: the runners share the GPU (Ray hides it from actors reserving none).
        runner_gpus=1.0 / runners if str(tc.device).startswith("cuda") else 0.0,
    )
    if getattr(tc, "demos", None):  # the demonstrations are the human service's rows
        fields["human_proportion"] = float(tc.demo_share)
    fields.update(overrides)
    return RayTrainingConfig(**fields)


def run_ray_training(
    config: Any,
    env_factory: Callable[[], Any],
    policy_factory: Callable[[Any], Any] | None,
    learner_factory: Callable[[], Any],
    **kwargs: Any,
) -> dict[str, Any]:
    """Runs a whole Dreamer training job on Ray and returns its summary.

    The library entry point for custom Ray jobs (the training CLI's ``--backend ray`` goes
    through :class:`~torchrl_dreamer.trainers.DreamerTrainer` and
    :class:`~torchrl_dreamer.distributed.RayCollector` instead). The factories build each
    runner's env and policy and the learner; :class:`~torchrl_dreamer.trainers.GameBoyDreamer`
    has them for a Game Boy task (the run's one composition root,
    :class:`~torchrl_dreamer.trainers.RunFactories`). Keyword arguments go to
    :class:`RayDreamerTrainer`.

    Example:
        The shipped maze; ``use_ray=False`` runs the same protocol in this process, without
        starting a Ray cluster.

        >>> from torchrl_dreamer.trainers import GameBoyDreamer
        >>> cfg = RayTrainingConfig(num_runners=1, envs_per_runner=2, steps_per_rollout=8,
        ...                         seq_len=8, batch_size=2, capacity=64, learning_starts=16,
        ...                         replay_ratio=0.1, total_steps=64, use_ray=False)
        >>> f = GameBoyDreamer("maze", num_envs=cfg.envs_per_runner)
        >>> summary = run_ray_training(cfg, f.env, f.policy, f.learner)
        >>> summary["policy_steps"] >= 64, summary["updates"] > 0
        (True, True)
    """
    if not isinstance(config, RayTrainingConfig):
        raise TypeError(
            f"config must be a RayTrainingConfig, got {type(config).__name__}; train a "
            "TrainConfig with DreamerTrainer (backend='ray')."
        )
    if env_factory is None or learner_factory is None:
        raise TypeError(
            "run_ray_training needs env_factory and learner_factory (and policy_factory, or None "
            "for random actions); for a Game Boy task pass those of "
            "torchrl_dreamer.trainers.GameBoyDreamer(task, num_envs=config.envs_per_runner)."
        )
    trainer = RayDreamerTrainer(config, env_factory, policy_factory, learner_factory, **kwargs)
    try:
        return trainer.run()
    finally:
        trainer.shutdown()
