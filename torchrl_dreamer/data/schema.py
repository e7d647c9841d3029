"""Field schema of a time-major replay: what each stored key holds per env.

A schema maps a key to a :class:`FieldSpec` (per-env shape and dtype, *without* the
``[capacity, num_envs]`` leading dims). :func:`dreamer_schema` gives the default Dreamer layout;
:func:`normalize_schema` also accepts a TorchRL ``Composite`` spec so an env's
``full_observation_spec`` etc. can be used directly.

We keep our own tiny schema type instead of TorchRL specs because the storage only needs
shape + dtype per key (no bounds, no sampling), and it must round-trip through JSON checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torchrl.data import Composite, TensorSpec

from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE

Key = str | tuple[str, ...]


@dataclass(frozen=True)
class FieldSpec:
    """Shape and dtype of one stored field for ONE env at ONE step.

    Example:
        >>> FieldSpec((1, 72, 20), torch.uint8).nbytes
        1440
    """

    shape: tuple[int, ...]
    dtype: torch.dtype

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if not isinstance(self.dtype, torch.dtype):
            raise TypeError(f"FieldSpec.dtype must be a torch.dtype, got {self.dtype!r}")

    @property
    def nbytes(self) -> int:
        """Bytes one env-step of this field takes."""
        n = 1
        for s in self.shape:
            n *= s
        return n * torch.empty((), dtype=self.dtype).element_size()

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly form (used by checkpoints)."""
        return {"shape": list(self.shape), "dtype": str(self.dtype).removeprefix("torch.")}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FieldSpec:
        """Inverse of :meth:`to_json`."""
        return cls(tuple(d["shape"]), getattr(torch, d["dtype"]))


def dreamer_schema(
    *,
    pixels_key: str = "pixels",
    pixel_shape: tuple[int, ...] = PACKED2_SHAPE,
    pixel_dtype: torch.dtype = torch.uint8,
    action_shape: tuple[int, ...] = (),
    action_dtype: torch.dtype = torch.int64,
) -> dict[str, FieldSpec]:
    """The default Dreamer replay schema (see ``docs/row_alignment.md`` for what row t holds).

    ``action`` is stored as the env gives it: an integer index (default, shape ``()``) or a
    one-hot float vector (``action_shape=(n,), action_dtype=torch.float32``).

    Example:
        >>> sorted(dreamer_schema())
        ['action', 'continue_', 'episode_id', 'is_first', 'pixels', 'reward', 'terminated', 'truncated']
    """
    return {
        pixels_key: FieldSpec(pixel_shape, pixel_dtype),
        "action": FieldSpec(action_shape, action_dtype),
        "reward": FieldSpec((), torch.float32),
        "is_first": FieldSpec((), torch.bool),
        "continue_": FieldSpec((), torch.float32),
        "terminated": FieldSpec((), torch.bool),
        "truncated": FieldSpec((), torch.bool),
        "episode_id": FieldSpec((), torch.int32),
    }


def normalize_schema(spec: Any, num_envs: int) -> dict[Key, FieldSpec]:
    """Turns a user spec into ``{key: FieldSpec}``.

    Accepted forms:

    - ``{key: FieldSpec}`` or ``{key: (shape, dtype)}`` with per-env shapes;
    - a TorchRL ``Composite`` of shape ``(num_envs,)`` (leading env dim stripped) or ``()``
      (leaf shapes taken as per-env shapes).
    """
    if isinstance(spec, Composite):
        out: dict[Key, FieldSpec] = {}
        batched = tuple(spec.shape) == (num_envs,)
        if not batched and tuple(spec.shape) != ():
            raise ValueError(
                f"Composite spec shape {tuple(spec.shape)} must be ({num_envs},) (one row of all "
                "envs) or () (per-env leaf shapes)."
            )
        for key, leaf in spec.items(include_nested=True, leaves_only=True):
            shape = tuple(leaf.shape)
            if batched:
                shape = shape[1:]
            out[key] = FieldSpec(shape, leaf.dtype)
        return out
    if isinstance(spec, TensorSpec):
        raise TypeError("spec must be a Composite (keys -> leaf specs), not a single TensorSpec.")
    if not isinstance(spec, Mapping) or not spec:
        raise TypeError(
            f"spec must be a non-empty mapping key -> FieldSpec / (shape, dtype) or a TorchRL "
            f"Composite; got {type(spec).__name__}."
        )
    out = {}
    for key, val in spec.items():
        if isinstance(val, FieldSpec):
            out[key] = val
        elif isinstance(val, tuple) and len(val) == 2:
            out[key] = FieldSpec(tuple(val[0]), val[1])
        else:
            raise TypeError(f"spec[{key!r}] must be a FieldSpec or (shape, dtype); got {val!r}.")
    return out


def schema_from_step(step: Any, num_envs: int) -> dict[Key, FieldSpec]:
    """Infers a schema from a first written step (TensorDict or mapping of ``[num_envs, ...]``)."""
    leaves = step_leaves(step)
    out: dict[Key, FieldSpec] = {}
    for key, val in leaves.items():
        if not isinstance(val, torch.Tensor):
            raise TypeError(f"step[{key!r}] must be a tensor, got {type(val).__name__}.")
        if val.ndim < 1 or val.shape[0] != num_envs:
            raise ValueError(
                f"step[{key!r}] has shape {tuple(val.shape)}; the first dim must be num_envs="
                f"{num_envs} (one row holds every env)."
            )
        out[key] = FieldSpec(tuple(val.shape[1:]), val.dtype)
    if not out:
        raise ValueError("cannot infer a schema from an empty step.")
    return out


def step_leaves(step: Any) -> dict[Key, Any]:
    """Flat ``{key: tensor}`` of a TensorDict or a (possibly nested) mapping: nested keys become
    tuples, as the storage names its fields, so the schema, the ring and the writer read a step
    the same way.

    Example:
        >>> import torch
        >>> list(step_leaves({"a": torch.zeros(2), "next": {"b": torch.ones(2)}}))
        ['a', ('next', 'b')]
    """
    from tensordict import TensorDictBase

    if isinstance(step, TensorDictBase):
        return dict(step.items(include_nested=True, leaves_only=True))
    if not isinstance(step, Mapping):
        raise TypeError(f"a step must be a TensorDict or a mapping of tensors, got {type(step)}.")
    out: dict[Key, Any] = {}
    for k, v in step.items():
        if isinstance(v, Mapping | TensorDictBase):
            for k2, v2 in step_leaves(v).items():
                out[(k, *((k2,) if isinstance(k2, str) else k2))] = v2
        else:
            out[k] = v
    return out
