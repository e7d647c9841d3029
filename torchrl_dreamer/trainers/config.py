"""``TrainConfig``: every setting of a training run, validated, with the task's defaults.

A plain dataclass (CleanRL style: the whole run is readable in one place, one docstring per
field) from which the CLI (``python -m torchrl_dreamer.train``) is generated and which the YAML
configs of ``examples/dreamer_v3/`` and the tests build the same way. The collector's and the Ray
run's configs are derived from it (:meth:`TrainConfig.collector_config`,
:func:`torchrl_dreamer.distributed.ray_config`), both through
:meth:`TrainConfig.shared_settings`: a setting of the same name is copied, never renamed or
recomputed, and its default is defined once (:mod:`torchrl_dreamer.collectors.defaults`,
:mod:`torchrl_dreamer.trainers.defaults`). Unknown task / preset / device / backend fail
here, with a message saying what to pass instead, before anything expensive (the Warp kernel
compile) happens.

Units: ``total_steps``, ``learning_starts`` and ``checkpoint_every`` count *policy steps* (one
action of one env, sheeprl's unit); ``replay_capacity`` counts policy steps too (the ring holds
``replay_capacity // num_envs`` rows of ``num_envs`` envs); ``replay_ratio`` is gradient steps per
policy step.

Example:
    >>> cfg = TrainConfig(task="catch", total_steps=2000)
    >>> cfg.num_envs, cfg.seq_len, cfg.replay_ratio
    (16, 32, 0.2)
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import torch

from torchrl_dreamer.collectors.config import Precision
from torchrl_dreamer.collectors.defaults import (
    BACKEND,
    BATCH_SIZE,
    COMMIT_STRIDE,
    DEVICE,
    LEARNING_STARTS,
    LOG_EVERY,
    PRECISION,
    REPLAY_RATIO,
    SEED,
    SEQ_LEN,
    STEPS_PER_ROLLOUT,
    check_batch_shape,
)
from torchrl_dreamer.emulator import DEFAULT_PPU, PpuMode
from torchrl_dreamer.objectives.config import DreamerV3LossConfig
from torchrl_dreamer.objectives.learner import COMPILE_MODES, CompileMode
from torchrl_dreamer.trainers.defaults import TOTAL_STEPS

__all__ = [
    "TrainConfig",
    "GAME_TRAIN_DEFAULTS",
    "HORIZON_SECONDS",
    "game_discount",
    "parse_duration",
    "ConfigError",
    "BACKENDS",
    "REPLAY_BACKINGS",
    "default_loss_preset",
    "field_docs",
    "task_train_defaults",
]

Backend = Literal["reference", "threaded", "cuda", "ray"]
ReplayBacking = Literal["memory", "memmap"]
LoggerKind = Literal["csv", "tensorboard", "both", "none"]

BACKENDS: tuple[str, ...] = get_args(Backend)
"""Collector backends; ``ray`` runs the collection on Ray (:mod:`torchrl_dreamer.distributed`)."""

REPLAY_BACKINGS: tuple[str, ...] = get_args(ReplayBacking)
"""Where the replay ring lives: in RAM (on ``device``) or in memory-mapped files under the run."""


class ConfigError(ValueError):
    """A training setting is invalid; the message names the setting and what to use instead."""


GAME_TRAIN_DEFAULTS: dict[str, Any] = {"frame_skip": 8, "noop_max": 30, "batch_size": 8,
                                       "replay_ratio": 0.1, "entropy_coef": 5e-3,
                                       "decode_stride": 2}
"""Settings every Game Boy task trains with unless it or the run says otherwise (a task's
``train_defaults``, a spec's ``train:``, then the command line override them), chosen from
measurements across games (``docs/learning_results.md``, "One configuration for every game"):

- ``frame_skip`` 8 (a decision every 0.13 s): on a runner game the plain command reached 13x
  the random return with 8 frames per step and 1.5x with 12 or 24 (22 minutes, 50k steps each);
  24 frames is 0.4 s a decision, too coarse for action games.
- ``noop_max`` 30: games seed their RNG from frame counters, so a fixed start replays one
  episode; up to half a second of random no-ops gives varied games (and varied evaluations).
- ``batch_size`` 8 at ``replay_ratio`` 0.1 (the same replayed steps per collected step as
  batch 16 at 0.05): a CPU run is bound by its learner, and half the batch buys ~1.6x the
  updates per minute; Tobu Tobu Girl reached its plateau in 10-15k policy steps instead of
  15-20k (2026-11-26, 45-minute runs), as the maze did with batch 8 (2026-11-22).
- ``entropy_coef`` 5e-3 (``fast-pixels`` has 1e-3): with 1e-3 Tobu Tobu Girl's climb stopped at
  its first trick (greedy 25.7 after 45 minutes, training return flat at 23-24 from 15k steps);
  with 5e-3 it kept climbing (greedy 32.8, training 28.7 at 60k steps; 2026-11-26), as the
  maze's greedy policy stopped freezing in a few layouts with it (2026-11-22).
- ``decode_stride`` 2 (reconstruct every second frame of a sequence): 24-33 % more updates in
  the same minutes; over four shared games it learned as far or further in the same or less
  time (snake 3.22 food per episode against 2.56 in 50 minutes; Pandora's Blocks 19.4 in 35
  minutes against 18.1 in 50; Tobu Tobu Girl 33.2 in 35 against 32.8 in 44; 2048 1,190
  against 1,287, both over twice random; 2026-11-26, "Decoding every second frame"). The maze
  and catch keep 1, the setting their figures were measured with.
"""

FINISH_RESERVE_S = 30.0
"""Seconds a time-limited run keeps for building the evaluation env and the last checkpoint."""

UNBOUNDED_STEPS = 10**15
"""``total_steps`` of a run ended by its ``time_limit`` alone."""

HORIZON_SECONDS = 20.0
"""Game time the discount looks ahead when ``gamma`` is unset for a Game Boy task: the maze's
measured best ``gamma`` 0.98 at 24 frames per step is a 20-second horizon (1 / (1 - gamma) steps
x 24 frames / 60 fps); :func:`game_discount` keeps that horizon at any ``frame_skip``."""


def game_discount(frame_skip: int, horizon_s: float = HORIZON_SECONDS) -> float:
    """The discount whose horizon ``1 / (1 - gamma)`` steps lasts ``horizon_s`` seconds of game
    time at ``frame_skip`` frames per step (60 frames a second).

    Example:
        >>> round(game_discount(24), 4), round(game_discount(8), 4)
        (0.98, 0.9933)
    """
    steps = horizon_s * 60.0 / float(frame_skip)
    return 1.0 - 1.0 / max(steps, 1.0)


def parse_duration(value: str | float | int | None, name: str = "time limit") -> float | None:
    """Seconds of a duration given as a number of seconds or with a unit: ``90s``, ``45m``,
    ``1.5h`` (``None``/empty: no limit).

    Example:
        >>> parse_duration("60m"), parse_duration("1.5h"), parse_duration(90)
        (3600.0, 5400.0, 90.0)
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a duration such as 60m, 1h or 3600, got {value!r}.")
    text = str(value).strip().lower()
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    scale = units.get(text[-1:], None)
    number = text[:-1] if scale is not None else text
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        raise ConfigError(f"{name} {value!r} is not a duration; use seconds or a number with s, "
                          "m or h (90s, 60m, 1h).") from None
    if not seconds > 0:
        raise ConfigError(f"{name} must be > 0, got {value!r}.")
    return seconds


def default_loss_preset(preset: str, task: str) -> str:
    """The loss preset a run gets when it names none (see :attr:`TrainConfig.loss_preset`)."""
    if preset != "tiny":
        return "sheeprl"
    return "fast" if str(task).startswith("gym:") else "fast-pixels"


def _records_given(cls: type) -> type:
    """Wrap the dataclass ``__init__`` so an instance knows which settings it was given
    (``None`` counts as not given): those keep their value, the others take the task's default."""
    init = cls.__init__
    names = [f.name for f in dataclasses.fields(cls) if f.init]

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        given = {n for n, v in zip(names, args) if v is not None}
        given |= {k for k, v in kwargs.items() if v is not None}
        object.__setattr__(self, "_given", frozenset(given))
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls


@_records_given
@dataclasses.dataclass
class TrainConfig:
    """One training run: every setting, with its default and what it means.

    The command line is generated from these fields (``--num-envs`` for ``num_envs``; see
    ``python -m torchrl_dreamer.train --help``), and YAML/JSON files use the same names. A
    setting that is not given takes the task's training default
    (:attr:`torchrl_dreamer.envs.Task.train_defaults`), else the default below (each defined
    once: a setting shared with the collector's or the Ray job's config takes the constant of
    :mod:`torchrl_dreamer.collectors.defaults` or :mod:`torchrl_dreamer.trainers.defaults`, a
    loss setting its :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig` default). After
    construction every field holds the value the run uses (``None`` defaults are resolved), so
    ``to_dict()`` is what a checkpoint records and compares on ``--resume``.

    Example:
        >>> cfg = TrainConfig(task="maze", total_steps=2000)
        >>> cfg.batch_size, cfg.replay_ratio, cfg.gamma   # the maze's training defaults
        (8, 0.18, 0.98)
        >>> cfg.with_(batch_size=16).batch_size
        16
    """

    task: str = "maze"
    """Registered task (``torchrl_dreamer.envs.list_tasks()``) or ``gym:<id>`` for a gymnasium
    env with vector observations (``gym:CartPole-v1``)."""
    rom: str | None = None
    """ROM path overriding the task's own (games other than the shipped ones are never bundled)."""
    task_spec: str | None = None
    """A YAML/JSON task spec file (``docs/writing_a_task.md``) to train on instead of a registered
    task: needs ``--rom``; the run's task name becomes the spec's ``name``."""
    preset: str = "tiny"
    """Model size, a key of ``torchrl_dreamer.modules.PRESETS`` (``tiny`` is the CPU preset)."""
    loss_preset: str | None = None
    """Loss and learner preset (``torchrl_dreamer.objectives.LOSS_PRESETS`` / ``LEARNER_PRESETS``);
    unset: ``fast-pixels`` (Game Boy tasks) or ``fast`` (``gym:`` tasks) for the ``tiny`` preset,
    ``sheeprl`` for XS..XL."""
    device: str = DEVICE
    """Learner, replay and env device (``cpu``, ``cuda``, ``cuda:1``)."""
    env_device: str | None = None
    """Device of the env's consoles when it is not ``device`` (unset: ``device``). ``--device
    cuda --env-device cpu --workers K`` is the hybrid run: the consoles on K CPU cores, the
    replay, player and learner on the GPU, each step's observations copied over asynchronously
    (page-locked staging, :class:`~torchrl_dreamer.collectors.env_driver.EnvDriver`), for games
    that emulate faster on the machine's cores than on its GPU."""
    num_envs: int = 16
    """Consoles (envs) stepped together."""
    total_steps: int = TOTAL_STEPS
    """Policy steps to collect (one action of one env): the run's length."""
    replay_capacity: int = 100_000
    """Policy steps the replay holds (the oldest are overwritten first)."""
    replay_backing: ReplayBacking = "memory"
    """``memory`` (RAM of ``device``) or ``memmap`` (files under ``<log_dir>/replay_ring``)."""
    backend: Backend = BACKEND
    """Collector backend: ``reference`` (sequential), ``threaded``, ``cuda`` or ``ray``."""
    seed: int = SEED
    """Seeds torch, the env, the sampler and the random prefill."""
    log_dir: str = "runs/dreamer"
    """Run directory: logs, checkpoints, GIFs."""
    replay_ratio: float = REPLAY_RATIO
    """Gradient steps per policy step."""
    learning_starts: int = LEARNING_STARTS
    """Policy steps of random actions before training starts."""
    batch_size: int = BATCH_SIZE
    """Sequences per gradient step (``B`` of the ``B x T`` batch)."""
    seq_len: int = SEQ_LEN
    """Steps per sampled sequence (``T``)."""
    gamma: float | None = None
    """Discount of the imagined returns; unset: a 20-second horizon for Game Boy tasks
    (``game_discount(frame_skip)``: 0.9933 at 8 frames a step, 0.98 at 24), the loss preset's
    (DreamerV3's 1 - 1/333) for ``gym:`` tasks."""
    entropy_coef: float | None = None
    """Weight of the actor's entropy bonus; unset: the loss preset's."""
    entropy_final: float | None = None
    """The entropy bonus's weight at the end of training; unset: ``entropy_coef`` throughout.
    Set, the weight moves from ``entropy_coef`` to it geometrically over the run's progress
    (policy steps of ``total_steps`` or the wall clock of ``time_limit``, whichever is further:
    :func:`~torchrl_dreamer.trainers.schedule.anneal`): broad exploration first, a policy whose
    greedy actions are its best ones at the end."""
    demos: str | None = None
    """Human demonstrations to learn from (files recorded with ``python -m torchrl_dreamer.play``,
    folders of ``*.pt`` or glob patterns; several separated by commas), each checked against the
    run's ROM, action set, frame skip and task before training: loaded into their own replay,
    which every batch draws ``round(demo_share * batch_size)`` of its sequences from. On
    ``backend="ray"`` that replay is a static slot of the human replay service (never evicted,
    reloaded from the files on resume) and the router draws the same count from it
    (``docs/ray.md``, "Demonstrations")."""
    demo_share: float = 0.25
    """Share of each batch's sequences drawn from the demonstrations (with ``demos``)."""
    decode_stride: int = DreamerV3LossConfig.decode_stride
    """Reconstruct every n-th step of each sampled sequence (1: all; see
    :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`): 2 makes a ``tiny`` CPU update
    17 % faster, and Game Boy tasks train with 2 (:data:`GAME_TRAIN_DEFAULTS`)."""
    event_fraction: float = 0.0
    """Share of each batch's sequences drawn to contain a ``terminated`` row (0: uniform starts,
    the reference DreamerV3 replay)."""
    steps_per_rollout: int = STEPS_PER_ROLLOUT
    """Env steps per actor window (weights change only between windows; Ray: per chunk)."""
    commit_stride: int = COMMIT_STRIDE
    """Env steps between commits of new rows to the learner."""
    checkpoint_every: int = 10_000
    """Policy steps between checkpoints (0: only at the end)."""
    checkpoint_replay: bool = True
    """Store the replay in checkpoints (exact resume; costs disk)."""
    log_every: int = LOG_EVERY
    """Gradient steps between metric logs."""
    precision: Precision = PRECISION
    """Learner autocast: ``fp32`` (off), ``bf16`` or ``fp16``."""
    compile: CompileMode | None = None
    """``torch.compile`` mode of the learner's update (unset: eager). A mode the device cannot
    use (CUDA graphs on the CPU) falls back with one warning (``--strict-acceleration``: error)."""
    capture: bool = False
    """Learner copies each batch into static buffers and, on CUDA, replays its whole update as
    one captured CUDA graph (4.9x faster maze updates on an H200); on the CPU the same
    static-buffer path runs without a graph, after one warning."""
    strict_acceleration: bool = False
    """Fail instead of warning when ``compile`` / ``capture`` cannot run as asked here."""
    threads: int = 1
    """Torch intra-op threads of the training process on CPU."""
    workers: int = 1
    """CPU cores the env's consoles are emulated on (``GameBoyEnv(workers=...)``: the console
    batch in that many slices launched together, the same observations as 1). On a 2-core
    machine the learner needs one core, so 1 is the default; raise it where cores are spare."""
    frame_skip: int | None = None
    """Emulated frames per env step (Game Boy tasks); unset: the task's, else 8
    (:data:`GAME_TRAIN_DEFAULTS`)."""
    noop_max: int | None = None
    """Random no-op frames before each episode (Game Boy tasks): every episode starts after a
    fresh draw of 0..noop_max frames with no button held, so games that seed their RNG from
    frame counters play differently each time; unset: the task's (a spec's ``start.noop_max``),
    else 30 (:data:`GAME_TRAIN_DEFAULTS`); 0: one fixed start."""
    time_limit: str | None = None
    """Wall-clock budget of the whole run, e.g. ``60m``, ``1h`` or ``3600`` (seconds): training
    stops in time for the final evaluation (bounded by ``eval_time_limit``) and the checkpoint
    to fit in it. With a time limit and no ``total_steps`` given, the clock alone ends training."""
    ppu: PpuMode = DEFAULT_PPU
    """Emulator PPU mode (Game Boy tasks): ``fifo`` (mid-scanline register writes land on the
    right pixel) or ``line`` (whole lines; see docs/emulator.md)."""
    eval_episodes: int = 32
    """Episodes of the final evaluation (0: none), played at once in as many envs."""
    eval_time_limit: str = "1m"
    """Wall-clock bound of the final evaluation (seconds or ``90s``/``5m``): episodes still
    running then are reported as unfinished (with their partial returns), never waited for."""
    eval_max_steps: int = 5000
    """Env steps an evaluation episode may last at most (a greedy policy that pauses the game
    would otherwise run to the episode limit)."""
    eval_sampled: bool = True
    """After the greedy final evaluation, play as many episodes again with sampled actions (the
    policy as it trains): a puzzle's key sequence can come out of the samples but not out of
    each step's mode (PostBot, 2026-11-26: 5 of 32 sampled episodes solved, none greedy).
    Reported as ``eval_sampled_*``, bounded by ``eval_time_limit`` as well."""
    video_every: int = 0
    """Policy steps between world-model open-loop videos during training (0: none): real |
    reconstruction | imagination of 4 replay windows, as ``<log_dir>/videos/wm_step_<N>.mp4``
    (GIF without ffmpeg) and as TensorBoard video when that logger is on."""
    logger: LoggerKind = "csv"
    """Metric logs: ``csv``, ``tensorboard``, ``both`` or ``none``."""
    progress: bool = True
    """Show a progress bar."""

    def __post_init__(self) -> None:
        self._resolve_defaults()
        self.validate()

    # ------------------------------------------------------------------ defaults
    def _resolve_defaults(self) -> None:
        """Fill the settings not given: the task's training defaults, then the field defaults,
        then those that follow other settings (loss preset, discount, entropy bonus)."""
        from torchrl_dreamer.modules import PRESETS
        from torchrl_dreamer.objectives import LOSS_PRESETS

        spec_task = self._spec_task()
        if spec_task is None:
            check_task(self.task)
        elif "task" not in self._given:
            self.task = spec_task.name
        task_defaults = task_train_defaults(self.task, spec_task)
        for name, value in task_defaults.items():
            if name not in self._given:
                setattr(self, name, value)
        if self.is_game:
            own = self._given | set(task_defaults)  # the run's or the task's own settings
            noop = _task_noop_max(self.task, spec_task)
            if noop is not None and "noop_max" not in own:
                self.noop_max = noop
                own = own | {"noop_max"}
            for name, value in GAME_TRAIN_DEFAULTS.items():
                if name not in own:
                    setattr(self, name, value)
        else:
            self.frame_skip = 1 if self.frame_skip is None else self.frame_skip
            self.noop_max = 0 if self.noop_max is None else self.noop_max
        if self.time_limit is not None and "total_steps" not in self._given:
            self.total_steps = UNBOUNDED_STEPS  # the clock alone ends the run
        for f in dataclasses.fields(self):
            if getattr(self, f.name) is None and f.default is not None:
                setattr(self, f.name, f.default)
        if self.preset not in PRESETS:
            raise ConfigError(
                f"unknown preset {self.preset!r}; choose one of {sorted(PRESETS)} "
                "(tiny is the CPU preset)."
            )
        if self.loss_preset is None:
            self.loss_preset = default_loss_preset(self.preset, self.task)
        if self.loss_preset not in LOSS_PRESETS:
            raise ConfigError(
                f"unknown loss preset {self.loss_preset!r}; choose one of {sorted(LOSS_PRESETS)}."
            )
        preset = LOSS_PRESETS[self.loss_preset]
        if self.gamma is None:
            self.gamma = game_discount(self.frame_skip) if self.is_game else preset.gamma
        if self.entropy_coef is None:
            self.entropy_coef = preset.entropy_coef

    @property
    def is_game(self) -> bool:
        """Whether the run trains on a Game Boy task (not a ``gym:`` env)."""
        return not str(self.task).startswith("gym:")

    @property
    def time_limit_s(self) -> float | None:
        """``time_limit`` in seconds (``None``: no limit)."""
        return parse_duration(self.time_limit, "time_limit")

    @property
    def eval_time_limit_s(self) -> float:
        """``eval_time_limit`` in seconds."""
        return float(parse_duration(self.eval_time_limit, "eval_time_limit"))

    @property
    def consoles_device(self) -> str:
        """The env's device: ``env_device``, else ``device``."""
        return self.env_device or self.device

    @property
    def steps_bounded(self) -> bool:
        """Whether ``total_steps`` ends the run (``False``: only ``time_limit`` does)."""
        return self.total_steps < UNBOUNDED_STEPS

    def training_deadline(self, start: float) -> float | None:
        """The ``time.perf_counter()`` value at which training must stop for a run whose clock
        started at ``start``: ``time_limit`` less the final evaluations' bounds (greedy, and
        sampled with ``eval_sampled``) and :data:`FINISH_RESERVE_S` for the last checkpoint
        (``None``: no time limit)."""
        limit = self.time_limit_s
        if limit is None:
            return None
        evals = (1 + int(self.eval_sampled)) if self.eval_episodes > 0 else 0
        reserve = FINISH_RESERVE_S + evals * self.eval_time_limit_s
        return start + max(0.0, limit - reserve)

    # ------------------------------------------------------------------ validation
    def _spec_task(self) -> Any:
        """The task of ``task_spec`` (validated: a bad spec or a ROM it does not fit fails here,
        before any console is built), or None."""
        if self.task_spec is None:
            return None
        from torchrl_dreamer.emulator.cartridge import load_rom_bytes, parse_cartridge
        from torchrl_dreamer.envs import TaskMismatchError, TaskSpecError, load_task_spec

        if self.rom is None:
            raise ConfigError("--task-spec needs --rom PATH: the game's ROM file.")
        if not Path(self.rom).is_file():
            raise ConfigError(f"ROM {self.rom} not found; pass --rom PATH to a .gb file you own.")
        try:
            task = load_task_spec(self.task_spec, rom=self.rom)
            task.check_cartridge(parse_cartridge(load_rom_bytes(self.rom), check=False))
        except (TaskSpecError, TaskMismatchError) as err:
            raise ConfigError(str(err)) from None
        return task

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad setting."""
        for f in dataclasses.fields(self):
            choices = get_args(_hints()[f.name]) if get_origin(_hints()[f.name]) is Literal else ()
            if choices and getattr(self, f.name) not in choices:
                raise ConfigError(
                    f"unknown {f.name.replace('_', ' ')} {getattr(self, f.name)!r}; choose one of "
                    f"{', '.join(choices)}."
                )
        if self.rom is not None and not Path(self.rom).is_file():
            raise ConfigError(
                f"ROM {self.rom} not found; pass --rom PATH to a .gb file you own (games other than "
                "the shipped maze and catch are never bundled)."
            )
        self.device = str(check_device(self.device))
        if self.backend == "cuda" and not self.device.startswith("cuda"):
            raise ConfigError("backend='cuda' needs --device cuda; use 'threaded' on the CPU.")
        if self.replay_backing == "memmap" and not self.device.startswith("cpu"):
            raise ConfigError("replay_backing='memmap' keeps the replay in host files: use --device cpu "
                              "or --replay-backing memory.")
        check_batch_shape("TrainConfig", self.batch_size, self.seq_len, error=ConfigError)
        for name in ("num_envs", "total_steps", "steps_per_rollout",
                     "commit_stride", "log_every", "frame_skip", "eval_max_steps"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if not isinstance(self.noop_max, int) or self.noop_max < 0:
            raise ConfigError(f"noop_max must be an integer >= 0 (frames), got {self.noop_max!r}.")
        if self.noop_max and not self.is_game:
            raise ConfigError(f"noop_max applies to Game Boy tasks only; task {self.task!r} has "
                              "no frames to skip: leave it unset or 0.")
        self.time_limit_s  # noqa: B018 - parses (and so checks) the durations
        self.eval_time_limit_s  # noqa: B018
        if self.checkpoint_every < 0 or self.eval_episodes < 0:
            raise ConfigError("checkpoint_every and eval_episodes must be >= 0.")
        if self.video_every < 0:
            raise ConfigError(f"video_every must be >= 0 (0: no videos), got {self.video_every}.")
        if not self.replay_ratio >= 0:
            raise ConfigError(f"replay_ratio must be >= 0, got {self.replay_ratio}.")
        if self.learning_starts < 0:
            raise ConfigError(f"learning_starts must be >= 0, got {self.learning_starts}.")
        if not 0.0 < float(self.gamma) <= 1.0:
            raise ConfigError(f"gamma must lie in (0, 1], got {self.gamma}.")
        if not float(self.entropy_coef) >= 0.0:
            raise ConfigError(f"entropy_coef must be >= 0, got {self.entropy_coef}.")
        if self.entropy_final is not None and not float(self.entropy_final) >= 0.0:
            raise ConfigError(f"entropy_final must be >= 0 (or unset: a constant entropy_coef), "
                              f"got {self.entropy_final}.")
        if not 0.0 <= float(self.demo_share) <= 1.0:
            raise ConfigError(f"demo_share must lie in [0, 1], got {self.demo_share}.")
        if not 0.0 <= float(self.event_fraction) <= 1.0:
            raise ConfigError(f"event_fraction must lie in [0, 1], got {self.event_fraction}.")
        if self.compile is not None and self.compile not in COMPILE_MODES:
            raise ConfigError(f"unknown compile mode {self.compile!r}; choose one of "
                              f"{', '.join(COMPILE_MODES)} (or leave it unset: eager).")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise ConfigError(f"threads must be an integer >= 1, got {self.threads!r}.")
        if not isinstance(self.decode_stride, int) or self.decode_stride < 1:
            raise ConfigError(f"decode_stride must be an integer >= 1 (1: decode every step), "
                              f"got {self.decode_stride!r}.")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers must be an integer >= 1, got {self.workers!r}.")
        if self.env_device is not None:
            self.env_device = str(check_device(self.env_device))
            if not self.is_game and self.env_device != self.device:
                raise ConfigError(f"env_device applies to Game Boy tasks; task {self.task!r} "
                                  "runs its env on --device.")
            if self.replay_backing == "memmap" and self.env_device != self.device:
                raise ConfigError("a hybrid run (env_device differs from device) keeps its replay "
                                  "in device memory: use --replay-backing memory.")
        if self.workers > 1 and (not self.is_game or not self.consoles_device.startswith("cpu")):
            raise ConfigError("workers > 1 spreads Game Boy consoles over CPU cores: it needs a "
                              "Game Boy task with its consoles on the CPU (--device cpu, or "
                              "--env-device cpu beside --device cuda; a GPU runs every console "
                              "at once).")
        if self.replay_capacity < self.seq_len * self.num_envs:
            raise ConfigError(
                f"replay_capacity={self.replay_capacity} cannot hold one sequence per env; raise "
                f"--replay-capacity to at least seq_len * num_envs = {self.seq_len * self.num_envs}."
            )

    # ------------------------------------------------------------------ derived values
    def loss_config(self) -> Any:
        """The run's :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`: the loss preset
        with the run's ``gamma`` and ``entropy_coef``."""
        from torchrl_dreamer.objectives import LOSS_PRESETS

        return LOSS_PRESETS[self.loss_preset].with_(gamma=self.gamma,
                                                    entropy_coef=self.entropy_coef,
                                                    decode_stride=self.decode_stride)

    def learner_config(self) -> Any:
        """The run's :class:`~torchrl_dreamer.objectives.DreamerV3LearnerConfig` (optimizers):
        the learner preset of ``loss_preset``'s name."""
        from torchrl_dreamer.objectives import LEARNER_PRESETS

        return LEARNER_PRESETS[self.loss_preset]

    @property
    def capacity_rows(self) -> int:
        """Ring rows of the replay (each row holds one step of every env):
        :func:`~torchrl_dreamer.data.ring_rows` of ``replay_capacity``."""
        from torchrl_dreamer.data import ring_rows

        return ring_rows(self.replay_capacity, self.num_envs, self.seq_len, self.commit_stride)

    def shared_settings(self, config_cls: type) -> dict[str, Any]:
        """This run's values of the settings the dataclass ``config_cls`` has by the same name:
        the one path by which ``seq_len``, ``batch_size``, ``replay_ratio`` and the others reach
        the collector's and the Ray job's configs (a shared name means the same setting in the
        same unit, with one default: ``test/trainers/test_config_defaults.py``).

        Example:
            >>> from torchrl_dreamer.distributed import RayTrainingConfig
            >>> TrainConfig(task="catch", seq_len=16).shared_settings(RayTrainingConfig)
            {'steps_per_rollout': 16, 'seq_len': 16, 'batch_size': 16, 'replay_ratio': 0.2, 'learning_starts': 1024, 'total_steps': 50000, 'seed': 0}
        """
        own = {f.name for f in dataclasses.fields(self)}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(config_cls)
                if f.init and f.name in own}

    def collector_config(self) -> Any:
        """The :class:`~torchrl_dreamer.collectors.AsyncCollectorConfig` of this run: its
        :meth:`shared_settings`, the sampling margins at ``seq_len``, and ``ray`` running its
        collection through the ``reference`` loop's settings."""
        from torchrl_dreamer.collectors import AsyncCollectorConfig

        return AsyncCollectorConfig(**{
            **self.shared_settings(AsyncCollectorConfig),
            "min_ready_steps": self.seq_len, "safety_margin": self.seq_len,
            "backend": self.backend if self.backend != "ray" else "reference",
        })

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly dict of the values the run uses (logged, stored in checkpoints)."""
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

    @property
    def demo_paths(self) -> list[str]:
        """The entries of ``demos`` (split at commas; empty without ``demos``).

        Example:
            >>> TrainConfig(demos="demos/, extra/*.pt").demo_paths
            ['demos/', 'extra/*.pt']
        """
        return [p.strip() for p in str(self.demos or "").split(",") if p.strip()]

    def with_(self, **kwargs: Any) -> TrainConfig:
        """Copy with some settings changed (validated again).

        Settings this config was not given are resolved again for the copy (task defaults,
        loss preset), so ``TrainConfig().with_(preset="XS").loss_preset == "sheeprl"`` and
        ``TrainConfig().with_(task="catch").batch_size == 16``.
        """
        given = {k: getattr(self, k) for k in self._given}
        return type(self)(**{**given, **kwargs})


@functools.cache
def _hints() -> dict[str, Any]:
    return get_type_hints(TrainConfig)


def field_docs(cls: type = TrainConfig) -> dict[str, str]:
    """The docstring under each field of a dataclass (``{name: text}``), read from its source:
    what the generated command line shows as each flag's help.

    Example:
        >>> field_docs(TrainConfig)["num_envs"]
        'Consoles (envs) stepped together.'
    """
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
    return docs


def _task_noop_max(task: str, task_obj: Any = None) -> int | None:
    """The task's own ``default_noop_max`` (a spec's ``start.noop_max``), or None."""
    if task_obj is not None:
        return getattr(task_obj, "default_noop_max", None)
    from torchrl_dreamer.envs import task_class

    return getattr(task_class(task), "default_noop_max", None)


def task_train_defaults(task: str, task_obj: Any = None) -> dict[str, Any]:
    """The training defaults of ``task`` (its ``train_defaults``; of ``task_obj`` when given, e.g.
    a task built from a spec file), checked against the fields of :class:`TrainConfig`.

    Example:
        >>> task_train_defaults("maze-sparse")
        {'replay_ratio': 0.08, 'frame_skip': 24, 'batch_size': 16, 'decode_stride': 1}
    """
    if task_obj is not None:
        source = type(task_obj)
        defaults = dict(task_obj.train_defaults)
    elif task.startswith("gym:"):
        from torchrl_dreamer.trainers.gym_env import DeferredResetGymEnv as source
    else:
        from torchrl_dreamer.envs import task_class

        source = task_class(task)
    if task_obj is None:
        defaults = dict(source.train_defaults)
    names = {f.name for f in dataclasses.fields(TrainConfig)} - {"task"}
    unknown = sorted(set(defaults) - names)
    if unknown:
        raise ConfigError(
            f"{source.__name__}.train_defaults sets {unknown}, which are not TrainConfig settings; "
            f"use names from {sorted(names)}."
        )
    return defaults


# Settings that must match between a checkpoint and the run resuming it (the rest may change,
# e.g. total_steps to train longer, or the progress bar).
IDENTITY_KEYS = ("task", "preset", "loss_preset", "gamma", "entropy_coef", "num_envs",
                 "batch_size", "seq_len", "frame_skip", "steps_per_rollout", "commit_stride",
                 "replay_ratio", "learning_starts", "seed")


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
