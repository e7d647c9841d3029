"""Settings that change over a run: how far a run is, and the value a schedule gives there.

A run ends at ``total_steps`` policy steps or at its time limit, whichever comes first, so its
progress is the larger of the two fractions. :func:`anneal` moves a setting from its start to
its final value geometrically (equal ratios per equal progress: 5e-3 to 5e-4 passes 1.6e-3 half
way), linearly when either end is zero. :class:`~torchrl_dreamer.trainers.Trainer` applies
:attr:`~torchrl_dreamer.trainers.TrainConfig.entropy_final` this way.
"""

from __future__ import annotations

import math

__all__ = ["anneal", "run_progress"]


def run_progress(steps: float, total_steps: float | None, now: float, start: float,
                 deadline: float | None) -> float:
    """How far a run is, in ``[0, 1]``: the larger of ``steps / total_steps`` (``None``: a run
    bounded by time alone) and the share of ``[start, deadline]`` elapsed at ``now``
    (``deadline`` ``None``: no time limit).

    Example:
        >>> run_progress(2500, 10000, now=30.0, start=0.0, deadline=60.0)
        0.5
        >>> run_progress(2500, None, now=15.0, start=0.0, deadline=None)
        0.0
    """
    frac = 0.0
    if total_steps:
        frac = steps / total_steps
    if deadline is not None and deadline > start:
        frac = max(frac, (now - start) / (deadline - start))
    return min(1.0, max(0.0, frac))


def anneal(start: float, final: float, progress: float) -> float:
    """The value at ``progress`` (``[0, 1]``) of a schedule from ``start`` to ``final``:
    geometric when both are positive, linear otherwise.

    Example:
        >>> anneal(5e-3, 5e-4, 0.0), anneal(5e-3, 5e-4, 1.0)
        (0.005, 0.0005)
        >>> round(anneal(5e-3, 5e-4, 0.5), 6)
        0.001581
        >>> anneal(1.0, 0.0, 0.25)
        0.75
    """
    p = min(1.0, max(0.0, float(progress)))
    if p in (0.0, 1.0):  # the ends exactly, not through exp(log(x))
        return float(start if p == 0.0 else final)
    if start > 0.0 and final > 0.0:
        return float(math.exp(math.log(start) + p * (math.log(final) - math.log(start))))
    return float(start + p * (final - start))
