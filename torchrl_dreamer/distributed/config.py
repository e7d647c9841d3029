"""Configuration of a distributed (Ray) Dreamer run, validated on construction.

A plain dataclass like :class:`~torchrl_dreamer.collectors.AsyncCollectorConfig` so the training
CLI (``--backend ray``), a YAML file or a test build it with the same checks. Units follow the
local collector and use its flat names (:mod:`torchrl_dreamer.collectors.settings`):
``steps_per_rollout``, ``seq_len`` and ``capacity`` count env steps (rows); ``total_steps`` and
``learning_starts`` count policy steps (one action of one env);
``replay_ratio`` is gradient steps per policy step. The settings it shares with the local
collector and ``TrainConfig`` (``seq_len``, ``batch_size``, ``replay_ratio``, ``learning_starts``,
``steps_per_rollout``, ``off_policy_tolerance``, ``timeout_s``, ``seed``, ``total_steps``) and
the ``ray`` section's are not restated here: :func:`~torchrl_dreamer.collectors.settings.takes_settings`
gives it those fields with their one default and docstring, so a Ray job built without them
samples the same ``B x T`` batches at the same replay ratio as ``python -m torchrl_dreamer.train``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from torchrl_dreamer.collectors.defaults import require
from torchrl_dreamer.collectors.settings import check_settings, section_settings, takes_settings

__all__ = ["RayTrainingConfig"]


@dataclasses.dataclass
@takes_settings(*section_settings("ray"), "steps_per_rollout", "seq_len", "batch_size",
                "replay_ratio", "learning_starts", "event_fraction", "event_key",
                "off_policy_tolerance", "total_steps",
                "timeout_s", "seed")
class RayTrainingConfig:
    """Every knob of :func:`~torchrl_dreamer.distributed.run_ray_training`.

    Fields: the run settings of :attr:`run_settings` (documented in their sections of
    :mod:`torchrl_dreamer.collectors.settings`: the whole ``ray`` section (``num_runners``,
    ``publish_every``, ``max_weight_lag``, ``max_restarts``, ``address``, ``num_cpus``); ``replay``
    for ``seq_len``,
    ``batch_size``, ``replay_ratio``, ``learning_starts``, ``event_fraction``, ``event_key``; ``collector`` for
    ``steps_per_rollout``, ``off_policy_tolerance``, ``timeout_s``; ``run`` for ``total_steps``
    and ``seed``: runners are seeded ``seed + i``), then the job's own:

    Args:
        human_runners: extra runners whose rows have ``control_mode=1`` (human-in-the-loop);
            ``> 0`` routes them into a second replay service mixed in by ``human_proportion``.
        human_proportion: share of each batch drawn from the human service (``0..1``): the human
            runners' rows, or the demonstrations given to
            :class:`~torchrl_dreamer.distributed.RayDreamerTrainer` (then exactly
            ``round(human_proportion * batch_size)`` sequences; ``ray_config`` sets it to the
            ``TrainConfig``'s ``demo_share``).
        envs_per_runner: envs in each runner's batched env (passed to the env factory).
        capacity: rows kept per runner slot in the replay service.
        max_updates: stop after this many gradient steps (``None``: no cap).
        runner_groups: group name of each agent runner (default all ``"default"``).
        group_weights: sampling weight of each group (default 1 each).
        checkpoint_dir, checkpoint_every_updates: replay-service and learner checkpoints every
            that many gradient steps (0: none; a ``DreamerTrainer`` run checkpoints itself, every
            ``TrainConfig.checkpoint_every`` policy steps, and leaves this 0).
        resume_from: a ``checkpoint_dir`` to restore the replay service(s) and the learner from
            before starting (runners re-register by name and continue their slots).
        replay_dir: memmap directory of the replay (``None``: RAM).
        runner_gpus: GPUs reserved per runner actor (fractions share one GPU, e.g. ``0.5`` for
            two runners on one GPU). Ray hides GPUs from actors that reserve none, so CUDA envs
            need ``> 0``.
        use_ray: ``False`` runs the same protocol in-process, runners stepped in turn (tests).
    """

    human_runners: int = 0
    human_proportion: float = 0.5
    envs_per_runner: int = 4
    capacity: int = 100_000
    max_updates: int | None = None
    runner_groups: list[str] | None = None
    group_weights: dict[str, float] | None = None
    checkpoint_dir: str | None = None
    checkpoint_every_updates: int = 0
    resume_from: str | None = None
    replay_dir: str | None = None
    runner_gpus: float = 0.0
    use_ray: bool = True

    def __post_init__(self) -> None:
        need = functools.partial(require, "RayTrainingConfig", self)

        check_settings("RayTrainingConfig", self)  # each taken setting's one rule
        need(self.human_runners >= 0, "human_runners", "must be >= 0.")
        need(0.0 <= self.human_proportion <= 1.0, "human_proportion", "must lie in [0, 1].")
        need(self.envs_per_runner >= 1, "envs_per_runner", "must be >= 1.")
        need(self.capacity >= self.seq_len + self.steps_per_rollout, "capacity",
             "each slot must hold seq_len + steps_per_rollout = "
             f"{self.seq_len + self.steps_per_rollout} rows.")
        need(self.replay_ratio > 0, "replay_ratio",
             "must be > 0 on Ray (the replay service grants gradient steps per policy step).")
        need(self.max_updates is None or self.max_updates >= 0, "max_updates", "must be >= 0.")
        need(self.runner_groups is None or len(self.runner_groups) == self.num_runners,
             "runner_groups", f"needs one group name per agent runner ({self.num_runners}).")
        need(self.checkpoint_every_updates >= 0, "checkpoint_every_updates", "must be >= 0 (0: never).")
        need(self.checkpoint_every_updates == 0 or self.checkpoint_dir is not None,
             "checkpoint_every_updates",
             "needs checkpoint_dir.")
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
