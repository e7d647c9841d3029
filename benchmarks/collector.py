"""Collector throughput: threaded and cuda vs reference backend, same config, same run.

Prints one JSON line per result: env steps/s (ours = threaded, peer = reference, speedup =
threaded / reference), the same for the ``cuda`` backend (the real one with ``--device cuda``;
on a CPU its twin ``cuda-twin``: the same stream/event code path over host streams, unchecked,
so that it costs what the backend costs) at equal gradient steps (a line says both counts), its
overlap efficiency (busy intervals timed by stream events on a GPU), and, per backend, the
achieved replay ratio (ours) against the target (peer); there ``speedup`` is achieved / target,
1.0 being exact.

Both backends run the real pieces (``TimeMajorStorage``, ``ChronologicalSliceSampler``,
``DreamerPlayer``, ``DreamerV3Learner`` with the ``tiny`` preset). The env is ``GameBoyEnv``
("maze", packed2 pixels) when ``--env gameboy`` and the emulator is available; by default it is
``BusyEnv``, a deferred-reset env whose step burns a fixed amount of CPU in torch kernels (like an
emulator step on CPU: native code that releases the GIL), calibrated to ``--env-ms`` per env step;
``--env sleep`` makes the step wait instead (a latency-bound env, e.g. one waiting on a device),
which shows the overlap even when other processes leave this one less than a core.
The reference backend alternates actor and learner in one thread; the threaded backend overlaps
them on two threads, so on 2 cores the best speedup is ``(A + L) / max(A, L)`` for actor time A
and learner time L per window.

    python benchmarks/collector.py            # full
    python benchmarks/collector.py --quick    # ~1 minute
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Running ``python benchmarks/collector.py`` puts benchmarks/ first on sys.path, where sibling
# scripts (e.g. benchmarks/ray.py) would shadow real packages that torchrl imports. This script
# imports nothing from benchmarks/, so drop that entry.
sys.path[:] = [p for p in sys.path
               if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from torchrl.data import Categorical, Composite, Unbounded  # noqa: E402
from torchrl.envs import EnvBase  # noqa: E402

from torchrl_dreamer.collectors import AsyncCollectorConfig, AsyncDreamerCollector  # noqa: E402
from torchrl_dreamer.collectors.metrics import OverlapMeter  # noqa: E402
from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage  # noqa: E402
from torchrl_dreamer.modules import DreamerPlayer, make_dreamer  # noqa: E402
from torchrl_dreamer.objectives import DreamerV3Learner  # noqa: E402


class BusyEnv(EnvBase):
    """Deferred-reset random-walk env; each step runs ``work`` 512x512 matmuls (CPU cost).

    The matmuls are large enough that torch releases the GIL for nearly all of the env's time,
    as a native env does (the Warp emulator's launches run in C through ctypes, GIL released);
    small ops would instead measure GIL contention between the actor and learner threads.
    """

    def __init__(self, num_envs: int, work: int, max_steps: int = 50, sleep_s: float = 0.0,
                 device: str = "cpu"):
        super().__init__(batch_size=torch.Size([num_envs]), device=device)
        n, dev = num_envs, self.device
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool, device=dev)
        self.observation_spec = Composite(obs=Unbounded(shape=(n, 8), device=dev),
                                          is_first=flag.clone(), shape=(n,), device=dev)
        self.action_spec = Categorical(4, shape=(n,), dtype=torch.int64, device=dev)
        self.reward_spec = Unbounded(shape=(n, 1), device=dev)
        self.done_spec = Composite(done=flag.clone(), terminated=flag.clone(),
                                   truncated=flag.clone(), shape=(n,), device=dev)
        self._torchrl_native_autoreset = True
        self.work, self.max_steps, self.sleep_s = work, max_steps, sleep_s
        self._a = torch.randn(512, 512, device=dev) / 512 ** 0.5
        self._x = torch.zeros(n, 8, device=dev)
        self._t = torch.zeros(n, dtype=torch.long, device=dev)
        self._pending = torch.zeros(n, dtype=torch.bool, device=dev)

    def _burn(self) -> None:
        if self.sleep_s > 0:  # latency-bound env (e.g. waiting on a device): no CPU used
            time.sleep(self.sleep_s)
            return
        y = self._a
        for _ in range(self.work):
            y = torch.tanh(y @ self._a)

    def _out(self, reward, term, trunc, first):
        return TensorDict({"obs": self._x.clone(), "reward": reward.reshape(-1, 1),
                           "terminated": term.reshape(-1, 1), "truncated": trunc.reshape(-1, 1),
                           "done": (term | trunc).reshape(-1, 1), "is_first": first.reshape(-1, 1)},
                          batch_size=self.batch_size, device=self.device)

    def _reset(self, tensordict=None, **kwargs):
        n = self.batch_size[0]
        self._x.zero_()
        self._t.zero_()
        self._pending.zero_()
        no = torch.zeros(n, dtype=torch.bool)
        out = self._out(torch.zeros(n), no, no, torch.ones(n, dtype=torch.bool))
        del out["reward"]
        return out

    def _step(self, tensordict):
        self._burn()
        a = tensordict.get("action").reshape(-1)
        first = self._pending.clone()
        self._x = torch.where(first[:, None], 0.0,
                              self._x + torch.nn.functional.one_hot(a, 8).float() * 0.1)
        self._t = torch.where(first, 0, self._t + 1)
        term = (self._x[:, 0] > 0.5) & ~first
        trunc = (self._t >= self.max_steps) & ~term & ~first
        self._pending = term | trunc
        return self._out(term.float(), term, trunc, first)

    def _set_seed(self, seed):
        return seed


def calibrate_work(ms: float, device: str = "cpu") -> int:
    """Matmul count whose run takes about ``ms`` milliseconds on this machine (now)."""
    env = BusyEnv(1, 50, device=device)
    env._burn()
    if env.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    env._burn()
    if env.device.type == "cuda":
        torch.cuda.synchronize()
    per = (time.perf_counter() - start) / 50
    return max(1, round(ms / 1000.0 / per))


def make_env(kind: str, num_envs: int, work: int, device: str = "cpu"):
    if kind == "gameboy":
        from torchrl_dreamer.data import dreamer_schema
        from torchrl_dreamer.envs import GameBoyEnv

        env = GameBoyEnv("maze", num_envs=num_envs, device=device)
        return env, {"pixels": "packed2"}, dreamer_schema()
    if kind == "sleep":
        env = BusyEnv(num_envs, 0, sleep_s=work / 1e6, device=device)
    else:
        env = BusyEnv(num_envs, work, device=device)
    return env, {"obs": ("vector", 8)}, None


def build(backend: str, args, work: int) -> AsyncDreamerCollector:
    torch.manual_seed(0)
    cfg = AsyncCollectorConfig(
        steps_per_rollout=args.steps_per_rollout, commit_stride=args.commit_stride,
        seq_len=args.seq_len, batch_size=args.batch_size, replay_ratio=args.replay_ratio,
        learning_starts=args.learning_starts, min_ready_steps=args.seq_len,
        safety_margin=args.seq_len, max_learner_steps_per_tick=args.max_tick, log_every=10,
        backend=backend, seed=0, timeout_s=300.0, off_policy_tolerance=2.0,
        device=args.device,
    )
    env, obs, spec = make_env(args.env, args.num_envs, work, args.device)
    action_dim = int(env.action_spec.space.n)
    storage = TimeMajorStorage(args.capacity, args.num_envs, spec=spec, auto_commit=False,
                               safety_margin=cfg.safety_margin, device=args.device)
    sampler = ChronologicalSliceSampler(slice_len=cfg.seq_len,
                                        generator=torch.Generator().manual_seed(0))
    wm, actor, critic = make_dreamer("tiny", obs, action_dim=action_dim)
    wm, actor, critic = wm.to(args.device), actor.to(args.device), critic.to(args.device)
    learner = DreamerV3Learner(wm, actor, critic, capture=args.capture)
    player = DreamerPlayer(wm, actor, num_envs=args.num_envs)
    c = AsyncDreamerCollector(env, storage, sampler, player, learner, cfg)
    if backend == "cuda-twin":  # time the code path, not the twin's checker
        c.stream_sync.twin.check = False
    return c


def measure(backend: str, args, work: int) -> dict:
    c = build(backend, args, work)
    # Warm-up: fill past learning_starts so the timed part runs at the target ratio.
    c.run(total_frames=args.learning_starts + args.num_envs * args.steps_per_rollout)
    steps0, updates0 = c.env_steps, c.updates
    c.overlap_efficiency()  # take in the intervals timed so far
    busy0 = c.overlap.snapshot()
    start, cpu0 = time.perf_counter(), time.process_time()
    c.run(total_frames=c.policy_steps + args.frames)
    wall = time.perf_counter() - start  # run() ends with both streams synchronized
    cpu = time.process_time() - cpu0
    c.overlap_efficiency()
    busy_a, busy_l, both = (x - x0 for x, x0 in zip(c.overlap.snapshot(), busy0))
    c.shutdown(close_env=False)
    steps = c.env_steps - steps0
    return {
        "env_steps_per_s": steps / wall,
        "updates": c.updates - updates0,
        "updates_per_s": (c.updates - updates0) / wall,
        "replay_ratio": c.replay_ratio_actual(),
        "wall_s": wall,
        # CPU-seconds per wall-second of this process: ~2 when both sides truly run at once on
        # two free cores, ~1 when serial; below 1 when other processes take the cores.
        "cpu_share": cpu / wall,
        # time both sides were busy over the shorter side's busy time (host intervals, or
        # stream events on the cuda backend)
        "overlap_eff": OverlapMeter.efficiency_of(busy_a, busy_l, both),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="short run (~1 minute)")
    p.add_argument("--env", choices=["busy", "sleep", "gameboy"], default="busy",
                   help="busy: CPU-bound env step; sleep: latency-bound env step (no CPU, "
                   "like waiting on a device); gameboy: GameBoyEnv('maze')")
    p.add_argument("--env-ms", type=float, default=None,
                   help="BusyEnv CPU time per env step (default: balance the learner)")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--replay-ratio", type=float, default=0.5)
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--steps-per-rollout", type=int, default=8)
    p.add_argument("--commit-stride", type=int, default=4)
    p.add_argument("--max-tick", type=int, default=64)
    p.add_argument("--learning-starts", type=int, default=64)
    p.add_argument("--capacity", type=int, default=4096)
    p.add_argument("--frames", type=int, default=None, help="policy steps timed per backend")
    p.add_argument("--device", default="cpu",
                   help="cpu (the cuda backend's case runs its twin, cuda-twin) or cuda")
    p.add_argument("--capture", action="store_true",
                   help="the learner's capture=True path (one CUDA graph per update on a GPU)")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.frames is None:
        args.frames = 64 if args.quick else 512
    if args.env_ms is None and args.env in ("busy", "sleep"):
        # Balance: learner time per env step = replay_ratio * num_envs * one update.
        probe = build("reference", args, 1)
        probe.run(total_frames=args.learning_starts + 2 * args.num_envs * args.steps_per_rollout)
        upd_ms = probe.last_metrics.get("learner_ms", 100.0)
        args.env_ms = args.replay_ratio * args.num_envs * upd_ms
    work = {"busy": lambda: calibrate_work(args.env_ms, args.device),
            "sleep": lambda: int(args.env_ms * 1000),  # microseconds of sleep per step
            "gameboy": lambda: 0}[args.env]()
    cuda = "cuda" if torch.device(args.device).type == "cuda" else "cuda-twin"
    results = {b: measure(b, args, work) for b in ("reference", "threaded", cuda)}
    ref, thr, dev = results["reference"], results["threaded"], results[cuda]
    case = (f"{args.env} N={args.num_envs} B{args.batch_size}xT{args.seq_len} "
            f"rr={args.replay_ratio} window={args.steps_per_rollout} device={args.device}"
            + (" capture" if args.capture else "")
            + (f" env_ms={args.env_ms:.0f}" if args.env != "gameboy" else ""))
    print(json.dumps({"bench": "collector", "case": f"env_steps_per_s {case}",
                      "ours": round(thr["env_steps_per_s"], 3),
                      "peer": round(ref["env_steps_per_s"], 3), "unit": "vector env steps/s (N policy steps each)",
                      "speedup": round(thr["env_steps_per_s"] / ref["env_steps_per_s"], 3)}))
    # Diagnostics: how much CPU the process got, and how much of the shorter side was hidden.
    print(json.dumps({"bench": "collector", "case": f"cpu_share {case}",
                      "ours": round(thr["cpu_share"], 3), "peer": round(ref["cpu_share"], 3),
                      "unit": "cpu s / wall s",
                      "speedup": round(thr["cpu_share"] / max(ref["cpu_share"], 1e-9), 3)}))
    print(json.dumps({"bench": "collector", "case": f"overlap_eff {case}",
                      "ours": round(thr["overlap_eff"], 3), "peer": round(ref["overlap_eff"], 3),
                      "unit": "fraction of the shorter side hidden", "speedup": None}))
    # the cuda backend against reference at equal gradient steps (the schedule grants the same
    # steps for the same frames; the updates line says so)
    print(json.dumps({"bench": "collector", "case": f"env_steps_per_s {cuda} vs reference {case}",
                      "ours": round(dev["env_steps_per_s"], 3),
                      "peer": round(ref["env_steps_per_s"], 3), "unit": "vector env steps/s (N policy steps each)",
                      "speedup": round(dev["env_steps_per_s"] / ref["env_steps_per_s"], 3)}))
    print(json.dumps({"bench": "collector", "case": f"updates {cuda} vs reference {case}",
                      "ours": dev["updates"], "peer": ref["updates"], "unit": "gradient steps",
                      "speedup": round(dev["updates"] / max(ref["updates"], 1), 3)}))
    print(json.dumps({"bench": "collector", "case": f"overlap_eff {cuda} {case}",
                      "ours": round(dev["overlap_eff"], 3), "peer": round(ref["overlap_eff"], 3),
                      "unit": "fraction of the shorter side hidden", "speedup": None}))
    for name, r in results.items():
        print(json.dumps({"bench": "collector", "case": f"replay_ratio {name} {case}",
                          "ours": round(r["replay_ratio"], 4), "peer": args.replay_ratio,
                          "unit": "grad steps / policy step",
                          "speedup": round(r["replay_ratio"] / args.replay_ratio, 4)}))


if __name__ == "__main__":
    main()
