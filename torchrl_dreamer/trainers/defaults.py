"""Defaults of the settings the trainers' run config shares with the Ray job's, defined once.

:class:`~torchrl_dreamer.trainers.TrainConfig` and
:class:`~torchrl_dreamer.distributed.RayTrainingConfig` both take ``total_steps``; the collector
has no such setting (it runs for the ``total_frames`` it is given), so its default lives here,
in the trainers' layer, which ``distributed`` imports. The settings the collector shares too are
in :mod:`torchrl_dreamer.collectors.defaults`.

Example:
    >>> TOTAL_STEPS
    50000
"""

from __future__ import annotations

__all__ = ["TOTAL_STEPS"]

TOTAL_STEPS = 50_000
"""Policy steps (one action of one env) a run collects: its length. The maze's target is met
within it (``docs/learning_results.md``: >= 95 % success within 50k steps and 30 minutes on a
2-core CPU; the shipped config's seeds reached 99-100 % at 45-50k)."""
