"""The :class:`Task` interface: what a game means as an RL problem.

A :class:`~torchrl_dreamer.envs.GameBoyEnv` runs consoles; a ``Task`` says which ROM to run, how
to bring the consoles to the state episodes start from, what to poke into RAM when an episode
starts (a layout or seed byte), and how reward and termination follow from the console's memory
and/or screen after each env step. Everything a task computes per step stays on the env's device
as batched tensor ops (``gb.read_memory`` is a device gather), so stepping never syncs the host.

TorchRL has no notion of a game task on top of an emulator (its envs own reward and termination
internally), so this interface is ours; it is deliberately small. See ``docs/writing_a_task.md``.

Life cycle, as driven by the env::

    task.check_cartridge(gb.cartridge)      # title check: ROM/task mismatch -> clear error
    task.prepare(gb)                        # once: boot to the start state (all envs alike)
    task.setup(num_envs, device)            # once: allocate per-env buffers
    # ... the env snapshots that state (ResetCache); with varied starts it also builds a pool of
    # start states, each made by task.prepare_start(aux_gb, variant, generator) plus no-ops ...
    # at every episode start (masked envs only, after the snapshot is restored):
    task.on_reset(gb, mask, generator)
    # after every env step (all envs; `is_first` marks envs whose episode just started):
    reward, terminated = task.compute(gb, pixels, is_first)
    # tasks with a notion of success (has_success) say which envs reached it at that step:
    task.success()
    # tasks whose reward is not the game's own measure (has_score) give that measure's step:
    task.score()
    # the env then reads the task's RAM observations (``task.observations``) into the step's
    # output: one float32 [N, D] vector per RamObservation, each byte / 255
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import torch

from torchrl_dreamer.emulator.ram_reads import RamReader

__all__ = ["BOOKKEEPING_KEYS", "RESERVED_OBSERVATION_KEYS", "RamObservation", "Task",
           "TaskMismatchError",
           "check_observations", "load_state_arg", "observation_name_problem"]

BOOKKEEPING_KEYS = frozenset({"is_first", "episode_id", "success", "score", "bonus"})
"""Leaves of the env's observation spec that are bookkeeping, not observations of the game: the
episode-start flag, the episode counter, the task's success flag, its score and the exploration
bonus's share of the reward. The collector
does not hand them to the policy as observations and the world model does not encode them."""

RESERVED_OBSERVATION_KEYS = BOOKKEEPING_KEYS | frozenset({
    "pixels", "reward", "done", "terminated", "truncated", "action", "continue_", "prev_action",
    "next",
})
"""Keys a RAM observation may not be named: the env's own outputs, the replay's and the world
model's fields, and TorchRL's ``"next"``."""

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class TaskMismatchError(ValueError):
    """The ROM (or state file) given does not belong to the task."""


def observation_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a RAM observation (``None`` when it can).

    A name is a non-empty identifier (letters, digits, ``_``; not starting with a digit or
    ``_``) that is not one of :data:`RESERVED_OBSERVATION_KEYS`.

    Example:
        >>> observation_name_problem("ram") is None
        True
        >>> observation_name_problem("reward")
        "'reward' is already a key of every env step; pick another name, e.g. 'reward_ram'"
    """
    if not isinstance(name, str) or not name:
        return f"expected a non-empty name such as 'ram', got {name!r}"
    if name[0] == "_" or name[0].isdigit() or not set(name) <= _NAME_CHARS:
        return (f"{name!r} is not a plain name: use letters, digits and '_' (not first), e.g. "
                "'ram' or 'player_xy'")
    if name in RESERVED_OBSERVATION_KEYS:
        return (f"{name!r} is already a key of every env step; pick another name, e.g. "
                f"'{name}_ram'")
    return None


@dataclass(frozen=True)
class RamObservation:
    """An observation a task adds to every env step: the bytes at ``addresses`` as
    ``float32[N, len(addresses)]``, each byte / 255 (in the order given).

    :class:`~torchrl_dreamer.envs.GameBoyEnv` emits it under ``name`` in reset and step outputs
    and in its ``observation_spec`` (``Bounded(0, 1)``); the replay stores it and the world model
    gets a vector encoder and decoder for it, as for any float vector the env's specs declare.
    Declare it in :attr:`Task.observations` (or ``observe:`` in a task spec). Reading costs one
    ``read_memory`` launch per block of nearby addresses, then a gather; no host sync.

    Args:
        name: the output key (see :func:`observation_name_problem`).
        addresses: RAM addresses 0x0000-0xFFFF, each once (e.g. a list, or ``range(lo, hi + 1)``
            for a block).

    Raises:
        ValueError: naming the bad field (``RamObservation 'ram': addresses[2]: ...``).

    Example:
        Catch's paddle and block positions (``docs/roms.md``); compiles the emulator kernel once.

        >>> from torchrl_dreamer.envs import GameBoyEnv, make_task
        >>> objects = RamObservation("objects", [0xC007, 0xC008, 0xC009])
        >>> objects.size
        3
        >>> task = make_task("catch")
        >>> task.observations = (objects,)
        >>> env = GameBoyEnv(task, num_envs=2)
        >>> td = env.rollout(3, break_when_any_done=False)
        >>> td["next", "objects"].shape, td["next", "objects"].dtype
        (torch.Size([2, 3, 3]), torch.float32)
        >>> bool((td["next", "objects"][:, -1] * 255).round().eq(
        ...     env.gb.read_memory(0xC007, 3).float()).all())
        True
    """

    name: str
    addresses: tuple[int, ...]
    _reader: RamReader = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problem = observation_name_problem(self.name)
        if problem is not None:
            raise ValueError(f"RamObservation name: {problem}")
        where = f"RamObservation {self.name!r}: addresses"
        try:
            addresses = tuple(self.addresses)
        except TypeError:
            raise ValueError(f"{where}: expected a list of RAM addresses, got "
                             f"{self.addresses!r}") from None
        if not addresses:
            raise ValueError(f"{where}: expected at least one RAM address (0x0000-0xFFFF)")
        seen: dict[int, int] = {}
        for k, a in enumerate(addresses):
            if isinstance(a, bool) or not isinstance(a, int):
                raise ValueError(f"{where}[{k}]: expected an integer address, got {a!r}")
            if not 0 <= a <= 0xFFFF:
                raise ValueError(f"{where}[{k}]: {a:#x} is outside 0x0000-0xFFFF")
            if a in seen:
                raise ValueError(f"{where}[{k}]: {a:#06x} is listed twice (also at "
                                 f"[{seen[a]}]); list each address once")
            seen[a] = k
        object.__setattr__(self, "addresses", tuple(int(a) for a in addresses))
        object.__setattr__(self, "_reader", RamReader(self.addresses))  # blocks of nearby bytes

    @property
    def size(self) -> int:
        """``D``, the vector's length: one float per address."""
        return len(self.addresses)

    def read(self, gb: Any) -> torch.Tensor:
        """``float32[N, D]`` of every console of ``gb``: byte / 255 at each address."""
        return self._reader.read(gb.read_memory).to(torch.float32).div_(255.0)


def check_observations(observations: Any, where: str = "Task.observations"
                       ) -> tuple[RamObservation, ...]:
    """Validate a task's :attr:`Task.observations` (``RamObservation`` entries, distinct names)
    and return them as a tuple; raises ``ValueError`` naming the entry and what to do.

    Example:
        >>> check_observations([RamObservation("xy", [0xC004, 0xC005])])[0].size
        2
        >>> check_observations([RamObservation("xy", [0xC004]), RamObservation("xy", [0xC005])])
        Traceback (most recent call last):
        ...
        ValueError: Task.observations[1]: name 'xy' is used by [0] too; give each observation its own name
    """
    if isinstance(observations, RamObservation) or not isinstance(observations, (list, tuple)):
        raise ValueError(f"{where}: expected a tuple of RamObservation, got {observations!r}")
    names: dict[str, int] = {}
    for k, obs in enumerate(observations):
        if not isinstance(obs, RamObservation):
            raise ValueError(f"{where}[{k}]: expected a RamObservation(name, addresses), got "
                             f"{obs!r}")
        if obs.name in names:
            raise ValueError(f"{where}[{k}]: name {obs.name!r} is used by [{names[obs.name]}] "
                             "too; give each observation its own name")
        names[obs.name] = k
    return tuple(observations)


class Task:
    """Base class of game tasks; subclass it and override :meth:`compute` (and usually more).

    Attributes:
        name: registry name (``make_task(name)``).
        rom_titles: cartridge header titles this task accepts (compared after stripping NULs and
            spaces, case-insensitive); empty = accept any title.
        rom_sha256: hex digests of the exact ROM images accepted, for games whose header title
            is blank or shared; empty = no hash check.
        default_action_set: name of the built-in action set used when the env gets none.
        default_max_episode_steps: episode length limit used when the env gets none (``None`` =
            unlimited).
        default_max_episode_frames: the same limit in game frames (60 a second), used instead of
            :attr:`default_max_episode_steps` when set: the env turns it into
            ``ceil(frames / frame_skip)`` steps, so an episode lasts as long in game time at any
            frame skip (:meth:`episode_step_limit`).
        start_frames: frames run from power-on by the default :meth:`prepare`.
        rom_has_logo: ``False`` for ROMs that leave out the Nintendo logo on purpose (ours): the
            env then silences the emulator's missing-logo warning.
        default_noop_max: the random no-op start this task wants (frames, see
            ``GameBoyEnv(noop_max=...)``); ``None``: the run's default.
        has_success: whether :meth:`success` says which episodes succeeded (an episode
            succeeds when the flag was set at any of its steps).
        has_score: whether :meth:`score` gives the game's own measure of play, step by step,
            where the reward is not it (a reward with shaping terms or an exploration bonus):
            the env then emits a ``score`` key, training logs each episode's score beside its
            return and evaluation reports the mean score, so a shaped run is judged by the game.
        has_bonus: whether :meth:`bonus` gives the exploration bonus's share of each step's
            reward: the env then emits a ``bonus`` key, which the replay keeps, so that the
            learner can weigh the bonus apart from the rest of the reward
            (:attr:`~torchrl_dreamer.trainers.TrainConfig.bonus_final`).
        success_rule: how episodes count as successes when :attr:`has_success` is False:
            ``"terminal_reward"`` (ends ``terminated`` with a positive last reward, the rule of
            goal-reaching games) or ``"none"`` (returns only, no guessed success rate).
        observations: extra observations read from RAM at every step
            (:class:`RamObservation` entries, e.g. ``(RamObservation("xy", [0xC004, 0xC005]),)``):
            the env emits each as a ``float32[N, D]`` key beside ``pixels``, and training stores
            and models it with no other change. Empty by default.
        decision_watch: RAM addresses whose change ends an env step (a decision per game
            tick: a move of the player, a turn of a puzzle; :mod:`~torchrl_dreamer.emulator.decision`).
            Empty (default): every step runs ``frame_skip`` frames. With addresses, a step runs
            until one of them changes, at most :attr:`decision_max_frames` frames, and the
            episode's frame limit (:attr:`default_max_episode_frames`) counts the frames run.
        decision_max_frames: most frames a step runs when :attr:`decision_watch` is set.
        train_defaults: the training settings this task trains best with, as
            :class:`~torchrl_dreamer.trainers.TrainConfig` field names and values (e.g.
            ``{"replay_ratio": 0.2}``); a run's own settings override them. A task registered
            outside the package sets its own here.

    Args:
        rom: path of the ROM file; ``None`` = :meth:`default_rom`.
        state: optional savestate file (or ``EmulatorState``) to start episodes from instead of
            booting; loaded by :meth:`prepare`.
    """

    name: ClassVar[str] = "task"
    rom_titles: ClassVar[tuple[str, ...]] = ()
    rom_sha256: ClassVar[tuple[str, ...]] = ()
    default_action_set: ClassVar[str] = "default"
    default_max_episode_steps: ClassVar[int | None] = None
    default_max_episode_frames: ClassVar[int | None] = None
    start_frames: ClassVar[int] = 60
    rom_has_logo: ClassVar[bool] = True
    train_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    default_noop_max: ClassVar[int | None] = None
    has_success: ClassVar[bool] = False
    has_score: ClassVar[bool] = False
    has_bonus: ClassVar[bool] = False
    success_rule: ClassVar[str] = "terminal_reward"
    observations: ClassVar[tuple[RamObservation, ...]] = ()
    decision_watch: ClassVar[tuple[int, ...]] = ()
    decision_max_frames: ClassVar[int] = 16

    def __init__(self, rom: str | Path | None = None, state: Any = None):
        self.rom = Path(rom) if rom is not None else None
        self.state = state
        self.num_envs = 0
        self.device = torch.device("cpu")
        self.buffers: dict[str, torch.Tensor] = {}

    # ---- ROM and start state -------------------------------------------------------------
    def default_rom(self) -> Path:
        """Path of the ROM used when none is given; subclasses for shipped games override it."""
        raise FileNotFoundError(
            f"task {self.name!r} has no default ROM: pass rom=PATH to the task or the env"
        )

    def rom_path(self) -> Path:
        """The ROM this task runs (the given one, else :meth:`default_rom`), checked to exist."""
        path = self.rom if self.rom is not None else self.default_rom()
        if not Path(path).is_file():
            raise FileNotFoundError(
                f"ROM for task {self.name!r} not found at {path}; pass rom=PATH (user-supplied "
                "games are never shipped with torchrl_dreamer)"
            )
        return Path(path)

    def check_cartridge(self, cartridge: Any) -> None:
        """Raise :class:`TaskMismatchError` if the cartridge is not one this task accepts."""
        digest = getattr(cartridge, "sha256", None)
        if self.rom_sha256 and digest is not None and digest not in self.rom_sha256:
            raise TaskMismatchError(
                f"task {self.name!r} runs a specific ROM image (sha256 "
                f"{', '.join(h[:12] + '...' for h in self.rom_sha256)}) but was given one with "
                f"sha256 {digest[:12]}...; pass the ROM the task was written for"
            )
        if not self.rom_titles:
            return
        title = _normalise_title(getattr(cartridge, "title", ""))
        accepted = {_normalise_title(t) for t in self.rom_titles}
        if title not in accepted:
            raise TaskMismatchError(
                f"task {self.name!r} expects a ROM titled {sorted(accepted)} but the cartridge "
                f"is titled {title!r}; pass the matching ROM or pick the task for this game"
            )

    def prepare(self, gb: Any) -> None:
        """Bring every console to the state episodes start from (then the env snapshots it).

        Default: load :attr:`state` when given (a path or an ``EmulatorState``), else run
        :attr:`start_frames` frames with no button held from power-on.
        """
        if self.state is not None:
            state = load_state_arg(self.state)
            n = getattr(state, "num_envs", 1)
            if n not in (1, gb.num_envs) and hasattr(state, "select"):
                state = state.select(0)  # a multi-env savestate: start every env from its env 0
            try:
                gb.load_state(state)
            except ValueError as err:
                raise TaskMismatchError(
                    f"the start state given to task {self.name!r} does not fit the ROM "
                    f"{self.rom_path()}: {err}. Save the state with this ROM (GameBoy.save_state"
                    "().save(path)) or pass the ROM it was taken on"
                ) from err
        else:
            gb.run_frames(self.start_frames)

    def episode_step_limit(self, frame_skip: int) -> int | None:
        """The episode's step limit at ``frame_skip`` frames a step: ``ceil(frames / frame_skip)``
        when the task gives :attr:`default_max_episode_frames`, else
        :attr:`default_max_episode_steps` (``None``: unlimited).

        Why frames: a limit in steps shortens every episode when a run decides more often (400
        steps were 160 s of game at 24 frames a step and 53 s at 8).

        Example:
            >>> class Timed(Task):
            ...     default_max_episode_frames = 9600   # 160 s
            >>> Timed.episode_step_limit(Timed, 24), Timed.episode_step_limit(Timed, 8)
            (400, 1200)
        """
        if self.default_max_episode_frames is not None:
            return -(-int(self.default_max_episode_frames) // max(int(frame_skip), 1))
        return self.default_max_episode_steps

    @property
    def num_start_variants(self) -> int:
        """How many distinct start states :meth:`prepare_start` can make (e.g. several savestate
        files); 1 for a single start. The env cycles the variants through its start pool."""
        return 1

    @property
    def start_jitter(self) -> int:
        """Largest random extra delay (frames) :meth:`prepare_start` may add to the start; 0 for
        none. Informational: the env reports it, the task draws it."""
        return 0

    @property
    def reset_runs_frames(self) -> bool:
        """Whether the reset step must emulate frames before the first observation.

        ``False`` (tasks that write nothing at an episode start): the first observation of an
        episode is the start state's own picture and its RAM, so the agent acts from the very
        first frame and no reward moves unpaid. ``True`` (default when :meth:`on_reset` is
        overridden): the bytes the hook writes (a layout) must run through the game before the
        agent sees them, so the reset step emulates ``frame_skip`` frames with no button held
        from the start state and that step pays no reward (DreamerV3's ``r = 0`` on
        ``is_first``).
        """
        return type(self).on_reset is not Task.on_reset

    def prepare_start(self, gb: Any, variant: int, generator: torch.Generator) -> None:
        """Bring ``gb`` (a fresh, powered-on batch) to start variant ``variant`` (0 <= variant <
        :attr:`num_start_variants`), drawing any jitter with ``generator`` (a CPU generator).

        The env calls it to build its pool of varied start states (then adds its random no-op
        frames). Default: :meth:`prepare` (one start, no jitter).
        """
        self.prepare(gb)

    def setup(self, num_envs: int, device: torch.device) -> None:
        """Allocate per-env buffers (called once, before the first episode).

        Keep every per-env tensor a task updates in :attr:`buffers` (``{name: tensor[N, ...]}``):
        the env saves and restores them around a partial explicit reset, which must leave the
        other envs untouched. Subclasses call ``super().setup(...)`` first.
        """
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.buffers = {}

    # ---- per episode and per step --------------------------------------------------------
    def on_reset(self, gb: Any, mask: torch.Tensor, generator: torch.Generator | None) -> None:
        """Episode start for envs where ``mask`` (bool ``[N]``) is set, right after the snapshot
        restore and before the env step that renders the first observation.

        Override to write RAM (``gb.write_memory(addr, values, mask=mask)``), e.g. a random layout
        byte drawn with ``generator`` on the env's device. Must not sync the host. Default: no-op.
        """

    def compute(
        self, gb: Any, pixels: torch.Tensor, is_first: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reward and termination of the step just run, for all envs.

        Args:
            gb: the console batch (read memory with ``gb.read_memory(addr, length)``).
            pixels: the packed2 observation ``uint8[N, 1, 72, 20]`` of this step.
            is_first: bool ``[N]``: envs whose episode started at this step. Their reward and
                termination are ignored by the env (forced to 0/False); use the mask to reset
                per-episode baselines such as the previous score.

        Returns:
            ``(reward float32[N], terminated bool[N])`` on the env's device, or a triple with
            ``truncated bool[N]`` last for tasks that also end episodes without a terminal
            state (the env ORs it with its ``max_episode_steps`` limit).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement compute()")

    def success(self) -> torch.Tensor:
        """``bool[N]``: envs that reached the task's success at the step :meth:`compute` just ran
        (read by the env on every step; an episode succeeds when it was set at any step).

        Only called when :attr:`has_success` is True; tasks with a notion of success set it and
        override this (e.g. keep the flags computed in :meth:`compute` in :attr:`buffers`).
        """
        raise NotImplementedError(f"{type(self).__name__} sets has_success but not success()")

    def score(self) -> torch.Tensor:
        """``float32[N]``: what the step :meth:`compute` just ran added to the game's own
        measure (e.g. foods eaten), where the reward also holds shaping or a bonus.

        Only called when :attr:`has_score` is True; such tasks override it.
        """
        raise NotImplementedError(f"{type(self).__name__} sets has_score but not score()")

    def bonus(self) -> torch.Tensor:
        """``float32[N]``: the exploration bonus's part of the reward of the step :meth:`compute`
        just ran (a count bonus, which the learner may weigh down over a run).

        Only called when :attr:`has_bonus` is True; such tasks override it.
        """
        raise NotImplementedError(f"{type(self).__name__} sets has_bonus but not bonus()")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, rom={self.rom})"


def _normalise_title(title: Any) -> str:
    if isinstance(title, (bytes, bytearray)):
        title = bytes(title).decode("ascii", errors="replace")
    return str(title).replace("\x00", "").strip().upper()


def load_state_arg(state: Any) -> Any:
    """A savestate given as a path is read with the emulator's loader; objects (an
    ``EmulatorState`` already loaded) pass through. Tasks and the RAM finder start consoles
    from either form.

    Raises:
        FileNotFoundError: the path names no file.

    Example:
        >>> load_state_arg(None) is None
        True
    """
    if isinstance(state, (str, Path)):
        path = Path(state)
        if not path.is_file():
            raise FileNotFoundError(f"state file {path} not found")
        from torchrl_dreamer.emulator import EmulatorState

        loader = getattr(EmulatorState, "load", None)
        if loader is None:
            raise NotImplementedError("this emulator build cannot read state files")
        return loader(path)
    return state
