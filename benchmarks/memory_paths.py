"""The bus's memory paths, one micro ROM each, vs PyBoy on one CPU core.

The shared games spend their bus time on few paths (ROM, WRAM, HRAM, a few LCD registers); a
game we do not have may live elsewhere: in cartridge RAM, in VRAM, in ROM bank switches. Each
case here is a ROM of ours (built with :mod:`torchrl_dreamer.asm`) whose main loop hammers one
path and never waits, so its frames/s measures that path and the interpreter around it:

- ``wram_copy``: 1 KiB copied C000 -> C800 with ``ld a, [hl+]`` / ``ld [de], a``;
- ``cart_ram_copy``: the same in cartridge RAM (MBC5, 32 KiB), A000 -> A400, another RAM bank
  each pass;
- ``vram_read`` / ``vram_write``: 768 bytes of the BG map to WRAM and back with the LCD on (the
  accesses that fall in mode 3 are blocked, as on hardware);
- ``hram_loop``: read-modify-write of HRAM bytes with ``ldh``;
- ``lcd_registers``: reads of STAT, LY and SCY stored to WRAM (not a wait loop, so the idle
  fast-forward does not apply);
- ``rom_banks``: an MBC1 ROM bank switch and a read from 4000-7FFF per iteration.

Protocol: ``benchmarks/emulator.py``'s paired gameplay (300 frames from power-on, then
button cycles, which these ROMs ignore), ``--frames`` frames (default 1,200; 400 with
``--quick``) in chunks of 200 that the two emulators run in turn, over ``--rounds`` runs
(default 3); process CPU time. One JSON line per case: ``{"bench": "memory_paths", "case",
"ours", "peer", "unit": "frames/s", "speedup", "chunks"}``, ``speedup`` the median of the
per-chunk ratios (``peer`` and ``speedup`` null without PyBoy).

Run: ``python benchmarks/memory_paths.py [--quick] [--cases wram_copy cart_ram_copy]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


def _emulator_bench():
    """``benchmarks/emulator.py`` as a module: its PyBoy setup, clock and JSON line."""
    spec = importlib.util.spec_from_file_location("bench_emulator", Path(_HERE) / "emulator.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


E = _emulator_bench()
CHUNK = 200  # frames each emulator runs in turn

_COPY = """
.cp:    ld a, [hl+]
        ld [de], a
        inc de
        dec bc
        ld a, b
        or c
        jr nz, .cp
"""

# case -> (ROM source, cartridge type, RAM size code)
CASES: dict[str, tuple[str, int, int]] = {
    "wram_copy": ("start:  ld sp, $DFFF\nloop:   ld hl, $C000\n        ld de, $C800\n"
                  "        ld bc, $0400\n" + _COPY + "        jp loop\n", 0x00, 0),
    "cart_ram_copy": ("""
start:  ld sp, $DFFF
        ld a, $0A
        ld [$0000], a
loop:   ldh a, [$90]
        inc a
        and 3
        ldh [$90], a
        ld [$4000], a
        ld hl, $A000
        ld de, $A400
        ld bc, $0400
""" + _COPY + "        jp loop\n", 0x1B, 3),
    "vram_read": ("start:  ld sp, $DFFF\nloop:   ld hl, $9800\n        ld de, $C100\n"
                  "        ld bc, $0300\n" + _COPY + "        jp loop\n", 0x00, 0),
    "vram_write": ("start:  ld sp, $DFFF\nloop:   ld hl, $C100\n        ld de, $9800\n"
                   "        ld bc, $0300\n" + _COPY + "        jp loop\n", 0x00, 0),
    "hram_loop": ("""
start:  ld sp, $DFFF
loop:   ld c, $90
        ld b, 32
.rmw:   ldh a, [c]
        add a, b
        ldh [c], a
        inc c
        dec b
        jr nz, .rmw
        jp loop
""", 0x00, 0),
    "lcd_registers": ("""
start:  ld sp, $DFFF
loop:   ld hl, $C000
        ld b, 64
.rd:    ldh a, [$41]
        ld [hl+], a
        ldh a, [$44]
        ld [hl+], a
        ldh a, [$42]
        ld [hl+], a
        dec b
        jr nz, .rd
        jp loop
""", 0x00, 0),
    "rom_banks": ("""
start:  ld sp, $DFFF
loop:   ld b, 7
        ld hl, $C000
.sw:    ld a, b
        ld [$2000], a
        ld a, [$4000]
        ld [hl+], a
        dec b
        jr nz, .sw
        jp loop
""", 0x01, 0),
}


def build(case: str) -> bytes:
    """The case's ROM (128 KiB for ``rom_banks``, so that its 7 banks exist)."""
    from torchrl_dreamer.asm import assemble, build_rom

    src, cart_type, ram_code = CASES[case]
    size = 0x20000 if case == "rom_banks" else None
    return build_rom(assemble(src), title=case.upper()[:11], cart_type=cart_type,
                     rom_size=size, ram_size=ram_code)


def run_micro_roms(bench: str, description: str, cases: list[str],
                   build_case: Callable[[str], bytes], argv: list[str] | None = None) -> int:
    """The command line of a micro-ROM benchmark (this one, ``event_paths.py``): each of
    ``cases`` (``build_case`` makes its ROM) against PyBoy on the paired gameplay protocol, one
    JSON line each under the name ``bench``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="400 frames a run")
    ap.add_argument("--cases", nargs="+", default=list(cases), help="subset of " + ", ".join(cases))
    ap.add_argument("--frames", type=int, default=None, help="frames a run (1,200; --quick 400)")
    ap.add_argument("--rounds", type=int, default=3, help="runs from power-on, paired chunks")
    args = ap.parse_args(argv)
    unknown = [c for c in args.cases if c not in cases]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {', '.join(cases)}")
    frames = args.frames if args.frames is not None else (400 if args.quick else 1200)
    if frames < CHUNK or args.rounds < 1:
        ap.error(f"--frames must be at least {CHUNK} and --rounds at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            path = os.path.join(tmp, f"{case}.gb")
            Path(path).write_bytes(build_case(case))
            r = E.paired_gameplay(Path(path), frames // CHUNK * CHUNK, CHUNK, args.rounds, {},
                                  {"cgb": False})
            E.emit(bench, case, r["ours"], r["peer"], "frames/s", speedup=r["speedup"],
                   chunks=r["chunks"])
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_micro_roms("memory_paths", __doc__.splitlines()[0], list(CASES), build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
