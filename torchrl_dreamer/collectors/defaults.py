"""Names for the defaults of the settings several run configs share, the check of a sampled
batch's shape, and the one form of a bad setting's error.

Each setting is defined once, with its default and docstring, as a field of a section of
:mod:`torchrl_dreamer.collectors.settings`; the constants below only name those defaults (read
from the sections, never restated) for code and messages that want a module constant.
:class:`~torchrl_dreamer.collectors.AsyncCollectorConfig` and
:class:`~torchrl_dreamer.distributed.RayTrainingConfig` take the fields themselves
(:func:`~torchrl_dreamer.collectors.settings.takes_settings`); a task's ``train_defaults`` and
``GAME_TRAIN_DEFAULTS`` (:mod:`torchrl_dreamer.trainers.config`) overlay them for a
``TrainConfig`` run.

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

import types

from torchrl_dreamer.collectors.settings import (
    CollectorSection,
    LearnerSection,
    ReplaySection,
    RunSection,
    check_settings,
)

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

SEQ_LEN: int = ReplaySection.seq_len
"""``replay.seq_len``'s default (:class:`~torchrl_dreamer.collectors.settings.ReplaySection`)."""
BATCH_SIZE: int = ReplaySection.batch_size
"""``replay.batch_size``'s default."""
REPLAY_RATIO: float = ReplaySection.ratio
"""``replay.ratio``'s (``replay_ratio``) default."""
LEARNING_STARTS: int = ReplaySection.learning_starts
"""``replay.learning_starts``' default."""
STEPS_PER_ROLLOUT: int = CollectorSection.steps_per_rollout
"""``collector.steps_per_rollout``'s default."""
COMMIT_STRIDE: int = CollectorSection.commit_stride
"""``collector.commit_stride``'s default."""
OFF_POLICY_TOLERANCE: float = CollectorSection.off_policy_tolerance
"""``collector.off_policy_tolerance``'s default."""
LOG_EVERY: int = CollectorSection.log_every
"""``collector.log_every``'s default."""
TIMEOUT_S: float = CollectorSection.timeout_s
"""``collector.timeout_s``' default."""
BACKEND: str = CollectorSection.backend
"""``collector.backend``'s default."""
PRECISION: str = LearnerSection.precision
"""``learner.precision``'s default."""
DEVICE: str = RunSection.device
"""``run.device``'s default."""
SEED: int = RunSection.seed
"""``run.seed``'s default."""


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
    """Raise ``error`` unless ``batch_size`` and ``seq_len`` make a valid ``T x B`` batch: the
    rules of the settings ``replay.batch_size`` and ``replay.seq_len`` (integers,
    ``batch_size >= 1``, ``seq_len >= 2``), applied by
    :func:`~torchrl_dreamer.collectors.settings.check_settings` as every config holding them
    does, for code that holds the two values outside a config.

    Example:
        >>> check_batch_shape("MyConfig", batch_size=8, seq_len=32)  # fine: returns None
        >>> check_batch_shape("MyConfig", batch_size=8, seq_len=1)
        Traceback (most recent call last):
        ...
        ValueError: MyConfig.seq_len=1 is invalid: must be an integer >= 2 (a sequence needs one transition); pass e.g. seq_len=32.
    """
    values = types.SimpleNamespace(batch_size=batch_size, seq_len=seq_len)
    check_settings(owner, values, ("batch_size", "seq_len"), error)
