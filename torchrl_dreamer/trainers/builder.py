"""Build every part of a Dreamer run from a :class:`TrainConfig`: env, replay, networks, learner,
player and collector.

This is the composition the CLI runs; ``examples/pipeline.py`` shows the same parts wired by
hand. Any batched TorchRL env that marks reset observations with ``is_first`` (deferred reset)
can replace the Game Boy env: pass ``env=`` and ``obs=`` (see ``examples/cartpole.py``).

Example:
    >>> parts = build_run(TrainConfig(total_steps=512, num_envs=4))
    >>> parts.collector.run()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.trainers.config import ConfigError, TrainConfig

__all__ = ["RunParts", "build_run", "make_env", "obs_spec_of"]


@dataclass
class RunParts:
    """The built parts of one run (see :func:`build_run`)."""

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


def make_env(cfg: TrainConfig, num_envs: int | None = None, **kwargs: Any) -> Any:
    """The env of ``cfg``: a :class:`~torchrl_dreamer.envs.GameBoyEnv` (task, ROM, device, frame
    skip) or, for ``task="gym:<id>"``, a :class:`~torchrl_dreamer.trainers.gym_env.DeferredResetGymEnv`.

    A missing ROM raises :class:`ConfigError` saying where it was looked for.
    """
    from torchrl_dreamer.envs import GameBoyEnv

    if cfg.task.startswith("gym:"):
        from torchrl_dreamer.trainers.gym_env import DeferredResetGymEnv

        return DeferredResetGymEnv(cfg.task[4:], num_envs=num_envs or cfg.num_envs, seed=cfg.seed)

    try:
        return GameBoyEnv(cfg.task, num_envs=num_envs or cfg.num_envs, device=cfg.device,
                          rom=cfg.rom, frame_skip=cfg.frame_skip,
                          press_frames=min(8, cfg.frame_skip), seed=cfg.seed, **kwargs)
    except FileNotFoundError as err:
        raise ConfigError(f"{err}. Pass --rom PATH to a ROM you own.") from err


def obs_spec_of(env: Any) -> dict[str, Any]:
    """World-model observation kinds from the env's specs: packed2 / image / vector per key."""
    out: dict[str, Any] = {}
    skip = {"is_first", "episode_id"}
    for key, spec in env.observation_spec.items(include_nested=False, leaves_only=True):
        if key in skip:
            continue
        shape = tuple(spec.shape[len(env.batch_size):])
        if getattr(env, "pixels_format", None) == "packed2" and key == "pixels":
            out[key] = "packed2"
        elif len(shape) == 3:
            out[key] = ("image", shape)
        elif len(shape) == 1 and spec.dtype.is_floating_point:
            out[key] = ("vector", shape[0])
    if not out:
        raise ConfigError(f"no usable observation in the env's specs: {env.observation_spec}")
    return out


def build_run(
    cfg: TrainConfig,
    *,
    env: Any = None,
    obs: dict[str, Any] | None = None,
    logger: Any = None,
    action_dim: int | None = None,
) -> RunParts:
    """Build env (unless given), replay, networks, learner, player and collector for ``cfg``."""
    from torchrl_dreamer.collectors import AsyncCollectorConfig, AsyncDreamerCollector
    from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema
    from torchrl_dreamer.data.schema import FieldSpec
    from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
    from torchrl_dreamer.objectives import DreamerV3Learner

    torch.manual_seed(cfg.seed)
    if env is None:
        env = make_env(cfg)
    obs = obs if obs is not None else obs_spec_of(env)
    if action_dim is None:
        action_dim = int(env.action_spec.space.n)
    dev = torch.device(cfg.device)
    n = int(env.batch_size[0])
    # Replay fields: the env's observations + the Dreamer bookkeeping columns.
    schema = dreamer_schema()
    del schema["pixels"]
    for key in obs:
        spec = env.observation_spec[key]
        schema[key] = FieldSpec(tuple(spec.shape[1:]), spec.dtype)
    memmap = None
    if cfg.replay_backing == "memmap":
        memmap = Path(cfg.log_dir) / "replay_ring"
    storage = TimeMajorStorage(cfg.capacity_rows, n, spec=schema, device=dev, memmap_dir=memmap,
                               safety_margin=cfg.seq_len, auto_commit=False)
    sampler = ChronologicalSliceSampler(
        slice_len=cfg.seq_len, generator=torch.Generator().manual_seed(cfg.seed),
        event_key="terminated" if cfg.event_fraction else None,
        event_fraction=cfg.event_fraction,
    )
    wm, actor, critic = make_dreamer(cfg.preset, obs, action_dim)
    wm, actor, critic = wm.to(dev), actor.to(dev), critic.to(dev)
    ccfg = AsyncCollectorConfig(
        steps_per_rollout=cfg.steps_per_rollout, commit_stride=cfg.commit_stride,
        seq_len=cfg.seq_len, batch_size=cfg.batch_size,
        replay_ratio=cfg.effective_replay_ratio, learning_starts=cfg.effective_learning_starts,
        min_ready_steps=cfg.seq_len, safety_margin=cfg.seq_len, log_every=cfg.log_every,
        device=dev, precision=cfg.precision,
        backend=cfg.backend if cfg.backend != "ray" else "reference", seed=cfg.seed,
    )
    learner = DreamerV3Learner(wm, actor, critic, cfg.loss_config(),
                               autocast_dtype=None if cfg.precision == "fp32"
                               else ccfg.autocast_dtype)
    player = DreamerPlayer(wm, actor, num_envs=n)
    collector = AsyncDreamerCollector(
        env, storage, sampler, player, learner, ccfg, total_frames=cfg.total_steps,
        logger=logger, bundle_dir=Path(cfg.log_dir) / "failures",
    )
    return RunParts(cfg, env, storage, sampler, wm, actor, critic, learner, player, collector)
