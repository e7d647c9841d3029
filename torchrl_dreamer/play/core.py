"""The play tool's core: one console running a task, stepped the way the agent steps it.

Everything here works without a window (tests, CI, scripted input): :class:`PlaySession` owns a
one-console :class:`~torchrl_dreamer.envs.GameBoyEnv` and advances it one *env step* at a time
with the buttons a player holds, mapped to the nearest action of the task's action set
(:func:`nearest_action`). Recording goes through the env itself, so a demonstration's rows are
exactly what the agent would see had it picked the same actions
(:class:`~torchrl_dreamer.data.demonstrations.DemonstrationRecorder`).

A window shows every frame, not only the last of a step: the session's env runs on a console
whose ``step`` emulates the step's frames one launch each and calls :attr:`PlaySession.on_frame`
after each (the buttons held for ``press_frames`` frames, then released, as in one launch;
the result is bit-identical, ``test/envs/test_play.py`` checks it). Without a frame hook a step is one
launch, as in training.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.data.demonstrations import Demonstration, DemonstrationRecorder
from torchrl_dreamer.envs.actions import BUTTON_BITS, ActionSet
from torchrl_dreamer.envs.gameboy import GameBoyEnv, training_steps
from torchrl_dreamer.envs.registry import list_tasks, make_task
from torchrl_dreamer.envs.spec import ENCODINGS, CountWatch, RamWatch, SpecTask, load_task_spec
from torchrl_dreamer.envs.spec import Watch as SpecWatch
from torchrl_dreamer.envs.task import Task

__all__ = [
    "GB_FPS",
    "Command",
    "FreePlayTask",
    "PlaySession",
    "Readout",
    "ScriptError",
    "Watch",
    "buttons_of",
    "default_frame_skip",
    "nearest_action",
    "parse_script",
    "parse_watch",
    "resolve_task",
    "task_watches",
]

GB_FPS = 4194304 / 70224
"""Frames per second of a DMG (59.73): the rate the window runs at (``speed=1``)."""


class ScriptError(ValueError):
    """A script line that cannot be read; the message names the line."""


# ------------------------------------------------------------------------------ buttons
def buttons_of(name: str) -> int:
    """Buttons mask of ``"UP+A"``, ``"start"``, ``"NOOP"`` or ``"-"`` (nothing held).

    Example:
        >>> buttons_of("UP+A"), buttons_of("noop")
        (65, 0)
    """
    text = name.strip().upper()
    if text in ("NOOP", "-", ""):
        return 0
    mask = 0
    for part in text.split("+"):
        part = part.strip()
        if part not in BUTTON_BITS:
            raise ValueError(
                f"unknown button {part!r} in {name!r}; buttons: {', '.join(BUTTON_BITS)} (join "
                "with '+', NOOP for none)")
        mask |= BUTTON_BITS[part]
    return mask


def _popcount(x: int) -> int:
    return bin(x).count("1")


def nearest_action(buttons: int, action_set: ActionSet, recent: int = 0) -> int:
    """Index of the action of ``action_set`` closest to the held ``buttons`` mask.

    Closest means, in order: fewest buttons the action would press that are *not* held (so
    NOOP beats pressing something unheld), then most held buttons it presses, then whether it
    presses a ``recent`` button (the last one pressed: holding RIGHT and tapping UP on a
    D-pad-only set gives UP), then the lowest index.

    Example:
        >>> from torchrl_dreamer.envs.actions import make_action_set
        >>> dpad = make_action_set("dpad")  # NOOP, UP, DOWN, LEFT, RIGHT
        >>> [nearest_action(buttons_of(b), dpad) for b in ("RIGHT", "UP+A", "A", "-")]
        [4, 1, 0, 0]
        >>> nearest_action(buttons_of("UP+RIGHT"), dpad, recent=buttons_of("UP"))
        1
    """
    best, best_key = 0, None
    for i, m in enumerate(action_set.masks.tolist()):
        key = (_popcount(m & ~buttons), -_popcount(m & buttons), not (m & recent), i)
        if best_key is None or key < best_key:
            best, best_key = i, key
    return best


# ------------------------------------------------------------------------------ watches
@dataclass(frozen=True)
class Watch:
    """A labelled RAM value shown while playing (``label=value``): a spec's
    :class:`~torchrl_dreamer.envs.spec.RamWatch`, :class:`~torchrl_dreamer.envs.spec.CountWatch`
    or :class:`~torchrl_dreamer.envs.spec.DistanceWatch`."""

    label: str
    ram: SpecWatch

    def read(self, gb: Any, env: int = 0) -> int:
        """The decoded value on console ``env``."""
        return int(self.ram.read(gb)[env])


def parse_watch(text: str) -> Watch:
    """A watch from ``[LABEL=]ADDRESS[:LENGTH[:ENCODING]]``, e.g. ``score=0xC0A0:2:bcd``.

    Example:
        >>> w = parse_watch("score=0xC0A0:2:bcd")
        >>> w.label, hex(w.ram.address), w.ram.length, w.ram.encoding
        ('score', '0xc0a0', 2, 'bcd')
    """
    label, _, rest = text.rpartition("=")
    parts = rest.split(":")
    if not 1 <= len(parts) <= 3 or not parts[0]:
        raise ValueError(f"watch {text!r}: expected [LABEL=]ADDRESS[:LENGTH[:ENCODING]]")
    obj: dict[str, Any] = {"address": parts[0]}
    if len(parts) > 2:
        obj["encoding"] = parts[2]
    elif len(parts) == 2 and parts[1] == "2":
        obj["encoding"] = "u16le"
    if len(parts) > 1:
        obj["length"] = parts[1]
    if obj.get("encoding", "u8") not in ENCODINGS:
        raise ValueError(f"watch {text!r}: encoding must be one of {list(ENCODINGS)}")
    ram = RamWatch.parse(obj, f"watch {text!r}")
    return Watch(label or f"{ram.address:#06x}", ram)


_NOISY_SYMBOLS = {"FRAME", "VBLANK_FLAG", "JOY", "JOY_PREV", "MAZE"}


def task_watches(task: Task) -> list[Watch]:
    """What to show while playing ``task``: a spec task's RAM watches (labelled by the first
    reward term or predicate using them), or a shipped game's RAM map (names of one address
    joined by ``/``; a few per-frame bookkeeping bytes left out); none for other tasks.

    Example:
        >>> from torchrl_dreamer.envs import make_task
        >>> [w.label for w in task_watches(make_task("maze"))][:3]
        ['ACTIVE_LAYOUT', 'BUMPS', 'EXIT_X']
    """
    if isinstance(task, SpecTask):
        spec = task.spec
        seen: dict[SpecWatch, str] = {}
        for part in ("reward", "terminate", "truncate", "success"):
            for k, item in enumerate(getattr(spec, part)):
                for w in sorted(item.watches(), key=repr):
                    where = (f"{w.address:#06x}" if isinstance(w, RamWatch)
                             else f"count{w.lo:#06x}-{w.hi:#06x}" if isinstance(w, CountWatch)
                             else f"distance{w.a[0]:#06x}-{w.b[0]:#06x}" if w.b
                             else f"distance{w.a[0]:#06x}-to{w.to[0]}")
                    seen.setdefault(w, f"{part}[{k}]@{where}")
        return [Watch(label, w) for w, label in seen.items()]
    ram = getattr(task, "ram", None)
    if isinstance(ram, dict):
        names: dict[int, list[str]] = {}
        for name, addr in sorted(ram.items()):
            if name not in _NOISY_SYMBOLS:
                names.setdefault(int(addr), []).append(name)  # aliases share one watch
        return [Watch("/".join(n), RamWatch(a)) for a, n in sorted(names.items(),
                                                                   key=lambda kv: kv[1][0])]
    return []


# ------------------------------------------------------------------------------ tasks
class FreePlayTask(Task):
    """Any ROM with no reward and no episode end: for exploring a game and saving start states.

    Boots like :class:`~torchrl_dreamer.envs.task.Task` (60 frames) or loads ``state``; the
    ``combos`` action set (A/B with each direction) so most button combinations reach the game.
    """

    name = "free-play"
    default_action_set = "combos"

    def compute(self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor):
        """No reward, never terminates."""
        zeros = torch.zeros(gb.num_envs, device=pixels.device)
        return zeros, zeros.to(torch.bool)


def resolve_task(
    rom: str | os.PathLike | None = None,
    *,
    spec: str | os.PathLike | dict | None = None,
    task: str | Task | None = None,
    state: str | os.PathLike | None = None,
) -> Task:
    """The task to play: a spec (``spec``, with ``rom``), a registered task (``task``, or
    ``rom`` given as a task name such as ``"maze"``), the shipped task whose ROM ``rom`` is, or
    :class:`FreePlayTask` on ``rom``.

    Example:
        >>> from torchrl_dreamer.roms import rom_path
        >>> resolve_task("maze").name, resolve_task(rom_path("maze")).name
        ('maze', 'maze')
    """
    if spec is not None and task is not None:
        raise ValueError("give either spec= (a task spec file) or task= (a registered task)")
    if spec is not None:
        return load_task_spec(spec if isinstance(spec, dict) else Path(spec), rom=rom, state=state)
    if isinstance(task, Task):
        if rom is not None or state is not None:
            raise ValueError("a Task instance carries its own ROM and state; build it with them")
        return task
    if task is None and rom is not None and not Path(rom).is_file() and str(rom) in list_tasks():
        task, rom = str(rom), None
    if task is None and rom is not None and Path(rom).is_file():
        task = _shipped_task_of(Path(rom))
    if task is not None:
        kwargs: dict[str, Any] = {}
        if rom is not None:
            kwargs["rom"] = rom
        if state is not None:
            kwargs["state"] = state
        return make_task(task, **kwargs)
    if rom is None:
        raise ValueError("give a ROM file, a task name (e.g. maze) or spec=")
    if not Path(rom).is_file():
        raise FileNotFoundError(
            f"ROM {rom} not found (and it is not a registered task: {', '.join(list_tasks())})")
    return FreePlayTask(rom=rom, state=state)


def default_frame_skip(task: Task) -> int:
    """The frame skip a training run of ``task`` uses unless told otherwise: the task's
    ``train_defaults`` (a spec's ``train:``), else the Game Boy default
    (:func:`~torchrl_dreamer.envs.gameboy.training_steps`). Record demonstrations with it.

    Example:
        >>> from torchrl_dreamer.envs import make_task
        >>> default_frame_skip(make_task("maze")), default_frame_skip(FreePlayTask())
        (24, 8)
    """
    return training_steps(task)[0]


def _shipped_task_of(rom: Path) -> str | None:
    """The registered task of a shipped game whose built ROM is ``rom`` (same bytes)."""
    from torchrl_dreamer import roms

    data = rom.read_bytes()
    for game in roms.GAMES:
        path = roms.rom_path(game)
        if path.is_file() and path.read_bytes() == data and game in list_tasks():
            return game
    return None


# ------------------------------------------------------------------------------ scripts
@dataclass(frozen=True)
class Command:
    """One script line: ``kind`` is ``"buttons"`` (hold ``buttons`` for ``repeat`` env steps),
    ``"save"`` (save a state to ``path``, or the session's default), ``"reset"`` (end the
    episode now) or ``"quit"``."""

    kind: str
    buttons: int = 0
    repeat: int = 1
    path: str | None = None


def parse_script(script: str | Iterable[str]) -> list[Command]:
    """Read a script: one env step's buttons per line, with ``xN`` to repeat.

    Lines (``#`` starts a comment)::

        RIGHT x3        # hold RIGHT for 3 env steps (UP+A, START, NOOP or - for nothing)
        save start.trdstate   # save a start state here (as F2 does)
        reset           # end the episode now (as R does)
        quit

    ``script`` is the text or its lines (a list of commands as strings).

    Example:
        >>> [(c.kind, c.buttons, c.repeat) for c in parse_script(["RIGHT x3", "reset", "-"])]
        [('buttons', 16, 3), ('reset', 0, 1), ('buttons', 0, 1)]
    """
    lines = script.splitlines() if isinstance(script, str) else list(script)
    out: list[Command] = []
    for n, raw in enumerate(lines, 1):
        line = str(raw).split("#", 1)[0].strip()
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError as err:
            raise ScriptError(f"script line {n} ({raw!r}): {err}") from None
        head = words[0].lower()
        if head in ("save", "save-state"):
            if len(words) > 2:
                raise ScriptError(f"script line {n} ({raw!r}): save takes one optional path")
            out.append(Command("save", path=words[1] if len(words) == 2 else None))
            continue
        if head in ("reset", "quit"):
            if len(words) != 1:
                raise ScriptError(f"script line {n} ({raw!r}): {head} takes no argument")
            out.append(Command(head))
            continue
        repeat = 1
        if len(words) == 2 and words[1][:1].lower() in ("x", "*") and words[1][1:].isdigit():
            repeat = int(words[1][1:])
        elif len(words) != 1:
            raise ScriptError(
                f"script line {n} ({raw!r}): expected BUTTONS [xN], save [PATH], reset or quit")
        try:
            mask = buttons_of(words[0])
        except ValueError as err:
            raise ScriptError(f"script line {n} ({raw!r}): {err}") from None
        if repeat < 1:
            raise ScriptError(f"script line {n} ({raw!r}): the repeat count must be >= 1")
        out.append(Command("buttons", mask, repeat))
    return out


# ------------------------------------------------------------------------------ readout
@dataclass
class Readout:
    """What one env step gave: shown live in the window title or printed headless."""

    step: int
    episode: int
    action: int
    action_name: str
    reward: float
    episode_return: float
    terminated: bool
    truncated: bool
    is_first: bool
    watches: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """One line: step, episode, action, reward, return, watches and the episode's end."""
        end = " TERMINATED" if self.terminated else (" TRUNCATED" if self.truncated else "")
        watches = " ".join(f"{k}={v}" for k, v in self.watches.items())
        return (f"step {self.step:>5} ep {self.episode} {self.action_name:<8} reward "
                f"{self.reward:+.3f} return {self.episode_return:+.3f}"
                + (f" | {watches}" if watches else "") + end)


# ------------------------------------------------------------------------------ the session
FrameHook = Callable[[int, Any], None]


class _FrameBackend:
    """Emulator backend whose consoles run a step frame by frame when a hook is set."""

    def __init__(self) -> None:
        from torchrl_dreamer import emulator

        self.on_frame: FrameHook | None = None
        self.ResetCache = emulator.ResetCache
        backend = self
        base = emulator.GameBoy

        class FrameGameBoy(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs["framebuffer"] = True
                super().__init__(*args, **kwargs)

            def step(self, buttons: Any, frames: int = 24, press_frames: int = 8,
                     obs_out: torch.Tensor | None = None) -> torch.Tensor:
                hook = backend.on_frame
                if hook is None:
                    return super().step(buttons, frames, press_frames, obs_out)
                for k in range(frames):
                    self.run_frames(1, buttons=buttons if k < press_frames else None)
                    hook(k, self)
                if obs_out is None:
                    return self.packed2
                obs_out.copy_(self.packed2)
                return obs_out

        self.GameBoy = FrameGameBoy


class PlaySession:
    """A task on one console, advanced one env step at a time by a player's buttons.

    Args:
        task: a :class:`~torchrl_dreamer.envs.task.Task` (see :func:`resolve_task`).

    Keyword Args:
        action_set, max_episode_steps, seed, device: as :class:`~torchrl_dreamer.envs.GameBoyEnv`.
        frame_skip: frames per env step; default :func:`default_frame_skip` (what training
            uses for the task).
        press_frames: frames a step holds its buttons; default, with the default
            ``frame_skip``, the task's own (a spec's ``train: press_frames``, what training
            uses: PostBot's 4), else ``GameBoyEnv``'s ``min(8, frame_skip)``.
        noop_max: random no-op frames before episodes start (0: the task's own start; a
            recording replays from the same ``seed`` either way).
        watches: RAM values to show (default :func:`task_watches`); extra ones appended by
            the CLI's ``--watch``.
        record: keep every step for :meth:`demonstration` / :meth:`save_demonstration`.
        meta: extra plain values stored in the demonstration file.

    Attributes:
        env: the one-console env. ``env.gb`` is the console (``framebuffer`` enabled).
        history: every :class:`Readout` so far (step 0: the initial reset); the last one is
            :attr:`readout`.

    Example:
        >>> session = PlaySession(resolve_task("maze"), seed=0)
        >>> r = session.step(buttons_of("RIGHT"))
        >>> r.step, r.action_name
        (1, 'RIGHT')
    """

    def __init__(
        self,
        task: Task,
        *,
        action_set: str | list[str] | ActionSet | None = None,
        frame_skip: int | None = None,
        press_frames: int | None = None,
        max_episode_steps: int | None | str = "task",
        seed: int = 0,
        noop_max: int = 0,
        device: str | torch.device = "cpu",
        watches: list[Watch] | None = None,
        record: bool = False,
        meta: dict[str, Any] | None = None,
        model: str | None = None,
    ) -> None:
        self._backend = _FrameBackend()
        if frame_skip is None:  # the task's own step, and its press length with it
            frame_skip, press_frames, _ = training_steps(task, press_frames=press_frames)
        self.env = GameBoyEnv(task, 1, device, action_set=action_set, frame_skip=frame_skip,
                              press_frames=press_frames, max_episode_steps=max_episode_steps,
                              noop_max=noop_max, seed=seed, backend=self._backend, model=model)
        self.seed = int(seed)
        self.watches = list(task_watches(task) if watches is None else watches)
        names = self.env.action_set.names
        self._noop = names.index("NOOP") if "NOOP" in names else 0
        self.recorder: DemonstrationRecorder | None = None
        if record:
            info = {"seed": self.seed, "recorder": "torchrl_dreamer.play", **dict(meta or {})}
            self.recorder = DemonstrationRecorder(self.env, meta=info)
        self.history: list[Readout] = []
        self._return = 0.0
        self._steps = 0
        self._begin(self.env.reset())

    # ---- frames
    @property
    def on_frame(self) -> FrameHook | None:
        """Called as ``on_frame(k, gb)`` after each frame ``k`` of a step (``None``: steps run
        as one launch). ``gb.framebuffer[0]`` is the frame's ``[144, 160]`` shades."""
        return self._backend.on_frame

    @on_frame.setter
    def on_frame(self, hook: FrameHook | None) -> None:
        self._backend.on_frame = hook

    @property
    def action_set(self) -> ActionSet:
        """The task's action set (what buttons map to)."""
        return self.env.action_set

    @property
    def pixels(self) -> torch.Tensor:
        """The last observation, packed2 ``uint8[1, 1, 72, 20]`` (what the agent sees)."""
        return self._pixels

    @property
    def readout(self) -> Readout:
        """The last step's readout."""
        return self.history[-1]

    def frame_rgb(self, view: str = "full") -> torch.Tensor:
        """The current frame as ``uint8[H, W, 3]``: the console's 144x160 screen (``"full"``) or
        the 72x80 packed2 observation the agent sees (``"agent"``)."""
        from torchrl_dreamer.emulator.packed2 import shades_to_rgb, unpack_packed2

        if view == "agent":
            shades = unpack_packed2(self.pixels)[0, 0]
        elif view == "full":
            shades = self.env.gb.framebuffer[0]
        else:
            raise ValueError(f"view must be 'full' or 'agent', got {view!r}")
        return shades_to_rgb(shades, channels_last=True).cpu()

    # ---- stepping
    def _read(self, td: Any, action: int) -> Readout:
        self._pixels = td["pixels"]
        first = bool(td["is_first"].reshape(-1)[0])
        reward = float(td["reward"].reshape(-1)[0]) if "reward" in td.keys() else 0.0
        if first:
            self._return = 0.0
        self._return += reward
        r = Readout(
            step=self._steps,
            episode=int(td["episode_id"].reshape(-1)[0]),
            action=action,
            action_name=self.env.action_set.names[action],
            reward=reward,
            episode_return=self._return,
            terminated=bool(td["terminated"].reshape(-1)[0]),
            truncated=bool(td["truncated"].reshape(-1)[0]),
            is_first=first,
            watches=self.read_watches(),
        )
        self.history.append(r)
        return r

    def _begin(self, td: Any) -> Readout:
        if self.recorder is not None:
            self.recorder.begin(td)
        return self._read(td, self._noop)

    def act(self, action: int) -> Readout:
        """One env step with action index ``action``."""
        action = int(action)
        if not 0 <= action < self.env.action_set.n:
            raise ValueError(f"action {action} is not an index of {list(self.env.action_set.names)}")
        td = self.env.fast_step(torch.tensor([action], device=self.env.device))
        self._steps += 1
        if self.recorder is not None:
            self.recorder.step(action, td)
        return self._read(td, action)

    def step(self, buttons: int, recent: int = 0) -> Readout:
        """One env step holding ``buttons`` (a mask; the nearest action is taken)."""
        return self.act(nearest_action(int(buttons), self.env.action_set, recent))

    def end_episode(self) -> Readout:
        """End the episode now (recorded as ``truncated``) and start the next one."""
        if self.recorder is not None:
            self.recorder.end_episode()
        td = self.env.reset()
        self._steps += 1
        if self.recorder is not None:
            self.recorder.step(self._noop, td)
        return self._read(td, self._noop)

    def read_watches(self) -> dict[str, int]:
        """``{label: value}`` of the watches now."""
        return {w.label: w.read(self.env.gb) for w in self.watches}

    # ---- states and recordings
    def save_state(self, path: str | os.PathLike) -> Path:
        """Save the console's state now (a task spec's ``start: {state: FILE}``)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.env.gb.save_state().save(path)
        return path

    def demonstration(self) -> Demonstration:
        """Everything played so far as a :class:`Demonstration` (needs ``record=True``)."""
        if self.recorder is None:
            raise RuntimeError("this session does not record: build it with record=True")
        return self.recorder.demonstration()

    def save_demonstration(self, path: str | os.PathLike) -> Path:
        """Write :meth:`demonstration` to ``path``."""
        return self.demonstration().save(path)

    def run_script(
        self,
        commands: Iterable[Command],
        *,
        save_state_path: str | os.PathLike | None = None,
        on_readout: Callable[[Readout], None] | None = None,
        on_message: Callable[[str], None] | None = None,
    ) -> list[Readout]:
        """Play ``commands`` (:func:`parse_script`); returns the readouts of the steps taken.

        ``save`` lines without a path write ``save_state_path``; ``quit`` stops.
        """
        out: list[Readout] = []

        def emit(r: Readout) -> None:
            out.append(r)
            if on_readout is not None:
                on_readout(r)

        for cmd in commands:
            if cmd.kind == "buttons":
                for _ in range(cmd.repeat):
                    emit(self.step(cmd.buttons))
            elif cmd.kind == "reset":
                emit(self.end_episode())
            elif cmd.kind == "save":
                target = cmd.path if cmd.path is not None else save_state_path
                if target is None:
                    raise ScriptError("a 'save' line without a path needs a default save-state path")
                path = self.save_state(target)
                if on_message is not None:
                    on_message(f"saved state {path}")
            elif cmd.kind == "quit":
                break
            else:
                raise ScriptError(f"unknown command {cmd.kind!r}")
        return out
