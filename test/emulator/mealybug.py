"""Run mattcurrie's mealybug-tearoom DMG tests and compare the screen with the reference.

Each test runs its mid-scanline effect every frame and executes ``LD B,B`` in the VBlank
handler of its 10th frame; the screen must then equal ``expected/<name>.png`` (greys
255/170/85/0 = shades 0..3). Used by ``test_ppu_fifo.py``; run as a script to print the number
of differing pixels per test and write a diff image per test (calibration aid)::

    python test/emulator/mealybug.py [--ppu fifo|line] [--out DIR] [names...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from torchrl_dreamer._roms import roms_dir
from torchrl_dreamer.emulator import GameBoy

FRAMES = 12  # the verdict frame is the 10th; the effect is the same on every frame after the 1st


def mealybug_names(root: Path | None = None) -> list[str]:
    """Names of the mealybug ROMs present (without ``.gb``)."""
    d = (root or roms_dir()) / "mealybug"
    return sorted(p.stem for p in d.glob("*.gb")) if d.is_dir() else []


def reference(path: Path) -> np.ndarray:
    """Shades 0..3 of a reference screenshot."""
    from PIL import Image

    grey = np.asarray(Image.open(path).convert("L"), dtype=np.int64)
    return np.clip((255 - grey + 42) // 85, 0, 3)


def run_mealybug(name: str, ppu: str = "fifo", root: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(screen shades, reference shades) of test ``name`` after its verdict frame."""
    d = (root or roms_dir()) / "mealybug"
    gb = GameBoy(d / f"{name}.gb", check_header=False, framebuffer=True, ppu=ppu)
    gb.run_frames(FRAMES)
    return gb.framebuffer[0].cpu().numpy().astype(np.int64), reference(d / "expected" / f"{name}.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--ppu", default="fifo")
    ap.add_argument("--out", default="/tmp/mealybug")
    a = ap.parse_args(argv)
    from PIL import Image

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in a.names or mealybug_names():
        got, want = run_mealybug(name, a.ppu)
        bad = got != want
        # left: ours, middle: reference, right: differing pixels in red
        img = np.zeros((144, 160 * 3 + 4, 3), dtype=np.uint8)
        img[:, :160] = (255 - 85 * got)[..., None]
        img[:, 162:322] = (255 - 85 * want)[..., None]
        img[:, 324:] = (255 - 85 * want)[..., None] // 3
        img[:, 324:][bad] = (255, 0, 0)
        Image.fromarray(img).resize((img.shape[1] * 2, 288), Image.NEAREST).save(out / f"{name}.png")
        rows = sorted(set(np.nonzero(bad)[0].tolist()))
        print(f"{name}: {int(bad.sum())} px differ, rows {rows[:6]}{'...' if len(rows) > 6 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
