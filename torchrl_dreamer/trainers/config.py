"""``TrainConfig``: every knob of a training run, validated, with per-task defaults.

A plain dataclass (CleanRL style: the whole run is readable in one place) that the CLI
(``python -m torchrl_dreamer.train``), the YAML configs of ``examples/dreamer_v3/`` and the tests
build the same way. Unknown task / preset / device / backend fail here, with a message saying what
to pass instead, before anything expensive (the Warp kernel compile) happens.

Units: ``total_steps``, ``learning_starts`` and ``checkpoint_every`` count *policy steps* (one
action of one env, sheeprl's unit); ``replay_capacity`` counts policy steps too (the ring holds
``replay_capacity // num_envs`` rows of ``num_envs`` envs); ``replay_ratio`` is gradient steps per
policy step.

Example:
    >>> cfg = TrainConfig(task="maze", preset="tiny", total_steps=2000)
    >>> cfg.num_envs, cfg.seq_len
    (16, 32)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "TrainConfig",
    "ConfigError",
    "TASK_DEFAULTS",
    "BACKENDS",
    "REPLAY_BACKINGS",
    "default_loss_preset",
]

BACKENDS = ("reference", "threaded", "cuda", "ray")
"""Collector backends; ``ray`` needs :mod:`torchrl_dreamer.distributed` (``run_ray_training``)."""

REPLAY_BACKINGS = ("memory", "memmap")
"""Where the replay ring lives: in RAM (on ``device``) or in memory-mapped files under the run."""


class ConfigError(ValueError):
    """A training setting is invalid; the message names the setting and what to use instead."""


#: Per-task default settings for the short default runs on a 2-core CPU
#: (see ``docs/learning_results.md``). The maze's discount is 0.98 (a ~50-step horizon), not
#: DreamerV3's 0.997: its episodes end at 100 steps and its shortest paths take 8-16 moves, and
#: over an infinite imagined horizon a reward model's small bias on the +-0.1 shaping steps
#: (+0.03 per step) outweighed the win, inflating the critic and undoing the policy. Its actor
#: entropy bonus is 5e-3, not ``fast-pixels``' 1e-3: with 1e-3 the greedy policy froze on a
#: no-move action in one to three of the 16 layouts, cells where the actor had stopped trying
#: the way out and the critic had never valued it. With the shipped batch 8 x 32, seed 0 ended at
#: 83 % greedy success (256 episodes) with 1e-3, 94 % with 3e-3 and 99.6 % with 5e-3
#: (``docs/learning_results.md``, session 6).
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "maze": {"replay_ratio": 0.08, "learning_starts": 1024, "gamma": 0.98, "entropy_coef": 5e-3},
    "maze-sparse": {"replay_ratio": 0.08, "learning_starts": 1024},
    "catch": {"replay_ratio": 0.2, "learning_starts": 1024},
    "gym:CartPole-v1": {"replay_ratio": 0.5, "learning_starts": 1024},
}


def default_loss_preset(preset: str, task: str) -> str:
    """The loss preset a run gets when it names none (see :attr:`TrainConfig.loss_preset`)."""
    if preset != "tiny":
        return "sheeprl"
    return "fast" if str(task).startswith("gym:") else "fast-pixels"


@dataclasses.dataclass
class TrainConfig:
    """One training run.

    Attributes:
        task: registered task name (:func:`torchrl_dreamer.envs.list_tasks`), default ``"maze"``,
            or ``"gym:<id>"`` for a gymnasium env with vector observations (``gym:CartPole-v1``).
        rom: ROM path overriding the task's own (user-supplied games).
        preset: model size, a key of :data:`torchrl_dreamer.modules.PRESETS` (``"tiny"``).
        loss_preset: a key of :data:`torchrl_dreamer.objectives.LOSS_PRESETS`; ``None`` picks,
            for the ``tiny`` preset, ``"fast-pixels"`` on Game Boy tasks and ``"fast"`` on
            ``gym:`` tasks (short CPU runs: the reference learning rates need far more gradient
            steps than a 2-core CPU gives in minutes, see ``docs/learning_results.md``), and
            ``"sheeprl"`` (DreamerV3 2023) for XS..XL.
        device: learner/replay/env device (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        num_envs: consoles stepped together.
        total_steps: policy steps to collect (the run's length).
        replay_capacity: policy steps the replay holds (oldest overwritten first).
        replay_backing: ``"memory"`` or ``"memmap"`` (files under ``<log_dir>/replay``).
        backend: collector backend, one of :data:`BACKENDS`.
        seed: seeds torch, the env, the sampler and the random prefill.
        log_dir: run directory (logs, checkpoints, GIFs).
        replay_ratio: gradient steps per policy step (``None``: the task default).
        learning_starts: random-action policy steps before training (``None``: task default).
        batch_size, seq_len: learner batch ``B x T``.
        gamma: discount of the imagined returns (``None``: the task default if it has one,
            else the loss preset's, DreamerV3's ``1 - 1/333``). See :data:`TASK_DEFAULTS`.
        entropy_coef: weight of the actor's entropy bonus (``None``: the task default if it has
            one, else the loss preset's). See :data:`TASK_DEFAULTS`.
        event_fraction: share of each batch's sequences drawn to contain a ``terminated`` row
            (:class:`~torchrl_dreamer.data.ChronologicalSliceSampler` ``event_fraction``; 0 =
            uniform starts, the reference DreamerV3 replay).
        steps_per_rollout, commit_stride: collector windows (env steps).
        checkpoint_every: policy steps between checkpoints (0: only at the end).
        checkpoint_replay: store the replay in checkpoints (exact resume; costs disk).
        log_every: gradient steps between metric logs.
        precision: learner autocast (``"fp32"``, ``"bf16"``, ``"fp16"``).
        threads: torch intra-op threads of the training process on CPU (default 1; the
            emulator runs one Warp launch per step on one core, so on a 2-core machine the
            learner can take both cores only while the actor waits).
        frame_skip: emulated frames per env step (Game Boy tasks).
        eval_episodes: episodes of the final evaluation (0: none).
        logger: ``"csv"``, ``"tensorboard"``, ``"both"`` or ``"none"``.
        progress: show a tqdm progress bar.
    """

    task: str = "maze"
    rom: str | None = None
    preset: str = "tiny"
    loss_preset: str | None = None
    device: str = "cpu"
    num_envs: int = 16
    total_steps: int = 50_000
    replay_capacity: int = 100_000
    replay_backing: str = "memory"
    backend: str = "reference"
    seed: int = 0
    log_dir: str = "runs/dreamer"
    replay_ratio: float | None = None
    learning_starts: int | None = None
    batch_size: int = 16
    seq_len: int = 32
    gamma: float | None = None
    entropy_coef: float | None = None
    event_fraction: float = 0.0
    steps_per_rollout: int = 16
    commit_stride: int = 8
    checkpoint_every: int = 10_000
    checkpoint_replay: bool = True
    log_every: int = 10
    precision: str = "fp32"
    threads: int = 1
    frame_skip: int = 24
    eval_episodes: int = 32
    logger: str = "csv"
    progress: bool = True

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad setting."""
        from torchrl_dreamer.modules import PRESETS
        from torchrl_dreamer.objectives import LOSS_PRESETS

        if self.preset not in PRESETS:
            raise ConfigError(
                f"unknown preset {self.preset!r}; choose one of {sorted(PRESETS)} "
                "(tiny is the CPU preset)."
            )
        if self.loss_preset is None:
            self.loss_preset = default_loss_preset(self.preset, self.task)
            self._loss_preset_auto = True  # with_() picks it again (preset or task may change)
        if self.loss_preset not in LOSS_PRESETS:
            raise ConfigError(
                f"unknown loss preset {self.loss_preset!r}; choose one of {sorted(LOSS_PRESETS)}."
            )
        check_task(self.task)
        if self.rom is not None and not Path(self.rom).is_file():
            raise ConfigError(
                f"ROM {self.rom} not found; pass --rom PATH to a .gb file you own (games other than "
                "the shipped maze and catch are never bundled)."
            )
        self.device = str(check_device(self.device))
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of {BACKENDS}.")
        if self.backend == "cuda" and not self.device.startswith("cuda"):
            raise ConfigError("backend='cuda' needs --device cuda; use 'threaded' on the CPU.")
        if self.replay_backing not in REPLAY_BACKINGS:
            raise ConfigError(
                f"unknown replay backing {self.replay_backing!r}; choose one of {REPLAY_BACKINGS}."
            )
        if self.replay_backing == "memmap" and not self.device.startswith("cpu"):
            raise ConfigError("replay_backing='memmap' keeps the replay in host files: use --device cpu "
                              "or --replay-backing memory.")
        if self.logger not in ("csv", "tensorboard", "both", "none"):
            raise ConfigError(f"unknown logger {self.logger!r}; use csv, tensorboard, both or none.")
        for name in ("num_envs", "total_steps", "batch_size", "seq_len", "steps_per_rollout",
                     "commit_stride", "log_every", "frame_skip"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.seq_len < 2:
            raise ConfigError(f"seq_len must be >= 2, got {self.seq_len}.")
        if self.checkpoint_every < 0 or self.eval_episodes < 0:
            raise ConfigError("checkpoint_every and eval_episodes must be >= 0.")
        if self.replay_ratio is not None and not self.replay_ratio >= 0:
            raise ConfigError(f"replay_ratio must be >= 0, got {self.replay_ratio}.")
        if self.learning_starts is not None and self.learning_starts < 0:
            raise ConfigError(f"learning_starts must be >= 0, got {self.learning_starts}.")
        if self.gamma is not None and not 0.0 < float(self.gamma) <= 1.0:
            raise ConfigError(f"gamma must lie in (0, 1], got {self.gamma}.")
        if self.entropy_coef is not None and not float(self.entropy_coef) >= 0.0:
            raise ConfigError(f"entropy_coef must be >= 0, got {self.entropy_coef}.")
        if not 0.0 <= float(self.event_fraction) <= 1.0:
            raise ConfigError(f"event_fraction must lie in [0, 1], got {self.event_fraction}.")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise ConfigError(f"threads must be an integer >= 1, got {self.threads!r}.")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ConfigError(f"unknown precision {self.precision!r}; use fp32, bf16 or fp16.")
        if self.replay_capacity < self.seq_len * self.num_envs:
            raise ConfigError(
                f"replay_capacity={self.replay_capacity} cannot hold one sequence per env; raise "
                f"--replay-capacity to at least seq_len * num_envs = {self.seq_len * self.num_envs}."
            )

    # ------------------------------------------------------------------ derived values
    @property
    def effective_replay_ratio(self) -> float:
        """``replay_ratio`` or the task default (0.05 for tasks without one)."""
        if self.replay_ratio is not None:
            return float(self.replay_ratio)
        return float(TASK_DEFAULTS.get(self.task, {}).get("replay_ratio", 0.05))

    def _loss_setting(self, name: str) -> float:
        """A loss setting that the run may set (``name`` field), else its task, else its loss
        preset (the same field of :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`)."""
        from torchrl_dreamer.objectives import LOSS_PRESETS

        value = getattr(self, name)
        if value is None:
            value = TASK_DEFAULTS.get(self.task, {}).get(name)
        if value is None:
            value = getattr(LOSS_PRESETS[self.loss_preset], name)
        return float(value)

    @property
    def effective_gamma(self) -> float:
        """``gamma``, else the task default, else the loss preset's discount."""
        return self._loss_setting("gamma")

    @property
    def effective_entropy_coef(self) -> float:
        """``entropy_coef``, else the task default, else the loss preset's."""
        return self._loss_setting("entropy_coef")

    def loss_config(self) -> Any:
        """The run's :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`: the loss preset
        with :attr:`effective_gamma` and :attr:`effective_entropy_coef`."""
        from torchrl_dreamer.objectives import LOSS_PRESETS

        return LOSS_PRESETS[self.loss_preset].with_(
            gamma=self.effective_gamma, entropy_coef=self.effective_entropy_coef)

    @property
    def effective_learning_starts(self) -> int:
        """``learning_starts`` or the task default."""
        if self.learning_starts is not None:
            return int(self.learning_starts)
        return int(TASK_DEFAULTS.get(self.task, {}).get("learning_starts", 1024))

    @property
    def capacity_rows(self) -> int:
        """Ring rows of the replay (each row holds one step of every env)."""
        # + seq_len: the safety margin keeps that many of the oldest rows out of sampling;
        # + commit_stride: rows the actor writes ahead of its last commit.
        return -(-int(self.replay_capacity) // self.num_envs) + self.seq_len + self.commit_stride

    def resolved(self) -> dict[str, float | int]:
        """The values the run actually uses for the settings that may be left to a default
        (:data:`RESOLVED_KEYS`), e.g. ``{"gamma": 0.98, ...}`` for the maze with ``gamma=None``.

        Checkpoints store them, so a resume is compared on what was trained, not on a ``None``
        whose meaning a later change of :data:`TASK_DEFAULTS` would silently move."""
        return {k: getattr(self, attr) for k, attr in RESOLVED_KEYS.items()}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly dict (logged, stored in checkpoints)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`ConfigError`."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"unknown config keys {unknown}; valid keys: {sorted(names)}.")
        return cls(**d)

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> TrainConfig:
        """Load a YAML (or JSON) config file, then apply ``overrides`` (e.g. from the CLI)."""
        data = read_config_file(path)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(data)

    def with_(self, **kwargs: Any) -> TrainConfig:
        """Copy with some settings changed (validated again).

        A ``loss_preset`` that was left ``None`` (picked by :func:`default_loss_preset` from the
        model preset and the task) is picked again for the copy, so
        ``TrainConfig().with_(preset="XS").loss_preset == "sheeprl"``.
        """
        if getattr(self, "_loss_preset_auto", False) and "loss_preset" not in kwargs:
            kwargs["loss_preset"] = None
        return dataclasses.replace(self, **kwargs)


# Settings that must match between a checkpoint and the run resuming it (the rest may change,
# e.g. total_steps to train longer, or the progress bar).
IDENTITY_KEYS = ("task", "preset", "loss_preset", "gamma", "entropy_coef", "num_envs",
                 "batch_size", "seq_len", "frame_skip", "steps_per_rollout", "commit_stride",
                 "replay_ratio", "learning_starts", "seed")

# Identity keys that may be ``None`` (= a task or preset default), with the property that
# resolves them: checkpoints compare these on the resolved value (:meth:`TrainConfig.resolved`).
RESOLVED_KEYS = {"gamma": "effective_gamma", "entropy_coef": "effective_entropy_coef",
                 "replay_ratio": "effective_replay_ratio",
                 "learning_starts": "effective_learning_starts"}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The settings of a YAML (``.yaml``/``.yml``) or JSON file, as a dict."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} not found.")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of settings, got {type(data).__name__}.")
    return data


def check_task(task: str) -> None:
    """Raise :class:`ConfigError` unless ``task`` is a registered Game Boy task or
    ``gym:<gymnasium id>`` (vector observations, discrete actions, e.g. ``gym:CartPole-v1``)."""
    from torchrl_dreamer.envs import list_tasks

    if task.startswith("gym:"):
        try:
            import gymnasium
        except ImportError as err:
            raise ConfigError(f"task {task!r} needs gymnasium: pip install gymnasium") from err
        try:
            gymnasium.spec(task[4:])
        except Exception as err:
            raise ConfigError(f"unknown gymnasium env {task[4:]!r} ({err}).") from err
        return

    tasks = list_tasks()
    if task not in tasks:
        raise ConfigError(
            f"unknown task {task!r}; registered tasks: {', '.join(tasks)} (or gym:<id>, e.g. "
            "gym:CartPole-v1). Register your own with @register_task (docs/writing_a_task.md)."
        )


def check_device(device: str | torch.device) -> torch.device:
    """Parse ``device`` and check it exists here; raise :class:`ConfigError` otherwise."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ConfigError(f"invalid device {device!r} ({err}); use 'cpu' or 'cuda[:k]'.") from err
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"device {device!r} asked but CUDA is not available here; use --device cpu "
                "(and --backend reference or threaded)."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(
                f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) here."
            )
    elif dev.type != "cpu":
        raise ConfigError(f"unsupported device {device!r}; use 'cpu' or 'cuda[:k]'.")
    return dev
