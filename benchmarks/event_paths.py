"""Interrupts and hardware events as games use them, one micro ROM each, vs PyBoy on one CPU core.

Where ``memory_paths.py`` times the bus, these ROMs time the lazy clock's other side: every
interrupt a game asks for costs a catch-up of the hardware blocks, a dispatch and a handler, and a
STAT source keeps the PPU's lines observed (three events a line instead of one run of lines). In
each ROM (built with :mod:`torchrl_dreamer.asm`) the main loop is the same CPU-bound work (a
200-byte WRAM read-modify-write loop called again and again, never a waiting loop the idle
fast-forward would skip), and one event source interrupts it:

- ``cpu_loop``: no interrupt at all: the interpreter alone, for reference;
- ``hblank_irq``: the STAT mode 0 interrupt on every visible line, its handler writing SCX (the
  raster effects of wavy or parallax screens);
- ``lyc_irq``: the LY=LYC interrupt every 8 lines, its handler moving LYC and writing SCY
  (split screens, status bars);
- ``timer_irq``: the timer interrupt at 4,096 Hz (TAC 05, TMA C0), counting in WRAM (the timer
  that drives many music players);
- ``vblank_frame``: a game's frame: three calls of the work, HALT until VBlank, whose handler
  runs an OAM DMA from an HRAM routine and reads the joypad both ways;
- ``apu_driver``: the same frame, its VBlank handler writing ten sound registers and
  retriggering three channels (a music player's step).

Protocol, command line and output as ``memory_paths.py`` (``--quick``, ``--cases``,
``--frames``, ``--rounds``); ``bench`` is ``event_paths``.

Run: ``python benchmarks/event_paths.py [--quick] [--cases hblank_irq timer_irq]``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


def _memory_paths():
    """``benchmarks/memory_paths.py`` as a module: its runner of micro-ROM cases."""
    spec = importlib.util.spec_from_file_location("bench_memory_paths",
                                                  Path(_HERE) / "memory_paths.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MP = _memory_paths()

VECTORS = """
        org $40
        jp vblank
        org $48
        jp lcdstat
        org $50
        jp timer
        org $150
"""

WORK = """
work:   ld hl, $C100
        ld b, 200
.rmw:   ld a, [hl]
        add a, b
        ld [hl+], a
        dec b
        jr nz, .rmw
        ret
"""

# a game's frame: the work, then HALT until the VBlank interrupt
FRAME_LOOP = """
main:   call work
        call work
        call work
        halt
        jr main
"""

OAM_DMA = """
dmarun: ld a, $C1
        ldh [$46], a
        ld a, 40
.wait:  dec a
        jr nz, .wait
        ret
dmaend:
"""

# case -> program (VECTORS and WORK are added): the three handlers, a start and the main loop
CASES: dict[str, str] = {
    "cpu_loop": """
start:  ld sp, $DFFF
main:   call work
        jr main
vblank: reti
lcdstat: reti
timer:  reti
""",
    "hblank_irq": """
start:  ld sp, $DFFF
        ld a, $08
        ldh [$41], a
        ld a, $02
        ldh [$FF], a
        ei
main:   call work
        jr main
vblank: reti
timer:  reti
lcdstat: push af
        ld a, [$C000]
        inc a
        ld [$C000], a
        ldh [$43], a
        pop af
        reti
""",
    "lyc_irq": """
start:  ld sp, $DFFF
        ld a, $40
        ldh [$41], a
        ld a, 8
        ldh [$45], a
        ld a, $02
        ldh [$FF], a
        ei
main:   call work
        jr main
vblank: reti
timer:  reti
lcdstat: push af
        ldh a, [$45]
        add a, 8
        cp 144
        jr c, .next
        xor a
.next:  ldh [$45], a
        ldh [$42], a
        pop af
        reti
""",
    "timer_irq": """
start:  ld sp, $DFFF
        ld a, $C0
        ldh [$06], a
        ld a, $05
        ldh [$07], a
        ld a, $04
        ldh [$FF], a
        ei
main:   call work
        jr main
vblank: reti
lcdstat: reti
timer:  push af
        push hl
        ld hl, $C000
        inc [hl]
        pop hl
        pop af
        reti
""",
    "vblank_frame": """
start:  ld sp, $DFFF
        ld hl, dmarun
        ld c, $80
        ld b, dmaend - dmarun
.copy:  ld a, [hl+]
        ldh [c], a
        inc c
        dec b
        jr nz, .copy
        ld a, $01
        ldh [$FF], a
        ei
""" + FRAME_LOOP + """
lcdstat: reti
timer:  reti
vblank: push af
        push bc
        call $FF80
        ld a, $20
        ldh [$00], a
        ldh a, [$00]
        ldh a, [$00]
        ld b, a
        ld a, $10
        ldh [$00], a
        ldh a, [$00]
        ldh a, [$00]
        ldh a, [$00]
        ldh a, [$00]
        ld a, $30
        ldh [$00], a
        pop bc
        pop af
        reti
""" + OAM_DMA,
    "apu_driver": """
start:  ld sp, $DFFF
        ld a, $80
        ldh [$26], a
        ld a, $77
        ldh [$24], a
        ld a, $FF
        ldh [$25], a
        ld a, $01
        ldh [$FF], a
        ei
""" + FRAME_LOOP + """
lcdstat: reti
timer:  reti
vblank: push af
        ld a, [$C000]
        inc a
        ld [$C000], a
        ldh [$13], a
        ld a, $F3
        ldh [$12], a
        ld a, $87
        ldh [$14], a
        ld a, [$C000]
        ldh [$18], a
        ld a, $A1
        ldh [$17], a
        ld a, $86
        ldh [$19], a
        ld a, $40
        ldh [$21], a
        ld a, $61
        ldh [$22], a
        ld a, $80
        ldh [$23], a
        pop af
        reti
""",
}


def build(case: str) -> bytes:
    """The case's ROM (32 KiB, no mapper)."""
    from torchrl_dreamer.asm import assemble, build_rom

    return build_rom(assemble(VECTORS + CASES[case] + WORK), title=case.upper()[:11])


def main(argv: list[str] | None = None) -> int:
    return MP.run_micro_roms("event_paths", __doc__.splitlines()[0], list(CASES), build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
