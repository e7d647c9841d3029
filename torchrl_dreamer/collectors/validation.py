"""Validation of the collector's inputs against its config, before anything runs.

:func:`check_inputs` is what :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector` calls
when it is built: the replay storage (a :class:`~.protocols.ReplayStorage` the collector commits
itself, with room for a sequence beside the rows the actor writes ahead), the sampler (seeded,
one ``[seq_len, batch_size]`` batch per gradient step) and the learner (an ``update(batch)``,
its parameters on ``config.device``, its autocast matching ``config.precision``). Each error
says what to build instead. :func:`writer_margin` is the rule the storage check and the
concurrent backends share: how many of the oldest ring rows stay out of sampling.
"""

from __future__ import annotations

from typing import Any

import torch

from torchrl_dreamer.collectors.config import AsyncCollectorConfig
from torchrl_dreamer.collectors.protocols import (
    Autocasting,
    Learner,
    ReplayStorage,
    SequenceSampler,
)

__all__ = ["check_inputs", "check_learner", "check_sampler", "check_storage", "writer_margin"]


def check_inputs(storage: Any, sampler: Any, learner: Any, cfg: AsyncCollectorConfig) -> None:
    """Raise ``TypeError`` / ``ValueError`` naming the fix if the storage, sampler or learner
    cannot run under ``cfg`` (checked in that order)."""
    check_storage(storage, cfg)
    check_sampler(sampler, cfg)
    if not isinstance(learner, Learner):
        raise TypeError(
            f"learner {type(learner).__name__} has no update(batch) method; pass a "
            "DreamerV3Learner or an object with update(batch) -> metrics."
        )
    check_learner(learner, cfg)


def check_storage(storage: Any, cfg: AsyncCollectorConfig) -> None:
    """A :class:`~.protocols.ReplayStorage` the collector commits (``auto_commit=False``), with
    ``cfg``'s safety margin and room for a sequence beside the writer margin."""
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
    margin = max(storage.safety_margin, writer_margin(cfg))
    need = margin + cfg.seq_len + cfg.commit_stride
    if storage.capacity < need:
        raise ValueError(
            f"storage.capacity={storage.capacity} is too small: it must hold safety_margin + "
            f"seq_len + commit_stride = {margin} + {cfg.seq_len} + {cfg.commit_stride} = "
            f"{need} rows so a full sequence stays sampleable while the actor writes ahead "
            "of its last commit and over the oldest rows."
        )


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


def check_sampler(sampler: Any, cfg: AsyncCollectorConfig) -> None:
    """A seeded :class:`~.protocols.SequenceSampler` giving one ``batch_size x seq_len`` batch."""
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
    cfg.check_sampler_shape(sampler)


def check_learner(learner: Any, cfg: AsyncCollectorConfig) -> None:
    """The learner's parameters on ``cfg.device``'s type, its autocast as ``cfg.precision``."""
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
