"""How a run setting is declared: :func:`setting` (its default, flat name, rule and whether it
defines a run) and the rules a field can carry (:func:`integer`, :func:`number`,
:func:`optional`), applied wherever the setting is given
(:func:`~torchrl_dreamer.collectors.settings.check_settings`).

Example:
    >>> integer(1)(0), number(0, high=1)(0.5)
    ('must be an integer >= 1.', None)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

__all__ = ["Check", "integer", "number", "optional", "setting"]


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
    given: :func:`~torchrl_dreamer.collectors.settings.check_settings`), whether it is part of
    a run's ``identity`` (a resumed run must keep it:
    :func:`~torchrl_dreamer.collectors.settings.identity_settings`) and, when the section's own
    name would repeat the section (``replay.capacity``), the ``flat`` name it has outside its
    section (``replay_capacity``: task defaults, YAML files, checkpoints, ``--replay-capacity``).

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
