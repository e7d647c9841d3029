"""What the collector needs from its collaborators, as :class:`typing.Protocol` types.

:class:`~torchrl_dreamer.collectors.AsyncDreamerCollector` works with any replay storage,
sampler, player and learner that have these methods; the library's own are
:class:`~torchrl_dreamer.data.TimeMajorStorage`,
:class:`~torchrl_dreamer.data.ChronologicalSliceSampler`,
:class:`~torchrl_dreamer.modules.DreamerPlayer` and
:class:`~torchrl_dreamer.objectives.DreamerV3Learner`. The checks are structural
(``isinstance`` against a ``runtime_checkable`` protocol looks at the names only), so the
collector still validates what the values mean (margins, batch shape, devices).

Example:
    >>> from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema
    >>> isinstance(TimeMajorStorage(64, 2, spec=dreamer_schema()), ReplayStorage)
    True
    >>> isinstance(ChronologicalSliceSampler(slice_len=8), SequenceSampler)
    True
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
from tensordict import TensorDictBase

__all__ = ["Autocasting", "Checkpointable", "DreamerParts", "FastStepEnv", "HasOptimizers",
           "Learner", "LoadsWeights", "Parametrised", "RecurrentPolicy", "ReplayStorage",
           "Seedable", "SequenceSampler"]


@runtime_checkable
class ReplayStorage(Protocol):
    """A time-major ring the actor writes rows into and commits to the learner."""

    capacity: int
    safety_margin: int
    auto_commit: bool

    def write(self, step: Any) -> int: ...

    def commit(self, t: int) -> None: ...

    @property
    def committed_t(self) -> int: ...

    def sampleable_range(self) -> tuple[int, int]: ...


@runtime_checkable
class SequenceSampler(Protocol):
    """Draws ``batch_size`` sequences of ``slice_len`` committed rows."""

    def sample(self, storage: Any, batch_size: int) -> Any: ...

    def resolve(self, batch_size: int) -> tuple[int, int]: ...


@runtime_checkable
class Learner(Protocol):
    """Takes one gradient step per replay sample and returns detached scalar metrics."""

    def update(self, batch: TensorDictBase) -> TensorDictBase: ...


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


@runtime_checkable
class LoadsWeights(Protocol):
    """A player that copies a world model's and an actor's weights into its own."""

    def load_from(self, world_model: torch.nn.Module, actor: torch.nn.Module) -> Any: ...


@runtime_checkable
class Autocasting(Protocol):
    """A learner that applies its own autocast (``None``: full precision)."""

    autocast_dtype: torch.dtype | None


@runtime_checkable
class FastStepEnv(Protocol):
    """An env with a ``fast_step(action) -> next observation`` path (no TensorDict round trip;
    :meth:`torchrl_dreamer.envs.GameBoyEnv.fast_step`)."""

    def fast_step(self, action: torch.Tensor) -> Any: ...
