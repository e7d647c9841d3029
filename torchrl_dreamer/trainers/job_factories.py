"""``GameBoyDreamer``: picklable factories of a Game Boy run for a hand-built Ray job.

:func:`~torchrl_dreamer.distributed.run_ray_training` and
:class:`~torchrl_dreamer.distributed.RayDreamerTrainer` take an env factory, a policy factory and
a learner factory; these build each from the one composition root
(:class:`~torchrl_dreamer.trainers.RunFactories`), so a custom Ray job trains the same
networks and losses as ``python -m torchrl_dreamer.train``. They live with the factories (the
trainers' layer) and go to ``distributed`` as arguments: ``distributed`` never imports the
trainers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torchrl_dreamer.trainers.builder import RunFactories, make_env
from torchrl_dreamer.trainers.config import TrainConfig

__all__ = ["GameBoyDreamer"]


@dataclasses.dataclass
class GameBoyDreamer:
    """Factories for a hand-built Ray job: ``GameBoyEnv(task)`` runners, ``DreamerPlayer``
    policies and a ``DreamerV3Learner``, each built by the one composition root
    (:class:`~torchrl_dreamer.trainers.RunFactories` of :meth:`train_config`); picklable, so Ray
    ships them to the runner actors. ``device`` places the envs, players and learner (e.g.
    ``"cuda"``; runners then need a GPU each). ``loss_preset`` names a loss and learner preset
    (its discount and entropy bonus, not the task's training defaults). A
    :class:`~torchrl_dreamer.trainers.TrainConfig` run with ``backend="ray"`` needs none of this:
    ``python -m torchrl_dreamer.train --backend ray``.

    Example:
        >>> f = GameBoyDreamer("maze", num_envs=4, preset="tiny")
        >>> f.action_dim()  # the maze's d-pad: no-op + 4 directions
        5
        >>> f.train_config().loss_preset, f.train_config().num_envs
        ('sheeprl', 4)
    """

    task: str = "maze"
    num_envs: int = 4
    preset: str = "tiny"
    env_kwargs: dict[str, Any] | None = None
    device: str = "cpu"
    loss_preset: str = "sheeprl"

    def train_config(self) -> TrainConfig:
        """The :class:`~torchrl_dreamer.trainers.TrainConfig` these factories build from (built
        on use, so a ``"cuda"`` job can be described on a machine without a GPU)."""
        from torchrl_dreamer.objectives import LOSS_PRESETS

        preset = LOSS_PRESETS[self.loss_preset]
        return TrainConfig(task=self.task, num_envs=self.num_envs, preset=self.preset,
                           device=self.device, loss_preset=self.loss_preset,
                           gamma=preset.gamma, entropy_coef=preset.entropy_coef, progress=False)

    def _factories(self) -> Any:
        """The run's factories, with the observation kinds and action count of a one-console
        probe of the env (so a task's extra observations, e.g. RAM vectors, get encoders)."""
        cfg = self.train_config()
        probe = make_env(cfg, num_envs=1, **(self.env_kwargs or {}))
        try:
            return RunFactories(cfg).with_env(probe)
        finally:
            probe.close()

    def action_dim(self) -> int:
        """Actions of the task's default action set."""
        from torchrl_dreamer.envs import make_action_set, make_task

        return make_action_set(make_task(self.task).default_action_set).n

    def env(self) -> Any:
        """A ``GameBoyEnv`` with ``num_envs`` consoles (``env_kwargs`` override the run's)."""
        return make_env(self.train_config(), **(self.env_kwargs or {}))

    def policy(self, env: Any) -> Any:
        """A ``DreamerPlayer`` for ``env`` (its weights come from the learner's publications)."""
        return RunFactories(self.train_config()).policy(env)

    def learner(self) -> Any:
        """A ``DreamerV3Learner`` with the same architecture."""
        f = self._factories()
        return f.learner(*f.networks())
