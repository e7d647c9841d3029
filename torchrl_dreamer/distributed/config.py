"""Configuration of a distributed (Ray) Dreamer run, validated on construction.

A plain dataclass like :class:`~torchrl_dreamer.collectors.AsyncCollectorConfig` so the training
CLI (``--backend ray``), a YAML file or a test build it with the same checks. Units follow the
local collector and use its names (:class:`~torchrl_dreamer.trainers.TrainConfig`):
``steps_per_rollout``, ``seq_len`` and ``capacity`` count env steps (rows); ``total_steps`` and
``learning_starts`` count policy steps (one action of one env);
``replay_ratio`` is gradient steps per policy step. The settings it shares with the local
collector and ``TrainConfig`` (``seq_len``, ``batch_size``, ``replay_ratio``, ``learning_starts``,
``steps_per_rollout``, ``off_policy_tolerance``, ``timeout_s``, ``seed``, ``total_steps``) take
their defaults from :mod:`torchrl_dreamer.collectors.defaults` and
:mod:`torchrl_dreamer.trainers.defaults`: a Ray job built without them samples the same
``B x T`` batches at the same replay ratio as ``python -m torchrl_dreamer.train``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from torchrl_dreamer.collectors.defaults import (
    BATCH_SIZE,
    LEARNING_STARTS,
    OFF_POLICY_TOLERANCE,
    REPLAY_RATIO,
    SEED,
    SEQ_LEN,
    STEPS_PER_ROLLOUT,
    TIMEOUT_S,
    check_batch_shape,
    require,
)
from torchrl_dreamer.trainers.defaults import TOTAL_STEPS

__all__ = ["RayTrainingConfig"]


@dataclasses.dataclass
class RayTrainingConfig:
    """Every knob of :func:`~torchrl_dreamer.distributed.run_ray_training`.

    Args:
        num_runners: agent env-runner actors.
        human_runners: extra runners whose rows have ``control_mode=1`` (human-in-the-loop);
            ``> 0`` routes them into a second replay service mixed in by ``human_proportion``.
        human_proportion: share of each batch drawn from the human service (``0..1``): the human
            runners' rows, or the demonstrations given to
            :class:`~torchrl_dreamer.distributed.RayDreamerTrainer` (then exactly
            ``round(human_proportion * batch_size)`` sequences; ``ray_config`` sets it to the
            ``TrainConfig``'s ``demo_share``).
        envs_per_runner: envs in each runner's batched env (passed to the env factory).
        steps_per_rollout: env steps per chunk a runner commits to the replay service.
        capacity: rows kept per runner slot in the replay service.
        seq_len, batch_size: sampled batches are ``[seq_len, batch_size]``.
        replay_ratio: gradient steps per policy step.
        learning_starts: policy steps of random prefill before training.
        off_policy_tolerance: runners pause while more than this many rounds (every runner one
            chunk) of granted gradient steps wait for the learner (Atropos rule).
        publish_every: gradient steps between weight publications.
        max_weight_lag: the learner waits before publishing while a runner is more than this
            many versions behind (bounded staleness).
        total_steps: policy steps to collect (all runners), then the run drains and stops.
        max_updates: stop after this many gradient steps (``None``: no cap).
        runner_groups: group name of each agent runner (default all ``"default"``).
        group_weights: sampling weight of each group (default 1 each).
        max_restarts: restarts allowed per runner after a crash before the run fails.
        checkpoint_dir, checkpoint_every_updates: replay-service and learner checkpoints every
            that many gradient steps (0: none; a ``DreamerTrainer`` run checkpoints itself, every
            ``TrainConfig.checkpoint_every`` policy steps, and leaves this 0).
        resume_from: a ``checkpoint_dir`` to restore the replay service(s) and the learner from
            before starting (runners re-register by name and continue their slots).
        replay_dir: memmap directory of the replay (``None``: RAM).
        runner_gpus: GPUs reserved per runner actor (fractions share one GPU, e.g. ``0.5`` for
            two runners on one GPU). Ray hides GPUs from actors that reserve none, so CUDA envs
            need ``> 0``.
        address: Ray cluster to join (``None``: start a local, loopback-only cluster).
        num_cpus: CPUs of a local cluster.
        use_ray: ``False`` runs the same protocol in-process, runners stepped in turn (tests).
        timeout_s: longest wait without progress before failing with a diagnostic.
        seed: seeds runners (``seed + i``), the service sampler and torch.
    """

    num_runners: int = 2
    human_runners: int = 0
    human_proportion: float = 0.5
    envs_per_runner: int = 4
    steps_per_rollout: int = STEPS_PER_ROLLOUT
    capacity: int = 100_000
    seq_len: int = SEQ_LEN
    batch_size: int = BATCH_SIZE
    replay_ratio: float = REPLAY_RATIO
    learning_starts: int = LEARNING_STARTS
    off_policy_tolerance: float = OFF_POLICY_TOLERANCE
    publish_every: int = 1
    max_weight_lag: int = 8
    total_steps: int = TOTAL_STEPS
    max_updates: int | None = None
    runner_groups: list[str] | None = None
    group_weights: dict[str, float] | None = None
    max_restarts: int = 3
    checkpoint_dir: str | None = None
    checkpoint_every_updates: int = 0
    resume_from: str | None = None
    replay_dir: str | None = None
    runner_gpus: float = 0.0
    address: str | None = None
    num_cpus: int | None = None
    use_ray: bool = True
    timeout_s: float = TIMEOUT_S
    seed: int = SEED

    def __post_init__(self) -> None:
        need = functools.partial(require, "RayTrainingConfig", self)

        need(self.num_runners >= 1, "num_runners", "at least one agent runner is needed.")
        need(self.human_runners >= 0, "human_runners", "must be >= 0.")
        need(0.0 <= self.human_proportion <= 1.0, "human_proportion", "must lie in [0, 1].")
        need(self.envs_per_runner >= 1, "envs_per_runner", "must be >= 1.")
        need(self.steps_per_rollout >= 1, "steps_per_rollout", "must be >= 1 env step.")
        check_batch_shape("RayTrainingConfig", self.batch_size, self.seq_len)
        need(self.capacity >= self.seq_len + self.steps_per_rollout, "capacity",
             "each slot must hold seq_len + steps_per_rollout = "
             f"{self.seq_len + self.steps_per_rollout} rows.")
        need(math.isfinite(self.replay_ratio) and self.replay_ratio > 0, "replay_ratio",
             "must be a finite number > 0 (gradient steps per policy step).")
        need(self.learning_starts >= 0, "learning_starts", "must be >= 0.")
        need(self.off_policy_tolerance >= 1, "off_policy_tolerance",
             "must be >= 1 round, or runners pause before the learner can catch up.")
        need(self.publish_every >= 1, "publish_every", "must be >= 1 gradient step.")
        need(self.max_weight_lag >= 1, "max_weight_lag",
             "must be >= 1 (runners fetch between chunks, so they always trail by some).")
        need(self.total_steps >= 1, "total_steps", "must be >= 1 policy step.")
        need(self.max_updates is None or self.max_updates >= 0, "max_updates", "must be >= 0.")
        need(self.runner_groups is None or len(self.runner_groups) == self.num_runners,
             "runner_groups", f"needs one group name per agent runner ({self.num_runners}).")
        need(self.max_restarts >= 0, "max_restarts", "must be >= 0.")
        need(self.checkpoint_every_updates >= 0, "checkpoint_every_updates", "must be >= 0 (0: never).")
        need(self.checkpoint_every_updates == 0 or self.checkpoint_dir is not None,
             "checkpoint_every_updates",
             "needs checkpoint_dir.")
        need(self.timeout_s > 0, "timeout_s", "must be > 0 seconds.")
        need(self.runner_gpus >= 0, "runner_gpus", "must be >= 0.")

    @property
    def total_envs(self) -> int:
        """Envs stepping across the agent runners."""
        return self.num_runners * self.envs_per_runner

    @property
    def max_queued(self) -> float:
        """Granted-but-untaken gradient steps beyond which runners pause."""
        per_round = self.replay_ratio * self.steps_per_rollout * self.total_envs
        return float(max(2, math.ceil(self.off_policy_tolerance * per_round)))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (logging, checkpoints)."""
        return dataclasses.asdict(self)
