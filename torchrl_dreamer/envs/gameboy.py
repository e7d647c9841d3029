"""``GameBoyEnv``: a batch of emulated Game Boys as one TorchRL :class:`~torchrl.envs.EnvBase`.

The env is native (like TorchRL's ``MJLabWrapper``, not a gym wrapper): ``batch_size=[N]``, every
tensor lives on the emulator's device, and one env step is one emulator launch
(``gb.step(buttons, frames=frame_skip, press_frames=press_frames)``) plus a few batched tensor ops
for the task. Nothing in a step syncs the host. A task with a decision watch
(:attr:`~torchrl_dreamer.envs.task.Task.decision_watch`) steps to the game's own tick instead,
one launch per frame (``gb.step_until``; on the CPU it returns when every console has stopped).

Episode ends use a **deferred reset** (danijar's embodied driver): the step that ends an episode
(``terminated`` by the task or ``truncated`` by ``max_episode_steps``) returns the real final
observation with the flags and the reward; on the NEXT step that env ignores its action, restores
the start snapshot (``ResetCache``, masked, on the device) and returns the new episode's first
observation with ``is_first=True``, reward 0, done flags False and ``episode_id + 1``. That
observation is the start state itself (its picture and RAM: nothing is emulated, so no frame and
no reward of the new episode is lost), except for tasks whose reset hook writes RAM the game must
draw first (a maze layout: :attr:`Task.reset_runs_frames`), where the step runs the hook and
emulates ``frame_skip`` frames with no button held. With varied starts (``noop_max`` or a task's
start variants/jitter) each episode start draws its start state from a pool. Collectors therefore
never need to call ``reset`` (``_torchrl_native_autoreset``), so they never sync the host to ask
whether an env is done. An explicit :meth:`reset` (full, or partial through a ``"_reset"`` mask)
works as well and resets at once.

Outputs per step (``batch_size=[N]``): ``pixels`` (``uint8[N,1,72,20]`` packed2 by default;
``pixels="shades"`` gives ``uint8[N,1,72,80]`` shades 0..3, ``pixels="rgb"`` ``uint8[N,3,72,80]``
greys of the shades, ``pixels="color"`` ``uint8[N,3,72,80]`` the colours of a Game Boy Color
(``model="cgb"``; a DMG-only game there in its compatibility palettes):
:mod:`~torchrl_dreamer.emulator.color_obs`),
``reward`` ``float32[N,1]``, ``done``/``terminated``/``truncated`` ``bool[N,1]``, ``is_first``
``bool[N,1]`` and ``episode_id`` ``int32[N,1]``, plus one ``float32[N,D]`` key per RAM observation
the task declares (:attr:`Task.observations`: each byte / 255, read after the step like the
picture); tasks that have them add ``success`` ``bool[N,1]``, ``score`` and ``bonus``
``float32[N,1]`` (the game's own measure, and the exploration bonus's part of the reward:
:attr:`Task.has_success`, :attr:`Task.has_score`, :attr:`Task.has_bonus`). Each step returns
fresh tensors: nothing returned aliases a buffer a later step overwrites (unless you ask for it with ``obs_out``).

Example:
    >>> from torchrl_dreamer.envs import GameBoyEnv
    >>> env = GameBoyEnv("maze", num_envs=4)  # the shipped maze ROM
    >>> td = env.rollout(10, break_when_any_done=False)
    >>> td["next", "pixels"].shape
    torch.Size([4, 10, 1, 72, 20])
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs import EnvBase

from torchrl_dreamer.emulator.color_obs import COLOR_SHAPE, color_frame
from torchrl_dreamer.emulator.decision import check_watch
from torchrl_dreamer.emulator.launch import AUTO, LaunchFrames
from torchrl_dreamer.emulator.packed2 import PACKED2_HEIGHT, PACKED2_SHAPE, PACKED2_WIDTH
from torchrl_dreamer.envs.actions import (
    GAME_FRAME_SKIP,
    ActionSet,
    default_press_frames,
    make_action_set,
)
from torchrl_dreamer.envs.registry import make_task
from torchrl_dreamer.envs.task import Task, check_observations

__all__ = ["GameBoyEnv", "GAME_NOOP_MAX", "PIXEL_FORMATS", "training_steps"]

GAME_NOOP_MAX = 30
"""Random no-op frames (at most) before each episode of a Game Boy task that trains unless the
task, its spec or the run says otherwise: games seed their RNG from frame counters, so a fixed
start replays one episode (``docs/decisions/training_defaults.md``). Defined here, below the
trainers, so that the env-level tools (the spec probe) start episodes as training does."""

PIXEL_FORMATS = ("packed2", "shades", "rgb", "color")
"""Observation formats of ``GameBoyEnv(pixels=...)``."""


def training_steps(task: Any, frame_skip: int | None = None, press_frames: int | None = None,
                   noop_max: int | None = None) -> tuple[int, int, int]:
    """``(frame_skip, press_frames, noop_max)`` of a training run on ``task`` unless given: the
    task's ``train_defaults`` (a spec's ``train:``), its own no-op start (a spec's
    ``start.noop_max``), then the Game Boy defaults
    (:data:`~torchrl_dreamer.envs.actions.GAME_FRAME_SKIP`,
    :func:`~torchrl_dreamer.envs.actions.default_press_frames`, :data:`GAME_NOOP_MAX`), the
    order :class:`~torchrl_dreamer.trainers.TrainConfig` resolves them in (a test checks the
    two agree). The tools below the trainers (the spec probe, the play CLI) step with it.
    Raises ValueError for a press longer than the step.

    Example:
        >>> from torchrl_dreamer.envs.tasks.catch import CatchTask
        >>> training_steps(CatchTask())   # catch trains at 24 frames a step
        (24, 8, 0)
    """
    own = {str(k).rpartition(".")[2]: v for k, v in dict(task.train_defaults).items()}
    fs = frame_skip if frame_skip is not None else own.get("frame_skip", GAME_FRAME_SKIP)
    press = press_frames if press_frames is not None else own.get("press_frames")
    press = default_press_frames(fs) if press is None else press
    if noop_max is None:
        noop_max = own.get("noop_max", getattr(task, "default_noop_max", None))
    noop = GAME_NOOP_MAX if noop_max is None else noop_max
    if fs < 1 or not 0 <= press <= fs:
        raise ValueError(f"press_frames={press} does not fit a step of frame_skip={fs} frames: "
                         "use 0..frame_skip (--press-frames, or the spec's train: press_frames)")
    return int(fs), int(press), int(noop)

def _default_backend() -> Any:
    from torchrl_dreamer import emulator

    if not hasattr(emulator, "GameBoy"):
        raise ImportError(
            "torchrl_dreamer.emulator.GameBoy is not available in this build; GameBoyEnv needs "
            "the Warp emulator (or pass backend=... with GameBoy and ResetCache classes)"
        )
    return emulator


class GameBoyEnv(EnvBase):
    """N Game Boy consoles running one :class:`~torchrl_dreamer.envs.task.Task`, as a TorchRL env.

    Args:
        task: a registered task name (see :func:`~torchrl_dreamer.envs.list_tasks`) or a
            :class:`Task` instance. Defaults to ``"maze"``.
        num_envs: number of consoles N (the env's ``batch_size`` is ``[N]``).
        device: ``"cpu"`` or a CUDA device; the emulator and every output live there.

    Keyword Args:
        rom: ROM path overriding the task's default ROM (user-supplied games).
        state: savestate path/object to start episodes from (passed to the task).
        task_kwargs: extra keyword arguments for a task given by name.
        action_set: a built-in action set name, a list of action names or an
            :class:`~torchrl_dreamer.envs.actions.ActionSet`; default: the task's.
        frame_skip: frames emulated per env step (24). A task with a decision watch
            (:attr:`Task.decision_watch`, a spec's ``decision:``) runs each step until a
            watched byte changes instead (see :attr:`episode_frames`); ``frame_skip`` then
            sets the default press length only.
        press_frames: frames the chosen buttons are held at the start of a step (default
            :func:`~torchrl_dreamer.envs.actions.default_press_frames`, ``min(8, frame_skip)``:
            a short step holds its button throughout).
        max_episode_steps: steps after which an episode is ``truncated``; default: the task's
            (:meth:`~torchrl_dreamer.envs.task.Task.episode_step_limit` at this frame skip;
            ``None``/0 = no limit).
        pixels: observation format, one of :data:`PIXEL_FORMATS` (``"packed2"``; ``"color"``
            needs a Color cartridge on the Color, the frame's colours instead of its shades).
        noop_max: episodes start after a random 0..``noop_max`` frames with no button held, a
            new draw at every episode start (0 = always the same start, unless the task has
            several start variants or a start jitter); see :attr:`varied_starts`.
        start_pool: how many varied start states are prepared (at construction and at
            :meth:`set_seed`); each episode start picks one per env.
        native_autoreset: deferred native auto-reset (see the module docstring); with
            ``False`` TorchRL collectors call :meth:`reset` on done envs as for any env. (Not
            ``auto_reset``: TorchRL's ``EnvBase`` reserves that name for its ``AutoResetEnv``.)
        one_hot_actions: action spec ``OneHot(n)`` (``bool[N, n]``, what one-hot actors such as
            Dreamer's emit) instead of ``Categorical(n)`` (``int64[N]``); both are accepted.
        seed: seed of the reset draws (layouts, no-op counts) at construction; default 0, so
            two envs built alike behave alike until :meth:`set_seed`.
        backend: object with ``GameBoy`` and ``ResetCache`` (default: :mod:`torchrl_dreamer.emulator`);
            lets tests and alternative emulators plug in.
        ppu: the emulator's PPU mode, ``"fifo"`` or ``"line"``
            (:data:`~torchrl_dreamer.emulator.PPU_MODES`); default: the emulator's.
        workers: CPU cores the env's consoles are emulated on (``GameBoy(workers=...)``: the
            batch in that many slices launched together, same outputs as 1; CPU only, at most
            the process's cores). Auxiliary batches (start states) use 1.
        model: the console, ``"dmg"`` or ``"cgb"`` (Game Boy Color); default: the emulator's
            choice for the ROM (the Color for a Color-only cartridge, else the DMG; see
            :mod:`torchrl_dreamer.emulator.model`).
        launch_frames: frames emulated per kernel launch of a step (``GameBoy(launch_frames=
            ...)``; ``None``: the whole step in one launch). ``1`` makes the consoles of a GPU
            warp meet at every frame end; ``"auto"`` (default) is ``1`` on CUDA, where it
            measured 1.2-4.3x the env steps/s, and ``None`` on the CPU
            (:mod:`~torchrl_dreamer.emulator.launch`). The same outputs whatever the value.
    """

    _PIXELS_KEY = "pixels"
    # frame_skip is done inside the emulator launch: stop EnvBase from adding FrameSkipTransform.
    _has_frame_skip = True

    def __init__(
        self,
        task: str | Task = "maze",
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        *,
        rom: str | Path | None = None,
        state: Any = None,
        task_kwargs: dict[str, Any] | None = None,
        action_set: str | list[str] | ActionSet | None = None,
        frame_skip: int = 24,
        press_frames: int | None = None,
        max_episode_steps: int | None | str = "task",
        pixels: str = "packed2",
        noop_max: int = 0,
        start_pool: int = 32,
        native_autoreset: bool = True,
        one_hot_actions: bool = False,
        seed: int | None = None,
        backend: Any = None,
        ppu: str | None = None,
        workers: int = 1,
        model: str | None = None,
        launch_frames: LaunchFrames = AUTO,
    ):
        num_envs = int(num_envs)
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}")
        if press_frames is None:
            press_frames = default_press_frames(frame_skip)
        if not 0 <= press_frames <= frame_skip:
            raise ValueError(
                f"press_frames must lie in 0..frame_skip ({frame_skip}), got {press_frames}"
            )
        if pixels not in PIXEL_FORMATS:
            raise ValueError(f"unknown pixels format {pixels!r}; choose one of {PIXEL_FORMATS}")
        if noop_max < 0:
            raise ValueError(f"noop_max must be >= 0, got {noop_max}")
        if start_pool < 1:
            raise ValueError(f"start_pool must be >= 1, got {start_pool}")
        device = torch.device(device)
        super().__init__(batch_size=torch.Size([num_envs]), device=device)
        self._ppu = ppu
        self._workers = workers
        self._model = model
        self._launch_frames = launch_frames

        kwargs = dict(task_kwargs or {})
        if rom is not None:
            kwargs["rom"] = rom
        if state is not None:
            kwargs["state"] = state
        if isinstance(task, Task) and kwargs:
            raise ValueError(
                "rom/state/task_kwargs only apply to a task given by name; set them on your Task"
            )
        self.task: Task = make_task(task, **kwargs)
        # checked before any console is built: a bad name or address fails here, named
        self._ram_obs = check_observations(self.task.observations,
                                           f"task {self.task.name!r} observations")
        self.action_set: ActionSet = make_action_set(
            action_set if action_set is not None else self.task.default_action_set
        )
        # a step per game tick (the task's decision watch) instead of frame_skip frames
        self.decision_watch: tuple[int, ...] = ()
        self.max_episode_frames = 0
        if self.task.decision_watch:
            self.decision_watch, self.decision_max_frames = check_watch(
                self.task.decision_watch, self.task.decision_max_frames)
            if max_episode_steps == "task":
                # steps vary in length: the task's limit counts frames; the step bound is
                # only a backstop (a step runs at least one frame)
                self.max_episode_frames = int(self.task.default_max_episode_frames or 0)
                max_episode_steps = (self.max_episode_frames
                                     or self.task.episode_step_limit(int(frame_skip)))
        if max_episode_steps == "task":
            max_episode_steps = self.task.episode_step_limit(int(frame_skip))
        self.max_episode_steps = int(max_episode_steps or 0)
        self.frame_skip = int(frame_skip)
        self.press_frames = int(press_frames)
        self.pixels_format = pixels
        self.noop_max = int(noop_max)
        self.start_pool = int(start_pool)
        self.num_envs = num_envs
        self.one_hot_actions = bool(one_hot_actions)
        self._backend = backend if backend is not None else _default_backend()

        # Console batch, task and start snapshot.
        self._rom_path = self.task.rom_path()
        self.gb = self._make_gb(num_envs, workers=self._workers)
        self._color = pixels == "color"
        if self._color and getattr(self.gb, "model", "dmg") != "cgb":
            raise ValueError(
                "pixels='color' is the Game Boy Color's colour frame: this console is a DMG "
                "(pass model='cgb': a Color or dual-mode cartridge runs in Color mode, a DMG-only "
                "one in the compatibility mode with the boot ROM's palettes)")
        self.task.check_cartridge(self.gb.cartridge)
        self.task.prepare(self.gb)
        self.task.setup(num_envs, device)
        self._generator = torch.Generator(device=device)
        self._generator.manual_seed(0 if seed is None else int(seed))
        self._noop_gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
        self._reset_cache = self._build_reset_cache()
        # Where the first observation of an episode comes from (see the module docstring).
        self._settle = bool(self.task.reset_runs_frames)

        # Per-env bookkeeping (device tensors).
        self._pending = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self._steps = torch.zeros(num_envs, dtype=torch.int32, device=device)
        self._frames = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self._episode_id = torch.full((num_envs,), -1, dtype=torch.int32, device=device)
        self._last_pixels = torch.zeros(num_envs, *PACKED2_SHAPE, dtype=torch.uint8,
                                        device=device)
        self._last_done = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self._zeros_u8 = torch.zeros(num_envs, dtype=torch.uint8, device=device)
        self._start_pixels = self._pool_pixels[torch.zeros(num_envs, dtype=torch.long)].to(device)
        if self._color:
            # the colour observation rides along the packed2 one (tasks read packed2)
            self._start_color = self._pool_color[torch.zeros(num_envs, dtype=torch.long)]
            self._last_color = torch.zeros_like(self._start_color)
        self.noop_frames = torch.zeros(num_envs, dtype=torch.int64, device=device)
        """No-op frames of each env's current episode start (``int64[N]``)."""

        self._make_specs()
        self._torchrl_native_autoreset = bool(native_autoreset)

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        n = self.num_envs
        dev = self.device
        hw = (PACKED2_HEIGHT, PACKED2_WIDTH)
        if self.pixels_format == "packed2":
            pix = Bounded(0, 255, shape=(n, *PACKED2_SHAPE), dtype=torch.uint8, device=dev)
        elif self.pixels_format == "shades":
            pix = Bounded(0, 3, shape=(n, 1, *hw), dtype=torch.uint8, device=dev)
        elif self.pixels_format == "color":
            pix = Bounded(0, 255, shape=(n, *COLOR_SHAPE), dtype=torch.uint8, device=dev)
        else:
            pix = Bounded(0, 255, shape=(n, 3, *hw), dtype=torch.uint8, device=dev)
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool, device=dev)
        self.observation_spec = Composite(
            {
                self._PIXELS_KEY: pix,
                "is_first": flag.clone(),
                "episode_id": Unbounded(shape=(n, 1), dtype=torch.int32, device=dev),
            },
            shape=(n,),
            device=dev,
        )
        if self.task.has_success:
            self.observation_spec["success"] = flag.clone()
        for key, _ in self._reward_parts():
            self.observation_spec[key] = Unbounded(shape=(n, 1), dtype=torch.float32, device=dev)
        for obs in self._ram_obs:
            self.observation_spec[obs.name] = Bounded(0.0, 1.0, shape=(n, obs.size),
                                                      dtype=torch.float32, device=dev)
        if self.one_hot_actions:
            self.action_spec = OneHot(self.action_set.n, shape=(n, self.action_set.n),
                                      dtype=torch.bool, device=dev)
        else:
            self.action_spec = Categorical(self.action_set.n, shape=(n,), dtype=torch.int64,
                                           device=dev)
        self.reward_spec = Unbounded(shape=(n, 1), dtype=torch.float32, device=dev)
        self.done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(),
            shape=(n,), device=dev,
        )

    # ------------------------------------------------------------------ start states
    @property
    def varied_starts(self) -> bool:
        """Whether episodes start from a pool of varied start states (``noop_max > 0``, or a task
        with several start variants or a start jitter) instead of one fixed start."""
        return (self.noop_max > 0 or self.task.num_start_variants > 1
                or self.task.start_jitter > 0)

    def _build_reset_cache(self) -> Any:
        """Snapshot the start state(s) episodes restart from, and their first observations.

        One fixed start: the consoles' state after ``task.prepare`` (all envs alike). Varied
        starts: a pool of ``start_pool`` states, entry ``k`` made by ``task.prepare_start``
        (variant ``k % num_start_variants``, the task's own jitter) plus a random
        ``0..noop_max`` frames with no button held; every episode start draws its entry (and so
        its no-op count) per env with the env's generator, on the device. Games seed their RNG
        from frame counters, so these starts give different games.
        """
        if not self.varied_starts:
            self._ensure_picture(self.gb)
            self._pool_pixels = self.gb.packed2[:1].clone()
            if self._color:
                self._pool_color = color_frame(self.gb.rgb555[:1])
            self._pool_noops = torch.zeros(1, dtype=torch.int64, device=self.device)
            return self._backend.ResetCache(self.gb)
        size = self.start_pool
        variants = self.task.num_start_variants
        noops = (torch.randint(0, self.noop_max + 1, (size,), generator=self._noop_gen)
                 if self.noop_max > 0 else torch.zeros(size, dtype=torch.int64))
        pool = self._make_gb(size)
        pixels = torch.empty(size, *PACKED2_SHAPE, dtype=torch.uint8, device=self.device)
        colors = torch.empty(size, *COLOR_SHAPE, dtype=torch.uint8, device=self.device)
        jitter = self.task.start_jitter > 0
        groups = ([[k] for k in range(size)] if jitter else
                  [list(range(v, size, variants)) for v in range(min(variants, size))])
        for group in groups:
            one = self._make_gb(1)
            self.task.prepare_start(one, group[0] % variants, self._noop_gen)
            self._ensure_picture(one)
            done = 0
            for k in sorted(group, key=lambda j: int(noops[j])):
                if int(noops[k]) > done:
                    one.run_frames(int(noops[k]) - done)
                    done = int(noops[k])
                pixels[k] = one.packed2[0]
                if self._color:
                    colors[k] = color_frame(one.rgb555)[0]
                only_k = torch.zeros(size, dtype=torch.bool, device=self.device)
                only_k[k] = True
                pool.load_state(one.save_state(), mask=only_k)
        self._pool_pixels = pixels
        self._pool_color = colors
        self._pool_noops = noops.to(self.device)
        return self._backend.ResetCache(self.gb, pool.save_state(), pool=True)

    @staticmethod
    def _ensure_picture(gb: Any) -> None:
        """Give a start state its picture (``gb.packed2``, the last frame run): one whose
        picture is blank (a savestate just loaded: frames are not saved) is advanced one frame so
        the first observation shows the game."""
        if not bool(gb.packed2.any()):
            gb.run_frames(1)

    def replica(self, num_envs: int) -> GameBoyEnv:
        """A new env of ``num_envs`` consoles like this one: the same task, action set, frame
        skip, press length, pixels, device and console options (PPU mode, model, frames per
        launch), one worker, fixed starts (``noop_max=0``). For tools that copy this env's
        console states into a batch of their own, e.g.
        :func:`~torchrl_dreamer.envs.action_probe.probe_actions`."""
        return GameBoyEnv(self.task, num_envs=num_envs, device=self.device,
                          action_set=self.action_set, frame_skip=self.frame_skip,
                          press_frames=self.press_frames, pixels=self.pixels_format,
                          backend=self._backend, ppu=self._ppu, model=self._model,
                          launch_frames=self._launch_frames)

    def _make_gb(self, num_envs: int, workers: int = 1) -> Any:
        with warnings.catch_warnings():
            if not self.task.rom_has_logo:
                # our own games leave the (copyrighted) Nintendo logo out on purpose
                warnings.filterwarnings("ignore", message=".*Nintendo logo.*")
            extra = {} if self._ppu is None else {"ppu": self._ppu}
            if self._model is not None:
                extra["model"] = self._model
            if workers != 1:
                extra["workers"] = workers
            if self._launch_frames != AUTO:  # "auto" is the backend's own default
                extra["launch_frames"] = self._launch_frames
            return self._backend.GameBoy(self._rom_path, num_envs=num_envs, device=self.device,
                                         **extra)

    # ------------------------------------------------------------------ core
    def _restart(self, mask: torch.Tensor) -> None:
        """Start a new episode in the envs of ``mask`` (bool [N]) without a host sync.

        Restores each masked env's start state (a fresh draw from the pool with varied starts),
        records its first picture in ``_start_pixels`` and runs the task's reset hook. On CPU
        reading the mask costs nothing (there is no device to wait for), so an empty mask skips
        the launches; on CUDA they always run, masked on the device.
        """
        if self.device.type == "cpu" and not bool(mask.any()):
            return
        if self._pool_noops.numel() > 1:
            rows = torch.randint(0, self._pool_noops.numel(), (self.num_envs,),
                                 generator=self._generator, device=self.device)
            self._reset_cache.restore(mask, rows)
            self._start_pixels = torch.where(mask.reshape(-1, 1, 1, 1), self._pool_pixels[rows],
                                             self._start_pixels)
            if self._color:
                self._start_color = torch.where(mask.reshape(-1, 1, 1, 1), self._pool_color[rows],
                                                self._start_color)
            self.noop_frames = torch.where(mask, self._pool_noops[rows], self.noop_frames)
        else:
            self._reset_cache.restore(mask)
        self.task.on_reset(self.gb, mask, self._generator)

    def _format_pixels(self, packed: torch.Tensor) -> torch.Tensor:
        if self.pixels_format == "packed2":
            return packed
        if self._color:
            return self._last_color.clone()  # (kept in step with _last_pixels by its callers)
        from torchrl_dreamer.emulator.packed2 import shades_to_rgb, unpack_packed2

        shades = unpack_packed2(packed)
        if self.pixels_format == "shades":
            return shades
        return shades_to_rgb(shades.squeeze(-3))

    def fast_step(
        self, action: torch.Tensor, obs_out: torch.Tensor | None = None
    ) -> TensorDictBase:
        """One env step without TorchRL's wrapping: action indices ``[N]`` in, step data out.

        This is what :meth:`step` runs (it adds spec handling and the ``"next"`` nesting). A
        collector can call it directly and pass ``obs_out``, a ``uint8[N,1,72,20]`` view (e.g. a
        replay row) the emulator renders the packed2 frame into in place; the returned
        ``pixels`` then IS ``obs_out`` (``pixels="packed2"`` only).

        Returns:
            a TensorDict ``[N]`` with ``pixels, reward, done, terminated, truncated, is_first,
            episode_id`` and the task's RAM observations (shapes as in the module docstring).
        """
        n = self.num_envs
        if action.dim() > 1:
            action = action.reshape(n, -1)  # one-hot [N, n] or indices [N, 1]
            if action.shape[-1] == 1:
                action = action.squeeze(-1)
            elif not action.dtype.is_floating_point:
                action = action.to(torch.bool)
        buttons = self.action_set.encode(action.to(self.device))
        first = self._pending
        buttons = torch.where(first, self._zeros_u8, buttons)
        if self._settle:
            self._restart(first)
        if obs_out is not None:
            if self.pixels_format != "packed2":
                raise ValueError("obs_out is only supported with pixels='packed2'")
            if tuple(obs_out.shape) != (n, *PACKED2_SHAPE) or obs_out.dtype != torch.uint8:
                raise ValueError(
                    f"obs_out must be uint8 of shape {(n, *PACKED2_SHAPE)}, got "
                    f"{obs_out.dtype} {tuple(obs_out.shape)}"
                )
            packed = obs_out
        else:
            packed = torch.empty(n, *PACKED2_SHAPE, dtype=torch.uint8, device=self.device)
        if self.decision_watch:
            ran = self.gb.step_until(buttons, self.decision_watch, self.decision_max_frames,
                                     self.press_frames, obs_out=packed)
        else:
            self.gb.step(buttons, frames=self.frame_skip, press_frames=self.press_frames,
                         obs_out=packed)
            ran = self.frame_skip
        if not self._settle and (self.device.type != "cpu" or bool(first.any())):
            # the new episode's first observation is its start state itself: nothing emulated
            self._restart(first)
            packed.copy_(torch.where(first.reshape(-1, 1, 1, 1), self._start_pixels, packed))
        if self._color:
            self._last_color = torch.where(first.reshape(-1, 1, 1, 1), self._start_color,
                                           color_frame(self.gb.rgb555))
        out = self.task.compute(self.gb, packed, first)
        reward, terminated = out[0], out[1]
        task_truncated = out[2] if len(out) > 2 else None
        reward = torch.where(first, torch.zeros_like(reward), reward.to(torch.float32))
        terminated = terminated.to(torch.bool) & ~first
        self._steps = torch.where(first, torch.zeros_like(self._steps), self._steps + 1)
        self._frames = torch.where(first, torch.zeros_like(self._frames), self._frames + ran)
        self._episode_id = self._episode_id + first.to(torch.int32)
        truncated = self._truncation(terminated)
        if task_truncated is not None:
            truncated = truncated | (task_truncated.to(torch.bool) & ~first & ~terminated)
        done = terminated | truncated
        self._pending = done
        self._last_done = done
        self._last_pixels = packed
        out = self._output(packed, reward, terminated, truncated, first)
        if self.task.has_success:
            out["success"] = (self.task.success().to(torch.bool) & ~first).reshape(-1, 1)
        for key, part in self._reward_parts():  # like the reward: nothing at a first step
            v = part().to(torch.float32)
            out[key] = torch.where(first, torch.zeros_like(v), v).reshape(-1, 1)
        return out

    def _reward_parts(self) -> list[tuple[str, Any]]:
        """The per-step float leaves the task reports beside the reward, ``(key, method)``:
        ``score`` (the game's own measure beside a shaped reward, :attr:`Task.has_score`) and
        ``bonus`` (the exploration bonus's share of the reward, :attr:`Task.has_bonus`)."""
        t = self.task
        return ([("score", t.score)] if t.has_score else []) + (
            [("bonus", t.bonus)] if t.has_bonus else [])

    def _truncation(self, terminated: torch.Tensor) -> torch.Tensor:
        truncated = torch.zeros_like(terminated)
        if self.max_episode_steps > 0:
            truncated = self._steps >= self.max_episode_steps
        if self.max_episode_frames > 0:
            truncated = truncated | (self._frames >= self.max_episode_frames)
        locked = getattr(self.gb, "locked", None)
        if isinstance(locked, torch.Tensor):
            # A console that hit an illegal opcode can never continue: end its episode.
            truncated = truncated | locked.to(torch.bool).reshape(-1)
        return truncated & ~terminated

    def _output(self, packed, reward, terminated, truncated, first) -> TensorDictBase:
        # the task's RAM observations, of the consoles as they are now (after the step, a
        # restart or a partial reset's roll-back): what the picture shows
        ram = {obs.name: obs.read(self.gb) for obs in self._ram_obs}
        return TensorDict(
            {
                self._PIXELS_KEY: self._format_pixels(packed),
                "reward": reward.reshape(-1, 1),
                "done": (terminated | truncated).reshape(-1, 1).clone(),
                "terminated": terminated.reshape(-1, 1).clone(),
                "truncated": truncated.reshape(-1, 1).clone(),
                "is_first": first.reshape(-1, 1).clone(),
                "episode_id": self._episode_id.reshape(-1, 1).clone(),
                **ram,
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.fast_step(tensordict.get("action"))

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        n = self.num_envs
        mask = None
        if tensordict is not None:
            mask = tensordict.get("_reset", None)
        if mask is None:
            mask = torch.ones(n, dtype=torch.bool, device=self.device)
            partial = False
        else:
            mask = mask.to(self.device, torch.bool).reshape(n, -1).any(-1)
            partial = not bool(mask.all())
            if not bool(mask.any()):
                # nothing to reset: report the current observation unchanged
                no = torch.zeros(n, dtype=torch.bool, device=self.device)
                out = self._output(self._last_pixels.clone(), no.float(), no, no, no)
                del out["reward"]
                self._no_flags(out, no)
                return out
        saved = self.gb.save_state() if partial and self._settle else None
        saved_task = {k: v.clone() for k, v in self.task.buffers.items()} if partial else None
        self._restart(mask)
        if self._settle:
            packed = torch.empty(n, *PACKED2_SHAPE, dtype=torch.uint8, device=self.device)
            self.gb.step(self._zeros_u8, frames=self.frame_skip, press_frames=self.press_frames,
                         obs_out=packed)
        else:  # the start state's own picture; consoles outside the mask are not touched
            packed = torch.where(mask.reshape(-1, 1, 1, 1), self._start_pixels, self._last_pixels)
        if self._color:
            color = (color_frame(self.gb.rgb555) if self._settle else self._start_color)
            self._last_color = torch.where(mask.reshape(-1, 1, 1, 1), color, self._last_color)
        self.task.compute(self.gb, packed, mask)
        if partial:
            # Envs outside the mask must not move: roll their consoles and task state back.
            if saved is not None:
                self.gb.load_state(saved, mask=~mask)
            for key, old in saved_task.items():
                new = self.task.buffers[key]
                keep = (~mask).reshape(-1, *([1] * (new.dim() - 1)))
                new.copy_(torch.where(keep, old, new))
            packed = torch.where(mask.reshape(-1, 1, 1, 1), packed, self._last_pixels)
        self._steps = torch.where(mask, torch.zeros_like(self._steps), self._steps)
        self._frames = torch.where(mask, torch.zeros_like(self._frames), self._frames)
        self._episode_id = self._episode_id + mask.to(torch.int32)
        self._pending = self._pending & ~mask
        self._last_done = self._last_done & ~mask
        self._last_pixels = packed
        # Rows outside the mask are ignored by TorchRL (it keeps the input's values there).
        no = torch.zeros(n, dtype=torch.bool, device=self.device)
        out = self._output(packed, no.float(), no, no, mask)
        del out["reward"]
        self._no_flags(out, no)
        return out

    def _no_flags(self, out: TensorDictBase, no: torch.Tensor) -> None:
        """A reset's ``success``, ``score`` and ``bonus`` (where the task has them): nothing yet."""
        if self.task.has_success:
            out["success"] = no.reshape(-1, 1).clone()
        for key, _ in self._reward_parts():
            out[key] = no.to(torch.float32).reshape(-1, 1)

    @property
    def success_rule(self) -> str:
        """How an episode counts as a success: ``"flag"`` (the ``success`` output was set at
        one of its steps; tasks with :attr:`Task.has_success`), else the task's
        :attr:`Task.success_rule` (``"terminal_reward"`` or ``"none"``)."""
        return "flag" if self.task.has_success else self.task.success_rule

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            seed = random.SystemRandom().randrange(2**62)  # leaves torch's global RNG alone
        self._generator.manual_seed(int(seed))
        self._noop_gen.manual_seed(int(seed))
        if self.varied_starts:
            self._reset_cache = self._build_reset_cache()

    def _native_autoreset_set_invalid_next_observation(
        self, tensordict: TensorDictBase
    ) -> dict:
        # TorchRL's native auto-reset assumes the env already reset inside the done step and
        # blanks that step's observation. Ours resets on the NEXT step (deferred), so the
        # observation returned with done is the real final frame: keep it.
        return {}

    # ------------------------------------------------------------------ checkpoints
    _BOOKKEEPING = ("_pending", "_steps", "_episode_id", "_last_pixels", "_last_done",
                    "_start_pixels", "noop_frames")

    def _bookkeeping(self) -> tuple[str, ...]:
        """Names of the per-env tensors a checkpoint keeps (the colour ones with ``"color"``)."""
        return (self._BOOKKEEPING + (("_last_color", "_start_color") if self._color else ())
                + (("_frames",) if self.decision_watch else ()))

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The env mid-run, as tensors and plain values (loadable with ``weights_only=True``):
        the consoles (:meth:`GameBoy.save_state`), the per-env bookkeeping (pending deferred
        resets, step and episode counters, last frame), the task's buffers and the generators.

        :meth:`load_state_dict` puts an env built with the same settings back into that state, so
        a resumed run continues the same episodes instead of resetting every console.
        """
        st = self.gb.save_state()
        return {
            "console": {"version": st.version, "rom_sha256": st.rom_sha256,
                        "state_words": st.state_words, "arrays": dict(st.arrays),
                        "model": st.model},
            "env": {k: getattr(self, k).detach().to("cpu", copy=True) for k in self._bookkeeping()},
            "task": {k: v.detach().to("cpu", copy=True) for k, v in self.task.buffers.items()},
            "generator": self._generator.get_state(),
            "noop_generator": self._noop_gen.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any], *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Restore what :meth:`state_dict` returned."""
        from torchrl_dreamer.emulator.state import EmulatorState

        c = state["console"]
        self.gb.load_state(EmulatorState(c["version"], c["rom_sha256"], c["state_words"],
                                         dict(c["arrays"]), c.get("model", "dmg")))
        for k, v in state["env"].items():
            setattr(self, k, v.to(self.device))
        for k, v in state["task"].items():
            self.task.buffers[k].copy_(v.to(self.task.buffers[k].device))
        self._generator.set_state(state["generator"])
        self._noop_gen.set_state(state["noop_generator"])

    # ------------------------------------------------------------------ viewing
    def render(self, env: int | None = None) -> torch.Tensor:
        """RGB of the last observation, ``uint8[N, 72, 80, 3]`` (``[72, 80, 3]`` for one env).

        Use it with TorchRL's ``PixelRenderTransform(out_keys=["rgb"])`` + ``VideoRecorder``.
        """
        from torchrl_dreamer.emulator.packed2 import shades_to_rgb, unpack_packed2

        if self._color:
            rgb = self._last_color.permute(0, 2, 3, 1).contiguous()
            return rgb if env is None else rgb[env]
        rgb = shades_to_rgb(unpack_packed2(self._last_pixels).squeeze(-3), channels_last=True)
        return rgb if env is None else rgb[env]

    @property
    def episode_steps(self) -> torch.Tensor:
        """Steps taken in the current episode, ``int32[N]`` (0 at the reset step)."""
        return self._steps.clone()

    @property
    def episode_frames(self) -> torch.Tensor:
        """Game frames the current episode's steps ran, ``int64[N]`` (0 at the reset step):
        ``frame_skip`` a step, or each step's own count with a decision watch."""
        return self._frames.clone()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(task={self.task.name!r}, num_envs={self.num_envs}, "
            f"device={self.device}, actions={list(self.action_set.names)}, "
            f"frame_skip={self.frame_skip}, press_frames={self.press_frames}, "
            f"max_episode_steps={self.max_episode_steps or None}, pixels={self.pixels_format!r}"
            + (f", decision_watch={[hex(a) for a in self.decision_watch]}, "
               f"decision_max_frames={self.decision_max_frames}" if self.decision_watch else "")
            + ")"
        )

