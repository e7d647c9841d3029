"""The composition root: every part of a Dreamer run from a :class:`TrainConfig`, local or on Ray.

:class:`RunFactories` builds each part (env, replay, networks, learner, player, collector);
:func:`build_run` composes them. With ``backend="ray"`` the collector is a
:class:`~torchrl_dreamer.distributed.RayCollector` whose runners build their envs and players
with the same (picklable) factories, and the learner is the one built here, so
:class:`~torchrl_dreamer.trainers.DreamerTrainer` checkpoints, resumes and evaluates a Ray run
like a local one. ``examples/pipeline.py`` shows the same parts wired by hand. Any batched
TorchRL env that marks reset observations with ``is_first`` (deferred reset) can replace the
Game Boy env: pass ``env=`` and ``obs=`` (see ``examples/cartpole.py``).

Example:
    Needs the shipped maze ROM and compiles the emulator kernel once.

    >>> cfg = TrainConfig(num_envs=4, total_steps=64, learning_starts=32, seq_len=8,
    ...                   batch_size=2, replay_capacity=256, log_dir=getfixture(
    ...                   "tmp_path").as_posix())
    >>> parts = build_run(cfg)
    >>> parts.collector.run()["policy_steps"]
    64.0
    >>> parts.collector.shutdown()
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.envs.task import BOOKKEEPING_KEYS
from torchrl_dreamer.trainers.config import ConfigError, TrainConfig

__all__ = ["RunFactories", "RunParts", "build_remote_run", "build_run", "check_spec_start",
           "demo_config_errors", "make_env", "obs_spec_of", "warn_press_only"]


@dataclass
class RunParts:
    """The built parts of one run (see :func:`build_run`). On Ray the envs, replay and players
    live in the runners and the replay service: ``env``, ``storage``, ``sampler`` and ``player``
    are ``None`` here."""

    config: TrainConfig
    env: Any
    storage: Any
    sampler: Any
    world_model: Any
    actor: Any
    critic: Any
    learner: Any
    player: Any
    collector: Any
    success_rule: str = "terminal_reward"


def make_env(cfg: TrainConfig, num_envs: int | None = None, **kwargs: Any) -> Any:
    """The env of ``cfg``: a :class:`~torchrl_dreamer.envs.GameBoyEnv` (task, ROM, device, frame
    skip) or, for ``task="gym:<id>"``, a :class:`~torchrl_dreamer.trainers.gym_env.DeferredResetGymEnv`.

    ``kwargs`` go to ``GameBoyEnv`` and override the config's (e.g. ``frame_skip=6``; a
    ``frame_skip`` given without ``press_frames`` takes ``GameBoyEnv``'s press default for it,
    not the config's press length). A missing ROM raises :class:`ConfigError` saying where it
    was looked for.
    """
    from torchrl_dreamer.envs import GameBoyEnv

    e, seed = cfg.env, cfg.run.seed  # the env section, and the run's seed
    if e.task.startswith("gym:"):
        from torchrl_dreamer.trainers.gym_env import DeferredResetGymEnv

        return DeferredResetGymEnv(e.task[4:], num_envs=num_envs or e.num_envs, seed=seed)

    task: Any = e.task
    rom = e.rom
    if e.task_spec is not None:
        from torchrl_dreamer.envs import load_task_spec

        task, rom = load_task_spec(e.task_spec, rom=e.rom), None
    opts = dict(rom=rom, frame_skip=e.frame_skip, press_frames=e.press_frames, noop_max=e.noop_max,
                seed=seed, ppu=e.ppu)
    if e.console is not None:
        opts["model"] = e.console
    if e.workers > 1:
        opts["workers"] = e.workers
    if "frame_skip" in kwargs and "press_frames" not in kwargs:
        opts.pop("press_frames")  # the config's press length belongs to the config's step
    opts.update(kwargs)
    try:
        return GameBoyEnv(task, num_envs=num_envs or e.num_envs, device=cfg.consoles_device,
                          **opts)
    except FileNotFoundError as err:
        raise ConfigError(f"{err}. Pass --rom PATH to a ROM you own.") from err


@contextmanager
def demo_config_errors() -> Iterator[None]:
    """Report a bad ``--demos`` file as ``ConfigError("--demos: <the loader's message>")``: a
    missing or unreadable file, one recorded for another ROM, action set, frame skip, press
    length or task (:class:`~torchrl_dreamer.data.demonstrations.DemonstrationMismatchError`),
    or one lacking a field the replay stores. Both backends load ``--demos`` inside it, so a
    file is refused with the same words locally and on Ray."""
    from torchrl_dreamer.data.demonstrations import DemonstrationError

    try:
        yield
    except (DemonstrationError, FileNotFoundError) as err:
        raise ConfigError(f"--demos: {err}") from err


def check_spec_start(cfg: TrainConfig) -> None:
    """Refuse a task spec whose start state already ends an episode (every episode would last
    one step), before the run is built: the cheap part of ``spec_check``'s probe, one console
    per start variant (:func:`~torchrl_dreamer.envs.spec_check.check_start`), on the consoles'
    device (a hybrid run's CPU: probing on ``--device cuda`` would compile the emulator's CUDA
    module, minutes of NVRTC, for a run that never launches it)."""
    if cfg.env.task_spec is None:
        return
    from torchrl_dreamer.envs import load_task_spec
    from torchrl_dreamer.envs.spec_check import StartStateError, check_start

    task = load_task_spec(cfg.env.task_spec, rom=cfg.env.rom)
    try:
        check_start(task, frame_skip=cfg.env.frame_skip,
                    press_frames=cfg.env.press_frames,
                    device=cfg.consoles_device)
    except StartStateError as err:
        raise ConfigError(f"{err} Fix the spec's start or its terminate/truncate entries; "
                          f"python -m torchrl_dreamer.envs.spec_check {cfg.env.task_spec} --rom "
                          f"{cfg.env.rom} shows what happens.") from err
    if cfg.env.press_frames >= cfg.env.frame_skip:
        warn_press_only(task, cfg)


def warn_press_only(task: Any, cfg: TrainConfig) -> list[str]:
    """Warn, before a run whose steps hold their buttons to the end (``press_frames ==
    frame_skip``), about the actions the spec's game acts on only when pressed afresh in its
    start state (:func:`~torchrl_dreamer.envs.action_probe.probe_press_only`, one state): two
    steps that choose one press it once, and a greedy policy on an unchanged screen waits there
    (PostBot's editor, ``docs/writing_a_task.md``). Returns the actions named (empty: no
    warning)."""
    from torchrl_dreamer.envs import GameBoyEnv
    from torchrl_dreamer.envs.action_probe import probe_press_only

    env = GameBoyEnv(task, num_envs=1, device=cfg.consoles_device, frame_skip=cfg.env.frame_skip,
                     press_frames=cfg.env.press_frames, seed=0, start_pool=1)
    env.reset()
    names = [n for n, k in zip(env.action_set.names, probe_press_only(env, states=1), strict=True)
             if k > 0]
    if names:
        warnings.warn(
            f"task spec {cfg.env.task_spec}: actions {', '.join(names)} act on a press, not a "
            f"hold, in the start state, and each step holds its buttons for all its "
            f"{cfg.env.frame_skip} frames, so two steps that choose one press it once. If the "
            "game needs repeated presses there, release them in each step: --press-frames "
            f"{max(1, cfg.env.frame_skip // 2)} (or the spec's train: press_frames).",
            stacklevel=2)
    return names


def obs_spec_of(env: Any) -> dict[str, Any]:
    """World-model observation kinds from the env's specs: packed2 / image / vector per key.

    Every other observation leaf must be one the world model can encode: packed2 ``pixels``, an
    image ``[C, H, W]`` or a float vector ``[D]``. Anything else (an integer or bool vector, a
    scalar, a 2-D grid) raises :class:`ConfigError` naming the key, its shape and dtype, instead
    of training without it.
    """
    out: dict[str, Any] = {}
    for key, spec in env.observation_spec.items(include_nested=False, leaves_only=True):
        if key in BOOKKEEPING_KEYS:  # not world-model inputs (success, score: stored apart)
            continue
        shape = tuple(spec.shape[len(env.batch_size):])
        if getattr(env, "pixels_format", None) == "packed2" and key == "pixels":
            out[key] = "packed2"
        elif len(shape) == 3:
            out[key] = ("image", shape)
        elif len(shape) == 1 and spec.dtype.is_floating_point:
            out[key] = ("vector", shape[0])
        else:
            hint = (" (cast an integer or bool vector to float first, e.g. with TorchRL's "
                    "DTypeCastTransform)" if len(shape) == 1 else "")
            raise ConfigError(
                f"observation {key!r} of shape {list(shape)} and dtype {spec.dtype} is not a "
                "world-model input: supported are packed2 'pixels', images [C, H, W] and float "
                f"vectors [D]{hint}"
            )
    if not out:
        raise ConfigError(f"no usable observation in the env's specs: {env.observation_spec}")
    return out


@dataclass
class RunFactories:
    """Builds each part of the run of ``config``; picklable, so Ray ships it to the runners.

    Args:
        config: the run's settings (a Ray runner gets a copy whose ``num_envs`` is its share).
        obs: world-model observation kinds (default: read from the env's specs).
        action_dim: actions of the env (default: read from the env's action spec).
    """

    config: TrainConfig
    obs: dict[str, Any] | None = None
    action_dim: int | None = None

    def env(self, num_envs: int | None = None) -> Any:
        """The run's env (:func:`make_env`)."""
        return make_env(self.config, num_envs=num_envs)

    def with_env(self, env: Any) -> RunFactories:
        """A copy that knows ``env``'s observation kinds and action count."""
        obs = self.obs if self.obs is not None else obs_spec_of(env)
        n = self.action_dim if self.action_dim is not None else int(env.action_spec.space.n)
        return replace(self, obs=obs, action_dim=n)

    def networks(self) -> tuple[Any, Any, Any]:
        """``(world_model, actor, critic)`` of the preset, on the run's device."""
        from torchrl_dreamer.modules import make_dreamer

        if self.obs is None or self.action_dim is None:
            raise ValueError("RunFactories.networks needs obs and action_dim: use with_env(env).")
        dev = torch.device(self.config.run.device)
        return tuple(m.to(dev) for m in make_dreamer(self.config.model.preset, self.obs,
                                                      self.action_dim))

    def learner(self, world_model: Any, actor: Any, critic: Any) -> Any:
        """The :class:`~torchrl_dreamer.objectives.DreamerV3Learner` of the run's loss settings."""
        from torchrl_dreamer.collectors.config import precision_dtype
        from torchrl_dreamer.objectives import WORLD_MODEL_LOSSES, DreamerV3Learner

        cfg, learner = self.config, self.config.learner
        return DreamerV3Learner(world_model, actor, critic, cfg.loss_config(),
                                optim=cfg.learner_config(),
                                world_model_loss_cls=WORLD_MODEL_LOSSES[cfg.loss.representation],
                                autocast_dtype=precision_dtype(learner.precision),
                                compile=learner.compile, capture=learner.capture,
                                strict=learner.strict_acceleration)

    @staticmethod
    def player(world_model: Any, actor: Any, env: Any) -> Any:
        """The :class:`~torchrl_dreamer.modules.DreamerPlayer` acting in ``env``."""
        from torchrl_dreamer.modules import DreamerPlayer

        return DreamerPlayer(world_model, actor, num_envs=int(env.batch_size[0]))

    def policy(self, env: Any) -> Any:
        """A player with its own networks for ``env`` (a Ray runner's policy; its weights come
        from the learner's publications)."""
        wm, actor, _ = self.with_env(env).networks()
        return self.player(wm, actor, env)

    def replay(self, env: Any) -> tuple[Any, Any]:
        """``(storage, sampler)``: the time-major ring for ``env``'s observations and the
        chronological sequence sampler."""
        from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema
        from torchrl_dreamer.data.schema import FieldSpec

        cfg = self.config
        schema = dreamer_schema()
        del schema["pixels"]
        for key in self.with_env(env).obs:
            spec = env.observation_spec[key]
            schema[key] = FieldSpec(tuple(spec.shape[1:]), spec.dtype)
        if getattr(env, "success_rule", None) == "flag":  # the task says which episodes succeed
            schema["success"] = FieldSpec((), torch.bool)
        if "score" in env.observation_spec.keys():  # the game's measure beside a shaped reward
            schema["score"] = FieldSpec((), torch.float32)
        if "bonus" in env.observation_spec.keys():  # the exploration bonus, weighed apart
            schema["bonus"] = FieldSpec((), torch.float32)
        elif cfg.loss.bonus_final is not None:
            raise ConfigError(
                f"bonus_final={cfg.loss.bonus_final} weighs an exploration bonus, but task "
                f"{cfg.env.task!r} pays none (a task spec's exploration: section adds one); "
                "unset bonus_final or add the bonus.")
        replay, run = cfg.replay, cfg.run
        memmap = Path(run.log_dir) / "replay_ring" if replay.backing == "memmap" else None
        storage = TimeMajorStorage(cfg.capacity_rows, int(env.batch_size[0]), spec=schema,
                                   device=torch.device(run.device), memmap_dir=memmap,
                                   safety_margin=replay.seq_len, auto_commit=False)
        sampler = ChronologicalSliceSampler(
            slice_len=replay.seq_len, generator=torch.Generator().manual_seed(run.seed),
            event_key=replay.event_key if replay.event_fraction else None,
            event_fraction=replay.event_fraction,
        )
        return storage, sampler


def build_remote_run(f: RunFactories, remote: Any, logger: Any = None) -> RunParts:
    """The composition of a run whose envs, players and replay live in other processes
    (``backend="ray"``): the same factories as a local run, for the specs of a one-env probe,
    the networks and the learner here, and the runners (each with ``num_envs`` of
    ``remote.envs_per_runner``); ``remote`` (a
    :class:`~torchrl_dreamer.collectors.remote.RemoteCollection`, e.g. the one
    :mod:`torchrl_dreamer.distributed` registers) builds the collector that drives them.

    With ``demos`` the files are read and checked against the probe by the backend, inside
    :func:`demo_config_errors` (the local path's words for a bad file), before any actor
    starts."""
    cfg = f.config
    probe = f.env(num_envs=1)
    try:
        f = f.with_env(probe)
        rule = getattr(probe, "success_rule", "terminal_reward")
        demos = None
        if cfg.replay.demos:
            with demo_config_errors():
                demos = remote.load_demonstrations(cfg.demo_paths, probe)
    finally:
        probe.close()
    wm, actor, critic = f.networks()
    learner = f.learner(wm, actor, critic)
    runner_f = replace(f, config=cfg.with_(num_envs=remote.envs_per_runner(cfg)))
    collector = remote.collector(cfg, runner_f.env, runner_f.policy, learner, logger=logger,
                                 demonstrations=demos)
    return RunParts(cfg, None, None, None, wm, actor, critic, learner, None, collector, rule)


def build_run(
    cfg: TrainConfig,
    *,
    env: Any = None,
    obs: dict[str, Any] | None = None,
    logger: Any = None,
    action_dim: int | None = None,
) -> RunParts:
    """Build env (unless given), replay, networks, learner, player and collector for ``cfg``.

    ``backend="ray"``: the learner here, the envs, players and replay in Ray actors
    (:func:`build_remote_run` with the
    :class:`~torchrl_dreamer.collectors.remote.RemoteCollection` that importing
    :mod:`torchrl_dreamer.distributed` registers: a
    :class:`~torchrl_dreamer.distributed.RayCollector` configured by
    :func:`~torchrl_dreamer.distributed.ray_config`).
    """
    from torchrl_dreamer.collectors import AsyncDreamerCollector
    from torchrl_dreamer.collectors.remote import remote_collection

    torch.manual_seed(cfg.run.seed)
    if env is None:
        check_spec_start(cfg)
    f = RunFactories(cfg, obs, action_dim)
    remote = remote_collection(cfg.collector.backend)
    if remote is not None:
        return build_remote_run(f, remote, logger)
    if cfg.collector.backend == "ray":
        raise ConfigError(
            "--backend ray needs the Ray composition of torchrl_dreamer.distributed: import "
            "torchrl_dreamer.distributed before building the run (the training CLI does) and "
            "install ray, or use --backend reference/threaded/cuda."
        )
    if env is None:
        env = f.env()
    f = f.with_env(env)
    storage, sampler = f.replay(env)
    if cfg.replay.demos:
        from torchrl_dreamer.data.demonstrations import attach_demonstrations

        with demo_config_errors():
            storage, sampler = attach_demonstrations(storage, sampler, cfg.demo_paths,
                                                     share=cfg.replay.demo_share, env=env)
    wm, actor, critic = f.networks()
    learner = f.learner(wm, actor, critic)
    player = f.player(wm, actor, env)
    collector = AsyncDreamerCollector(
        env, storage, sampler, player, learner, cfg.collector_config(),
        total_frames=cfg.run.total_steps, logger=logger,
        bundle_dir=Path(cfg.run.log_dir) / "failures",
    )
    return RunParts(cfg, env, storage, sampler, wm, actor, critic, learner, player, collector,
                    getattr(env, "success_rule", "terminal_reward"))
