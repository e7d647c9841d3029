"""The run tree: every setting of a training run, defined once, in the section of the part that
reads it.

A run's settings form one nested, frozen tree (:class:`~torchrl_dreamer.trainers.TrainConfig`)
of sections, one per part of the run:

============  =====================  ======================================================
section       class                  read by
============  =====================  ======================================================
``env``       :class:`EnvSection`    the env factory (task, consoles, frames per step)
``replay``    :class:`ReplaySection` the replay ring and its sampler (the ``B x T`` batch)
``model``     :class:`ModelSection`  the networks
``loss``      :class:`LossSection`   the losses (over the loss preset)
``learner``   :class:`LearnerSection` the learner's update (precision, compile, capture)
``collector`` :class:`CollectorSection` the actor/learner loop
``ray``       :class:`RaySection`    the Ray job (``backend="ray"``)
``run``       :class:`RunSection`    the trainer (length, device, seed, logs, checkpoints)
``eval``      :class:`EvalSection`   the final evaluation
============  =====================  ======================================================

Each field is written once, here, with its type, default and docstring; everything else is
derived from it: the command line (``--replay.seq-len``, with the flat ``--seq-len`` as an
alias), the flat configs of the collector and the Ray job
(:class:`~torchrl_dreamer.collectors.AsyncCollectorConfig`,
:class:`~torchrl_dreamer.distributed.RayTrainingConfig`, which take their shared fields from
here through :func:`takes_settings`) and the help text.

**The flat mapping.** Every setting also has a *flat name*, unique across sections: the field's
name, or the ``flat=`` given to :func:`setting` where the section's name would repeat the
section (``replay.capacity`` is ``replay_capacity``). Flat names are what a task's
``train_defaults``, a spec's ``train:`` section, the YAML configs and checkpoints use, and what
``TrainConfig(batch_size=8)`` takes; :func:`flatten_settings` turns any mix of flat names,
dotted paths (``"replay.batch_size"``) and nested sections into flat names, the one place such a
translation happens, and refuses an unknown name with the list of valid ones.

The sections live in the collector layer, the lowest one that both the trainers and
``distributed`` import, and import nothing of the package, so any part can take its section.
A setting whose default depends on others (the discount, the loss preset, ...) defaults to
``None`` here and is resolved by :class:`~torchrl_dreamer.trainers.TrainConfig`.

Example:
    >>> ReplaySection().seq_len, ReplaySection().batch_size, ReplaySection().ratio
    (32, 16, 0.05)
    >>> FLAT["replay_capacity"], FLAT["seq_len"]
    (('replay', 'capacity'), ('replay', 'seq_len'))
    >>> flatten_settings({"replay": {"seq_len": 16}, "env.num_envs": 4, "seed": 3})
    {'seq_len': 16, 'num_envs': 4, 'seed': 3}
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import textwrap
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args, get_origin, get_type_hints

__all__ = [
    "BACKENDS",
    "FLAT",
    "LOGGERS",
    "PRECISIONS",
    "REPLAY_BACKINGS",
    "SECTIONS",
    "CollectorSection",
    "EnvSection",
    "EvalSection",
    "LearnerSection",
    "LossSection",
    "ModelSection",
    "RaySection",
    "ReplaySection",
    "RunSection",
    "UnknownSettingError",
    "check_settings",
    "flat_defaults",
    "flatten_settings",
    "identity_settings",
    "integer",
    "number",
    "optional",
    "section_settings",
    "setting",
    "setting_problem",
    "setting_docs",
    "setting_field",
    "takes_settings",
]

Backend = Literal["reference", "threaded", "cuda", "cuda-twin", "ray"]
ReplayBacking = Literal["memory", "memmap"]
LoggerKind = Literal["csv", "tensorboard", "both", "none"]
Precision = Literal["fp32", "bf16", "fp16"]

BACKENDS: tuple[str, ...] = get_args(Backend)
"""Collector backends; ``ray`` runs the collection on Ray (:mod:`torchrl_dreamer.distributed`)."""
REPLAY_BACKINGS: tuple[str, ...] = get_args(ReplayBacking)
"""Where the replay ring lives: in RAM (on ``device``) or in memory-mapped files under the run."""
LOGGERS: tuple[str, ...] = get_args(LoggerKind)
"""Metric loggers of a run."""
PRECISIONS: tuple[str, ...] = get_args(Precision)
"""The learner's autocast choices."""


class UnknownSettingError(ValueError):
    """A settings mapping names a setting no section has; the message lists the valid names and
    ``unknown`` holds the names refused."""

    def __init__(self, message: str, unknown: list[str] | None = None) -> None:
        super().__init__(message)
        self.unknown = list(unknown or [])


Check = Callable[[Any], "str | None"]
"""A setting's rule: ``check(value)`` is ``None`` for a valid value, else why it is not (the
``<why>`` of :func:`~torchrl_dreamer.collectors.defaults.invalid`'s message)."""


def integer(low: int | None = None, why: str = "") -> Check:
    """The rule "an integer (not a bool)", ``>= low`` when ``low`` is given; ``why`` says what
    the bound is for.

    Example:
        >>> integer(1)(0), integer(1)(2), integer(1)(2.0), integer()(-3)
        ('must be an integer >= 1.', None, 'must be an integer >= 1.', None)
        >>> integer(2, "a sequence needs one transition")(1)
        'must be an integer >= 2 (a sequence needs one transition).'
    """
    def check(value: Any) -> str | None:
        ok = (isinstance(value, int) and not isinstance(value, bool)
              and (low is None or value >= low))
        bound = "" if low is None else f" >= {low}"
        return None if ok else f"must be an integer{bound}{f' ({why})' if why else ''}."

    return check


def number(low: float, *, strict: bool = False, high: float | None = None,
           high_open: bool = False) -> Check:
    """The rule "a finite number ``>= low``" (``> low`` when ``strict``; ``<= high``, or ``<
    high`` when ``high_open``, when ``high`` is given).

    Example:
        >>> number(0)(float("inf")), number(0, strict=True, high=1)(0.0), number(0, high=1)(1)
        ('must be a finite number >= 0.', 'must lie in (0, 1].', None)
    """
    def check(value: Any) -> str | None:
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = float("nan")
        ok = (not isinstance(value, bool) and math.isfinite(v)
              and (v > low if strict else v >= low)
              and (high is None or (v < high if high_open else v <= high)))
        if ok:
            return None
        if high is None:
            return f"must be a finite number {'>' if strict else '>='} {low:g}."
        return (f"must lie in {'(' if strict else '['}{low:g}, {high:g}"
                f"{')' if high_open else ']'}.")

    return check


def optional(check: Check) -> Check:
    """``check``, with ``None`` (unset: resolved per run) also valid.

    Example:
        >>> optional(integer(1))(None), optional(integer(1))(0)
        (None, 'must be an integer >= 1.')
    """
    return lambda value: None if value is None else check(value)


def setting(default: Any, *, flat: str | None = None, check: Check | None = None,
            identity: bool = False) -> Any:
    """A section field with ``default``, its rule ``check`` (applied wherever the setting is
    given: :func:`check_settings`), whether it is part of a run's ``identity`` (a resumed run
    must keep it: :func:`identity_settings`) and, when the section's own name would repeat the
    section (``replay.capacity``), the ``flat`` name it has outside its section
    (``replay_capacity``: task defaults, YAML files, checkpoints, ``--replay-capacity``).

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass(frozen=True)
        ... class S:
        ...     capacity: int = setting(10, flat="s_capacity", check=integer(1))
        >>> dataclasses.fields(S)[0].metadata["flat"], S().capacity
        ('s_capacity', 10)
    """
    meta: dict[str, Any] = {}
    if flat:
        meta["flat"] = flat
    if check is not None:
        meta["check"] = check
    if identity:
        meta["identity"] = True
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class EnvSection:
    """The env: which task, how many consoles, where, and how many frames per step.

    Example:
        >>> EnvSection().task, EnvSection().num_envs
        ('maze', 16)
    """

    task: str = setting("maze", identity=True)
    """Registered task (``torchrl_dreamer.envs.list_tasks()``) or ``gym:<id>`` for a gymnasium
    env with vector observations (``gym:CartPole-v1``)."""
    rom: str | None = None
    """ROM path overriding the task's own (games other than the shipped ones are never bundled)."""
    task_spec: str | None = None
    """A YAML/JSON task spec file (``docs/writing_a_task.md``) to train on instead of a registered
    task: needs ``--rom``; the run's task name becomes the spec's ``name``."""
    num_envs: int = setting(16, check=integer(1), identity=True)
    """Consoles (envs) stepped together."""
    device: str | None = setting(None, flat="env_device")
    """Device of the env's consoles when it is not ``run.device`` (unset: ``run.device``).
    ``--device cuda --env-device cpu --workers K`` is the hybrid run: the consoles on K CPU
    cores, the replay, player and learner on the GPU, each step's observations copied over
    asynchronously (page-locked staging, :class:`~torchrl_dreamer.collectors.env_driver.EnvDriver`),
    for games that emulate faster on the machine's cores than on its GPU."""
    workers: int = setting(1, check=integer(1))
    """CPU cores the env's consoles are emulated on (``GameBoyEnv(workers=...)``: the console
    batch in that many slices launched together, the same observations as 1). On a 2-core
    machine the learner needs one core, so 1 is the default; raise it where cores are spare."""
    frame_skip: int | None = setting(None, check=optional(integer(1)), identity=True)
    """Emulated frames per env step (Game Boy tasks); unset: the task's, else 8
    (``GAME_TRAIN_DEFAULTS``)."""
    noop_max: int | None = setting(None, check=optional(integer(0)))
    """Random no-op frames before each episode (Game Boy tasks): every episode starts after a
    fresh draw of 0..noop_max frames with no button held, so games that seed their RNG from
    frame counters play differently each time; unset: the task's (a spec's ``start.noop_max``),
    else 30 (``GAME_TRAIN_DEFAULTS``); 0: one fixed start."""
    ppu: str | None = None
    """Emulator PPU mode (Game Boy tasks): ``fifo`` (mid-scanline register writes land on the
    right pixel) or ``line`` (whole lines; see docs/emulator.md); unset: the emulator's default
    (``torchrl_dreamer.emulator.DEFAULT_PPU``)."""


@dataclasses.dataclass(frozen=True)
class ReplaySection:
    """The replay and the batches the learner samples from it.

    Units: ``capacity`` and ``learning_starts`` count policy steps (one action of one env);
    ``seq_len`` counts env steps (replay rows); ``ratio`` is gradient steps per policy step.

    Example:
        >>> r = ReplaySection(batch_size=8)
        >>> r.batch_size * r.seq_len
        256
    """

    capacity: int = setting(100_000, flat="replay_capacity", check=integer(1))
    """Policy steps the replay holds (the oldest are overwritten first; the ring holds
    ``capacity // num_envs`` rows of ``num_envs`` envs)."""
    backing: ReplayBacking = setting("memory", flat="replay_backing")
    """``memory`` (RAM of ``device``) or ``memmap`` (files under ``<log_dir>/replay_ring``)."""
    seq_len: int = setting(32, check=integer(2, "a sequence needs one transition"), identity=True)
    """Steps per sampled sequence (``T`` of the ``T x B`` batch), in env steps (replay rows).
    Every run of ``docs/learning_results.md`` used 32; sheeprl's and DreamerV3's 64 doubles the
    cost of a ``tiny`` CPU update for sequences longer than the games' decisions need."""
    batch_size: int = setting(16, check=integer(1, "sequences per gradient step"), identity=True)
    """Sequences per gradient step (``B``). DreamerV3's 16; Game Boy tasks train with 8
    (``GAME_TRAIN_DEFAULTS``: on a CPU half the batch buys ~1.6x the updates per minute)."""
    ratio: float = setting(0.05, flat="replay_ratio", check=number(0), identity=True)
    """Gradient steps per policy step (sheeprl's ``replay_ratio``). 0.05 at B16 x T32 replays
    each collected step 25.6 times (``0.05 x 16 x 32``); the measured CPU runs used 0.05 (B16)
    or 0.1 (B8, the same replayed steps), the maze 0.18. sheeprl's 0.5 at B16 x T64 (512
    replayed steps per collected step) is ten times the learner work a CPU run can afford."""
    learning_starts: int = setting(1024, check=integer(0), identity=True)
    """Policy steps of random actions (the replay's prefill) before the first gradient step."""
    event_fraction: float = setting(0.0, check=number(0, high=1))
    """Share of each batch's sequences drawn to contain a ``terminated`` row (0: uniform starts,
    the reference DreamerV3 replay)."""
    demos: str | None = None
    """Human demonstrations to learn from (files recorded with ``python -m torchrl_dreamer.play``,
    folders of ``*.pt`` or glob patterns; several separated by commas), each checked against the
    run's ROM, action set, frame skip and task before training: loaded into their own replay,
    which every batch draws ``round(demo_share * batch_size)`` of its sequences from. On
    ``backend="ray"`` that replay is a static slot of the human replay service (never evicted,
    reloaded from the files on resume) and the router draws the same count from it
    (``docs/ray.md``, "Demonstrations")."""
    demo_share: float = setting(0.25, check=number(0, high=1))
    """Share of each batch's sequences drawn from the demonstrations (with ``demos``)."""


@dataclasses.dataclass(frozen=True)
class ModelSection:
    """The networks.

    Example:
        >>> ModelSection().preset
        'tiny'
    """

    preset: str = setting("tiny", identity=True)
    """Model size, a key of ``torchrl_dreamer.modules.PRESETS`` (``tiny`` is the CPU preset)."""


@dataclasses.dataclass(frozen=True)
class LossSection:
    """The losses: a loss preset and the settings a run overrides in it.

    Example:
        >>> LossSection().preset is None  # resolved from the model preset and the task
        True
    """

    preset: str | None = setting(None, flat="loss_preset", identity=True)
    """Loss and learner preset (``torchrl_dreamer.objectives.LOSS_PRESETS`` / ``LEARNER_PRESETS``);
    unset: ``fast-pixels`` (Game Boy tasks) or ``fast`` (``gym:`` tasks) for the ``tiny`` preset,
    ``sheeprl`` for XS..XL."""
    gamma: float | None = setting(None, check=optional(number(0, strict=True, high=1)), identity=True)
    """Discount of the imagined returns; unset: a 20-second horizon for Game Boy tasks
    (``game_discount(frame_skip)``: 0.9933 at 8 frames a step, 0.98 at 24), the loss preset's
    (DreamerV3's 1 - 1/333) for ``gym:`` tasks."""
    entropy_coef: float | None = setting(None, check=optional(number(0)), identity=True)
    """Weight of the actor's entropy bonus; unset: the loss preset's."""
    entropy_final: float | None = setting(None, check=optional(number(0)))
    """The entropy bonus's weight at the end of training; unset: ``entropy_coef`` throughout.
    Set, the weight moves from ``entropy_coef`` to it geometrically over the run's progress
    (policy steps of ``total_steps`` or the wall clock of ``time_limit``, whichever is further:
    :func:`~torchrl_dreamer.trainers.schedule.anneal`): broad exploration first, a policy whose
    greedy actions are its best ones at the end."""
    decode_stride: int | None = setting(None, check=optional(integer(1)))
    """Reconstruct every n-th step of each sampled sequence (1: all; see
    :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`); unset: the loss preset's. 2 makes
    a ``tiny`` CPU update 17 % faster, and Game Boy tasks train with 2 (``GAME_TRAIN_DEFAULTS``)."""


@dataclasses.dataclass(frozen=True)
class LearnerSection:
    """How the learner runs its update (the optimizers are the loss preset's learner preset).

    Example:
        >>> LearnerSection().precision
        'fp32'
    """

    precision: Precision = "fp32"
    """The learner's autocast: ``fp32`` (off), ``bf16`` or ``fp16``."""
    compile: str | None = None
    """``torch.compile`` mode of the learner's update (unset: eager; see
    ``torchrl_dreamer.objectives.COMPILE_MODES``). A mode the device cannot use (CUDA graphs on
    the CPU) falls back with one warning (``--strict-acceleration``: error)."""
    capture: bool = False
    """Learner copies each batch into static buffers and, on CUDA, replays its whole update as
    one captured CUDA graph (4.9x faster maze updates on an H200); on the CPU the same
    static-buffer path runs without a graph, after one warning."""
    strict_acceleration: bool = False
    """Fail instead of warning when ``compile`` / ``capture`` cannot run as asked here."""


@dataclasses.dataclass(frozen=True)
class CollectorSection:
    """The actor/learner loop: windows, commits, backpressure, logging.

    Units: ``steps_per_rollout`` and ``commit_stride`` count env steps (replay rows);
    ``pretrain_steps`` and ``max_learner_steps_per_tick`` gradient steps.

    Example:
        >>> CollectorSection().steps_per_rollout, CollectorSection().commit_stride
        (16, 8)
    """

    backend: Backend = "reference"
    """Collector backend: ``reference`` (sequential, deterministic), ``threaded``, ``cuda`` (actor
    and learner on two CUDA streams), ``cuda-twin`` (the ``cuda`` backend's code path on a CPU,
    its streams modelled on the host and every op checked against them) or ``ray`` (the
    collection on Ray actors, ``docs/ray.md``; the learner's loop then runs ``reference``'s)."""
    steps_per_rollout: int = setting(16, check=integer(1), identity=True)
    """Env steps per actor window (weights change only between windows; Ray: per chunk a runner
    sends)."""
    commit_stride: int = setting(8, check=integer(1), identity=True)
    """Env steps between commits of new rows to the learner (``<= seq_len / 2``, or the learner
    sees fresh rows in coarse bursts)."""
    log_every: int = setting(10, check=integer(1))
    """Gradient steps between metric logs (device-side metrics are read back only then)."""
    pretrain_steps: int = setting(0, check=integer(0))
    """Extra gradient steps on the first training call (sheeprl 0.8.4)."""
    max_learner_steps_per_tick: int = setting(64, check=integer(1))
    """Most gradient steps between two weight publications."""
    off_policy_tolerance: float = setting(2.0, check=number(1))
    """The actor (Ray: the runners) pauses while more than this many windows' (rounds') worth of
    owed gradient steps wait for the learner (the Atropos rule)."""
    timeout_s: float = setting(120.0, check=number(0, strict=True))
    """Longest wait on any event or without progress before failing with a diagnostic."""


@dataclasses.dataclass(frozen=True)
class RaySection:
    """The Ray job of a ``backend="ray"`` run (its envs, replay and batches follow the other
    sections: :func:`~torchrl_dreamer.distributed.ray_config`).

    Example:
        >>> RaySection().num_runners, RaySection().max_weight_lag
        (2, 8)
    """

    num_runners: int = setting(2, check=integer(1))
    """Agent env-runner actors; a run's ``num_envs`` is split evenly over them (at most
    ``num_envs`` runners)."""
    publish_every: int = setting(1, check=integer(1))
    """Gradient steps between weight publications."""
    max_weight_lag: int = setting(8, check=integer(1))
    """The learner waits before publishing while a runner is more than this many versions behind
    (bounded staleness)."""
    max_restarts: int = setting(3, check=integer(0))
    """Restarts allowed per runner after a crash before the run fails."""
    address: str | None = None
    """Ray cluster to join (unset: start a local, loopback-only cluster)."""
    num_cpus: int | None = setting(None, check=optional(integer(1)))
    """CPUs of a local cluster (unset: Ray's choice)."""


@dataclasses.dataclass(frozen=True)
class RunSection:
    """The run as a whole: its length, device, seed, directory, logs and checkpoints.

    Units: ``total_steps`` and ``checkpoint_every`` count policy steps (one action of one env,
    sheeprl's unit).

    Example:
        >>> RunSection().total_steps
        50000
    """

    device: str = "cpu"
    """Learner, replay and env device (``cpu``, ``cuda``, ``cuda:1``)."""
    seed: int = setting(0, check=integer(), identity=True)
    """Seeds torch, the env, the sampler and the random prefill."""
    total_steps: int = setting(50_000, check=integer(1))
    """Policy steps to collect (one action of one env): the run's length. The maze's target is
    met within it (``docs/learning_results.md``: >= 95 % success within 50k steps and 30 minutes
    on a 2-core CPU; the shipped config's seeds reached 99-100 % at 45-50k)."""
    time_limit: str | None = None
    """Wall-clock budget of the whole run, e.g. ``60m``, ``1h`` or ``3600`` (seconds): training
    stops in time for the final evaluation (bounded by ``eval_time_limit``) and the checkpoint
    to fit in it. With a time limit and no ``total_steps`` given, the clock alone ends training."""
    log_dir: str = "runs/dreamer"
    """Run directory: logs, checkpoints, GIFs."""
    checkpoint_every: int = setting(10_000, check=integer(0))
    """Policy steps between checkpoints (0: only at the end)."""
    checkpoint_replay: bool = True
    """Store the replay in checkpoints (exact resume; costs disk)."""
    threads: int = setting(1, check=integer(1))
    """Torch intra-op threads of the training process on CPU."""
    video_every: int = setting(0, check=integer(0))
    """Policy steps between world-model open-loop videos during training (0: none): real |
    reconstruction | imagination of 4 replay windows, as ``<log_dir>/videos/wm_step_<N>.mp4``
    (GIF without ffmpeg) and as TensorBoard video when that logger is on."""
    logger: LoggerKind = "csv"
    """Metric logs: ``csv``, ``tensorboard``, ``both`` or ``none``."""
    progress: bool = True
    """Show a progress bar."""


@dataclasses.dataclass(frozen=True)
class EvalSection:
    """The final evaluation of a run.

    Example:
        >>> EvalSection().episodes, EvalSection().sampled
        (32, True)
    """

    episodes: int = setting(32, flat="eval_episodes", check=integer(0))
    """Episodes of the final evaluation (0: none), played at once in as many envs."""
    time_limit: str = setting("1m", flat="eval_time_limit")
    """Wall-clock bound of the final evaluation (seconds or ``90s``/``5m``): episodes still
    running then are reported as unfinished (with their partial returns), never waited for."""
    max_steps: int = setting(5000, flat="eval_max_steps", check=integer(1))
    """Env steps an evaluation episode may last at most (a greedy policy that pauses the game
    would otherwise run to the episode limit)."""
    sampled: bool = setting(True, flat="eval_sampled")
    """After the greedy final evaluation, play as many episodes again with sampled actions (the
    policy as it trains): a puzzle's key sequence can come out of the samples but not out of
    each step's mode (PostBot, 2026-11-26: 5 of 32 sampled episodes solved, none greedy).
    Reported as ``eval_sampled_*``, bounded by ``eval_time_limit`` as well."""


SECTIONS: dict[str, type] = {
    "env": EnvSection,
    "replay": ReplaySection,
    "model": ModelSection,
    "loss": LossSection,
    "learner": LearnerSection,
    "collector": CollectorSection,
    "ray": RaySection,
    "run": RunSection,
    "eval": EvalSection,
}
"""The sections of a run, by their name in the tree (and in dotted flags: ``--replay.seq-len``)."""


def _flat_name(f: dataclasses.Field) -> str:
    return f.metadata.get("flat", f.name)


def _build_flat() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            name = _flat_name(f)
            if name in out or name in SECTIONS:
                raise AssertionError(f"flat setting name {name!r} of {section}.{f.name} is not "
                                     f"unique (also {out.get(name)}); give it another flat=.")
            out[name] = (section, f.name)
    return out


FLAT: dict[str, tuple[str, str]] = _build_flat()
"""The one mapping between flat names and the tree: ``{flat name: (section, field)}``. A flat
name is unique across sections (checked when this module is imported)."""

_DOTTED: dict[str, str] = {f"{s}.{f}": flat for flat, (s, f) in FLAT.items()}


def section_settings(section: str) -> tuple[str, ...]:
    """The flat names of every setting of ``section``, in field order: what a flat config that
    is a section's consumer takes whole (``takes_settings(*section_settings("collector"))``), so
    a setting added to the section reaches it with nothing else to change.

    Example:
        >>> section_settings("eval")
        ('eval_episodes', 'eval_time_limit', 'eval_max_steps', 'eval_sampled')
    """
    return tuple(_flat_name(f) for f in dataclasses.fields(SECTIONS[section]))


def setting_field(name: str) -> dataclasses.Field:
    """The section field of the setting ``name`` (flat or dotted).

    Example:
        >>> setting_field("replay_ratio").default
        0.05
    """
    flat = _DOTTED.get(name, name)
    section, field = FLAT[flat]
    return next(f for f in dataclasses.fields(SECTIONS[section]) if f.name == field)


def identity_settings() -> tuple[str, ...]:
    """The flat names of the settings that define what a run trains (``setting(...,
    identity=True)``): a checkpoint resumes only under the same values (the others, e.g.
    ``total_steps`` to train longer or the progress bar, may change).

    Example:
        >>> "batch_size" in identity_settings(), "total_steps" in identity_settings()
        (True, False)
    """
    return tuple(n for n in FLAT if setting_field(n).metadata.get("identity"))


def flat_defaults() -> dict[str, Any]:
    """Every setting's field default, by flat name (``None``: resolved per run).

    Example:
        >>> flat_defaults()["seq_len"], flat_defaults()["gamma"]
        (32, None)
    """
    return {flat: setting_field(flat).default for flat in FLAT}


def flatten_settings(settings: Mapping[str, Any], source: str = "settings") -> dict[str, Any]:
    """Flat names of a settings mapping whose keys are flat names (``batch_size``), dotted
    paths (``replay.batch_size``) or sections (``replay: {batch_size: 8}``, or a section
    instance); a later key for the same setting wins.

    Raises:
        UnknownSettingError: a key or a section's key is no setting; the message names
            ``source`` and lists the valid names.

    Example:
        >>> flatten_settings({"replay": ReplaySection(batch_size=8)})["batch_size"]
        8
        >>> flatten_settings({"batchsize": 8}, "my.yaml")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        torchrl_dreamer.collectors.settings.UnknownSettingError: my.yaml sets ['batchsize'], which are not run settings; use flat names from [...'batch_size'...] or dotted ones (replay.batch_size).
    """
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in settings.items():
        if key in SECTIONS:
            if isinstance(value, SECTIONS[key]):
                value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            if not isinstance(value, Mapping):
                raise UnknownSettingError(
                    f"{source}: section {key!r} must be a mapping of its settings (e.g. "
                    f"{key}: {{...}}), got {type(value).__name__}.")
            for field, v in value.items():
                dotted = f"{key}.{field}"
                if dotted in _DOTTED:
                    out[_DOTTED[dotted]] = v
                else:
                    unknown.append(dotted)
        elif key in FLAT:
            out[key] = value
        elif key in _DOTTED:
            out[_DOTTED[key]] = value
        else:
            unknown.append(key)
    if unknown:
        raise UnknownSettingError(
            f"{source} sets {sorted(unknown)}, which are not run settings; use flat names from "
            f"{sorted(FLAT)} or dotted ones (replay.batch_size).", sorted(unknown))
    return out


@functools.cache
def _hint(name: str) -> Any:
    section, field = FLAT[name]
    return get_type_hints(SECTIONS[section])[field]


def setting_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not valid for the setting ``name`` (flat), or ``None``: its choices
    when its type is a ``Literal``, else its field's ``check``.

    Example:
        >>> setting_problem("num_envs", 0), setting_problem("num_envs", 4)
        ('must be an integer >= 1; pass e.g. num_envs=16.', None)
        >>> setting_problem("logger", "wandb")
        "unknown logger 'wandb'; choose one of csv, tensorboard, both, none."
    """
    hint = _hint(name)
    if get_origin(hint) is Literal:
        choices = get_args(hint)
        if value not in choices:
            return (f"unknown {name.replace('_', ' ')} {value!r}; choose one of "
                    f"{', '.join(choices)}.")
        return None
    field = setting_field(name)
    check = field.metadata.get("check")
    why = None if check is None else check(value)
    if why is not None and field.default is not None:
        why = f"{why[:-1]}; pass e.g. {name}={field.default!r}."
    return why


def check_settings(owner: str, obj: Any, names: Any = None,
                   error: type[ValueError] = ValueError) -> None:
    """Apply each setting's one rule (:func:`setting_problem`) to ``obj``'s values of the
    settings ``names`` (flat; default ``obj.run_settings``): the check every config that holds
    run settings makes, so a value is judged by the same rule whichever config it was given
    to. Raises ``error("<owner>.<name>=<value> is invalid: <why>")`` for the first bad one.

    Example:
        >>> import types
        >>> check_settings("Mine", types.SimpleNamespace(num_envs=0), ["num_envs"])
        Traceback (most recent call last):
        ...
        ValueError: Mine.num_envs=0 is invalid: must be an integer >= 1; pass e.g. num_envs=16.
    """
    for name in (obj.run_settings if names is None else names):
        value = getattr(obj, name)
        why = setting_problem(name, value)
        if why is not None:
            raise error(f"{owner}.{name}={value!r} is invalid: {why}")


def _field_docs(cls: type) -> dict[str, str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
    return docs


@functools.cache
def setting_docs() -> dict[str, str]:
    """The docstring under each section field, by flat name (the generated flags' help).

    Example:
        >>> setting_docs()["num_envs"]
        'Consoles (envs) stepped together.'
    """
    out = {}
    for flat, (section, field) in FLAT.items():
        out[flat] = _field_docs(SECTIONS[section])[field]
    return out


def takes_settings(*names: str) -> Any:
    """Class decorator (put it *below* ``@dataclasses.dataclass``): give a flat config the run
    settings ``names`` as fields of the same flat name, type and default as their section's,
    ahead of its own fields, so a config that shares a setting never restates it. The names are
    recorded as ``cls.run_settings``.

    Example:
        >>> @dataclasses.dataclass
        ... @takes_settings("seq_len", "seed")
        ... class Mine:
        ...     margin: int = 4
        >>> Mine(), Mine.run_settings
        (Mine(seq_len=32, seed=0, margin=4), ('seq_len', 'seed'))
    """
    for name in names:
        if name not in FLAT:
            raise UnknownSettingError(f"takes_settings: {name!r} is not a run setting; use "
                                      f"names from {sorted(FLAT)}.")

    def wrap(cls: type) -> type:
        own = dict(cls.__dict__.get("__annotations__", {}))
        clash = sorted(set(own) & set(names))
        if clash:
            raise TypeError(f"{cls.__name__} restates the run settings {clash}; drop its own "
                            "fields: takes_settings gives them with their one default.")
        annotations: dict[str, Any] = {}
        for name in names:
            f = setting_field(name)
            annotations[name] = f.type
            setattr(cls, name, f.default)
        cls.__annotations__ = {**annotations, **own}
        cls.run_settings = tuple(names)
        return cls

    return wrap
