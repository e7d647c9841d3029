"""PPU modes compared: ``GameBoy(ppu="fifo")`` vs ``ppu="line"`` on every shared game and ours.

Prints one JSON line per result: {"bench", "case", "ours", "peer", "unit", "speedup"} with ours =
fifo, peer = line, in frames/s of process CPU time (one thread):

- ``ppu_render/<game>``: the gameplay protocol of ``benchmarks/emulator.py`` (300 frames from
  power-on, then cycles of a button held 8 frames and released 32) with every frame drawn
  (``render=True``): the PPU's worst case, where the fifo mode's pipeline runs on every line
  with a mid-mode-3 LCD register write.
- ``ppu_norender/<game>``: the same with ``render=False`` (the gameplay case of
  ``benchmarks/emulator.py``).

Run: ``python benchmarks/ppu_modes.py [--frames 2000] [--games maze snake] [--quick]`` (``--quick``:
300 frames a case).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, _HERE)

import torch  # noqa: E402

torch.set_num_threads(1)

from emulator import BUTTONS, PRESS, RELEASE, WARMUP_FRAMES, emit, games  # noqa: E402

from torchrl_dreamer.emulator import GameBoy  # noqa: E402


def run(path, ppu: str, frames: int, render: bool) -> float:
    """Frames/s (CPU time) of the gameplay protocol in PPU mode ``ppu``."""
    gb = GameBoy(path, check_header=False, ppu=ppu)
    gb.run_frames(WARMUP_FRAMES, render=render)
    t = time.process_time()
    for k in range(frames // (PRESS + RELEASE)):
        gb.run_frames(PRESS, BUTTONS[k % len(BUTTONS)][1], render=render)
        gb.run_frames(RELEASE, render=render)
    return frames / (time.process_time() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--games", nargs="*", default=None)
    ap.add_argument("--quick", action="store_true", help="300 frames a case")
    a = ap.parse_args()
    if a.quick:
        a.frames = min(a.frames, 300)
    found = games()
    for name in a.games or list(found):
        path = found[name]
        for render, bench in ((True, "ppu_render"), (False, "ppu_norender")):
            line = run(path, "line", a.frames, render)
            fifo = run(path, "fifo", a.frames, render)
            emit(bench, name, fifo, line, "frames/s")


if __name__ == "__main__":
    main()
