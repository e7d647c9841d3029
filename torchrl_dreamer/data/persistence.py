"""Saving and restoring a time-major ring: checkpoints, ``state_dict`` and pickling.

Three ways a :class:`~torchrl_dreamer.data.TimeMajorStorage` leaves the process, all restoring
the same ring rows, head and commits (so the same samples afterwards):

- :meth:`~RingPersistence.state_dict` / :meth:`~RingPersistence.load_state_dict`: counters,
  schema and views of the held rows, for ``torch.save`` next to a model;
- :meth:`~RingPersistence.dumps` / :meth:`~RingPersistence.loads` (or
  :meth:`~RingPersistence.from_dump`, which sizes a new storage from it): a directory with
  ``meta.json`` and one ``<key>.memmap`` file per field, copied in bounded chunks so a
  memmap-backed ring larger than RAM is saved without loading it;
- pickling (``__getstate__`` / ``__setstate__``): the leaf tensors only, for Ray and
  multiprocessing; the views sharing their memory are rebuilt on load.

This code sits apart from the ring (``storage.py``) because it deals with file formats and
versioning rather than with rows: :class:`RingPersistence` is a mixin that the storage class
inherits, so the public methods stay on the storage, while the ring provides the fields
(``_init_fields``, ``_leaves``, the counters) the mixin reads and sets.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from tensordict import MemoryMappedTensor
from torchrl.data.replay_buffers.storages import Storage

from torchrl_dreamer.data.schema import FieldSpec, Key

_META_FILE = "meta.json"
_FORMAT_VERSION = 1
_COPY_CHUNK_BYTES = 64 << 20


def _read_meta(path: Path) -> dict[str, Any]:
    """The ``meta.json`` of a :meth:`~RingPersistence.dumps` directory."""
    meta_file = path / _META_FILE
    if not meta_file.is_file():
        raise FileNotFoundError(f"{meta_file} not found: not a TimeMajorStorage checkpoint.")
    return json.loads(meta_file.read_text())


def key_name(key: Key) -> str:
    """A field's key as one string: its file stem (``<key_name>.memmap``) and its name in messages.

    Example:
        >>> key_name("pixels"), key_name(("next", "reward"))
        ('pixels', 'next.reward')
    """
    return key if isinstance(key, str) else ".".join(key)


def chunked_copy(dst: torch.Tensor, src: torch.Tensor, rows: int) -> None:
    """Copies rows ``[0, rows)`` of ``src`` into ``dst`` in chunks of at most 64 MiB.

    Memmap to memmap, this never holds more than one chunk in memory.

    Example:
        >>> dst = torch.zeros(4, 2)
        >>> chunked_copy(dst, torch.ones(4, 2), rows=3)
        >>> dst.sum(1)
        tensor([2., 2., 2., 0.])
    """
    if rows <= 0:
        return
    row_bytes = max(1, src[0].numel() * src.element_size())
    step = max(1, _COPY_CHUNK_BYTES // row_bytes)
    for i in range(0, rows, step):
        j = min(rows, i + step)
        dst[i:j].copy_(src[i:j])


class RingPersistence:
    """Mixin with the checkpoint and pickling methods of a time-major ring.

    The host class (:class:`~torchrl_dreamer.data.TimeMajorStorage`) provides the attributes
    annotated below and the methods ``_init_fields(schema)``, ``_require_init()``,
    ``_bump_mutation_revision()`` and ``_rebuild_views()``.

    Example:
        >>> import tempfile
        >>> from torchrl_dreamer.data import TimeMajorStorage
        >>> spec = {"reward": ((), torch.float32)}
        >>> storage = TimeMajorStorage(8, 2, spec=spec)
        >>> for r in range(3):
        ...     _ = storage.write({"reward": torch.full((2,), float(r))})
        >>> twin = TimeMajorStorage(8, 2)  # fields come from the state_dict's schema
        >>> twin.load_state_dict(storage.state_dict())
        >>> twin.total_steps, twin.get(2)["reward"]
        (3, tensor([2., 2.]))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     storage.dumps(d)
        ...     restored = TimeMajorStorage(8, 2, spec=spec)
        ...     restored.loads(d)
        >>> restored.committed_t, restored.get(1)["reward"]
        (2, tensor([1., 1.]))
    """

    capacity: int
    num_envs: int
    safety_margin: int
    memmap_dir: Path | None
    size: int
    _total: int
    _committed: int
    _prefilled: set[Key]
    _schema: dict[Key, FieldSpec] | None
    _leaves: dict[Key, torch.Tensor]
    _memmaps: dict[Key, MemoryMappedTensor]

    def _meta(self) -> dict[str, Any]:
        self._require_init()
        return {
            "format_version": _FORMAT_VERSION,
            "capacity": self.capacity,
            "num_envs": self.num_envs,
            "total_steps": self._total,
            "committed_t": self._committed,
            "safety_margin": self.safety_margin,
            "schema": [
                [list(k) if isinstance(k, tuple) else k, fs.to_json()]
                for k, fs in self._schema.items()
            ],
        }

    def _load_meta(self, meta: Mapping[str, Any]) -> None:
        if meta.get("format_version") != _FORMAT_VERSION:
            raise ValueError(f"unknown checkpoint format_version {meta.get('format_version')!r}.")
        if (meta["capacity"], meta["num_envs"]) != (self.capacity, self.num_envs):
            raise ValueError(
                f"checkpoint is capacity={meta['capacity']} x num_envs={meta['num_envs']}; this "
                f"storage is {self.capacity} x {self.num_envs}. Build a storage of the same size."
            )
        schema = {
            (tuple(k) if isinstance(k, list) else k): FieldSpec.from_json(fs)
            for k, fs in meta["schema"]
        }
        if self._schema is None:
            self._init_fields(schema)
        elif schema != self._schema:
            raise ValueError(
                f"checkpoint schema {schema} differs from this storage's {self._schema}."
            )

    def _set_counters(self, meta: Mapping[str, Any]) -> None:
        self._bump_mutation_revision()
        self._total = int(meta["total_steps"])
        self._committed = int(meta["committed_t"])
        self.safety_margin = int(meta["safety_margin"])
        self._prefilled.clear()

    def state_dict(self) -> dict[str, Any]:
        """Counters, schema and the held rows (``fields[key]`` are views of ring rows ``[0, size)``)."""
        sd = self._meta()
        sd["fields"] = {k: v[: self.size] for k, v in self._leaves.items()}
        return sd

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores a :meth:`state_dict`: same ring rows, head, commits -> same samples afterwards."""
        self._load_meta(state_dict)
        size = min(int(state_dict["total_steps"]), self.capacity)
        for k, v in state_dict["fields"].items():
            if v.shape[0] != size:
                raise ValueError(f"state_dict field {k!r} has {v.shape[0]} rows, expected {size}.")
            chunked_copy(self._leaves[k], v, size)
        self._set_counters(state_dict)

    def dumps(self, path: str | os.PathLike) -> None:
        """Writes a checkpoint directory: ``meta.json`` and one ``<key>.memmap`` per field."""
        path = Path(path)
        if self.memmap_dir is not None and path.resolve() == self.memmap_dir.resolve():
            raise ValueError("dumps(path) must not target this storage's own memmap_dir.")
        path.mkdir(parents=True, exist_ok=True)
        meta = self._meta()
        for k, v in self._leaves.items():
            dst = MemoryMappedTensor.empty(
                v.shape, dtype=v.dtype, filename=str(path / f"{key_name(k)}.memmap"), existsok=True
            ).as_subclass(torch.Tensor)
            chunked_copy(dst, v, self.size)
            del dst
        (path / _META_FILE).write_text(json.dumps(meta, indent=1))

    def loads(self, path: str | os.PathLike) -> None:
        """Restores a :meth:`dumps` directory into this storage (same capacity and num_envs)."""
        path = Path(path)
        meta = _read_meta(path)
        self._load_meta(meta)
        size = min(int(meta["total_steps"]), self.capacity)
        for k, v in self._leaves.items():
            src = MemoryMappedTensor.from_filename(
                str(path / f"{key_name(k)}.memmap"), dtype=v.dtype, shape=v.shape
            ).as_subclass(torch.Tensor)
            chunked_copy(v, src, size)
            del src
        self._set_counters(meta)

    @classmethod
    def from_dump(cls, path: str | os.PathLike, **kwargs: Any):
        """A new storage of a :meth:`dumps` directory's capacity and ``num_envs``, holding its
        rows (``kwargs`` go to the constructor: ``device``, ``memmap_dir``, ...): for reading a
        run's saved replay without knowing its size.

        Example:
            >>> import tempfile, torch
            >>> from torchrl_dreamer.data import TimeMajorStorage
            >>> s = TimeMajorStorage(4, 2)
            >>> for t in range(5):
            ...     _ = s.write({"reward": torch.full((2,), float(t))})
            >>> d = tempfile.mkdtemp()
            >>> s.dumps(d)
            >>> r = TimeMajorStorage.from_dump(d)
            >>> r.capacity, r.num_envs, r.total_steps
            (4, 2, 5)
            >>> torch.equal(r.fields["reward"], s.fields["reward"])
            True
        """
        meta = _read_meta(Path(path))  # (read again by loads: a few hundred bytes)
        storage = cls(meta["capacity"], meta["num_envs"], **kwargs)
        storage.loads(path)
        return storage

    def __getstate__(self) -> dict[str, Any]:
        # Pickle the leaves only; the flat views and the TensorDict are rebuilt on load so they
        # keep sharing memory with the leaves (pickling them separately would copy each).
        state = Storage.__getstate__(self)
        for k in ("_flat", "_storage", "_memmaps"):
            state.pop(k, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        Storage.__setstate__(self, state)
        self._memmaps = {}
        self._rebuild_views()
