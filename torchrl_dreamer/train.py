"""Command line of torchrl_dreamer: ``python -m torchrl_dreamer.train [train|eval|bench] ...``.

- ``train`` (the default when no sub-command is given): train a DreamerV3 agent on a task
  (default: the shipped maze, ``tiny`` preset) with a progress bar, CSV/TensorBoard logs,
  checkpoints every ``--checkpoint-every`` policy steps and a final evaluation + GIF;
  ``--resume [RUN_OR_CHECKPOINT]`` continues a run.
- ``eval``: play episodes with a checkpoint, print the success rate, write a GIF.
- ``bench``: run the benchmarks (``benchmarks/*.py --quick``), one JSON line per result.

Examples::

    python -m torchrl_dreamer.train --task maze --preset tiny --total-steps 2000
    python -m torchrl_dreamer.train --log-dir runs/maze --resume --total-steps 50000
    python -m torchrl_dreamer.train eval --checkpoint runs/maze --episodes 32 --gif maze.gif
    python -m torchrl_dreamer.train bench --quick
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser", "config_from_args"]

_COMMANDS = ("train", "eval", "bench")

# CLI flag -> TrainConfig field (flags left out keep the config file's / checkpoint's value).
_FIELDS = ("task", "rom", "preset", "loss_preset", "device", "num_envs", "total_steps",
           "replay_capacity", "replay_backing", "backend", "seed", "log_dir", "replay_ratio",
           "learning_starts", "batch_size", "seq_len", "gamma", "entropy_coef", "event_fraction",
           "steps_per_rollout", "commit_stride", "checkpoint_every", "log_every", "precision", "threads",
           "frame_skip", "eval_episodes", "logger")


def _add_train_args(p: argparse.ArgumentParser) -> None:
    from torchrl_dreamer.trainers.config import BACKENDS, REPLAY_BACKINGS

    a = p.add_argument
    a("--config", help="YAML/JSON file of settings (CLI flags override it)")
    a("--task", help="registered task (default maze; see torchrl_dreamer.envs.list_tasks())")
    a("--rom", help="ROM path overriding the task's (user-supplied games)")
    a("--preset", help="model size: tiny (CPU, default), XS, S, M, L, XL")
    a("--loss-preset", help="loss settings preset (default for tiny: fast-pixels on Game Boy tasks, "
      "fast on gym: tasks; sheeprl for XS..XL)")
    a("--device", help="cpu (default) or cuda[:k]")
    a("--num-envs", type=int, help="consoles stepped together (default 16)")
    a("--total-steps", type=int, help="policy steps to collect (default 50000)")
    a("--replay-capacity", type=int, help="policy steps the replay holds (default 100000)")
    a("--replay-backing", choices=REPLAY_BACKINGS, help="memory (default) or memmap files")
    a("--backend", choices=BACKENDS, help="collector backend (default reference)")
    a("--seed", type=int, help="random seed (default 0)")
    a("--log-dir", help="run directory: logs, checkpoints, GIFs (default runs/dreamer)")
    a("--replay-ratio", type=float, help="gradient steps per policy step (task default)")
    a("--learning-starts", type=int, help="random-action policy steps before training")
    a("--batch-size", type=int, help="sequences per gradient step (default 16)")
    a("--seq-len", type=int, help="sequence length (default 32)")
    a("--gamma", type=float,
      help="discount of imagined returns (default: the task's, else DreamerV3's 1 - 1/333)")
    a("--entropy-coef", type=float,
      help="actor entropy bonus (default: the task's, else the loss preset's)")
    a("--event-fraction", type=float,
      help="share of sequences drawn to contain an episode end (default 0: uniform)")
    a("--steps-per-rollout", type=int, help="env steps per actor window (default 16)")
    a("--commit-stride", type=int, help="env steps between commits to the learner (default 8)")
    a("--checkpoint-every", type=int, help="policy steps between checkpoints (0: at the end)")
    a("--no-checkpoint-replay", action="store_true",
      help="leave the replay out of checkpoints (smaller; resume restarts the replay)")
    a("--log-every", type=int, help="gradient steps between metric logs (default 10)")
    a("--precision", choices=("fp32", "bf16", "fp16"), help="learner autocast (default fp32)")
    a("--threads", type=int, help="torch threads on CPU (default 1)")
    a("--frame-skip", type=int, help="emulated frames per env step (default 24)")
    a("--eval-episodes", type=int, help="episodes of the final evaluation (0: none; default 32)")
    a("--logger", choices=("csv", "tensorboard", "both", "none"), help="default csv")
    a("--no-progress", action="store_true", help="no progress bar")
    a("--resume", nargs="?", const="", default=None, metavar="RUN_OR_CHECKPOINT",
      help="continue a run (default: the latest checkpoint under --log-dir)")


def build_parser(command: str) -> argparse.ArgumentParser:
    """The argument parser of one sub-command."""
    prog = "python -m torchrl_dreamer.train"
    if command == "train":
        p = argparse.ArgumentParser(
            prog=prog, description="Train DreamerV3 (default: the shipped maze, tiny preset).",
            epilog="Other sub-commands: 'eval' (success rate + GIF of a checkpoint) and 'bench' "
                   f"(run the benchmarks); see {prog} eval --help / {prog} bench --help.")
        _add_train_args(p)
    elif command == "eval":
        p = argparse.ArgumentParser(prog=f"{prog} eval",
                                    description="Evaluate a checkpoint: success rate + GIF.")
        p.add_argument("--checkpoint", required=True,
                       help="checkpoint directory, its state.pt, or a run directory (latest)")
        p.add_argument("--episodes", type=int, default=16)
        p.add_argument("--gif", help="GIF path (default <checkpoint>/eval.gif)")
        p.add_argument("--device", default=None)
        p.add_argument("--sample", action="store_true", help="sample actions (default greedy)")
        p.add_argument("--seed", type=int, default=1234)
    else:
        p = argparse.ArgumentParser(prog=f"{prog} bench", description="Run the benchmarks.")
        p.add_argument("--name", action="append",
                       help="benchmark name (benchmarks/NAME.py); repeatable; default all")
        p.add_argument("--full", action="store_true", help="full sizes instead of --quick")
        p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return p


def config_from_args(args: argparse.Namespace) -> Any:
    """A validated :class:`~torchrl_dreamer.trainers.TrainConfig` from parsed ``train`` flags.

    Precedence: CLI flag > ``--config`` file > the resumed checkpoint's config > defaults.
    """
    from torchrl_dreamer.trainers import TrainConfig
    from torchrl_dreamer.trainers.checkpoint import load_checkpoint, resolve_checkpoint
    from torchrl_dreamer.trainers.config import read_config_file

    flags = {f: getattr(args, f) for f in _FIELDS if getattr(args, f) is not None}
    if args.no_checkpoint_replay:
        flags["checkpoint_replay"] = False
    if args.no_progress:
        flags["progress"] = False
    base: dict[str, Any] = {}
    if args.resume is not None:
        where = args.resume or flags.get("log_dir") or TrainConfig.log_dir
        saved = load_checkpoint(resolve_checkpoint(where))
        base = dict(saved["config"])
        base.pop("progress", None)
        args.resume = str(resolve_checkpoint(where))
    file = read_config_file(args.config) if args.config else {}
    return TrainConfig.from_dict({**base, **file, **flags})


def _train(argv: list[str]) -> int:
    import torch

    from torchrl_dreamer.trainers import DreamerTrainer, evaluate, make_env

    args = build_parser("train").parse_args(argv)
    cfg = config_from_args(args)
    on_cpu = cfg.device == "cpu"
    torch.set_num_threads(cfg.threads if on_cpu else max(1, min(torch.get_num_threads(), 4)))
    if cfg.backend == "ray":
        try:
            from torchrl_dreamer.distributed import run_ray_training
        except ImportError as err:
            from torchrl_dreamer.trainers import ConfigError

            raise ConfigError(
                f"--backend ray needs torchrl_dreamer.distributed and ray ({err}); install ray "
                "or use --backend reference/threaded/cuda."
            ) from err
        print(json.dumps(run_ray_training(cfg), default=str))
        return 0
    trainer = DreamerTrainer(cfg, resume=args.resume or None)
    if trainer.resumed_from is not None:
        print(f"resumed from {trainer.resumed_from} at {trainer.policy_steps} policy steps",
              file=sys.stderr)
    row = trainer.train()
    summary: dict[str, Any] = {"run_dir": str(trainer.run_dir), **row}
    if cfg.eval_episodes > 0:
        p = trainer.parts
        env = make_env(cfg, num_envs=cfg.eval_episodes)
        res = evaluate(env, p.world_model, p.actor, gif=trainer.run_dir / "eval.gif")
        (trainer.run_dir / "eval.json").write_text(json.dumps(res.to_dict(), indent=1))
        summary.update({f"eval_{k}": v for k, v in res.to_dict().items() if k not in ("returns", "lengths")})
    trainer.close()
    print(json.dumps(summary))
    return 0


def _eval(argv: list[str]) -> int:
    from torchrl_dreamer.trainers import evaluate_checkpoint
    from torchrl_dreamer.trainers.checkpoint import resolve_checkpoint

    args = build_parser("eval").parse_args(argv)
    ckpt = resolve_checkpoint(args.checkpoint)
    gif = args.gif or str(ckpt / "eval.gif")
    res = evaluate_checkpoint(ckpt, args.episodes, gif=gif, device=args.device,
                              greedy=not args.sample, seed=args.seed)
    print(json.dumps({"checkpoint": str(ckpt), **res.to_dict()}))
    return 0


def benchmarks_dir() -> Path:
    """``benchmarks/`` of the source checkout."""
    return Path(__file__).resolve().parent.parent / "benchmarks"


def _bench(argv: list[str]) -> int:
    args = build_parser("bench").parse_args(argv)
    root = benchmarks_dir()
    available = sorted(p.stem for p in root.glob("*.py")) if root.is_dir() else []
    if not available:
        print(f"error: no benchmarks found in {root} (they ship with the source checkout)",
              file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(available))
        return 0
    names = args.name or available
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"error: unknown benchmark(s) {unknown}; available: {available}", file=sys.stderr)
        return 2
    rc = 0
    for name in names:
        cmd = [sys.executable, str(root / f"{name}.py")] + ([] if args.full else ["--quick"])
        print(f"# {' '.join(cmd)}", file=sys.stderr, flush=True)
        rc = max(rc, subprocess.call(cmd))
    return rc


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on a configuration / checkpoint error)."""
    from torchrl_dreamer.trainers import CheckpointError, ConfigError

    argv = list(sys.argv[1:] if argv is None else argv)
    command = "train"
    if argv and argv[0] in _COMMANDS:
        command = argv.pop(0)
    try:
        return {"train": _train, "eval": _eval, "bench": _bench}[command](argv)
    except (ConfigError, CheckpointError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
