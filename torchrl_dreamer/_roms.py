"""Where test ROMs live: ``$TORCHRL_DREAMER_ROMS`` or ``../shared/roms`` next to the checkout.

The public test ROMs (blargg, homebrew games) are never copied into this repository; tests and
benchmarks find them through :func:`roms_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent


def roms_dir() -> Path:
    """Return the directory holding the shared test ROMs (it may not exist)."""
    env = os.environ.get("TORCHRL_DREAMER_ROMS")
    if env:
        return Path(env).expanduser().resolve()
    return (_REPO_ROOT.parent / "shared" / "roms").resolve()


def shipped_roms_dir() -> Path:
    """Return the directory of the ROMs written by this project and shipped in the package."""
    return Path(__file__).resolve().parent / "roms"
