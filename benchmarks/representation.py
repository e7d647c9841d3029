"""Benchmark: the learner update with the decoder-free world-model loss against DreamerV3's
decoder, at the Game Boy defaults.

Prints one JSON line per thread count: ``{"bench": "representation", "case":
"update/<threads>t", "ours": contrastive s/update, "peer": decoder s/update, "unit":
"s/update", "speedup": peer / ours}``. Both learners are built the way a run builds them
(:class:`~torchrl_dreamer.trainers.builder.RunFactories` of ``--rom`` / ``--task-spec``, or the
shipped runner and its spec by default, so no shared ROM is needed), differing only in
``representation``, and take the same synthetic ``[T, B]`` batch; their updates alternate in
rounds of ``--repeats`` and each side reports the median (the machine is shared and noisy).

Run: ``python benchmarks/representation.py [--threads 1 2] [--repeats 15] [--rounds 2] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# Running a script puts its folder first on sys.path; benchmarks/ holds ray.py, which would
# shadow the real Ray package that torchrl probes for on import. Drop the folder.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from torchrl_dreamer.roms import rom_path  # noqa: E402
from torchrl_dreamer.trainers import TrainConfig  # noqa: E402
from torchrl_dreamer.trainers.builder import RunFactories  # noqa: E402

SIDES = ("contrastive", "decoder")


def build(rom: str, spec: str | None, representation: str):
    """A learner as a run of ``rom`` / ``spec`` builds it, and its env's action count."""
    settings = {"rom": rom, "representation": representation, "num_envs": 1}
    if spec is not None:
        settings["task_spec"] = spec
    cfg = TrainConfig.from_dict(settings)
    f = RunFactories(cfg, None, None)
    env = f.env()
    f = f.with_env(env)
    return f.learner(*f.networks()), cfg, int(env.action_spec.space.n)


def batch(cfg: TrainConfig, actions: int) -> TensorDict:
    """A ``[T, B]`` replay sample of the run's sizes (random frames, rare rewards and starts)."""
    T, B = cfg.replay.seq_len, cfg.replay.batch_size
    g = torch.Generator().manual_seed(0)
    return TensorDict({
        "pixels": torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8, generator=g),
        "action": torch.randint(actions, (T, B), generator=g),
        "reward": (torch.rand(T, B, generator=g) < 0.05).float(),
        "is_first": torch.rand(T, B, generator=g) < 0.01,
        "continue_": torch.ones(T, B),
        "terminated": torch.zeros(T, B, dtype=torch.bool),
    }, [T, B])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rom", default=None, help="a Game Boy ROM (default: the shipped runner)")
    p.add_argument("--task-spec", default=None, help="its task spec (default: the runner's)")
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    p.add_argument("--repeats", type=int, default=15, help="timed updates per side and round")
    p.add_argument("--rounds", type=int, default=2, help="alternated rounds per side")
    p.add_argument("--quick", action="store_true", help="a short run: 3 updates, one round")
    args = p.parse_args()
    if args.quick:
        args.repeats, args.rounds = 3, 1
    rom, spec = args.rom, args.task_spec
    if rom is None:  # the shipped runner and its spec (examples/tasks/runner.yaml)
        rom = str(rom_path("runner"))
        spec = spec or os.path.join(os.path.dirname(_HERE), "examples", "tasks", "runner.yaml")
    learners = {}
    for side in SIDES:
        learners[side], cfg, actions = build(rom, spec, side)
    data = batch(cfg, actions)
    for threads in args.threads:
        torch.set_num_threads(threads)
        times: dict[str, list[float]] = {s: [] for s in SIDES}
        for _ in range(args.rounds):
            for side in SIDES:
                learner = learners[side]
                for _ in range(3):
                    learner.update(data)
                for _ in range(args.repeats):
                    t = time.perf_counter()
                    learner.update(data)
                    times[side].append(time.perf_counter() - t)
        ours, peer = (statistics.median(times[s]) for s in SIDES)
        print(json.dumps({"bench": "representation", "case": f"update/{threads}t", "ours": ours,
                          "peer": peer, "unit": "s/update", "speedup": peer / ours}), flush=True)


if __name__ == "__main__":
    main()
