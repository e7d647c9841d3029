"""Mean episode return of the uniformly random policy on a task spec (or a registered task).

The reference a trained agent is compared with: the env is built from the same
:class:`~torchrl_dreamer.trainers.TrainConfig` resolution as a training run (the task's or the
Game Boy defaults' frame skip and random no-op starts, the spec's action set and episode
length), so ``python -m torchrl_dreamer.train --rom R --task-spec S`` and this script play the
same game. Prints one JSON line (with ``mean_score``, the game's own measure, where the spec's
reward holds shaping terms or an exploration bonus).

    python examples/random_baseline.py --rom 2048.gb --task-spec examples/tasks/2048.yaml \
        --episodes 64
"""

from __future__ import annotations

import argparse
import json

import torch
from tensordict import TensorDict

from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.trainers import TrainConfig, make_env


def random_returns(env: GameBoyEnv, episodes: int, seed: int = 0
                   ) -> tuple[list[float], list[int], list[float]]:
    """Returns, lengths and scores of ``episodes`` episodes (terminated or truncated) under
    uniformly random actions: the first ``ceil(episodes / num_envs)`` episodes of *every* env,
    each env playing until it has finished that many, then the first ``episodes`` of those in
    (round, env) order. Why not the first ``episodes`` episodes to end: short episodes end
    first, so that sample over-weights them and, in games whose return grows with the episode's
    length, reads low (the runner: 1.38 blocks against 1.5-1.6 for each env's first episode,
    2026-11-30). The scores (the game's own measure where the spec's reward holds shaping or a
    bonus, the env's ``score`` output) are empty for an env without one."""
    g = torch.Generator().manual_seed(seed)
    n, n_act = env.num_envs, len(env.action_set.names)
    rounds = -(-episodes // n)  # episodes each env plays to the end
    scored = "score" in env.observation_spec.keys()
    env.reset()
    ret, score = torch.zeros(n), torch.zeros(n)
    length = torch.zeros(n, dtype=torch.int64)
    ended = torch.zeros(n, dtype=torch.int64)  # episodes each env has finished
    kept: list[list[tuple[int, float, int, float]]] = [[] for _ in range(rounds)]
    while int(ended.min()) < rounds:
        a = torch.randint(0, n_act, (n,), generator=g)
        nxt = env.step(TensorDict({"action": a.to(env.device)}, batch_size=[n]))["next"]
        ret += nxt["reward"].reshape(n).cpu()
        if scored:
            score += nxt["score"].reshape(n).cpu()
        length += 1
        done = (nxt["terminated"] | nxt["truncated"]).reshape(n).cpu()
        for i in torch.nonzero(done).flatten().tolist():
            if ended[i] < rounds:
                kept[int(ended[i])].append((i, float(ret[i]), int(length[i]), float(score[i])))
            ended[i] += 1
        ret[done], score[done], length[done] = 0.0, 0.0, 0
    rows = [r for rnd in kept for r in sorted(rnd)][:episodes]
    return ([r[1] for r in rows], [r[2] for r in rows],
            [r[3] for r in rows] if scored else [])


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task-spec", help="a task spec file (needs --rom)")
    ap.add_argument("--rom", help="the game's ROM")
    ap.add_argument("--task", default=None, help="a registered task instead of a spec")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--frame-skip", type=int, default=None,
                    help="frames per step (default: the training run's, see TrainConfig)")
    ap.add_argument("--press-frames", type=int, default=None,
                    help="frames a step holds its buttons (default: the training run's)")
    ap.add_argument("--noop-max", type=int, default=None,
                    help="random no-op start frames (default: the training run's)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if (args.task_spec is None) == (args.task is None):
        ap.error("give exactly one of --task-spec (with --rom) or --task")
    cfg = TrainConfig(task=args.task, task_spec=args.task_spec, rom=args.rom, seed=args.seed,
                      frame_skip=args.frame_skip, press_frames=args.press_frames,
                      noop_max=args.noop_max, num_envs=args.envs)
    env = make_env(cfg)
    returns, lengths, scores = random_returns(env, args.episodes, seed=args.seed)
    print(json.dumps({"task": env.task.name, "episodes": len(returns),
                      "mean_return": sum(returns) / len(returns),
                      **({"mean_score": sum(scores) / len(scores)} if scores else {}),
                      "mean_length": sum(lengths) / len(lengths),
                      "max_episode_steps": env.max_episode_steps,
                      "frame_skip": env.frame_skip, "press_frames": env.press_frames,
                      "noop_max": env.noop_max,
                      "seed": args.seed}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
