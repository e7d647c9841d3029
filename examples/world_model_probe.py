"""How fast does a world model learn to see a game? World-model-only training on random data.

Collects ``--rows`` steps of ``--num-envs`` consoles under a uniform random policy, then trains
only the world model on random B x T windows for ``--seconds`` (a
:class:`~torchrl_dreamer.objectives.DreamerV3Learner` whose ``world_model_warmup`` never ends). Every ``--every`` steps it prints one JSON line: the reconstruction and reward
losses on held-out windows (the last two envs are never trained on) and the seconds so far.

On the shipped games the reconstruction loss sits on a plateau until the model starts to draw
the small sprites (the maze player, the catch block), then falls within a few hundred steps;
the reward loss only falls after that. This is the measurement behind the ``tiny`` preset's
CNN multiplier and the ``fast-pixels`` loss preset (``docs/learning_results.md``, runs at d41da4e)::

    python examples/world_model_probe.py --task maze --cnn-mult 4 --lr 3e-4
    python examples/world_model_probe.py --task maze --cnn-mult 8 --lr 1e-3
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
from tensordict import TensorDict

from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.modules import PRESETS, make_dreamer
from torchrl_dreamer.objectives import LEARNER_PRESETS, LOSS_PRESETS, DreamerV3Learner

KEYS = ("pixels", "action", "reward", "is_first", "terminated")


def collect(task: str, num_envs: int, rows: int, seed: int) -> dict[str, torch.Tensor]:
    """``rows`` time-major rows ``[rows, num_envs, ...]`` under uniform random actions."""
    env = GameBoyEnv(task, num_envs=num_envs, seed=seed)
    n_act = int(env.action_spec.space.n)
    g = torch.Generator().manual_seed(seed)
    out = {k: [] for k in KEYS}
    step = env.reset()  # row 0: the first observation of every env (is_first)
    step.set("reward", torch.zeros(num_envs, 1))
    action = torch.zeros(num_envs, dtype=torch.long)
    for t in range(rows):
        if t:
            step = env.fast_step(action)
        action = torch.randint(0, n_act, (num_envs,), generator=g)  # chosen after seeing o_t
        out["pixels"].append(step["pixels"].clone())
        out["reward"].append(step["reward"][:, 0])
        out["is_first"].append(step["is_first"][:, 0])
        out["terminated"].append(step["terminated"][:, 0])
        out["action"].append(action)
    data = {k: torch.stack(v) for k, v in out.items()}
    data["num_actions"] = torch.tensor(n_act)
    return data


def windows(data, envs: torch.Tensor, starts: torch.Tensor, T: int) -> TensorDict:
    """``[T, B]`` windows: env ``envs[b]`` from row ``starts[b]``."""
    idx = starts[:, None] + torch.arange(T)[None]
    return TensorDict({k: data[k][idx, envs[:, None]].transpose(0, 1) for k in KEYS}, [T, len(envs)])


def probe(data, cnn_mult: int, lr: float, seconds: float, every: int, batch: int, seq: int,
          seed: int = 0, max_steps: int | None = None) -> list[dict]:
    """Train the world model alone; returns (and prints) the held-out metrics every ``every``."""
    torch.manual_seed(seed)
    rows, n = data["action"].shape
    if n < 3 or rows < 2 * seq:
        raise ValueError(f"need >= 3 envs and >= {2 * seq} rows, got {n} envs x {rows} rows")
    cfg = PRESETS["tiny"].with_(cnn_mult=cnn_mult)
    nets = make_dreamer(cfg, {"pixels": "packed2"}, int(data["num_actions"]))
    loss_cfg = LOSS_PRESETS["fast-pixels"]
    optim = LEARNER_PRESETS["fast-pixels"].with_(wm_lr=lr, world_model_warmup=sys.maxsize)
    learner = DreamerV3Learner(*nets, loss_cfg, optim=optim)  # world-model steps only (optimizer, clipping)
    g = torch.Generator().manual_seed(seed)
    held = torch.tensor([n - 2, n - 1]).repeat_interleave(8)
    held_starts = torch.linspace(0, rows - seq - 1, 8).long().repeat(2)
    held_batch = windows(data, held, held_starts, seq)
    log, t0, step = [], time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds and (max_steps is None or step < max_steps):
        envs = torch.randint(0, n - 2, (batch,), generator=g)
        starts = torch.randint(0, rows - seq, (batch,), generator=g)
        learner.update(windows(data, envs, starts, seq))
        step += 1
        if step % every == 0:
            with torch.no_grad():
                ev = learner.world_model_loss(held_batch)
            rec = {"step": step, "seconds": round(time.perf_counter() - t0, 1),
                   "reconstruction": round(float(ev["loss_reconstruction"]), 3),
                   "reward": round(float(ev["loss_reward"]), 4)}
            log.append(rec)
            print(json.dumps(rec), flush=True)
    return log


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="maze")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--rows", type=int, default=2500, help="random steps per env")
    p.add_argument("--cnn-mult", type=int, default=PRESETS["tiny"].cnn_mult)
    p.add_argument("--lr", type=float, default=LEARNER_PRESETS["fast-pixels"].wm_lr)
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    data = collect(a.task, a.num_envs, a.rows, a.seed)
    return probe(data, a.cnn_mult, a.lr, a.seconds, a.every, a.batch_size, a.seq_len, a.seed,
                 a.max_steps)


if __name__ == "__main__":
    main()
