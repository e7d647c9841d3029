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
      macro:                       # boot, then button steps
        - {wait: 120}
        - {press: START, frames: 8}
        - {wait: 60}
    actions: minimal               # an action set name or a list such as [NOOP, A, UP+A]
    max_episode_steps: 2000
    reward:                        # summed every env step
      - {kind: delta, address: 0xC0A0, length: 2, encoding: bcd, scale: 0.01}   # score
      - {kind: event, address: 0xC0A2, op: decreased, scale: -1}              # lost a life
      - {kind: level, address: 0xC0B0, scale: 0.001}                          # value x scale
    terminate: [{address: 0xC0A2, op: "==", value: 0}]   # any predicate true ends the episode
    truncate: [{address: 0xC0A3, op: changed}]            # ... or truncates it
    on_reset: [{address: 0xC002, random: [0, 255]}, {address: 0xC003, value: 1}]
    exploration:                   # optional count bonus, no game knowledge needed
      ram: {addresses: [0xD35E, 0xD362, 0xD361], scale: 0.05}
      screen: {scale: 0.01}
    train: {batch_size: 8}         # training defaults of this task (see TrainConfig)

A RAM watch is ``address`` (0x0000-0xFFFF), ``length`` (bytes, default 1), ``encoding``
(``u8``, ``u16le``, ``u16be``, ``bcd`` = packed decimal with the first byte most significant,
``bcdle`` = last byte most significant), ``signed`` (two's complement, u8/u16 only). A
predicate is a watch plus ``op`` (``==  !=  <  <=  >  >=`` against ``value``; ``increased``,
``decreased``, ``changed`` against the previous step).

Example:
    >>> from torchrl_dreamer.envs.spec import load_task_spec
    >>> task = load_task_spec({"name": "demo", "actions": "dpad", "reward": [
    ...     {"kind": "delta", "address": 0xC0A0, "encoding": "u8"}]})
    >>> task.name, task.default_action_set
    ('demo', 'dpad')
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.envs.actions import BUTTON_BITS, make_action_set
from torchrl_dreamer.envs.task import Task, TaskMismatchError

__all__ = [
    "TaskSpecError",
    "RamWatch",
    "Predicate",
    "RewardTerm",
    "TaskSpec",
    "SpecTask",
    "load_task_spec",
    "parse_task_spec",
]

ENCODINGS: dict[str, tuple[int, int]] = {
    "u8": (1, 1),
    "u16le": (2, 2),
    "u16be": (2, 2),
    "bcd": (1, 4),
    "bcdle": (1, 4),
}
"""Watch encodings and the byte lengths each accepts (min, max)."""

COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
CHANGE_OPS = ("increased", "decreased", "changed")
REWARD_KINDS = ("delta", "level", "event")

_TOP_KEYS = {"name", "rom", "start", "actions", "max_episode_steps", "reward", "terminate",
             "truncate", "on_reset", "exploration", "train"}


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


# ------------------------------------------------------------------------------ RAM watches
@dataclass(frozen=True)
class RamWatch:
    """A number kept in RAM: ``length`` bytes at ``address`` decoded with ``encoding``."""

    address: int
    length: int = 1
    encoding: str = "u8"
    signed: bool = False

    @classmethod
    def parse(cls, obj: dict, where: str) -> RamWatch:
        """Validate the watch fields of ``obj`` (other keys are the caller's)."""
        if "address" not in obj:
            raise _fail(where, "missing required key 'address' (a RAM address 0x0000-0xFFFF)")
        addr = _int(obj["address"], f"{where}.address", 0, 0xFFFF)
        enc = obj.get("encoding", "u8")
        if enc not in ENCODINGS:
            raise _fail(f"{where}.encoding", f"unknown encoding {enc!r}; use one of {list(ENCODINGS)}")
        lo, hi = ENCODINGS[enc]
        length = _int(obj.get("length", lo), f"{where}.length", 1, 4)
        if not lo <= length <= hi:
            raise _fail(f"{where}.length", f"encoding {enc!r} takes {lo}" + (
                f"-{hi}" if hi != lo else "") + f" byte(s), got {length}; fix length or encoding")
        if addr + length - 1 > 0xFFFF:
            raise _fail(f"{where}.address", f"{length} bytes from {addr:#06x} run past 0xFFFF")
        signed = obj.get("signed", False)
        if not isinstance(signed, bool):
            raise _fail(f"{where}.signed", f"expected true or false, got {signed!r}")
        if signed and enc.startswith("bcd"):
            raise _fail(f"{where}.signed", "BCD values cannot be signed")
        return cls(addr, length, enc, signed)

    def decode(self, raw: torch.Tensor) -> torch.Tensor:
        """``int64[N]`` values of raw bytes ``uint8[N, length]``."""
        b = raw.to(torch.int64)
        if self.encoding == "u8":
            v = b[:, 0]
        elif self.encoding == "u16le":
            v = b[:, 0] | (b[:, 1] << 8)
        elif self.encoding == "u16be":
            v = (b[:, 0] << 8) | b[:, 1]
        else:
            order = b if self.encoding == "bcd" else b.flip(1)
            v = torch.zeros_like(b[:, 0])
            for k in range(self.length):
                v = v * 100 + (order[:, k] >> 4) * 10 + (order[:, k] & 0x0F)
        if self.signed:
            bits = 8 * self.length
            v = torch.where(v >= 1 << (bits - 1), v - (1 << bits), v)
        return v


@dataclass(frozen=True)
class Predicate:
    """A condition on a watch: compared with ``value``, or with the previous step's value."""

    watch: RamWatch
    op: str
    value: int = 0

    _KEYS = {"address", "length", "encoding", "signed", "op", "value"}

    @classmethod
    def parse(cls, obj: Any, where: str, extra: set[str] = frozenset()) -> Predicate:
        """Validate a predicate mapping (``extra``: further keys the caller allows)."""
        _keys(obj, where, cls._KEYS | set(extra), ("address", "op"))
        watch = RamWatch.parse(obj, where)
        op = obj["op"]
        if op not in COMPARE_OPS + CHANGE_OPS:
            raise _fail(f"{where}.op", f"unknown op {op!r}; use one of {list(COMPARE_OPS + CHANGE_OPS)}")
        if op in COMPARE_OPS:
            if "value" not in obj:
                raise _fail(where, f"op {op!r} needs a 'value' to compare with")
            value = _int(obj["value"], f"{where}.value")
        else:
            if "value" in obj:
                raise _fail(f"{where}.value", f"op {op!r} compares with the previous step; drop 'value'")
            value = 0
        return cls(watch, op, value)

    def evaluate(self, now: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """``bool[N]`` for decoded values ``now`` and the previous step's ``prev``."""
        if self.op == "increased":
            return now > prev
        if self.op == "decreased":
            return now < prev
        if self.op == "changed":
            return now != prev
        v = self.value
        return {"==": now == v, "!=": now != v, "<": now < v, "<=": now <= v,
                ">": now > v, ">=": now >= v}[self.op]


@dataclass(frozen=True)
class RewardTerm:
    """One reward term: ``delta`` (scale x change of a counter), ``level`` (scale x value) or
    ``event`` (scale once when a predicate becomes true)."""

    kind: str
    watch: RamWatch
    scale: float = 1.0
    predicate: Predicate | None = None

    @classmethod
    def parse(cls, obj: Any, where: str) -> RewardTerm:
        """Validate one entry of ``reward``."""
        if not isinstance(obj, dict):
            raise _fail(where, f"expected a mapping, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind not in REWARD_KINDS:
            raise _fail(f"{where}.kind", f"expected one of {list(REWARD_KINDS)}, got {kind!r}")
        scale = _float(obj.get("scale", 1.0), f"{where}.scale")
        if kind == "event":
            pred = Predicate.parse(obj, where, extra={"kind", "scale"})
            return cls(kind, pred.watch, scale, pred)
        _keys(obj, where, {"kind", "scale", "address", "length", "encoding", "signed"}, ("address",))
        return cls(kind, RamWatch.parse(obj, where), scale)


# ------------------------------------------------------------------------------ the spec
@dataclass
class TaskSpec:
    """A validated task spec (see the module docstring); build the task with :meth:`build`."""

    name: str
    reward: list[RewardTerm]
    rom_sha256: tuple[str, ...] = ()
    rom_titles: tuple[str, ...] = ()
    rom_has_logo: bool = True
    state: Path | None = None
    macro: list[tuple[int, int]] = field(default_factory=lambda: [(0, 60)])
    actions: str | list[str] = "minimal"
    max_episode_steps: int | None = None
    terminate: list[Predicate] = field(default_factory=list)
    truncate: list[Predicate] = field(default_factory=list)
    pokes: list[tuple[int, int, int]] = field(default_factory=list)
    explore_ram: tuple[tuple[int, ...], float, int] | None = None
    explore_screen: tuple[float, int] | None = None
    train_defaults: dict[str, Any] = field(default_factory=dict)

    def build(self, rom: str | Path | None = None, state: Any = None) -> SpecTask:
        """The :class:`SpecTask` of this spec (``rom``: the game's ROM file)."""
        return SpecTask(self, rom=rom, state=state)


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
    start = _keys(obj.get("start", {}), "start", {"state", "macro"})
    if "state" in start and "macro" in start:
        raise _fail("start", "give either 'state' (a savestate file) or 'macro', not both")
    if "state" in start:
        p = Path(start["state"])
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        if not p.is_file():
            raise _fail("start.state", f"savestate file {p} not found")
        spec.state = p
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
    actions = obj.get("actions", "minimal")
    try:
        make_action_set(actions)
    except (ValueError, TypeError, KeyError) as err:
        raise _fail("actions", f"{err}") from None
    spec.actions = actions
    if obj.get("max_episode_steps") is not None:
        spec.max_episode_steps = _int(obj["max_episode_steps"], "max_episode_steps", 1, 10**9)
    terms = obj["reward"]
    if not isinstance(terms, list) or not terms:
        raise _fail("reward", "expected a non-empty list of reward terms")
    spec.reward = [RewardTerm.parse(t, f"reward[{k}]") for k, t in enumerate(terms)]
    for key in ("terminate", "truncate"):
        preds = obj.get(key, [])
        if not isinstance(preds, list):
            raise _fail(key, "expected a list of predicates")
        setattr(spec, key, [Predicate.parse(p, f"{key}[{k}]") for k, p in enumerate(preds)])
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


class SpecTask(Task):
    """The :class:`Task` a :class:`TaskSpec` describes (see :func:`load_task_spec`).

    Per-step work: one ``read_memory`` gather per distinct watch, tensor ops for the terms; the
    exploration bonus keeps per-env visit counts in ``[N, 2**table_bits]`` tables tagged with
    the episode they were counted in (no clearing at episode start, no host sync), and pays
    ``scale / sqrt(visits)`` for the current RAM tuple / coarse screen hash.
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
        if spec.train_defaults:
            self.train_defaults = dict(spec.train_defaults)
        self._watches = sorted({t.watch for t in spec.reward}
                               | {p.watch for p in spec.terminate + spec.truncate},
                               key=lambda w: (w.address, w.length, w.encoding, w.signed))

    def default_rom(self) -> Path:
        raise FileNotFoundError(
            f"task spec {self.name!r} needs the game's ROM: pass rom=PATH (CLI: --rom game.gb)")

    def check_cartridge(self, cartridge: Any) -> None:
        try:
            super().check_cartridge(cartridge)
        except TaskMismatchError as err:
            raise TaskMismatchError(f"{err} (task spec 'rom' section)") from None

    def prepare(self, gb: Any) -> None:
        """Load the spec's savestate, or boot and play its button macro."""
        if self.state is not None:
            return super().prepare(gb)
        for buttons, frames in self.spec.macro:
            gb.run_frames(frames, buttons=buttons or None)

    def setup(self, num_envs: int, device: torch.device) -> None:
        super().setup(num_envs, device)
        for k, _ in enumerate(self._watches):
            self.buffers[f"prev{k}"] = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.buffers["episode"] = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        if self.spec.explore_ram is not None:
            self._alloc_table("ram", self.spec.explore_ram[2])
        if self.spec.explore_screen is not None:
            self._alloc_table("screen", self.spec.explore_screen[1])
            g = torch.Generator().manual_seed(0x5EED)
            self._screen_w = torch.randint(1, 2**31 - 1, (9 * 10,), generator=g,
                                           dtype=torch.int64).to(self.device)

    def _alloc_table(self, kind: str, bits: int) -> None:
        n = self.num_envs
        self.buffers[f"{kind}_count"] = torch.zeros(n, 1 << bits, dtype=torch.int32, device=self.device)
        self.buffers[f"{kind}_tag"] = torch.full((n, 1 << bits), -1, dtype=torch.int32, device=self.device)

    def on_reset(self, gb: Any, mask: torch.Tensor, generator: torch.Generator | None) -> None:
        """Write the spec's per-episode bytes (fixed or drawn in ``[lo, hi]``) into masked envs."""
        for addr, lo, hi in self.spec.pokes:
            if lo == hi:
                v = torch.full((self.num_envs, 1), lo, dtype=torch.uint8, device=self.device)
            else:
                v = torch.randint(lo, hi + 1, (self.num_envs, 1), generator=generator,
                                  device=self.device, dtype=torch.int64).to(torch.uint8)
            gb.write_memory(addr, v, mask=mask)

    def _read(self, gb: Any) -> list[torch.Tensor]:
        return [w.decode(gb.read_memory(w.address, w.length)) for w in self._watches]

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
        now = self._read(gb)
        prev = []
        for k, v in enumerate(now):
            p = self.buffers[f"prev{k}"]
            prev.append(torch.where(is_first, v, p))  # a new episode has no previous step
            p.copy_(v)
        index = {w: k for k, w in enumerate(self._watches)}
        reward = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
        for t in self.spec.reward:
            k = index[t.watch]
            if t.kind == "delta":
                reward += t.scale * (now[k] - prev[k]).to(torch.float32)
            elif t.kind == "level":
                reward += t.scale * now[k].to(torch.float32)
            else:
                hit = t.predicate.evaluate(now[k], prev[k])
                if t.predicate.op in COMPARE_OPS:  # an event is the predicate becoming true
                    hit = hit & ~t.predicate.evaluate(prev[k], prev[k])
                reward += t.scale * hit.to(torch.float32)
        self.buffers["episode"] += is_first.to(torch.int32)
        if self.spec.explore_ram is not None:
            addrs, scale, bits = self.spec.explore_ram
            h = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
            for a in addrs:
                h = (h * _HASH_MUL + gb.read_memory(a)[:, 0].to(torch.int64) + 1) & 0xFFFFFFFF
            reward += scale * self._visit("ram", h & ((1 << bits) - 1)).to(torch.float32).rsqrt()
        if self.spec.explore_screen is not None:
            scale, bits = self.spec.explore_screen
            reward += scale * self._visit("screen", self.screen_key(pixels, bits)).float().rsqrt()
        terminated = self._any(self.spec.terminate, now, prev, index)
        truncated = self._any(self.spec.truncate, now, prev, index)
        return reward, terminated, truncated

    def screen_key(self, pixels: torch.Tensor, bits: int) -> torch.Tensor:
        """A coarse hash of the packed2 frame: mean shade of 9x10 blocks (8x8 pixels),
        quantised to 4 levels, hashed to ``bits`` bits."""
        p = pixels.reshape(self.num_envs, 72, 20).to(torch.int64)
        shades = sum(((p >> (2 * k)) & 3) for k in range(4))  # 4 pixels per byte
        blocks = shades.reshape(self.num_envs, 9, 8, 10, 2).sum((2, 4))  # 0..192 per block
        q = (blocks * 4 // 193).reshape(self.num_envs, -1)
        h = (q * self._screen_w).sum(1)
        return (h ^ (h >> 17)) & ((1 << bits) - 1)

    def _any(self, preds: list[Predicate], now, prev, index) -> torch.Tensor:
        out = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        for p in preds:
            k = index[p.watch]
            out |= p.evaluate(now[k], prev[k])
        return out
