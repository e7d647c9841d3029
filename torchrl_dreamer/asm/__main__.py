"""Command line: assemble a source file into a Game Boy ROM.

Usage::

    python -m torchrl_dreamer.asm game.asm -o game.gb --title GAME
    python -m torchrl_dreamer.asm game.asm --symbols      # print the symbol table
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchrl_dreamer.asm.assembler import assemble
from torchrl_dreamer.asm.errors import AsmError
from torchrl_dreamer.asm.rom import build_rom

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (1 with a ``file:line`` message on an asm error)."""
    p = argparse.ArgumentParser(prog="python -m torchrl_dreamer.asm", description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path)
    p.add_argument("-o", "--output", type=Path, help="ROM to write (default: source with .gb)")
    p.add_argument("--title", default="", help="cartridge title (<= 15 ASCII characters)")
    p.add_argument("--cart-type", type=lambda s: int(s, 0), default=0, help="header byte $0147")
    p.add_argument("--entry", default="start", help="entry label (default: start)")
    p.add_argument("--symbols", action="store_true", help="print the symbols instead of writing")
    args = p.parse_args(argv)
    try:
        prog = assemble(args.source.read_text(), filename=str(args.source))
        if args.symbols:
            for name, value in sorted(prog.symbols.items(), key=lambda kv: (kv[1], kv[0])):
                print(f"${value:04X} {name}")
            return 0
        rom = build_rom(prog, title=args.title, cart_type=args.cart_type, entry=args.entry)
    except (AsmError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out = args.output or args.source.with_suffix(".gb")
    out.write_bytes(rom)
    print(f"wrote {out} ({len(rom)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
