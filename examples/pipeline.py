"""Dreamer as a plain TorchRL pipeline: env + replay + losses + collector, wired by hand.

What ``python -m torchrl_dreamer.train`` does, without the trainer (no progress bar, logs or
checkpoints). Run: ``python examples/pipeline.py --quick``.
"""

import argparse

import torch
from torchrl.record.loggers import CSVLogger

from torchrl_dreamer.collectors import AsyncCollectorConfig, AsyncDreamerCollector
from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema
from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
from torchrl_dreamer.objectives import DreamerV3Learner

parser = argparse.ArgumentParser()
parser.add_argument("--task", default="maze")
parser.add_argument("--num-envs", type=int, default=8)
parser.add_argument("--total-steps", type=int, default=4096, help="policy steps")
parser.add_argument("--log-dir", default="runs/pipeline")
parser.add_argument("--quick", action="store_true", help="a few hundred steps, tiny batches")
args = parser.parse_args()
torch.set_num_threads(1)
T, B = (8, 4) if args.quick else (32, 16)
total = 256 if args.quick else args.total_steps

# 1. The env: N Game Boys running a task; packed2 pixels, deferred resets with is_first.
env = GameBoyEnv(args.task, num_envs=args.num_envs, seed=0)
n_actions = env.action_spec.space.n

# 2. Replay: a time-major [capacity, N] ring; sequences of T steps from one env each.
storage = TimeMajorStorage(4096, args.num_envs, spec=dreamer_schema(), safety_margin=T,
                           auto_commit=False)
sampler = ChronologicalSliceSampler(slice_len=T, generator=torch.Generator().manual_seed(0))

# 3. Networks and the three DreamerV3 losses (world model -> actor -> critic) with optimizers.
world_model, actor, critic = make_dreamer("tiny", {"pixels": "packed2"}, n_actions)
learner = DreamerV3Learner(world_model, actor, critic)
player = DreamerPlayer(world_model, actor, num_envs=args.num_envs)  # acting copy of the weights

# 4. The collector: actor writes rows, learner trains at the replay ratio, weights flow back.
config = AsyncCollectorConfig(seq_len=T, batch_size=B, min_ready_steps=T, safety_margin=T,
                              commit_stride=T // 2, steps_per_rollout=T, replay_ratio=0.05,
                              learning_starts=64, log_every=2, backend="reference")
collector = AsyncDreamerCollector(env, storage, sampler, player, learner, config,
                                  total_frames=total,
                                  logger=CSVLogger("pipeline", log_dir=args.log_dir))
for metrics in collector:  # one TensorDict every log_every gradient steps
    print(f"steps={int(metrics['policy_steps'])} updates={int(metrics['updates'])} "
          f"loss_wm={float(metrics['loss_world_model']):.3f}")
summary = collector.summary()
print(f"done: {int(summary['policy_steps'])} policy steps, {int(summary['updates'])} updates, "
      f"replay ratio {summary['replay_ratio_actual']:.3f}")
collector.shutdown()
