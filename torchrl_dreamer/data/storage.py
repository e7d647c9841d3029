"""TimeMajorStorage: a ``[capacity, num_envs, ...]`` ring of env steps for Dreamer replay.

Why our own storage rather than ``LazyTensorStorage(ndim=2)``: TorchRL's storage is written
through ``ReplayBuffer.extend`` with tensor indices (~140-210 us of bookkeeping per env-step on
CPU, and tensor-index writes get pathologically slow with several OpenMP threads), it has no
notion of rows that are written but not yet safe to read (async actor/learner), and its samplers
scan the whole storage per sample. Here one env-step for all envs is written by integer row
(``row.copy_()`` per leaf), rows become sampleable only once committed, and the sampler
(:class:`~torchrl_dreamer.data.ChronologicalSliceSampler`) computes valid starts arithmetically.
It still implements TorchRL's :class:`~torchrl.data.replay_buffers.Storage` contract (and
subclasses ``TensorStorage`` so TorchRL picks the identity collate and treats it as a tensor
storage), so ``ReplayBuffer`` / ``TensorDictReplayBuffer`` work on top of it; TorchRL's
``RandomSampler`` also works and respects commits.

Time is counted in *absolute steps*: the ``t``-th row ever written has ``t`` (0-based), and lives
in ring row ``t % capacity``. See ``docs/row_alignment.md`` for what a row holds.

This module is the ring itself (allocation, writes, commits, reads, TorchRL's storage contract).
The checks of what rows may hold are in :mod:`torchrl_dreamer.data.invariants`; checkpoints,
``state_dict`` and pickling in :mod:`torchrl_dreamer.data.persistence` (a mixin the class
inherits, so its methods stay on the storage).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from tensordict import MemoryMappedTensor, TensorDict, TensorDictBase
from torchrl.data.replay_buffers.storages import Storage, TensorStorage

from torchrl_dreamer.data.invariants import (
    ReplayInvariantError,
    check_replay_invariants,
    check_span,
)
from torchrl_dreamer.data.persistence import RingPersistence, key_name
from torchrl_dreamer.data.schema import (
    FieldSpec,
    Key,
    normalize_schema,
    schema_from_step,
    step_leaves,
)

__all__ = ["ReplayInvariantError", "TimeMajorStorage", "ring_rows"]


def ring_rows(capacity_steps: int, num_envs: int, seq_len: int, write_ahead: int) -> int:
    """Rows of a ring that keeps ``capacity_steps`` policy steps of ``num_envs`` envs sampleable.

    ``ceil(capacity_steps / num_envs)`` rows of data, plus ``seq_len`` rows (the safety margin
    keeps that many of the oldest rows out of sampling) and ``write_ahead`` rows (written past
    the last commit: a collector's commit stride, a Ray runner's chunk).

    Example:
        >>> ring_rows(100_000, 16, seq_len=32, write_ahead=8)
        6290
    """
    return -(-int(capacity_steps) // int(num_envs)) + int(seq_len) + int(write_ahead)


class TimeMajorStorage(RingPersistence, TensorStorage):
    """Time-major ring of env steps: every field is ``[capacity, num_envs, *shape]``.

    One *row* is one env-step of all ``num_envs`` envs. Rows are written at the head with
    :meth:`write` (or by filling :meth:`obs_slot` views first), by integer row only.
    ``total_steps`` counts rows ever written; row ``t`` lives at ring row ``t % capacity``.
    A row is sampleable once committed (:meth:`commit`; ``auto_commit=True`` commits on write)
    and while it is more than ``safety_margin`` rows away from being overwritten.

    Args:
        capacity: ring length in steps (rows).
        num_envs: envs per row.

    Keyword Args:
        spec: the fields, as ``{key: FieldSpec}``, ``{key: (shape, dtype)}`` (per-env shapes) or a
            TorchRL ``Composite``; e.g. :func:`~torchrl_dreamer.data.dreamer_schema`. ``None``:
            taken from the first write.
        device: ``"cpu"`` or a CUDA device.
        memmap_dir: back every field by a file ``<memmap_dir>/<key>.memmap`` (sparse until
            written; existing files there are replaced). CPU only. Lets capacities exceed RAM,
            e.g. 1M steps x 16 envs of packed2 frames (23 GB).
        safety_margin: rows right behind the oldest row kept out of sampling because an async
            writer may be overwriting them (use >= rows written while one sample is in flight).
        auto_commit: commit each row as soon as :meth:`write` returns (synchronous use).
        debug_checks: run the invariant checks (:meth:`check_invariants`) on every write.

    Example:
        >>> from torchrl_dreamer.data import dreamer_schema
        >>> from torchrl_dreamer.data.synthetic import SyntheticSteps
        >>> storage = TimeMajorStorage(1000, 16, spec=dreamer_schema())
        >>> steps = SyntheticSteps(16, torch.Generator().manual_seed(0))
        >>> t = storage.write(steps.step())  # one row: every schema key for the 16 envs
        >>> t, storage.total_steps
        (0, 1)
        >>> storage.obs_slot(storage.total_steps).shape  # the next row's pixels, a view
        torch.Size([16, 1, 72, 20])
    """

    ndim = 2
    supports_conditional_update = False

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        *,
        spec: Any = None,
        device: torch.device | str = "cpu",
        memmap_dir: str | os.PathLike | None = None,
        safety_margin: int = 0,
        auto_commit: bool = True,
        debug_checks: bool = False,
    ) -> None:
        capacity, num_envs = int(capacity), int(num_envs)
        if capacity < 1 or num_envs < 1:
            raise ValueError(f"capacity ({capacity}) and num_envs ({num_envs}) must be >= 1.")
        if not 0 <= int(safety_margin) < capacity:
            raise ValueError(f"safety_margin={safety_margin} must be in [0, capacity={capacity}).")
        # Skip TensorStorage.__init__ (its lazy-init/len bookkeeping is replaced by our counters);
        # we subclass it only so TorchRL treats us as a tensor storage (identity collate, samplers).
        Storage.__init__(self, max_size=capacity * num_envs)
        self.capacity = capacity
        self.num_envs = num_envs
        self.device = torch.device(device)
        if memmap_dir is not None and self.device.type != "cpu":
            raise ValueError(
                f"memmap_dir needs device='cpu' (got {self.device}); memory-mapped files live in "
                "host memory. Copy samples to the GPU after sampling instead."
            )
        self.memmap_dir = None if memmap_dir is None else Path(memmap_dir)
        self.safety_margin = int(safety_margin)
        self.auto_commit = bool(auto_commit)
        self.debug_checks = bool(debug_checks)
        self._total = 0
        self._revision_extra = 0
        self._committed = -1
        self._prefilled: set[Key] = set()
        self._schema: dict[Key, FieldSpec] | None = None
        self._leaves: dict[Key, torch.Tensor] = {}
        self._flat: dict[Key, torch.Tensor] = {}
        self._memmaps: dict[Key, MemoryMappedTensor] = {}
        self._storage: TensorDictBase | None = None
        if spec is not None:
            self._init_fields(normalize_schema(spec, num_envs))

    # ------------------------------------------------------------------ allocation
    def _init_fields(self, schema: dict[Key, FieldSpec]) -> None:
        self._schema = dict(schema)
        if self.memmap_dir is not None:
            self.memmap_dir.mkdir(parents=True, exist_ok=True)
        for key, fs in self._schema.items():
            shape = (self.capacity, self.num_envs, *fs.shape)
            if self.memmap_dir is not None:
                mm = MemoryMappedTensor.empty(
                    shape,
                    dtype=fs.dtype,
                    filename=str(self.memmap_dir / f"{key_name(key)}.memmap"),
                    existsok=True,
                )
                self._memmaps[key] = mm
                leaf = mm.as_subclass(torch.Tensor)  # plain tensor view: no subclass dispatch
            else:
                leaf = torch.zeros(shape, dtype=fs.dtype, device=self.device)
            self._leaves[key] = leaf
            self._flat[key] = leaf.view(self.capacity * self.num_envs, *fs.shape)
        td = TensorDict({}, batch_size=[self.capacity, self.num_envs], device=self.device)
        for key, leaf in self._leaves.items():
            td.set(key, leaf)
        self._storage = td
        self._keyset = frozenset(self._schema)

    @property
    def initialized(self) -> bool:
        """Whether the fields exist (given ``spec`` or after the first write)."""
        return self._schema is not None

    @property
    def schema(self) -> dict[Key, FieldSpec]:
        """``{key: FieldSpec}`` of the stored fields (per-env shape and dtype)."""
        self._require_init()
        return dict(self._schema)

    @property
    def fields(self) -> dict[Key, torch.Tensor]:
        """The raw ``[capacity, num_envs, *shape]`` tensors, keyed like the schema (no copy)."""
        self._require_init()
        return dict(self._leaves)

    def bytes_per_transition(self) -> int:
        """Stored bytes per env-step (one env, one row), summed over fields."""
        return sum(fs.nbytes for fs in self.schema.values())

    def _require_init(self) -> None:
        if self._schema is None:
            raise RuntimeError(
                "TimeMajorStorage has no fields yet: pass spec=... (e.g. dreamer_schema()) or "
                "write a first step."
            )

    # ------------------------------------------------------------------ counters
    # TorchRL reads these two to invalidate caches and to find the write pointer; derive them from
    # our counters instead of updating shared mp.Values on every write (several us each).
    @property
    def _last_cursor_index(self) -> int | None:
        return None if self._total == 0 else (self._total - 1) % self.capacity

    @property
    def _mutation_revision(self) -> int:
        return self._revision_extra + self._total

    def _bump_mutation_revision(self) -> None:
        # Strictly above every revision reported so far, even if total_steps goes down.
        self._revision_extra = getattr(self, "_revision_extra", 0) + self._total + 1

    @property
    def total_steps(self) -> int:
        """Rows ever written (absolute step of the next write)."""
        return self._total

    @property
    def head(self) -> int:
        """Ring row the next write goes to (``total_steps % capacity``)."""
        return self._total % self.capacity

    @property
    def size(self) -> int:
        """Rows currently held (``min(total_steps, capacity)``)."""
        return min(self._total, self.capacity)

    @property
    def committed_t(self) -> int:
        """Last committed absolute step (``-1`` when none); rows ``t <= committed_t`` may be sampled."""
        return self._committed

    def commit(self, t: int) -> None:
        """Marks every row up to absolute step ``t`` (inclusive) as safe to sample.

        Commits only move forward: an older ``t`` (e.g. a late stream event) is a no-op.
        """
        t = int(t)
        if t >= self._total:
            raise ValueError(
                f"cannot commit row t={t}: only {self._total} rows have been written "
                f"(last t={self._total - 1})."
            )
        if t > self._committed:
            self._committed = t

    def sampleable_range(self) -> tuple[int, int]:
        """Absolute steps ``[lo, hi)`` a sequence may use.

        ``hi`` stops at the last committed row; ``lo`` skips rows overwritten or about to be
        (``safety_margin``). ``hi - lo <= capacity``, so a window inside never crosses the seam.
        """
        hi = min(self._committed + 1, self._total)
        # A pending obs_slot write at the head already overwrites the oldest held row.
        margin = max(self.safety_margin, 1 if self._prefilled else 0)
        lo = max(0, self._total - self.capacity + margin)
        return lo, max(lo, hi)

    def row_of(self, t: int) -> int:
        """Ring row of absolute step ``t`` (must be held, or the next row to write)."""
        t = int(t)
        if not self._total - self.size <= t <= self._total:
            raise IndexError(
                f"step t={t} is not held: rows {self._total - self.size}..{self._total - 1} are "
                f"stored and t={self._total} is the next to write."
            )
        return t % self.capacity

    def chronological_rows(self) -> torch.Tensor:
        """Ring rows of the held steps, oldest to newest (int64, on the storage device)."""
        return (
            torch.arange(self._total - self.size, self._total, device=self.device) % self.capacity
        )

    # ------------------------------------------------------------------ writes
    def obs_slot(self, t: int, key: Key = "pixels") -> torch.Tensor:
        """View (no copy) of field ``key`` at absolute step ``t``: ``[num_envs, *shape]``, contiguous.

        Use it to render the next observation straight into the replay:
        ``storage.obs_slot(storage.total_steps)`` is the row the next :meth:`write` completes;
        that write may then omit ``key``. When the ring is full that slot is the oldest held
        row, so from this call until the write the oldest row is left out of sampling.
        """
        self._require_init()
        if key not in self._leaves:
            raise KeyError(f"no field {key!r}; fields are {sorted(map(str, self._leaves))}.")
        row = self.row_of(t)
        if int(t) == self._total:
            self._prefilled.add(key)
        return self._leaves[key][row]

    def write(self, step: TensorDictBase | Mapping[Key, torch.Tensor]) -> int:
        """Writes one env-step of all envs (every field ``[num_envs, *shape]``) at the head.

        Returns the absolute step ``t`` written. Fields already filled through
        :meth:`obs_slot` for this row may be left out.
        """
        leaves = step if _is_flat_tensor_dict(step) else step_leaves(step)
        if self._schema is None:
            self._init_fields(schema_from_step(leaves, self.num_envs))
        t = self._total
        row = t % self.capacity
        self._check_keys(leaves.keys(), allow_missing=self._prefilled)
        # Validate every field before copying any: when full, the head row is the oldest held row.
        dsts = [(self._leaves[key][row], val) for key, val in leaves.items()]
        for (key, val), (dst, _) in zip(leaves.items(), dsts):
            self._check_value(key, val, dst)
        for dst, val in dsts:
            dst.copy_(val, non_blocking=True)
        self._total = t + 1
        self._prefilled.clear()
        if self.auto_commit:
            self._committed = t
        if self.debug_checks:
            check_span(self._leaves, self.capacity, max(t - 1, self._total - self.size), t + 1)
        return t

    def _check_keys(self, keys, allow_missing=()) -> None:
        if keys == self._keyset:
            return
        keys = set(keys)
        extra = keys - self._keyset
        missing = self._keyset - keys - set(allow_missing)
        if extra or missing:
            hint = (
                " ('index' is added by TorchRL's round-robin writers: use writer=TimeMajorWriter())"
                if "index" in extra
                else ""
            )
            raise KeyError(
                f"step keys do not match the storage schema: missing {sorted(map(str, missing))}, "
                f"unexpected {sorted(map(str, extra))}{hint}."
            )

    def _check_value(self, key: Key, val: Any, dst: torch.Tensor) -> None:
        if not isinstance(val, torch.Tensor):
            raise TypeError(f"step[{key!r}] must be a tensor, got {type(val).__name__}.")
        if val.shape != dst.shape or val.dtype != dst.dtype:
            raise ValueError(
                f"step[{key!r}] is {tuple(val.shape)} {val.dtype}; this storage expects "
                f"{tuple(dst.shape)} {dst.dtype} ([num_envs, *shape]). Cast/reshape before writing."
            )

    def _overwrite_row(self, row: int, data: Any) -> None:
        leaves = step_leaves(data)
        self._check_keys(leaves.keys())
        dsts = [(self._leaves[key][row], val) for key, val in leaves.items()]
        for (key, val), (dst, _) in zip(leaves.items(), dsts):
            self._check_value(key, val, dst)
        for dst, val in dsts:
            dst.copy_(val)
        self._bump_mutation_revision()

    # TorchRL Storage contract ---------------------------------------------------------------
    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:
        """TorchRL write entry point (used by ``ReplayBuffer.add/extend`` and ``rb[i] = x``).

        With ``set_cursor=True`` the cursor must be the head (int) or consecutive rows from the
        head (1-D indices, ``data`` ``[k, num_envs]``): rows are appended one by one with
        :meth:`write`. With ``set_cursor=False`` held rows are overwritten in place.
        """
        if isinstance(cursor, torch.Tensor) and cursor.ndim == 0:
            cursor = int(cursor)
        if self._schema is None:
            is_row = isinstance(cursor, int)
            leaves = step_leaves(data)
            probe = leaves if is_row else {k: v[0] for k, v in leaves.items()}
            self._init_fields(schema_from_step(probe, self.num_envs))
        if isinstance(cursor, int):
            if set_cursor:
                if cursor != self.head:
                    raise IndexError(self._cursor_msg(cursor))
                self.write(data)
            else:
                self._overwrite_row(self._held_row(cursor), data)
            return
        if isinstance(cursor, tuple):
            raise NotImplementedError(
                "TimeMajorStorage writes whole rows only (all envs of one step); per-cell writes "
                "with (time, env) indices are not supported."
            )
        rows = torch.as_tensor(cursor).reshape(-1).tolist()
        if len(rows) != len(data):
            raise ValueError(f"{len(rows)} row indices for {len(data)} rows of data.")
        for i, r in enumerate(rows):
            if set_cursor:
                if r != self.head:
                    raise IndexError(self._cursor_msg(r))
                self.write(data[i])
            else:
                self._overwrite_row(self._held_row(r), data[i])

    def _cursor_msg(self, cursor: int) -> str:
        return (
            f"write at ring row {cursor} but the storage head is {self.head}: the writer is out of "
            "sync with the storage (was it also written directly?). Use "
            "writer=TimeMajorWriter(), which always appends at the head."
        )

    def _held_row(self, row: int) -> int:
        if not 0 <= row < self.size:
            raise IndexError(f"ring row {row} is not held (size={self.size}).")
        return row

    def get(self, index: Any) -> TensorDictBase:
        """Reads rows. ``index`` is a ring row (int/slice/1-D tensor, gives ``[k, num_envs]``) or a
        ``(rows, envs)`` tuple of equal-shape tensors, gathered in ONE ``index_select`` per field
        into a TensorDict of that shape (what the sampler returns)."""
        self._require_init()
        if (
            isinstance(index, tuple)
            and len(index) == 2
            and all(isinstance(i, torch.Tensor) and i.ndim > 0 for i in index)
        ):
            rows, envs = index
            return self.gather(rows, envs)
        if isinstance(index, torch.Tensor) and index.ndim == 1:
            index = index.to(self.device)
            out = {k: v.index_select(0, index) for k, v in self._leaves.items()}
            return _make_td(out, [index.shape[0], self.num_envs], self.device)
        return self._storage[index]

    def gather(self, rows: torch.Tensor, envs: torch.Tensor) -> TensorDictBase:
        """Gathers cells ``(rows[i], envs[i])`` of equal-shape index tensors, one index_select per field."""
        rows = rows.to(self.device)
        envs = envs.to(self.device)
        flat = (rows * self.num_envs + envs).reshape(-1)
        shape = list(rows.shape)
        out = {k: v.index_select(0, flat).view(*shape, *v.shape[1:]) for k, v in self._flat.items()}
        return _make_td(out, shape, self.device)

    def __len__(self) -> int:
        return self.size * self.num_envs

    @property
    def _len_along_dim0(self) -> int:
        return self.size

    def _max_size_along_dim0(self, *, single_data=None, batched_data=None) -> int:
        return self.capacity

    @property
    def shape(self) -> torch.Size:
        """``[rows held, num_envs]`` like TorchRL's ndim-2 storages."""
        return torch.Size([self.size, self.num_envs])

    @property
    def _is_full(self) -> bool:
        return self.size == self.capacity

    def flatten(self) -> TensorStorage:
        """A 1-D TorchRL storage over the held cells (ring order), for 1-D samplers. Copies."""
        self._require_init()
        return TensorStorage(self._storage[: self.size].flatten(0, 1).clone())

    def _rand_given_ndim(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        # Uniform over sampleable cells, so TorchRL's RandomSampler also respects commits.
        lo, hi = self.sampleable_range()
        if hi <= lo:
            raise RuntimeError("no committed rows to sample from.")
        dev = self._rng.device if self._rng is not None else torch.device("cpu")
        t = torch.randint(lo, hi, (batch_size,), generator=self._rng, device=dev)
        env = torch.randint(self.num_envs, (batch_size,), generator=self._rng, device=dev)
        return (t % self.capacity).to(self.device), env.to(self.device)

    def contains(self, item: Any) -> bool:
        """Whether ring row ``item`` (int) is held."""
        if isinstance(item, int):
            return 0 <= item < self.size
        raise NotImplementedError("contains() takes an int ring row.")

    def _empty(self) -> None:
        self._bump_mutation_revision()
        self._total = 0
        self._committed = -1
        self._prefilled.clear()

    # ------------------------------------------------------------------ invariants
    def check_invariants(self) -> None:
        """Checks every held row; raises :class:`ReplayInvariantError` naming env, row and values.

        For each env and adjacent rows t, t+1 (chronological): ``episode_id`` stays the same
        unless ``is_first[t+1]``, where it must be ``episode_id[t] + 1``; a row that ends an
        episode (``terminated`` or ``truncated``) is followed by ``is_first``. For every row:
        ``continue_`` is 0 or 1, and 0 exactly where ``terminated``. Checks whose fields are
        absent from the schema are skipped. The checks live in
        :mod:`torchrl_dreamer.data.invariants`.
        """
        check_replay_invariants(self)

    # ------------------------------------------------------------------ pickling
    def _rebuild_views(self) -> None:
        # After unpickling (RingPersistence.__setstate__): the flat views and the TensorDict,
        # sharing memory with the leaves.
        self._flat = {k: v.view(-1, *v.shape[2:]) for k, v in self._leaves.items()}
        self._storage = None
        if self._schema is not None:
            self._storage = _make_td(
                dict(self._leaves), [self.capacity, self.num_envs], self.device
            )

    def __repr__(self) -> str:
        fields = (
            "uninitialized"
            if self._schema is None
            else ", ".join(
                f"{key_name(k)}: {list(fs.shape)} {fs.dtype}" for k, fs in self._schema.items()
            )
        )
        return (
            f"{type(self).__name__}(capacity={self.capacity}, num_envs={self.num_envs}, "
            f"device={self.device}, total_steps={self._total}, head={self.head}, size={self.size}, "
            f"committed_t={self._committed}, memmap_dir={self.memmap_dir}, fields={{{fields}}})"
        )


def _is_flat_tensor_dict(step: Any) -> bool:
    return type(step) is dict and all(isinstance(v, torch.Tensor) for v in step.values())


def _make_td(out: dict[Key, torch.Tensor], batch_size: list[int], device) -> TensorDictBase:
    if all(isinstance(k, str) for k in out):
        return TensorDict(out, batch_size=batch_size, device=device)
    td = TensorDict({}, batch_size=batch_size, device=device)
    for k, v in out.items():
        td.set(k, v)
    return td
