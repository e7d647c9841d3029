"""``RayCollector``: a Ray run as the collector of a :class:`~torchrl_dreamer.trainers.DreamerTrainer`.

It wraps :class:`~torchrl_dreamer.distributed.RayDreamerTrainer` (runners, replay service,
weight store; the learner stays in this process) behind the collector interface the trainer
drives (:class:`~torchrl_dreamer.trainers.RunCollector`), so ``--backend ray`` goes through the
same trainer as the local backends: progress, logs, checkpoints every ``checkpoint_every``
policy steps, ``--resume``, the final evaluation and its GIF.

The trainer asks for ``total_frames`` policy steps at a time; the collector trains until the
replay service has committed that many, leaving the runners stepping (a pause to checkpoint), and
drains and stops them at the run's ``total_steps``. A checkpoint holds the replay service's
snapshot (``save_replay``) and the counters (``state_dict``); the learner is the trainer's.
Runners do not snapshot their envs: a resumed run starts new episodes.

:func:`~torchrl_dreamer.trainers.build_run` composes such a run from the run's own factories
(:func:`~torchrl_dreamer.trainers.builder.build_remote_run`); importing this module registers
:class:`RayCollection`, which builds the collector, as its ``"ray"`` backend
(:func:`~torchrl_dreamer.collectors.remote.register_remote_collection`). This layer imports the
collectors' and the data layer's protocols, never the trainers, nor they this layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from torchrl_dreamer.collectors.remote import register_remote_collection
from torchrl_dreamer.distributed.cluster import call
from torchrl_dreamer.distributed.config import RayTrainingConfig
from torchrl_dreamer.distributed.demonstrations import load_demonstration_rows
from torchrl_dreamer.distributed.training import RayDreamerTrainer, ray_config

__all__ = ["RayCollection", "RayCollector"]


class RayCollector:
    """Collect and train on Ray for a :class:`~torchrl_dreamer.trainers.DreamerTrainer`.

    Args:
        config: the Ray run (:func:`~torchrl_dreamer.distributed.ray_config` of a
            ``TrainConfig``).
        env_factory: ``() -> env`` of each runner (picklable).
        policy_factory: ``(env) -> policy`` of each runner (picklable).
        learner: the learner, trained in this process.
        logger: a TorchRL logger (metrics every ``log_every`` updates).
        log_every: gradient steps between logged metrics (and progress yields).
        demonstrations: demonstration rows for the human replay service
            (:class:`RayDreamerTrainer`'s ``demonstrations``).

    Example:
        The shipped maze; ``use_ray=False`` runs it in this process, where
        ``DreamerTrainer(TrainConfig(backend="ray"))`` starts a local Ray cluster.

        >>> from torchrl_dreamer.distributed import ray_config
        >>> from torchrl_dreamer.trainers import RunFactories, TrainConfig
        >>> tc = TrainConfig(backend="ray", num_envs=2, total_steps=32, learning_starts=16,
        ...                  seq_len=8, batch_size=2, replay_capacity=256)
        >>> rc = ray_config(tc, use_ray=False)
        >>> f = RunFactories(tc.with_(num_envs=rc.envs_per_runner))
        >>> f = f.with_env(f.env())
        >>> collector = RayCollector(rc, f.env, f.policy, f.learner(*f.networks()))
        >>> for metrics in collector.iterator():
        ...     pass
        >>> collector.policy_steps >= 32, collector.updates > 0
        (True, True)
        >>> collector.shutdown()
    """

    def __init__(self, config: RayTrainingConfig, env_factory: Callable[[], Any],
                 policy_factory: Callable[[Any], Any], learner: Any, *, logger: Any = None,
                 log_every: int = 10, demonstrations: Any = None) -> None:
        self.config = config
        self.learner = learner
        self.total_frames = int(config.total_steps)
        self.log_every = int(log_every)
        self._ray = RayDreamerTrainer(config, env_factory, policy_factory, lambda: learner,
                                      logger=logger, log_every=log_every,
                                      demonstrations=demonstrations)
        self._steps = 0

    # ------------------------------------------------------------------ counters
    @property
    def trainer(self) -> RayDreamerTrainer:
        """The :class:`RayDreamerTrainer` this collector drives (its services and counters)."""
        return self._ray

    @property
    def logger(self) -> Any:
        """The TorchRL logger metrics go to."""
        return self._ray.logger

    @logger.setter
    def logger(self, value: Any) -> None:
        self._ray.logger = value

    @property
    def policy_steps(self) -> int:
        """Policy steps the replay service had committed (all runners) when :meth:`iterator`
        last yielded or returned. The runners keep stepping between two calls (e.g. while the
        trainer checkpoints), so a live count could pass ``total_steps`` before the run's end
        is drained; the trainer goes by this one."""
        return self._steps

    def _count(self) -> None:
        self._steps = self._ray.policy_steps()

    @property
    def updates(self) -> int:
        """Gradient steps taken."""
        return self._ray.updates

    def replay_ratio_actual(self) -> float:
        """Gradient steps per policy step so far."""
        return self.updates / max(1, self.policy_steps)

    # ------------------------------------------------------------------ running
    def iterator(self) -> Iterator[dict[str, float]]:
        """Train until ``total_frames`` policy steps (at the run's ``total_steps``, or once the
        runners have passed it: drain the owed gradient steps and stop the runners); yields the
        latest metrics every ``log_every`` updates."""
        last = self._ray.config.total_steps
        while True:
            if self.total_frames >= last or self.policy_steps >= last:
                before = self.updates
                self._ray.run(max_updates=self.log_every)
                self._count()
                if self.updates == before:  # collection done and grants used up
                    yield dict(self._ray.last_metrics)
                    return
            else:
                self._ray.run(max_updates=self.log_every, until_steps=self.total_frames)
                self._count()
                if self.total_frames <= self.policy_steps < last:  # a pause (checkpoint)
                    yield dict(self._ray.last_metrics)
                    return
            yield dict(self._ray.last_metrics)

    def shutdown(self, close_env: bool = True) -> None:
        """Stop the runners and the actors (the learner stays usable)."""
        if self._ray.started:
            self._count()
        self._ray.shutdown()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, int]:
        """Counters: gradient steps, the published weight version and the policy steps."""
        return {"updates": int(self._ray.updates), "version": int(self._ray.version),
                "policy_steps": int(self._steps)}

    def load_state_dict(self, state_dict: dict[str, int], keep_schedule: bool = False) -> None:
        """Restore :meth:`state_dict` (``keep_schedule`` is for the local collector's API; the
        replay service's grants come with its replay)."""
        self._ray.updates = int(state_dict["updates"])
        self._ray.version = int(state_dict["version"])
        self._steps = int(state_dict["policy_steps"])

    def env_state(self) -> None:
        """Runners keep no env snapshot (a resumed Ray run starts new episodes)."""
        return None

    def load_env_state(self, state: dict[str, Any] | None) -> bool:
        """Nothing to restore; returns ``False`` (the runners' envs start new episodes)."""
        return False

    def save_replay(self, path: Path) -> None:
        """Snapshot the replay service(s) under ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        call(self._ray.service, "checkpoint", str(path / "replay_agent"))
        if self._ray.human_service is not None:
            call(self._ray.human_service, "checkpoint", str(path / "replay_human"))

    def load_replay(self, path: Path) -> None:
        """Restore the replay service(s) from :meth:`save_replay` when the run starts."""
        if not (Path(path) / "replay_agent").is_dir():
            raise FileNotFoundError(f"{path} holds no replay service snapshot (replay_agent/)")
        self._ray.config.resume_from = str(path)


class RayCollection:
    """The ``"ray"`` backend of :func:`~torchrl_dreamer.trainers.build_run` (a
    :class:`~torchrl_dreamer.collectors.remote.RemoteCollection`, registered when this module is
    imported): the Ray job of a run is :func:`~torchrl_dreamer.distributed.ray_config` of its
    config, its demonstrations go to the human replay service
    (:func:`~torchrl_dreamer.distributed.demonstrations.load_demonstration_rows`), and a
    :class:`RayCollector` drives the runners the run's own factories build.

    Example:
        >>> from torchrl_dreamer.collectors.remote import remote_collection
        >>> isinstance(remote_collection("ray"), RayCollection)
        True
    """

    def envs_per_runner(self, config: Any) -> int:
        """Envs each runner steps: the run's ``num_envs`` split over its runners."""
        return ray_config(config).envs_per_runner

    def load_demonstrations(self, paths: Sequence[str], probe_env: Any) -> Any:
        """The demonstration files as rows of the human service's static slot."""
        return load_demonstration_rows(list(paths), probe_env)

    def collector(self, config: Any, env_factory: Callable[[], Any],
                  policy_factory: Callable[[Any], Any], learner: Any, *, logger: Any = None,
                  demonstrations: Any = None) -> RayCollector:
        """A :class:`RayCollector` of the run's Ray job."""
        return RayCollector(ray_config(config), env_factory, policy_factory, learner,
                            logger=logger, log_every=config.log_every,
                            demonstrations=demonstrations)


register_remote_collection("ray", RayCollection())
