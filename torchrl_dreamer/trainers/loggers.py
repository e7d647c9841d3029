"""Run loggers: TorchRL's ``CSVLogger`` and ``TensorboardLogger``, fanned out when both are asked.

TorchRL's loggers each write one backend; a run here may want CSV (always available, what the
tests and ``docs/learning_results.md`` read) and TensorBoard together, so :class:`MultiLogger`
forwards every call to several loggers. TensorBoard is optional: asking for it without the
``tensorboard`` package falls back to CSV with a warning instead of failing the run.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["MultiLogger", "make_logger"]


class MultiLogger:
    """Forwards ``log_scalar`` / ``log_metrics`` / ``log_hparams`` to several TorchRL loggers.

    Example:
        >>> from torchrl.record.loggers import CSVLogger
        >>> log = MultiLogger([CSVLogger("a", log_dir="/tmp/x"), CSVLogger("b", log_dir="/tmp/x")])
        >>> log.log_scalar("loss", 1.0, step=0)
    """

    def __init__(self, loggers: Sequence[Any]) -> None:
        self.loggers = list(loggers)

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Log one scalar to every logger."""
        for lg in self.loggers:
            lg.log_scalar(name, value, step=step)

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log a dict of scalars to every logger."""
        for name, value in metrics.items():
            self.log_scalar(name, float(value), step=step)

    def log_video(self, name: str, frames: Any, step: int | None = None, fps: float = 8.0) -> bool:
        """Log ``frames`` (``uint8 [T, H, W]`` Game Boy shades 0..3) as a video to every logger
        that draws videos (TensorBoard's ``add_video``; CSV has none). Returns whether one did."""
        from torchrl_dreamer.emulator.packed2 import shades_to_grey

        video = shades_to_grey(frames).unsqueeze(1).expand(-1, 3, -1, -1)  # [T, 3, H, W]
        done = False
        for lg in self.loggers:
            writer = getattr(lg, "experiment", None)
            if writer is not None and hasattr(writer, "add_video"):
                writer.add_video(name, video.unsqueeze(0), global_step=step, fps=fps)
                done = True
        return done

    def log_hparams(self, cfg: Mapping[str, Any]) -> None:
        """Log the run's settings where the backend supports it."""
        for lg in self.loggers:
            try:
                lg.log_hparams(dict(cfg))
            except Exception as err:  # backends differ in what hparams they accept
                warnings.warn(f"{type(lg).__name__}.log_hparams failed: {err}", stacklevel=2)

    def __repr__(self) -> str:
        return f"MultiLogger({self.loggers!r})"


def make_logger(kind: str, log_dir: str | Path, exp_name: str = "logs") -> MultiLogger | None:
    """``"csv"`` | ``"tensorboard"`` | ``"both"`` | ``"none"`` → a :class:`MultiLogger` (or None).

    CSV files land in ``<log_dir>/<exp_name>/scalars/<name>.csv``; TensorBoard events in
    ``<log_dir>/<exp_name>``.
    """
    if kind == "none":
        return None
    from torchrl.record.loggers import CSVLogger

    log_dir = str(log_dir)
    loggers: list[Any] = []
    if kind in ("tensorboard", "both"):
        try:
            import tensorboard  # noqa: F401
            from torchrl.record.loggers import TensorboardLogger

            loggers.append(TensorboardLogger(exp_name, log_dir=log_dir))
        except ImportError:
            warnings.warn("tensorboard is not installed (pip install tensorboard); logging to "
                          "CSV only.", stacklevel=2)
            kind = "csv"
    if kind in ("csv", "both"):
        loggers.append(CSVLogger(exp_name, log_dir=log_dir))
    return MultiLogger(loggers)
