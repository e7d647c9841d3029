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

import functools
import inspect
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import torch
from tensordict import TensorDictBase

__all__ = ["Autocasting", "Checkpointable", "DreamerParts", "FastStepEnv", "HasOptimizers",
           "Learner", "LoadsWeights", "Parametrised", "RecurrentPolicy", "ReplayStorage",
           "Seedable", "SequenceSampler"]


class _ByHasattr(type(Protocol)):
    """``isinstance`` against these protocols asks ``hasattr`` for every member, on every Python.

    From Python 3.12 a ``runtime_checkable`` protocol looks members up statically
    (``inspect.getattr_static``), which cannot see what ``nn.Module.__getattr__`` provides: a
    learner's ``world_model`` and ``actor`` submodules. History:
    ``docs/decisions/runtime_protocols.md``."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return all(hasattr(obj, name) for name in _members(cls))


@functools.cache
def _members(cls: type) -> frozenset[str]:
    """The public attributes and annotated data members a protocol class declares (read once
    per class: the collector checks its player at every weight copy)."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base in (Protocol, object) or base.__module__ == "typing":
            continue
        names.update(inspect.get_annotations(base))
        names.update(n for n in vars(base) if not n.startswith("_"))
    return frozenset(names)


@runtime_checkable
class ReplayStorage(Protocol, metaclass=_ByHasattr):
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
class SequenceSampler(Protocol, metaclass=_ByHasattr):
    """Draws ``batch_size`` sequences of ``slice_len`` committed rows."""

    def sample(self, storage: Any, batch_size: int) -> Any: ...

    def resolve(self, batch_size: int) -> tuple[int, int]: ...


@runtime_checkable
class Learner(Protocol, metaclass=_ByHasattr):
    """Takes one gradient step per replay sample and returns detached scalar metrics."""

    def update(self, batch: TensorDictBase) -> TensorDictBase: ...


@runtime_checkable
class DreamerParts(Protocol, metaclass=_ByHasattr):
    """Holds a world model and an actor (a learner or a player): their weights are what a
    learner publishes and a runner's policy loads, by ``world_model.*`` / ``actor.*`` names."""

    world_model: torch.nn.Module
    actor: torch.nn.Module


@runtime_checkable
class Checkpointable(Protocol, metaclass=_ByHasattr):
    """Has a ``state_dict`` it can be restored from."""

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> Any: ...


@runtime_checkable
class HasOptimizers(Protocol, metaclass=_ByHasattr):
    """A learner whose optimizers are checkpointed with it (``{name: optimizer}``)."""

    def optimizers(self) -> Mapping[str, torch.optim.Optimizer]: ...


@runtime_checkable
class Parametrised(Protocol, metaclass=_ByHasattr):
    """Has parameters (a policy whose weights a runner can checksum)."""

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...


@runtime_checkable
class Seedable(Protocol, metaclass=_ByHasattr):
    """An env whose reset draws can be seeded."""

    def set_seed(self, seed: int) -> Any: ...


@runtime_checkable
class RecurrentPolicy(Protocol, metaclass=_ByHasattr):
    """A policy with a recurrent state to reset when it starts acting."""

    def init_states(self) -> Any: ...


@runtime_checkable
class LoadsWeights(Protocol, metaclass=_ByHasattr):
    """A player that copies a world model's and an actor's weights into its own."""

    def load_from(self, world_model: torch.nn.Module, actor: torch.nn.Module) -> Any: ...


@runtime_checkable
class Autocasting(Protocol, metaclass=_ByHasattr):
    """A learner that applies its own autocast (``None``: full precision)."""

    autocast_dtype: torch.dtype | None


@runtime_checkable
class FastStepEnv(Protocol, metaclass=_ByHasattr):
    """An env with a ``fast_step(action) -> next observation`` path (no TensorDict round trip;
    :meth:`torchrl_dreamer.envs.GameBoyEnv.fast_step`)."""

    def fast_step(self, action: torch.Tensor) -> Any: ...
