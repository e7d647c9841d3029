"""``DreamerTrainer``: runs a :class:`TrainConfig` end to end (progress bar, logs, checkpoints,
resume, final evaluation).

The collector does the actual actor/learner work: an
:class:`~torchrl_dreamer.collectors.AsyncDreamerCollector` for the local backends, a
:class:`~torchrl_dreamer.distributed.RayCollector` for ``backend="ray"``; both are a
:class:`RunCollector`. The trainer runs it in *chunks* of ``checkpoint_every`` policy steps.
Locally each chunk ends with every owed gradient step taken and the actor stopped, so the
checkpoint written between chunks is a consistent cut (models, optimizers, schedule, RNG, env,
replay); resuming from it continues the same run. On Ray the runners keep stepping while the
checkpoint is written (the replay service snapshots itself atomically). Between the collector's metric yields the trainer reads the
newly committed replay rows for episode returns and successes (:class:`EpisodeTracker`), updates
the tqdm bar (env steps/s, achieved replay ratio, recent return / success) and logs to CSV /
TensorBoard through TorchRL's loggers.

Example:
    Needs the shipped maze ROM and compiles the emulator kernel once.

    >>> cfg = TrainConfig(task="maze", num_envs=4, total_steps=64, learning_starts=32,
    ...                   seq_len=8, batch_size=2, replay_capacity=256, log_dir=getfixture(
    ...                   "tmp_path").as_posix(), progress=False, logger="none")
    >>> trainer = DreamerTrainer(cfg, quiet=True)
    >>> row = trainer.train()
    >>> row["policy_steps"], row["updates"] > 0
    (64.0, True)
    >>> trainer.close()
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import torch

from torchrl_dreamer.trainers.best_policy import (
    BestPolicy,
    clearly_ahead,
    load_snapshot,
    snapshot,
    window_stats,
)
from torchrl_dreamer.trainers.builder import RunParts, build_run
from torchrl_dreamer.trainers.checkpoint import (
    CheckpointError,
    check_compatible,
    learner_state,
    load_checkpoint,
    load_learner_state,
    prune_replays,
    resolve_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from torchrl_dreamer.trainers.config import TrainConfig
from torchrl_dreamer.trainers.episodes import EpisodeTracker
from torchrl_dreamer.trainers.loggers import make_logger
from torchrl_dreamer.trainers.schedule import anneal, run_progress

__all__ = ["DUEL_SEED_OFFSET", "DreamerTrainer", "RunCollector"]

DUEL_SEED_OFFSET = 7919
"""Added to the run's seed for the env of ``eval_policy="best"``'s duel, so that its starts are
not the final evaluation's (which uses the run's seed)."""


class RunCollector(Protocol):
    """What :class:`DreamerTrainer` drives: collection and training up to ``total_frames``
    policy steps, and the collector's side of a checkpoint."""

    total_frames: int
    logger: Any

    @property
    def policy_steps(self) -> int: ...

    @property
    def updates(self) -> int: ...

    def iterator(self) -> Iterator[Any]:
        """Collect and train until ``total_frames``; yields metrics along the way."""

    def replay_ratio_actual(self) -> float: ...

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state_dict: Any, keep_schedule: bool = False) -> None: ...

    def env_state(self) -> dict[str, Any] | None:
        """The envs mid-run (``None``: they cannot be snapshotted and restart on resume)."""

    def load_env_state(self, state: dict[str, Any] | None) -> bool: ...

    def save_replay(self, path: Path) -> None: ...

    def load_replay(self, path: Path) -> None: ...

    def shutdown(self, close_env: bool = True) -> None: ...


def _fmt(x: float, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


class DreamerTrainer:
    """Train a Dreamer agent for ``config.total_steps`` policy steps.

    Args:
        config: the run's settings.
        parts: prebuilt parts (default: :func:`build_run` on ``config``; pass your own to train
            on another env, e.g. ``examples/cartpole.py``).
        resume: a checkpoint directory / run directory to continue from.
        quiet: no progress bar and no prints.
    """

    def __init__(self, config: TrainConfig, parts: RunParts | None = None,
                 resume: str | Path | None = None, quiet: bool = False) -> None:
        self.config = config
        self.run_dir = Path(config.run.log_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.quiet = quiet
        saved = None
        if resume is not None:
            ckpt = resolve_checkpoint(resume)
            saved = load_checkpoint(ckpt, map_location="cpu")
            check_compatible(saved["config"], config, saved.get("resolved"))
        self.logger = make_logger(config.run.logger, self.run_dir)
        if parts is None:
            parts = build_run(config, logger=self.logger)
        else:
            parts.collector.logger = self.logger
        self.parts = parts
        self.collector: RunCollector = parts.collector
        self.tracker = EpisodeTracker(config.env.num_envs, success_rule=parts.success_rule)
        self.best: BestPolicy | None = (BestPolicy(self.tracker.window)
                                        if config.eval.policy == "best" else None)
        """The weights of the best window of training episodes (``eval_policy="best"``)."""
        self.history: list[dict[str, float]] = []
        self.wall_s = 0.0
        self.created = time.perf_counter()
        self._deadline: float | None = None
        self.entropy_now: float | None = config.loss.entropy_coef
        """The entropy bonus's weight the learner uses now (``entropy_final``'s schedule)."""
        self.bonus_now: float = 1.0
        """The exploration bonus's weight in the learned reward now (``bonus_final``'s schedule)."""
        self.resumed_from: Path | None = None
        if saved is not None:
            self._restore(saved, ckpt)
        elif self.logger is not None:
            self.logger.log_hparams(config.to_dict())
        (self.run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=1))

    # ------------------------------------------------------------------ state
    @property
    def policy_steps(self) -> int:
        """Policy steps collected so far (env steps x envs)."""
        return int(self.collector.policy_steps)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the replay (see :mod:`~torchrl_dreamer.trainers.checkpoint`)."""
        p = self.parts
        return {
            "config": self.config.to_dict(),
            **learner_state(p.learner),  # learner, num_updates, optimizers
            "collector": self.collector.state_dict(),
            "tracker": self.tracker.state_dict(),
            "rng": rng_state(),
            "env": self.collector.env_state(),
            "history": [dict(h) for h in self.history],
            "wall_s": float(self.wall_s),
            **({} if self.best is None else {"best_policy": self.best.state_dict()}),
        }

    def save(self) -> Path:
        """Write a checkpoint at the current step; returns its directory."""
        path = self.run_dir / "checkpoints" / f"step_{self.policy_steps}"
        save_replay = self.collector.save_replay if self.config.run.checkpoint_replay else None
        save_checkpoint(path, self.state_dict(), save_replay)
        if save_replay is not None:
            prune_replays(path.parent, keep=path)  # only the latest replay serves a resume
        return path

    def _restore(self, saved: dict[str, Any], ckpt: Path) -> None:
        p = self.parts
        c = self.collector
        load_learner_state(p.learner, saved)
        has_replay = bool(saved.get("has_replay")) and (ckpt / "replay").is_dir()
        c.load_state_dict(saved["collector"], keep_schedule=not has_replay)
        if has_replay:
            try:
                c.load_replay(ckpt / "replay")
            except (ValueError, FileNotFoundError) as err:
                raise CheckpointError(
                    f"the replay in {ckpt} does not fit this run's replay ({err}); resume with "
                    "the checkpoint's replay settings or without its replay (delete "
                    f"{ckpt / 'replay'})."
                ) from err
            self.tracker.load_state_dict(saved["tracker"])
        else:
            warnings.warn(f"checkpoint {ckpt} has no replay: the run continues with an empty "
                          "replay (training resumes once the prefill is collected again).", stacklevel=2)
        if not c.load_env_state(saved.get("env")) and has_replay and p.storage is not None:
            self.tracker.next_t = p.storage.total_steps
        set_rng_state(saved["rng"])
        self.history = [dict(h) for h in saved.get("history", [])]
        self.wall_s = float(saved.get("wall_s", 0.0))
        if self.best is not None and "best_policy" in saved:
            self.best.load_state_dict(saved["best_policy"])
        self.resumed_from = ckpt

    # ------------------------------------------------------------------ loop
    def progress(self) -> float:
        """How far this training is, in ``[0, 1]``: policy steps of ``total_steps`` or the
        clock from the trainer's creation to the training deadline, whichever is further."""
        cfg = self.config
        return run_progress(self.policy_steps, cfg.run.total_steps if cfg.steps_bounded else None,
                            time.perf_counter(), self.created, self._deadline)

    def _apply_schedules(self) -> None:
        """Set the scheduled settings (``entropy_final``, ``bonus_final``) for the run's
        progress now."""
        cfg = self.config
        if cfg.loss.entropy_final is None and cfg.loss.bonus_final is None:
            return
        progress = self.progress()
        loss = getattr(self.parts.learner, "actor_loss", None)
        if (cfg.loss.entropy_final is not None and loss is not None
                and hasattr(loss, "set_entropy_coef")):
            self.entropy_now = anneal(float(cfg.loss.entropy_coef), float(cfg.loss.entropy_final),
                                      progress)
            loss.set_entropy_coef(self.entropy_now)
        loss = getattr(self.parts.learner, "world_model_loss", None)
        if (cfg.loss.bonus_final is not None and loss is not None
                and hasattr(loss, "set_bonus_weight")):
            self.bonus_now = anneal(1.0, float(cfg.loss.bonus_final), progress)
            loss.set_bonus_weight(self.bonus_now)

    def _record(self, bar: Any, t_start: float, steps0: int, t_chunk: float) -> dict[str, float]:
        c = self.collector
        episodes = []
        if self.parts.storage is not None:
            # on the cuda backend, committed rows are complete only in the actor stream's order
            readable = getattr(c, "readable_committed_t", None)
            episodes = self.tracker.update(self.parts.storage,
                                           upto=readable() if readable is not None else None)
        if episodes and self.best is not None:
            self.best.observe(self._window(), self.tracker.episodes, self.policy_steps,
                              self.acting_modules())
        scores = self.tracker.last_scores
        for k, (ret, length, ok) in enumerate(episodes):
            if self.logger is not None:
                m = {"episode/return": ret, "episode/length": length}
                if self.tracker.success_rule != "none":
                    m["episode/success"] = float(ok)
                if scores:  # the game's own measure, where the reward is shaped
                    m["episode/score"] = scores[k]
                self.logger.log_metrics(m, step=self.policy_steps)
        rec = self.tracker.recent()
        now = time.perf_counter()
        row = {
            "policy_steps": float(self.policy_steps),
            "updates": float(c.updates),
            "wall_s": self.wall_s + (now - t_chunk),
            "steps_per_s": (self.policy_steps - steps0) / max(1e-9, now - t_start),
            "replay_ratio": c.replay_ratio_actual(),
            "return": rec["return"],
            "success": rec["success"],
            "episodes": rec["episodes"],
        }
        if "score" in rec:  # the game's own measure, where the reward is shaped
            row["score"] = rec["score"]
        if self.config.loss.entropy_final is not None:
            row["entropy_coef"] = self.entropy_now
        if self.config.loss.bonus_final is not None:
            row["bonus_weight"] = self.bonus_now
        if self.best is not None and math.isfinite(self.best.mean):
            row["best_window_return"] = self.best.mean  # what eval_policy="best" would play
        if bar is not None:
            bar.n = min(self.policy_steps, self.config.run.total_steps)
            left = ("" if self._deadline is None
                    else f" left={max(0.0, self._deadline - now) / 60:.1f}m")
            bar.set_postfix_str(
                f"sps={row['steps_per_s']:.0f} rr={row['replay_ratio']:.3f} "
                f"ret={_fmt(rec['return'])}"
                + ("" if "score" not in rec else f" score={_fmt(rec['score'])}")
                + f" succ={_fmt(rec['success'])} upd={c.updates}{left}",
                refresh=False)
            bar.refresh()
        return row

    def train(self, deadline: float | None = None) -> dict[str, float]:
        """Collect and train until ``total_steps`` or ``deadline``; checkpoint every
        ``checkpoint_every`` and at the end.

        Args:
            deadline: ``time.perf_counter()`` value at which to stop (default: the config's
                ``time_limit`` counted from the trainer's creation, less the evaluation's
                reserve: :meth:`TrainConfig.training_deadline`). The collector stops at its next
                metrics yield past it (``log_every`` updates), finishing its window.

        Returns the last progress row (steps, updates, wall time, recent return / success).
        """
        cfg, c = self.config, self.collector
        if deadline is None:
            deadline = cfg.training_deadline(self.created)
        bar = None
        if cfg.run.progress and not self.quiet:
            from tqdm.auto import tqdm

            total = cfg.run.total_steps if cfg.steps_bounded else None
            bar = tqdm(total=total, initial=min(self.policy_steps, cfg.run.total_steps),
                       unit="step", dynamic_ncols=True, desc=f"dreamer {cfg.env.task}")
        self._deadline = deadline
        t_start = t_chunk = time.perf_counter()
        steps0 = self.policy_steps
        every = cfg.run.checkpoint_every or cfg.run.total_steps
        vevery = cfg.run.video_every or cfg.run.total_steps
        next_ckpt = (self.policy_steps // every + 1) * every
        next_video = (self.policy_steps // vevery + 1) * vevery
        row: dict[str, float] = {}
        out_of_time = False
        try:
            while self.policy_steps < cfg.run.total_steps and not out_of_time:
                target = min(cfg.run.total_steps, next_ckpt, next_video)
                c.total_frames = target
                self._apply_schedules()
                for _ in c.iterator():
                    row = self._record(bar, t_start, steps0, t_chunk)
                    self._apply_schedules()
                    if deadline is not None and time.perf_counter() >= deadline:
                        out_of_time = True
                        c.total_frames = min(c.total_frames, self.policy_steps)
                row = self._record(bar, t_start, steps0, t_chunk)
                out_of_time |= deadline is not None and time.perf_counter() >= deadline
                now = time.perf_counter()
                self.wall_s += now - t_chunk
                t_chunk = now
                self.history.append(row)
                if self.logger is not None:
                    self.logger.log_metrics({f"progress/{k}": v for k, v in row.items()
                                             if not math.isnan(v)}, step=self.policy_steps)
                if cfg.run.video_every and self.policy_steps >= next_video:
                    self.write_video()
                    next_video = (self.policy_steps // vevery + 1) * vevery
                if (cfg.run.checkpoint_every and self.policy_steps >= next_ckpt) \
                        or self.policy_steps >= cfg.run.total_steps or out_of_time:
                    self.save()
                    next_ckpt = (self.policy_steps // every + 1) * every
        finally:
            if bar is not None:
                bar.close()
            c.shutdown(close_env=False)
        (self.run_dir / "progress.json").write_text(json.dumps(self.history, indent=1))
        return row

    def acting_modules(self) -> dict[str, torch.nn.Module]:
        """The modules a policy acts with (what :class:`BestPolicy` keeps)."""
        return {"world_model": self.parts.world_model, "actor": self.parts.actor}

    def _window(self) -> list[float]:
        """What :class:`BestPolicy` ranks: the last finished episodes' game score where the
        task has one (a shaped reward's return is not the game's measure), else their return."""
        t = self.tracker
        return list(t.recent_scores) if t.recent_scores else [e[0] for e in t.recent_eps]

    def choose_eval_policy(self, play: Callable[[], list[float]] | None = None
                           ) -> dict[str, float]:
        """Load the weights the final evaluation should play (``eval_policy``) and say which.

        ``eval_policy_step`` is the policy step of the weights played: this run's last one,
        or with ``eval_policy="best"`` the kept window's when they are a candidate
        (:meth:`BestPolicy.candidate`) and win the duel: ``play`` (default
        :meth:`duel_play`: ``eval_duel_episodes`` greedy episodes) gives the per-episode values
        of the last weights, then of the kept ones, and the side clearly ahead
        (:func:`~torchrl_dreamer.trainers.best_policy.clearly_ahead`) is played; a duel within
        the noise leaves it to the windows (:meth:`BestPolicy.clearly_better`). The duel's means
        are reported as ``duel_last`` and ``duel_best``. Call after :meth:`train`: the modules'
        weights may be replaced (the last checkpoint keeps the last ones)."""
        out = {"eval_policy_step": float(self.policy_steps)}
        if self.best is None or not self.best.state:  # nothing kept (no full window yet)
            return out
        out.update(self.best.summary())
        window, episodes = self._window(), self.tracker.episodes
        if not self.best.candidate(window, episodes):
            return out
        play = play or self.duel_play
        modules = self.acting_modules()
        last = snapshot(modules)
        last_values = play()
        self.best.restore(modules)
        best_values = play()
        out["duel_last"] = window_stats(last_values)[0]  # NaN when no episode finished
        out["duel_best"] = window_stats(best_values)[0]
        if clearly_ahead(best_values, last_values) or (
                not clearly_ahead(last_values, best_values)
                and self.best.clearly_better(window, episodes)):
            out["eval_policy_step"] = float(self.best.step)
        else:
            load_snapshot(modules, last)
        return out

    def duel_play(self) -> list[float]:
        """One side of ``eval_policy="best"``'s duel: ``eval_duel_episodes`` greedy episodes of
        the acting modules as they are, in a fresh env whose seed differs from the final
        evaluation's, and with the same seed for the latent's samples: each call gets the same
        starts and draws, so the two sides differ by their weights only. Bounded by half of
        ``eval_time_limit``; returns each finished episode's game score where the task has
        one, else its return."""
        from torchrl_dreamer.trainers.builder import make_env
        from torchrl_dreamer.trainers.evaluate import evaluate

        cfg, p = self.config, self.parts
        seed = cfg.run.seed + DUEL_SEED_OFFSET
        env = make_env(cfg, num_envs=cfg.eval.duel_episodes, seed=seed)
        try:  # the latent's samples drawn the same way on each side too, the run's RNG untouched
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                res = evaluate(env, p.world_model, p.actor, greedy=True,
                               max_steps=cfg.eval.max_steps, time_limit=cfg.eval_time_limit_s / 2)
        finally:
            env.close()
        return list(res.scores) if res.scores else list(res.returns)

    def write_video(self) -> Path | None:
        """Write the world model's open-loop report on replay windows now (see
        :attr:`TrainConfig.video_every`); ``None`` when there is nothing to draw yet (replay
        shorter than a sequence) or this run has no local replay (Ray)."""
        from torchrl_dreamer.trainers.video import replay_open_loop, write_video

        p = self.parts
        if p.storage is None or "pixels" not in getattr(p.world_model, "decoders", {}):
            return None
        frames = replay_open_loop(p.world_model, p.storage, sequences=4, length=32, context=8,
                                  seed=self.config.run.seed + self.policy_steps)
        if frames is None:
            return None
        path = write_video(self.run_dir / "videos" / f"wm_step_{self.policy_steps}.mp4", frames)
        if self.logger is not None:
            self.logger.log_video("world_model/open_loop", frames, step=self.policy_steps)
        return path

    def close(self) -> None:
        """Stop the collector and close the env."""
        self.collector.shutdown(close_env=True)
