"""Play a run's checkpoints one after the other: which weights of the run play best.

A policy can be better in the middle of a run than at its end (``docs/learning_results.md``,
PostBot), and the training episodes show that late, because older policies played them. This script plays every ``--every``-th checkpoint of a run (or the
ones ``--steps`` names) with :func:`~torchrl_dreamer.trainers.evaluate_checkpoint`. It prints
one JSON line per checkpoint and a last line naming the best one: the highest success rate,
then the highest game score (where the task has one), then the return.

Choosing weights by these episodes makes their figures optimistic. Evaluate the chosen
checkpoint again with another ``--seed`` before reporting it.

    python examples/checkpoint_scan.py runs/postbot --every 5 --episodes 32 --sample
    python -m torchrl_dreamer.train eval --checkpoint runs/postbot/checkpoints/step_850000 \
        --episodes 32 --sample --seed 99
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from torchrl_dreamer.trainers import evaluate_checkpoint
from torchrl_dreamer.trainers.checkpoint import run_checkpoints


def checkpoints(run: str | Path, every: int = 1, steps: list[int] | None = None
                ) -> list[tuple[int, Path]]:
    """``(step, directory)`` of the checkpoints of ``run`` (``RUN/checkpoints/step_N``) by
    step: those whose step ``steps`` names, else every ``every``-th one and always the last.

    Raises:
        FileNotFoundError: the run has no checkpoint, or a step in ``steps`` has none.
    """
    found = run_checkpoints(run)
    if not found:
        raise FileNotFoundError(f"no checkpoint under {Path(run, 'checkpoints')} "
                                "(train with --checkpoint-every to keep some)")
    if steps:
        by_step = dict(found)
        missing = [s for s in steps if s not in by_step]
        if missing:
            raise FileNotFoundError(f"no checkpoint at steps {missing}; the run has "
                                    f"{sorted(by_step)}")
        return [(s, by_step[s]) for s in steps]
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    keep = found[::every]
    return keep if keep[-1] == found[-1] else [*keep, found[-1]]


def rank_key(row: dict[str, Any]) -> tuple[float, float, float]:
    """How rows compare: success rate, then game score, then return (NaN counts lowest)."""
    def val(k: str) -> float:
        v = row.get(k)
        return float("-inf") if v is None or v != v else float(v)

    return val("success_rate"), val("mean_score"), val("mean_return")


def scan(run: str | Path, every: int = 1, steps: list[int] | None = None, episodes: int = 16,
         greedy: bool = True, seed: int = 1234, **eval_kwargs: Any) -> list[dict[str, Any]]:
    """One row per checkpoint: its step and what :func:`evaluate_checkpoint` measured."""
    rows = []
    for step, ckpt in checkpoints(run, every, steps):
        res = evaluate_checkpoint(ckpt, episodes, greedy=greedy, seed=seed, **eval_kwargs)
        d = res.to_dict()
        rows.append({"step": step, "checkpoint": str(ckpt),
                     **{k: d[k] for k in ("episodes", "success_rate", "mean_return",
                                          "mean_score", "distinct", "unfinished") if k in d}})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", help="the run directory (--log-dir of the training)")
    p.add_argument("--every", type=int, default=1, help="play every n-th checkpoint (and the last)")
    p.add_argument("--steps", type=int, nargs="*", help="play the checkpoints of these steps")
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--sample", action="store_true", help="sample actions (default greedy)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--time-limit", default=None, help="per checkpoint, e.g. 60s")
    args = p.parse_args(argv)
    rows = scan(args.run, args.every, args.steps, args.episodes, greedy=not args.sample,
                seed=args.seed, max_steps=args.max_steps, time_limit=args.time_limit)
    for row in rows:
        print(json.dumps(row))
    best = max(rows, key=rank_key)
    print(json.dumps({"best_step": best["step"], "best_checkpoint": best["checkpoint"],
                      "played": len(rows), "greedy": not args.sample}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
