"""torchrl_dreamer.distributed: the Dreamer data plane on Ray (runners, replay service, weights).

- :class:`ReplayService` -- per-runner ``TimeMajorStorage`` slots (memmap-backed), chunk commits,
  per-group sampling weights, rate-limited grants (``RateLimiter``), checkpoint/restore.
- :class:`EnvRunner` -- a TorchRL env + player stepping chunks into the service.
- :class:`WeightStore`, :func:`pack_weights` -- versioned weight publishing (fetch only if new).
- :class:`ControlModeRouter` -- agent vs human-in-the-loop data in two services, mixed sampling.
- :func:`load_demonstration_rows` -- recorded demonstrations, checked against the run, as rows
  of the human service's static slot (``--backend ray --demos``).
- :class:`RunnerPool` -- starts runners, restarts dead ones.
- :func:`run_ray_training`, :class:`RayDreamerTrainer`, :class:`RayTrainingConfig` -- the job
  (its factories, e.g. :class:`~torchrl_dreamer.trainers.GameBoyDreamer`, come as arguments).
- :class:`RayCollector`, :func:`ray_config`, :class:`RayCollection` -- a ``TrainConfig`` run on
  Ray through :class:`~torchrl_dreamer.trainers.DreamerTrainer` (``--backend ray``; importing
  this package registers :class:`RayCollection` as the ``"ray"`` backend of
  :func:`~torchrl_dreamer.trainers.build_run`, which composes the run from its own factories).

This package imports the collectors' and the data layer's pieces, never the trainers (the
factories of a run come in as arguments).
- :func:`init_ray` -- a local cluster bound to 127.0.0.1 (addresses are opt-in).

Everything but :func:`init_ray` also works in-process without Ray installed (``use_ray=False``).
See ``docs/ray.md``.
"""

from torchrl_dreamer.distributed.cluster import call, init_ray, ray_available, remote_class
from torchrl_dreamer.distributed.collector import RayCollection, RayCollector
from torchrl_dreamer.distributed.config import RayTrainingConfig
from torchrl_dreamer.distributed.demonstrations import (
    DEMO_SLOT,
    demonstration_rows,
    load_demonstration_rows,
    runner_schema,
)
from torchrl_dreamer.distributed.pool import RunnerPool, RunnerRestartLimit
from torchrl_dreamer.distributed.replay_service import ReplayService, SlotInfo, batch_from_numpy
from torchrl_dreamer.distributed.routing import AGENT, HUMAN, ControlModeRouter
from torchrl_dreamer.distributed.runner import EnvRunner
from torchrl_dreamer.distributed.training import (
    RayDreamerTrainer,
    TrainingTimeout,
    ray_config,
    run_ray_training,
)
from torchrl_dreamer.distributed.weights import (
    WeightPacket,
    WeightStore,
    apply_weights,
    extract_weights,
    pack_weights,
    unpack_weights,
)

__all__ = [
    "AGENT",
    "DEMO_SLOT",
    "HUMAN",
    "ControlModeRouter",
    "EnvRunner",
    "RayCollection",
    "RayCollector",
    "RayDreamerTrainer",
    "RayTrainingConfig",
    "ReplayService",
    "RunnerPool",
    "RunnerRestartLimit",
    "SlotInfo",
    "TrainingTimeout",
    "WeightPacket",
    "WeightStore",
    "apply_weights",
    "batch_from_numpy",
    "call",
    "demonstration_rows",
    "extract_weights",
    "init_ray",
    "load_demonstration_rows",
    "pack_weights",
    "ray_available",
    "ray_config",
    "remote_class",
    "run_ray_training",
    "runner_schema",
    "unpack_weights",
]
