"""The learner's part of a checkpoint: weights, update count and optimizers, saved and restored
the same way by the local trainer's checkpoints and the Ray job's ``learner.pt``.

It lives in the collector layer, below both users
(:mod:`torchrl_dreamer.trainers.checkpoint` and :mod:`torchrl_dreamer.distributed`), and needs
of a learner only the collector's protocols (:class:`~torchrl_dreamer.collectors.protocols.Checkpointable`,
:class:`~torchrl_dreamer.collectors.protocols.HasOptimizers`).
"""

from __future__ import annotations

from typing import Any

import torch

from torchrl_dreamer.collectors.protocols import Checkpointable, HasOptimizers

__all__ = ["learner_state", "load_learner_state"]


def learner_state(learner: Any) -> dict[str, Any]:
    """The learner's part of a checkpoint, each entry where the learner has it: ``learner``
    (its ``state_dict``), ``num_updates`` (the gradient steps it has taken: its world-model
    warm-up goes by them) and ``optimizers`` (``{name: optimizer.state_dict()}``).

    The local trainer's checkpoint and the Ray trainer's ``learner.pt`` both hold this.

    Example:
        >>> lin = torch.nn.Linear(1, 1)
        >>> sorted(learner_state(lin)), sorted(learner_state(object()))
        (['learner'], [])
    """
    out: dict[str, Any] = {}
    if isinstance(learner, Checkpointable):
        out["learner"] = learner.state_dict()
    if isinstance(getattr(learner, "num_updates", None), int):
        out["num_updates"] = int(learner.num_updates)
    if isinstance(learner, HasOptimizers):
        out["optimizers"] = {k: o.state_dict() for k, o in learner.optimizers().items()}
    return out


def load_learner_state(learner: Any, state: dict[str, Any]) -> None:
    """Restore :func:`learner_state` into ``learner``: its weights, its update count and every
    optimizer it has (each must be in ``state["optimizers"]`` when that entry exists). A
    restored slow critic continues its schedule from its saved count (no hard copy again)."""
    from torchrl_dreamer.objectives import SlowCritic

    if "learner" in state and isinstance(learner, Checkpointable):
        learner.load_state_dict(state["learner"])
    if "num_updates" in state:
        learner.num_updates = int(state["num_updates"])
    if isinstance(learner, torch.nn.Module):
        for m in learner.modules():
            if isinstance(m, SlowCritic):
                m.resume_from_count()  # the hard copy happens only at the very first update
    if "optimizers" in state and isinstance(learner, HasOptimizers):
        for k, opt in learner.optimizers().items():
            opt.load_state_dict(state["optimizers"][k])
