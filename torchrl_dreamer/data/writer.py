"""TimeMajorWriter: a TorchRL ``Writer`` that appends at the TimeMajorStorage head.

Why not ``RoundRobinWriter``: it keeps its own cursor, which drifts from the storage head as soon
as anyone writes the storage directly (the collector does, through ``write``/``obs_slot``), and
``TensorDictRoundRobinWriter`` adds an ``"index"`` key to the data. This writer has no cursor:
the storage counters are the single source of truth.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torchrl.data.replay_buffers.writers import Writer

from torchrl_dreamer.data.schema import step_leaves
from torchrl_dreamer.data.storage import TimeMajorStorage


class TimeMajorWriter(Writer):
    """Appends rows (one env-step of all envs) to a :class:`TimeMajorStorage`.

    ``add(step)`` writes one ``[num_envs]`` step; ``extend(steps)`` writes ``[T, num_envs]`` steps in
    time order (build the buffer with ``dim_extend=0``, or pass collector-style ``[num_envs, T]``
    with the default ``dim_extend=1`` and TorchRL transposes it). ``add`` returns the ring row,
    ``extend`` the written cells as TorchRL's round-robin writer does for ndim-2 storages:
    ``[k * num_envs, 2]`` (ring row, env).

    Example:
        >>> import torch
        >>> from torchrl.data import TensorDictReplayBuffer
        >>> from torchrl_dreamer.data import ChronologicalSliceSampler, dreamer_schema
        >>> from torchrl_dreamer.data.synthetic import SyntheticSteps
        >>> g = torch.Generator().manual_seed(0)
        >>> rb = TensorDictReplayBuffer(
        ...     storage=TimeMajorStorage(1000, 16, spec=dreamer_schema()), writer=TimeMajorWriter(),
        ...     sampler=ChronologicalSliceSampler(slice_len=64, generator=g), batch_size=16 * 64)
        >>> steps = SyntheticSteps(16, torch.Generator().manual_seed(1))
        >>> for _ in range(100):
        ...     _ = rb.add(steps.step())
        >>> rb.sample().shape  # 16 sequences of 64 steps, time-major
        torch.Size([64, 16])
    """

    def register_storage(self, storage: TimeMajorStorage) -> None:
        if not isinstance(storage, TimeMajorStorage):
            raise TypeError(
                f"TimeMajorWriter needs a TimeMajorStorage, got {type(storage).__name__}."
            )
        super().register_storage(storage)

    def add(self, data: Any) -> int:
        """Writes one step; returns its ring row (an int, as TorchRL's ``add`` does)."""
        return self._storage.write(data) % self._storage.capacity

    def extend(self, data: Sequence) -> torch.Tensor:
        """Writes ``len(data)`` steps in order; returns their ``[k * num_envs, 2]`` cells."""
        if isinstance(data, Mapping):  # plain dict of [T, num_envs, ...] tensors
            leaves = step_leaves(data)
            steps = next(iter(leaves.values())).shape[0]
            data = [{k: v[i] for k, v in leaves.items()} for i in range(steps)]
        rows = [self._storage.write(data[i]) % self._storage.capacity for i in range(len(data))]
        return self._replicate_index(torch.as_tensor(rows, dtype=torch.long))

    def _empty(self, empty_write_count: bool = True) -> None:
        return

    def state_dict(self) -> dict[str, Any]:
        """Stateless: the storage owns the counters."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Stateless: nothing to restore."""
        return

    def dumps(self, path: str | os.PathLike) -> None:
        """Stateless: nothing to write."""
        return

    def loads(self, path: str | os.PathLike) -> None:
        """Stateless: nothing to read."""
        return
