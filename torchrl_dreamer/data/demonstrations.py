"""Human demonstrations: a file format, a loader that checks files against the run, and a sampler
that mixes them into training batches.

A demonstration is what the agent would have seen had it played the human's moves: one row per
*env step* (``GameBoyEnv``'s ``frame_skip`` frames, the human's buttons mapped to an action of the
task's action set), with the row alignment of the replay (``docs/row_alignment.md``): row ``t``
holds ``o_t`` (packed2 pixels), the action ``a_t`` chosen after seeing ``o_t``, ``r_t`` and the
flags of ``o_t``. ``python -m torchrl_dreamer.play ROM --record demo.pt`` writes them
(``docs/playing.md``); :func:`replay_demonstration` steps a ``GameBoyEnv`` with the recorded
actions and checks that it gives the recorded observations.

A file is ``torch.save`` of a plain dict (loadable with ``weights_only=True``)::

    format: "torchrl_dreamer.demonstration", version: 1
    rom_sha256, rom_title, task, action_names (list), frame_skip, press_frames, meta (dict)
    pixels uint8[T, 1, 72, 20], action int64[T], reward float32[T],
    terminated / truncated / is_first bool[T], episode_id int32[T]
    success bool[T] (only for tasks that flag success, see Task.has_success)
    bonus float32[T] (only for tasks with an exploration bonus, see Task.has_bonus)

Training with demonstrations keeps them in their own replay (like the distributed design's
human-in-the-loop service, ``docs/ray.md``: a human's data must never be evicted by agent
throughput): :func:`demonstration_storage` fills a one-column :class:`TimeMajorStorage` with the
agent replay's schema (``control_mode`` rows set to :data:`HUMAN` when the schema has that key),
and :class:`DemoMixingSampler` draws ``round(share * B)`` of every batch's ``B`` sequences from it
and the rest from the agent's replay. :func:`attach_demonstrations` does both for a trainer's
``(storage, sampler)`` pair::

    storage, sampler = attach_demonstrations(storage, sampler, ["demos/"], share=0.25, env=env)

The loader refuses a file recorded for another ROM, another action set, another frame skip (or
press length) or another task, each with its own :class:`DemonstrationMismatchError` (``field``
says which).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl_dreamer.data.one_hot import one_hot
from torchrl_dreamer.data.sampler import ChronologicalSliceSampler
from torchrl_dreamer.data.schema import FieldSpec, Key, dreamer_schema
from torchrl_dreamer.data.storage import TimeMajorStorage
from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE

__all__ = [
    "DEMO_FORMAT",
    "DEMO_VERSION",
    "HUMAN",
    "Demonstration",
    "DemonstrationError",
    "DemonstrationMismatchError",
    "DemonstrationRecorder",
    "DemoMixedStorage",
    "DemoMixingSampler",
    "MixedIndex",
    "RunSignature",
    "attach_demonstrations",
    "demo_sequences",
    "demonstration_paths",
    "demonstration_storage",
    "load_demonstrations",
    "replay_demonstration",
]

DEMO_FORMAT = "torchrl_dreamer.demonstration"
"""The ``format`` tag of a demonstration file."""

DEMO_VERSION = 1
"""The file format version this module writes and reads."""

HUMAN = 1
"""``control_mode`` value of human rows (the distributed router's ``HUMAN``; agent rows are 0)."""

_FIELDS: dict[str, tuple[torch.dtype, tuple[int, ...]]] = {
    "pixels": (torch.uint8, PACKED2_SHAPE),
    "action": (torch.int64, ()),
    "reward": (torch.float32, ()),
    "terminated": (torch.bool, ()),
    "truncated": (torch.bool, ()),
    "is_first": (torch.bool, ()),
    "episode_id": (torch.int32, ()),
}

_OPTIONAL_FIELDS: dict[str, tuple[torch.dtype, str, Any]] = {
    "success": (torch.bool, "has_success", False),
    "bonus": (torch.float32, "has_bonus", 0.0),
}
"""Fields recorded only for tasks that report them: ``name -> (dtype, the Task flag that says
so, the value of a row whose env output lacks it)``; ``[T]`` each, or absent."""


class DemonstrationError(ValueError):
    """A demonstration file that cannot be read or is inconsistent in itself."""


class DemonstrationMismatchError(DemonstrationError):
    """A demonstration recorded for another run: ``field`` names what differs
    (``"rom"``, ``"actions"``, ``"frame_skip"``, ``"press_frames"`` or ``"task"``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# ------------------------------------------------------------------------------ run signature
@dataclass(frozen=True)
class RunSignature:
    """What a demonstration must share with the run that trains on it.

    The ROM (its sha256), the action set (names, in index order: an action index means a button
    combination only through it), ``frame_skip`` and ``press_frames`` (what one env step is) and
    the task name (whose reward the rows carry).

    Example:
        >>> sig = RunSignature("ab" * 32, "maze", ("NOOP", "UP", "DOWN", "LEFT", "RIGHT"), 24, 8)
        >>> sig.frame_skip
        24
    """

    rom_sha256: str
    task: str
    action_names: tuple[str, ...]
    frame_skip: int
    press_frames: int
    rom_title: str = ""

    @classmethod
    def from_env(cls, env: Any) -> RunSignature:
        """The signature of a :class:`~torchrl_dreamer.envs.GameBoyEnv` (or an env with the same
        ``gb.cartridge``, ``task``, ``action_set``, ``frame_skip`` and ``press_frames``)."""
        cart = env.gb.cartridge
        return cls(str(cart.sha256), str(env.task.name), tuple(env.action_set.names),
                   int(env.frame_skip), int(env.press_frames), str(getattr(cart, "title", "")))


# ------------------------------------------------------------------------------ the file
@dataclass
class Demonstration:
    """One recorded demonstration: ``T`` env steps of one console (see the module docstring).

    Args:
        rom_sha256, task, action_names, frame_skip, press_frames: the :class:`RunSignature`
            fields of the recording.
        pixels: ``uint8[T, 1, 72, 20]`` packed2 observations ``o_t``.
        action: ``int64[T]`` index (into ``action_names``) chosen after seeing ``o_t``.
        reward, terminated, truncated, is_first, episode_id: ``[T]`` as the env returned them.
        success: ``bool[T]``, the env's ``success`` output (tasks that flag success), or None.
        bonus: ``float32[T]``, the env's ``bonus`` output (the exploration bonus's part of
            ``reward``, tasks with one), or None.
        rom_title: the cartridge title (for messages).
        meta: free-form plain values (seed, max_episode_steps, recorder, spec path, ...).

    Example:
        >>> T = 3
        >>> demo = Demonstration("ab" * 32, "maze", ("NOOP", "UP"), 24, 8,
        ...     pixels=torch.zeros(T, 1, 72, 20, dtype=torch.uint8),
        ...     action=torch.tensor([1, 1, 0]), reward=torch.tensor([0.0, 0.0, 1.0]),
        ...     terminated=torch.tensor([False, False, True]), truncated=torch.zeros(T, dtype=torch.bool),
        ...     is_first=torch.tensor([True, False, False]), episode_id=torch.zeros(T, dtype=torch.int32))
        >>> len(demo), demo.num_episodes, demo.episode_returns()
        (3, 1, [1.0])
    """

    rom_sha256: str
    task: str
    action_names: tuple[str, ...]
    frame_skip: int
    press_frames: int
    pixels: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    is_first: torch.Tensor
    episode_id: torch.Tensor
    success: torch.Tensor | None = None
    bonus: torch.Tensor | None = None
    rom_title: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.action_names = tuple(str(n) for n in self.action_names)
        self.frame_skip = int(self.frame_skip)
        self.press_frames = int(self.press_frames)
        self.check()

    def __len__(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def signature(self) -> RunSignature:
        """The :class:`RunSignature` this demonstration was recorded with."""
        return RunSignature(self.rom_sha256, self.task, self.action_names, self.frame_skip,
                            self.press_frames, self.rom_title)

    @property
    def num_episodes(self) -> int:
        """Episodes begun in the recording (``is_first`` rows)."""
        return int(self.is_first.sum())

    def episode_returns(self) -> list[float]:
        """Sum of rewards of each episode, in order (the last one may be unfinished)."""
        starts = self.is_first.nonzero().flatten().tolist() + [len(self)]
        return [float(self.reward[a:b].sum()) for a, b in zip(starts[:-1], starts[1:])]

    def check(self, where: str = "demonstration") -> None:
        """Shapes, dtypes and the row invariants; raises :class:`DemonstrationError`.

        The first row starts an episode; every row after a ``terminated``/``truncated`` row is
        ``is_first``; ``episode_id`` grows by exactly 1 at each ``is_first`` and stays put
        otherwise; ``is_first`` rows carry no reward and no end flag; actions index
        ``action_names``.
        """
        t = None
        for name, (dtype, shape) in _FIELDS.items():
            v = getattr(self, name)
            if not isinstance(v, torch.Tensor):
                raise DemonstrationError(f"{where}: {name} must be a tensor, got {type(v).__name__}")
            if v.dtype != dtype or tuple(v.shape[1:]) != shape or v.dim() != 1 + len(shape):
                raise DemonstrationError(
                    f"{where}: {name} must be {str(dtype).removeprefix('torch.')}[T"
                    f"{''.join(', ' + str(s) for s in shape)}], got "
                    f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}")
            if t is None:
                t = v.shape[0]
            elif v.shape[0] != t:
                raise DemonstrationError(
                    f"{where}: {name} has {v.shape[0]} rows but pixels has {t}")
        if t == 0:
            raise DemonstrationError(f"{where}: holds no rows")
        for name, (dtype, _, _) in _OPTIONAL_FIELDS.items():
            v = getattr(self, name)
            if v is not None and (not isinstance(v, torch.Tensor) or v.dtype != dtype
                                  or tuple(v.shape) != (t,)):
                raise DemonstrationError(f"{where}: {name} must be "
                                         f"{str(dtype).removeprefix('torch.')}[{t}] or absent")
        if not self.action_names:
            raise DemonstrationError(f"{where}: action_names is empty")
        if int(self.action.min()) < 0 or int(self.action.max()) >= len(self.action_names):
            raise DemonstrationError(
                f"{where}: actions must index the {len(self.action_names)} action_names, got "
                f"values {int(self.action.min())}..{int(self.action.max())}")
        if not bool(self.is_first[0]):
            raise DemonstrationError(f"{where}: the first row must start an episode (is_first)")
        first = self.is_first
        ends = self.terminated | self.truncated
        bad = (ends[:-1] & ~first[1:]).nonzero()
        if bad.numel():
            i = int(bad[0]) + 1
            raise DemonstrationError(
                f"{where}: row {i} follows an episode end but is not is_first")
        step = self.episode_id[1:] - self.episode_id[:-1]
        bad = (step != first[1:].to(step.dtype)).nonzero()
        if bad.numel():
            i = int(bad[0]) + 1
            raise DemonstrationError(
                f"{where}: episode_id goes {int(self.episode_id[i - 1])} -> "
                f"{int(self.episode_id[i])} at row {i} (is_first={bool(first[i])}); it must grow by "
                "exactly 1 at is_first rows and stay put elsewhere")
        bad = (first & ((self.reward != 0) | ends)).nonzero()
        if bad.numel():
            raise DemonstrationError(
                f"{where}: row {int(bad[0])} is is_first but has a reward or an end flag")

    # ---------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """The file's dict (plain values and CPU tensors)."""
        d: dict[str, Any] = {
            "format": DEMO_FORMAT,
            "version": DEMO_VERSION,
            "rom_sha256": self.rom_sha256,
            "rom_title": self.rom_title,
            "task": self.task,
            "action_names": list(self.action_names),
            "frame_skip": self.frame_skip,
            "press_frames": self.press_frames,
            "meta": dict(self.meta),
        }
        for name in _FIELDS:
            d[name] = getattr(self, name).detach().to("cpu").contiguous()
        for name in _OPTIONAL_FIELDS:
            if getattr(self, name) is not None:
                d[name] = getattr(self, name).detach().to("cpu").contiguous()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "demonstration") -> Demonstration:
        """Inverse of :meth:`to_dict`; raises :class:`DemonstrationError` for other data."""
        if not isinstance(d, Mapping) or d.get("format") != DEMO_FORMAT:
            raise DemonstrationError(
                f"{where} is not a torchrl_dreamer demonstration (no format={DEMO_FORMAT!r} "
                "entry); record one with python -m torchrl_dreamer.play ROM --record FILE")
        if d.get("version") != DEMO_VERSION:
            raise DemonstrationError(
                f"{where}: format version {d.get('version')!r}; this torchrl_dreamer reads "
                f"version {DEMO_VERSION}")
        missing = [k for k in ("rom_sha256", "task", "action_names", "frame_skip",
                               "press_frames", *_FIELDS) if k not in d]
        if missing:
            raise DemonstrationError(f"{where}: missing entries {missing}")
        demo = cls.__new__(cls)
        demo.rom_sha256 = str(d["rom_sha256"])
        demo.task = str(d["task"])
        demo.action_names = tuple(str(n) for n in d["action_names"])
        demo.frame_skip = int(d["frame_skip"])
        demo.press_frames = int(d["press_frames"])
        demo.rom_title = str(d.get("rom_title", ""))
        demo.meta = dict(d.get("meta", {}))
        for name in _FIELDS:
            setattr(demo, name, d[name])
        for name in _OPTIONAL_FIELDS:
            setattr(demo, name, d.get(name))
        demo.check(where)
        return demo

    def save(self, path: str | os.PathLike) -> Path:
        """Write the file (``torch.save`` of :meth:`to_dict`); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self.to_dict(), path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Demonstration:
        """Read a file written by :meth:`save` (``weights_only=True``: no code is unpickled)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"demonstration file {path} not found")
        try:
            d = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - any unpickling failure is a bad file
            raise DemonstrationError(f"{path} does not load as a demonstration: {err}") from None
        return cls.from_dict(d, where=str(path))

    # ---------------------------------------------------------------- checks against a run
    def check_compatible(self, run: RunSignature, *, check_task: bool = True,
                         where: str = "demonstration") -> None:
        """Raise :class:`DemonstrationMismatchError` unless this recording fits ``run``.

        The ROM is compared first, then the action set, ``frame_skip``, ``press_frames`` and
        (``check_task``) the task name: the rows' rewards are the recording task's.
        """
        def title(t: str) -> str:
            return f" ({t!r})" if t else ""

        if self.rom_sha256 != run.rom_sha256:
            raise DemonstrationMismatchError(
                "rom",
                f"{where} was recorded on another ROM: sha256 {self.rom_sha256[:16]}..."
                f"{title(self.rom_title)}, but this run's ROM is {run.rom_sha256[:16]}..."
                f"{title(run.rom_title)}. Record demonstrations with the ROM you train on "
                "(python -m torchrl_dreamer.play ROM --record FILE).")
        if tuple(self.action_names) != tuple(run.action_names):
            raise DemonstrationMismatchError(
                "actions",
                f"{where} was recorded with the action set {list(self.action_names)}, but this "
                f"run's actions are {list(run.action_names)}; an action index only means a "
                "button combination within its set. Record with the run's action set (play "
                "--actions) or train with the demonstration's.")
        if self.frame_skip != run.frame_skip:
            raise DemonstrationMismatchError(
                "frame_skip",
                f"{where} was recorded with frame_skip={self.frame_skip} (frames per env step), "
                f"but this run steps {run.frame_skip} frames; its rows are other time steps. "
                f"Record with --frame-skip {run.frame_skip}.")
        if self.press_frames != run.press_frames:
            raise DemonstrationMismatchError(
                "press_frames",
                f"{where} was recorded with press_frames={self.press_frames} (frames a button is "
                f"held per step), but this run holds them {run.press_frames} frames. Record "
                f"with --press-frames {run.press_frames}.")
        if check_task and self.task != run.task:
            raise DemonstrationMismatchError(
                "task",
                f"{where} was recorded for task {self.task!r}, but this run trains "
                f"{run.task!r}: its rewards are the other task's. Record with this run's task "
                "or spec (or pass check_task=False when the rewards agree).")

    def rows(self, schema: Mapping[Key, FieldSpec], *, episode_offset: int = 0
             ) -> dict[Key, torch.Tensor]:
        """The rows as replay fields of ``schema``: ``{key: [T, 1, *shape]}`` (one env column).

        Fills ``pixels``, ``action`` (an index, or one-hot for a ``(n,)`` action field),
        ``reward``, ``is_first``, ``continue_`` (``1 - terminated``), ``terminated``,
        ``truncated``, ``episode_id`` (plus ``episode_offset``), ``success`` (when recorded),
        ``bonus`` (as recorded; zeros for a recording without one, whose reward then counts
        whole as the game's), ``score`` (zeros) and ``control_mode`` (:data:`HUMAN`); a schema
        key outside these raises :class:`DemonstrationError`.
        """
        n = len(self.action_names)
        out: dict[Key, torch.Tensor] = {}
        for key, fs in schema.items():
            name = key if isinstance(key, str) else ".".join(key)
            if name == "pixels":
                if fs.shape != PACKED2_SHAPE:
                    raise DemonstrationError(
                        f"the replay stores pixels as {list(fs.shape)}; demonstrations hold "
                        f"packed2 frames {list(PACKED2_SHAPE)} (train with pixels='packed2')")
                v = self.pixels
            elif name == "action":
                if fs.shape == ():
                    v = self.action
                elif fs.shape == (n,):
                    v = one_hot(self.action, n, torch.int64)
                else:
                    raise DemonstrationError(
                        f"the replay's action field is {list(fs.shape)}; demonstrations give an "
                        f"index or a one-hot [{n}] action")
            elif name == "continue_":
                v = 1.0 - self.terminated.to(torch.float32)
            elif name == "episode_id":
                v = self.episode_id.to(torch.int64) + int(episode_offset)
            elif name == "control_mode":
                v = torch.full((len(self),), HUMAN)
            elif name == "success":
                if self.success is None:
                    raise DemonstrationError(
                        "the replay stores success flags but this demonstration has none (its "
                        "task does not flag success); record it with the run's task")
                v = self.success
            elif name == "score":  # bookkeeping (episode scores), not learned from: not recorded
                v = torch.zeros(len(self))
            elif name == "bonus":
                v = self.bonus if self.bonus is not None else torch.zeros(len(self))
            elif name in ("reward", "is_first", "terminated", "truncated"):
                v = getattr(self, name)
            else:
                raise DemonstrationError(
                    f"the replay has a field {name!r} that demonstrations do not record (they "
                    f"hold {sorted(_FIELDS)}); train without demonstrations or drop the field")
            out[key] = v.to(fs.dtype).reshape(len(self), 1, *fs.shape)
        return out


# ------------------------------------------------------------------------------ recording
class DemonstrationRecorder:
    """Collects an env's steps (one console) into a :class:`Demonstration`.

    Call :meth:`begin` with the output of ``env.reset()``, then :meth:`step` with each action
    index and the ``fast_step``/``step`` output it led to. A player ending an episode early is
    :meth:`end_episode` (the last row becomes ``truncated``), then ``step(action,
    env.reset())``. The last row's action is the action set's ``NOOP`` (index 0 if it has
    none) when no step followed it.

    Args:
        env: the :class:`~torchrl_dreamer.envs.GameBoyEnv` being recorded (``num_envs=1``).
        meta: extra plain values stored in the file's ``meta``.

    Example:
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> env = GameBoyEnv("maze", num_envs=1)
        >>> rec = DemonstrationRecorder(env)
        >>> rec.begin(env.reset())
        >>> for a in (4, 4, 2):
        ...     rec.step(a, env.fast_step(torch.tensor([a])))
        >>> demo = rec.demonstration()
        >>> len(demo), demo.action.tolist()
        (4, [4, 4, 2, 0])
    """

    def __init__(self, env: Any, meta: Mapping[str, Any] | None = None) -> None:
        if int(env.batch_size[0]) != 1:
            raise ValueError(f"record one console: the env has {int(env.batch_size[0])} envs")
        if getattr(env, "pixels_format", "packed2") != "packed2":
            raise ValueError("demonstrations hold packed2 pixels: record an env with "
                             "pixels='packed2'")
        self.signature = RunSignature.from_env(env)
        names = self.signature.action_names
        self._noop = names.index("NOOP") if "NOOP" in names else 0
        self.meta = {"max_episode_steps": int(getattr(env, "max_episode_steps", 0) or 0),
                     "noop_max": int(getattr(env, "noop_max", 0)),
                     "start_pool": int(getattr(env, "start_pool", 1)),
                     **dict(meta or {})}
        task = getattr(env, "task", None)
        self._optional = [name for name, (_, flag, _) in _OPTIONAL_FIELDS.items()
                          if getattr(task, flag, False)]  # the fields this task reports
        self._rows: dict[str, list[torch.Tensor]] = {k: [] for k in (*_FIELDS, *self._optional)}

    def __len__(self) -> int:
        return len(self._rows["pixels"])

    def row(self, t: int) -> dict[str, torch.Tensor]:
        """Recorded row ``t`` (negative counts from the end) by field: ``pixels``, ``reward``,
        ``terminated``, ``truncated``, ``is_first``, ``episode_id``, ``action`` (the action
        taken from it, a no-op on the last row until :meth:`step`), ``success`` and ``bonus``
        where the task reports them."""
        return {k: v[t] for k, v in self._rows.items()}

    def _append(self, td: TensorDictBase | Mapping[str, torch.Tensor]) -> None:
        def get(key: str, default: Any) -> torch.Tensor:
            v = td.get(key, None)
            return torch.tensor(default) if v is None else v.detach().to("cpu").reshape(-1)[0]

        rows = self._rows
        rows["pixels"].append(td.get("pixels").detach().to("cpu").reshape(PACKED2_SHAPE)
                              .to(torch.uint8).clone())
        rows["reward"].append(get("reward", 0.0).to(torch.float32))
        rows["terminated"].append(get("terminated", False).to(torch.bool))
        rows["truncated"].append(get("truncated", False).to(torch.bool))
        rows["is_first"].append(get("is_first", False).to(torch.bool))
        rows["episode_id"].append(get("episode_id", 0).to(torch.int32))
        for name in self._optional:
            dtype, _, missing = _OPTIONAL_FIELDS[name]
            rows[name].append(get(name, missing).to(dtype))
        rows["action"].append(torch.tensor(self._noop, dtype=torch.int64))

    def begin(self, td: TensorDictBase | Mapping[str, torch.Tensor]) -> None:
        """Append the first observation of an episode (an ``env.reset()`` output)."""
        self._append(td)

    def step(self, action: int, td: TensorDictBase | Mapping[str, torch.Tensor]) -> None:
        """Record ``action`` on the last row and append the observation it led to."""
        if not len(self):
            raise RuntimeError("call begin(env.reset()) before step()")
        n = len(self.signature.action_names)
        if not 0 <= int(action) < n:
            raise ValueError(f"action {action} is not an index of the {n} actions")
        self._rows["action"][-1] = torch.tensor(int(action), dtype=torch.int64)
        self._append(td)

    def end_episode(self) -> None:
        """Mark the last row ``truncated`` (unless it already ends its episode)."""
        if len(self) and not bool(self._rows["terminated"][-1]):
            self._rows["truncated"][-1] = torch.tensor(True)

    def demonstration(self) -> Demonstration:
        """The rows so far as a :class:`Demonstration`."""
        if not len(self):
            raise RuntimeError("nothing recorded yet")
        s = self.signature
        return Demonstration(s.rom_sha256, s.task, s.action_names, s.frame_skip, s.press_frames,
                             rom_title=s.rom_title, meta=dict(self.meta),
                             **{k: torch.stack(v) for k, v in self._rows.items()})

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`demonstration` to ``path``."""
        return self.demonstration().save(path)


def replay_demonstration(demo: Demonstration, env: Any, *, check: bool = True) -> Demonstration:
    """Step ``env`` with the recorded actions; the rows it gives, checked against ``demo``.

    ``env`` must be built like the recording (``num_envs=1``, same task, action set,
    ``frame_skip``, ``press_frames``, and the ``seed``, ``max_episode_steps``, ``noop_max`` and
    ``start_pool`` of ``demo.meta``): it is
    reset, then stepped with ``demo.action[t]`` for every row ``t`` (after an episode end the
    env's deferred reset starts the next episode), except after a ``truncated`` row the env did
    not truncate (a player's early restart), where it is reset explicitly as the recording was. With ``check`` the first row whose observation, reward or flags differ raises
    :class:`DemonstrationError` naming it.

    Example:
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> env = GameBoyEnv("maze", num_envs=1, seed=3)
        >>> rec = DemonstrationRecorder(env)
        >>> rec.begin(env.reset())
        >>> for a in (1, 3, 3):
        ...     rec.step(a, env.fast_step(torch.tensor([a])))
        >>> replayed = replay_demonstration(rec.demonstration(), GameBoyEnv("maze", 1, seed=3))
        >>> torch.equal(replayed.pixels, rec.demonstration().pixels)
        True
    """
    demo.check_compatible(RunSignature.from_env(env))
    rec = DemonstrationRecorder(env, meta=demo.meta)
    rec.begin(env.reset())
    for t in range(1, len(demo)):
        if check:
            _compare_row(demo, rec, t - 1)
        a = int(demo.action[t - 1])
        last = rec.row(-1)
        ended = bool(last["terminated"] | last["truncated"])
        if bool(demo.truncated[t - 1]) and not ended:
            rec.end_episode()  # the player ended this episode early and reset the env
            rec.step(a, env.reset())
        else:  # (after an episode end the env's deferred reset ignores the action)
            rec.step(a, env.fast_step(torch.tensor([a], device=env.device)))
    out = rec.demonstration()
    if check:
        _compare_row(demo, rec, len(demo) - 1)
    return out


def _compare_row(demo: Demonstration, rec: DemonstrationRecorder, t: int) -> None:
    row = rec.row(t)
    names = ["pixels", "reward", "terminated", "truncated", "is_first", "episode_id"]
    names += [k for k in _OPTIONAL_FIELDS if getattr(demo, k) is not None and k in row]
    for name in names:
        got, want = row[name], getattr(demo, name)[t]
        if name == "truncated" and bool(want) and not bool(got):
            continue  # a player's early restart; replay marks it when the next row resets
        if not torch.equal(got.to(want.dtype), want):
            what = "observation" if name == "pixels" else (
                f"{name} {got.tolist()} (recorded {want.tolist()})")
            raise DemonstrationError(
                f"replay differs from the recording at row {t}: {what}. Build the env like the "
                f"recording (seed={demo.meta.get('seed')!r}, noop_max="
                f"{demo.meta.get('noop_max')!r}, max_episode_steps="
                f"{demo.meta.get('max_episode_steps')!r})")


# ------------------------------------------------------------------------------ loading
def demonstration_paths(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """Expand ``paths`` (files, directories: their ``*.pt`` files, sorted; or glob patterns)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(p.glob("*.pt"))
            if not found:
                raise FileNotFoundError(f"demonstration directory {p} holds no *.pt files")
            out += found
        elif any(c in str(p) for c in "*?["):
            found = sorted(Path(f) for f in glob.glob(str(p)))
            if not found:
                raise FileNotFoundError(f"no demonstration file matches {p}")
            out += found
        else:
            if not p.is_file():
                raise FileNotFoundError(f"demonstration file {p} not found")
            out.append(p)
    if not out:
        raise FileNotFoundError("no demonstration files given")
    return out


def load_demonstrations(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    run: RunSignature | None = None,
    *,
    env: Any = None,
    check_task: bool = True,
) -> list[Demonstration]:
    """Read demonstration files and check each against the run (``run``, or ``env``'s).

    Raises:
        DemonstrationMismatchError: a file recorded for another ROM, action set, frame skip,
            press length or task (the message names the file and what differs).
        DemonstrationError: a file that is not a (consistent) demonstration.
    """
    if run is None:
        if env is None:
            raise TypeError("give the run's RunSignature or env= to check demonstrations against")
        run = RunSignature.from_env(env)
    demos = []
    for p in demonstration_paths(paths):
        demo = Demonstration.load(p)
        demo.check_compatible(run, check_task=check_task, where=f"demonstration {p}")
        demos.append(demo)
    return demos


def demonstration_storage(
    demos: Sequence[Demonstration],
    schema: Mapping[Key, FieldSpec] | None = None,
    *,
    device: torch.device | str = "cpu",
) -> TimeMajorStorage:
    """A :class:`TimeMajorStorage` holding ``demos`` end to end in one env column.

    ``schema`` is the agent replay's (default :func:`~torchrl_dreamer.data.dreamer_schema`), so
    sampled demonstration sequences stack with agent sequences. Episode ids are renumbered to
    run on across files (each file starts with an ``is_first`` row, so sequences may run from
    one file into the next exactly as they run through resets in the agent replay).
    ``control_mode`` rows (if the schema has that key) are :data:`HUMAN`.

    Example:
        >>> demo = Demonstration("ab" * 32, "maze", ("NOOP", "UP"), 24, 8,
        ...     pixels=torch.zeros(4, 1, 72, 20, dtype=torch.uint8), action=torch.zeros(4, dtype=torch.long),
        ...     reward=torch.zeros(4), terminated=torch.zeros(4, dtype=torch.bool),
        ...     truncated=torch.zeros(4, dtype=torch.bool), is_first=torch.tensor([True, False, False, False]),
        ...     episode_id=torch.zeros(4, dtype=torch.int32))
        >>> st = demonstration_storage([demo, demo])
        >>> st.total_steps, st.fields["episode_id"][:, 0].tolist()
        (8, [0, 0, 0, 0, 1, 1, 1, 1])
    """
    demos = list(demos)
    if not demos:
        raise ValueError("no demonstrations to store")
    schema = dict(dreamer_schema() if schema is None else schema)
    total = sum(len(d) for d in demos)
    storage = TimeMajorStorage(total, 1, spec=schema, device=device, auto_commit=True)
    offset = 0
    for d in demos:
        rows = d.rows(schema, episode_offset=offset - int(d.episode_id[0]))
        for t in range(len(d)):
            storage.write({k: v[t] for k, v in rows.items()})
        offset += int(d.episode_id[-1]) - int(d.episode_id[0]) + 1
    storage.check_invariants()
    return storage


# ------------------------------------------------------------------------------ mixing
def demo_sequences(share: float, num_slices: int) -> int:
    """Sequences of a batch of ``num_slices`` that take ``share`` of it: ``round(share * B)``.

    The one rule for the demonstrations' part of a batch: :class:`DemoMixingSampler` here and
    the Ray run's :class:`~torchrl_dreamer.distributed.ControlModeRouter` (``exact=True``) both
    count with it (Python's ``round``: halves go to the even count).

    Example:
        >>> demo_sequences(0.25, 16), demo_sequences(0.25, 2), demo_sequences(0.25, 6)
        (4, 0, 2)
    """
    return int(round(float(share) * int(num_slices)))


@dataclass(frozen=True, eq=False)
class MixedIndex:
    """Where a mixed batch's sequences come from: ``agent`` and ``demo`` are ``(rows, envs)``
    indices into the agent replay and the demonstration replay (``None`` when that part is
    empty); the batch is the agent sequences then the demonstration ones along the batch dim.

    Example:
        >>> idx = MixedIndex(None, (torch.zeros(8, 2, dtype=torch.long),) * 2, time_major=True)
        >>> idx.num_demo
        2
    """

    agent: tuple[torch.Tensor, torch.Tensor] | None
    demo: tuple[torch.Tensor, torch.Tensor] | None
    time_major: bool = True

    @property
    def batch_dim(self) -> int:
        """The sequence dim of the index tensors (1 time-major, 0 otherwise)."""
        return 1 if self.time_major else 0

    @property
    def num_demo(self) -> int:
        """Sequences taken from the demonstrations."""
        return 0 if self.demo is None else int(self.demo[0].shape[self.batch_dim])

    @property
    def num_agent(self) -> int:
        """Sequences taken from the agent's replay."""
        return 0 if self.agent is None else int(self.agent[0].shape[self.batch_dim])


class DemoMixingSampler:
    """Draws ``round(share * B)`` of each batch's ``B`` sequences from the demonstrations.

    Wraps the agent replay's :class:`~torchrl_dreamer.data.ChronologicalSliceSampler`
    (``sampler``, which draws the other ``B - round(share * B)`` sequences) and samples the
    demonstration replay (a :func:`demonstration_storage`) with a
    ``ChronologicalSliceSampler`` of the same ``slice_len`` on ``generator``. The index it
    returns is a :class:`MixedIndex`; :class:`DemoMixedStorage` gathers it, or call
    :meth:`sample_sequences` for the data directly. ``info`` holds ``"env_idx"`` and
    ``"start"`` (each part's own, concatenated like the batch) and ``"mode"``: ``int8[B]``, 0
    for an agent sequence and :data:`HUMAN` for a demonstration one.

    It offers what the collector asks of a sampler (``sample``, ``resolve``, ``generator``,
    ``time_major``, ``slice_len``, ``n_samples``, ``state_dict``/``load_state_dict``).

    Args:
        sampler: the agent replay's sampler (``slice_len`` given; ``n_samples`` None).
        demo_storage: the demonstrations' storage.
        share: fraction of every batch's sequences drawn from the demonstrations, in [0, 1].

    Keyword Args:
        generator: draws the demonstration sequences; default: ``sampler``'s own generator
            (one generator for the whole batch, so reseeding it reseeds both parts).

    Example:
        >>> from torchrl_dreamer.data.synthetic import SyntheticSteps
        >>> agent = TimeMajorStorage(200, 4, spec=dreamer_schema())
        >>> steps = SyntheticSteps(4, torch.Generator().manual_seed(0))
        >>> for _ in range(200):
        ...     _ = agent.write(steps.step())
        >>> demos = TimeMajorStorage(100, 1, spec=dreamer_schema())
        >>> steps1 = SyntheticSteps(1, torch.Generator().manual_seed(1))
        >>> for _ in range(100):
        ...     _ = demos.write(steps1.step())
        >>> inner = ChronologicalSliceSampler(slice_len=16, generator=torch.Generator().manual_seed(0))
        >>> mix = DemoMixingSampler(inner, demos, share=0.25)
        >>> data, info = mix.sample_sequences(agent, 8 * 16)
        >>> data.shape, info["mode"].tolist()
        (torch.Size([16, 8]), [0, 0, 0, 0, 0, 0, 1, 1])
    """

    def __init__(self, sampler: ChronologicalSliceSampler, demo_storage: TimeMajorStorage,
                 share: float, *, generator: torch.Generator | None = None) -> None:
        share = float(share)
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share must lie in [0, 1], got {share}")
        if getattr(sampler, "slice_len", None) is None:
            raise ValueError("the agent sampler must be built with slice_len=... (sequence length)")
        if getattr(sampler, "n_samples", None) not in (None, 1):
            raise ValueError("DemoMixingSampler draws one batch per call: n_samples=None")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if not isinstance(demo_storage, TimeMajorStorage):
            raise TypeError(
                f"demo_storage must be a TimeMajorStorage, got {type(demo_storage).__name__}")
        self.sampler = sampler
        self.demo_storage = demo_storage
        self.share = share
        self._own_generator = generator
        self._demo_sampler = ChronologicalSliceSampler(
            slice_len=sampler.slice_len, generator=generator or sampler.generator,
            time_major=sampler.time_major)
        lo, hi = demo_storage.sampleable_range()
        if share > 0 and hi - lo < sampler.slice_len:
            raise ValueError(
                f"the demonstrations hold {hi - lo} steps, fewer than one sequence of "
                f"slice_len={sampler.slice_len}; record longer demonstrations or set share=0")

    # ---- what the collector reads
    @property
    def generator(self) -> torch.Generator | None:
        """The agent sampler's generator (the one a collector seeds)."""
        return self.sampler.generator

    @property
    def demo_generator(self) -> torch.Generator | None:
        """The generator drawing the demonstration sequences."""
        return self._own_generator or self.sampler.generator

    @property
    def slice_len(self) -> int:
        """Steps per sequence (the agent sampler's)."""
        return self.sampler.slice_len

    @property
    def time_major(self) -> bool:
        """``[T, B]`` batches (True) or ``[B, T]``."""
        return self.sampler.time_major

    @property
    def n_samples(self) -> None:
        """Always one batch per call."""
        return None

    def resolve(self, batch_size: int) -> tuple[int, int]:
        """``(B, T)`` for ``batch_size`` transitions (the agent sampler's rule)."""
        return self.sampler.resolve(batch_size)

    def num_demo(self, num_slices: int) -> int:
        """Demonstration sequences in a batch of ``num_slices``: :func:`demo_sequences`."""
        return demo_sequences(self.share, num_slices)

    # ---- sampling
    def sample(self, storage: TimeMajorStorage, batch_size: int) -> tuple[MixedIndex, dict]:
        """``(MixedIndex, info)`` for ``batch_size`` transitions (``B * slice_len``)."""
        b, t = self.resolve(batch_size)
        k = self.num_demo(b)
        self._demo_sampler.generator = self.demo_generator
        parts, infos = [], []
        agent = demo = None
        if b - k:
            agent, info = self.sampler.sample(storage, (b - k) * t)
            parts.append(torch.zeros(b - k, dtype=torch.int8))
            infos.append(info)
        if k:
            demo, info = self._demo_sampler.sample(self.demo_storage, k * t)
            parts.append(torch.full((k,), HUMAN, dtype=torch.int8))
            infos.append(info)
        dim = 1 if self.time_major else 0
        out = {key: torch.cat([i[key].to(storage.device) for i in infos], dim=dim)
               for key in ("env_idx", "start")}
        out["mode"] = torch.cat(parts)
        return MixedIndex(agent, demo, self.time_major), out

    def gather(self, storage: TimeMajorStorage, index: MixedIndex) -> TensorDictBase:
        """The batch of ``index``: agent sequences from ``storage``, then demonstration ones."""
        return gather_mixed(storage, self.demo_storage, index)

    def sample_sequences(self, storage: TimeMajorStorage, batch_size: int
                         ) -> tuple[TensorDictBase, dict]:
        """Samples and gathers: ``(data, info)`` with data ``[T, B]`` (or ``[B, T]``)."""
        index, info = self.sample(storage, batch_size)
        info["index"] = index
        return self.gather(storage, index), info

    # ---- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The agent sampler's state, the share and the demonstration generator's state."""
        own = self._own_generator
        return {"sampler": self.sampler.state_dict(), "share": self.share,
                "demo_generator_state": None if own is None else own.get_state()}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores :meth:`state_dict` (a plain agent-sampler state dict is accepted too, so a
        run checkpointed without demonstrations resumes with them)."""
        if "sampler" not in state_dict:
            self.sampler.load_state_dict(state_dict)
            return
        self.sampler.load_state_dict(state_dict["sampler"])
        gs = state_dict.get("demo_generator_state")
        if gs is not None and self._own_generator is not None:
            self._own_generator.set_state(gs)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(share={self.share}, demo_steps="
                f"{self.demo_storage.total_steps}, sampler={self.sampler!r})")


def gather_mixed(storage: TimeMajorStorage, demo_storage: TimeMajorStorage,
                 index: MixedIndex) -> TensorDictBase:
    """Gather a :class:`MixedIndex`: agent rows from ``storage`` then demonstration rows (moved
    to ``storage``'s device), concatenated along the batch dim."""
    parts = []
    if index.agent is not None:
        parts.append(TimeMajorStorage.get(storage, index.agent))
    if index.demo is not None:
        d = demo_storage.get(index.demo)
        if d.device != storage.device:
            d = d.to(storage.device)
        parts.append(d)
    if not parts:
        raise ValueError("empty MixedIndex")
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=index.batch_dim)


class DemoMixedStorage(TimeMajorStorage):
    """The agent's replay ring, also able to gather a :class:`MixedIndex`.

    Built with :meth:`over`: it is a second handle on an existing :class:`TimeMajorStorage`
    that shares that storage's state (its instance ``__dict__``), so writes, commits, counters
    and checkpoints through either handle are the same; only :meth:`get` differs, by resolving
    a :class:`MixedIndex` against the demonstration storage too. A collector that samples with
    :class:`DemoMixingSampler` and then calls ``storage.get(index)`` therefore needs no change.

    Example:
        >>> agent = TimeMajorStorage(64, 2, spec=dreamer_schema())
        >>> demos = TimeMajorStorage(32, 1, spec=dreamer_schema())
        >>> mixed = DemoMixedStorage.over(agent, demos)
        >>> mixed.capacity, mixed.demo_storage is demos, isinstance(mixed, TimeMajorStorage)
        (64, True, True)
    """

    demo_storage: TimeMajorStorage

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("build a DemoMixedStorage with DemoMixedStorage.over(storage, demo_storage)")

    @classmethod
    def over(cls, storage: TimeMajorStorage, demo_storage: TimeMajorStorage) -> DemoMixedStorage:
        """A handle on ``storage`` (shared state) that also gathers from ``demo_storage``."""
        if not isinstance(storage, TimeMajorStorage):
            raise TypeError(f"storage must be a TimeMajorStorage, got {type(storage).__name__}")
        if storage.initialized and demo_storage.schema != storage.schema:
            raise ValueError(
                f"the demonstration storage's schema {demo_storage.schema} differs from the "
                f"agent replay's {storage.schema}; build it with demonstration_storage(demos, "
                "storage.schema)")
        view = object.__new__(cls)
        view.__dict__ = storage.__dict__
        view.__dict__["demo_storage"] = demo_storage
        return view

    @property
    def agent_storage(self) -> TimeMajorStorage:
        """A plain :class:`TimeMajorStorage` handle on the same ring."""
        plain = object.__new__(TimeMajorStorage)
        plain.__dict__ = self.__dict__
        return plain

    def get(self, index: Any) -> TensorDictBase:
        """Rows of ``index``; a :class:`MixedIndex` gives the mixed batch."""
        if isinstance(index, MixedIndex):
            return gather_mixed(self, self.demo_storage, index)
        return super().get(index)


def attach_demonstrations(
    storage: TimeMajorStorage,
    sampler: ChronologicalSliceSampler,
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    share: float,
    *,
    env: Any = None,
    run: RunSignature | None = None,
    check_task: bool = True,
    generator: torch.Generator | None = None,
) -> tuple[DemoMixedStorage, DemoMixingSampler]:
    """Load demonstration files, check them against the run and mix them into its batches.

    Reads ``paths`` (files, directories of ``*.pt``, globs), checks each against the run (its
    :class:`RunSignature`, from ``run`` or ``env``), stores them in their own replay
    (:func:`demonstration_storage` with ``storage``'s schema and device) and returns
    ``(DemoMixedStorage.over(storage, demos), DemoMixingSampler(sampler, demos, share))``: pass
    both to the collector in place of ``storage`` and ``sampler``.

    Example:
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> import tempfile
        >>> env = GameBoyEnv("maze", num_envs=1)
        >>> rec = DemonstrationRecorder(env)
        >>> rec.begin(env.reset())
        >>> for a in [4] * 20:
        ...     rec.step(a, env.fast_step(torch.tensor([a])))
        >>> path = rec.save(tempfile.mkdtemp() + "/demo.pt")
        >>> storage = TimeMajorStorage(64, 1, spec=dreamer_schema())
        >>> sampler = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(0))
        >>> storage, sampler = attach_demonstrations(storage, sampler, path, share=0.5, env=env)
        >>> sampler.num_demo(16), storage.demo_storage.total_steps
        (8, 21)
    """
    demos = load_demonstrations(paths, run, env=env, check_task=check_task)
    schema = storage.schema if storage.initialized else dreamer_schema()
    demo_storage = demonstration_storage(demos, schema, device=storage.device)
    return (DemoMixedStorage.over(storage, demo_storage),
            DemoMixingSampler(sampler, demo_storage, share, generator=generator))
