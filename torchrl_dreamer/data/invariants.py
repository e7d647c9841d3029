"""The replay invariants: what consecutive rows of one env may hold, and the error they raise.

A time-major ring (:class:`~torchrl_dreamer.data.TimeMajorStorage`) stores one env-step of every
env per row; Dreamer reads sequences of rows and trusts that episodes inside them are marked
consistently. The rules (see ``docs/row_alignment.md``), for each env and chronological rows
``t``, ``t+1``:

- ``episode_id`` stays the same unless ``is_first[t+1]``, where it grows by exactly 1;
- a row that ends an episode (``terminated`` or ``truncated``) is followed by ``is_first``;
- ``continue_`` is 0 or 1 on every row, and 0 exactly where ``terminated``.

They live here, apart from the ring, because they are pure functions of the stored tensors:
:func:`check_span` takes the ``[capacity, num_envs, ...]`` fields and absolute steps, so it
can be used (and tested) without building a storage, while the storage only decides when to
call it (:meth:`~torchrl_dreamer.data.TimeMajorStorage.check_invariants`, or every write with
``debug_checks=True``). Checks whose fields are absent are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import torch

from torchrl_dreamer.data.schema import Key

_CHECKED_FIELDS = ("continue_", "terminated", "truncated", "is_first", "episode_id")


class ReplayInvariantError(ValueError):
    """A stored row breaks the replay invariants (episode ids, resets, continue flags).

    The message names the env, the row (absolute step ``t`` and ring row) and the values.
    """


class HeldRows(Protocol):
    """What :func:`check_replay_invariants` reads of a ring (``TimeMajorStorage`` has it all)."""

    @property
    def initialized(self) -> bool: ...

    @property
    def total_steps(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def capacity(self) -> int: ...

    @property
    def fields(self) -> dict[Key, torch.Tensor]: ...


def check_span(fields: Mapping[Key, torch.Tensor], capacity: int, t0: int, t1: int) -> None:
    """Checks absolute steps ``[t0, t1)`` of ring fields ``[capacity, num_envs, *shape]``.

    Step ``t`` lives in ring row ``t % capacity``; the steps must be held (at most
    ``capacity`` of them). The pair rules look at adjacent steps inside the span only, so a
    span of one step checks ``continue_`` alone. Raises :class:`ReplayInvariantError` naming
    the first offending env and row.

    Example:
        >>> first = torch.tensor([[True], [False], [True]])  # 3 ring rows, 1 env
        >>> fields = {"is_first": first, "episode_id": torch.tensor([[0], [0], [1]])}
        >>> check_span(fields, capacity=3, t0=0, t1=3)
        >>> fields["episode_id"][2, 0] = 5
        >>> check_span(fields, capacity=3, t0=0, t1=3)
        Traceback (most recent call last):
        ...
        torchrl_dreamer.data.invariants.ReplayInvariantError: env 0, row t=2 (ring row 2): is_first but episode_id went 0 -> 5 (must increase by exactly 1).
    """
    present = [k for k in _CHECKED_FIELDS if k in fields]
    if not present:
        return
    rows = torch.arange(t0, t1, device=fields[present[0]].device) % capacity
    get = {k: fields[k].index_select(0, rows) for k in present}

    def fail(mask: torch.Tensor, what: Callable[[int, int], str]) -> None:
        if bool(mask.any()):
            i, env = (int(x) for x in mask.nonzero()[0])
            raise ReplayInvariantError(what(i, env))

    def where(i: int, env: int, off: int = 0) -> str:
        t = t0 + i + off
        return f"env {env}, row t={t} (ring row {t % capacity})"

    if "continue_" in get:
        c = get["continue_"]
        fail(
            (c != 0) & (c != 1),
            lambda i, e: f"{where(i, e)}: continue_={c[i, e].item()} is not 0 or 1.",
        )
        if "terminated" in get:
            term = get["terminated"].bool()
            fail(
                (c == 0) != term,
                lambda i, e: (
                    f"{where(i, e)}: continue_={c[i, e].item()} but terminated="
                    f"{bool(term[i, e])} (continue_ must be 0.0 exactly on a true terminal, 1.0 "
                    "on truncation and normal steps)."
                ),
            )
    if t1 - t0 < 2 or "is_first" not in get:
        return
    first = get["is_first"].bool()
    if "episode_id" in get:
        ep = get["episode_id"]
        prev, nxt, nf = ep[:-1], ep[1:], first[1:]
        fail(
            ~nf & (nxt != prev),
            lambda i, e: (
                f"{where(i, e, 1)}: episode_id changed {prev[i, e].item()} -> "
                f"{nxt[i, e].item()} without is_first."
            ),
        )
        fail(
            nf & (nxt != prev + 1),
            lambda i, e: (
                f"{where(i, e, 1)}: is_first but episode_id went "
                f"{prev[i, e].item()} -> {nxt[i, e].item()} (must increase by exactly 1)."
            ),
        )
    ends = None
    for k in ("terminated", "truncated"):
        if k in get:
            ends = get[k].bool() if ends is None else ends | get[k].bool()
    if ends is not None:
        fail(
            ends[:-1] & ~first[1:],
            lambda i, e: (
                f"{where(i, e, 1)}: the previous row ended the episode "
                "(terminated/truncated) but this row is not is_first (deferred reset expected)."
            ),
        )


def check_replay_invariants(storage: HeldRows) -> None:
    """Checks every row ``storage`` holds, oldest to newest (see :func:`check_span`).

    A storage without fields or rows passes.

    Example:
        >>> from torchrl_dreamer.data import TimeMajorStorage
        >>> storage = TimeMajorStorage(4, 1, spec={"continue_": ((), torch.float32)})
        >>> _ = storage.write({"continue_": torch.ones(1)})
        >>> check_replay_invariants(storage)
        >>> _ = storage.write({"continue_": torch.full((1,), 0.5)})
        >>> check_replay_invariants(storage)
        Traceback (most recent call last):
        ...
        torchrl_dreamer.data.invariants.ReplayInvariantError: env 0, row t=1 (ring row 1): continue_=0.5 is not 0 or 1.
    """
    if not storage.initialized or storage.total_steps == 0:
        return
    total = storage.total_steps
    check_span(storage.fields, storage.capacity, total - storage.size, total)
