"""torchrl_dreamer.trainers: what ``python -m torchrl_dreamer.train`` composes.

- :class:`TrainConfig` -- every setting of a run as one frozen tree of sections (``env``,
  ``replay``, ``model``, ``loss``, ``learner``, ``collector``, ``ray``, ``run``, ``eval``:
  :mod:`torchrl_dreamer.collectors.settings`), validated (unknown task / preset / device fail
  early with what to use instead).
- :func:`build_run`, :class:`RunFactories`, :class:`RunParts` -- the composition root: env,
  replay, networks, learner, player, collector (local, or on Ray with ``backend="ray"``).
- :class:`GameBoyDreamer` -- picklable env / policy / learner factories of a Game Boy run for a
  hand-built Ray job (:func:`~torchrl_dreamer.distributed.run_ray_training`).
- :class:`DreamerTrainer` -- progress bar, CSV/TensorBoard logs, checkpoints, ``--resume``; it
  drives any :class:`RunCollector`.
- :func:`evaluate` -- greedy/sampled episodes, success rate and a GIF of the agent playing.
- :func:`save_checkpoint`, :func:`load_checkpoint` (``weights_only=True``), :class:`CheckpointError`.
- :func:`write_gif` -- dependency-free animated GIF writer; :class:`EpisodeTracker`.
- :class:`BestPolicy` -- the weights of the best window of training episodes
  (``eval_policy="best"``).
- :func:`open_loop_frames`, :func:`write_video`, :func:`world_model_video_checkpoint` -- the
  world model's open-loop report (real | reconstruction | imagination) as MP4.
"""

from torchrl_dreamer.trainers.best_policy import BestPolicy
from torchrl_dreamer.trainers.builder import (
    RunFactories,
    RunParts,
    build_run,
    make_env,
    obs_spec_of,
)
from torchrl_dreamer.trainers.checkpoint import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from torchrl_dreamer.trainers.config import ConfigError, TrainConfig, task_train_defaults
from torchrl_dreamer.trainers.episodes import EpisodeTracker
from torchrl_dreamer.trainers.evaluate import (
    EvalResult,
    evaluate,
    evaluate_checkpoint,
    world_model_video_checkpoint,
)
from torchrl_dreamer.trainers.gif import write_gif
from torchrl_dreamer.trainers.job_factories import GameBoyDreamer
from torchrl_dreamer.trainers.loggers import MultiLogger, make_logger
from torchrl_dreamer.trainers.trainer import DreamerTrainer, RunCollector
from torchrl_dreamer.trainers.video import open_loop_frames, write_video

__all__ = [
    "BestPolicy",
    "CheckpointError",
    "ConfigError",
    "DreamerTrainer",
    "EpisodeTracker",
    "EvalResult",
    "GameBoyDreamer",
    "MultiLogger",
    "RunCollector",
    "RunFactories",
    "RunParts",
    "TrainConfig",
    "build_run",
    "evaluate",
    "evaluate_checkpoint",
    "latest_checkpoint",
    "load_checkpoint",
    "make_env",
    "make_logger",
    "obs_spec_of",
    "save_checkpoint",
    "task_train_defaults",
    "open_loop_frames",
    "world_model_video_checkpoint",
    "write_gif",
    "write_video",
]
