"""The CPU's view of the 64 KiB address space: :func:`peek` / :func:`poke` route each address.

The CPU kernel (:mod:`~torchrl_dreamer.emulator.codegen`) accesses the bus through :func:`tick`,
:func:`rd` / :func:`rd_now` and :func:`wr`: each bus M-cycle advances the lazy clock by 4 T-cycles
(syncing when the next event is due) and does WRAM, HRAM and ROM accesses (most of them) in
place; every other region goes through :func:`peek` / :func:`poke`, out of line. The clock
lives in the kernel's locals (``clk``, ``nxt``, ``dirty``), which these functions take by
reference (``wp.ref``), as they do the console's memory ``m`` (so no copy of the ``Mem`` struct
is made per access). Accesses to FE00-FEFF, and the IDU steps of :func:`tick_idu` /
:func:`rd_idu` on such an address, trigger the DMG OAM bug (:mod:`.oam_bug`); the check costs
one comparison on paths that already leave the in-place fast path. The hardware
blocks behind them live in one module each: :mod:`.mappers` (cartridge), :mod:`.io` (FF00-FFFF,
dispatching to :mod:`.timer`, :mod:`.ppu`, :mod:`.dma`, :mod:`.serial`, :mod:`.joypad`),
:mod:`.scheduler` (the lazy clock) and :mod:`.interrupts`.

Why our own: no Warp Game Boy exists to reuse; the code is written from hardware documentation
(Pan Docs facts) and is shared verbatim by the CPU and CUDA devices.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.dma import dma_active
from torchrl_dreamer.emulator.io import io_read, io_write
from torchrl_dreamer.emulator.layout import S_BOOT_ON, S_CLK, S_NEXT, S_ROM_OFF0, S_ROM_OFF1
from torchrl_dreamer.emulator.mappers import cart_write, cram_read, cram_write
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.oam_bug import OAM_BUG_READ, OAM_BUG_WRITE, oam_bug, oam_bug_read_idu
from torchrl_dreamer.emulator.scheduler import sync

__all__ = ["Mem", "peek", "poke", "tick", "tick_idu", "rd", "rd_idu", "rd_now", "wr"]


@wp.func
def peek(i: int, m: Mem, addr: int) -> int:
    """Read a byte through the bus view without advancing time."""
    if addr < 0x8000:
        if addr < 0x4000:
            if addr < 0x100 and m.st[i, S_BOOT_ON] != 0:
                return int(m.boot[addr])
            return int(m.rom[m.st[i, S_ROM_OFF0] + addr])
        return int(m.rom[m.st[i, S_ROM_OFF1] + addr - 0x4000])
    if addr < 0xA000:
        return int(m.vram[i, addr - 0x8000])
    if addr < 0xC000:
        return cram_read(i, m, addr)
    if addr < 0xFE00:
        return int(m.wram[i, addr & 0x1FFF])
    if addr < 0xFEA0:
        if dma_active(i, m):
            return 0xFF
        return int(m.oam[i, addr - 0xFE00])
    if addr < 0xFF00:
        return 0
    return io_read(i, m, addr - 0xFF00)


@wp.func
def poke(i: int, m: Mem, addr: int, v: int):
    """Write a byte through the bus view without advancing time."""
    if addr < 0x8000:
        cart_write(i, m, addr, v)
    elif addr < 0xA000:
        m.vram[i, addr - 0x8000] = wp.uint8(v)
    elif addr < 0xC000:
        cram_write(i, m, addr, v)
    elif addr < 0xFE00:
        m.wram[i, addr & 0x1FFF] = wp.uint8(v)
    elif addr < 0xFEA0:
        m.oam[i, addr - 0xFE00] = wp.uint8(v)
    elif addr >= 0xFF00:
        io_write(i, m, addr - 0xFF00, v)


@wp.func(inline=True)
def tick(i: int, m: wp.ref[Mem], clk: wp.ref[int], nxt: wp.ref[int], dirty: wp.ref[int]):
    """One M-cycle of the lazy clock: add 4 T-cycles; sync when the next event is due.

    ``dirty`` is set whenever out-of-line code ran (IF, IE, banks may have changed)."""
    clk = clk + 4
    if clk >= nxt:
        m.st[i, S_CLK] = clk
        sync(i, m)
        clk = m.st[i, S_CLK]
        nxt = m.st[i, S_NEXT]
        dirty = 1  # noqa: F841 (wp.ref: assigns the caller's local)


@wp.func(inline=True)
def tick_idu(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int],
             dirty: wp.ref[int]):
    """An M-cycle in which the IDU increments or decrements the register pair holding ``ad``
    with no memory access (``INC rr``, ``DEC rr``, the first ``SP`` decrement of a push): an
    FE00-FEFF value is a write for the OAM bug."""
    tick(i, m, clk, nxt, dirty)
    if ad >= 0xFE00 and ad < 0xFF00:
        oam_bug(i, m, clk, OAM_BUG_WRITE)


@wp.func(inline=True)
def rd_now(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int],
           dirty: wp.ref[int], rom0: int, rom1: int, boot: int) -> int:
    """The read of an M-cycle already ticked (the opcode fetch): WRAM, ROM (``rom0`` / ``rom1``
    bank offsets, boot ROM mapped while ``boot``) and HRAM in place, the rest through peek."""
    if ad >= 0xC000 and ad < 0xE000:
        return int(m.wram[i, ad - 0xC000])
    if ad >= 0x4000 and ad < 0x8000:
        return int(m.rom[rom1 + ad - 0x4000])
    if ad < 0x4000 and (ad >= 0x100 or boot == 0):
        return int(m.rom[rom0 + ad])
    if ad >= 0xFF80 and ad < 0xFFFF:
        return int(m.hram[i, ad - 0xFF00])
    m.st[i, S_CLK] = clk
    if ad >= 0xFE00 and ad < 0xFF00:
        oam_bug(i, m, clk, OAM_BUG_READ)
    v = peek(i, m, ad)
    clk = m.st[i, S_CLK]
    nxt = m.st[i, S_NEXT]  # noqa: F841 (wp.ref: assigns the caller's local)
    dirty = 1  # noqa: F841 (wp.ref: assigns the caller's local)
    return v


@wp.func(inline=True)
def rd(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int], dirty: wp.ref[int],
       rom0: int, rom1: int, boot: int) -> int:
    """One read M-cycle: :func:`tick`, then :func:`rd_now`."""
    tick(i, m, clk, nxt, dirty)
    return rd_now(i, m, ad, clk, nxt, dirty, rom0, rom1, boot)


@wp.func(inline=True)
def wr(i: int, m: wp.ref[Mem], ad: int, v: int, clk: wp.ref[int], nxt: wp.ref[int],
       dirty: wp.ref[int]):
    """One write M-cycle: :func:`tick`, then write the byte ``v & 0xFF`` at ``ad`` (WRAM and
    HRAM in place, the rest through poke)."""
    tick(i, m, clk, nxt, dirty)
    if ad >= 0xC000 and ad < 0xE000:
        m.wram[i, ad - 0xC000] = wp.uint8(v & 0xFF)
    elif ad >= 0xFF80 and ad < 0xFFFF:
        m.hram[i, ad - 0xFF00] = wp.uint8(v & 0xFF)
    else:
        m.st[i, S_CLK] = clk
        if ad >= 0xFE00 and ad < 0xFF00:
            oam_bug(i, m, clk, OAM_BUG_WRITE)
        poke(i, m, ad, v & 0xFF)
        clk = m.st[i, S_CLK]
        nxt = m.st[i, S_NEXT]
        dirty = 1


@wp.func(inline=True)
def rd_idu(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int],
           dirty: wp.ref[int], rom0: int, rom1: int, boot: int) -> int:
    """A read M-cycle in which the IDU also steps the register holding ``ad`` (``POP``, ``RET``,
    ``LD A,(HL+/-)``): the OAM bug's "read during increase" pattern on FE00-FEFF."""
    tick(i, m, clk, nxt, dirty)
    if ad >= 0xFE00 and ad < 0xFF00:
        oam_bug_read_idu(i, m, clk)
    return rd_now(i, m, ad, clk, nxt, dirty, rom0, rom1, boot)
