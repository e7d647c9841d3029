"""Versioned weight publishing: the learner publishes, runners fetch only what is new.

Why our own rather than TorchRL's ``RayWeightSyncScheme``: that scheme moves tensors over a
``torch.distributed`` process group (gloo/nccl) that every runner must join up front, which does
not survive a runner being killed and restarted mid-run. Here (RLlib's ``weights_seq_no`` idea)
each publication is ONE flat ``uint8`` numpy buffer put once in the object store
(``ray.get`` of a numpy array is zero-copy), and a tiny :class:`WeightStore` actor holds only the
latest ``(version, ref)``. A runner asks ``fetch(name, have=its_version)`` and gets ``None`` when
its version is current, so no bytes move when nothing changed. The store records each runner's
version, so the learner can measure the lag and bound it (:meth:`WeightStore.max_lag`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from torchrl_dreamer.collectors.protocols import Checkpointable, DreamerParts

__all__ = ["WeightPacket", "WeightStore", "apply_weights", "extract_weights", "pack_weights",
           "unpack_weights"]


_ALIGN = 16


@dataclass
class WeightPacket:
    """A flat byte buffer plus the layout to cut it back into named tensors.

    ``layout`` is ``[(name, dtype_str, shape, offset, nbytes), ...]``; ``buffer`` is a ``uint8``
    numpy array (Ray ships it zero-copy).
    """

    version: int
    buffer: np.ndarray
    layout: list[tuple[str, str, tuple[int, ...], int, int]]

    @property
    def nbytes(self) -> int:
        """Size of the flat buffer."""
        return int(self.buffer.nbytes)


def pack_weights(state: Mapping[str, torch.Tensor], version: int) -> WeightPacket:
    """Packs a flat ``{name: tensor}`` into one contiguous byte buffer (CPU copy).

    Example:
        >>> p = pack_weights({"w": torch.ones(2, 3)}, version=1)
        >>> unpack_weights(p)["w"].shape
        torch.Size([2, 3])
    """
    layout = []
    offset = 0
    tensors = []
    for name, t in state.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"weights[{name!r}] is {type(t).__name__}, expected a tensor.")
        t = t.detach().to("cpu").contiguous()
        n = t.numel() * t.element_size()
        offset = -(-offset // _ALIGN) * _ALIGN  # dtype views need aligned offsets
        layout.append((name, str(t.dtype).removeprefix("torch."), tuple(t.shape), offset, n))
        tensors.append(t)
        offset += n
    buf = np.empty(offset, dtype=np.uint8)
    out = torch.from_numpy(buf)
    for (_, _, _, off, n), t in zip(layout, tensors):
        if n:
            out[off : off + n].copy_(t.reshape(-1).view(torch.uint8))
    return WeightPacket(int(version), buf, layout)


def unpack_weights(packet: WeightPacket, writable: bool = True) -> dict[str, torch.Tensor]:
    """Views (no copy) of the packet's tensors.

    A zero-copy ``ray.get`` gives a read-only buffer (object-store memory): with
    ``writable=True`` it is copied once first; ``writable=False`` skips that copy for callers
    that only read the tensors (e.g. copying them into a policy) -- never write to them then.
    """
    buf = packet.buffer
    if not buf.flags.writeable and writable:
        buf = buf.copy()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        flat = torch.from_numpy(buf)
    out = {}
    for name, dtype, shape, off, n in packet.layout:
        out[name] = flat[off : off + n].view(getattr(torch, dtype)).view(shape)
    return out


def extract_weights(learner: Any) -> dict[str, torch.Tensor]:
    """What the learner publishes: its ``world_model.*`` and ``actor.*`` weights, or its state_dict.

    Works with :class:`~torchrl_dreamer.objectives.DreamerV3Learner`; any other ``nn.Module``
    publishes its whole ``state_dict``.
    """
    if isinstance(learner, DreamerParts):
        out = {f"world_model.{k}": v for k, v in learner.world_model.state_dict().items()}
        out.update({f"actor.{k}": v for k, v in learner.actor.state_dict().items()})
        return out
    if isinstance(learner, Checkpointable):
        return dict(learner.state_dict())
    raise TypeError(
        f"cannot extract weights from {type(learner).__name__}: pass extract_fn= to the trainer."
    )


@torch.no_grad()
def apply_weights(policy: Any, weights: Mapping[str, torch.Tensor]) -> None:
    """Copies published weights into a runner's policy, in place.

    A :class:`~torchrl_dreamer.modules.DreamerPlayer` (``world_model`` + ``actor``) loads the
    ``world_model.*`` / ``actor.*`` parts; any other module loads the dict as its state_dict.
    """
    if isinstance(policy, DreamerParts) and any(
        k.startswith("world_model.") for k in weights
    ):
        for part in ("world_model", "actor"):
            prefix = part + "."
            sd = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
            getattr(policy, part).load_state_dict(sd)
        return
    if isinstance(policy, Checkpointable):
        policy.load_state_dict(dict(weights))
        return
    raise TypeError(
        f"cannot load weights into {type(policy).__name__}: it has no load_state_dict; pass "
        "apply_fn= to the runner."
    )


class WeightStore:
    """Holds the latest published weights and every runner's version (a Ray actor or in-process).

    ``publish(version, [ref])`` replaces the latest weights (wrap the ``ObjectRef`` in a list so
    Ray passes the reference, not the value); ``fetch(name, have)`` returns ``None`` when
    ``have`` is already the latest version, else ``(version, [ref])``, and records that runner's
    version. ``lag()`` reports ``learner - runner`` per runner.

    Example:
        >>> store = WeightStore()
        >>> store.publish(1, [pack_weights({"w": torch.zeros(2)}, 1)])
        >>> store.fetch("r0", have=0)[0], store.fetch("r0", have=1)
        (1, None)
    """

    def __init__(self) -> None:
        self.version = 0
        self._payload: list[Any] | None = None
        self._runner_version: dict[str, int] = {}
        self._publish_time = time.monotonic()
        self.fetches = 0
        self.noop_fetches = 0

    def publish(self, version: int, payload: list[Any]) -> None:
        """Makes ``payload`` (``[ref]`` or ``[packet]``) the latest weights, at ``version``."""
        version = int(version)
        if version <= self.version:
            raise ValueError(
                f"publish(version={version}) is not newer than the current {self.version}: "
                "versions must increase with every publication."
            )
        self.version = version
        self._payload = list(payload)
        self._publish_time = time.monotonic()

    def fetch(self, name: str, have: int) -> tuple[int, list[Any]] | None:
        """``None`` if ``have`` is the latest version, else ``(version, payload)``; records it."""
        have = int(have)
        if self._payload is None or have == self.version:
            self._runner_version[name] = max(have, 0) if self._payload is None else have
            self.noop_fetches += 1
            return None
        self._runner_version[name] = self.version
        self.fetches += 1
        return self.version, self._payload

    def latest_version(self) -> int:
        """The version of the latest publication (0: nothing published yet)."""
        return self.version

    def forget(self, name: str) -> None:
        """Drops a runner (disconnected or dead) from the lag accounting."""
        self._runner_version.pop(name, None)

    def lag(self) -> dict[str, int]:
        """``{runner: learner_version - runner_version}`` for every known runner."""
        return {k: self.version - v for k, v in self._runner_version.items()}

    def max_lag(self) -> int:
        """The largest lag over known runners (0 when none)."""
        return max(self.lag().values(), default=0)

    def stats(self) -> dict[str, Any]:
        """Version, per-runner versions, fetch counters."""
        return {
            "version": self.version,
            "runner_versions": dict(self._runner_version),
            "max_lag": self.max_lag(),
            "fetches": self.fetches,
            "noop_fetches": self.noop_fetches,
        }
