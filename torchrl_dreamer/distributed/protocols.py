"""What the Ray job needs from the objects it is given, as :class:`typing.Protocol` types.

The runners, the weight exchange and the trainer's checkpoints take any env, policy and learner;
these protocols name the optional capabilities they use when present (``isinstance`` against a
``runtime_checkable`` protocol looks at the names only). The learner itself must satisfy
:class:`~torchrl_dreamer.collectors.protocols.Learner` (``update(batch) -> metrics``).

Example:
    >>> from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
    >>> wm, actor, _ = make_dreamer("tiny", {"pixels": "packed2"}, action_dim=5)
    >>> player = DreamerPlayer(wm, actor, num_envs=2)
    >>> isinstance(player, DreamerParts), isinstance(player, RecurrentPolicy)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["Checkpointable", "DreamerParts", "HasOptimizers", "Parametrised", "RecurrentPolicy",
           "Seedable"]


@runtime_checkable
class DreamerParts(Protocol):
    """Holds a world model and an actor (a learner or a player): their weights are what a
    learner publishes and a runner's policy loads, by ``world_model.*`` / ``actor.*`` names."""

    world_model: torch.nn.Module
    actor: torch.nn.Module


@runtime_checkable
class Checkpointable(Protocol):
    """Has a ``state_dict`` it can be restored from."""

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> Any: ...


@runtime_checkable
class HasOptimizers(Protocol):
    """A learner whose optimizers are checkpointed with it (``{name: optimizer}``)."""

    def optimizers(self) -> Mapping[str, torch.optim.Optimizer]: ...


@runtime_checkable
class Parametrised(Protocol):
    """Has parameters (a policy whose weights a runner can checksum)."""

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...


@runtime_checkable
class Seedable(Protocol):
    """An env whose reset draws can be seeded."""

    def set_seed(self, seed: int) -> Any: ...


@runtime_checkable
class RecurrentPolicy(Protocol):
    """A policy with a recurrent state to reset when it starts acting."""

    def init_states(self) -> Any: ...
