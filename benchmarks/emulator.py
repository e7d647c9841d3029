"""Emulator throughput vs PyBoy on one CPU core, plus Warp compile times.

Prints one JSON line per result: {"bench", "case", "ours", "peer", "unit", "speedup"}.
Cases: frames/s on blargg cpu_instrs and a homebrew game (same ROM, same number of frames, same
run as PyBoy headless with ``tick(n, False)``), our frames/s with the idle-loop fast-forward
on vs off (``idle_skip_vs_off``: maze and games that poll RAM; the peer is our own core without
it), env steps/s (24 frames per step, packed2 every
step, vs PyBoy ``tick(23, False); tick(1, True)`` + a screen copy), and cold/cached compile time
of the kernel (cold: fresh Warp cache dir in a subprocess). ``--quick`` shortens every case.
Throughput uses the process CPU time (both emulators are single-threaded here), which keeps the
ratio meaningful on a machine shared with other jobs; ``--wall`` switches to wall-clock time.

Run: ``python benchmarks/emulator.py [--quick] [--envs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Running a script puts its folder first on sys.path; benchmarks/ holds ray.py, which would
# shadow the real Ray package that torchrl probes for on import. Drop the folder.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch

torch.set_num_threads(1)
clock = time.process_time

from torchrl_dreamer._roms import roms_dir  # noqa: E402
from torchrl_dreamer.emulator import BUTTON_START, GameBoy  # noqa: E402


def emit(bench, case, ours, peer, unit, higher_is_better=True):
    if peer is None or ours is None:
        speedup = None
    elif higher_is_better:
        speedup = ours / peer
    else:
        speedup = peer / ours
    print(json.dumps({"bench": bench, "case": case, "ours": ours, "peer": peer, "unit": unit,
                      "speedup": speedup}), flush=True)


def _pyboy(path, warmup_frames):
    """A headless PyBoy on ``path`` after ``warmup_frames`` frames, or None without PyBoy."""
    try:
        from pyboy import PyBoy
    except ImportError:
        return None
    pb = PyBoy(str(path), window="null", sound_emulated=False)
    pb.set_emulation_speed(0)
    pb.tick(warmup_frames, False)
    return pb


def pyboy_fps(path, frames):
    pb = _pyboy(path, 1)
    if pb is None:
        return None
    t = clock()
    pb.tick(frames, False)
    dt = clock() - t
    pb.stop(save=False)
    return frames / dt


def pyboy_steps(path, steps):
    pb = _pyboy(path, 60)
    if pb is None:
        return None
    t = clock()
    for k in range(steps):
        if k % 2 == 0:
            pb.button_press("start")
        else:
            pb.button_release("start")
        pb.tick(23, False)
        pb.tick(1, True)
        pb.screen.ndarray.copy()
    dt = clock() - t
    pb.stop(save=False)
    return steps / dt


def our_fps(path, frames, envs):
    gb = GameBoy(path, num_envs=envs, check_header=False)
    gb.run_frames(1)
    t = clock()
    gb.run_frames(frames)
    return frames * envs / (clock() - t)


def our_fps_idle(path, frames, envs, idle_skip):
    """Frames/s of our core with the idle-loop fast-forwards on or off (same ROM, same frames)."""
    gb = GameBoy(path, num_envs=envs, check_header=False, idle_skip=idle_skip)
    gb.run_frames(60)
    t = clock()
    gb.run_frames(frames)
    return frames * envs / (clock() - t)


def our_steps(path, steps, envs):
    gb = GameBoy(path, num_envs=envs, check_header=False)
    gb.run_frames(60)
    press = torch.full((envs,), BUTTON_START, dtype=torch.uint8)
    none = torch.zeros(envs, dtype=torch.uint8)
    t = clock()
    for k in range(steps):
        gb.step(press if k % 2 == 0 else none, frames=24, press_frames=8)
    return steps * envs / (clock() - t)


def maze_rom():
    """The maze ROM shipped with the package (the RL task's game)."""
    import torchrl_dreamer

    return Path(torchrl_dreamer.__file__).resolve().parent / "roms" / "maze" / "maze.gb"


def compile_times():
    code = ("import time,torch;torch.set_num_threads(1);t=time.perf_counter();"
            "from torchrl_dreamer.emulator.codegen import load_kernel_module;import warp as wp;"
            "wp.config.quiet=True;wp.init();m=load_kernel_module('cpu');"
            "wp.load_module(m, device='cpu');print(time.perf_counter()-t)")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, WARP_CACHE_PATH=d, TORCHRL_DREAMER_CACHE=d)
        out = []
        for _ in range(2):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            wall = float(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
            out.append((wall, cpu))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs")
    ap.add_argument("--envs", type=int, default=1, help="consoles per launch (one core)")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile-time cases")
    ap.add_argument("--wall", action="store_true", help="time with wall clock, not CPU time")
    args = ap.parse_args()
    if args.wall:
        global clock
        clock = time.perf_counter
    root = roms_dir()
    cases = [("cpu_instrs", root / "blargg/cpu_instrs/cpu_instrs.gb"),
             ("2048", root / "games/2048-wyattferguson/2048.gb"),
             ("tobutobugirl", root / "games/tobutobugirl/tobu.gb")]
    frames = 300 if args.quick else 3000
    steps = 20 if args.quick else 200
    for name, path in cases:
        if not path.is_file():
            continue
        ours = our_fps(path, frames, args.envs)
        emit("emulator", f"fps/{name}/envs={args.envs}", ours, pyboy_fps(path, frames), "frames/s")
    for name, path in cases[1:]:
        if not path.is_file():
            continue
        ours = our_steps(path, steps, args.envs)
        emit("emulator", f"steps24/{name}/envs={args.envs}", ours, pyboy_steps(path, steps), "steps/s")
    # idle-loop fast-forward (LY/STAT and RAM-byte polls): our core with it vs without it
    idle = [("maze", maze_rom()), ("snake", root / "games/gb_raw_snake/snake.gb"),
            ("postbot", root / "games/postbot/PostBot.gb"),
            ("pandoras-blocks", root / "games/pandoras-blocks/PandorasBlocks.gbc")]
    for name, path in idle:
        if not path.is_file():
            continue
        on = our_fps_idle(path, frames, args.envs, True)
        off = our_fps_idle(path, frames, args.envs, False)
        emit("emulator", f"idle_skip_vs_off/{name}/envs={args.envs}", on, off, "frames/s")
    if not args.no_compile:
        (cold, cold_cpu), (cached, cached_cpu) = compile_times()
        emit("emulator", "compile/cold/wall", cold, None, "s", higher_is_better=False)
        emit("emulator", "compile/cold/cpu", cold_cpu, None, "s", higher_is_better=False)
        emit("emulator", "compile/cached/wall", cached, None, "s", higher_is_better=False)
        emit("emulator", "compile/cached/cpu", cached_cpu, None, "s", higher_is_better=False)


if __name__ == "__main__":
    main()
