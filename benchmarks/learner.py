"""Benchmark: the DreamerV3 update -- ours vs the baseline tree and vs TorchRL's DreamerV3Loss.

Prints one JSON line per result: ``{"bench", "case", "ours", "peer", "unit", "speedup"}``
(``speedup > 1`` means ours beats the peer measured in the same run; for op counts it is
``peer / ours`` as well). Benches:

- ``maze_update``: seconds per update (wall clock, median) of the shipped maze configuration
  (``examples/dreamer_v3/config.yaml``: preset ``tiny``, packed2 72x80 frames, 5 actions, loss
  preset ``fast-pixels`` with gamma 0.98 and entropy 5e-3, batch 8 x T 32) at 1 and 2 torch
  threads. The peer is the same learner built from another git revision of this repository
  (``--baseline``, default ``main``), extracted with ``git archive`` into a temporary directory.
  Each learner runs in its own worker process and the parent alternates single updates between
  them, so both see the same background load of this shared machine.
- ``maze_compile``: with ``--compile MODE`` and/or ``--capture``, the same learner built with
  ``compile=MODE`` / ``capture=True`` (ours; on CUDA ``capture`` replays the whole update as one
  CUDA graph) against ours eager: seconds per update, the compile (or capture) time of the
  first updates and the kernel launches per update (:func:`count_launches`, which sees compiled
  kernels and graph launches too).
- ``learner_profile``: per-phase wall time of a maze update (``torch.profiler`` over the
  learner's ``record_function`` phase labels -- world model, imagination, actor, critic; forward,
  backward, optimiser) for ours and the baseline, plus totals per kind (``all/...``); one thread
  by default (``--profile-threads``), median of alternating rounds (``--profile-rounds``).
  Phases a revision does not have (e.g. separate actor and critic backward passes) show
  ``null`` on the other side; compare the ``all/`` totals.
- ``aten_ops``: dispatched aten ops per update (a ``TorchDispatchMode`` counter), all of them
  and those that are not views (our proxy for GPU kernel launches), ours vs the baseline on the
  maze configuration, and ours vs TorchRL's ``DreamerV3Loss`` at equal sizes (preset ``tiny``,
  B8xT32 64x64 grey images, 8 actions); with ``--compile MODE`` also ours compiled vs TorchRL
  in kernel launches counted the same way for both (:func:`count_launches`); with ``--device
  cuda`` also the CUDA launches per update of both, ours with ``capture=True`` under
  ``--capture`` (this line has not yet run on a GPU).
- ``learner_update``: seconds per update vs TorchRL's ``DreamerV3Loss`` at equal sizes (one
  thread, process CPU time on CPU, wall time after a device sync on CUDA, B16 x T64 by
  default); ``--peer-presets`` picks the presets, ``--capture`` builds ours with
  ``capture=True``.

The TorchRL peer gets the same network sizes, the same batch, horizon 15, three Adam optimizers
with the same clipping and a slow critic. TorchRL's conv layers need an odd kernel while ours
(sheeprl's) use 4: ``--peer-kernels 3`` (default, fewer FLOPs than ours: conservative) or ``5``.
The peer is TorchRL 0.14.1's ``DreamerV3Loss`` built from its own components
(``RSSMPriorV3``/``RSSMPosteriorV3``/``RSSMRolloutV3``, ``DreamerV3ImageEncoder``/``Decoder``,
``DreamerV3MLP``, ``DreamerV3DiscreteActor``, ``DreamerEnv`` imagination), configured like the
2023 paper (separate KL 0.5/0.1 with free bits, unimix 0.01, two-hot reward and critic,
REINFORCE, slow-critic regulariser, no replay-value term). It is not the same maths in every
detail (RMSNorm, plain GRU, 2024 two-hot bins); the comparison is of cost at equal sizes.

Run ``python benchmarks/learner.py`` (everything; several minutes on 2 cores) or pick benches,
e.g. ``python benchmarks/learner.py --benches maze,ops --repeats 20``; ``--quick`` shortens it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

# benchmarks/ holds scripts named like packages (e.g. ray.py) that would shadow the real ones
# when this file is run as a script: drop this directory from the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
# Import the package of the tree to measure: this checkout, or the one a worker is pointed at
# (an editable install elsewhere would otherwise win over the working tree).
_TREE = sys.argv[sys.argv.index("--worker") + 1] if "--worker" in sys.argv else os.path.dirname(_HERE)
sys.path.insert(0, os.path.abspath(_TREE))

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from torchrl_dreamer.modules import PRESETS, make_dreamer  # noqa: E402
from torchrl_dreamer.objectives import DreamerV3Learner  # noqa: E402

A = 8
IMAGE = (1, 64, 64)


def _ours(preset: str, device: torch.device, amp: torch.dtype | None = None,
          compile: str | None = None, capture: bool = False):
    wm, actor, critic = make_dreamer(preset, {"pixels": ("image", IMAGE)}, A)
    learner = DreamerV3Learner(
        wm.to(device), actor.to(device), critic.to(device), autocast_dtype=amp, compile=compile,
        capture=capture,
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
    env.observation_spec = Composite(state=Unbounded(S, device=device),
                                     belief=Unbounded(D, device=device), device=device)
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
    for update, batch in cases:  # warm-up (allocations, the slow critic's first hard copy,
        for _ in range(3):        # and the eager updates and capture of capture=True)
            update(batch)
    times = [[] for _ in cases]
    for _ in range(repeats):
        for i, (update, batch) in enumerate(cases):
            t = _clock(device)
            update(batch)
            times[i].append(_clock(device) - t)
    return [statistics.median(t) for t in times]


class OpCounter(TorchDispatchMode):
    """Counts the aten ops dispatched while active (forward, backward and optimiser alike).

    Every dispatched op that is not a view is one kernel launch on a GPU, so ``kernels`` is a
    device-free proxy for launch overhead; ``total`` also counts views (``slice``, ``t``,
    ``detach``, ...), which only make tensor metadata.
    """

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        if func.namespace == "aten" and not func.is_view:
            self.kernels += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def count_ops(update, batch) -> tuple[int, int]:
    """``(all dispatched aten ops, those that are not views)`` of one ``update(batch)``
    (after a warm-up update)."""
    update(batch)
    with OpCounter() as counter:
        update(batch)
    return counter.total, counter.kernels


#: aten ops that run no kernel: views and aliases (tensor metadata), allocations, and
#: conversions that found nothing to convert
_NO_KERNEL_OPS = frozenset(
    "alias as_strided chunk contiguous detach expand expand_as flatten lift_fresh movedim "
    "narrow permute reshape resolve_conj resolve_neg select slice split split_with_sizes "
    "squeeze squeeze_ t transpose unbind unflatten unsqueeze unsqueeze_ view view_as "
    "_reshape_alias _unsafe_view empty empty_like empty_strided resize_ to type_as "
    "set_ item _local_scalar_dense".split()
)
#: units of the :func:`count_launches` lines, on a CPU and on CUDA
_LAUNCH_UNIT = "kernel launches/update (profiler: kernel-running aten ops + compiled kernels)"
_CUDA_LAUNCH_UNIT = "CUDA launches/update (runtime API: kernels, graphs, copies, fills)"
#: CUDA runtime calls that put work on a stream (a kernel, a captured graph, a copy, a fill)
_CUDA_LAUNCHES = frozenset(
    "cudaLaunchKernel cudaLaunchKernelExC cuLaunchKernel cuLaunchKernelEx cudaGraphLaunch "
    "cudaMemcpyAsync cudaMemsetAsync".split()
)


def count_launches(update, batch, device: str = "cpu") -> int:
    """Kernel launches of one ``update(batch)`` (after a warm-up update), counted from a
    ``torch.profiler`` trace, so that compiled code counts too (its fused kernels are not aten
    ops; a dispatch counter would not see them).

    On CUDA: the runtime's kernel, graph, copy and fill launches. On a CPU: every aten op that
    runs a kernel of its own: an op counts as the kernels of the aten ops inside it, or as one
    when those run none, unless it is a view, an allocation or a conversion that found nothing
    to convert (``_NO_KERNEL_OPS``; ``linear`` counts as its ``addmm``, ``to`` as its
    ``copy_``, ``cat`` as itself though it allocates with ``empty`` inside), plus every kernel
    a compiled graph runs (``torch._inductor.config.cpp.enable_kernel_profile`` must be on when
    it compiles, so that each kernel is a trace event). The same count applies to every
    learner compared.
    """
    from torch.profiler import ProfilerActivity, profile

    update(batch)
    _sync(device)
    activities = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        update(batch)
        _sync(device)
    events = prof.events()
    if device.startswith("cuda"):
        return sum(ev.name in _CUDA_LAUNCHES for ev in events)
    children: dict[int, list] = collections.defaultdict(list)
    top = []
    for ev in events:
        if not ev.name.startswith("aten::"):
            continue
        parent = ev.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        (top if parent is None else children[parent.id]).append(ev)

    def kernels(ev) -> int:
        """Kernels run inside aten op ``ev``: its children's, or its own when they run none."""
        inner = sum(kernels(child) for child in children[ev.id])
        return inner or int(ev.name[6:] not in _NO_KERNEL_OPS)

    return sum(kernels(ev) for ev in top) + sum("cpp_fused" in ev.name for ev in events)


def _emit(bench: str, case: str, ours: float | None, peer: float | None, unit: str,
          lower_is_better: bool = True) -> None:
    speed = None
    if ours and peer:
        speed = round(peer / ours if lower_is_better else ours / peer, 3)
    print(json.dumps({"bench": bench, "case": case,
                      "ours": None if ours is None else round(ours, 5),
                      "peer": None if peer is None else round(peer, 5),
                      "unit": unit, "speedup": speed}), flush=True)


# ---------------------------------------------------------------- maze workers
MAZE_ACTIONS = 5  # the maze's "dpad" action set


def _maze_learner(
    batch_size: int, seq_len: int, learner_kwargs: dict[str, Any], device: str = "cpu"
):
    """The shipped maze learner (examples/dreamer_v3/config.yaml) and a replay-like batch."""
    from torchrl_dreamer.modules import make_dreamer as make
    from torchrl_dreamer.objectives import LOSS_PRESETS
    from torchrl_dreamer.objectives import DreamerV3Learner as Learner

    torch.manual_seed(0)
    wm, actor, critic = make("tiny", {"pixels": "packed2"}, MAZE_ACTIONS)
    wm, actor, critic = wm.to(device), actor.to(device), critic.to(device)
    cfg = LOSS_PRESETS["fast-pixels"].with_(gamma=0.98, entropy_coef=0.005)
    if "optim" in inspect.signature(Learner).parameters:  # optimiser settings moved (issue 19)
        learner_kwargs = {"optim": "fast-pixels", **learner_kwargs}
    learner = Learner(wm, actor, critic, cfg, **learner_kwargs)
    T, B = seq_len, batch_size
    g = torch.Generator().manual_seed(0)
    batch = TensorDict(
        {
            "pixels": torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8, generator=g),
            "action": torch.randint(MAZE_ACTIONS, (T, B), generator=g),
            "reward": (torch.rand(T, B, generator=g) < 0.05).float(),
            "is_first": torch.rand(T, B, generator=g) < 0.01,
            "continue_": torch.ones(T, B),
            "terminated": torch.zeros(T, B, dtype=torch.bool),
        },
        [T, B],
        device=device,
    )
    return learner, batch


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


_PHASE_PREFIX = ("world_model/", "actor/", "critic/", "actor_critic/")


@contextlib.contextmanager
def _labelled_baseline(learner):
    """Phase labels for a learner that has none (a tree older than the labels): wraps its
    loss modules and ``_step`` in the same ``record_function`` names ours uses."""
    from torch.profiler import record_function

    if getattr(learner, "PROFILE_PHASES", None):
        yield
        return

    def wrap(obj, name, label):
        fn = getattr(obj, name)

        def inner(*a, **k):
            with record_function(label):
                return fn(*a, **k)

        setattr(obj, name, inner)

    wrap(learner.world_model_loss, "forward", "world_model/forward")
    wrap(learner.actor_loss, "forward", "actor/forward")
    wrap(learner.actor_loss, "imagine", "actor/imagination")
    wrap(learner.critic_loss, "forward", "critic/forward")
    names = {id(learner.wm_opt): "world_model", id(learner.actor_opt): "actor",
             id(learner.critic_opt): "critic"}

    def step(loss, opt, module, clip):
        name = names[id(opt)]
        with record_function(f"{name}/backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with record_function(f"{name}/optimizer"):
            norm = torch.nn.utils.clip_grad_norm_(module.parameters(), clip, foreach=True)
            opt.step()
        return norm.detach()

    learner._step = step
    yield


def _profile(learner, batch, updates: int = 3) -> dict[str, float]:
    """Mean seconds per update of every phase label (self time of nested labels removed)."""
    from torch.profiler import ProfilerActivity, profile

    with _labelled_baseline(learner), profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(updates):
            learner.update(batch)
    out: dict[str, float] = {}
    for ev in prof.key_averages():
        if ev.key.startswith(_PHASE_PREFIX):
            out[ev.key] = ev.cpu_time_total / 1e6 / updates
    if "actor/forward" in out and "actor/imagination" in out:
        out["actor/forward"] -= out["actor/imagination"]  # reported apart
    kinds: dict[str, float] = collections.defaultdict(float)
    for key, value in list(out.items()):
        kind = key.split("/")[-1]
        kinds["all/" + ("forward" if kind == "imagination" else kind)] += value
    out.update(kinds)
    return out


def _worker() -> None:
    """Line protocol on stdin/stdout: one JSON command in, one JSON answer out."""
    _trace_compiled_kernels()
    learner = batch = None
    device = "cpu"
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "build":
            torch.set_num_threads(cmd["threads"])
            device = cmd.get("device", "cpu")
            learner, batch = _maze_learner(
                cmd["batch"], cmd["seq"], cmd.get("kwargs", {}), device
            )
            times = []
            for _ in range(cmd.get("warmup", 2)):
                t = time.perf_counter()
                learner.update(batch)
                _sync(device)
                times.append(time.perf_counter() - t)
            ans: Any = times
        elif op == "threads":
            torch.set_num_threads(cmd["threads"])
            learner.update(batch)
            ans = None
        elif op == "time":
            _sync(device)
            t, c = time.perf_counter(), time.process_time()
            learner.update(batch)
            _sync(device)
            ans = [time.perf_counter() - t, time.process_time() - c]
        elif op == "ops":
            ans = count_ops(learner.update, batch)
        elif op == "launches":
            ans = count_launches(learner.update, batch, device)
        elif op == "profile":
            ans = _profile(learner, batch)
        else:
            raise ValueError(op)
        print(json.dumps(ans), flush=True)


class _Worker:
    """A worker process measuring the package of one source tree."""

    def __init__(self, tree: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", tree],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def __call__(self, **cmd) -> Any:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker died on {cmd}")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _extract(ref: str, dest: str) -> str:
    """``git archive ref torchrl_dreamer`` unpacked under ``dest``; returns ``dest``."""
    root = os.path.dirname(_HERE)
    archive = subprocess.run(["git", "-C", root, "archive", ref, "torchrl_dreamer"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest


def _alternate(workers: list[_Worker], repeats: int) -> tuple[list[float], list[float]]:
    """Median (wall, process CPU) seconds per update of each worker, alternating updates."""
    wall: list[list[float]] = [[] for _ in workers]
    cpu: list[list[float]] = [[] for _ in workers]
    for _ in range(repeats):
        for i, w in enumerate(workers):
            t = w(op="time")
            wall[i].append(t[0])
            cpu[i].append(t[1])
    return [statistics.median(t) for t in wall], [statistics.median(t) for t in cpu]


def _maze_benches(args, benches: set[str]) -> None:
    root = os.path.dirname(_HERE)
    case = f"maze_tiny_B{args.maze_batch}xT{args.maze_seq}_{args.device}"
    with tempfile.TemporaryDirectory() as tmp:
        trees = [root]
        if args.baseline != "none":
            trees.append(_extract(args.baseline, tmp))
        workers = [_Worker(t) for t in trees]
        threads = [int(t) for t in args.threads.split(",")]
        build = dict(op="build", batch=args.maze_batch, seq=args.maze_seq, threads=threads[0],
                     device=args.device)
        for w in workers:
            w(**build)
        peer_name = f"baseline:{args.baseline}"
        if "maze" in benches:
            for n in threads:
                for w in workers:
                    w(op="threads", threads=n)
                wall, cpu = _alternate(workers, args.repeats)
                for name, t in (("wall", wall), ("process CPU", cpu)):
                    _emit("maze_update", f"{case}_threads{n}_vs_{peer_name}", t[0],
                          t[1] if len(t) > 1 else None, f"s/update ({name}, median)")
        if "ops" in benches:
            ops = [w(op="ops") for w in workers]
            peer = ops[1] if len(ops) > 1 else (None, None)
            _emit("aten_ops", f"{case}_vs_{peer_name}", ops[0][0], peer[0], "aten ops/update")
            _emit("aten_ops", f"{case}_non_view_vs_{peer_name}", ops[0][1], peer[1],
                  "non-view aten ops (kernel launches)/update")
        if "profile" in benches:
            n = args.profile_threads
            for w in workers:
                w(op="threads", threads=n)
            profs: list[dict[str, float]] = [{} for _ in workers]
            samples = [collections.defaultdict(list) for _ in workers]
            for _ in range(args.profile_rounds):  # alternating, median per phase
                for i, w in enumerate(workers):
                    for key, value in w(op="profile").items():
                        samples[i][key].append(value)
            profs = [{k: statistics.median(v) for k, v in s.items()} for s in samples]
            peer_prof = profs[1] if len(profs) > 1 else {}
            for key in sorted(set(profs[0]) | set(peer_prof)):
                _emit("learner_profile", f"{case}_threads{n}_{key}_vs_{peer_name}",
                      profs[0].get(key), peer_prof.get(key), "s/update (profiler, median)")
        for w in workers:
            w.close()
        if "compile" in benches and (args.compile or args.capture):
            compiled, plain = _Worker(root), _Worker(root)
            n = threads[-1]
            kwargs = {"compile": args.compile, "capture": args.capture}
            label = f"compile={args.compile}" + ("_capture" if args.capture else "")
            warm = compiled(op="build", batch=args.maze_batch, seq=args.maze_seq, threads=n,
                            kwargs=kwargs, warmup=3, device=args.device)
            plain(op="build", batch=args.maze_batch, seq=args.maze_seq, threads=n, warmup=3,
                  device=args.device)
            (ours, peer), _ = _alternate([compiled, plain], args.repeats)
            _emit("maze_compile", f"{case}_threads{n}_{label}_vs_eager", ours,
                  peer, "s/update (wall, median)")
            _emit("maze_compile", f"{case}_threads{n}_{label}_first_3_updates",
                  sum(warm), None, "s (compile + 3 updates)")
            # updates after which compiling has paid for itself (None: it never does)
            gain = peer - ours
            extra = sum(warm) - 3 * ours
            _emit("maze_compile", f"{case}_threads{n}_{label}_break_even",
                  extra / gain if gain > 0 else None, None, "updates")
            _emit("maze_compile", f"{case}_{label}_launches_vs_eager",
                  compiled(op="launches"), plain(op="launches"),
                  _CUDA_LAUNCH_UNIT if args.device.startswith("cuda") else _LAUNCH_UNIT)
            compiled.close()
            plain.close()


def _trace_compiled_kernels() -> None:
    """Make every kernel of CPU code compiled from here on a profiler event
    (:func:`count_launches`)."""
    import torch._inductor.config

    torch._inductor.config.cpp.enable_kernel_profile = True


def _torchrl_ops(args) -> None:
    device = torch.device("cpu")
    T, B = args.maze_seq, args.maze_batch
    torch.manual_seed(0)
    ours_update, ours_batch = _ours("tiny", device)
    torch.manual_seed(0)
    peer_update, peer_batch = _peer("tiny", device, 3)
    ours = count_ops(ours_update, ours_batch(T, B))
    peer = count_ops(peer_update, peer_batch(T, B))
    _emit("aten_ops", f"tiny_B{B}xT{T}_64x64_vs_torchrl_DreamerV3Loss", ours[0], peer[0],
          "aten ops/update")
    _emit("aten_ops", f"tiny_B{B}xT{T}_64x64_non_view_vs_torchrl_DreamerV3Loss", ours[1],
          peer[1], "non-view aten ops (kernel launches)/update")
    if args.compile:  # launches of ours compiled (profiler count) vs TorchRL's, counted alike
        _trace_compiled_kernels()
        torch.manual_seed(0)
        compiled_update, _ = _ours("tiny", device, compile=args.compile)
        compiled_update(ours_batch(T, B))  # compiles
        _emit("aten_ops", f"tiny_B{B}xT{T}_64x64_compile={args.compile}_launches_vs_torchrl_"
              "DreamerV3Loss", count_launches(compiled_update, ours_batch(T, B)),
              count_launches(peer_update, peer_batch(T, B)),
              _LAUNCH_UNIT)
    if args.device.startswith("cuda"):  # launches on the GPU, counted by the CUDA runtime
        gpu = torch.device(args.device)
        torch.manual_seed(0)
        ours_update, ours_batch = _ours("tiny", gpu, capture=args.capture)
        torch.manual_seed(0)
        peer_update, peer_batch = _peer("tiny", gpu, 3)
        for _ in range(3):  # warm-up (and the capture of capture=True)
            ours_update(ours_batch(T, B))
            peer_update(peer_batch(T, B))
        tag = "_capture" if args.capture else ""
        _emit("aten_ops", f"tiny_B{B}xT{T}_64x64_{gpu.type}{tag}_launches_vs_torchrl_"
              "DreamerV3Loss", count_launches(ours_update, ours_batch(T, B), args.device),
              count_launches(peer_update, peer_batch(T, B), args.device), _CUDA_LAUNCH_UNIT)


def _torchrl_time(args) -> None:
    torch.set_num_threads(1)
    device = torch.device(args.device)
    presets = args.peer_presets.split(",")
    amp = torch.bfloat16 if args.bf16 else None
    suffix = ("_bf16" if args.bf16 else "") + ("_capture" if args.capture else "")
    for preset in presets:
        kernels = [int(k) for k in args.peer_kernels.split(",")]
        torch.manual_seed(0)
        ours_update, ours_batch = _ours(preset, device, amp, capture=args.capture)
        cases = [(ours_update, ours_batch(args.seq, args.batch))]
        for kernel in kernels:
            torch.manual_seed(0)
            peer_update, peer_batch = _peer(preset, device, kernel, amp)
            cases.append((peer_update, peer_batch(args.seq, args.batch)))
        ours, *peers = _time_interleaved(cases, args.peer_repeats, device)
        for kernel, peer in zip(kernels, peers):
            case = f"{preset}_B{args.batch}xT{args.seq}_{device.type}_peerk{kernel}{suffix}"
            clock = "wall after a device sync" if device.type == "cuda" else "process CPU"
            _emit("learner_update", case, ours, peer, f"s/update ({clock}, median)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benches", default="maze,ops,profile,compile,torchrl",
                        help="comma list of maze, ops, profile, compile, torchrl")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, tiny only")
    parser.add_argument("--baseline", default="main",
                        help="git revision to compare the maze learner with ('none': skip)")
    parser.add_argument("--threads", default="1,2", help="torch threads of the maze benches")
    parser.add_argument("--repeats", type=int, default=15, help="timed maze updates per learner")
    parser.add_argument("--profile-threads", type=int, default=1,
                        help="torch threads of the profile (1: least sensitive to other load)")
    parser.add_argument("--profile-rounds", type=int, default=3,
                        help="profiled rounds (3 updates each) per learner, alternating")
    parser.add_argument("--maze-batch", type=int, default=8)
    parser.add_argument("--maze-seq", type=int, default=32)
    parser.add_argument("--compile", default=None,
                        help="also time DreamerV3Learner(compile=MODE) against eager, e.g. "
                             "'default' or 'reduce-overhead'")
    parser.add_argument("--capture", action="store_true",
                        help="pass capture=True (the whole-update CUDA graph) to ours in the "
                             "compile bench (alone or with --compile) and the TorchRL timing")
    parser.add_argument("--peer-presets", default="tiny,S", help="presets of the TorchRL timing")
    parser.add_argument("--batch", type=int, default=16, help="batch of the TorchRL timing")
    parser.add_argument("--seq", type=int, default=64, help="sequence of the TorchRL timing")
    parser.add_argument("--peer-repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--peer-kernels",
        default="3",
        help="comma list of TorchRL conv kernel sizes to compare against (odd only; ours is 4)",
    )
    parser.add_argument("--bf16", action="store_true", help="TorchRL timing under bf16 autocast")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.peer_repeats, args.peer_presets = 5, 2, "tiny"
    benches = set(args.benches.split(","))
    unknown = benches - {"maze", "ops", "profile", "compile", "torchrl"}
    if unknown:
        parser.error(f"unknown benches {sorted(unknown)}")
    if benches & {"maze", "ops", "profile", "compile"}:
        _maze_benches(args, benches)
    if "ops" in benches:
        torch.set_num_threads(1)
        _torchrl_ops(args)
    if "torchrl" in benches:
        _torchrl_time(args)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        _worker()
    else:
        main()
