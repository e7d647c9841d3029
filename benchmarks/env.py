"""Env steps/s of ``GameBoyEnv`` vs PyBoy stepped the same way, on CPU.

One env step = hold a button for 8 frames, release for 16 (24 frames), read the screen, read the
task's RAM. Ours: ``GameBoyEnv("maze", num_envs=N).fast_step(actions)`` (one Warp launch for all N
consoles + the task's device ops); the peer: N ``PyBoy`` instances in a Python loop
(``button_press``, ``tick(8)``, ``button_release``, ``tick(16)`` rendering only the last frame,
``screen.ndarray`` copy, one ``memory`` read). Each is run in one process and in one process per
core (the N envs split across processes; throughputs summed).

PyBoy's rate in one process does not depend on N (it steps consoles one after another), so for
large N the peer is measured on ``min(N, --peer-max)`` instances and reported as env-steps/s of
that loop. Prints one JSON line per case:
``{"bench": "env", "case": ..., "ours": x, "peer": y, "unit": "env_steps/s", "speedup": x/y}``.

Workers cases (``workers<K>_<game>_N<n>``): ``GameBoyEnv(task, num_envs=n, workers=K)`` against
the same env with ``workers=1`` as the peer (both built in one process, timed in alternating
windows, ``--rounds`` of each, medians), for the maze, catch and every shared game that has a task
spec in ``examples/tasks`` (its ROM found under ``$TORCHRL_DREAMER_ROMS/games``).

Usage: ``python benchmarks/env.py [--quick] [--sizes 1 64 1024] [--seconds 3]
[--workers 2] [--workers-n 256] [--workers-games maze 2048] [--rounds 3] [--workers-only]``
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

# Running a script puts its folder first on sys.path; benchmarks/ holds files named like packages
# (ray.py) that would shadow them inside torchrl's imports.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import torch  # noqa: E402


def _backend(spec: str | None):
    if not spec:
        return None
    mod, _, attr = spec.partition(":")
    obj = importlib.import_module(mod)
    return getattr(obj, attr) if attr else obj


def ours_rate(n: int, seconds: float, backend_spec: str | None = None,
              device: str = "cpu") -> float:
    """Env steps/s of ``GameBoyEnv("maze", num_envs=n, device=device).fast_step`` over
    ``seconds`` (on CUDA each timed step ends with a device sync, so no queued work is left
    out)."""
    torch.set_num_threads(1)
    from torchrl_dreamer.envs import GameBoyEnv

    env = GameBoyEnv("maze", num_envs=n, backend=_backend(backend_spec), seed=0, device=device)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = torch.randint(0, env.action_set.n, (64, n), generator=gen).to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for i in range(3):  # warm-up
        env.fast_step(actions[i])
    sync()
    steps = 0
    t0 = time.perf_counter()
    while True:
        env.fast_step(actions[steps % 64])
        sync()
        steps += 1
        dt = time.perf_counter() - t0
        if dt >= seconds and steps >= 3:
            return steps * n / dt


def peer_rate(n: int, seconds: float) -> float:
    """Env steps/s of ``n`` PyBoy instances stepped the same way, one after another."""
    import logging

    logging.getLogger("pyboy").setLevel(logging.ERROR)
    from pyboy import PyBoy

    from torchrl_dreamer.roms import ram_map, rom_path

    rom = str(rom_path("maze"))
    state_addr = ram_map("maze")["GAME_STATE"]
    names = ["", "up", "down", "left", "right"]
    pbs = []
    for _ in range(n):
        pb = PyBoy(rom, window="null", sound_emulated=False)
        pb.set_emulation_speed(0)
        pb.tick(30, False)
        pb.memory[ram_map("maze")["NEW_GAME"]] = 1
        pb.tick(1, False)
        pbs.append(pb)
    rng = torch.Generator().manual_seed(0)
    actions = torch.randint(0, len(names), (64, n), generator=rng).tolist()
    steps = 0
    t0 = time.perf_counter()
    try:
        while True:
            row = actions[steps % 64]
            for pb, a in zip(pbs, row):
                name = names[a]
                if name:
                    pb.button_press(name)
                pb.tick(8, False)
                if name:
                    pb.button_release(name)
                pb.tick(15, False)
                pb.tick(1, True)
                _ = pb.screen.ndarray.copy()
                _ = pb.memory[state_addr]
            steps += 1
            dt = time.perf_counter() - t0
            if dt >= seconds and steps >= 2:
                return steps * n / dt
    finally:
        for pb in pbs:
            pb.stop(save=False)


# shared games (folder under <roms>/games) -> their task spec in examples/tasks
_SPECS = {"2048-wyattferguson": "2048", "gb_raw_snake": "snake", "pandoras-blocks": "pandoras_blocks",
          "postbot": "postbot", "tobutobugirl": "tobutobugirl"}


def workers_games() -> dict[str, object]:
    """Game name -> a zero-argument task factory: maze, catch and every shared game with a spec."""
    from torchrl_dreamer._roms import roms_dir
    from torchrl_dreamer.envs.spec import load_task_spec

    games: dict[str, object] = {"maze": lambda: "maze", "catch": lambda: "catch"}
    specs = _HERE.parent / "examples" / "tasks"
    for folder, spec in _SPECS.items():
        roms = sorted([*(roms_dir() / "games" / folder).glob("*.gb"),
                       *(roms_dir() / "games" / folder).glob("*.gbc")])
        if roms:
            games[spec] = (lambda s=spec, r=roms[0]: load_task_spec(specs / f"{s}.yaml", rom=r))
    return games


def workers_rates(task_factory, n: int, workers: int, seconds: float,
                  rounds: int) -> tuple[list[float], list[float]]:
    """Env steps/s of ``GameBoyEnv(task, num_envs=n).fast_step`` with ``workers`` and with 1,
    built side by side and timed in alternating windows of ``seconds`` (``rounds`` each, the
    order swapped every round); returns (rates with ``workers``, rates with 1)."""
    import warnings

    from torchrl_dreamer.envs import GameBoyEnv

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # header warnings of the shared games
        envs = {k: GameBoyEnv(task_factory(), num_envs=n, seed=0, workers=k) for k in (workers, 1)}
    gen = torch.Generator().manual_seed(0)
    actions = torch.randint(0, envs[1].action_set.n, (64, n), generator=gen)
    for env in envs.values():
        env.reset()
        for i in range(3):  # warm-up
            env.fast_step(actions[i])
    rates: dict[int, list[float]] = {k: [] for k in envs}
    for r in range(rounds):
        for k in ((workers, 1) if r % 2 == 0 else (1, workers)):
            env = envs[k]
            steps = 0
            t0 = time.perf_counter()
            while True:
                env.fast_step(actions[steps % 64])
                steps += 1
                dt = time.perf_counter() - t0
                if dt >= seconds and steps >= 3:
                    break
            rates[k].append(steps * n / dt)
    return rates[workers], rates[1]


def _worker(args):
    kind, n, seconds, backend_spec = args
    torch.set_num_threads(1)
    if kind == "ours":
        return ours_rate(n, seconds, backend_spec)
    return peer_rate(n, seconds)


def multi_rate(kind: str, n: int, seconds: float, procs: int, backend_spec=None) -> float:
    """Summed env steps/s of ``procs`` processes each running ``n // procs`` envs."""
    per = max(1, n // procs)
    ctx = mp.get_context("spawn")
    with ctx.Pool(procs) as pool:
        rates = pool.map(_worker, [(kind, per, seconds, backend_spec)] * procs)
    return float(sum(rates))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N in {1, 64}, 1 s per case")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--peer-max", type=int, default=16,
                        help="most PyBoy instances in one process (its rate does not grow with N)")
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-multi", action="store_true", help="skip the one-process-per-core cases")
    parser.add_argument("--backend", default=None,
                        help="module[:attr] with GameBoy and ResetCache (default: our emulator)")
    parser.add_argument("--device", default="cpu",
                        help="device of our envs, e.g. cuda (the peer always runs on the CPU; "
                             "without PyBoy installed its figures are null)")
    parser.add_argument("--workers", type=int, default=None,
                        help="K of the workers cases (GameBoyEnv(workers=K) vs workers=1); default "
                             "2 where the process may use 2 cores, 0 skips them")
    parser.add_argument("--workers-n", type=int, default=256, help="N of the workers cases")
    parser.add_argument("--workers-games", nargs="*", default=None,
                        help="games of the workers cases (default: all; --quick: maze)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="alternating timing windows per side in the workers cases (3)")
    parser.add_argument("--workers-only", action="store_true", help="only the workers cases")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = args.sizes or ([1, 64] if args.quick else [1, 64, 1024])
    seconds = args.seconds or (1.0 if args.quick else 3.0)

    have_peer = importlib.util.find_spec("pyboy") is not None
    on_gpu = args.device != "cpu"
    tag = "" if not on_gpu else f"_{args.device.replace(':', '')}"
    peer_1 = None  # PyBoy in one process: its rate does not depend on N
    for n in [] if args.workers_only else sizes:
        ours = ours_rate(n, seconds, args.backend, args.device)
        if have_peer and (peer_1 is None or not on_gpu):
            peer_1 = peer_rate(min(n, args.peer_max), seconds)
        _emit(f"maze_N{n}{tag}_1proc", ours, peer_1)
        if args.no_multi or args.procs < 2 or n < args.procs:
            continue
        # the peer on every core; ours on CUDA stays one process (one GPU)
        ours_m = ours if on_gpu else multi_rate("ours", n, seconds, args.procs, args.backend)
        peer_m = (multi_rate("peer", min(n, args.peer_max * args.procs), seconds, args.procs)
                  if have_peer else None)
        _emit(f"maze_N{n}{tag}_{args.procs}proc", ours_m, peer_m)
    if on_gpu:
        return
    from torchrl_dreamer.emulator.workers import available_cores

    k = args.workers if args.workers is not None else (2 if available_cores() >= 2 else 0)
    if k < 2:
        return
    rounds = args.rounds or (1 if args.quick else 3)
    games = workers_games()
    for name in args.workers_games or (["maze"] if args.quick else list(games)):
        ours_k, peer_k = workers_rates(games[name], args.workers_n, k, seconds, rounds)
        _emit(f"workers{k}_{name}_N{args.workers_n}", statistics.median(ours_k),
              statistics.median(peer_k))


def _emit(case: str, ours: float, peer: float | None) -> None:
    print(json.dumps({"bench": "env", "case": case, "ours": round(ours, 1),
                      "peer": None if peer is None else round(peer, 1), "unit": "env_steps/s",
                      "speedup": None if peer is None else round(ours / peer, 3)}), flush=True)


if __name__ == "__main__":
    main()
