"""Configuration of the asynchronous Dreamer collector, validated on construction.

A plain dataclass (CleanRL style: one place to read every knob) rather than a Hydra config, so it
can be built from a CLI, a YAML file or a test with the same validation. A training run derives
it from its :class:`~torchrl_dreamer.trainers.TrainConfig` (``collector_config()``). The settings
it shares with the run (``seq_len``, ``batch_size``, ``replay_ratio``, the ``collector`` section,
...) are not restated here: :func:`~torchrl_dreamer.collectors.settings.takes_settings` gives it
those fields, with their one default and docstring (:mod:`torchrl_dreamer.collectors.settings`).

Units: ``steps_per_rollout``, ``commit_stride``, ``seq_len``, ``min_ready_steps`` and
``safety_margin`` count *env steps* (replay rows, one per vectorised step); ``learning_starts``
counts *policy steps* (one action of one env, sheeprl's unit); ``pretrain_steps`` and
``max_learner_steps_per_tick`` count gradient steps; ``replay_ratio`` is gradient steps per policy
step.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any

import torch

from torchrl_dreamer.collectors.defaults import invalid, require
from torchrl_dreamer.collectors.settings import (
    Backend,
    Precision,
    ReplaySection,
    check_settings,
    section_settings,
    takes_settings,
)

__all__ = ["AsyncCollectorConfig", "Backend", "Precision", "precision_dtype"]


_PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def precision_dtype(precision: Precision) -> torch.dtype | None:
    """The learner's autocast dtype of a ``precision`` (``None`` for ``"fp32"``: no autocast).

    Example:
        >>> precision_dtype("bf16"), precision_dtype("fp32")
        (torch.bfloat16, None)
    """
    return None if precision == "fp32" else _PRECISION_DTYPES[precision]


@dataclasses.dataclass
@takes_settings(*section_settings("collector"), "seq_len", "batch_size", "replay_ratio",
                "learning_starts", "precision", "device", "seed")
class AsyncCollectorConfig:
    """Every knob of :class:`~torchrl_dreamer.collectors.AsyncDreamerCollector`.

    Rules checked in ``__post_init__`` (a ``ValueError`` names the field and why): each run
    setting's own rule, the one every config holding it applies
    (:func:`~torchrl_dreamer.collectors.settings.check_settings`: ``steps_per_rollout >= 1``,
    ``replay_ratio >= 0``, ``timeout_s > 0``, ``seq_len >= 2``, ``batch_size >= 1``, ...), then
    its own:
    ``min_ready_steps >= seq_len``, ``safety_margin >= seq_len``, a ``backend`` of the local
    loop (not ``ray``) that fits ``device``; a ``UserWarning`` when
    ``commit_stride > seq_len / 2`` (the learner then sees fresh data in coarse bursts).

    Fields: the run settings of :attr:`run_settings` (documented in their sections of
    :mod:`torchrl_dreamer.collectors.settings`): the whole ``collector`` section (``backend``,
    ``steps_per_rollout``, ``commit_stride``, ...; any ``backend`` but ``ray``, which collects on
    Ray actors), ``replay``'s ``seq_len``, ``batch_size``, ``replay_ratio`` and
    ``learning_starts``, ``learner.precision``, ``run.device`` and ``run.seed``; then its own:

    Args:
        min_ready_steps: committed env steps required before the first sample (a run sets it
            to its ``seq_len``).
        safety_margin: rows kept between the newest committed row and what the learner may
            sample (a run sets it to its ``seq_len``).
    Examples:
        >>> cfg = AsyncCollectorConfig(seq_len=16, min_ready_steps=16, safety_margin=16,
        ...                            commit_stride=8)
        >>> cfg.backend
        'reference'
    """

    min_ready_steps: int = ReplaySection.seq_len
    safety_margin: int = ReplaySection.seq_len

    def __post_init__(self) -> None:
        need = functools.partial(require, "AsyncCollectorConfig", self)

        check_settings("AsyncCollectorConfig", self)  # each taken setting's one rule
        for name in ("min_ready_steps", "safety_margin"):
            v = getattr(self, name)
            need(isinstance(v, int) and not isinstance(v, bool), name, "must be an integer.")
        need(self.min_ready_steps >= self.seq_len, "min_ready_steps",
             f"must be >= seq_len={self.seq_len}: the learner cannot sample a sequence before "
             "that many steps are committed.")
        need(self.safety_margin >= self.seq_len, "safety_margin",
             f"must be >= seq_len={self.seq_len} so a sampled sequence never reaches rows the "
             "actor may be writing.")
        need(self.backend in ("reference", "threaded", "cuda", "cuda-twin"), "backend",
             "must be 'reference', 'threaded', 'cuda' or 'cuda-twin' (a run with backend='ray' "
             "collects on Ray actors, torchrl_dreamer.distributed).")
        try:
            dev = torch.device(self.device)
        except (RuntimeError, TypeError) as err:
            raise invalid("AsyncCollectorConfig", "device", self.device, str(err)) from err
        need(self.backend != "cuda" or dev.type == "cuda", "device",
             "backend='cuda' needs a CUDA device (use backend='threaded', or 'cuda-twin' to "
             "check the CUDA choreography, on CPU).")
        need(self.backend != "cuda-twin" or dev.type == "cpu", "device",
             "backend='cuda-twin' models the CUDA streams on the host: it needs device='cpu' "
             "(use backend='cuda' on a GPU).")
        if self.commit_stride > self.seq_len / 2:
            warnings.warn(
                f"AsyncCollectorConfig.commit_stride={self.commit_stride} > seq_len/2="
                f"{self.seq_len / 2}: the learner sees new rows in coarse bursts and fresh "
                "sequences are sampled late; prefer commit_stride <= seq_len // 2.",
                UserWarning,
                stacklevel=3,
            )

    def check_sampler_shape(self, sampler: Any) -> None:
        """Raise ``ValueError`` unless ``sampler`` draws ``[seq_len, batch_size]`` batches.

        The collector asks a sampler for ``batch_size * seq_len`` transitions (TorchRL's unit), and
        the sampler fixes one side of the batch: ``slice_len`` (the steps of a sequence, as
        :class:`~torchrl_dreamer.data.ChronologicalSliceSampler` is built for the collector) must
        equal ``seq_len``, or ``num_slices`` (the sequences of a batch) must equal ``batch_size``.

        Example:
            >>> from torchrl_dreamer.data import ChronologicalSliceSampler
            >>> cfg = AsyncCollectorConfig()
            >>> cfg.check_sampler_shape(ChronologicalSliceSampler(slice_len=cfg.seq_len))
            >>> cfg.check_sampler_shape(ChronologicalSliceSampler(slice_len=64))
            Traceback (most recent call last):
            ...
            ValueError: the sampler draws sequences of slice_len=64 but AsyncCollectorConfig.seq_len=32; build the sampler with slice_len=32 (ChronologicalSliceSampler(slice_len=32, generator=...)).
        """
        slice_len = getattr(sampler, "slice_len", None)
        num_slices = getattr(sampler, "num_slices", None)
        fix = (f"build the sampler with slice_len={self.seq_len} (ChronologicalSliceSampler("
               f"slice_len={self.seq_len}, generator=...)).")
        if slice_len is not None and slice_len != self.seq_len:
            raise ValueError(f"the sampler draws sequences of slice_len={slice_len} but "
                             f"AsyncCollectorConfig.seq_len={self.seq_len}; {fix}")
        if slice_len is None and num_slices is not None and num_slices != self.batch_size:
            raise ValueError(f"the sampler draws batches of num_slices={num_slices} sequences but "
                             f"AsyncCollectorConfig.batch_size={self.batch_size}; {fix}")
        if slice_len is None and num_slices is None:
            raise ValueError(f"the sampler {type(sampler).__name__} has neither slice_len nor "
                             f"num_slices, so its batch shape is unknown; {fix}")

    @property
    def autocast_dtype(self) -> torch.dtype:
        """The torch dtype that ``precision`` names."""
        return _PRECISION_DTYPES[self.precision]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for logging hyper-parameters and failure bundles)."""
        d = dataclasses.asdict(self)
        d["device"] = str(self.device)
        return d
