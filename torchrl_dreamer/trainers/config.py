"""``TrainConfig``: every setting of a training run as one tree of sections, validated, with the
task's defaults.

The settings themselves (type, default, docstring) are the fields of the sections of
:mod:`torchrl_dreamer.collectors.settings` (``env``, ``replay``, ``model``, ``loss``,
``learner``, ``collector``, ``ray``, ``run``, ``eval``); a ``TrainConfig`` holds one frozen
instance of each, with every default resolved to the value the run uses. The command line
(``python -m torchrl_dreamer.train``, ``--replay.seq-len`` or its flat alias ``--seq-len``) is
generated from them, and each part of the run reads its own section (``cfg.replay.seq_len``).
The collector's and the Ray job's flat configs take the settings they share from the same
fields (:func:`~torchrl_dreamer.collectors.settings.takes_settings`) and their values from the
run (:meth:`TrainConfig.collector_config`, :func:`torchrl_dreamer.distributed.ray_config`).

Flat names (``batch_size``, ``replay_capacity``) remain the names of settings outside the tree:
``TrainConfig(batch_size=8)``, ``cfg.batch_size``, a task's ``train_defaults``, a spec's
``train:``, YAML/JSON files (which may also be nested by section) and checkpoints all go through
the one mapping :data:`~torchrl_dreamer.collectors.settings.FLAT`. Settings are layered as
overlays: field defaults < :data:`GAME_TRAIN_DEFAULTS` (Game Boy tasks) < the task's
``train_defaults`` < a config file < the command line, each holding only what it changes.
Unknown task / preset / device / backend fail here, with a message saying what to pass
instead, before anything expensive (the Warp kernel compile) happens.

Units: ``total_steps``, ``learning_starts`` and ``checkpoint_every`` count *policy steps* (one
action of one env, sheeprl's unit); ``replay_capacity`` counts policy steps too (the ring holds
``replay_capacity // num_envs`` rows of ``num_envs`` envs); ``replay_ratio`` is gradient steps per
policy step.

Example:
    >>> cfg = TrainConfig(task="catch", total_steps=2000)
    >>> cfg.env.num_envs, cfg.replay.seq_len, cfg.replay.ratio
    (16, 32, 0.2)
    >>> cfg.seq_len == cfg.replay.seq_len  # the flat name reads the same field
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.collectors.settings import (
    BACKENDS,
    FLAT,
    REPLAY_BACKINGS,
    SECTIONS,
    CollectorSection,
    EnvSection,
    EvalSection,
    LearnerSection,
    LossSection,
    ModelSection,
    RaySection,
    ReplaySection,
    RunSection,
    UnknownSettingError,
    check_settings,
    flat_defaults,
    flatten_settings,
    identity_settings,
    setting_docs,
)
from torchrl_dreamer.emulator import DEFAULT_PPU, PPU_MODES
from torchrl_dreamer.envs.actions import GAME_FRAME_SKIP, default_press_frames
from torchrl_dreamer.envs.gameboy import GAME_NOOP_MAX
from torchrl_dreamer.objectives.representations import trains_decoder

__all__ = [
    "TrainConfig",
    "GAME_TRAIN_DEFAULTS",
    "HORIZON_SECONDS",
    "game_discount",
    "game_replay_ratio",
    "GAME_FRAMES_PER_UPDATE",
    "parse_duration",
    "ConfigError",
    "BACKENDS",
    "REPLAY_BACKINGS",
    "default_loss_preset",
    "field_docs",
    "redundant_settings",
    "task_overlay",
    "task_train_defaults",
]


class ConfigError(ValueError):
    """A training setting is invalid; the message names the setting and what to use instead."""


GAME_TRAIN_DEFAULTS: dict[str, Any] = {"frame_skip": GAME_FRAME_SKIP, "noop_max": GAME_NOOP_MAX,
                                       "batch_size": 8, "entropy_coef": 5e-3, "decode_stride": 2,
                                       "imagine_last": 16, "eval_policy": "best",
                                       "representation": "contrastive"}
"""Settings every Game Boy task trains with unless it or the run says otherwise (a task's
``train_defaults``, a spec's ``train:``, then the command line override them), chosen from
measurements across games: a decision every 8 frames (24 is too coarse for action games), up to
30 random no-op frames (varied starts), batch 8 at replay ratio 0.1 (more updates per CPU
minute), entropy 5e-3 (past a game's first trick), every second frame decoded (for a run
that keeps the decoder) and imagination
from the last 16 steps of each sequence (1.3x the updates per minute), and a final evaluation
of the best stretch's weights when they beat the last ones (``eval_policy="best"``: a run that
learns a trick and loses it again is measured with it), and no decoder
(``representation="contrastive"``: the latent learns the screen by contrast, 1.15-1.2x the
updates per minute and more learned per update). Two settings follow the
step length instead: the discount (:func:`game_discount`) and the replay ratio
(:func:`game_replay_ratio`, 0.1 at 8 frames). The measurements behind each value:
``docs/decisions/training_defaults.md``."""


FINISH_RESERVE_S = 30.0
"""Seconds a time-limited run keeps for building the evaluation env and the last checkpoint."""

UNBOUNDED_STEPS = 10**15
"""``total_steps`` of a run ended by its ``time_limit`` alone."""

MAX_AUTO_THREADS = 8
"""Most torch threads an unset ``threads`` takes on the CPU: a guard against hundreds of
threads on a many-core host, not a measured best. What was measured is every core of a 2-core
machine: two threads make a Tobu Tobu Girl update 74-85 ms against about 117 ms with one
(``docs/training.md``, "Threads")."""
MAX_AUTO_THREADS_CUDA = 4
"""Most torch threads an unset ``threads`` takes beside a CUDA learner (host-side work only)."""

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


GAME_FRAMES_PER_UPDATE = 80
"""Game frames of experience (policy steps x ``frame_skip``) a Game Boy task collects per
gradient step when ``replay_ratio`` is unset (:func:`game_replay_ratio`). Measured in one-hour
runs: at 8 frames a step snake ate 3.81 foods per episode with 80 (replay ratio 0.1), 2.47 with
160 and 1 with 40; at 4 frames Tobu Tobu Girl climbed to 46.1 and 43.9 (two seeds) with 80
(0.05), against 39.2-42.7 over three seeds with 40; at 24 frames Pandora's Blocks scored 20.75
and 20.41 (two seeds) with 80 (0.3), against 16.0-20.0 over three seeds with 240
(``docs/learning_results.md``, "The replay ratio follows the step")."""


def game_replay_ratio(frame_skip: int, frames_per_update: float = GAME_FRAMES_PER_UPDATE) -> float:
    """Gradient steps per policy step that train once per ``frames_per_update`` frames of game
    collected, at ``frame_skip`` frames per step: the learner sees the same game time per update
    at any step length, as :func:`game_discount` keeps the same horizon.

    Example:
        >>> game_replay_ratio(8), game_replay_ratio(4), game_replay_ratio(24)
        (0.1, 0.05, 0.3)
    """
    return float(frame_skip) / float(frames_per_update)


def _game_layer(own: dict[str, Any]) -> dict[str, Any]:
    """The Game Boy layer beneath a task's (and a run's) own settings ``own`` (flat names):
    :data:`GAME_TRAIN_DEFAULTS` for what ``own`` leaves out, and the replay ratio of the
    resulting frame skip (:func:`game_replay_ratio`) unless ``own`` sets one."""
    layer = {k: v for k, v in GAME_TRAIN_DEFAULTS.items() if k not in own}
    if "replay_ratio" not in own:
        layer["replay_ratio"] = game_replay_ratio({**layer, **own}["frame_skip"])
    return layer


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
    """The loss preset a run gets when it names none (see :attr:`TrainConfig.loss_preset`).

    Example:
        >>> default_loss_preset("tiny-wide", "snake"), default_loss_preset("S", "snake")
        ('fast-pixels', 'sheeprl')
    """
    from torchrl_dreamer.modules import CPU_PRESETS

    if preset not in CPU_PRESETS:
        return "sheeprl"
    return "fast" if str(task).startswith("gym:") else "fast-pixels"




def _spec_task(v: dict[str, Any]) -> Any:
    """The task of ``task_spec`` (validated: a bad spec or a ROM it does not fit fails here,
    before any console is built), or None."""
    if v.get("task_spec") is None:
        return None
    from torchrl_dreamer.emulator.cartridge import load_rom_bytes, parse_cartridge
    from torchrl_dreamer.envs import TaskMismatchError, TaskSpecError, load_task_spec

    rom = v.get("rom")
    if rom is None:
        raise ConfigError("--task-spec needs --rom PATH: the game's ROM file.")
    if not Path(rom).is_file():
        raise ConfigError(f"ROM {rom} not found; pass --rom PATH to a .gb file you own.")
    try:
        task = load_task_spec(v["task_spec"], rom=rom)
        # (dmg_only=False: a Color-only ROM runs on the Color, which GameBoyEnv picks for it)
        task.check_cartridge(parse_cartridge(load_rom_bytes(rom), check=False, dmg_only=False))
    except (TaskSpecError, TaskMismatchError) as err:
        raise ConfigError(str(err)) from None
    return task


def _resolve(given: dict[str, Any]) -> dict[str, Any]:
    """Every setting's value (flat names) of a run given the settings ``given`` (no ``None``):
    the task's training defaults, then :data:`GAME_TRAIN_DEFAULTS` for Game Boy tasks, then the
    field defaults, then those that follow other settings (loss preset, learning rates,
    discount, entropy bonus, decode stride, PPU mode); devices normalised."""
    from torchrl_dreamer.modules import PRESETS
    from torchrl_dreamer.objectives import LEARNER_PRESETS, LOSS_PRESETS

    v = {**flat_defaults(), **given}
    spec_task = _spec_task(v)
    if spec_task is None:
        check_task(v["task"])
    elif "task" not in given:
        v["task"] = spec_task.name
    task_defaults = task_train_defaults(v["task"], spec_task)
    for name, value in task_defaults.items():
        if name not in given:
            v[name] = value
    is_game = not str(v["task"]).startswith("gym:")
    if is_game:
        own = {k: v[k] for k in (*given, *task_defaults)}  # the run's or the task's own
        noop = _task_noop_max(v["task"], spec_task)
        if noop is not None and "noop_max" not in own:
            own["noop_max"] = v["noop_max"] = noop
        v.update(_game_layer(own))
    else:
        v["frame_skip"] = 1 if v["frame_skip"] is None else v["frame_skip"]
        v["noop_max"] = 0 if v["noop_max"] is None else v["noop_max"]
    if v["press_frames"] is None:
        v["press_frames"] = default_press_frames(v["frame_skip"])
    if v["time_limit"] is not None and "total_steps" not in given:
        v["total_steps"] = UNBOUNDED_STEPS  # the clock alone ends the run
    if v["preset"] not in PRESETS:
        raise ConfigError(
            f"unknown preset {v['preset']!r}; choose one of {sorted(PRESETS)} "
            "(tiny and tiny-wide are the CPU presets)."
        )
    if v["loss_preset"] is None:
        v["loss_preset"] = default_loss_preset(v["preset"], v["task"])
    if v["loss_preset"] not in LOSS_PRESETS:
        raise ConfigError(
            f"unknown loss preset {v['loss_preset']!r}; choose one of {sorted(LOSS_PRESETS)}."
        )
    preset = LOSS_PRESETS[v["loss_preset"]]
    if v["gamma"] is None:
        v["gamma"] = game_discount(v["frame_skip"]) if is_game else preset.gamma
    # the rest of the loss section and the learning rates: the presets'
    sources = {"loss": preset, "learner": LEARNER_PRESETS[v["loss_preset"]]}
    for flat, (section, name) in FLAT.items():
        source = sources.get(section)
        if source is not None and v[flat] is None and hasattr(source, name):
            v[flat] = getattr(source, name)
    if v["ppu"] is None:
        v["ppu"] = DEFAULT_PPU
    v["device"] = str(check_device(v["device"]))
    if v["env_device"] is not None:
        v["env_device"] = str(check_device(v["env_device"]))
    return v


@dataclasses.dataclass(frozen=True, init=False)
class TrainConfig:
    """One training run: a frozen tree of sections, every default resolved.

    Build it from flat names (``TrainConfig(batch_size=8)``), dotted paths
    (``TrainConfig(**{"replay.batch_size": 8})``) or sections (``TrainConfig(replay={"batch_size":
    8})`` or a :class:`~torchrl_dreamer.collectors.settings.ReplaySection`); an unknown name
    raises :class:`ConfigError` listing the settings. A setting that is not given (or ``None``)
    takes the task's training default (:attr:`torchrl_dreamer.envs.Task.train_defaults`), else
    :data:`GAME_TRAIN_DEFAULTS` for a Game Boy task, else its field default. Each part reads
    its section (``cfg.replay``, ``cfg.loss``, ...); ``cfg.batch_size`` reads the same field by
    its flat name. :meth:`to_dict` is the flat record a checkpoint stores and compares on
    ``--resume``; :meth:`to_tree` the same by section.

    Example:
        >>> cfg = TrainConfig(task="maze", total_steps=2000)
        >>> cfg.replay.batch_size, cfg.replay.ratio, cfg.loss.gamma   # the maze's defaults
        (8, 0.18, 0.98)
        >>> cfg.with_(batch_size=16).replay.batch_size
        16
        >>> TrainConfig(replay={"seq_len": 16}) == TrainConfig(seq_len=16)
        True
    """

    env: EnvSection
    replay: ReplaySection
    model: ModelSection
    loss: LossSection
    learner: LearnerSection
    collector: CollectorSection
    ray: RaySection
    run: RunSection
    eval: EvalSection

    def __init__(self, **settings: Any) -> None:
        flat = overlay_settings(settings, "TrainConfig")
        given = {k: v for k, v in flat.items() if v is not None}
        # a given value is judged by its setting's rule before any default follows from it
        check_settings("TrainConfig", _Values(given), given, ConfigError)
        values = _resolve(given)
        fields: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        for name, (section, field) in FLAT.items():
            fields[section][field] = values[name]
        for name, cls in SECTIONS.items():
            object.__setattr__(self, name, cls(**fields[name]))
        object.__setattr__(self, "_given", frozenset(given))
        self.validate()

    def __getattr__(self, name: str) -> Any:
        """A setting by its flat name (``cfg.batch_size`` is ``cfg.replay.batch_size``)."""
        where = FLAT.get(name)
        section = self.__dict__.get(where[0]) if where is not None else None
        if section is None:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}")
        return getattr(section, where[1])

    @property
    def given(self) -> frozenset[str]:
        """The flat names of the settings this config was given (the others were resolved, and
        are resolved again by :meth:`with_`)."""
        return self._given

    @property
    def is_game(self) -> bool:
        """Whether the run trains on a Game Boy task (not a ``gym:`` env)."""
        return not str(self.env.task).startswith("gym:")

    @property
    def time_limit_s(self) -> float | None:
        """``time_limit`` in seconds (``None``: no limit)."""
        return parse_duration(self.run.time_limit, "time_limit")

    @property
    def eval_time_limit_s(self) -> float:
        """``eval_time_limit`` in seconds."""
        return float(parse_duration(self.eval.time_limit, "eval_time_limit"))

    @property
    def consoles_device(self) -> str:
        """The env's device: ``env_device``, else ``device``."""
        return self.env.device or self.run.device

    @property
    def torch_threads(self) -> int:
        """The training process's torch intra-op threads: ``threads``, else every core the
        process may use, at most :data:`MAX_AUTO_THREADS` (:data:`MAX_AUTO_THREADS_CUDA` with
        a CUDA learner).

        Example:
            >>> TrainConfig(threads=3).torch_threads
            3
            >>> 1 <= TrainConfig().torch_threads <= MAX_AUTO_THREADS
            True
        """
        if self.run.threads is not None:
            return self.run.threads
        cap = MAX_AUTO_THREADS if self.run.device == "cpu" else MAX_AUTO_THREADS_CUDA
        return max(1, min(usable_cores(), cap))

    @property
    def steps_bounded(self) -> bool:
        """Whether ``total_steps`` ends the run (``False``: only ``time_limit`` does)."""
        return self.run.total_steps < UNBOUNDED_STEPS

    def training_deadline(self, start: float) -> float | None:
        """The ``time.perf_counter()`` value at which training must stop for a run whose clock
        started at ``start``: ``time_limit`` less the final evaluations' bounds (greedy, and
        sampled with ``eval_sampled``; ``eval_policy="best"``'s duel) and
        :data:`FINISH_RESERVE_S` for the last checkpoint (``None``: no time limit)."""
        limit = self.time_limit_s
        if limit is None:
            return None
        return start + max(0.0, limit - self.time_reserve_s)

    @property
    def final_evaluations(self) -> int:
        """How many ``eval_time_limit`` bounds the run's end may take: the greedy evaluation,
        the sampled one with ``eval_sampled`` and the duel of ``eval_policy="best"`` (its two
        sides half a bound each); none with ``eval_episodes`` 0."""
        if self.eval.episodes <= 0:
            return 0
        return 1 + int(self.eval.sampled) + int(self.eval.policy == "best")

    @property
    def time_reserve_s(self) -> float:
        """Seconds of ``time_limit`` kept back from training: the final evaluations' bounds
        and :data:`FINISH_RESERVE_S`."""
        return FINISH_RESERVE_S + self.final_evaluations * self.eval_time_limit_s

    def _reserve_text(self) -> str:
        return (f"{self.final_evaluations} final evaluation(s) of up to "
                f"{self.eval_time_limit_s:.0f} s and {FINISH_RESERVE_S:.0f} s for the last "
                f"checkpoint take {self.time_reserve_s:.0f} s")

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad setting."""
        check_settings("TrainConfig", self, FLAT, ConfigError)  # each setting's one rule
        if self.ppu not in PPU_MODES:
            raise ConfigError(f"unknown ppu {self.ppu!r}; choose one of {', '.join(PPU_MODES)}.")
        if self.rom is not None and not Path(self.rom).is_file():
            raise ConfigError(
                f"ROM {self.rom} not found; pass --rom PATH to a .gb file you own (games other than "
                "the shipped maze and catch are never bundled)."
            )
        if self.backend == "cuda" and not self.device.startswith("cuda"):
            raise ConfigError("backend='cuda' needs --device cuda; use 'threaded' on the CPU.")
        if self.backend == "cuda-twin" and not self.device.startswith("cpu"):
            raise ConfigError("backend='cuda-twin' runs the cuda backend's code path on the CPU: "
                              "use --device cpu (or --backend cuda on a GPU).")
        if self.replay_backing == "memmap" and not self.device.startswith("cpu"):
            raise ConfigError("replay_backing='memmap' keeps the replay in host files: use --device cpu "
                              "or --replay-backing memory.")
        if self.press_frames > self.frame_skip:
            raise ConfigError(
                f"press_frames={self.press_frames} exceeds frame_skip={self.frame_skip}: a step "
                "holds its buttons for at most its own frames. Lower --press-frames or raise "
                "--frame-skip.")
        if self.video_every and not trains_decoder(self.representation):
            raise ConfigError(
                f"video_every draws the world model's reconstructions, and representation="
                f"{self.representation!r} trains no decoder: leave --video-every at 0, or use "
                "--representation decoder.")
        if self.noop_max and not self.is_game:
            raise ConfigError(f"noop_max applies to Game Boy tasks only; task {self.task!r} has "
                              "no frames to skip: leave it unset or 0.")
        limit = self.time_limit_s  # parses (and so checks) the durations
        self.eval_time_limit_s  # noqa: B018
        training = None if limit is None else limit - self.time_reserve_s
        if training is not None and training <= 0:
            raise ConfigError(
                f"time_limit={self.time_limit!r} ({limit:.0f} s) leaves no time to train: "
                f"{self._reserve_text()} of it. Raise --time-limit, or shorten "
                "--eval-time-limit (or --eval-episodes 0 / --no-eval-sampled).")
        if training is not None and training < 0.5 * limit:
            warnings.warn(
                f"time_limit={self.time_limit!r} trains for {training:.0f} s at most: "
                f"{self._reserve_text()} of the {limit:.0f} s.", stacklevel=2)
        if self.env_device is not None:
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
        overlaid by every field of the run's ``loss`` section that the loss config has by the
        same name (``gamma``, ``entropy_coef``, ``decode_stride``; a loss setting added to the
        section reaches the losses with nothing else to change)."""
        from torchrl_dreamer.objectives import LOSS_PRESETS

        return _overlay(LOSS_PRESETS[self.loss.preset], self.loss)

    def learner_config(self) -> Any:
        """The run's :class:`~torchrl_dreamer.objectives.DreamerV3LearnerConfig` (optimizers):
        the learner preset of ``loss_preset``'s name overlaid by every field of the run's
        ``learner`` section that the learner config has by the same name (the learning rates
        ``wm_lr``, ``actor_lr``, ``critic_lr``, resolved to the preset's when unset).

        Example:
            >>> cfg = TrainConfig(task="maze", actor_lr=3e-4)
            >>> cfg.learner_config().actor_lr, cfg.learner_config().critic_lr
            (0.0003, 0.0003)
        """
        from torchrl_dreamer.objectives import LEARNER_PRESETS

        return _overlay(LEARNER_PRESETS[self.loss.preset], self.learner)

    @property
    def capacity_rows(self) -> int:
        """Ring rows of the replay (each row holds one step of every env):
        :func:`~torchrl_dreamer.data.ring_rows` of ``replay_capacity``."""
        from torchrl_dreamer.data import ring_rows

        return ring_rows(self.replay.capacity, self.env.num_envs, self.replay.seq_len,
                         self.collector.commit_stride)

    def shared_settings(self, config_cls: type) -> dict[str, Any]:
        """This run's values of the run settings the flat config ``config_cls`` takes
        (``config_cls.run_settings``: the fields
        :func:`~torchrl_dreamer.collectors.settings.takes_settings` gave it; for another
        dataclass, its fields named like a setting): the one path by which ``seq_len``,
        ``batch_size``, ``replay_ratio`` and the others reach the collector's and the Ray job's
        configs.

        Example:
            >>> from torchrl_dreamer.collectors import AsyncCollectorConfig
            >>> shared = TrainConfig(task="catch", seq_len=16).shared_settings(AsyncCollectorConfig)
            >>> shared["seq_len"], shared["batch_size"], shared["replay_ratio"]
            (16, 16, 0.2)
        """
        names = getattr(config_cls, "run_settings", None)
        if names is None:
            names = [f.name for f in dataclasses.fields(config_cls) if f.init and f.name in FLAT]
        return {name: getattr(self, name) for name in names}

    def collector_config(self) -> Any:
        """The :class:`~torchrl_dreamer.collectors.AsyncCollectorConfig` of this run: its
        :meth:`shared_settings`, the sampling margins at ``seq_len``, and ``ray`` running its
        collection through the ``reference`` loop's settings."""
        from torchrl_dreamer.collectors import AsyncCollectorConfig

        return AsyncCollectorConfig(**{
            **self.shared_settings(AsyncCollectorConfig),
            "min_ready_steps": self.replay.seq_len, "safety_margin": self.replay.seq_len,
            "backend": self.collector.backend if self.collector.backend != "ray" else "reference",
        })

    def to_dict(self) -> dict[str, Any]:
        """Every setting by its flat name (JSON-friendly): what a run logs and a checkpoint
        stores (:meth:`from_dict` reads it back, as it reads :meth:`to_tree`)."""
        return {name: getattr(getattr(self, s), f) for name, (s, f) in FLAT.items()}

    def to_tree(self) -> dict[str, dict[str, Any]]:
        """Every setting by section: ``{"replay": {"seq_len": 32, ...}, ...}``.

        Example:
            >>> TrainConfig().to_tree()["replay"]["capacity"]
            100000
        """
        return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """A config of flat, dotted or nested settings (:meth:`to_dict`, :meth:`to_tree`, a
        YAML file, an older checkpoint's flat record); unknown keys raise :class:`ConfigError`."""
        return cls(**d)

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> TrainConfig:
        """Load a YAML (or JSON) config file, then apply ``overrides`` (e.g. from the CLI)."""
        data = overlay_settings(read_config_file(path), str(path))
        data.update(overlay_settings({k: v for k, v in overrides.items() if v is not None}))
        return cls.from_dict(data)

    @property
    def demo_paths(self) -> list[str]:
        """The entries of ``demos`` (split at commas; empty without ``demos``).

        Example:
            >>> TrainConfig(demos="demos/, extra/*.pt").demo_paths
            ['demos/', 'extra/*.pt']
        """
        return [p.strip() for p in str(self.replay.demos or "").split(",") if p.strip()]

    def with_(self, **kwargs: Any) -> TrainConfig:
        """Copy with some settings changed (flat, dotted or by section; validated again).

        Settings this config was not given are resolved again for the copy (task defaults,
        loss preset), so ``TrainConfig().with_(preset="XS").loss_preset == "sheeprl"`` and
        ``TrainConfig().with_(task="catch").batch_size == 16``.
        """
        given = {k: getattr(self, k) for k in self._given}
        return type(self)(**{**given, **overlay_settings(kwargs, "with_")})


def overlay_settings(settings: dict[str, Any], source: str = "settings") -> dict[str, Any]:
    """``settings`` (flat, dotted or nested by section) by flat name; an unknown key raises
    :class:`ConfigError` naming ``source`` and listing the settings. The one translation of a
    settings layer (config file, checkpoint record, command line) before layers are merged.

    Example:
        >>> overlay_settings({"replay": {"seq_len": 16}, "seed": 3})
        {'seq_len': 16, 'seed': 3}
    """
    try:
        return flatten_settings(settings, source)
    except UnknownSettingError as err:
        if not err.unknown:  # a section that is not a mapping
            raise ConfigError(str(err)) from None
        raise ConfigError(f"unknown config keys {err.unknown} in {source}; valid keys: "
                          f"{sorted(FLAT)} (or section.field, e.g. replay.batch_size).") from None


def _overlay(preset: Any, section: Any) -> Any:
    """``preset`` (a frozen config with ``with_``) overlaid by every set field of the run's
    ``section`` that it has by the same name: how a run's loss and learner sections reach
    the loss and learner configs."""
    own = {f.name for f in dataclasses.fields(preset)}
    return preset.with_(**{f.name: getattr(section, f.name) for f in dataclasses.fields(section)
                           if f.name in own and getattr(section, f.name) is not None})


class _Values:
    """Settings given by flat name, read as attributes (what :func:`check_settings` reads)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def field_docs(cls: type = TrainConfig) -> dict[str, str]:
    """The docstring of each setting, by flat name, for ``TrainConfig`` (what the generated
    command line shows as each flag's help); for a section class, its fields' docstrings.

    Example:
        >>> field_docs(TrainConfig)["num_envs"]
        'Consoles (envs) stepped together.'
    """
    docs = setting_docs()
    if cls is TrainConfig:
        return dict(docs)
    return {f.name: docs[n] for n, (s, f_name) in FLAT.items() for f in dataclasses.fields(cls)
            if SECTIONS[s] is cls and f.name == f_name}


def redundant_settings(overlay: dict[str, Any], build: Any) -> list[str]:
    """The keys of an ``overlay`` (a config file, a task's ``train_defaults``) that change
    nothing: ``build(overlay without the key)`` resolves that setting to the same value. An
    overlay holds only differences from the defaults beneath it, so this is empty for every
    shipped one (``test/trainers/test_run_tree.py``).

    Example:
        >>> redundant_settings({"seq_len": 32, "seed": 3}, lambda d: TrainConfig(**d))
        ['seq_len']
    """
    flat = overlay_settings(overlay)
    out = []
    for key, value in flat.items():
        rest = {k: v for k, v in flat.items() if k != key}
        if getattr(build(rest), key) == value:
            out.append(key)
    return out


def _task_noop_max(task: str, task_obj: Any = None) -> int | None:
    """The task's own ``default_noop_max`` (a spec's ``start.noop_max``), or None."""
    if task_obj is not None:
        return getattr(task_obj, "default_noop_max", None)
    from torchrl_dreamer.envs import task_class

    return getattr(task_class(task), "default_noop_max", None)


def task_train_defaults(task: str, task_obj: Any = None) -> dict[str, Any]:
    """The training defaults of ``task`` (its ``train_defaults``; of ``task_obj`` when given, e.g.
    a task built from a spec file): an overlay of flat (or dotted) setting names, checked against
    the settings of :class:`TrainConfig` and returned by flat name.

    Example:
        >>> task_train_defaults("maze-sparse")
        {'replay_ratio': 0.08, 'frame_skip': 24, 'batch_size': 16, 'decode_stride': 1, \
'imagine_last': 0, 'representation': 'decoder'}
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
    names = set(FLAT) - {"task"}
    try:
        flat = flatten_settings(defaults)
    except UnknownSettingError as err:
        unknown = err.unknown
    else:
        unknown = sorted(set(flat) - names)
    if unknown:
        raise ConfigError(
            f"{source.__name__}.train_defaults sets {unknown}, which are not TrainConfig settings; "
            f"use names from {sorted(names)}."
        )
    return flat


def task_overlay(task: str) -> dict[str, Any]:
    """The settings a run of ``task`` takes before its config file and command line, by flat
    name: :data:`GAME_TRAIN_DEFAULTS` (Game Boy tasks; ``noop_max`` the task's own when it has
    one, the replay ratio :func:`game_replay_ratio` of its frame skip) overlaid by the task's
    ``train_defaults`` (what ``--task X --help`` shows).

    Example:
        >>> task_overlay("maze")["batch_size"], task_overlay("maze")["replay_ratio"]
        (8, 0.18)
        >>> task_overlay("snake")["replay_ratio"]
        0.1
    """
    own = task_train_defaults(task)
    if task.startswith("gym:"):
        return own
    noop = _task_noop_max(task)
    own = {**({} if noop is None else {"noop_max": noop}), **own}
    return {**_game_layer(own), **own}


IDENTITY_KEYS: tuple[str, ...] = identity_settings()
"""Settings that must match between a checkpoint and the run resuming it: those whose field
says ``identity=True`` (:func:`~torchrl_dreamer.collectors.settings.identity_settings`)."""


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


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS tells it, else the
    machine's count).

    Example:
        >>> usable_cores() >= 1
        True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
