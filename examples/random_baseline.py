"""Mean episode return of the uniformly random policy on a task spec (or a registered task).

The reference a trained agent is compared with: same task, same action set, same episode
length (the spec's ``max_episode_steps``), same frame skip. Prints one JSON line.

    python examples/random_baseline.py --rom 2048.gb --task-spec examples/tasks/2048.yaml \
        --episodes 64
"""

from __future__ import annotations

import argparse
import json

import torch
from tensordict import TensorDict

from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.spec import load_task_spec


def random_returns(env: GameBoyEnv, episodes: int, seed: int = 0) -> tuple[list[float], list[int]]:
    """Returns and lengths of the first ``episodes`` episodes that end (terminated or
    truncated) under uniformly random actions; every env runs until enough have ended."""
    g = torch.Generator().manual_seed(seed)
    n, n_act = env.num_envs, len(env.action_set.names)
    env.reset()
    ret, length = torch.zeros(n), torch.zeros(n, dtype=torch.int64)
    returns, lengths = [], []
    while len(returns) < episodes:
        a = torch.randint(0, n_act, (n,), generator=g)
        nxt = env.step(TensorDict({"action": a.to(env.device)}, batch_size=[n]))["next"]
        ret += nxt["reward"].reshape(n).cpu()
        length += 1
        done = (nxt["terminated"] | nxt["truncated"]).reshape(n).cpu()
        for i in torch.nonzero(done).flatten().tolist():
            returns.append(float(ret[i]))
            lengths.append(int(length[i]))
        ret[done], length[done] = 0.0, 0
    return returns[:episodes], lengths[:episodes]


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task-spec", help="a task spec file (needs --rom)")
    ap.add_argument("--rom", help="the game's ROM")
    ap.add_argument("--task", default=None, help="a registered task instead of a spec")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--frame-skip", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if (args.task_spec is None) == (args.task is None):
        ap.error("give exactly one of --task-spec (with --rom) or --task")
    task = load_task_spec(args.task_spec, rom=args.rom) if args.task_spec else args.task
    env = GameBoyEnv(task, num_envs=args.envs, frame_skip=args.frame_skip, seed=args.seed)
    returns, lengths = random_returns(env, args.episodes, seed=args.seed)
    print(json.dumps({"task": env.task.name, "episodes": len(returns),
                      "mean_return": sum(returns) / len(returns),
                      "mean_length": sum(lengths) / len(lengths),
                      "max_episode_steps": env.max_episode_steps, "seed": args.seed}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
