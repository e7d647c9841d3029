"""Example: a research variant of the DreamerV3 losses through the override hooks.

Two changes, each one overridden method, everything else (RSSM scan, imagination, optimizers,
slow critic) stays the reference implementation:

- ``HuberWorldModelLoss.reconstruction_loss``: Huber (smooth-L1) instead of squared error,
  still summed over pixels / features.
- ``NStepActorLoss.return_estimate``: n-step bootstrapped returns instead of lambda-returns.

Run: ``python examples/loss_variant.py --steps 5`` (synthetic data, CPU, a few seconds).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl_dreamer.modules import PRESETS, make_dreamer
from torchrl_dreamer.objectives import (
    DreamerV3ActorLoss,
    DreamerV3Learner,
    DreamerV3LossConfig,
    DreamerV3WorldModelLoss,
)


class HuberWorldModelLoss(DreamerV3WorldModelLoss):
    """World-model loss with a Huber reconstruction term (``delta`` = 1)."""

    def reconstruction_loss(self, recon, targets):
        total = 0.0
        for k, x in recon.items():
            err = F.smooth_l1_loss(x.float(), targets[k], reduction="none")
            nd = len(self.world_model.decoders[k].shape)
            total = total + err.sum(tuple(range(-nd, 0)))
        return total


class NStepActorLoss(DreamerV3ActorLoss):
    """Actor loss whose returns are n-step bootstrapped returns (``n`` = 5)."""

    n: int = 5

    def return_estimate(self, rewards, values, continues):
        r, v, c = rewards[1:], values[1:], continues[1:] * self.config.gamma
        H = r.shape[0]
        out = []
        for t in range(H):
            end = min(t + self.n, H)
            ret, disc = torch.zeros_like(r[0]), torch.ones_like(r[0])
            for k in range(t, end):
                ret = ret + disc * r[k]
                disc = disc * c[k]
            out.append(ret + disc * v[end - 1])
        return torch.stack(out, 0)


def synthetic_batch(T: int, B: int, obs_dim: int, action_dim: int) -> TensorDict:
    """A random time-major replay sample following the data contract."""
    return TensorDict(
        {
            "obs": torch.randn(T, B, obs_dim),
            "action": torch.randint(action_dim, (T, B)),
            "reward": torch.randn(T, B),
            "is_first": torch.rand(T, B) < 0.05,
            "continue_": torch.ones(T, B),
        },
        [T, B],
    )


def main(steps: int = 5, seed: int = 0) -> list[dict[str, float]]:
    """Train the variant for ``steps`` updates on synthetic data; returns the metrics."""
    torch.manual_seed(seed)
    cfg = PRESETS["tiny"].with_(deter=32, hidden=32, stoch=8, classes=8)
    wm, actor, critic = make_dreamer(cfg, {"obs": ("vector", 6)}, action_dim=4)
    learner = DreamerV3Learner(
        wm,
        actor,
        critic,
        DreamerV3LossConfig().with_(horizon=8),
        world_model_loss_cls=HuberWorldModelLoss,
        actor_loss_cls=NStepActorLoss,
    )
    history = []
    for _ in range(steps):
        m = learner.update(synthetic_batch(16, 4, 6, 4))
        history.append({k: float(v) for k, v in m.items()})
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for i, m in enumerate(main(args.steps)):
        print(i, {k: round(v, 4) for k, v in m.items() if k.startswith("loss_")})
