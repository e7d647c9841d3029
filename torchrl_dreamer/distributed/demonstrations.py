"""Human demonstrations in a Ray run: recorded files as a static slot of the human replay service.

The local path (:mod:`torchrl_dreamer.data.demonstrations`) keeps demonstrations in their own
one-column replay and draws ``round(share * B)`` of every batch from it. A Ray run does the
same with its pieces: the files are read and checked by the same loader
(:func:`~torchrl_dreamer.data.demonstrations.load_demonstrations`: ROM, action set, frame skip,
press length, task), turned into rows of the runners' format by :func:`demonstration_rows`,
and loaded into the human :class:`~torchrl_dreamer.distributed.ReplayService` as the static
slot :data:`DEMO_SLOT` (:meth:`~torchrl_dreamer.distributed.ReplayService.load_static`: never
evicted, no policy steps counted). The
:class:`~torchrl_dreamer.distributed.ControlModeRouter` (``exact=True``) then draws exactly
``demo_sequences(share, B)`` of each batch from that service, as the local sampler does.

``--backend ray --demos FILES`` does all of this (:func:`~torchrl_dreamer.distributed.build_ray_run`);
a hand-built job passes :func:`load_demonstration_rows` to
:class:`~torchrl_dreamer.distributed.RayDreamerTrainer` (``demonstrations=``) with
``RayTrainingConfig(human_proportion=share)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from tensordict import TensorDict

from torchrl_dreamer.collectors.env_driver import EnvDriver
from torchrl_dreamer.data import TimeMajorStorage
from torchrl_dreamer.data.demonstrations import (
    Demonstration,
    demonstration_storage,
    load_demonstrations,
)
from torchrl_dreamer.data.schema import FieldSpec, Key

__all__ = ["DEMO_SLOT", "demonstration_rows", "load_demonstration_rows", "runner_schema"]

DEMO_SLOT = "demonstrations"
"""Name (and group) of the demonstrations' static slot in the human replay service."""


def runner_schema(env: Any) -> dict[Key, FieldSpec]:
    """The fields of the rows an :class:`~torchrl_dreamer.distributed.EnvRunner` sends for
    ``env`` (per-env shape and dtype).

    A runner's ring takes its schema from its first row, written by the local collector's
    :class:`~torchrl_dreamer.collectors.EnvDriver`; this writes one such row (a random action)
    into a scratch ring and reads the schema back, so it is the runners' format by
    construction. It steps ``env`` once: pass a probe env, not one in use.
    """
    scratch = TimeMajorStorage(2, int(env.batch_size[0]), auto_commit=True,
                               device=getattr(env, "device", None) or "cpu")
    gen = torch.Generator(device=scratch.device).manual_seed(0)
    driver = EnvDriver(env, scratch, None, gen, zero_copy=False)
    driver.reset()
    driver.step(random=True)
    return scratch.schema


def demonstration_rows(demos: Sequence[Demonstration],
                       schema: dict[Key, FieldSpec]) -> TensorDict:
    """The conversion of demonstrations to the Ray replay's row format: ``[L, 1]`` rows.

    The rows are those of the local path's demonstration replay
    (:func:`~torchrl_dreamer.data.demonstrations.demonstration_storage` with ``schema``): the
    files end to end in one env column, episode ids renumbered to run on, actions as the
    schema stores them (index or one-hot). ``schema`` is the runners' (:func:`runner_schema`),
    so sampled demonstration sequences stack with agent ones. It differs from the local
    replay's in having no ``control_mode`` (the service drops it; the router tells the modes
    apart by service) and no ``success`` (runners do not send it); a schema field that
    demonstrations do not record raises
    :class:`~torchrl_dreamer.data.demonstrations.DemonstrationError`, as locally. The rows are
    on the CPU, where the replay service keeps them.

    Example:
        >>> from torchrl_dreamer.data import dreamer_schema
        >>> demo = Demonstration("ab" * 32, "maze", ("NOOP", "UP"), 24, 8,
        ...     pixels=torch.zeros(4, 1, 72, 20, dtype=torch.uint8),
        ...     action=torch.tensor([1, 1, 0, 0]), reward=torch.zeros(4),
        ...     terminated=torch.zeros(4, dtype=torch.bool), truncated=torch.zeros(4, dtype=torch.bool),
        ...     is_first=torch.tensor([True, False, False, False]),
        ...     episode_id=torch.zeros(4, dtype=torch.int32))
        >>> rows = demonstration_rows([demo, demo], dreamer_schema())
        >>> rows.batch_size, rows["episode_id"][:, 0].tolist()
        (torch.Size([8, 1]), [0, 0, 0, 0, 1, 1, 1, 1])
    """
    storage = demonstration_storage(demos, schema, device="cpu")
    return TensorDict(storage.fields, batch_size=[storage.capacity, storage.num_envs])


def load_demonstration_rows(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    env: Any,
    *,
    check_task: bool = True,
) -> TensorDict:
    """Read demonstration files, check them against ``env``'s run and convert them.

    :func:`~torchrl_dreamer.data.demonstrations.load_demonstrations` (``env``'s
    :class:`~torchrl_dreamer.data.demonstrations.RunSignature`; a file for another ROM, action
    set, frame skip, press length or task raises its
    :class:`~torchrl_dreamer.data.demonstrations.DemonstrationMismatchError`), then
    :func:`demonstration_rows` in ``env``'s :func:`runner_schema`. ``env`` is a probe built like
    the runners' envs (any ``num_envs``); it is stepped once.
    """
    demos = load_demonstrations(paths, env=env, check_task=check_task)
    return demonstration_rows(demos, runner_schema(env))
