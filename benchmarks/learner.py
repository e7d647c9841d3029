"""Benchmark: one full DreamerV3 update (world model + actor + critic) vs TorchRL's DreamerV3Loss.

Both learners get the same network sizes (preset ``tiny`` and ``S``), the same batch
(B16 x T64 by default, 64x64 grey images, 8 discrete actions), horizon 15, three Adam optimizers
with the same clipping and a slow critic. TorchRL's conv layers need an odd kernel while ours
(sheeprl's) use 4: ``--peer-kernels 3`` (default, fewer FLOPs than ours: conservative) or ``5``. The peer is TorchRL 0.14.1's ``DreamerV3Loss`` built
from its own components (``RSSMPriorV3``/``RSSMPosteriorV3``/``RSSMRolloutV3``,
``DreamerV3ImageEncoder``/``Decoder``, ``DreamerV3MLP``, ``DreamerV3DiscreteActor``,
``DreamerEnv`` imagination), configured like the 2023 paper (separate KL 0.5/0.1 with free bits,
unimix 0.01, two-hot reward and critic, REINFORCE, slow-critic regulariser, no replay-value
term). It is not the same maths in every detail (RMSNorm, plain GRU, 2024 two-hot bins); the
comparison is of cost at equal sizes.

Run ``python benchmarks/learner.py`` (``--quick``: tiny only, fewer repeats). Prints one JSON line
per case: ``{"bench", "case", "ours", "peer", "unit", "speedup"}`` (seconds per update, median;
speedup > 1 means we are faster). Uses one torch thread; timings are process CPU time on CPU
(less sensitive to other jobs sharing the machine) and wall time on CUDA; the learners are timed
round-robin so both see the same background load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# benchmarks/ holds scripts named like packages (e.g. ray.py) that would shadow the real ones
# when this file is run as a script: drop this directory from the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402

from torchrl_dreamer.modules import PRESETS, make_dreamer  # noqa: E402
from torchrl_dreamer.objectives import DreamerV3Learner  # noqa: E402

A = 8
IMAGE = (1, 64, 64)


def _ours(preset: str, device: torch.device, amp: torch.dtype | None = None):
    wm, actor, critic = make_dreamer(preset, {"pixels": ("image", IMAGE)}, A)
    learner = DreamerV3Learner(
        wm.to(device), actor.to(device), critic.to(device), autocast_dtype=amp
    )

    def batch(T, B):
        return TensorDict(
            {
                "pixels": torch.randint(0, 256, (T, B, *IMAGE), dtype=torch.uint8),
                "action": torch.randint(A, (T, B)),
                "reward": torch.randn(T, B),
                "is_first": torch.rand(T, B) < 0.01,
                "continue_": torch.ones(T, B),
            },
            [T, B],
            device=device,
        )

    return learner.update, batch


class _BernoulliMode(torch.nn.Module):
    """Continue flag = mode of Bernoulli(logit), as in the 2023 imagination."""

    def forward(self, logit: torch.Tensor) -> torch.Tensor:
        return (logit > 0).float()


def _peer(preset: str, device: torch.device, kernel: int = 3, amp: torch.dtype | None = None):
    from torchrl.data import Composite, OneHot, Unbounded
    from torchrl.envs.model_based import DreamerEnv
    from torchrl.modules import RSSMPosteriorV3, RSSMPriorV3, RSSMRolloutV3, WorldModelWrapper
    from torchrl.modules.models.model_based import (
        DreamerV3ImageDecoder,
        DreamerV3ImageEncoder,
        DreamerV3MLP,
        SymExpTwoHot,
    )
    from torchrl.modules.tensordict_module.actors import DreamerV3DiscreteActor
    from torchrl.objectives import (
        DreamerV3ActorLoss,
        DreamerV3Loss,
        DreamerV3ModelLoss,
        DreamerV3ValueLoss,
        SoftUpdate,
    )
    from torchrl.objectives.utils import ValueEstimators

    cfg = PRESETS[preset]
    S, D, H, L = cfg.stoch * cfg.classes, cfg.deter, cfg.hidden, cfg.mlp_layers
    mults = tuple(2**i for i in range(cfg.cnn_stages))
    encoder = DreamerV3ImageEncoder(
        in_channels=1, depth=cfg.cnn_mult, mults=mults, kernel_size=kernel
    )
    E = encoder.output_features(IMAGE)
    prior_net = RSSMPriorV3(
        action_shape=(A,),
        hidden_dim=H,
        rnn_hidden_dim=D,
        num_categoricals=cfg.stoch,
        num_classes=cfg.classes,
        action_dim=A,
        prior_num_layers=1,
        unimix=0.01,
    )
    posterior_net = RSSMPosteriorV3(
        hidden_dim=H,
        num_categoricals=cfg.stoch,
        num_classes=cfg.classes,
        rnn_hidden_dim=D,
        obs_embed_dim=E,
        use_rms_norm=True,
        unimix=0.01,
    )
    prior = TensorDictModule(
        prior_net,
        in_keys=["state", "belief", "action"],
        out_keys=[("next", "prior_logits"), ("next", "state"), ("next", "belief")],
    )
    posterior = TensorDictModule(
        posterior_net,
        in_keys=[("next", "belief"), ("next", "encoded")],
        out_keys=[("next", "posterior_logits"), ("next", "state")],
    )
    decoder = DreamerV3ImageDecoder(
        S + D, image_shape=IMAGE, depth=cfg.cnn_mult, mults=mults, kernel_size=kernel
    )
    reward_net = DreamerV3MLP(S + D, 255, depth=L, num_cells=H, outscale=0.0)
    cont_net = DreamerV3MLP(S + D, 1, depth=L, num_cells=H)
    feats = [("next", "state"), ("next", "belief")]
    world_model = TensorDictSequential(
        TensorDictModule(encoder, in_keys=[("next", "pixels")], out_keys=[("next", "encoded")]),
        RSSMRolloutV3(prior, posterior, reset_key="is_init"),
        TensorDictModule(decoder, in_keys=feats, out_keys=[("next", "reco_pixels")]),
        TensorDictModule(reward_net, in_keys=feats, out_keys=[("next", "reward_logits")]),
        TensorDictModule(cont_net, in_keys=feats, out_keys=[("next", "continue_pred")]),
    ).to(device)
    two_hot = SymExpTwoHot(255).to(device)
    imagination = WorldModelWrapper(
        TensorDictModule(
            prior_net, in_keys=["state", "belief", "action"], out_keys=["_", "state", "belief"]
        ),
        TensorDictSequential(
            TensorDictModule(reward_net, in_keys=["state", "belief"], out_keys=["reward_logits"]),
            TensorDictModule(two_hot, in_keys=["reward_logits"], out_keys=["reward"]),
        ),
    )
    env = DreamerEnv(imagination, prior_shape=(S,), belief_shape=(D,), device=device)
    env.observation_spec = Composite(state=Unbounded(S), belief=Unbounded(D), device=device)
    env.state_spec = env.observation_spec.clone()
    env.action_spec = OneHot(A, device=device)
    env.reward_spec = Unbounded((1,), device=device)
    actor = DreamerV3DiscreteActor(S + D, A, depth=L, num_cells=H, unimix=0.01).to(device)
    value = TensorDictSequential(
        TensorDictModule(
            DreamerV3MLP(S + D, 255, depth=L, num_cells=H, outscale=0.0),
            in_keys=["state", "belief"],
            out_keys=["state_value_logits"],
        ),
        TensorDictModule(two_hot, in_keys=["state_value_logits"], out_keys=["state_value"]),
    ).to(device)
    continuation = TensorDictSequential(
        TensorDictModule(cont_net, in_keys=["state", "belief"], out_keys=["continuation_logit"]),
        TensorDictModule(
            _BernoulliMode(), in_keys=["continuation_logit"], out_keys=["continuation"]
        ),
    )
    model_loss = DreamerV3ModelLoss(
        world_model,
        kl_mode="separate",
        lambda_dynamic=0.5,
        lambda_representation=0.1,
        lambda_continue=1.0,
        unimix=0.01,
        free_bits=1.0,
        reco_symlog=False,
        reward_two_hot=True,
    )
    actor_loss = DreamerV3ActorLoss(
        actor,
        value,
        env,
        imagination_horizon=15,
        use_reinforce=True,
        continuation_model=continuation,
    )
    actor_loss.make_value_estimator(ValueEstimators.TDLambda, gamma=1 - 1 / 333, lmbda=0.95)
    value_loss = DreamerV3ValueLoss(
        value, value_loss="two_hot", actor_loss=actor_loss, slow_critic_regularization=1.0
    )
    target = SoftUpdate(value_loss, tau=0.02)
    loss = DreamerV3Loss(model_loss, actor_loss, value_loss, replay_value_loss_weight=0.0)
    groups = [
        (list(world_model.parameters()), 1e-4, 1e-8, 1000.0),
        (list(actor.parameters()), 3e-5, 1e-5, 100.0),
        (list(value_loss.value_model_params.values(True, True)), 3e-5, 1e-5, 100.0),
    ]
    opts = [(torch.optim.Adam(p, lr=lr, eps=eps), p, clip) for p, lr, eps, clip in groups]

    def update(sample):
        target.step()
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            out = loss(sample)
        total = sum(v for k, v in out.items() if isinstance(k, str) and k.startswith("loss_"))
        for opt, _, _ in opts:
            opt.zero_grad(set_to_none=True)
        total.sum().backward()
        for opt, params, clip in opts:
            torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
        return out

    def batch(T, B):
        return TensorDict(
            {
                "state": torch.zeros(B, T, S),
                "belief": torch.zeros(B, T, D),
                "action": torch.nn.functional.one_hot(torch.randint(A, (B, T)), A).float(),
                "is_init": torch.rand(B, T, 1) < 0.01,
                "next": {
                    "pixels": torch.randint(0, 256, (B, T, *IMAGE), dtype=torch.uint8),
                    "reward": torch.randn(B, T, 1),
                    "done": torch.zeros(B, T, 1, dtype=torch.bool),
                    "terminated": torch.zeros(B, T, 1, dtype=torch.bool),
                },
            },
            [B, T],
            device=device,
        )

    return update, batch


def _clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
        return time.perf_counter()
    return time.process_time()


def _time_interleaved(cases, repeats: int, device: torch.device) -> list[float]:
    """Median seconds per update of each ``(update, batch)``, measured round-robin.

    Interleaving the learners makes them share the same background load (the CPU here is
    shared with other jobs), which a back-to-back measurement would not.
    """
    for update, batch in cases:
        update(batch)  # warm-up (allocations, first hard copy of the slow critic)
    times = [[] for _ in cases]
    for _ in range(repeats):
        for i, (update, batch) in enumerate(cases):
            t = _clock(device)
            update(batch)
            times[i].append(_clock(device) - t)
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny only, 2 repeats")
    parser.add_argument("--presets", default=None, help="comma list (default tiny,S)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--peer-kernels",
        default="3",
        help="comma list of TorchRL conv kernel sizes to compare against (odd only; ours is 4)",
    )
    parser.add_argument("--bf16", action="store_true", help="run both learners under bf16 autocast")
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = torch.device(args.device)
    presets = (args.presets or ("tiny" if args.quick else "tiny,S")).split(",")
    repeats = 2 if args.quick else args.repeats
    amp = torch.bfloat16 if args.bf16 else None
    suffix = "_bf16" if args.bf16 else ""
    for preset in presets:
        kernels = [int(k) for k in args.peer_kernels.split(",")]
        torch.manual_seed(0)
        ours_update, ours_batch = _ours(preset, device, amp)
        cases = [(ours_update, ours_batch(args.seq, args.batch))]
        for kernel in kernels:
            torch.manual_seed(0)
            peer_update, peer_batch = _peer(preset, device, kernel, amp)
            cases.append((peer_update, peer_batch(args.seq, args.batch)))
        ours, *peers = _time_interleaved(cases, repeats, device)
        for kernel, peer in zip(kernels, peers):
            case = f"{preset}_B{args.batch}xT{args.seq}_{device.type}_peerk{kernel}{suffix}"
            print(
                json.dumps(
                    {
                        "bench": "learner_update",
                        "case": case,
                        "ours": round(ours, 4),
                        "peer": round(peer, 4),
                        "unit": "s/update",
                        "speedup": round(peer / ours, 3),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
