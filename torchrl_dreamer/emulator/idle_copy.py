"""Exact fast-forward of the memory copy idiom (a family of :func:`~.idle.idle_loop`).

The copy routine of the Game Boy tutorials and SDKs, ``Memcopy``::

    .loop: ld a, [de]      ; 2 M-cycles
           ld [hl+], a     ; 2
           inc de          ; 2
           dec bc          ; 2
           ld a, b         ; 1   (or ld a, c; or b)
           or c            ; 1
           jr nz, .loop    ; 3 taken

is 7 instructions and 13 M-cycles a byte, and games run it for hundreds of bytes a frame
(Pandora's Blocks: 41 % of the instructions its gameplay executes on a DMG, docs/emulator.md).
Its iterations touch nothing but the bytes they copy, so between two scheduled events they
can be done in one go: ``k`` whole iterations (each with its branch taken) copy ``k`` bytes in
order (so overlapping ranges come out as the CPU leaves them), add ``k`` x 52 T-cycles to the
clock and leave DE, HL and BC moved on by ``k``, A = B | C and F = 0 (OR of a non-zero value),
exactly what running them leaves. It is done only when that holds for any timing of the bytes:

* the source is cartridge ROM (no boot ROM mapped), WRAM or HRAM, and the destination WRAM or
  HRAM (no IO register, VRAM, OAM or cartridge RAM, whose access rules depend on the time);
* the loop runs from ROM (the copy cannot rewrite it);
* no interrupt is about to be taken and no OAM DMA runs (bus conflicts);
* BC is below FE00, so no ``dec bc`` passes through FE00-FEFF (the DMG's OAM corruption bug);
* at least the last iteration (whose branch is not taken) is left to the interpreter.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.bus import peek
from torchrl_dreamer.emulator.layout import (
    S_A,
    S_B,
    S_BOOT_ON,
    S_C,
    S_CLK,
    S_CYCLES,
    S_D,
    S_E,
    S_F,
    S_H,
    S_L,
    S_PC,
)
from torchrl_dreamer.emulator.memory import Mem

__all__ = ["COPY_CYCLES", "copy_loop"]

COPY_CYCLES = wp.constant(52)
"""T-cycles of one iteration of the copy idiom with its branch taken (13 M-cycles)."""
COPY_INSTRUCTIONS = wp.constant(7)


@wp.func
def plain_ram(a: int, n: int) -> bool:
    """``n`` bytes from ``a`` lie in WRAM (C000-DFFF) or in HRAM (FF80-FFFE)."""
    z = a + n - 1
    return (a >= 0xC000 and z < 0xE000) or (a >= 0xFF80 and z < 0xFFFF)


@wp.func
def ram_write(i: int, m: wp.ref[Mem], a: int, v: int):
    """A CPU write to WRAM or HRAM (the only destinations :func:`copy_loop` takes)."""
    if a < 0xE000:
        m.wram[i, a & 0x1FFF] = wp.uint8(v)
    else:
        m.hram[i, a - 0xFF00] = wp.uint8(v)


@wp.func(inline=False)
def copy_loop(i: int, m: wp.ref[Mem], head: int, br: int, op: int, b: int, c: int, d: int, e: int,
              h: int, l: int, clk: int, kev: int, blocked: bool) -> int:  # noqa: E741
    """The copy idiom at ``head`` closed by ``op`` at ``br``: iterations skipped (the state row
    then holds the registers, PC and clock), 0 when none can be now (an event or interrupt
    near, ranges that are not plain memory: see the module docs), -1 when the code is not the
    idiom."""
    if op != 0x20 or br != head + 6 or head >= 0x8000 or m.st[i, S_BOOT_ON] != 0:
        return -1
    if peek(i, m, head + 1) != 0x22 or peek(i, m, head + 2) != 0x13 or peek(i, m, head + 3) != 0x0B:
        return -1
    p4 = peek(i, m, head + 4)
    p5 = peek(i, m, head + 5)
    if not ((p4 == 0x78 and p5 == 0xB1) or (p4 == 0x79 and p5 == 0xB0)):
        return -1
    bc = (b << 8) | c  # bytes left, the last one's iteration included (the branch was taken: > 0)
    if bc >= 0xFE00:
        return 0
    k = bc - 1
    if kev // COPY_CYCLES < k:
        k = kev // COPY_CYCLES
    src = (d << 8) | e
    dst = (h << 8) | l
    # not now (0, never -1: the kernel's rejected-loop hint must depend on the code alone, so
    # that where launches split a run does not change what is skipped)
    if k <= 0 or blocked or not plain_ram(dst, k) or not (src + k <= 0x8000 or plain_ram(src, k)):
        return 0
    for j in range(k):
        ram_write(i, m, dst + j, peek(i, m, src + j))
    nbc = bc - k
    src = src + k
    dst = dst + k
    m.st[i, S_PC] = head
    m.st[i, S_A] = (nbc >> 8) | (nbc & 0xFF)
    m.st[i, S_F] = 0  # OR of a non-zero value: Z, N, H, C clear
    m.st[i, S_B] = nbc >> 8
    m.st[i, S_C] = nbc & 0xFF
    m.st[i, S_D] = src >> 8
    m.st[i, S_E] = src & 0xFF
    m.st[i, S_H] = dst >> 8
    m.st[i, S_L] = dst & 0xFF
    m.st[i, S_CLK] = clk + COPY_CYCLES * k
    m.st[i, S_CYCLES] = m.st[i, S_CYCLES] + COPY_INSTRUCTIONS * k
    return COPY_INSTRUCTIONS * k
