"""Declarative task specs: a YAML/JSON file (or a dict) that builds a :class:`Task` without Python.

A user who brings a ROM writes down what the game means as an RL problem: which ROM, how to
reach the start state, which RAM bytes give the reward and end an episode, which buttons the
agent may press. :func:`load_task_spec` validates the whole spec up front (every error names the
field and what to do) and returns a :class:`SpecTask`, an ordinary :class:`Task` that the env,
the trainer and the CLI (``--rom game.gb --task-spec spec.yaml``) use like any other.

Everything a spec task computes per step is a batched device gather plus tensor ops (no host
sync), as :mod:`~torchrl_dreamer.envs.task` requires. Python ``Task`` subclasses stay for what a
spec cannot say (a reward computed from the screen, a shaped distance...).

Spec keys (all but ``reward`` optional)::

    name: my_game                  # registry-style name (default: the file stem)
    rom: {sha256: "...", title: "TETRIS"}   # checks the ROM given with --rom
                                   # (logo: false silences the missing-logo warning)
    start:                         # how episodes start (default: boot and wait 60 frames)
      state: start.trdstate        # a savestate file (relative to the spec file), or
      states: [a.trdstate, b.trdstate]   # several: one start variant each, or
      macro:                       # boot, then button steps
        - {wait: 120}
        - {press: START, frames: 8}
        - {wait: 60}
      jitter: 30                   # macro only: 0..30 extra frames before each press
      noop_max: 30                 # the random no-op start this task wants (frames)
    actions: minimal               # an action set name or a list such as [NOOP, A, UP+A]
    max_episode_steps: 2000
    reward:                        # summed every env step
      - {kind: delta, address: 0xC0A0, length: 3, encoding: bcd, scale: 0.01}   # score
      - {kind: event, address: 0xC0A2, op: decreased, scale: -1}              # lost a life
      - {kind: level, address: 0xC0B0, scale: 0.001}                          # value x scale
      - {kind: delta, address: 0xC19E, clamp: [0, null]}                      # never negative
      - {kind: delta, count: {range: [0xC100, 0xC1FF], op: "!=", value: 0}, scale: 0.1}
      - {kind: delta, distance: {a: [0xC005, 0xC004], b: [0xC009, 0xC008]}, scale: -0.01,
         shaping: true}           # trains, but is not the game's score (see below)
    terminate: [{address: 0xC0A2, op: "==", value: 0}]   # any predicate true ends the episode
    truncate: [{address: 0xC0A3, op: changed}]            # ... or truncates it
    success: {all: [{address: 0xC0A4, in: [3, 4]}, {not: {address: 0xC0A2, op: "==", value: 0}}]}
    on_reset: [{address: 0xC002, random: [0, 255]}, {address: 0xC003, value: 1}]
    exploration:                   # optional count bonus, no game knowledge needed
      ram: {addresses: [0xD35E, 0xD362, 0xD361], scale: 0.05}
      screen: {scale: 0.01}
    observe:                       # extra observations beside the pixels, read from RAM
      player: [0xD362, 0xD361]     # key 'player': float32 [N, 2], each byte / 255
      board: {range: [0xC100, 0xC118]}   # key 'board': the 25 bytes 0xC100..0xC118
    decision:                      # a step per game tick instead of every frame_skip frames
      on_change: [0xC004, 0xC005]  # the step ends when one of these bytes changes ...
      max_frames: 16               # ... or after this many frames
    train: {batch_size: 8}         # training defaults of this task (see TrainConfig)

**Decisions** (``decision``): for a game that acts on its own clock (a snake that moves a cell
every 7 or 8 frames, a puzzle that takes one move per input), a step runs until one of the
``on_change`` bytes differs from its value at the step's start, at most ``max_frames`` frames
(default 16), so each decision meets exactly one game tick; ``frame_skip`` then only sets the
press length and the step the discount and replay ratio are computed for, and
``max_episode_frames`` counts the frames the steps ran (:mod:`~torchrl_dreamer.emulator.decision`).

**Score** (``score``): a term with ``shaping: true`` is paid to the agent but is not part of
the game's own measure, and neither is the exploration bonus. A spec with either gets
:attr:`~torchrl_dreamer.envs.task.Task.has_score`: the env emits ``score``, the sum of the other
terms at each step, so training logs and evaluation report what the game counts (foods eaten)
beside the shaped return. A spec with an exploration bonus also gets
:attr:`~torchrl_dreamer.envs.task.Task.has_bonus`: the env emits ``bonus``, the bonus's part of
each step's reward, which the replay keeps so that a run can weigh it down
(:attr:`~torchrl_dreamer.trainers.TrainConfig.bonus_final`).

**Watches.** A RAM watch is ``address`` (0x0000-0xFFFF), ``length`` (bytes, 1-8), ``encoding``
and its options:

- ``u8``, ``u16le``, ``u16be``, ``u32le``, ``u32be``: unsigned binary integers (``le``: first
  byte least significant); ``signed: true`` reads them as two's complement.
- ``bcd`` (packed decimal, two digits a byte, first byte most significant) and ``bcdle`` (last
  byte most significant), 1-8 bytes.
- ``digits``: one decimal digit (0-9) per byte, 1-8 bytes; ``order: msb`` (default: first byte
  most significant) or ``lsb``; ``blank: 0x80`` names the byte the game writes for an unused
  (blank) place, which counts as 0. A byte that is neither a digit nor the blank marker is not
  interpreted: it enters the sum with its byte value as if it were a digit.
- ``mask`` (binary encodings only, not with ``signed``): the decoded unsigned value is ANDed
  with it before anything uses it. For multi-byte watches the mask applies to the decoded
  integer, not to each byte: ``{address: 0xC000, encoding: u16le, mask: 0x8000}`` keeps bit 7 of
  the byte at 0xC001.

A count watch ``count: {range: [lo, hi], op: "!=", value: 0}`` is the number of bytes in
``lo..hi`` (inclusive, within 0x0000-0xFFFF) that satisfy a per-byte comparison (an ``op``
with ``value``, or ``in: [...]``; optional per-byte ``mask``), e.g. the tiles a player has
painted. A distance watch ``distance: {a: [0xC005, 0xC004], b: [0xC009, 0xC008]}`` is the
Manhattan distance between two points, one unsigned byte per coordinate (1-3 coordinates);
``to: [136, 64]`` instead of ``b`` measures to a fixed point (a goal the game keeps in its map):
``{kind: delta, distance: {...}, scale: -0.01, clamp: [-0.1, 0.1]}`` pays for every step
towards a target, and the clamp drops the jumps where the target is placed anew. Any kind of
watch goes wherever a watch goes: reward terms and predicates.

**Predicates** (``terminate``, ``truncate``, ``success``, ``event`` reward terms) are a watch
plus ``op``: ``== != < <= > >=`` against ``value``; ``in`` against a list
(``op: in, value: [3, 4]``, or the shorthand ``in: [3, 4]``); ``increased``, ``decreased``,
``changed`` against the previous step. ``{all: [...]}``, ``{any: [...]}`` and ``{not: {...}}`` combine predicates and
nest freely. ``terminate``/``truncate``/``success`` take one predicate or a list (any true).

**Observations** (``observe``): each entry ``name: [addresses]`` (or ``name: {range: [lo,
hi]}``, inclusive) becomes a :class:`~torchrl_dreamer.envs.task.RamObservation`: the env emits
``name`` as ``float32[N, D]`` (byte / 255) at every step, the replay stores it and the world model
encodes and reconstructs it (a vector input). Names are plain identifiers other than the env's
own keys (``pixels``, ``reward``, ``is_first``...); addresses lie in 0x0000-0xFFFF, each once.

**Reward terms**: ``delta`` (scale x change since the last step), ``level`` (scale x value),
``event`` (scale when its predicate holds: a predicate made of comparisons only pays once, when
it becomes true; one with a change op anywhere pays at every step it holds, a change being an
instant). ``clamp: [lo, hi]`` bounds a term's scaled per-step contribution (``null`` = open).

Example:
    >>> from torchrl_dreamer.envs.spec import load_task_spec
    >>> task = load_task_spec({"name": "demo", "actions": "dpad", "reward": [
    ...     {"kind": "delta", "address": 0xC0A0, "encoding": "u8", "clamp": [0, None]}],
    ...     "success": {"any": [{"address": 0xC0A1, "in": [3, 4]}]}})
    >>> task.name, task.default_action_set, task.has_success
    ('demo', 'dpad', True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.emulator.decision import MAX_DECISION_FRAMES
from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE, packed2_lut
from torchrl_dreamer.envs.actions import BUTTON_BITS, make_action_set
from torchrl_dreamer.envs.task import (
    RamObservation,
    Task,
    TaskMismatchError,
    observation_name_problem,
)

__all__ = [
    "TaskSpecError",
    "RamWatch",
    "CountWatch",
    "DistanceWatch",
    "Predicate",
    "PredicateGroup",
    "RewardTerm",
    "TaskSpec",
    "SpecTask",
    "load_task_spec",
    "parse_task_spec",
    "parse_predicate",
]

ENCODINGS: dict[str, tuple[int, int]] = {
    "u8": (1, 1),
    "u16le": (2, 2),
    "u16be": (2, 2),
    "u32le": (4, 4),
    "u32be": (4, 4),
    "bcd": (1, 8),
    "bcdle": (1, 8),
    "digits": (1, 8),
}
"""Watch encodings and the byte lengths each accepts (min, max)."""

BINARY_ENCODINGS = ("u8", "u16le", "u16be", "u32le", "u32be")
DIGIT_ORDERS = ("msb", "lsb")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
SET_OPS = ("in",)
CHANGE_OPS = ("increased", "decreased", "changed")
GROUP_KEYS = ("all", "any", "not")
REWARD_KINDS = ("delta", "level", "event")
MAX_JITTER = 3600  # frames (a minute): more would outlast most title screens' attract timers

_RAM_KEYS = {"address", "length", "encoding", "signed", "mask", "order", "blank"}
_WATCH_KEYS = _RAM_KEYS | {"count", "distance"}
_CMP_KEYS = {"op", "value", "in"}
_TOP_KEYS = {"name", "rom", "start", "actions", "max_episode_steps", "max_episode_frames",
             "reward", "terminate",
             "truncate", "success", "on_reset", "exploration", "observe", "decision",
             "train"}


class TaskSpecError(ValueError):
    """A task spec that cannot be used; the message names the field and what to do."""


# ------------------------------------------------------------------------------ validation
def _fail(where: str, msg: str) -> TaskSpecError:
    return TaskSpecError(f"task spec: {where}: {msg}")


def _keys(obj: Any, where: str, allowed: set[str], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(obj, dict):
        raise _fail(where, f"expected a mapping, got {type(obj).__name__}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise _fail(where, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    for k in required:
        if k not in obj:
            raise _fail(where, f"missing required key {k!r}")
    return obj


def _int(obj: Any, where: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(obj, str):
        try:
            obj = int(obj, 0)
        except ValueError:
            raise _fail(where, f"expected an integer, got {obj!r}") from None
    if isinstance(obj, bool) or not isinstance(obj, int):
        raise _fail(where, f"expected an integer, got {obj!r}")
    if lo is not None and obj < lo or hi is not None and obj > hi:
        raise _fail(where, f"{obj:#x} is outside {lo:#06x}-{hi:#06x}" if hi == 0xFFFF
                    else f"{obj} is outside {lo}..{hi}")
    return obj


def _float(obj: Any, where: str) -> float:
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise _fail(where, f"expected a number, got {obj!r}")
    return float(obj)


def _buttons(name: Any, where: str) -> int:
    if not isinstance(name, str) or not name.strip():
        raise _fail(where, f"expected a button name such as 'START' or 'UP+A', got {name!r}")
    mask = 0
    for part in name.upper().split("+"):
        part = part.strip()
        if part == "NOOP":
            continue
        if part not in BUTTON_BITS:
            raise _fail(where, f"unknown button {part!r}; buttons: {', '.join(BUTTON_BITS)}")
        mask |= BUTTON_BITS[part]
    return mask


def _int_list(obj: Any, where: str, lo: int, hi: int) -> tuple[int, ...]:
    """A non-empty list of integers in ``lo..hi`` (the values of an ``in`` test), sorted."""
    what = f"expected a list of integers {lo}..{hi}"
    if not isinstance(obj, list) or not obj:
        raise _fail(where, f"{what}, got {obj!r}")
    out = set()
    for v in obj:
        if isinstance(v, str):
            try:
                v = int(v, 0)
            except ValueError:
                raise _fail(where, f"{what}; {v!r} is not one") from None
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise _fail(where, f"{what}; {v!r} is not one")
        out.add(v)
    return tuple(sorted(out))


def _compare(x: torch.Tensor, op: str, value: int, values: torch.Tensor | None) -> torch.Tensor:
    """``bool`` tensor of ``x <op> value`` (``values``: the device tensor of an ``in`` set)."""
    if op == "in":
        return torch.isin(x, values)
    if op == "==":
        return x == value
    if op == "!=":
        return x != value
    if op == "<":
        return x < value
    if op == "<=":
        return x <= value
    if op == ">":
        return x > value
    return x >= value


class _DeviceValues:
    """The ``in`` set of a frozen predicate as a device tensor, made once per device (the
    per-step test then copies nothing from the host)."""

    def __init__(self) -> None:
        self._by_device: dict[torch.device, torch.Tensor] = {}

    def get(self, values: tuple[int, ...], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        key = (device, dtype)
        t = self._by_device.get(key)
        if t is None:
            t = self._by_device[key] = torch.tensor(values, dtype=dtype, device=device)
        return t


def _parse_comparison(obj: dict, where: str, vrange: tuple[int, int], what: str,
                      allow_change: bool = True) -> tuple[str, int, tuple[int, ...]]:
    """``(op, value, values)`` of a comparison mapping; ``vrange`` bounds the values a watch can
    take (``what`` names it in errors)."""
    lo, hi = vrange
    ops = COMPARE_OPS + SET_OPS + (CHANGE_OPS if allow_change else ())
    if "in" in obj:
        if "op" in obj:
            raise _fail(f"{where}.in", "'in: [...]' is short for 'op: in, value: [...]'; drop 'op' "
                        "(or 'in')")
        if "value" in obj:
            raise _fail(f"{where}.value", "'in: [...]' lists the values itself; drop 'value'")
        return "in", 0, _int_list(obj["in"], f"{where}.in", lo, hi)
    if "op" not in obj:
        raise _fail(where, f"missing required key 'op' (one of {list(ops)}) or 'in' (a list of "
                    "values)")
    op = obj["op"]
    if op not in ops:
        raise _fail(f"{where}.op", f"unknown op {op!r}; use one of {list(ops)}")
    if op in CHANGE_OPS:
        if "value" in obj:
            raise _fail(f"{where}.value", f"op {op!r} compares with the previous step; drop 'value'")
        return op, 0, ()
    if "value" not in obj:
        raise _fail(where, f"op {op!r} needs a 'value' to compare with"
                    + (" (a list: value: [a, b, ...])" if op == "in" else ""))
    if op == "in":
        return op, 0, _int_list(obj["value"], f"{where}.value", lo, hi)
    value = _int(obj["value"], f"{where}.value")
    if op in ("==", "!=") and not lo <= value <= hi:
        raise _fail(f"{where}.value", f"{value} is outside the values {lo}..{hi} of {what}: the "
                    f"test would {'never' if op == '==' else 'always'} hold; fix value or the watch")
    return op, value, ()


# ------------------------------------------------------------------------------ watches
@dataclass(frozen=True)
class RamWatch:
    """A number kept in RAM: ``length`` bytes at ``address`` decoded with ``encoding`` (see the
    module docstring for the encodings, ``mask``, ``order`` and ``blank``)."""

    address: int
    length: int = 1
    encoding: str = "u8"
    signed: bool = False
    mask: int | None = None
    order: str = "msb"
    blank: int | None = None

    @classmethod
    def parse(cls, obj: dict, where: str) -> RamWatch:
        """Validate the watch fields of ``obj`` (other keys are the caller's)."""
        if "address" not in obj:
            raise _fail(where, "missing required key 'address' (a RAM address 0x0000-0xFFFF), "
                        "'count' (a count of bytes over an address range) or 'distance' (between "
                        "two points in RAM)")
        addr = _int(obj["address"], f"{where}.address", 0, 0xFFFF)
        enc = obj.get("encoding", "u8")
        if enc not in ENCODINGS:
            raise _fail(f"{where}.encoding", f"unknown encoding {enc!r}; use one of {list(ENCODINGS)}")
        lo, hi = ENCODINGS[enc]
        length = _int(obj.get("length", lo), f"{where}.length", 1, 8)
        if not lo <= length <= hi:
            raise _fail(f"{where}.length", f"encoding {enc!r} takes {lo}" + (
                f"-{hi}" if hi != lo else "") + f" byte(s), got {length}; fix length or encoding")
        if addr + length - 1 > 0xFFFF:
            raise _fail(f"{where}.address", f"{length} bytes from {addr:#06x} run past 0xFFFF")
        signed = obj.get("signed", False)
        if not isinstance(signed, bool):
            raise _fail(f"{where}.signed", f"expected true or false, got {signed!r}")
        if signed and enc not in BINARY_ENCODINGS:
            raise _fail(f"{where}.signed", ("BCD values" if enc.startswith("bcd") else
                                            "decimal digits") + " cannot be signed")
        mask = None
        if "mask" in obj:
            if enc not in BINARY_ENCODINGS:
                raise _fail(f"{where}.mask", f"a mask selects bits of a binary value; encoding "
                            f"{enc!r} is decimal (use one of {list(BINARY_ENCODINGS)})")
            if signed:
                raise _fail(f"{where}.mask", "a masked value is a bit field: drop 'signed'")
            bits = 8 * length
            mask = _int(obj["mask"], f"{where}.mask")
            if not 0 < mask < 1 << bits:
                raise _fail(f"{where}.mask", f"{mask:#x} must be a non-zero mask within the "
                            f"watch's {bits} bits (0x1-{(1 << bits) - 1:#x})")
        order = obj.get("order", "msb")
        if "order" in obj and enc != "digits":
            raise _fail(f"{where}.order", "'order' applies to encoding 'digits' only"
                        + ("; for BCD use encoding 'bcd' or 'bcdle'" if enc.startswith("bcd") else ""))
        if order not in DIGIT_ORDERS:
            raise _fail(f"{where}.order", f"expected one of {list(DIGIT_ORDERS)} (msb: first byte "
                        f"most significant), got {order!r}")
        blank = None
        if "blank" in obj:
            if enc != "digits":
                raise _fail(f"{where}.blank", "'blank' applies to encoding 'digits' only")
            blank = _int(obj["blank"], f"{where}.blank", 0, 255)
            if blank <= 9:
                raise _fail(f"{where}.blank", f"{blank} is a digit (0..9), so it cannot also mark "
                            "a blank place; give the byte the game writes for a blank (e.g. 0x80)")
        return cls(addr, length, enc, signed, mask, order, blank)

    def value_range(self) -> tuple[int, int]:
        """The smallest and largest value :meth:`decode` gives for well-formed bytes."""
        if self.encoding in BINARY_ENCODINGS:
            bits = 8 * self.length
            if self.mask is not None:
                return 0, self.mask
            if self.signed:
                return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            return 0, (1 << bits) - 1
        digits = self.length * (1 if self.encoding == "digits" else 2)
        return 0, 10 ** digits - 1

    def describe(self) -> str:
        """A short name for error messages."""
        return f"the {self.length}-byte {self.encoding} watch at {self.address:#06x}"

    def decode(self, raw: torch.Tensor) -> torch.Tensor:
        """``int64[N]`` values of raw bytes ``uint8[N, length]``."""
        b = raw.to(torch.int64)
        enc = self.encoding
        if enc in BINARY_ENCODINGS:
            msb_first = b if enc == "u8" or enc.endswith("be") else b.flip(1)
            v = msb_first[:, 0]
            for k in range(1, self.length):
                v = (v << 8) | msb_first[:, k]
            if self.mask is not None:
                v = v & self.mask
            if self.signed:
                bits = 8 * self.length
                v = torch.where(v >= 1 << (bits - 1), v - (1 << bits), v)
            return v
        if enc == "digits":
            d = b if self.order == "msb" else b.flip(1)
            if self.blank is not None:
                d = d.masked_fill(d == self.blank, 0)
            v = d[:, 0]
            for k in range(1, self.length):
                v = v * 10 + d[:, k]
            return v
        order = b if enc == "bcd" else b.flip(1)
        v = torch.zeros_like(b[:, 0])
        for k in range(self.length):
            v = v * 100 + (order[:, k] >> 4) * 10 + (order[:, k] & 0x0F)
        return v

    def read(self, gb: Any) -> torch.Tensor:
        """``int64[N]``: the watched value on every console (one device gather)."""
        return self.decode(gb.read_memory(self.address, self.length))


@dataclass(frozen=True)
class CountWatch:
    """How many bytes of ``lo..hi`` (inclusive) satisfy ``(byte & mask) <op> value`` (or lie in
    ``values`` for ``op: in``): e.g. the non-zero cells of a map."""

    lo: int
    hi: int
    op: str
    value: int = 0
    values: tuple[int, ...] = ()
    mask: int | None = None
    _values: _DeviceValues = field(default_factory=_DeviceValues, compare=False, hash=False,
                                   repr=False)

    @classmethod
    def parse(cls, obj: Any, where: str) -> CountWatch:
        """Validate a ``count`` mapping."""
        _keys(obj, where, {"range", "mask"} | _CMP_KEYS, ("range",))
        r = obj["range"]
        if not isinstance(r, list) or len(r) != 2:
            raise _fail(f"{where}.range", f"expected [lo, hi] (inclusive RAM addresses "
                        f"0x0000-0xFFFF), got {r!r}")
        lo = _int(r[0], f"{where}.range[0]", 0, 0xFFFF)
        hi = _int(r[1], f"{where}.range[1]", 0, 0xFFFF)
        if lo > hi:
            raise _fail(f"{where}.range", f"lo {lo:#06x} > hi {hi:#06x}; give [lo, hi] in order")
        mask = None
        if "mask" in obj:
            mask = _int(obj["mask"], f"{where}.mask", 1, 255)
        op, value, values = _parse_comparison(
            obj, where, (0, mask if mask is not None else 255), "a byte" + (
                f" masked with {mask:#04x}" if mask is not None else ""), allow_change=False)
        return cls(lo, hi, op, value, values, mask)

    def value_range(self) -> tuple[int, int]:
        """A count is 0 up to the number of bytes in the range."""
        return 0, self.hi - self.lo + 1

    def describe(self) -> str:
        """A short name for error messages."""
        return f"the count over {self.lo:#06x}-{self.hi:#06x}"

    def read(self, gb: Any) -> torch.Tensor:
        """``int64[N]``: the count on every console (one device gather of the whole range)."""
        b = gb.read_memory(self.lo, self.hi - self.lo + 1).to(torch.int32)
        if self.mask is not None:
            b = b & self.mask
        values = self._values.get(self.values, b.device, b.dtype) if self.op == "in" else None
        return _compare(b, self.op, self.value, values).sum(1, dtype=torch.int64)


@dataclass(frozen=True)
class DistanceWatch:
    """The Manhattan distance between two points, one unsigned byte per coordinate:
    ``sum_k |byte[a_k] - byte[b_k]|`` (e.g. a player's x and y and a target's x and y), or
    ``sum_k |byte[a_k] - to_k|`` from a point in RAM to a fixed one (``to``: a goal that the
    game keeps in its map rather than in a variable, e.g. a level's exit, in the game's own
    coordinates).

    A ``delta`` term of it with a negative scale pays for every step closer to the target, a
    potential-based shaping term (Ng et al., 1999, with the discount taken as 1): a path's
    shaping sums to its start distance minus its end distance, so circling earns nothing. A
    ``clamp`` near one step's move drops the jumps where the target or the player is placed
    anew (an item eaten, a respawn) rather than moved.

    Example:
        >>> DistanceWatch.parse({"a": [0xC22D, 0xC22F], "to": [136, 64]}, "d").describe()
        'the distance between 0xc22d, 0xc22f and the point (136, 64)'
    """

    a: tuple[int, ...]
    b: tuple[int, ...] = ()
    to: tuple[int, ...] = ()

    @classmethod
    def parse(cls, obj: Any, where: str) -> DistanceWatch:
        """Validate a ``distance`` mapping ``{a: [addresses], b: [addresses]}`` or
        ``{a: [addresses], to: [values]}``."""
        _keys(obj, where, {"a", "b", "to"}, ("a",))
        if ("b" in obj) == ("to" in obj):
            raise _fail(where, "give the target as b (RAM addresses, e.g. b: [0xC009, 0xC008]) "
                        "or as to (a fixed point, e.g. to: [136, 64]), not "
                        + ("both" if "b" in obj else "neither"))
        target = "b" if "b" in obj else "to"
        pts = []
        for key in ("a", target):
            addrs = obj[key]
            if not isinstance(addrs, list) or not 1 <= len(addrs) <= 3:
                what = ("RAM addresses (one byte per coordinate" if key != "to"
                        else "coordinates (one byte each, 0-255")
                raise _fail(f"{where}.{key}", f"expected a list of 1-3 {what}, e.g. [x, y]), "
                            f"got {addrs!r}")
            hi = 0xFFFF if key != "to" else 0xFF
            pts.append(tuple(_int(x, f"{where}.{key}[{k}]", 0, hi)
                             for k, x in enumerate(addrs)))
        if len(pts[0]) != len(pts[1]):
            raise _fail(where, f"a has {len(pts[0])} coordinate(s) and {target} {len(pts[1])}; "
                        "give both points the same coordinates in the same order")
        return cls(pts[0], **{target: pts[1]})

    def value_range(self) -> tuple[int, int]:
        """0 up to 255 per coordinate."""
        return 0, 255 * len(self.a)

    def describe(self) -> str:
        """A short name for error messages."""
        where = ", ".join(f"{x:#06x}" for x in self.a)
        if self.to:
            return f"the distance between {where} and the point ({', '.join(map(str, self.to))})"
        return f"the distance between {where} and " + ", ".join(f"{x:#06x}" for x in self.b)

    def read(self, gb: Any) -> torch.Tensor:
        """``int64[N]``: the distance on every console (one device gather per byte)."""
        out = None
        for k, x in enumerate(self.a):
            here = gb.read_memory(x, 1)[:, 0].to(torch.int64)
            there = (gb.read_memory(self.b[k], 1)[:, 0].to(torch.int64) if self.b
                     else self.to[k])
            d = (here - there).abs()
            out = d if out is None else out + d
        return out


Watch = RamWatch | CountWatch | DistanceWatch


def parse_watch(obj: dict, where: str) -> Watch:
    """The RAM, count or distance watch that the keys of ``obj`` describe (other keys are the caller's)."""
    for kind, cls in (("count", CountWatch), ("distance", DistanceWatch)):
        if kind in obj:
            clash = sorted(set(obj) & (_RAM_KEYS | {"count", "distance"} - {kind}))
            if clash:
                raise _fail(where, f"give one of 'address' (a RAM watch), 'count' (a byte count) "
                            f"or 'distance' (between two points), not several: drop {clash}")
            return cls.parse(obj[kind], f"{where}.{kind}")
    return RamWatch.parse(obj, where)


# ------------------------------------------------------------------------------ predicates
@dataclass(frozen=True)
class Predicate:
    """A condition on a watch: compared with ``value`` (or the set ``values`` for ``in``), or
    with the previous step's value."""

    watch: Watch
    op: str
    value: int = 0
    values: tuple[int, ...] = ()
    _values: _DeviceValues = field(default_factory=_DeviceValues, compare=False, hash=False,
                                   repr=False)

    @classmethod
    def parse(cls, obj: Any, where: str, extra: set[str] = frozenset()) -> Predicate:
        """Validate a one-watch predicate mapping (``extra``: further keys the caller allows)."""
        _keys(obj, where, _WATCH_KEYS | _CMP_KEYS | set(extra))
        watch = parse_watch(obj, where)
        op, value, values = _parse_comparison(obj, where, watch.value_range(), watch.describe())
        return cls(watch, op, value, values)

    def evaluate(self, now: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """``bool[N]`` for decoded values ``now`` and the previous step's ``prev``."""
        if self.op == "increased":
            return now > prev
        if self.op == "decreased":
            return now < prev
        if self.op == "changed":
            return now != prev
        values = self._values.get(self.values, now.device, now.dtype) if self.op == "in" else None
        return _compare(now, self.op, self.value, values)

    def test(self, now: dict[Watch, torch.Tensor], prev: dict[Watch, torch.Tensor]) -> torch.Tensor:
        """``bool[N]`` given every watch's value now and at the previous step."""
        return self.evaluate(now[self.watch], prev[self.watch])

    def watches(self) -> set[Watch]:
        """The watches this predicate reads."""
        return {self.watch}

    def has_change(self) -> bool:
        """Whether it compares with the previous step (an instant rather than a state)."""
        return self.op in CHANGE_OPS


@dataclass(frozen=True)
class PredicateGroup:
    """``all`` (every child holds), ``any`` (at least one holds) or ``not`` (its one child does
    not hold) of predicates or further groups."""

    kind: str
    children: tuple[Predicate | PredicateGroup, ...]

    def test(self, now: dict[Watch, torch.Tensor], prev: dict[Watch, torch.Tensor]) -> torch.Tensor:
        """``bool[N]`` given every watch's value now and at the previous step."""
        if self.kind == "not":
            return ~self.children[0].test(now, prev)
        out = self.children[0].test(now, prev)
        for c in self.children[1:]:
            out = out & c.test(now, prev) if self.kind == "all" else out | c.test(now, prev)
        return out

    def watches(self) -> set[Watch]:
        """The watches this group reads, at any depth."""
        return set().union(*(c.watches() for c in self.children))

    def has_change(self) -> bool:
        """Whether any predicate inside compares with the previous step."""
        return any(c.has_change() for c in self.children)


Condition = Predicate | PredicateGroup


def parse_predicate(obj: Any, where: str, extra: set[str] = frozenset()) -> Condition:
    """Validate a predicate: a one-watch comparison or an ``all``/``any``/``not`` group (nested
    freely). ``extra``: further keys the caller allows at the top of ``obj``."""
    if not isinstance(obj, dict):
        raise _fail(where, f"expected a predicate mapping ({{address, op, value}} or "
                    f"{{all: [...]}} / {{any: [...]}} / {{not: {{...}}}}), got {type(obj).__name__}")
    groups = [k for k in GROUP_KEYS if k in obj]
    if not groups:
        return Predicate.parse(obj, where, extra)
    if len(groups) > 1:
        raise _fail(where, f"one group key per mapping, got {groups}; nest one inside the other")
    kind = groups[0]
    stray = sorted(set(obj) & (_WATCH_KEYS | _CMP_KEYS))
    if stray:
        raise _fail(where, f"{kind!r} groups take no watch or comparison keys ({stray}); put "
                    f"that condition inside the group's {'mapping' if kind == 'not' else 'list'}")
    _keys(obj, where, {kind} | set(extra))
    body = obj[kind]
    if kind == "not":
        if not isinstance(body, dict):
            raise _fail(f"{where}.not", "expected one predicate mapping (for several, wrap them "
                        "in {any: [...]} or {all: [...]})")
        return PredicateGroup("not", (parse_predicate(body, f"{where}.not"),))
    if not isinstance(body, list) or not body:
        raise _fail(f"{where}.{kind}", "expected a non-empty list of predicates")
    return PredicateGroup(kind, tuple(parse_predicate(c, f"{where}.{kind}[{k}]")
                                      for k, c in enumerate(body)))


def _predicate_list(obj: Any, where: str) -> list[Condition]:
    """``terminate``/``truncate``/``success``: one predicate or a list of them (any true)."""
    if isinstance(obj, dict):
        return [parse_predicate(obj, where)]
    if not isinstance(obj, list):
        raise _fail(where, "expected a predicate or a list of predicates")
    return [parse_predicate(p, f"{where}[{k}]") for k, p in enumerate(obj)]


# ------------------------------------------------------------------------------ reward terms
@dataclass(frozen=True)
class RewardTerm:
    """One reward term: ``delta`` (scale x change of a value), ``level`` (scale x value) or
    ``event`` (scale when a predicate fires); ``clamp`` bounds the scaled contribution;
    ``shaping`` marks a term that trains the agent but is not part of the game's score."""

    kind: str
    watch: Watch | None
    scale: float = 1.0
    predicate: Condition | None = None
    clamp: tuple[float | None, float | None] | None = None
    shaping: bool = False

    @classmethod
    def parse(cls, obj: Any, where: str) -> RewardTerm:
        """Validate one entry of ``reward``."""
        if not isinstance(obj, dict):
            raise _fail(where, f"expected a mapping, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind not in REWARD_KINDS:
            raise _fail(f"{where}.kind", f"expected one of {list(REWARD_KINDS)}, got {kind!r}")
        scale = _float(obj.get("scale", 1.0), f"{where}.scale")
        clamp = _parse_clamp(obj["clamp"], f"{where}.clamp") if "clamp" in obj else None
        shaping = obj.get("shaping", False)
        if not isinstance(shaping, bool):
            raise _fail(f"{where}.shaping", f"expected true or false, got {shaping!r}")
        own = {"kind", "scale", "clamp", "shaping"}
        if kind == "event":
            pred = parse_predicate(obj, where, extra=own)
            return cls(kind, pred.watch if isinstance(pred, Predicate) else None, scale, pred,
                       clamp, shaping)
        _keys(obj, where, own | _WATCH_KEYS)
        return cls(kind, parse_watch(obj, where), scale, None, clamp, shaping)

    def watches(self) -> set[Watch]:
        """The watches this term reads."""
        return self.predicate.watches() if self.predicate is not None else {self.watch}

    def compute(self, now: dict[Watch, torch.Tensor], prev: dict[Watch, torch.Tensor]) -> torch.Tensor:
        """``float32[N]``: this term's contribution at the step just run."""
        if self.kind == "delta":
            x = (now[self.watch] - prev[self.watch]).to(torch.float32)
        elif self.kind == "level":
            x = now[self.watch].to(torch.float32)
        else:
            hit = self.predicate.test(now, prev)
            if not self.predicate.has_change():  # a state: pay when it becomes true
                hit = hit & ~self.predicate.test(prev, prev)
            x = hit.to(torch.float32)
        out = self.scale * x
        if self.clamp is not None:
            out = out.clamp(min=self.clamp[0], max=self.clamp[1])
        return out


def _parse_clamp(obj: Any, where: str) -> tuple[float | None, float | None]:
    if not isinstance(obj, list) or len(obj) != 2:
        raise _fail(where, f"expected [lo, hi] (numbers; null for an open end, e.g. [0, null] "
                    f"never pays negative), got {obj!r}")
    lo, hi = (None if v is None else _float(v, f"{where}[{k}]") for k, v in enumerate(obj))
    if lo is None and hi is None:
        raise _fail(where, "[null, null] clamps nothing; give at least one bound or drop 'clamp'")
    if lo is not None and hi is not None and lo > hi:
        raise _fail(where, f"lo {lo} > hi {hi}")
    return lo, hi


# ------------------------------------------------------------------------------ the spec
@dataclass
class TaskSpec:
    """A validated task spec (see the module docstring); build the task with :meth:`build`.

    ``state`` is the (first) savestate start; ``states`` all of them when the spec lists several
    (``start.states``); ``jitter`` the largest extra delay before each macro press.
    """

    name: str
    reward: list[RewardTerm]
    rom_sha256: tuple[str, ...] = ()
    rom_titles: tuple[str, ...] = ()
    rom_has_logo: bool = True
    state: Path | None = None
    states: tuple[Path, ...] = ()
    macro: list[tuple[int, int]] = field(default_factory=lambda: [(0, 60)])
    jitter: int = 0
    noop_max: int | None = None
    actions: str | list[str] = "minimal"
    max_episode_steps: int | None = None
    max_episode_frames: int | None = None
    terminate: list[Condition] = field(default_factory=list)
    truncate: list[Condition] = field(default_factory=list)
    success: list[Condition] = field(default_factory=list)
    pokes: list[tuple[int, int, int]] = field(default_factory=list)
    explore_ram: tuple[tuple[int, ...], float, int] | None = None
    explore_screen: tuple[float, int] | None = None
    observations: tuple[RamObservation, ...] = ()
    decision_watch: tuple[int, ...] = ()
    decision_max_frames: int = 16
    train_defaults: dict[str, Any] = field(default_factory=dict)

    def build(self, rom: str | Path | None = None, state: Any = None) -> SpecTask:
        """The :class:`SpecTask` of this spec (``rom``: the game's ROM file)."""
        return SpecTask(self, rom=rom, state=state)


def _state_path(obj: Any, where: str, base_dir: Path | None) -> Path:
    if not isinstance(obj, (str, Path)) or not str(obj):
        raise _fail(where, f"expected a savestate file name, got {obj!r}")
    p = Path(obj)
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if not p.is_file():
        raise _fail(where, f"savestate file {p} not found")
    return p


def _parse_start(spec: TaskSpec, obj: Any, base_dir: Path | None) -> None:
    start = _keys(obj, "start", {"state", "states", "macro", "jitter", "noop_max"})
    sources = [k for k in ("state", "states", "macro") if k in start]
    if len(sources) > 1:
        raise _fail("start", "give either 'state' (a savestate file), 'states' (a list of them) "
                    f"or 'macro' (button steps), not {' and '.join(repr(s) for s in sources)}")
    if "state" in start:
        spec.state = _state_path(start["state"], "start.state", base_dir)
    if "states" in start:
        files = start["states"]
        if not isinstance(files, list) or not files:
            raise _fail("start.states", "expected a non-empty list of savestate files")
        spec.states = tuple(_state_path(f, f"start.states[{k}]", base_dir)
                            for k, f in enumerate(files))
        spec.state = spec.states[0]
    if "macro" in start:
        steps = start["macro"]
        if not isinstance(steps, list) or not steps:
            raise _fail("start.macro", "expected a non-empty list of {wait: N} / {press: BUTTONS, frames: N}")
        spec.macro = []
        for k, st in enumerate(steps):
            w = f"start.macro[{k}]"
            if isinstance(st, dict) and "wait" in st:
                _keys(st, w, {"wait"})
                spec.macro.append((0, _int(st["wait"], f"{w}.wait", 1, 1_000_000)))
            else:
                _keys(st, w, {"press", "frames"}, ("press",))
                spec.macro.append((_buttons(st["press"], f"{w}.press"),
                                   _int(st.get("frames", 8), f"{w}.frames", 1, 1_000_000)))
    if "jitter" in start:
        if spec.state is not None:
            raise _fail("start.jitter", "a savestate start has no macro to delay (jitter waits "
                        "extra frames before the macro's presses); use 'noop_max' for random "
                        "no-op frames after the state is loaded")
        spec.jitter = _int(start["jitter"], "start.jitter", 0, MAX_JITTER)
    if "noop_max" in start:
        spec.noop_max = _int(start["noop_max"], "start.noop_max", 0, 1_000_000)


def _parse_decision(spec: TaskSpec, obj: Any) -> None:
    """``decision: {on_change: [addresses], max_frames: N}``: a step per game tick."""
    d = _keys(obj, "decision", {"on_change", "max_frames"}, ("on_change",))
    addrs = d["on_change"]
    if not isinstance(addrs, list) or not addrs:
        raise _fail("decision.on_change", "expected a non-empty list of RAM addresses whose "
                    "change ends a step (e.g. the player's position: [0xC004, 0xC005])")
    spec.decision_watch = tuple(_int(a, f"decision.on_change[{k}]", 0, 0xFFFF)
                                for k, a in enumerate(addrs))
    spec.decision_max_frames = _int(d.get("max_frames", 16), "decision.max_frames", 1,
                                    MAX_DECISION_FRAMES)


def _parse_observe(obj: Any) -> tuple[RamObservation, ...]:
    """``observe``: ``{name: [addresses]}`` or ``{name: {range: [lo, hi]}}`` entries."""
    what = ("expected a mapping of observation names to RAM addresses, e.g. {ram: [0xC000, "
            "0xC001]} or {board: {range: [0xC100, 0xC118]}}")
    if not isinstance(obj, dict):
        raise _fail("observe", f"{what}; got {obj!r}")
    out = []
    for name, body in obj.items():
        problem = observation_name_problem(name)
        if problem is not None:
            raise _fail(f"observe.{name}", problem)
        w = f"observe.{name}"
        if isinstance(body, dict):
            _keys(body, w, {"range"}, ("range",))
            r = body["range"]
            if not isinstance(r, list) or len(r) != 2:
                raise _fail(f"{w}.range", f"expected [lo, hi] (inclusive addresses), got {r!r}")
            lo = _int(r[0], f"{w}.range[0]", 0, 0xFFFF)
            hi = _int(r[1], f"{w}.range[1]", 0, 0xFFFF)
            if lo > hi:
                raise _fail(f"{w}.range", f"lo {lo:#06x} > hi {hi:#06x}")
            addrs = tuple(range(lo, hi + 1))
        elif isinstance(body, list):
            if not body:
                raise _fail(w, "expected at least one RAM address (0x0000-0xFFFF)")
            addrs = tuple(_int(a, f"{w}[{k}]", 0, 0xFFFF) for k, a in enumerate(body))
            first: dict[int, int] = {}
            for k, a in enumerate(addrs):
                if a in first:
                    raise _fail(f"{w}[{k}]", f"{a:#06x} is listed twice (also at [{first[a]}]); "
                                "list each address once")
                first[a] = k
        else:
            raise _fail(w, f"expected a list of RAM addresses or {{range: [lo, hi]}}, got "
                        f"{body!r}")
        out.append(RamObservation(name, addrs))
    return tuple(out)


def parse_task_spec(obj: dict, base_dir: Path | None = None, name: str = "spec") -> TaskSpec:
    """Validate a spec mapping into a :class:`TaskSpec` (``base_dir``: where relative paths
    such as ``start.state`` are resolved, the spec file's folder)."""
    _keys(obj, "top level", _TOP_KEYS, ("reward",))
    name = obj.get("name", name)
    if not isinstance(name, str) or not name:
        raise _fail("name", f"expected a non-empty string, got {name!r}")
    spec = TaskSpec(name=name, reward=[])
    rom = _keys(obj.get("rom", {}), "rom", {"sha256", "title", "logo"})
    if not isinstance(rom.get("logo", True), bool):
        raise _fail("rom.logo", "expected true or false")
    spec.rom_has_logo = rom.get("logo", True)
    if "sha256" in rom:
        h = str(rom["sha256"]).lower()
        if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
            raise _fail("rom.sha256", "expected 64 hex digits (sha256sum game.gb)")
        spec.rom_sha256 = (h,)
    if "title" in rom:
        spec.rom_titles = (str(rom["title"]),)
    _parse_start(spec, obj.get("start", {}), base_dir)
    actions = obj.get("actions", "minimal")
    try:
        make_action_set(actions)
    except (ValueError, TypeError, KeyError) as err:
        raise _fail("actions", f"{err}") from None
    spec.actions = actions
    if obj.get("max_episode_steps") is not None and obj.get("max_episode_frames") is not None:
        raise _fail("max_episode_frames", "give the episode's limit once: max_episode_steps "
                    "(agent steps) or max_episode_frames (game frames, the same at any frame skip)")
    if obj.get("max_episode_steps") is not None:
        spec.max_episode_steps = _int(obj["max_episode_steps"], "max_episode_steps", 1, 10**9)
    if obj.get("max_episode_frames") is not None:
        spec.max_episode_frames = _int(obj["max_episode_frames"], "max_episode_frames", 1, 10**10)
    terms = obj["reward"]
    if not isinstance(terms, list) or not terms:
        raise _fail("reward", "expected a non-empty list of reward terms")
    spec.reward = [RewardTerm.parse(t, f"reward[{k}]") for k, t in enumerate(terms)]
    spec.terminate = _predicate_list(obj.get("terminate", []), "terminate")
    spec.truncate = _predicate_list(obj.get("truncate", []), "truncate")
    if "success" in obj:
        spec.success = _predicate_list(obj["success"], "success")
        if not spec.success:
            raise _fail("success", "expected a predicate or a non-empty list of them (or drop "
                        "'success': episodes then report their return only)")
    pokes = obj.get("on_reset", [])
    if not isinstance(pokes, list):
        raise _fail("on_reset", "expected a list of {address, value} or {address, random: [lo, hi]}")
    for k, p in enumerate(pokes):
        w = f"on_reset[{k}]"
        _keys(p, w, {"address", "value", "random"}, ("address",))
        addr = _int(p["address"], f"{w}.address", 0, 0xFFFF)
        if ("value" in p) == ("random" in p):
            raise _fail(w, "give exactly one of 'value' (a byte) or 'random' ([lo, hi] bytes)")
        if "value" in p:
            v = _int(p["value"], f"{w}.value", 0, 255)
            spec.pokes.append((addr, v, v))
        else:
            r = p["random"]
            if not isinstance(r, list) or len(r) != 2:
                raise _fail(f"{w}.random", "expected [lo, hi] (inclusive byte range)")
            lo, hi = _int(r[0], f"{w}.random[0]", 0, 255), _int(r[1], f"{w}.random[1]", 0, 255)
            if lo > hi:
                raise _fail(f"{w}.random", f"lo {lo} > hi {hi}")
            spec.pokes.append((addr, lo, hi))
    exp = _keys(obj.get("exploration", {}), "exploration", {"ram", "screen"})
    if "ram" in exp:
        r = _keys(exp["ram"], "exploration.ram", {"addresses", "scale", "table_bits"}, ("addresses",))
        addrs = r["addresses"]
        if not isinstance(addrs, list) or not addrs:
            raise _fail("exploration.ram.addresses", "expected a non-empty list of RAM addresses")
        addrs = tuple(_int(a, f"exploration.ram.addresses[{k}]", 0, 0xFFFF) for k, a in enumerate(addrs))
        spec.explore_ram = (addrs, _float(r.get("scale", 0.01), "exploration.ram.scale"),
                            _int(r.get("table_bits", 16), "exploration.ram.table_bits", 4, 24))
    if "screen" in exp:
        s = _keys(exp["screen"], "exploration.screen", {"scale", "table_bits"})
        spec.explore_screen = (_float(s.get("scale", 0.01), "exploration.screen.scale"),
                               _int(s.get("table_bits", 16), "exploration.screen.table_bits", 4, 24))
    if "observe" in obj:
        spec.observations = _parse_observe(obj["observe"])
    if "decision" in obj:
        _parse_decision(spec, obj["decision"])
    train = obj.get("train", {})
    if not isinstance(train, dict):
        raise _fail("train", "expected a mapping of TrainConfig fields")
    spec.train_defaults = dict(train)
    return spec


def load_task_spec(spec: str | Path | dict, rom: str | Path | None = None,
                   state: Any = None) -> SpecTask:
    """Read (``.yaml``/``.yml``/``.json`` file) or take (dict) a spec, validate it and build its
    :class:`SpecTask`. Raises :class:`TaskSpecError` naming the bad field."""
    if isinstance(spec, dict):
        return parse_task_spec(spec).build(rom=rom, state=state)
    path = Path(spec)
    if not path.is_file():
        raise TaskSpecError(f"task spec file {path} not found")
    text = path.read_text()
    try:
        if path.suffix.lower() == ".json":
            obj = json.loads(text)
        else:
            import yaml

            obj = yaml.safe_load(text)
    except Exception as err:  # noqa: BLE001 - any parser error is a spec error
        raise TaskSpecError(f"task spec {path} does not parse: {err}") from None
    if obj is None:
        raise TaskSpecError(f"task spec {path} is empty")
    return parse_task_spec(obj, base_dir=path.parent, name=path.stem).build(rom=rom, state=state)


# ------------------------------------------------------------------------------ the task
_HASH_MUL = 0x9E3779B1  # Knuth's multiplicative hash constant


def _pair_shade_table() -> torch.Tensor:
    """``float32[65536]``: the sum of the eight 2-bit shades packed in a 16-bit word (two
    packed2 bytes), for :meth:`SpecTask.screen_key`."""
    per_byte = packed2_lut().sum(1, dtype=torch.int64)  # shade sum of each byte's 4 pixels
    word = torch.arange(65536)
    return (per_byte[word & 0xFF] + per_byte[word >> 8]).to(torch.float32)


class SpecTask(Task):
    """The :class:`Task` a :class:`TaskSpec` describes (see :func:`load_task_spec`).

    Per-step work: one ``read_memory`` gather per distinct watch, tensor ops for the terms; the
    exploration bonus keeps per-env visit counts in ``[N, 2**table_bits]`` tables tagged with
    the episode they were counted in (no clearing at episode start, no host sync), and pays
    ``scale / sqrt(visits)`` for the current RAM tuple / coarse screen hash.

    Varied starts: ``start.states`` gives one start variant per savestate; ``start.jitter``
    makes :meth:`prepare_start` wait a random 0..jitter extra frames before each press of the
    macro (see :meth:`prepare_start` for why there); ``start.noop_max`` becomes
    :attr:`default_noop_max`. A ``success`` predicate sets :attr:`has_success`; a ``shaping``
    term or an exploration bonus sets :attr:`has_score` (:meth:`score`); an exploration bonus
    also sets :attr:`has_bonus` (:meth:`bonus`: its share of the reward).
    """

    name = "spec"

    def __init__(self, spec: TaskSpec, rom: str | Path | None = None, state: Any = None):
        super().__init__(rom=rom, state=state if state is not None else spec.state)
        self.spec = spec
        self.name = spec.name
        self.rom_sha256 = spec.rom_sha256
        self.rom_titles = spec.rom_titles
        self.rom_has_logo = spec.rom_has_logo
        self.default_action_set = spec.actions
        self.default_max_episode_steps = spec.max_episode_steps
        self.default_max_episode_frames = spec.max_episode_frames
        self.default_noop_max = spec.noop_max
        self.has_success = bool(spec.success)
        self.has_bonus = spec.explore_ram is not None or spec.explore_screen is not None
        self.has_score = any(t.shaping for t in spec.reward) or self.has_bonus
        self.observations = spec.observations
        self.decision_watch = spec.decision_watch
        self.decision_max_frames = spec.decision_max_frames
        # without a success predicate an episode reports its return only (no guessed success)
        self.success_rule = "none"
        # a state given by the caller replaces the spec's start, savestate list included
        self._states: tuple[Any, ...] = spec.states if state is None else ()
        if spec.train_defaults:
            self.train_defaults = dict(spec.train_defaults)
        watches: set[Watch] = set()
        for t in spec.reward:
            watches |= t.watches()
        for p in spec.terminate + spec.truncate + spec.success:
            watches |= p.watches()
        self._watches: list[Watch] = sorted(watches, key=repr)

    def default_rom(self) -> Path:
        raise FileNotFoundError(
            f"task spec {self.name!r} needs the game's ROM: pass rom=PATH (CLI: --rom game.gb)")

    def check_cartridge(self, cartridge: Any) -> None:
        try:
            super().check_cartridge(cartridge)
        except TaskMismatchError as err:
            raise TaskMismatchError(f"{err} (task spec 'rom' section)") from None

    # ---- start states --------------------------------------------------------------------
    @property
    def num_start_variants(self) -> int:
        """One per savestate of ``start.states``; 1 otherwise."""
        return max(1, len(self._states))

    @property
    def start_jitter(self) -> int:
        """Largest total extra delay :meth:`prepare_start` adds: ``jitter`` per macro press (at
        least one), 0 for a savestate start."""
        if self.state is not None or not self.spec.jitter:
            return 0
        presses = sum(1 for buttons, _ in self.spec.macro if buttons)
        return self.spec.jitter * max(1, presses)

    def prepare(self, gb: Any) -> None:
        """Load the spec's (first) savestate, or boot and play its button macro (no jitter)."""
        if self.state is not None:
            return super().prepare(gb)
        self._play_macro(gb, None)

    def prepare_start(self, gb: Any, variant: int, generator: torch.Generator) -> None:
        """Bring ``gb`` to start variant ``variant``: savestate ``start.states[variant]``, or the
        macro with jitter drawn from ``generator``.

        Jitter is an independent 0..``jitter`` extra frames of waiting before *each* press of
        the macro (at the end for a macro without presses). Games seed their random number
        generator from a frame counter or the DIV timer when a button is read (the START that
        begins a game), and some restart such counters on every screen, so only a delay right
        before a press changes what the game draws; a delay after the last press would only
        shift the first observation, which ``noop_max`` already does. The draws are per call:
        every console of ``gb`` gets the same delays, and the env calls this once per pool entry.
        """
        if not 0 <= variant < self.num_start_variants:
            raise ValueError(f"start variant {variant} out of range: task {self.name!r} has "
                             f"{self.num_start_variants}")
        if self._states:
            return self._load_state(gb, self._states[variant])
        if self.state is not None:
            return super().prepare(gb)
        self._play_macro(gb, generator)

    def _load_state(self, gb: Any, state: Any) -> None:
        """The base class's savestate loading (checks and errors included) for ``state``."""
        first = self.state
        self.state = state
        try:
            super().prepare(gb)
        finally:
            self.state = first

    def _play_macro(self, gb: Any, generator: torch.Generator | None) -> None:
        jitter = self.spec.jitter if generator is not None else 0

        def delay() -> None:
            if jitter:
                n = int(torch.randint(0, jitter + 1, (1,), generator=generator))
                gb.run_frames(n)

        presses = 0
        for buttons, frames in self.spec.macro:
            if buttons:
                presses += 1
                delay()
            gb.run_frames(frames, buttons=buttons or None)
        if not presses:
            delay()

    # ---- per episode and per step --------------------------------------------------------
    def setup(self, num_envs: int, device: torch.device) -> None:
        super().setup(num_envs, device)
        for k, _ in enumerate(self._watches):
            self.buffers[f"prev{k}"] = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.buffers["episode"] = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        if self.has_success:
            self.buffers["success"] = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        if self.has_score:
            self.buffers["score"] = torch.zeros(num_envs, dtype=torch.float32, device=self.device)
        if self.has_bonus:
            self.buffers["bonus"] = torch.zeros(num_envs, dtype=torch.float32, device=self.device)
        if self.spec.explore_ram is not None:
            self._alloc_table("ram", self.spec.explore_ram[2])
        if self.spec.explore_screen is not None:
            self._alloc_table("screen", self.spec.explore_screen[1])
            g = torch.Generator().manual_seed(0x5EED)
            self._screen_w = torch.randint(1, 2**31 - 1, (9 * 10,), generator=g,
                                           dtype=torch.int64).to(self.device)
            self._pair_shades = _pair_shade_table().to(self.device)

    def _alloc_table(self, kind: str, bits: int) -> None:
        n = self.num_envs
        self.buffers[f"{kind}_count"] = torch.zeros(n, 1 << bits, dtype=torch.int32, device=self.device)
        self.buffers[f"{kind}_tag"] = torch.full((n, 1 << bits), -1, dtype=torch.int32, device=self.device)

    @property
    def reset_runs_frames(self) -> bool:
        """Only a spec with ``on_reset`` bytes needs frames before the first observation: any
        other starts each episode on its start state itself (nothing emulated, nothing lost)."""
        return bool(self.spec.pokes)

    def on_reset(self, gb: Any, mask: torch.Tensor, generator: torch.Generator | None) -> None:
        """Write the spec's per-episode bytes (fixed or drawn in ``[lo, hi]``) into masked envs."""
        for addr, lo, hi in self.spec.pokes:
            if lo == hi:
                v = torch.full((self.num_envs, 1), lo, dtype=torch.uint8, device=self.device)
            else:
                v = torch.randint(lo, hi + 1, (self.num_envs, 1), generator=generator,
                                  device=self.device, dtype=torch.int64).to(torch.uint8)
            gb.write_memory(addr, v, mask=mask)

    def _visit(self, kind: str, key: torch.Tensor) -> torch.Tensor:
        """Count a visit of ``key`` (int64[N] slot index) this episode; ``visits`` after it."""
        count, tag = self.buffers[f"{kind}_count"], self.buffers[f"{kind}_tag"]
        ep = self.buffers["episode"]
        slot = key.unsqueeze(1)
        fresh = tag.gather(1, slot).squeeze(1) != ep
        c = torch.where(fresh, torch.zeros_like(ep), count.gather(1, slot).squeeze(1)) + 1
        count.scatter_(1, slot, c.unsqueeze(1))
        tag.scatter_(1, slot, ep.unsqueeze(1))
        return c

    def compute(self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor):
        """Reward (sum of the terms and the exploration bonus), terminated and truncated."""
        now: dict[Watch, torch.Tensor] = {}
        prev: dict[Watch, torch.Tensor] = {}
        for k, w in enumerate(self._watches):
            v = w.read(gb)
            p = self.buffers[f"prev{k}"]
            now[w] = v
            prev[w] = torch.where(is_first, v, p)  # a new episode has no previous step
            p.copy_(v)
        reward = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
        score = self.buffers["score"].zero_() if self.has_score else None
        for t in self.spec.reward:
            r = t.compute(now, prev)
            reward += r
            if score is not None and not t.shaping:
                score += r
        self.buffers["episode"] += is_first.to(torch.int32)
        bonus = self.buffers["bonus"].zero_() if self.has_bonus else None
        if self.spec.explore_ram is not None:
            addrs, scale, bits = self.spec.explore_ram
            h = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
            for a in addrs:
                h = (h * _HASH_MUL + gb.read_memory(a)[:, 0].to(torch.int64) + 1) & 0xFFFFFFFF
            r = scale * self._visit("ram", h & ((1 << bits) - 1)).to(torch.float32).rsqrt()
            reward += r
            bonus += r
        if self.spec.explore_screen is not None:
            scale, bits = self.spec.explore_screen
            r = scale * self._visit("screen", self.screen_key(pixels, bits)).float().rsqrt()
            reward += r  # in the order the terms were always added: rewards stay bit-identical
            bonus += r
        terminated = self._any(self.spec.terminate, now, prev)
        truncated = self._any(self.spec.truncate, now, prev)
        if self.has_success:
            self.buffers["success"].copy_(self._any(self.spec.success, now, prev) & ~is_first)
        return reward, terminated, truncated

    def success(self) -> torch.Tensor:
        """``bool[N]``: envs where the spec's ``success`` predicate held at the step just
        computed (never at an episode's first step)."""
        if not self.has_success:
            return super().success()
        return self.buffers["success"].clone()

    def score(self) -> torch.Tensor:
        """``float32[N]``: the step's reward without its ``shaping`` terms and exploration bonus
        (the game's own measure), for specs with :attr:`has_score`."""
        if not self.has_score:
            return super().score()
        return self.buffers["score"].clone()

    def bonus(self) -> torch.Tensor:
        """``float32[N]``: the step's exploration bonus (RAM and screen counts), for specs with
        :attr:`has_bonus`; the reward holds it too."""
        if not self.has_bonus:
            return super().bonus()
        return self.buffers["bonus"].clone()

    def screen_key(self, pixels: torch.Tensor, bits: int) -> torch.Tensor:
        """A coarse hash of the packed2 frame: mean shade of 9x10 blocks (8x8 pixels),
        quantised to 4 levels, hashed to ``bits`` bits.

        One table lookup per 8 pixels instead of shifts and masks: ``docs/decisions/screen_key.md``."""
        n = self.num_envs
        _, rows, row_bytes = PACKED2_SHAPE
        words = pixels.contiguous().reshape(n, rows, row_bytes // 2, 2).view(torch.int16)
        shades = self._pair_shades[words.reshape(n, rows, row_bytes // 2).int() & 0xFFFF]
        blocks = shades.reshape(n, rows // 8, 8, row_bytes // 2).sum(2)  # 0..192 per block
        q = torch.div(blocks * 4, 193, rounding_mode="floor").to(torch.int64).reshape(n, -1)
        h = (q * self._screen_w).sum(1)
        return (h ^ (h >> 17)) & ((1 << bits) - 1)

    def _any(self, preds: list[Condition], now: dict[Watch, torch.Tensor],
             prev: dict[Watch, torch.Tensor]) -> torch.Tensor:
        out = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        for p in preds:
            out |= p.test(now, prev)
        return out
