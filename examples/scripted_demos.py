"""Record demonstrations of a scripted player, in the format the play tool writes.

A stand-in for a human at the controls, so that training with demonstrations
(``--demos DIR --demo-share S``, ``docs/playing.md``) can be measured without anyone playing:
the script reads the game's RAM each step and presses what a good player would, with a share of
random actions (``--epsilon``) so that the demonstrations also show recoveries. The env is built
from the same :class:`~torchrl_dreamer.trainers.TrainConfig` resolution as a training run of the
task (frame skip, press length, no-op starts), so the files load into that run::

    python examples/scripted_demos.py --task catch --episodes 4 --out demos/catch
    python -m torchrl_dreamer.train --task catch --demos demos/catch --demo-share 0.25

Players (RAM maps in ``docs/roms.md``):

- ``catch``: move the paddle's centre under the falling block's centre.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch

from torchrl_dreamer.data.demonstrations import DemonstrationRecorder
from torchrl_dreamer.trainers import TrainConfig, make_env

CATCH_PADDLE_X = 0xC007
"""Catch's paddle left x; the falling block's left x is the next byte (``docs/roms.md``)."""
CATCH_PADDLE_W, CATCH_BLOCK_W = 24, 8


def catch_player(env) -> str:
    """The button that brings the paddle's centre under the block's centre (within 8 px)."""
    paddle, block = env.gb.read_memory(CATCH_PADDLE_X, 2)[0].tolist()  # adjacent bytes
    gap = (block + CATCH_BLOCK_W // 2) - (paddle + CATCH_PADDLE_W // 2)
    if gap > 8:
        return "RIGHT"
    if gap < -8:
        return "LEFT"
    return "NOOP"


PLAYERS: dict[str, Callable[[object], str]] = {"catch": catch_player}
"""Scripted players by task name: each returns the name of the action to press."""


def record(task: str, episodes: int, epsilon: float, seed: int,
           max_steps: int | None = None) -> list:
    """Play ``episodes`` episodes of ``task`` with its scripted player (a random action with
    probability ``epsilon``) and return one :class:`Demonstration` per episode.

    Example:
        >>> demos = record("catch", episodes=1, epsilon=0.0, seed=0, max_steps=30)
        >>> len(demos), len(demos[0]) >= 30, float(demos[0].reward.sum()) >= 0
        (1, True, True)
    """
    if task not in PLAYERS:
        raise ValueError(f"no scripted player for {task!r}; players: {sorted(PLAYERS)}")
    cfg = TrainConfig(task=task, seed=seed, progress=False)
    env = make_env(cfg, num_envs=1)
    names = list(env.action_set.names)
    gen = torch.Generator().manual_seed(seed)
    limit = max_steps or int(getattr(env, "max_episode_steps", 0) or 10_000)
    out = []
    for _ in range(episodes):
        rec = DemonstrationRecorder(env, meta={"player": f"scripted {task}", "epsilon": epsilon,
                                               "seed": seed})
        rec.begin(env.reset())
        for _t in range(limit):
            if float(torch.rand((), generator=gen)) < epsilon:
                a = int(torch.randint(len(names), (), generator=gen))
            else:
                a = names.index(PLAYERS[task](env))
            td = env.fast_step(torch.tensor([a]))
            rec.step(a, td)
            if bool(td["terminated"].any() | td["truncated"].any()):
                break
        else:
            rec.end_episode()
        out.append(rec.demonstration())
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="catch", choices=sorted(PLAYERS))
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--epsilon", type=float, default=0.1, help="share of random actions")
    p.add_argument("--max-steps", type=int, default=None, help="steps per episode at most")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="folder for the .pt files")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, demo in enumerate(record(args.task, args.episodes, args.epsilon, args.seed,
                                    args.max_steps)):
        path = out / f"{args.task}_{args.seed}_{i}.pt"
        demo.save(path)
        print(f"{path}: {len(demo)} steps, return {float(demo.reward.sum()):.1f}")


if __name__ == "__main__":
    main()
