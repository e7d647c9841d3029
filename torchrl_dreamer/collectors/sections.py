"""The sections of a run's settings, one frozen dataclass per part of the run, each field a
setting written once with its type, default, rule and docstring (the table and the rules of
the tree: :mod:`torchrl_dreamer.collectors.settings`). A new setting is a field here.

Example:
    >>> ReplaySection().seq_len, RunSection().total_steps, list(SECTIONS)[:3]
    (32, 50000, ['env', 'replay', 'model'])
"""

from __future__ import annotations

import dataclasses
from typing import Literal, get_args

from torchrl_dreamer.collectors.setting_rules import integer, number, optional, setting
from torchrl_dreamer.emulator.model import MODELS
from torchrl_dreamer.objectives.learner import CompileMode
from torchrl_dreamer.objectives.representations import Representation

__all__ = [
    "BACKENDS",
    "LOGGERS",
    "EVAL_POLICIES",
    "EvalPolicy",
    "PRECISIONS",
    "REPLAY_BACKINGS",
    "REPLAY_EVENTS",
    "SECTIONS",
    "Backend",
    "CollectorSection",
    "ConsoleModel",
    "EnvSection",
    "EvalSection",
    "LearnerSection",
    "LoggerKind",
    "LossSection",
    "ModelSection",
    "Precision",
    "RaySection",
    "ReplayBacking",
    "ReplayEvent",
    "ReplaySection",
    "RunSection",
]

Backend = Literal["reference", "threaded", "cuda", "cuda-twin", "ray"]
ReplayBacking = Literal["memory", "memmap"]
ReplayEvent = Literal["terminated", "reward"]
LoggerKind = Literal["csv", "tensorboard", "both", "none"]
Precision = Literal["fp32", "bf16", "fp16"]
EvalPolicy = Literal["last", "best"]
ConsoleModel = Literal[MODELS]  # type: ignore[valid-type]
"""A Game Boy model the consoles can be (``torchrl_dreamer.emulator.MODELS``: one list)."""

BACKENDS: tuple[str, ...] = get_args(Backend)
"""Collector backends; ``ray`` runs the collection on Ray (:mod:`torchrl_dreamer.distributed`)."""
REPLAY_BACKINGS: tuple[str, ...] = get_args(ReplayBacking)
"""Where the replay ring lives: in RAM (on ``device``) or in memory-mapped files under the run."""
REPLAY_EVENTS: tuple[str, ...] = get_args(ReplayEvent)
"""What ``event_fraction`` biases the batches towards: rows that end an episode (``terminated``)
or rows that pay a nonzero ``reward``."""
LOGGERS: tuple[str, ...] = get_args(LoggerKind)
"""Metric loggers of a run."""
PRECISIONS: tuple[str, ...] = get_args(Precision)
"""The learner's autocast choices."""
EVAL_POLICIES: tuple[str, ...] = get_args(EvalPolicy)
"""Which weights the final evaluation plays: the last ones, or the best stretch of training's
when it was clearly better (:mod:`torchrl_dreamer.trainers.best_policy`)."""


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
    press_frames: int | None = setting(None, check=optional(integer(0)), identity=True)
    """Frames the chosen buttons are held at the start of each env step, the rest of the step
    with no button (Game Boy tasks); unset: the task's, else ``min(8, frame_skip)``
    (:func:`~torchrl_dreamer.envs.actions.default_press_frames`). A game that acts on a button
    for as long as it is held (2048 moves again every ~10 frames) wants a short press in a step
    long enough for one move to finish; at most ``frame_skip``."""
    noop_max: int | None = setting(None, check=optional(integer(0)))
    """Random no-op frames before each episode (Game Boy tasks): every episode starts after a
    fresh draw of 0..noop_max frames with no button held, so games that seed their RNG from
    frame counters play differently each time; unset: the task's (a spec's ``start.noop_max``),
    else 30 (``GAME_TRAIN_DEFAULTS``); 0: one fixed start."""
    console: ConsoleModel | None = setting(None, identity=True)
    """The Game Boy model the consoles are (Game Boy tasks): ``dmg`` or ``cgb`` (Game Boy Color,
    ``torchrl_dreamer.emulator.MODELS``); unset: the cartridge's choice (a Color-only ROM runs
    on the Color, every other on the DMG). ``cgb`` runs a DMG-only ROM in the Color's
    compatibility mode, as the hardware does."""
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
    each collected step 25.6 times (``0.05 x 16 x 32``); the maze trains at 0.18, and a Game
    Boy task with the ratio unset at one update per 80 frames of game collected
    (``trainers.config.game_replay_ratio``: 0.1 at 8 frames a step). sheeprl's 0.5 at B16 x T64
    (512 replayed steps per collected step) is ten times the learner work a CPU run can
    afford."""
    learning_starts: int = setting(1024, check=integer(0), identity=True)
    """Policy steps of random actions (the replay's prefill) before the first gradient step."""
    event_fraction: float = setting(0.0, check=number(0, high=1))
    """Share of each batch's sequences drawn to contain an ``event_key`` row (0: uniform starts,
    the reference DreamerV3 replay, the default: a quarter of the batch so drawn learned worse on
    the maze around its wins and on snake around its payments, ``docs/learning_results.md``).
    Every backend draws it, ``ray`` too (its replay service picks the share's positions in the
    batch at random, so it holds however the runners' slots split the batch)."""
    event_key: ReplayEvent = setting("terminated")
    """The rows ``event_fraction`` draws sequences around: ``terminated`` (episode ends, e.g. a
    maze's wins) or ``reward`` (every step whose reward is nonzero: a sparse game's rare
    payments, which the reward head otherwise sees in a few sequences a batch)."""
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
    """Model size, a key of ``torchrl_dreamer.modules.PRESETS`` (``tiny`` and ``tiny-wide`` are
    the CPU presets, ``torchrl_dreamer.modules.CPU_PRESETS``)."""


@dataclasses.dataclass(frozen=True)
class LossSection:
    """The losses: a loss preset and the settings a run overrides in it.

    Example:
        >>> LossSection().preset is None  # resolved from the model preset and the task
        True
    """

    preset: str | None = setting(None, flat="loss_preset", identity=True)
    """Loss and learner preset (``torchrl_dreamer.objectives.LOSS_PRESETS`` / ``LEARNER_PRESETS``);
    unset: ``fast-pixels`` (Game Boy tasks) or ``fast`` (``gym:`` tasks) for the CPU presets
    (``tiny``, ``tiny-wide``), ``sheeprl`` for XS..XL."""
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
    bonus_final: float | None = setting(None, check=optional(number(0, high=1)))
    """The exploration bonus's weight in the reward the world model learns, at the end of
    training (tasks with one: a spec's ``exploration``); unset: 1 throughout. Set, the weight
    moves from 1 to it over the run's progress, as ``entropy_final`` moves (linearly to 0), and
    the reward head learns ``reward - (1 - weight) * bonus`` on every replayed step, old ones
    too (the replay keeps the bonus apart: the env's ``bonus`` key). A count bonus pays an agent
    for showing new screens, which a greedy policy can keep doing for ever (PostBot's editor);
    weighed down at the end, the run ends optimising the game's own reward."""
    decode_stride: int | None = setting(None, check=optional(integer(1)))
    """Reconstruct every n-th step of each sampled sequence (1: all; see
    :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`); unset: the loss preset's. 2 makes
    a ``tiny`` CPU update 17 % faster, and Game Boy tasks train with 2 (``GAME_TRAIN_DEFAULTS``)."""
    imagine_last: int | None = setting(None, check=optional(integer(0)))
    """Imagine only from the posterior states of each sampled sequence's last ``imagine_last``
    steps (0: every step, DreamerV3's; see
    :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`); unset: the loss preset's. Fewer
    starts make the actor and critic's part of an update cheaper in proportion."""
    horizon: int | None = setting(None, check=optional(integer(1)), identity=True)
    """Imagined steps per trajectory of the actor-critic update; unset: the loss preset's
    (DreamerV3's 15). The imagination's cost grows in proportion."""
    representation: Representation = setting("decoder", identity=True)
    """How the latent learns what the screen shows: ``decoder`` (DreamerV3's reconstruction)
    or ``contrastive`` (no decoder: an InfoNCE term between latents and the encoder's
    embeddings, :class:`~torchrl_dreamer.objectives.ContrastiveWorldModelLoss`: 1.15-1.2x the
    updates an hour on a Game Boy task, and more learned per update on three games of four).
    The field's default is DreamerV3's decoder; Game Boy tasks train with ``contrastive``
    (``GAME_TRAIN_DEFAULTS``) but the maze (both variants) and Tobu Tobu Girl's spec, which keep
    the decoder."""
    replay_value_scale: float | None = setting(None, check=optional(number(0)))
    """Weight of the critic's loss on the replay sequences (lambda-returns of the real rewards,
    bootstrapped from the imagined returns: DreamerV3 2024's ``repval``, 0.3 there); unset: the
    loss preset's (0: imagined returns only, DreamerV3 2023's)."""


@dataclasses.dataclass(frozen=True)
class LearnerSection:
    """How the learner runs its update, and the optimizers' learning rates (the rest of the
    optimizers' settings are the loss preset's learner preset).

    Example:
        >>> LearnerSection().precision
        'fp32'
    """

    precision: Precision = "fp32"
    """The learner's autocast: ``fp32`` (off), ``bf16`` or ``fp16``."""
    compile: CompileMode | None = None
    """``torch.compile`` mode of the learner's update (unset: eager; see
    ``torchrl_dreamer.objectives.COMPILE_MODES``). A mode the device cannot use (CUDA graphs on
    the CPU) falls back with one warning (``--strict-acceleration``: error)."""
    capture: bool = False
    """Learner copies each batch into static buffers and, on CUDA, replays its whole update as
    one captured CUDA graph (4.9x faster maze updates on an H200); on the CPU the same
    static-buffer path runs without a graph, after one warning."""
    strict_acceleration: bool = False
    """Fail instead of warning when ``compile`` / ``capture`` cannot run as asked here."""
    wm_lr: float | None = setting(None, check=optional(number(0, strict=True)), identity=True)
    """Adam learning rate of the world model; unset: the loss preset's learner preset's
    (``torchrl_dreamer.objectives.LEARNER_PRESETS``; ``fast-pixels``: 1e-3)."""
    actor_lr: float | None = setting(None, check=optional(number(0, strict=True)), identity=True)
    """Adam learning rate of the actor; unset: the learner preset's (``fast-pixels``: 1e-4)."""
    critic_lr: float | None = setting(None, check=optional(number(0, strict=True)), identity=True)
    """Adam learning rate of the critic; unset: the learner preset's (``fast-pixels``: 3e-4)."""


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
    """Store the replay in the latest checkpoint (exact resume; older checkpoints drop theirs)."""
    threads: int | None = setting(None, check=optional(integer(1)))
    """Torch intra-op threads of the training process. Unset: every core the process may use
    (at most 8; at most 4 beside a CUDA learner). Give ``1`` to each of two runs that share a
    machine's cores: two threads each on busy cores can run 30x slower."""
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
    each step's mode (``docs/decisions/training_defaults.md``, "The sampled final evaluation").
    Reported as ``eval_sampled_*``, bounded by ``eval_time_limit`` as well."""
    policy: EvalPolicy = setting("last", flat="eval_policy")
    """Which weights the final evaluations play: ``last`` (the weights training ended with) or
    ``best`` (the Game Boy tasks' default, ``GAME_TRAIN_DEFAULTS``): the world model's and
    actor's weights when the mean return (or game score) of the last 32 training episodes
    peaked, if they win a greedy duel against the last weights
    (``duel_episodes`` episodes each, the same starts, a gap over two standard errors), else the
    last weights (:class:`~torchrl_dreamer.trainers.BestPolicy`; the run's summary says which,
    as ``eval_policy_step``, with the duel's means). Checkpoints then carry the kept weights
    too, and the duel's two plays take one more ``time_limit`` of the run's time."""
    duel_episodes: int = setting(16, flat="eval_duel_episodes", check=integer(1))
    """Greedy episodes each side of ``policy="best"``'s duel plays (in as many envs, each side
    bounded by half of ``time_limit``)."""


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
