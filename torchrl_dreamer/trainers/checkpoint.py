"""Checkpoints of a training run: models, optimizers, schedule, RNG states, env and replay.

One checkpoint is a directory ``<log_dir>/checkpoints/step_<policy_steps>/`` with

- ``state.pt``: a dict of tensors and plain Python values only, so it loads with
  ``torch.load(..., weights_only=True)`` (no pickled code runs when a checkpoint is opened):
  the library version, the run's :class:`~torchrl_dreamer.trainers.TrainConfig` (every default
  resolved to the value the run used), the learner
  (world model, actor, critic, slow critic, return normaliser), the three optimizers, the
  collector's schedule / rate limiter / counters / player / sampler, the episode statistics,
  torch's RNG states and, for :class:`~torchrl_dreamer.envs.GameBoyEnv`, the consoles and task
  state plus the env output the actor acts on next;
- ``replay/`` (optional, the latest checkpoint of a run only): the replay ring
  (:meth:`TimeMajorStorage.dumps`). Each new checkpoint removes the replay of the run's older
  ones (:func:`prune_replays`): a replay near its capacity takes 150 MB or more, and an hour's
  run writes 20 checkpoints or more.

With the replay stored, ``--resume`` continues the run exactly where it stopped (same step
counters, same RNG streams, same replay). Without it (``--no-checkpoint-replay``, or an older
checkpoint of the run) the run restarts its replay empty and
waits for the schedule's prefill (``max(learning_starts / num_envs, seq_len)`` env steps,
acting with the trained policy) before training again.

:func:`check_compatible` refuses a checkpoint written by another library version or with settings
that change what is trained (task, preset, env count, batch shape...), naming the settings.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.collectors.learner_state import learner_state, load_learner_state
from torchrl_dreamer.trainers.config import IDENTITY_KEYS, TrainConfig

__all__ = [
    "CheckpointError",
    "FORMAT",
    "FORMAT_VERSION",
    "check_compatible",
    "latest_checkpoint",
    "run_checkpoints",
    "learner_state",
    "load_checkpoint",
    "load_learner_state",
    "prune_replays",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
]

FORMAT = "torchrl_dreamer.checkpoint"
FORMAT_VERSION = 2  # 2: the config holds its resolved defaults; env snapshot via the collector
_STATE_FILE = "state.pt"


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, or from another library version / configuration."""


def rng_state() -> dict[str, Any]:
    """torch (CPU and CUDA) and Python ``random`` RNG states."""
    out: dict[str, Any] = {"torch": torch.get_rng_state(),
                           "python": _py_state_to_tensor(random.getstate())}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    if "python" in state:
        random.setstate(_py_state_from_tensor(state["python"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _py_state_to_tensor(state: tuple) -> torch.Tensor:
    version, internal, gauss = state
    return torch.tensor([version, *internal, -1 if gauss is None else 1], dtype=torch.int64)


def _py_state_from_tensor(t: torch.Tensor) -> tuple:
    vals = t.tolist()
    return (vals[0], tuple(vals[1:-1]), None)


def _checkpoint_file(path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        path = path / _STATE_FILE
    if not path.is_file():
        raise CheckpointError(
            f"no checkpoint at {path}; pass a checkpoint directory (runs/.../checkpoints/"
            "step_N) or its state.pt, or a run directory to resume its latest checkpoint."
        )
    return path


def run_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(policy steps, directory)`` of every ``step_N`` checkpoint under
    ``<run_dir>/checkpoints`` that holds a state, by step (empty if there is none).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for n in (20, 100, 3):
        ...     (root / "checkpoints" / f"step_{n}").mkdir(parents=True)
        ...     (root / "checkpoints" / f"step_{n}" / _STATE_FILE).touch()
        >>> (root / "checkpoints" / "step_x").mkdir()
        >>> [n for n, _ in run_checkpoints(root)]
        [3, 20, 100]
    """
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    steps = []
    for d in root.iterdir():
        if d.name.startswith("step_") and (d / _STATE_FILE).is_file():
            try:
                steps.append((int(d.name[5:]), d))
            except ValueError:
                continue
    return sorted(steps)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest ``step_N`` directory under ``<run_dir>/checkpoints`` (None if there is none)."""
    steps = run_checkpoints(run_dir)
    return steps[-1][1] if steps else None


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory from a checkpoint dir, its ``state.pt`` or a run directory."""
    path = Path(path)
    if path.is_file():
        return path.parent
    if (path / _STATE_FILE).is_file():
        return path
    latest = latest_checkpoint(path)
    if latest is None:
        raise CheckpointError(
            f"{path} holds no checkpoint (no state.pt, no checkpoints/step_N); train first or "
            "pass the directory of a checkpoint."
        )
    return latest


def save_checkpoint(path: str | Path, state: dict[str, Any],
                    save_replay: Callable[[Path], None] | None = None) -> Path:
    """Write ``state`` (tensors / plain values) to ``path``, and the replay through
    ``save_replay(path / "replay")`` when given (e.g. a collector's ``save_replay``).

    The state file is written to a temporary name and renamed, so a crash never leaves a
    half-written ``state.pt`` behind.
    """
    from torchrl_dreamer.version import __version__

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    full = {"format": FORMAT, "format_version": FORMAT_VERSION, "version": __version__, **state,
            "has_replay": save_replay is not None}
    if save_replay is not None:
        save_replay(path / "replay")
    tmp = path / (_STATE_FILE + ".tmp")
    torch.save(full, tmp)
    tmp.replace(path / _STATE_FILE)
    return path


def prune_replays(checkpoints: str | Path, keep: str | Path) -> list[Path]:
    """Remove the ``replay/`` folder of every ``step_N`` checkpoint in ``checkpoints`` but
    ``keep``; returns the folders removed.

    Only the latest replay serves an exact resume. An older checkpoint keeps its weights,
    optimizers, counters and consoles, and a resume from it refills an empty replay, as with
    ``checkpoint_replay`` off.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for n in (10, 20):
        ...     (root / f"step_{n}" / "replay").mkdir(parents=True)
        >>> [p.parent.name for p in prune_replays(root, root / "step_20")]
        ['step_10']
        >>> sorted(p.parent.name for p in root.glob("*/replay"))
        ['step_20']
    """
    import shutil

    keep = Path(keep).resolve()
    removed = []
    for ckpt in sorted(Path(checkpoints).glob("step_*")):
        replay = ckpt / "replay"
        if ckpt.resolve() != keep and replay.is_dir():
            shutil.rmtree(replay)
            removed.append(replay)
    return removed


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load ``state.pt`` with ``weights_only=True``; check its format and library version."""
    from torchrl_dreamer.version import __version__

    file = _checkpoint_file(path)
    try:
        state = torch.load(file, map_location=map_location, weights_only=True)
    except Exception as err:
        raise CheckpointError(
            f"cannot read checkpoint {file} ({type(err).__name__}: {err}); it is not a "
            "torchrl_dreamer checkpoint or it is corrupted."
        ) from err
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{file} is not a torchrl_dreamer checkpoint.")
    if state.get("format_version") != FORMAT_VERSION or state.get("version") != __version__:
        raise CheckpointError(
            f"checkpoint {file} was written by torchrl_dreamer {state.get('version')} (format "
            f"{state.get('format_version')}); this is {__version__} (format {FORMAT_VERSION}). "
            "Resume it with that version, or start a new run."
        )
    _fill_implied_settings(state.get("config"))
    return state


def _fill_implied_settings(config: dict[str, Any] | None) -> None:
    """Write into an older checkpoint's config the settings it ran with before they were
    recorded: ``press_frames`` (before it was a setting, always ``min(8, frame_skip)``).
    Without it a task whose spec now sets its own press length (2048, PostBot) would replay an
    older agent under a press length it never trained with."""
    if not isinstance(config, dict) or "press_frames" in config:
        return
    if config.get("frame_skip") is not None:
        from torchrl_dreamer.envs.actions import default_press_frames

        config["press_frames"] = default_press_frames(int(config["frame_skip"]))


def check_compatible(saved: dict[str, Any], cfg: TrainConfig,
                     resolved: dict[str, Any] | None = None) -> None:
    """Raise :class:`CheckpointError` if ``cfg`` differs from the checkpoint's config on a setting
    that defines the run (:data:`~torchrl_dreamer.trainers.config.IDENTITY_KEYS`).

    Both sides are compared on the values the runs use: a :class:`TrainConfig` resolves every
    default when it is built, so a checkpoint records e.g. the maze's default discount 0.98, and a
    later change of that default does not silently resume under another one. Checkpoints written
    before defaults were resolved into the config (a ``None`` there; their ``resolved`` entry,
    when given, holds what it meant) are resolved with today's defaults."""
    before = {**saved, **(resolved or {})}
    if any(before.get(k) is None for k in IDENTITY_KEYS):
        before = TrainConfig.from_dict(before).to_dict()
    now = cfg.to_dict()
    diffs = [
        f"{k}: checkpoint {before.get(k)!r} vs now {now[k]!r}"
        for k in IDENTITY_KEYS
        if before.get(k) != now[k]
    ]
    if diffs:
        raise CheckpointError(
            "the checkpoint comes from another configuration (" + "; ".join(diffs) + "). Resume "
            "with the checkpoint's settings (omit them: --resume reuses the saved config) or "
            "start a new run in another --log-dir."
        )
