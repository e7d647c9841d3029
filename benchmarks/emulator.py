"""Emulator throughput vs PyBoy on one CPU core, plus Warp compile times.

Prints one JSON line per result: {"bench", "case", "ours", "peer", "unit", "speedup"}.
Cases:

- ``gameplay/<game>``: frames/s on every game in ``<roms>/games`` and on our ROMs (maze,
  catch) with gameplay input: 300 frames from power-on, then cycles of a button held 8 frames
  and released 32 (A, START, RIGHT, LEFT, UP, DOWN, B, none), 2,000 frames (``--frames``). Ours:
  ``run_frames(8, button, render=False)`` + ``run_frames(32, render=False)``; the peer: PyBoy
  ``button_press``, ``tick(8, False)``, ``button_release``, ``tick(32, False)`` (on a copy of
  the ROM whose header title is blanked, so PyBoy's per-title game-wrapper plugins, e.g. the
  2048 one that raises on every tick without a symbol file, do not run). Both run in this
  process, ``--chunk`` frames (default 400; 200 with ``--quick``) at a time in turn, which one
  goes first alternating, over ``--rounds`` runs (default 3) of the whole protocol from
  power-on; ``speedup`` is the median of the per-chunk time ratios (``chunks`` of them),
  ``ours`` / ``peer`` the frames/s over all chunks. So a drift in the machine's speed hits
  both sides of each ratio: whole alternated runs (this benchmark until 2026-12-01) varied by
  up to 20 % on the shared 2-core machine, and the host's slow phases moved the ratio itself.
- ``gameplay/pandoras_blocks_cgb`` (``--cgb``, or named in ``--games``): the same protocol on a
  Color game: Pandora's Blocks, a dual-mode cartridge, on ``GameBoy(model="cgb")`` against
  PyBoy with ``cgb=True`` (both run its Color code). Not in the default set. The DMG cases run
  PyBoy with ``cgb=False`` (since 2026-11-27; before, PyBoy ran the dual-mode Pandora's Blocks
  on its Color model while ours ran it on the DMG).
- ``insns/<game>``: emulated instructions per frame in the same run: ours = executed with the
  idle-loop fast-forward, peer = executed without it (the ``count`` kernel variant; the runs
  are bit-identical), speedup = the reduction.
- ``env/N=<n>``: env steps/s of ``GameBoyEnv("maze", num_envs=n).fast_step`` (24 frames, the
  observation rendered and packed every step) vs PyBoy stepped the same way (``tick(8)``,
  ``tick(15)``, ``tick(1, True)``, a screen copy, one RAM read) on ``min(n, 16)`` instances
  (its rate does not grow with n: it steps them one after another). Medians of ``--rounds``
  alternated runs, as for gameplay.
- ``idle_skip_vs_off/<game>`` (``--idle-off``): gameplay frames/s with the fast-forward vs
  without it (needs one more kernel compile).
- ``compile/*``: cold / cached compile time of the kernel (cold: fresh Warp cache dir in a
  subprocess).

Throughput uses the process CPU time (both emulators are single-threaded here), which keeps the
ratio meaningful on a machine shared with other jobs; ``--wall`` switches to wall-clock time.

Run: ``python benchmarks/emulator.py [--quick] [--games 2048 snake] [--envs 1 16 256]
[--rounds 3] [--chunk 400]``; the Color case alone: ``--games pandoras_blocks_cgb --envs
--no-compile``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

# Running a script puts its folder first on sys.path; benchmarks/ holds ray.py, which would
# shadow the real Ray package that torchrl probes for on import. Drop the folder.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import torch

torch.set_num_threads(1)
clock = time.process_time

from torchrl_dreamer._roms import roms_dir  # noqa: E402
from torchrl_dreamer.emulator import (  # noqa: E402
    BUTTON_A,
    BUTTON_B,
    BUTTON_DOWN,
    BUTTON_LEFT,
    BUTTON_RIGHT,
    BUTTON_START,
    BUTTON_UP,
    GameBoy,
)
from torchrl_dreamer.emulator.layout import FIELDS  # noqa: E402

WARMUP_FRAMES = 300
PRESS, RELEASE = 8, 32
BUTTONS = [("a", BUTTON_A), ("start", BUTTON_START), ("right", BUTTON_RIGHT),
           ("left", BUTTON_LEFT), ("up", BUTTON_UP), ("down", BUTTON_DOWN), ("b", BUTTON_B),
           ("", 0)]


def emit(bench, case, ours, peer, unit, higher_is_better=True, speedup=None, **extra):
    """One JSON line; ``speedup`` from ``ours`` and ``peer`` unless given (a paired median)."""
    if speedup is None and peer is not None and ours is not None:
        speedup = ours / peer if higher_is_better else peer / ours
    print(json.dumps({"bench": bench, "case": case, "ours": ours, "peer": peer, "unit": unit,
                      "speedup": speedup, **extra}), flush=True)


def games() -> dict[str, Path]:
    """Every shared game (``<roms>/games/*/*.gb[c]``) and our own ROMs, by short name."""
    import torchrl_dreamer

    out = {}
    for d in sorted((roms_dir() / "games").glob("*")):
        roms = sorted([*d.glob("*.gb"), *d.glob("*.gbc")])
        if roms:
            out[d.name] = roms[0]
    pkg = Path(torchrl_dreamer.__file__).resolve().parent / "roms"
    for name in ("maze", "catch"):
        out[name] = pkg / name / f"{name}.gb"
    return out


# Color cases: case name -> the shared game (``<roms>/games/<dir>``) run in Color mode.
COLOR_CASES = {"pandoras_blocks_cgb": "pandoras-blocks"}


def color_games(dmg: dict[str, Path]) -> dict[str, Path]:
    """The Color cases' ROMs by case name, from :func:`games`' table (missing games left out)."""
    return {case: dmg[game] for case, game in COLOR_CASES.items() if game in dmg}


def _untitled_copy(path: Path, tmp: str) -> str:
    """A copy of the ROM with a blank header title (and fixed header checksum): PyBoy enables
    per-title game-wrapper plugins that would add work to every tick."""
    data = bytearray(path.read_bytes())
    data[0x134:0x13F] = b"BENCH".ljust(11, b"\0")
    chk = 0
    for x in data[0x134:0x14D]:
        chk = (chk - x - 1) & 0xFF
    data[0x14D] = chk
    out = os.path.join(tmp, path.name)
    Path(out).write_bytes(bytes(data))
    return out


def _pyboy(path, warmup_frames, cgb: bool | None = None):
    """A headless PyBoy on ``path`` after ``warmup_frames`` frames, or None without PyBoy.
    ``cgb``: PyBoy's console choice (None: its own, the Color for any Color-flagged cartridge)."""
    try:
        from pyboy import PyBoy
    except ImportError:
        return None
    import logging

    logging.getLogger("pyboy").setLevel(logging.ERROR)
    pb = PyBoy(str(path), window="null", sound_emulated=False, cgb=cgb)
    pb.set_emulation_speed(0)
    pb.tick(warmup_frames, False)
    return pb


class _OursPlayer:
    """Our console on the gameplay protocol, after the warm-up, played a chunk at a time."""

    def __init__(self, path: Path, **kw) -> None:
        self.gb = GameBoy(path, check_header=False, **kw)
        self.gb.run_frames(WARMUP_FRAMES, render=False)
        self.c0 = int(self.gb.state_tensors()["st"][0, FIELDS["CYCLES"]])

    def cycles(self, k0: int, n: int) -> float:
        """Button cycles ``k0 .. k0 + n - 1``; the clock time they took."""
        t = clock()
        for k in range(k0, k0 + n):
            self.gb.run_frames(PRESS, BUTTONS[k % len(BUTTONS)][1], render=False)
            self.gb.run_frames(RELEASE, render=False)
        return clock() - t

    def close(self) -> None:
        pass


class _PeerPlayer:
    """PyBoy on the gameplay protocol (on an untitled copy of the ROM), played a chunk at a time."""

    def __init__(self, pb: Any, tmp: tempfile.TemporaryDirectory) -> None:
        self.pb, self.tmp = pb, tmp

    @classmethod
    def open(cls, path: Path, cgb: bool | None = None) -> _PeerPlayer | None:
        """After the warm-up; None without PyBoy."""
        tmp = tempfile.TemporaryDirectory()
        pb = _pyboy(_untitled_copy(path, tmp.name), WARMUP_FRAMES, cgb)
        if pb is None:
            tmp.cleanup()
            return None
        return cls(pb, tmp)

    def cycles(self, k0: int, n: int) -> float:
        t = clock()
        for k in range(k0, k0 + n):
            name = BUTTONS[k % len(BUTTONS)][0]
            if name:
                self.pb.button_press(name)
            self.pb.tick(PRESS, False)
            if name:
                self.pb.button_release(name)
            self.pb.tick(RELEASE, False)
        return clock() - t

    def close(self) -> None:
        self.pb.stop(save=False)
        self.tmp.cleanup()


def ours_gameplay(path: Path, frames: int, **kw) -> tuple[float, GameBoy, int]:
    """Our frames/s on the gameplay protocol; also the console and its S_CYCLES before the run."""
    ours = _OursPlayer(path, **kw)
    dt = ours.cycles(0, frames // (PRESS + RELEASE))
    return frames / dt, ours.gb, ours.c0


def paired_gameplay(path: Path, frames: int, chunk: int, rounds: int, kw: dict,
                    peer_kw: dict) -> dict[str, Any]:
    """Both emulators on the gameplay protocol in the same process, ``chunk`` frames at a time
    in turn (which goes first alternates), ``rounds`` times from power-on: our and PyBoy's
    frames/s over all chunks, the median of the per-chunk time ratios (``speedup``, None without
    PyBoy), and our last console with its S_CYCLES before its run."""
    n = chunk // (PRESS + RELEASE)
    ratios: list[float] = []
    total = [0.0, 0.0]
    ours = None
    for r in range(rounds):
        ours = _OursPlayer(path, **kw)
        peer = _PeerPlayer.open(path, **peer_kw)
        for c in range(frames // chunk):
            times = [0.0, 0.0]
            sides = (ours, peer) if (r + c) % 2 == 0 else (peer, ours)
            for side in sides:
                if side is not None:
                    times[0 if side is ours else 1] = side.cycles(c * n, n)
            total[0] += times[0]
            total[1] += times[1]
            if peer is not None:
                ratios.append(times[1] / times[0])
        if peer is not None:
            peer.close()
    done = rounds * (frames // chunk) * chunk
    return {"ours": done / total[0], "peer": done / total[1] if ratios else None,
            "speedup": statistics.median(ratios) if ratios else None, "chunks": len(ratios),
            "gb": ours.gb, "c0": ours.c0}


def instructions(path: Path, frames: int, skipped_total: int, **kw) -> float:
    """Instructions per frame executed without the fast-forward (the ``count`` variant, same
    protocol); ``skipped_total`` from the default run gives the executed ones with it."""
    from torchrl_dreamer.emulator.codegen import load_kernel_module

    gb = GameBoy(path, check_header=False, **kw)
    gb._kmod = load_kernel_module("cpu", count=True)
    gb.run_frames(WARMUP_FRAMES, render=False)
    c0 = int(gb.state_tensors()["st"][0, FIELDS["CYCLES"]])
    for k in range(frames // (PRESS + RELEASE)):
        gb.run_frames(PRESS, BUTTONS[k % len(BUTTONS)][1], render=False)
        gb.run_frames(RELEASE, render=False)
    return (int(gb.state_tensors()["st"][0, FIELDS["CYCLES"]]) - c0) / frames


def ours_env(n: int, steps: int) -> float:
    """Env steps/s of ``GameBoyEnv("maze", num_envs=n).fast_step`` (random actions)."""
    from torchrl_dreamer.envs import GameBoyEnv

    env = GameBoyEnv("maze", num_envs=n, seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = torch.randint(0, env.action_set.n, (64, n), generator=gen)
    for k in range(2):
        env.fast_step(actions[k])
    t = clock()
    for k in range(steps):
        env.fast_step(actions[k % 64])
    return steps * n / (clock() - t)


def peer_env(n: int, steps: int) -> float | None:
    """Env steps/s of ``n`` PyBoy instances stepped like the env (one after another)."""
    try:
        from pyboy import PyBoy
    except ImportError:
        return None
    import logging

    from torchrl_dreamer.roms import ram_map, rom_path

    logging.getLogger("pyboy").setLevel(logging.ERROR)
    rmap = ram_map("maze")
    pbs = []
    for _ in range(n):
        pb = PyBoy(str(rom_path("maze")), window="null", sound_emulated=False)
        pb.set_emulation_speed(0)
        pb.tick(30, False)
        pb.memory[rmap["NEW_GAME"]] = 1
        pb.tick(1, False)
        pbs.append(pb)
    names = ["", "up", "down", "left", "right"]
    gen = torch.Generator().manual_seed(0)
    actions = torch.randint(0, len(names), (64, n), generator=gen).tolist()
    t = clock()
    for k in range(steps):
        for pb, act in zip(pbs, actions[k % 64]):
            name = names[act]
            if name:
                pb.button_press(name)
            pb.tick(8, False)
            if name:
                pb.button_release(name)
            pb.tick(15, False)
            pb.tick(1, True)
            pb.screen.ndarray.copy()
            _ = pb.memory[rmap["GAME_STATE"]]
    dt = clock() - t
    for pb in pbs:
        pb.stop(save=False)
    return steps * n / dt


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


def alternated(rounds: int, ours, peer) -> tuple[list, float | None]:
    """``ours()`` and ``peer()`` run alternately ``rounds`` times: every result of ours, and
    the median of the peer's rates (None without the peer)."""
    runs, peers = [], []
    for _ in range(rounds):
        runs.append(ours())
        peers.append(peer())
    return runs, None if None in peers else statistics.median(peers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs (600 gameplay frames)")
    ap.add_argument("--games", nargs="*", default=None,
                    help="subset of games (default: all DMG cases); Color cases: "
                         + ", ".join(COLOR_CASES))
    ap.add_argument("--cgb", action="store_true",
                    help="also run the Color cases (" + ", ".join(COLOR_CASES) + ")")
    ap.add_argument("--envs", type=int, nargs="*", default=[1, 16, 256], help="env sizes N")
    ap.add_argument("--no-insns", action="store_true", help="skip the instruction counts")
    ap.add_argument("--idle-off", action="store_true", help="also time without the fast-forward")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile-time cases")
    ap.add_argument("--wall", action="store_true", help="time with wall clock, not CPU time")
    ap.add_argument("--frames", type=int, default=None,
                    help="gameplay frames timed per run (default 2,000; 600 with --quick)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs of each gameplay case from power-on (paired chunks) and of each "
                         "env case per emulator (alternated; medians)")
    ap.add_argument("--chunk", type=int, default=None,
                    help="gameplay frames each emulator runs in turn (a multiple of 40; default "
                         "400, 200 with --quick)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.wall:
        global clock
        clock = time.perf_counter
    frames = args.frames if args.frames is not None else (600 if args.quick else 2000)
    if frames < PRESS + RELEASE:
        ap.error(f"--frames must be at least {PRESS + RELEASE} (one button cycle), got {frames}")
    if args.chunk is None:
        args.chunk = 200 if args.quick else 400
    if args.chunk < PRESS + RELEASE or args.chunk % (PRESS + RELEASE) or args.chunk > frames:
        ap.error(f"--chunk must be a multiple of {PRESS + RELEASE} frames and at most --frames "
                 f"({frames}), got {args.chunk}")
    allg = games()
    colour = color_games(allg)
    names = list(args.games or allg) + (list(colour) if args.cgb else [])
    unknown = [n for n in names if n not in allg and n not in colour]
    if unknown:
        ap.error(f"unknown game(s) {unknown}; known: {', '.join([*allg, *colour])}")
    for name in dict.fromkeys(names):
        path = colour.get(name) or allg[name]
        if not path.is_file():
            continue
        # the DMG cases pin PyBoy to the DMG too: left to itself it runs a dual-mode cartridge
        # (Pandora's Blocks) on its Color model
        kw, peer_kw = ({"model": "cgb"}, {"cgb": True}) if name in colour else ({}, {"cgb": False})
        res = paired_gameplay(path, frames, args.chunk, args.rounds, kw, peer_kw)
        ours, gb, c0 = res["ours"], res["gb"], res["c0"]
        emit("emulator", f"gameplay/{name}", ours, res["peer"], "frames/s",
             speedup=res["speedup"], chunks=res["chunks"])
        if not args.no_insns:
            skipped = (int(gb.state_tensors()["st"][0, FIELDS["CYCLES"]]) - c0) / frames
            total = instructions(path, frames, skipped, **kw)
            emit("emulator", f"insns/{name}", total - skipped, total, "instructions/frame",
                 higher_is_better=False)
        if args.idle_off:
            off = ours_gameplay(path, frames, idle_skip=False, **kw)[0]
            emit("emulator", f"idle_skip_vs_off/{name}", ours, off, "frames/s")
    for n in args.envs:
        steps = max(2, (20 if args.quick else 60) // max(1, n // 4))
        runs, peer = alternated(args.rounds, partial(ours_env, n, steps),
                                partial(peer_env, min(n, 16), 10 if args.quick else 30))
        emit("emulator", f"env/N={n}", statistics.median(runs), peer, "env_steps/s")
    if not args.no_compile:
        (cold, cold_cpu), (cached, cached_cpu) = compile_times()
        emit("emulator", "compile/cold/wall", cold, None, "s", higher_is_better=False)
        emit("emulator", "compile/cold/cpu", cold_cpu, None, "s", higher_is_better=False)
        emit("emulator", "compile/cached/wall", cached, None, "s", higher_is_better=False)
        emit("emulator", "compile/cached/cpu", cached_cpu, None, "s", higher_is_better=False)


if __name__ == "__main__":
    main()
