"""Replay benchmark: TimeMajorStorage + ChronologicalSliceSampler vs TorchRL in the same run.

Peer: ``LazyTensorStorage(ndim=2)`` + ``SliceSampler`` whose ``end_key`` is an always-False field
(so, like ours, slices cross episodes and split only at the write pointer). Cases:

- ``sample_16x64_*``: one batch of 16 sequences x 64 steps, capacities 1k and 100k x 16 envs with
  packed2 pixels, 1M x 16 with scalar fields only (1M x 16 frames would be 23 GB). Rings are
  filled past capacity so they have wrapped.
- ``write_1step_16env``: one env-step of 16 envs; ours ``storage.write`` vs ``ReplayBuffer.extend``
  of a ``[1, 16]`` TensorDict (``dim_extend=0``).
- ``bytes_per_transition``: ours (packed2 pixels, one obs per row) vs a TorchRL rollout storing
  ``pixels`` and ``("next", "pixels")`` as 72x80 uint8.

Prints one JSON line per result; ``speedup > 1`` means we beat the peer. Medians of repeats,
ours and peer timed alternately in the same loop so shared-machine load affects both alike.
Run: ``python benchmarks/replay.py`` (``--quick``: smaller capacities and fewer repeats).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import sys
import time
import warnings

# Running a script puts its folder first on sys.path; benchmarks/ holds ray.py, which would
# shadow the real Ray package that torchrl probes for on import. Drop the folder.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer, SliceSampler

from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema

NUM_ENVS, SEQ, BATCH = 16, 64, 16
SCALARS = {
    "action": torch.int64,
    "reward": torch.float32,
    "is_first": torch.bool,
    "continue_": torch.float32,
    "terminated": torch.bool,
    "truncated": torch.bool,
    "episode_id": torch.int32,
}


def _emit(case: str, ours: float, peer: float, unit: str, higher_is_better: bool = False) -> None:
    speedup = (ours / peer) if higher_is_better else (peer / ours)
    print(
        json.dumps(
            {
                "bench": "replay",
                "case": case,
                "ours": round(ours, 4),
                "peer": round(peer, 4),
                "unit": unit,
                "speedup": round(speedup, 2),
            }
        ),
        flush=True,
    )


def _interleaved_ms(ours, peer, repeats: int, peer_every: int = 1, warmup: int = 2):
    """Median ms of ``ours()`` and ``peer()``, timed alternately so machine load hits both alike.

    ``peer`` runs on every ``peer_every``-th repeat only (it can be 100x slower).
    """
    for _ in range(warmup):
        ours()
        peer()
    t_ours, t_peer = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        ours()
        t_ours.append(time.perf_counter() - t0)
        if r % peer_every == 0:
            t0 = time.perf_counter()
            peer()
            t_peer.append(time.perf_counter() - t0)
    return statistics.median(t_ours) * 1e3, statistics.median(t_peer) * 1e3


def _chunk(rows: int, pixels: bool, seed: int) -> dict[str, torch.Tensor]:
    """``rows`` time-major env steps of synthetic data (values do not matter for timing)."""
    g = torch.Generator().manual_seed(seed)
    n = NUM_ENVS
    out = {
        "action": torch.randint(8, (rows, n), generator=g),
        "reward": torch.randn(rows, n, generator=g),
        "is_first": torch.rand(rows, n, generator=g) < 0.01,
        "continue_": torch.ones(rows, n),
        "terminated": torch.zeros(rows, n, dtype=torch.bool),
        "truncated": torch.zeros(rows, n, dtype=torch.bool),
        "episode_id": torch.zeros(rows, n, dtype=torch.int32),
    }
    if pixels:
        out["pixels"] = torch.randint(256, (rows, n, 1, 72, 20), generator=g, dtype=torch.uint8)
    return out


def _fill_rows(total: int, pixels: bool):
    """Yields time-major chunks adding up to ``total`` rows (chunked to bound memory)."""
    chunk = 2000
    done = 0
    while done < total:
        k = min(chunk, total - done)
        yield _chunk(k, pixels, seed=done)
        done += k


def bench_sample(capacity: int, pixels: bool, repeats: int) -> None:
    total = capacity + capacity // 3
    case = f"sample_16x64_cap{capacity // 1000}k_{'packed2' if pixels else 'scalars'}"
    schema = dreamer_schema() if pixels else {k: ((), v) for k, v in SCALARS.items()}
    ours = TimeMajorStorage(capacity, NUM_ENVS, spec=schema)
    sampler = ChronologicalSliceSampler(slice_len=SEQ, generator=torch.Generator().manual_seed(0))
    rb = ReplayBuffer(
        storage=LazyTensorStorage(capacity * NUM_ENVS, ndim=2),
        sampler=SliceSampler(slice_len=SEQ, end_key="never_done", strict_length=True),
        batch_size=BATCH * SEQ,
        dim_extend=0,
        generator=torch.Generator().manual_seed(0),
    )
    for chunk in _fill_rows(total, pixels):
        k = chunk["action"].shape[0]
        for i in range(k):  # ours: one row per env-step, as a collector writes
            ours.write({key: v[i] for key, v in chunk.items()})
        chunk["never_done"] = torch.zeros(k, NUM_ENVS, dtype=torch.bool)
        rb.extend(TensorDict(chunk, batch_size=[k, NUM_ENVS]))  # peer: bulk fill (fast setup)
    ours_ms, peer_ms = _interleaved_ms(
        lambda: sampler.sample_sequences(ours, BATCH * SEQ), rb.sample, repeats, peer_every=3
    )
    ours = rb = None
    gc.collect()
    _emit(case, ours_ms, peer_ms, "ms")


def bench_write(repeats: int) -> None:
    steps = [{k: v[0] for k, v in _chunk(1, True, seed=i).items()} for i in range(64)]
    ours = TimeMajorStorage(1000, NUM_ENVS, spec=dreamer_schema())
    it = iter(range(10**9))

    def ours_write():
        for _ in range(100):
            ours.write(steps[next(it) % 64])

    rb = ReplayBuffer(storage=LazyTensorStorage(1000 * NUM_ENVS, ndim=2), dim_extend=0)
    tds = [TensorDict({k: v.unsqueeze(0) for k, v in s.items()}, [1, NUM_ENVS]) for s in steps]

    def peer_write():
        for _ in range(100):
            rb.extend(tds[next(it) % 64])

    ours_ms, peer_ms = _interleaved_ms(ours_write, peer_write, repeats)
    ours_us, peer_us = ours_ms * 10, peer_ms * 10  # ms per 100 writes -> us per write
    _emit("write_1step_16env", ours_us, peer_us, "us")


def bench_bytes() -> None:
    ours = TimeMajorStorage(8, NUM_ENVS, spec=dreamer_schema()).bytes_per_transition()
    n = NUM_ENVS
    one = torch.zeros(n, 1, dtype=torch.bool)
    rollout = TensorDict(
        {
            "pixels": torch.zeros(n, 1, 72, 80, dtype=torch.uint8),
            "action": torch.zeros(n, dtype=torch.int64),
            "done": one,
            "terminated": one,
            "truncated": one,
            "is_init": one,
            "next": {
                "pixels": torch.zeros(n, 1, 72, 80, dtype=torch.uint8),
                "reward": torch.zeros(n, 1),
                "done": one,
                "terminated": one,
                "truncated": one,
                "is_init": one,
            },
        },
        batch_size=[n],
    )
    storage = LazyTensorStorage(8 * n, ndim=2)
    rb = ReplayBuffer(storage=storage, dim_extend=0)
    rb.extend(rollout.unsqueeze(0))
    peer = sum(
        v[0, 0].numel() * v.element_size()
        for v in storage._storage.values(include_nested=True, leaves_only=True)
    )
    _emit("bytes_per_transition", float(ours), float(peer), "bytes")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small capacities, few repeats")
    args = p.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # keep stdout to JSON lines
    repeats = 10 if args.quick else 30
    bench_bytes()
    bench_write(repeats)
    if args.quick:
        cases = [(1_000, True), (10_000, False)]
    else:
        cases = [(1_000, True), (100_000, True), (1_000_000, False)]
    for capacity, pixels in cases:
        bench_sample(capacity, pixels, repeats)


if __name__ == "__main__":
    main()
