"""DreamerV3 on gymnasium CartPole-v1 (vector observations) through TorchRL's ``GymEnv``.

The same trainer as the Game Boy tasks: only the env changes. ``DeferredResetGymEnv`` holds one
TorchRL ``GymEnv`` per env and restarts finished episodes on the next step, marking the reset
observation with ``is_first`` (what the Dreamer collector expects). Needs ``pip install
gymnasium``.

Run: ``python examples/cartpole.py`` (20k policy steps; ``--quick`` for a smoke run). The same
run from the CLI: ``python -m torchrl_dreamer.train --task gym:CartPole-v1 --total-steps 20000``.
"""

import argparse
import json

import torch

from torchrl_dreamer.trainers import DreamerTrainer, TrainConfig, build_run, evaluate
from torchrl_dreamer.trainers.gym_env import DeferredResetGymEnv


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--total-steps", type=int, default=20_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--replay-ratio", type=float, default=0.5,
                        help="gradient steps per policy step (0.5 reaches 475+ in 20k steps, see docs/learning_results.md)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-dir", default="runs/cartpole")
    parser.add_argument("--quick", action="store_true", help="300 steps, tiny batches")
    args = parser.parse_args()
    torch.set_num_threads(1)

    small = dict(batch_size=4, seq_len=8, steps_per_rollout=8, commit_stride=4,
                 learning_starts=64, replay_capacity=1024) if args.quick else {}
    cfg = TrainConfig(task="gym:CartPole-v1", preset="tiny", num_envs=args.num_envs,
                      total_steps=300 if args.quick else args.total_steps,
                      replay_ratio=args.replay_ratio, seed=args.seed, log_dir=args.log_dir,
                      checkpoint_every=0, eval_episodes=0, progress=not args.quick,
                      **({"learning_starts": 1024} | small))

    # The env through TorchRL's GymEnv; build_run wires replay, networks, learner, collector.
    env = DeferredResetGymEnv("CartPole-v1", num_envs=cfg.num_envs, seed=cfg.seed)
    parts = build_run(cfg, env=env, obs={"observation": ("vector", 4)})
    trainer = DreamerTrainer(cfg, parts=parts, quiet=args.quick)
    row = trainer.train()

    eval_env = DeferredResetGymEnv("CartPole-v1", num_envs=4 if args.quick else 16,
                                   seed=cfg.seed + 10_000)
    result = evaluate(eval_env, parts.world_model, parts.actor, greedy=True)
    print(json.dumps({"policy_steps": row["policy_steps"], "updates": row["updates"],
                      "train_return": row["return"], "eval_mean_return": result.mean_return,
                      "eval_success_rate": result.success_rate, "wall_s": row["wall_s"]}))
    trainer.close()


if __name__ == "__main__":
    main()
