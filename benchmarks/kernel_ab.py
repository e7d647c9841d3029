"""Two source trees of the emulator, timed in one process, chunk by chunk (paired A/B).

Alternating whole processes (``benchmarks/emulator.py``) leaves a few percent of noise on this
shared 2-core machine, more than most kernel changes move. Here both trees run in one process:
each tree's ``torchrl_dreamer`` package is copied under its own name (``tda``, ``tdb``: every
``torchrl_dreamer`` in its sources renamed) into a scratch folder, so both kernels load side by
side (two compiles, each cached by Warp). One console of each plays the same game with the
gameplay protocol of ``benchmarks/emulator.py`` (300 frames from power-on, then cycles of a
button held 8 frames and released 32), ``--chunk`` frames at a time, the two sides alternating
which goes first. Both consoles run the same frames, so each chunk gives a paired ratio of
process CPU times; the result is the median over the chunks.

One JSON line per game: ``ours`` the frames/s of tree B, ``peer`` those of tree A (the
baseline), ``speedup`` the median of A's over B's chunk times (> 1: B is faster), with the mean
and the number of chunks beside it. Two copies of the same tree measured within 3 % of each
other (2026-12-01, Pandora's Blocks and Tobu Tobu Girl, 40 chunks of 400 frames).

Usage: ``python benchmarks/kernel_ab.py [BASELINE_TREE [CANDIDATE_TREE]] [--games ...]
[--frames 16000] [--chunk 400] [--model cgb] [--quick]``; a tree is a checkout's root (e.g. ``git worktree
add /tmp/base <commit>``), by default this checkout, so that with no tree named the run
measures the harness's noise (A against A). ``--quick`` (what ``python -m
torchrl_dreamer.train bench`` runs): our maze, 1,600 frames in chunks of 200. The shared games need the shared ROM folder (``--roms``, default
``$TORCHRL_DREAMER_ROMS`` or ``../shared/roms``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Running a script puts its folder first on sys.path; benchmarks/ holds ray.py, which would
# shadow the real Ray package that torchrl probes for on import. Drop the folder.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

PACKAGE = "torchrl_dreamer"
WARMUP_FRAMES, PRESS, RELEASE = 300, 8, 32


def copy_renamed(tree: Path, name: str, dest: Path) -> Path:
    """Copy ``tree``'s package to ``dest/name`` with every ``torchrl_dreamer`` in its Python
    sources renamed to ``name``, so that two trees import side by side. Returns the copy."""
    src = Path(tree) / PACKAGE
    if not (src / "__init__.py").is_file():
        raise FileNotFoundError(f"{tree} is not a checkout of this project: no {PACKAGE}/__init__.py")
    out = Path(dest) / name
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__"))
    for path in out.rglob("*.py"):
        text = path.read_text()
        if PACKAGE in text:
            path.write_text(text.replace(PACKAGE, name))
    return out


def gameplay_rom(roms: Path, game: str) -> Path:
    """The ROM of a shared game (a folder of ``roms/games``), of one of ours, or a ROM file."""
    if Path(game).is_file():
        return Path(game)
    hits = sorted((roms / "games" / game).glob("*.gb*")) if (roms / "games" / game).is_dir() else []
    if not hits:
        ours = Path(_HERE).parent / PACKAGE / "roms" / game
        hits = sorted(ours.glob("*.gb")) if ours.is_dir() else []
    if not hits:
        raise FileNotFoundError(f"no ROM for {game!r} in {roms / 'games'} or among our games")
    return hits[0]


def paired(consoles: list[Any], buttons: list[int], frames: int, chunk: int) -> dict[str, float]:
    """Run both consoles ``frames`` frames of the protocol, ``chunk`` at a time, alternating
    which goes first; the paired figures."""
    def run(gb: Any, k0: int, n: int) -> float:
        t = time.process_time()
        for k in range(k0, k0 + n // (PRESS + RELEASE)):
            gb.run_frames(PRESS, buttons[k % len(buttons)], render=False)
            gb.run_frames(RELEASE, render=False)
        return time.process_time() - t

    ratios, totals, k = [], [0.0, 0.0], 0
    for c in range(frames // chunk):
        times = [0.0, 0.0]
        for side in ((0, 1) if c % 2 == 0 else (1, 0)):
            times[side] = run(consoles[side], k, chunk)
        k += chunk // (PRESS + RELEASE)
        ratios.append(times[0] / times[1])
        totals[0] += times[0]
        totals[1] += times[1]
    done = len(ratios) * chunk
    return {"baseline_fps": done / totals[0], "candidate_fps": done / totals[1],
            "speedup": statistics.median(ratios), "mean": statistics.mean(ratios),
            "chunks": len(ratios)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring); sizes that do not fit are refused."""
    here = Path(_HERE).parent
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("baseline", type=Path, nargs="?", default=here,
                   help="root of the baseline checkout (A; default: this checkout)")
    p.add_argument("candidate", type=Path, nargs="?", default=here,
                   help="root of the candidate checkout (B; default: this checkout, which "
                        "measures the harness's own noise)")
    p.add_argument("--games", nargs="+", default=None,
                   help="shared games (folders of ROMS/games) or ours (default: Pandora's "
                        "Blocks, Tobu Tobu Girl, 2048; --quick: maze)")
    p.add_argument("--frames", type=int, default=None, help="frames per side (16000; --quick 1600)")
    p.add_argument("--chunk", type=int, default=None, help="frames per paired chunk (400; --quick 200)")
    p.add_argument("--roms", type=Path, default=None)
    p.add_argument("--model", default=None,
                   help="console model for both sides (GameBoy(model=...), e.g. cgb; default: "
                        "the cartridge's choice)")
    p.add_argument("--quick", action="store_true", help="our maze only, 1,600 frames")
    args = p.parse_args(argv)
    quick = {"games": ["maze"], "frames": 1600, "chunk": 200}
    full = {"games": ["pandoras-blocks", "tobutobugirl", "2048-wyattferguson"], "frames": 16000,
            "chunk": 400}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    cycle = PRESS + RELEASE
    if args.chunk < cycle or args.chunk % cycle:
        p.error(f"--chunk must be a positive multiple of {cycle} frames, got {args.chunk}")
    if args.frames < 2 * args.chunk:
        p.error(f"--frames must hold at least two chunks ({2 * args.chunk}), got {args.frames}")
    return args


def main(argv: list[str] | None = None) -> int:
    from torchrl_dreamer._roms import roms_dir

    args = parse_args(argv)
    roms = args.roms or roms_dir()
    import torch
    import warp as wp

    torch.set_num_threads(1)
    wp.config.log_level = wp.LOG_WARNING
    scratch = Path(tempfile.mkdtemp(prefix="kernel_ab_"))
    try:
        for tag, tree in (("tda", args.baseline), ("tdb", args.candidate)):
            copy_renamed(tree, tag, scratch)
        sys.path.insert(0, str(scratch))
        for game in args.games:
            consoles, buttons = [], []
            for tag in ("tda", "tdb"):
                em = importlib.import_module(f"{tag}.emulator")
                buttons = [em.BUTTON_A, em.BUTTON_START, em.BUTTON_RIGHT, em.BUTTON_LEFT,
                           em.BUTTON_UP, em.BUTTON_DOWN, em.BUTTON_B, 0]
                kw = {"model": args.model} if args.model else {}
                gb = em.GameBoy(gameplay_rom(roms, game), check_header=False, **kw)
                gb.run_frames(WARMUP_FRAMES, render=False)
                consoles.append(gb)
            r = paired(consoles, buttons, args.frames, args.chunk)
            print(json.dumps({"bench": "kernel_ab", "case": f"gameplay/{game}",
                              "ours": round(r["candidate_fps"], 1),
                              "peer": round(r["baseline_fps"], 1), "unit": "frames/s",
                              "speedup": round(r["speedup"], 4), "mean": round(r["mean"], 4),
                              "chunks": r["chunks"], "baseline": str(args.baseline),
                              "candidate": str(args.candidate)}), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
