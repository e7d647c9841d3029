"""The defaults of the settings several run configs share, each defined once, the one check of
the sampled batch's shape, and the one form of a bad setting's error.

:class:`~torchrl_dreamer.collectors.AsyncCollectorConfig`,
:class:`~torchrl_dreamer.trainers.TrainConfig` and
:class:`~torchrl_dreamer.distributed.RayTrainingConfig` have fields of the same name and unit
(``seq_len``, ``batch_size``, ``replay_ratio``, ...). Their defaults are the constants below, so a
run gets the same value whichever config it starts from; ``test/trainers/test_config_defaults.py`` fails
when two config classes give a shared field different defaults without a documented reason. They
live in the collector layer, the lowest one whose configs use them (the trainers and
``distributed`` import downward). The run's length, used by the trainers and the Ray job only, is
:data:`torchrl_dreamer.trainers.defaults.TOTAL_STEPS`.

The values are the measured ones of ``docs/learning_results.md`` (every reported run samples
B16 x T32 or B8 x T32); a task's ``train_defaults`` and ``GAME_TRAIN_DEFAULTS``
(:mod:`torchrl_dreamer.trainers.config`) override them for a ``TrainConfig`` run.

Example:
    >>> SEQ_LEN, BATCH_SIZE, REPLAY_RATIO
    (32, 16, 0.05)
    >>> check_batch_shape("MyConfig", batch_size=0, seq_len=32)
    Traceback (most recent call last):
    ...
    ValueError: MyConfig.batch_size=0 is invalid: must be an integer >= 1 (sequences per gradient step); pass e.g. batch_size=16.

Every check of a setting (the configs' ``__post_init__``, :class:`~torchrl_dreamer.collectors.Ratio`,
:class:`~torchrl_dreamer.collectors.RateLimiter`, ...) words its error with :func:`invalid` (or
:func:`require`, which raises it when a condition fails): ``<Owner>.<field>=<value> is invalid:
<why>``, so a message names the class, the setting and its value the same way everywhere.
"""

from __future__ import annotations

__all__ = [
    "BACKEND",
    "BATCH_SIZE",
    "COMMIT_STRIDE",
    "DEVICE",
    "LEARNING_STARTS",
    "LOG_EVERY",
    "OFF_POLICY_TOLERANCE",
    "PRECISION",
    "REPLAY_RATIO",
    "SEED",
    "SEQ_LEN",
    "STEPS_PER_ROLLOUT",
    "TIMEOUT_S",
    "check_batch_shape",
    "invalid",
    "require",
]

SEQ_LEN = 32
"""Steps per sampled sequence (``T`` of the ``T x B`` batch), in env steps (replay rows). Every
run of ``docs/learning_results.md`` used 32; sheeprl's and DreamerV3's 64 doubles the cost of a
``tiny`` CPU update for sequences longer than the games' decisions need."""

BATCH_SIZE = 16
"""Sequences per gradient step (``B``). DreamerV3's 16; Game Boy tasks train with 8
(``GAME_TRAIN_DEFAULTS``: on a CPU half the batch buys ~1.6x the updates per minute)."""

REPLAY_RATIO = 0.05
"""Gradient steps per policy step (sheeprl's ``replay_ratio``). 0.05 at B16 x T32 replays each
collected step 25.6 times (``0.05 x 16 x 32``); the measured CPU runs used 0.05 (B16) or 0.1 (B8,
the same replayed steps), the maze 0.18. sheeprl's 0.5 at B16 x T64 (512 replayed steps per
collected step) is ten times the learner work a CPU run can afford."""

LEARNING_STARTS = 1024
"""Policy steps of random actions (the replay's prefill) before the first gradient step."""

STEPS_PER_ROLLOUT = 16
"""Env steps per actor window (weights change only between windows; Ray: per chunk a runner
sends)."""

COMMIT_STRIDE = 8
"""Env steps between commits of new rows to the learner (``<= SEQ_LEN / 2``, or the learner sees
fresh rows in coarse bursts)."""

OFF_POLICY_TOLERANCE = 2.0
"""The actor (Ray: the runners) pauses while more than this many windows' (rounds') worth of
owed gradient steps wait for the learner (the Atropos rule)."""

LOG_EVERY = 10
"""Gradient steps between metric logs (device-side metrics are read back only then)."""

DEVICE = "cpu"
"""Where the learner (and, for a ``TrainConfig`` run, the replay and the env) runs."""

PRECISION = "fp32"
"""The learner's autocast: ``fp32`` (off), ``bf16`` or ``fp16``."""

BACKEND = "reference"
"""Collector backend: ``reference`` (sequential, deterministic)."""

TIMEOUT_S = 120.0
"""Longest wait on any event or without progress before failing with a diagnostic."""

SEED = 0
"""Seeds torch, the env, the sampler and the random prefill."""


def invalid(owner: str, field: str, value: object, why: str,
            error: type[ValueError] = ValueError) -> ValueError:
    """The error for a bad setting: ``error("<owner>.<field>=<value!r> is invalid: <why>")``.

    Returned, not raised, so the caller's ``raise`` shows where the check stands (and can chain
    a cause with ``from``).

    Example:
        >>> invalid("MyConfig", "log_every", 0, "must be >= 1.")
        ValueError('MyConfig.log_every=0 is invalid: must be >= 1.')
    """
    return error(f"{owner}.{field}={value!r} is invalid: {why}")


def require(owner: str, obj: object, cond: bool, field: str, why: str,
            error: type[ValueError] = ValueError) -> None:
    """Raise :func:`invalid`'s error for ``obj.<field>`` unless ``cond`` holds.

    The check a config's ``__post_init__`` makes of each of its fields; bind the first two
    arguments once (``need = functools.partial(require, "MyConfig", self)``) and call
    ``need(cond, field, why)`` per rule.

    Example:
        >>> import types
        >>> cfg = types.SimpleNamespace(log_every=0)
        >>> require("MyConfig", cfg, cfg.log_every >= 0, "log_every", "must be >= 0.")  # fine
        >>> require("MyConfig", cfg, cfg.log_every >= 1, "log_every", "must be >= 1.")
        Traceback (most recent call last):
        ...
        ValueError: MyConfig.log_every=0 is invalid: must be >= 1.
    """
    if not cond:
        raise invalid(owner, field, getattr(obj, field), why, error)


def check_batch_shape(owner: str, batch_size: object, seq_len: object,
                      error: type[ValueError] = ValueError) -> None:
    """Raise ``error`` unless ``batch_size`` and ``seq_len`` make a valid ``T x B`` batch: integers,
    ``batch_size >= 1`` and ``seq_len >= 2`` (a sequence holds at least one transition).

    The one check of these two settings: every config that holds them calls it where it is built
    (``owner`` names that class in the message), so a value is judged by the same rule whichever
    config it was given to.

    Example:
        >>> check_batch_shape("MyConfig", batch_size=8, seq_len=32)  # fine: returns None
        >>> check_batch_shape("MyConfig", batch_size=8, seq_len=1)
        Traceback (most recent call last):
        ...
        ValueError: MyConfig.seq_len=1 is invalid: must be an integer >= 2 (a sequence needs one transition); pass e.g. seq_len=32.
    """
    for name, value, low, what, default in (
        ("batch_size", batch_size, 1, "sequences per gradient step", BATCH_SIZE),
        ("seq_len", seq_len, 2, "a sequence needs one transition", SEQ_LEN),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise invalid(owner, name, value, f"must be an integer >= {low} ({what}); "
                          f"pass e.g. {name}={default}.", error)
