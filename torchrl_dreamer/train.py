"""Command line of torchrl_dreamer: ``python -m torchrl_dreamer.train [train|eval|bench] ...``.

- ``train`` (the default when no sub-command is given): train a DreamerV3 agent on a task
  (default: the shipped maze, ``tiny`` preset) with a progress bar, CSV/TensorBoard logs,
  checkpoints every ``--checkpoint-every`` policy steps and a final evaluation + GIF;
  ``--resume [RUN_OR_CHECKPOINT]`` continues a run.
- ``eval``: play episodes with a checkpoint, print the success rate, write a GIF.
- ``bench``: run the benchmarks (``benchmarks/*.py --quick``), one JSON line per result.

Examples::

    python -m torchrl_dreamer.train --task maze --preset tiny --total-steps 3000
    python -m torchrl_dreamer.train --log-dir runs/maze --resume --total-steps 50000
    python -m torchrl_dreamer.train eval --checkpoint runs/maze --episodes 32 --gif maze.gif
    python -m torchrl_dreamer.train bench --quick
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import typing
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser", "config_from_args"]

_COMMANDS = ("train", "eval", "bench")


def _flag_type(hint: Any) -> tuple[Any, tuple[Any, ...] | None]:
    """``(type, choices)`` of a field's flag from its type hint (``X | None`` -> ``X``)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Literal:
        return type(args[0]), tuple(args)
    if args:  # a union such as ``float | None``
        return _flag_type(args[0])
    return hint, None


def setting_flags(name: str) -> tuple[str, str]:
    """The two flags of the setting ``name`` (flat name): its dotted path in the run tree and its
    flat alias, the flag users know (the same when a setting has no section prefix to drop).

    Example:
        >>> setting_flags("seq_len"), setting_flags("replay_capacity")
        (('--replay.seq-len', '--seq-len'), ('--replay.capacity', '--replay-capacity'))
    """
    from torchrl_dreamer.collectors.settings import FLAT

    section, field = FLAT[name]
    return f"--{section}.{field.replace('_', '-')}", "--" + name.replace("_", "-")


def _add_train_args(p: argparse.ArgumentParser, task: str | None = None) -> None:
    """One flag per run setting, in a group per section of the run tree: ``--replay.seq-len``
    with the flat ``--seq-len`` as its alias (both set the same setting), its help the field's
    docstring and default; where ``task`` (default: the default task) trains with another value
    (:func:`~torchrl_dreamer.trainers.config.task_overlay`), the help says so. Flags left out are not set (the config file, the resumed
    checkpoint, the task and the field defaults then apply, in that order)."""
    from torchrl_dreamer.collectors.settings import FLAT, SECTIONS, setting_docs, setting_field
    from torchrl_dreamer.trainers.config import ConfigError, task_overlay

    task = task or setting_field("task").default
    try:
        by_task = task_overlay(task)
    except (ConfigError, ValueError):
        by_task = {}  # an unknown --task fails with its message once the config is built
    docs = setting_docs()
    p.add_argument("--config", metavar="FILE",
                   help="YAML/JSON file of settings, flat or by section (flags override it)")
    groups = {name: p.add_argument_group(f"{name} settings ({cls.__name__})")
              for name, cls in SECTIONS.items()}
    for name, (section, _field) in FLAT.items():
        f = setting_field(name)
        kind, choices = _flag_type(typing.get_type_hints(SECTIONS[section])[f.name])
        default = "unset" if f.default is None else f.default
        differs = name in by_task and by_task[name] != f.default
        note = f"; task {task}: {by_task[name]}" if differs else ""
        text = f"{docs[name]} (default: {default}{note})".replace("``", "").replace("%", "%%")
        flags = dict.fromkeys(setting_flags(name))  # one flag when both are the same
        g = groups[section]
        if kind is bool:
            g.add_argument(*flags, dest=name, action=argparse.BooleanOptionalAction,
                           default=argparse.SUPPRESS, help=text)
        else:
            g.add_argument(*flags, dest=name, type=kind, choices=choices,
                           default=argparse.SUPPRESS,
                           metavar=None if choices else kind.__name__.upper(), help=text)
    p.add_argument("--resume", nargs="?", const="", default=None, metavar="RUN_OR_CHECKPOINT",
                   help="continue a run (default: the latest checkpoint under --log-dir)")


def build_parser(command: str, task: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of one sub-command (``task``: whose training defaults the ``train``
    help shows; default the default task)."""
    prog = "python -m torchrl_dreamer.train"
    if command == "train":
        p = argparse.ArgumentParser(
            prog=prog, description="Train DreamerV3 (default: the shipped maze, tiny preset).",
            epilog="Other sub-commands: 'eval' (success rate + GIF of a checkpoint) and 'bench' "
                   f"(run the benchmarks); see {prog} eval --help / {prog} bench --help.")
        _add_train_args(p, task)
    elif command == "eval":
        from torchrl_dreamer.collectors.settings import EVAL_POLICIES
        from torchrl_dreamer.trainers.evaluate import GIF_EPISODES

        p = argparse.ArgumentParser(prog=f"{prog} eval",
                                    description="Evaluate a checkpoint: success rate + GIF.")
        p.add_argument("--checkpoint", required=True,
                       help="checkpoint directory, its state.pt, or a run directory (latest)")
        p.add_argument("--episodes", type=int, default=16)
        p.add_argument("--gif", help="agent video path: .gif, or .mp4 (default <checkpoint>/eval.gif)")
        p.add_argument("--gif-episode", choices=GIF_EPISODES, default="best", help=(
            "the episode drawn: best (a success first, then the highest return) or first (env 0)"))
        p.add_argument("--video", help="also write the world model's open-loop report here (.mp4; "
                       "real | reconstruction | imagination, GIF if ffmpeg is missing)")
        p.add_argument("--video-context", type=int, default=8,
                       help="observed steps before the world model imagines (default 8)")
        p.add_argument("--device", default=None)
        p.add_argument("--policy", choices=EVAL_POLICIES, default="last", help=(
            "the weights played: last (the checkpoint's) or best (those a run trained with "
            "--eval-policy best kept for its best window of training episodes)"))
        p.add_argument("--sample", action="store_true", help="sample actions (default greedy)")
        p.add_argument("--seed", type=int, default=1234)
        p.add_argument("--max-steps", type=int, default=None,
                       help="steps an episode may last (default: the run's eval_max_steps)")
        p.add_argument("--time-limit", default=None,
                       help="wall-clock bound, e.g. 90s or 5m (default: the run's eval_time_limit)")
    else:
        p = argparse.ArgumentParser(prog=f"{prog} bench", description="Run the benchmarks.")
        p.add_argument("--name", action="append",
                       help="benchmark name (benchmarks/NAME.py); repeatable; default all")
        p.add_argument("--full", action="store_true", help="full sizes instead of --quick")
        p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return p


def config_from_args(args: argparse.Namespace) -> Any:
    """A validated :class:`~torchrl_dreamer.trainers.TrainConfig` from parsed ``train`` flags.

    Precedence: CLI flag > ``--config`` file > the resumed checkpoint's config > defaults; each
    layer is read by flat name (:func:`~torchrl_dreamer.trainers.config.overlay_settings`, the
    one mapping) before they are merged.
    """
    from torchrl_dreamer.collectors.settings import FLAT, setting_field
    from torchrl_dreamer.trainers import TrainConfig
    from torchrl_dreamer.trainers.checkpoint import load_checkpoint, resolve_checkpoint
    from torchrl_dreamer.trainers.config import overlay_settings, read_config_file

    flags = {name: getattr(args, name) for name in FLAT if hasattr(args, name)}
    file = overlay_settings(read_config_file(args.config), args.config) if args.config else {}
    base: dict[str, Any] = {}
    if args.resume is not None:
        where = (args.resume or flags.get("log_dir") or file.get("log_dir")
                 or setting_field("log_dir").default)
        saved = load_checkpoint(resolve_checkpoint(where))
        base = overlay_settings(dict(saved["config"]), "the checkpoint's config")
        base.pop("progress", None)
        args.resume = str(resolve_checkpoint(where))
    return TrainConfig.from_dict({**base, **file, **flags})


def _task_in(argv: list[str]) -> str | None:
    """The ``--task`` (``--env.task``) given in ``argv`` (so ``--task catch --help`` shows
    catch's defaults)."""
    for i, a in enumerate(argv):
        if a in ("--task", "--env.task") and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(("--task=", "--env.task=")):
            return a.split("=", 1)[1]
    return None


def _register_ray_backend() -> None:
    """Import :mod:`torchrl_dreamer.distributed`, which registers the ``"ray"`` backend of
    :func:`~torchrl_dreamer.trainers.build_run` (the trainers never import the layer above
    them; this entry point sits above both)."""
    from torchrl_dreamer.trainers import ConfigError

    try:
        import torchrl_dreamer.distributed  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f"--backend ray needs torchrl_dreamer.distributed and ray ({err}); install ray "
            "or use --backend reference/threaded/cuda."
        ) from err


def _warn_if_cores_busy(cfg: Any) -> None:
    """Say on stderr when an unset ``threads`` took several cores that other work is using
    (the 1-minute load average): two multi-threaded runs on the same cores can run 30x slower
    than with ``--threads 1`` each."""
    import os

    from torchrl_dreamer.trainers.config import usable_cores

    if cfg.run.threads is not None or cfg.torch_threads < 2 or not hasattr(os, "getloadavg"):
        return
    load, cores = os.getloadavg()[0], usable_cores()
    if load + cfg.torch_threads > cores + 0.5:
        print(f"note: the learner takes {cfg.torch_threads} threads (every core) while the "
              f"load average is {load:.1f} on {cores} cores; if another run shares them, give "
              f"each run --threads 1", file=sys.stderr)


def _train(argv: list[str]) -> int:
    import torch

    from torchrl_dreamer.trainers import DreamerTrainer, evaluate, make_env

    start = time.perf_counter()  # a --time-limit counts from here: the kernel compile included
    args = build_parser("train", _task_in(argv)).parse_args(argv)
    cfg = config_from_args(args)
    if cfg.collector.backend == "ray":
        _register_ray_backend()
    torch.set_num_threads(cfg.torch_threads)
    _warn_if_cores_busy(cfg)
    trainer = DreamerTrainer(cfg, resume=args.resume or None)
    if trainer.resumed_from is not None:
        print(f"resumed from {trainer.resumed_from} at {trainer.policy_steps} policy steps",
              file=sys.stderr)
    row = trainer.train(deadline=cfg.training_deadline(start))
    summary: dict[str, Any] = {"run_dir": str(trainer.run_dir), **row}
    if cfg.eval.episodes > 0:
        p = trainer.parts
        summary.update(trainer.choose_eval_policy())
        env = make_env(cfg, num_envs=cfg.eval.episodes)
        modes = [("eval", True)] + ([("eval_sampled", False)] if cfg.eval.sampled else [])
        for name, greedy in modes:
            res = evaluate(env, p.world_model, p.actor, greedy=greedy,
                           gif=trainer.run_dir / f"{name}.gif", max_steps=cfg.eval.max_steps,
                           time_limit=cfg.eval_time_limit_s, progress=cfg.run.progress)
            (trainer.run_dir / f"{name}.json").write_text(json.dumps(res.to_dict(), indent=1))
            if res.episodes == 0 and res.unfinished:
                part = sum(res.unfinished_returns) / res.unfinished
                print(f"{name}: no episode finished within the evaluation's bound "
                      f"({res.stopped_by}, {res.steps} steps); its means are NaN, the "
                      f"{res.unfinished} unfinished ones' partial returns average {part:.3f} "
                      f"({name}.json); raise --eval-time-limit / --eval-max-steps to finish "
                      "them", file=sys.stderr)
            summary.update({f"{name}_{k}": v for k, v in res.to_dict().items()
                            if k not in ("returns", "lengths", "unfinished_returns", "scores")})
    summary["total_wall_s"] = time.perf_counter() - start
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
                              greedy=not args.sample, seed=args.seed, max_steps=args.max_steps,
                              time_limit=args.time_limit, gif_episode=args.gif_episode,
                              weights=args.policy)
    out = {"checkpoint": str(ckpt), "policy": args.policy, **res.to_dict()}
    if args.video:
        from torchrl_dreamer.trainers.evaluate import world_model_video_checkpoint

        out["video"] = str(world_model_video_checkpoint(ckpt, args.video, context=args.video_context,
                                                        device=args.device, seed=args.seed))
    print(json.dumps(out))
    return 0


def benchmarks_dir() -> Path:
    """``benchmarks/`` of the source checkout."""
    return Path(__file__).resolve().parent.parent / "benchmarks"


def benchmark_names(root: Path) -> list[str]:
    """The runnable benchmarks of ``root`` (scripts with a ``__main__`` block; the helpers they
    share, such as ``game_envs.py``, are not listed). Each takes ``--quick``."""
    return sorted(p.stem for p in root.glob("*.py")
                  if 'if __name__ == "__main__":' in p.read_text(errors="replace"))


def _bench(argv: list[str]) -> int:
    args = build_parser("bench").parse_args(argv)
    root = benchmarks_dir()
    available = benchmark_names(root) if root.is_dir() else []
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
