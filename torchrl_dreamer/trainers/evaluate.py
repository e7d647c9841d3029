"""Evaluation: play episodes with a trained agent, report the success rate, write a GIF.

Each of ``episodes`` envs plays ONE episode from reset (the env's ``max_episode_steps`` bounds
it), with the player's greedy action by default. An episode is a success when it ends
``terminated`` with a positive last reward (maze: the exit is reached), or, for envs with
``success_rule = "truncated"`` (CartPole), when it reaches the time limit. One episode's frames
are written as an animated GIF (:func:`~torchrl_dreamer.trainers.gif.write_gif`): by default
the best one (a success first, then the highest return), so that the picture shows what the
agent can do, not env 0's luck; a long episode is shown every n-th step, at most
:data:`GIF_MAX_FRAMES` frames.

Example:
    An untrained agent on the shipped maze.

    >>> from torchrl_dreamer.envs import GameBoyEnv
    >>> from torchrl_dreamer.modules import make_dreamer
    >>> env = GameBoyEnv("maze", num_envs=2)
    >>> wm, actor, _ = make_dreamer("tiny", {"pixels": "packed2"}, env.action_spec.space.n)
    >>> result = evaluate(env, wm, actor, gif=getfixture("tmp_path") / "play.gif")
    >>> result.episodes, 0.0 <= result.success_rate <= 1.0, result.gif.endswith("play.gif")
    (2, True, True)

``evaluate_checkpoint("runs/dreamer", episodes=16, gif="play.gif")`` does the same for a
checkpoint (or a run directory's latest).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.collectors.protocols import FastStepEnv
from torchrl_dreamer.collectors.settings import EVAL_POLICIES

__all__ = ["EvalResult", "GIF_EPISODES", "GIF_MAX_FRAMES", "evaluate", "evaluate_checkpoint",
           "modules_from_checkpoint", "playback_config", "world_model_video_checkpoint"]

GIF_EPISODES = ("best", "first")
"""Which episode :func:`evaluate` draws: the best finished one (a success first, then the highest
return, then the lowest env index) or env 0's."""
GIF_MAX_FRAMES = 600
"""Frames a GIF holds at most: a longer episode is shown every n-th step (its last frame kept)."""
_GIF_MEMORY = 256 << 20
"""Bytes of frames kept while evaluating for the best-episode GIF; beyond it every k-th step."""


@dataclass
class EvalResult:
    """Outcome of :func:`evaluate`.

    Attributes:
        episodes: episodes finished. success_rate: fraction of them ending in success (NaN for
            tasks without a notion of success: ``success_rule == "none"``).
        mean_return, mean_length: over the finished episodes. These means, ``success_rate``
            and ``mean_score`` are NaN when no episode finished within the budget (see
            ``unfinished_returns``), never a 0 that reads as a measured failure.
        gif: the GIF written (or None).
        returns, lengths: per finished episode (env order; ``lengths`` counts env steps after
            reset).
        unfinished: episodes still running when the step or time budget ran out, with their
            partial returns in ``unfinished_returns`` (never mixed into the means).
        distinct: how many of the finished episodes differ (observations, step by step): a
            deterministic start replays one episode in every env.
        steps: env steps played (batched). wall_s: seconds the evaluation took.
        stopped_by: ``"done"`` (every episode ended), ``"max_steps"`` or ``"time_limit"``.
        gif_episode: the env whose episode the GIF shows (None without a GIF). gif_stride: the
            GIF shows every ``gif_stride``-th step of it.
        mean_score, scores: the game's own measure per finished episode and its mean, for an
            env with a ``score`` output (a task whose reward holds shaping or a bonus,
            :attr:`~torchrl_dreamer.envs.task.Task.has_score`); NaN and empty otherwise.
    """

    episodes: int
    success_rate: float
    mean_return: float
    mean_length: float
    returns: list[float]
    lengths: list[int]
    gif: str | None = None
    unfinished: int = 0
    unfinished_returns: list[float] = field(default_factory=list)
    distinct: int = 0
    steps: int = 0
    wall_s: float = 0.0
    stopped_by: str = "done"
    gif_episode: int | None = None
    gif_stride: int = 1
    mean_score: float = float("nan")
    scores: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (printed as JSON by the CLI)."""
        return asdict(self)


def _frame_hash(pixels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """int64 hash of each env's observation (wrapping arithmetic; collisions are negligible)."""
    flat = pixels.reshape(pixels.shape[0], -1).to("cpu", torch.int64)
    return (flat * weights[: flat.shape[1]]).sum(1)


@torch.no_grad()
def evaluate(
    env: Any,
    world_model: Any,
    actor: Any,
    *,
    greedy: bool = True,
    gif: str | Path | None = None,
    max_steps: int | None = None,
    time_limit: float | None = None,
    gif_fps: float = 8.0,
    progress: bool = False,
    gif_episode: str = "best",
) -> EvalResult:
    """Play one episode in each env of ``env`` (a ``GameBoyEnv`` or any env returning
    ``is_first``) with ``world_model`` + ``actor``, within a step and a time budget.

    Args:
        env: batched env; its ``batch_size[0]`` is the number of episodes.
        world_model, actor: trained modules (used in place, not copied).
        greedy: actor mode instead of samples.
        gif: write one episode's frames here (packed2 pixel envs only): ``gif_episode``
            ``"best"`` (default: a success first, then the highest return) or ``"first"``
            (env 0); at most :data:`GIF_MAX_FRAMES` frames (every n-th step of a long one).
        max_steps: steps an episode may last (default: the env's ``max_episode_steps`` + 1, or
            10k); episodes still running then count as unfinished.
        time_limit: seconds the evaluation may take (``None``: no bound); episodes still
            running then count as unfinished.
        progress: show a progress bar over the steps.
    """
    from torchrl_dreamer.modules import DreamerPlayer

    if gif_episode not in GIF_EPISODES:
        raise ValueError(f"gif_episode must be one of {list(GIF_EPISODES)}, got {gif_episode!r}")
    t0 = time.perf_counter()
    n = int(env.batch_size[0])
    rule = getattr(env, "success_rule", "terminal_reward")
    player = DreamerPlayer(world_model, actor, num_envs=n, greedy=greedy, share=True)
    model_device = next(world_model.parameters()).device
    keys = list(world_model.obs_keys)
    if max_steps is None:
        max_steps = (getattr(env, "max_episode_steps", 0) or 10_000) + 1
    td = env.reset()
    player.init_states()
    returns = torch.zeros(n, dtype=torch.float64)
    scores = torch.zeros(n, dtype=torch.float64)
    scored = "score" in td.keys()
    lengths = torch.zeros(n, dtype=torch.int64)
    done = torch.zeros(n, dtype=torch.bool)
    success = torch.zeros(n, dtype=torch.bool)
    weights = torch.randint(1, 2**31 - 1, (1 << 16,), generator=torch.Generator().manual_seed(7))
    trace = torch.zeros(n, dtype=torch.int64)
    packed = getattr(env, "pixels_format", None) == "packed2"
    record = gif is not None and packed
    shots: list[torch.Tensor] = []  # [n, ...] frames of every env (env 0's only for "first")
    shot_steps: list[int] = []
    keep = 1  # a shot every `keep` steps (and at every episode end)
    if record:
        first_frame = td.get("pixels").to("cpu")
        if gif_episode == "first":
            first_frame = first_frame[:1]
        per_step = first_frame[0].numel() * first_frame.shape[0]
        keep = 1 if gif_episode == "first" else max(1, math.ceil(max_steps * per_step / _GIF_MEMORY))
        shots.append(first_frame)
        shot_steps.append(0)
    stopped_by, steps = "max_steps", 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_steps, unit="step", desc="evaluate", dynamic_ncols=True)
    for _ in range(max_steps):
        if bool(done.all()):
            stopped_by = "done"
            break
        if time_limit is not None and time.perf_counter() - t0 >= time_limit:
            stopped_by = "time_limit"
            break
        first = td.get("is_first").reshape(n).bool().to(model_device)
        # an env on another device than the model (a hybrid run): frames in, actions out
        action = player.act({k: td.get(k).to(model_device) for k in keys}, first)
        action = action.to(env.device)
        if isinstance(env, FastStepEnv):
            td = env.fast_step(action)
        else:
            step = td.select(*keys).set("action", action)
            td = env.step(step).get("next")
        steps += 1
        if bar is not None:
            bar.update(1)
        reward = td.get("reward").reshape(n).to("cpu", torch.float64)
        term = td.get("terminated").reshape(n).to("cpu").bool()
        trunc = td.get("truncated").reshape(n).to("cpu").bool()
        live = ~done
        returns += torch.where(live, reward, torch.zeros_like(reward))
        if scored:
            score = td.get("score").reshape(n).to("cpu", torch.float64)
            scores += torch.where(live, score, torch.zeros_like(score))
        lengths += live.long()
        obs = td.get(keys[0])
        trace = torch.where(live, trace * 1_000_003 + _frame_hash(obs, weights), trace)
        ended = live & (term | trunc)
        if rule == "truncated":
            success |= ended & trunc & ~term
        elif rule == "flag":
            success |= live & td.get("success").reshape(n).to("cpu").bool()
        elif rule == "terminal_reward":
            success |= ended & term & (reward > 0)
        drawn = live[0] if gif_episode == "first" else live.any()  # an episode still drawable
        if record and bool(drawn) and (steps % keep == 0 or bool(ended.any())):
            frame = td.get("pixels")
            shots.append((frame[:1] if gif_episode == "first" else frame).to("cpu"))
            shot_steps.append(steps)
        done |= ended
    else:
        stopped_by = "done" if bool(done.all()) else "max_steps"
    if bar is not None:
        bar.close()
    written, shown, stride = None, None, 1
    if gif is not None and shots:
        from torchrl_dreamer.emulator.packed2 import unpack_packed2
        from torchrl_dreamer.trainers.gif import write_gif

        shown = 0 if gif_episode == "first" else _best_episode(returns, success, done)
        last = int(lengths[shown])  # its frames from reset to its final one
        frames = [f[shown] for f, t in zip(shots, shot_steps, strict=True) if t <= last]
        stride = max(1, math.ceil(len(frames) / GIF_MAX_FRAMES))
        frames = frames[::stride] if (len(frames) - 1) % stride == 0 else \
            frames[::stride] + frames[-1:]
        stride *= keep
        shades = unpack_packed2(torch.stack(frames)).squeeze(1)
        if str(gif).lower().endswith(".mp4"):
            from torchrl_dreamer.trainers.video import write_video

            written = str(write_video(gif, shades.to(torch.uint8), fps=gif_fps, scale=2))
        else:
            written = str(write_gif(gif, shades, fps=gif_fps, scale=2))
    fin = done
    k = int(done.sum())
    nan = float("nan")  # the means of no finished episode: unknown, not 0
    rate = nan if rule == "none" or k == 0 else float(success[fin].float().sum()) / k
    return EvalResult(
        episodes=k,
        success_rate=rate,
        mean_return=float(returns[fin].sum()) / k if k else nan,
        mean_length=float(lengths[fin].float().sum()) / k if k else nan,
        returns=[float(r) for r in returns[fin]],
        lengths=[int(x) for x in lengths[fin]],
        gif=written,
        unfinished=int((~done).sum()),
        unfinished_returns=[float(r) for r in returns[~done]],
        distinct=len(set(trace[fin].tolist())),
        steps=steps,
        wall_s=time.perf_counter() - t0,
        stopped_by=stopped_by,
        gif_episode=shown,
        gif_stride=stride,
        mean_score=float(scores[fin].sum()) / k if scored and k else nan,
        scores=[float(x) for x in scores[fin]] if scored else [],
    )


def _best_episode(returns: torch.Tensor, success: torch.Tensor, done: torch.Tensor) -> int:
    """The env whose episode a GIF shows: among the finished ones (all if none finished) a
    success first, then the highest return, then the lowest index.

    Example:
        >>> _best_episode(torch.tensor([1.0, 5.0, 3.0]), torch.tensor([False, False, True]),
        ...               torch.tensor([True, True, True]))
        2
        >>> _best_episode(torch.tensor([1.0, 5.0, 3.0]), torch.zeros(3, dtype=torch.bool),
        ...               torch.tensor([True, False, True]))
        2
    """
    pool = done if bool(done.any()) else torch.ones_like(done)
    key = returns.double() + success.double() * (returns.abs().max().double() * 2 + 1)
    key = torch.where(pool, key, torch.full_like(key, -math.inf))
    return int(torch.nonzero(key == key.max())[0])


def modules_from_checkpoint(state: dict[str, Any], env: Any, device: str | torch.device = "cpu",
                            *, critic: bool = False, weights: str = "last"):
    """Rebuild ``(world_model, actor)`` of a checkpoint's config for ``env`` and load weights;
    with ``critic=True``, ``(world_model, actor, critic)`` (for probes of what the agent
    values, e.g. ``examples/reward_probe.py``). ``weights="best"`` loads the world model's and
    actor's weights the run kept for its best window of training episodes
    (``eval_policy="best"``, :class:`~torchrl_dreamer.trainers.BestPolicy`) instead of the
    checkpoint's last ones.

    Raises:
        CheckpointError: ``weights="best"`` on a checkpoint that kept none.
    """
    from torchrl_dreamer.modules import make_dreamer
    from torchrl_dreamer.trainers.builder import obs_spec_of
    from torchrl_dreamer.trainers.checkpoint import CheckpointError

    if weights not in EVAL_POLICIES:
        raise ValueError(f"weights must be one of {EVAL_POLICIES}, got {weights!r}")
    kept: dict[str, Any] = {}
    if weights == "best":
        kept = (state.get("best_policy") or {}).get("state") or {}
        if not kept:
            raise CheckpointError(
                "this checkpoint kept no best weights: they are kept by runs trained with "
                "--eval-policy best once a window of training episodes is full; evaluate its "
                "last weights (--policy last) instead.")
    cfg = state["config"]
    mods = make_dreamer(cfg["preset"], obs_spec_of(env), int(env.action_spec.space.n))
    mods = mods if critic else mods[:2]
    sd = state["learner"]
    for name, mod in zip(("world_model", "actor", "critic"), mods):
        prefix = f"{name}."
        mod.load_state_dict(kept[name] if name in kept else
                            {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)})
    return tuple(mod.to(device).eval() for mod in mods)


def playback_config(state: dict[str, Any], seed: int, device: str | None = None):
    """A checkpoint's run config for playing its agent again: ``seed`` in place of the run's,
    no progress bar, and ``device`` in place of the run's where given (the
    :class:`~torchrl_dreamer.trainers.TrainConfig` that evaluations and probes build their env
    and modules from)."""
    from torchrl_dreamer.trainers.config import TrainConfig

    overrides = {"seed": seed, "progress": False}
    if device is not None:
        overrides["device"] = device
    return TrainConfig.from_dict({**state["config"], **overrides})


def evaluate_checkpoint(
    checkpoint: str | Path,
    episodes: int = 16,
    *,
    gif: str | Path | None = None,
    device: str | None = None,
    greedy: bool = True,
    seed: int = 1234,
    max_steps: int | None = None,
    time_limit: str | float | None = None,
    gif_episode: str = "best",
    weights: str = "last",
) -> EvalResult:
    """Load a checkpoint (or a run directory's latest) and :func:`evaluate` it on its task, its
    episodes bounded by ``max_steps`` and ``time_limit`` (seconds or ``90s``/``5m``; default: the
    run's ``eval_max_steps`` and ``eval_time_limit``); ``gif_episode`` as :func:`evaluate`'s;
    ``weights`` as :func:`modules_from_checkpoint`'s (``"best"``: the kept best window's)."""
    from torchrl_dreamer.trainers.builder import make_env
    from torchrl_dreamer.trainers.checkpoint import load_checkpoint, resolve_checkpoint
    from torchrl_dreamer.trainers.config import parse_duration

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    state = load_checkpoint(resolve_checkpoint(checkpoint))
    cfg = playback_config(state, seed, device)
    torch.manual_seed(seed)
    env = make_env(cfg, num_envs=episodes)
    wm, actor = modules_from_checkpoint(state, env, cfg.run.device, weights=weights)
    limit = parse_duration(time_limit, "time_limit") if time_limit is not None \
        else cfg.eval_time_limit_s
    return evaluate(env, wm, actor, greedy=greedy, gif=gif, time_limit=limit,
                    max_steps=max_steps if max_steps is not None else cfg.eval.max_steps,
                    gif_episode=gif_episode)


def world_model_video_checkpoint(
    checkpoint: str | Path,
    path: str | Path,
    *,
    sequences: int = 4,
    length: int = 48,
    context: int = 8,
    device: str | None = None,
    seed: int = 1234,
) -> Path:
    """Write the world model's open-loop report of a checkpoint (see
    :func:`~torchrl_dreamer.trainers.video.open_loop_frames`): ``sequences`` env runs of
    ``length`` steps under uniformly random actions, stacked vertically, as MP4 (GIF fallback).

    Raises:
        CheckpointError: the checkpoint holds no world model (nothing to draw), its world model
            has no trained decoder (``representation="contrastive"``), or its task has no
            packed2 image observation.
    """
    from torchrl_dreamer.data.dreamer_inputs import rssm_inputs
    from torchrl_dreamer.objectives import trains_decoder
    from torchrl_dreamer.trainers.builder import make_env
    from torchrl_dreamer.trainers.checkpoint import (
        CheckpointError,
        load_checkpoint,
        resolve_checkpoint,
    )
    from torchrl_dreamer.trainers.video import open_loop_frames, write_video

    if length < 2 or not 1 <= context <= length or sequences < 1:
        raise ValueError(f"need sequences >= 1, length >= 2 and 1 <= context <= length; got "
                         f"{sequences}, {length}, {context}")
    ckpt = resolve_checkpoint(checkpoint)
    state = load_checkpoint(ckpt)
    if not any(k.startswith("world_model.") for k in state.get("learner", {})):
        raise CheckpointError(f"{ckpt} holds no world model weights: a world-model video needs a "
                              "Dreamer checkpoint written by the trainer")
    cfg = playback_config(state, seed, device)
    if not trains_decoder(cfg.loss.representation):
        raise CheckpointError(f"{ckpt} was trained with representation="
                              f"{cfg.loss.representation!r}: its decoder was never trained, so "
                              "it has no reconstructions to draw")
    env = make_env(cfg, num_envs=sequences)
    if getattr(env, "pixels_format", None) != "packed2":
        raise CheckpointError(f"task {cfg.env.task!r} has no packed2 pixels: nothing to draw")
    wm, _ = modules_from_checkpoint(state, env, cfg.run.device)
    g = torch.Generator().manual_seed(seed)
    n_act = int(env.action_spec.space.n)
    keys = list(wm.obs_keys)  # pixels and any other observation (a task's RAM vectors)
    td = env.reset()
    obs, firsts, actions = [td.select(*keys)], [td.get("is_first").reshape(-1)], []
    for _ in range(length - 1):
        a = torch.randint(0, n_act, (sequences,), generator=g)
        td = env.step(td.select(*keys).set("action", a.to(env.device))).get("next")
        obs.append(td.select(*keys))
        firsts.append(td.get("is_first").reshape(-1))
        actions.append(a)
    actions.append(torch.zeros_like(a))  # the last row's action: no step consumes it
    dev = torch.device(cfg.run.device)
    prev_action, is_first = rssm_inputs(torch.stack(actions).to(dev),
                                        torch.stack(firsts).to(dev), n_act)
    seq = torch.stack(obs).to(dev)  # [T, B]
    frames = open_loop_frames(wm, seq.get("pixels"), prev_action, is_first, context=context,
                              others={k: seq.get(k) for k in keys if k != "pixels"})
    return write_video(path, torch.cat(list(frames), 1))  # sequences stacked vertically
