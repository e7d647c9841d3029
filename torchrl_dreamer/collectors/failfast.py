"""Fail fast on non-finite losses, states or logits, leaving a bundle on disk to debug from.

A NaN in a Dreamer world model poisons every later update and the actor's policy; finding where it
started after hours of training is hard. :class:`FailFast` keeps a device-side "all finite" flag
(no host sync per update), reads it every ``check_every`` updates, and on the first non-finite
value writes a *failure bundle*: ``report.json`` (message, step, config, per-tensor stats: shape,
dtype, NaN/+inf/-inf counts, finite min/max/mean; the batch's indices) and ``tensors.pt`` (the
offending tensors, on CPU), then raises :class:`NonFiniteError` naming the tensors and the path.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

__all__ = ["FailFast", "NonFiniteError", "tensor_stats"]


class NonFiniteError(FloatingPointError):
    """A watched tensor held NaN/inf; ``bundle`` is the directory of the failure bundle."""

    def __init__(self, message: str, bundle: Path | None = None) -> None:
        super().__init__(message)
        self.bundle = bundle


def tensor_stats(t: torch.Tensor) -> dict[str, Any]:
    """Shape, dtype and NaN/inf counts of ``t``, plus min/max/mean over its finite entries."""
    x = t.detach()
    out: dict[str, Any] = {"shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}
    if not (x.is_floating_point() or x.is_complex()):
        out.update(n_nan=0, n_posinf=0, n_neginf=0)
        return out
    x = x.float()
    finite = torch.isfinite(x)
    out["n_nan"] = int(torch.isnan(x).sum())
    out["n_posinf"] = int((x == float("inf")).sum())
    out["n_neginf"] = int((x == float("-inf")).sum())
    if finite.any():
        xf = x[finite]
        out.update(min=float(xf.min()), max=float(xf.max()), mean=float(xf.mean()))
    return out


def _to_jsonable(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().tolist()
    if isinstance(v, Mapping):
        return {str(k): _to_jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_to_jsonable(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)


class FailFast:
    """Watches tensors for NaN/inf with one device-side flag; stops with a bundle on the first one.

    Args:
        bundle_dir: where failure bundles go (``<bundle_dir>/failure_step<N>/``).
        config: written into the bundle (e.g. ``AsyncCollectorConfig.to_dict()``).
        check_every: read the device flag every this many :meth:`watch` calls (1 on CPU; the
            collector uses ``log_every`` on CUDA so the hot loop never syncs).

    Examples:
        >>> ff = FailFast(getfixture("tmp_path"))
        >>> ff.watch(0, {"loss": torch.tensor(1.0)})
        >>> ff.watch(1, {"loss": torch.tensor(float("nan"))})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        torchrl_dreamer.collectors.failfast.NonFiniteError: non-finite values at update 1 in: loss (1 NaN, ...
    """

    def __init__(
        self,
        bundle_dir: str | Path,
        config: Mapping[str, Any] | None = None,
        check_every: int = 1,
    ) -> None:
        if check_every < 1:
            raise ValueError(f"FailFast: check_every must be >= 1, got {check_every}.")
        self.bundle_dir = Path(bundle_dir)
        self.config = dict(config or {})
        self.check_every = int(check_every)
        self._flags: collections.deque = collections.deque(maxlen=self.check_every)
        self._pending = 0

    @property
    def due(self) -> bool:
        """Whether the next :meth:`watch` reads the flags back (a host sync on a GPU)."""
        return self._pending + 1 >= self.check_every

    def watch(
        self,
        step: int,
        tensors: Mapping[str, torch.Tensor],
        batch_info: Mapping[str, Any] | None = None,
    ) -> None:
        """Records whether ``tensors`` are all finite (on device); checks every ``check_every``."""
        live = {k: v.detach() for k, v in tensors.items() if isinstance(v, torch.Tensor)}
        floats = [v for v in live.values() if v.is_floating_point()]
        if floats:
            flag = torch.stack([torch.isfinite(v).all() for v in floats]).all()
        else:
            flag = None
        self._flags.append((step, flag, live, dict(batch_info or {})))
        self._pending += 1
        if self._pending >= self.check_every:
            self.check()

    def check(self) -> None:
        """Reads the pending flags (one host sync) and raises with a bundle if any was bad."""
        self._pending = 0
        flags = [f for _, f, _, _ in self._flags if f is not None]
        if not flags:
            self._flags.clear()
            return
        if bool(torch.stack(flags).all()):
            self._flags.clear()
            return
        for step, flag, live, info in self._flags:
            if flag is not None and not bool(flag):
                self._fail(step, live, info)
        self._flags.clear()

    def _fail(self, step: int, live: Mapping[str, torch.Tensor], info: Mapping[str, Any]):
        stats = {k: tensor_stats(v) for k, v in live.items()}
        bad = {
            k: s for k, s in stats.items() if s.get("n_nan", 0) or s.get("n_posinf", 0)
            or s.get("n_neginf", 0)
        }
        desc = ", ".join(
            f"{k} ({s['n_nan']} NaN, {s['n_posinf']} +inf, {s['n_neginf']} -inf of "
            f"{s['shape']})"
            for k, s in bad.items()
        )
        path = self.bundle_dir / f"failure_step{step}"
        path.mkdir(parents=True, exist_ok=True)
        message = (
            f"non-finite values at update {step} in: {desc}. Stopped; failure bundle with the "
            f"config, tensor stats and the batch's indices written to {path}."
        )
        report = {
            "message": message,
            "step": step,
            "time": time.time(),
            "config": _to_jsonable(self.config),
            "offending": sorted(bad),
            "tensors": stats,
            "batch": _to_jsonable(info),
        }
        (path / "report.json").write_text(json.dumps(report, indent=2))
        torch.save({k: v.cpu() for k, v in live.items()}, path / "tensors.pt")
        raise NonFiniteError(message, bundle=path)
