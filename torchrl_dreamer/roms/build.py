"""Rebuild the shipped games from source, or check the committed ROMs match.

Usage::

    python -m torchrl_dreamer.roms.build            # rebuild every roms/<game>/<game>.gb
    python -m torchrl_dreamer.roms.build --check    # exit 1 if a committed ROM differs
    python -m torchrl_dreamer.roms.build maze       # just one game
"""

from __future__ import annotations

import argparse
import hashlib
import sys

from torchrl_dreamer.roms import GAMES, build_game, rom_path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("games", nargs="*", help=f"games to build (default: all of {sorted(GAMES)})")
    parser.add_argument("--check", action="store_true",
                        help="do not write: fail if a committed ROM differs from a fresh build")
    args = parser.parse_args(argv)
    unknown = [g for g in args.games if g not in GAMES]
    if unknown:
        parser.error(f"unknown game(s) {unknown}; available: {sorted(GAMES)}")
    status = 0
    for game in args.games or sorted(GAMES):
        rom = build_game(game)
        path = rom_path(game)
        digest = hashlib.sha256(rom).hexdigest()[:16]
        if args.check:
            if not path.is_file():
                print(f"{game}: MISSING {path} (run python -m torchrl_dreamer.roms.build)")
                status = 1
            elif path.read_bytes() != rom:
                print(f"{game}: DIFFERS from a fresh build (run python -m torchrl_dreamer.roms.build)")
                status = 1
            else:
                print(f"{game}: ok {len(rom)} bytes sha256:{digest}")
        else:
            path.write_bytes(rom)
            print(f"{game}: wrote {path} ({len(rom)} bytes, sha256:{digest})")
    return status


if __name__ == "__main__":
    sys.exit(main())
