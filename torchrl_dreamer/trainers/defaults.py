"""The default run length, by the name the trainers and the Ray job have used for it.

The setting itself, with its default and docstring, is ``run.total_steps``
(:class:`~torchrl_dreamer.collectors.settings.RunSection`); this name only reads it.

Example:
    >>> TOTAL_STEPS
    50000
"""

from __future__ import annotations

from torchrl_dreamer.collectors.settings import RunSection

__all__ = ["TOTAL_STEPS"]

TOTAL_STEPS: int = RunSection.total_steps
"""``run.total_steps``' default: policy steps (one action of one env) a run collects."""
