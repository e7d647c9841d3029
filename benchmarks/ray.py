"""Benchmarks of the Ray data plane (``torchrl_dreamer.distributed``).

Run: ``python benchmarks/ray.py [--quick]``. One JSON line per result:
``{"bench", "case", "ours", "peer", "unit", "speedup"}`` (speedup > 1: ours is better).

- ``env_steps``: env steps/s (GameBoyEnv "maze", random actions, chunks committed to a
  ``ReplayService`` actor) with 2 runner actors (ours) vs 1 (peer); and 1 runner actor (ours)
  vs the same runner in-process (peer), to show the cost of going through Ray.
- ``sample_latency``: one ``[64, 16]`` packed2 batch through the service actor (ours) vs
  ``ReplayService.sample`` in-process (peer); ms, lower is better.
- ``weight_publish``: publishing a Dreamer ``S`` preset (pack into one numpy buffer, one
  ``ray.put``, store update; ours) vs passing the state_dict as an actor-call argument (peer);
  and the runner-side fetch+apply of a new version vs a no-op fetch when versions match.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# This file is named ray.py: drop its folder from sys.path so ``import ray`` finds Ray, not us.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch  # noqa: E402

from torchrl_dreamer.data import dreamer_schema  # noqa: E402
from torchrl_dreamer.distributed import (  # noqa: E402
    EnvRunner,
    ReplayService,
    WeightStore,
    batch_from_numpy,
    call,
    extract_weights,
    init_ray,
    pack_weights,
    remote_class,
)
from torchrl_dreamer.trainers import GameBoyDreamer  # noqa: E402


def emit(bench: str, case: str, ours: float, peer: float, unit: str, higher_is_better: bool):
    speedup = (ours / peer) if higher_is_better else (peer / ours)
    print(json.dumps({"bench": bench, "case": case, "ours": round(ours, 4),
                      "peer": round(peer, 4), "unit": unit, "speedup": round(speedup, 3)}),
          flush=True)


def _service(capacity: int):
    return dict(capacity=capacity, seq_len=64, replay_ratio=1e-6, max_queued=1e9)


def env_steps_per_s(ray, num_runners: int, chunks: int, num_envs: int, chunk_len: int) -> float:
    """Env steps/s (all runners) of Ray runner actors committing chunks to a service actor."""
    f = GameBoyDreamer("maze", num_envs=num_envs)
    svc = remote_class(ReplayService).remote(**_service(4096))
    runners = [remote_class(EnvRunner).remote(f"r{i}", f.env, None, svc, None,
                                             chunk_len=chunk_len, seed=i)
               for i in range(num_runners)]
    ray.get([r.run.remote(1) for r in runners])  # warm-up: imports, emulator, first chunk
    start = time.perf_counter()
    ray.get([r.run.remote(chunks) for r in runners])
    dt = time.perf_counter() - start
    for a in (*runners, svc):
        ray.kill(a)
    return num_runners * chunks * chunk_len * num_envs / dt


def env_steps_in_process(chunks: int, num_envs: int, chunk_len: int) -> float:
    f = GameBoyDreamer("maze", num_envs=num_envs)
    svc = ReplayService(**_service(4096))
    runner = EnvRunner("r0", f.env, None, svc, None, chunk_len=chunk_len)
    runner.run(1)
    start = time.perf_counter()
    runner.run(chunks)
    return chunks * chunk_len * num_envs / (time.perf_counter() - start)


def _filled_service(svc, num_envs: int, rows: int, chunk: int = 64) -> None:
    spec = dreamer_schema()
    rid = call(svc, "register", "r0", num_envs)["runner_id"]
    for _ in range(0, rows, chunk):
        data = {k: torch.zeros(chunk, num_envs, *fs.shape, dtype=fs.dtype)
                for k, fs in spec.items()}
        data["pixels"] = torch.randint(0, 255, data["pixels"].shape, dtype=torch.uint8)
        call(svc, "add_chunk", rid, data)


def sample_latency(ray, rows: int, reps: int) -> tuple[float, float]:
    local = ReplayService(**_service(rows))
    remote = remote_class(ReplayService).remote(**_service(rows))
    _filled_service(local, 16, rows)
    _filled_service(remote, 16, rows)

    def timed(fn) -> float:
        fn()
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return 1000 * statistics.median(ts)

    ours = timed(lambda: batch_from_numpy(call(remote, "sample_numpy", 16, 0)))
    pickled = timed(lambda: call(remote, "sample", 16, 0))
    peer = timed(lambda: local.sample(16, 0))
    ray.kill(remote)
    return ours, pickled, peer


def weight_latency(ray, reps: int, preset: str) -> dict[str, float]:
    f = GameBoyDreamer("maze", preset=preset)
    learner = f.learner()
    store = remote_class(WeightStore).remote()
    sink = remote_class(WeightStore).remote()  # naive peer: the state_dict as an argument
    publish, naive = [], []
    for v in range(1, reps + 1):
        t = time.perf_counter()
        call(store, "publish", v, [ray.put(pack_weights(extract_weights(learner), v))])
        publish.append(time.perf_counter() - t)
        t = time.perf_counter()
        call(sink, "publish", v, [extract_weights(learner)])
        naive.append(time.perf_counter() - t)
    # Runner side: fetch + apply a new version vs a no-op fetch (versions match).
    env = f.env()
    runner = EnvRunner("r", lambda: env, f.policy, ReplayService(**_service(128)), store)
    fetch, noop = [], []
    for v in range(reps + 1, 2 * reps + 1):
        call(store, "publish", v, [ray.put(pack_weights(extract_weights(learner), v))])
        t = time.perf_counter()
        runner.maybe_fetch_weights()
        fetch.append(time.perf_counter() - t)
        t = time.perf_counter()
        runner.maybe_fetch_weights()
        noop.append(time.perf_counter() - t)
    for a in (store, sink):
        ray.kill(a)
    med = statistics.median
    mb = pack_weights(extract_weights(learner), 0).nbytes / 2**20
    return {"publish": 1000 * med(publish), "naive": 1000 * med(naive),
            "fetch": 1000 * med(fetch), "noop": 1000 * med(noop), "mb": mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    args = parser.parse_args()
    torch.set_num_threads(1)
    q = args.quick
    chunks, num_envs, chunk_len = (4, 4, 16) if q else (16, 8, 32)
    reps = 5 if q else 30
    ray = init_ray(num_cpus=2)

    two = env_steps_per_s(ray, 2, chunks, num_envs, chunk_len)
    one = env_steps_per_s(ray, 1, chunks, num_envs, chunk_len)
    inproc = env_steps_in_process(chunks, num_envs, chunk_len)
    emit("env_steps", f"2 vs 1 runner actors (maze, {num_envs} envs each)", two, one,
         "env_steps/s", True)
    emit("env_steps", "1 runner actor vs in-process runner", one, inproc, "env_steps/s", True)

    ours, pickled, peer = sample_latency(ray, 2048 if q else 16384, reps)
    emit("sample_latency", "[64, 16] packed2 batch: Ray actor (numpy) vs in-process", ours,
         peer, "ms", False)
    emit("sample_latency", "[64, 16] packed2 batch via Ray: numpy vs pickled TensorDict", ours,
         pickled, "ms", False)

    w = weight_latency(ray, reps, "tiny" if q else "S")
    emit("weight_publish", f"publish {w['mb']:.1f} MB: packed ref vs state_dict argument",
         w["publish"], w["naive"], "ms", False)
    emit("weight_publish", "runner fetch+apply new version vs no-op fetch (same version)",
         w["fetch"], w["noop"], "ms", False)
    ray.shutdown()


if __name__ == "__main__":
    main()
