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
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tensordict import TensorDictBase

__all__ = ["Learner", "ReplayStorage", "SequenceSampler"]


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
