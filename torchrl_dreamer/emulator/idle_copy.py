"""Exact fast-forward of the memory copy idiom (a family of :func:`~.idle.idle_loop`).

The copy routine of the Game Boy tutorials and SDKs, ``Memcopy``::

    .loop: ld a, [de]      ; 2 M-cycles
           ld [hl+], a     ; 2 (the byte is written in the iteration's 4th M-cycle)
           inc de          ; 2
           dec bc          ; 2
           ld a, b         ; 1   (or ld a, c; or b)
           or c            ; 1
           jr nz, .loop    ; 3 taken (or jp nz, .loop: 4)

is 7 instructions and 13 (14) M-cycles a byte, and games run it for hundreds of bytes a frame
(Pandora's Blocks: 41 % of the instructions its gameplay executes on a DMG, docs/emulator.md).
Its iterations touch nothing but the bytes they copy, so between two scheduled events they
can be done in one go: ``k`` whole iterations (each with its branch taken) copy ``k`` bytes in
order (so overlapping ranges come out as the CPU leaves them), add ``k`` x 52 (56) T-cycles to
the clock and leave DE, HL and BC moved on by ``k``, A = B | C and F = 0 (OR of a non-zero
value), exactly what running them leaves. It is done only when that holds:

* the source is cartridge ROM (no boot ROM mapped), WRAM or HRAM;
* the destination is WRAM or HRAM, or VRAM bank 0 while every write lands before the bus's VRAM
  bound (``VRAM_OPEN``: the clock before which no VRAM write can be blocked, the bound the
  interpreter's in-place VRAM writes use, so the bytes land exactly where they would have);
  no IO register, OAM or cartridge RAM;
* the loop runs from ROM (the copy cannot rewrite it);
* no interrupt is about to be taken and no OAM DMA runs (bus conflicts);
* BC is below FE00, so no ``dec bc`` passes through FE00-FEFF (the DMG's OAM corruption bug);
* at least the last iteration (whose branch is not taken) is left to the interpreter.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.bus import rom_byte
from torchrl_dreamer.emulator.idle_state import store_regs
from torchrl_dreamer.emulator.layout import (
    S_BOOT_ON,
    S_ROM_OFF0,
    S_ROM_OFF1,
    S_VRAM_OPEN,
)
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.raw import u8_at, u8_set

__all__ = ["COPY_CYCLES", "copy_loop"]

COPY_CYCLES = wp.constant(52)
"""T-cycles of one iteration of the copy idiom with its branch taken (13 M-cycles; JP: 56)."""
COPY_WRITE_AT = wp.constant(16)
"""T-cycles from an iteration's start to the clock of its write (after its 4th M-cycle's tick)."""
COPY_INSTRUCTIONS = wp.constant(7)


@wp.func
def plain_ram(a: int, n: int) -> bool:
    """``n`` bytes from ``a`` lie in WRAM (C000-DFFF) or in HRAM (FF80-FFFE)."""
    z = a + n - 1
    return (a >= 0xC000 and z < 0xE000) or (a >= 0xFF80 and z < 0xFFFF)


@wp.func(inline=False)
def copy_loop(i: int, m: wp.ref[Mem], head: int, br: int, op: int, b: int, c: int, d: int, e: int,
              h: int, l: int, clk: int, kev: int, blocked: bool) -> int:  # noqa: E741
    """The copy idiom at ``head`` closed by ``op`` at ``br``: iterations skipped (the state row
    then holds the registers, PC and clock), 0 when none can be now (an event or interrupt
    near, ranges that are not plain memory: see the module docs), -1 when the code is not the
    idiom."""
    i = console(i)
    if (op != 0x20 and op != 0xC2) or br != head + 6 or br + 2 >= 0x8000 or m.st[i, S_BOOT_ON] != 0:
        return -1
    rom0 = m.st[i, S_ROM_OFF0]
    rom1 = m.st[i, S_ROM_OFF1]
    if (rom_byte(m, rom0, rom1, head + 1) != 0x22 or rom_byte(m, rom0, rom1, head + 2) != 0x13
            or rom_byte(m, rom0, rom1, head + 3) != 0x0B):
        return -1
    p4 = rom_byte(m, rom0, rom1, head + 4)
    p5 = rom_byte(m, rom0, rom1, head + 5)
    if not ((p4 == 0x78 and p5 == 0xB1) or (p4 == 0x79 and p5 == 0xB0)):
        return -1
    per = COPY_CYCLES
    if op == 0xC2:
        per = COPY_CYCLES + 4  # JP NZ taken: one M-cycle more than JR NZ
    bc = (b << 8) | c  # bytes left, the last one's iteration included (the branch was taken: > 0)
    if bc >= 0xFE00:
        return 0
    k = wp.min(bc - 1, kev // per)
    src = (d << 8) | e
    dst = (h << 8) | l
    vram = dst >= 0x8000 and dst + k <= 0xA000
    if vram:
        # the write of iteration j lands at clk + per * j + COPY_WRITE_AT: before the VRAM bound
        k = wp.min(k, (m.st[i, S_VRAM_OPEN] - clk - COPY_WRITE_AT + per - 1) // per)
    # not now (0, never -1: the kernel's rejected-loop hint must depend on the code alone, so
    # that where launches split a run does not change what is skipped)
    if k <= 0 or blocked or not (vram or plain_ram(dst, k)) or not (src + k <= 0x8000 or plain_ram(src, k)):
        return 0
    if src < 0x4000 and src + k > 0x4000:
        k = 0x4000 - src  # one ROM bank a call (the rest in the next one)
    for j in range(k):
        s = src + j
        v = 0
        if s < 0x8000:
            v = rom_byte(m, rom0, rom1, s)
        elif s < 0xE000:
            v = u8_at(m.wram, i, s - 0xC000)
        else:
            v = u8_at(m.hram, i, s - 0xFF00)
        t = dst + j
        if t < 0xA000:
            u8_set(m.vram, i, t - 0x8000, v)
        elif t < 0xE000:
            u8_set(m.wram, i, t - 0xC000, v)
        else:
            u8_set(m.hram, i, t - 0xFF00, v)
    nbc = bc - k
    src = src + k
    dst = dst + k
    # A = B | C and F = 0: the OR of a non-zero value (Z, N, H, C clear)
    store_regs(i, m, (nbc >> 8) | (nbc & 0xFF), 0, nbc >> 8, nbc & 0xFF, src >> 8, src & 0xFF,
               dst >> 8, dst & 0xFF, head, clk + per * k, COPY_INSTRUCTIONS * k)
    return COPY_INSTRUCTIONS * k
