"""The 64 KiB address space: :func:`peek` / :func:`poke` route each address.

The CPU kernel (:mod:`~torchrl_dreamer.emulator.codegen`) accesses the bus through :func:`tick`,
:func:`rd` / :func:`rd_now` and :func:`wr`: each bus M-cycle advances the lazy clock by 4 T-cycles
(syncing when the next event is due) and does WRAM, HRAM and ROM accesses (most of them) in place,
and cartridge RAM accesses too while the mapper would treat them as plain banked RAM
(:func:`~.mappers.cram_index`: RAM enabled, 8 KiB or more, not a clock register). The clock lives
in the kernel's locals (``clk``, ``nxt``, ``dirty``), which these functions take by reference
(``wp.ref``), as they do the console's memory ``m`` (so no copy of the ``Mem`` struct is made per
access). While an OAM DMA runs the in-place WRAM and ROM ranges are empty (the kernel's
``wram_end`` / ``rom_end`` / ``rom0_lo``; cartridge RAM is tested against them too), so every
access but HRAM's goes out of line. VRAM writes go in place too while the kernel's ``vram_end``
says that the PPU cannot be in mode 3 yet: an unblocked VRAM write or read through
:func:`cpu_write` / :func:`cpu_read`, and a STAT read outside mode 3, store that bound
(:func:`~.ppu.vram_write_open_until`, state column ``VRAM_OPEN``; each catch-up moves it on with
the clock's origin; every IO register write, a speed switch and STOP clear it), and the kernel
reads it with the other bounds. VRAM reads use it out of line: :func:`cpu_read` reads VRAM
without asking the PPU while mode 3 is at least :data:`~.ppu.VRAM_READ_LEAD` dots away (reads
are blocked that much earlier than writes). (In the kernel's in-place reads the same test made
games that never read VRAM slower: ``docs/emulator.md``.) The in-place accesses use
:mod:`.raw`'s loads and stores (Warp's indexing without its negative-index wrap). Every other access goes through :func:`cpu_read` /
:func:`cpu_write`, which apply what an OAM DMA in progress does to the CPU's accesses (:mod:`.dma`:
OAM unavailable, bus conflicts) and the PPU's VRAM/OAM blocking, and then call :func:`peek` /
:func:`poke`, the plain memory map (also the host's ``read_memory`` / ``write_memory`` view, which
sees OAM as it is).
Accesses to FE00-FEFF, and the IDU steps of :func:`tick_idu` / :func:`rd_idu` on such an address,
trigger the DMG OAM bug (:mod:`.oam_bug`); the check costs one comparison on paths that already
leave the in-place fast path (and on POP / RET / ``LD A,(HL+/-)``). The hardware
blocks behind them live in one module each: :mod:`.mappers` (cartridge), :mod:`.io` (FF00-FFFF,
dispatching to :mod:`.timer`, :mod:`.ppu`, :mod:`.dma`, :mod:`.serial`, :mod:`.joypad`),
:mod:`.scheduler` (the lazy clock) and :mod:`.interrupts`.

Why our own: no Warp Game Boy exists to reuse; the code is written from hardware documentation
(Pan Docs facts) and is shared verbatim by the CPU and CUDA devices.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.dma import dma_conflict, dma_copy_due, dma_read
from torchrl_dreamer.emulator.io import io_read, io_write
from torchrl_dreamer.emulator.layout import (
    CGBX_VRAM1,
    MODEL_DMG,
    S_BOOT_ON,
    S_CGB,
    S_CLK,
    S_NEXT,
    S_ROM_OFF0,
    S_ROM_OFF1,
    S_VBK,
    S_VRAM_OPEN,
)
from torchrl_dreamer.emulator.mappers import (
    cart_write,
    cram_index,
    cram_read,
    cram_write,
    rtc_needs_sync,
)
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.oam_bug import OAM_BUG_READ, OAM_BUG_WRITE, oam_bug, oam_bug_read_idu
from torchrl_dreamer.emulator.ppu import (
    VRAM_READ_LEAD,
    oam_read_blocked,
    oam_write_blocked,
    vram_blocked,
    vram_write_open_until,
)
from torchrl_dreamer.emulator.raw import rom_at, u8_at, u8_set
from torchrl_dreamer.emulator.scheduler import sync
from torchrl_dreamer.emulator.speed import dots

__all__ = ["HALT_BUG_PC", "Mem", "plain_pc", "peek", "poke", "cpu_read", "cpu_write", "tick", "tick_idu", "rd", "rd_idu", "rd_now", "rd_op", "rd_pc",
           "rom_byte", "wr"]


HALT_BUG_PC = 0x1FFFF
"""Added to the kernel's ``pc`` by a HALT that hits the HALT bug: the next opcode fetch reads
at ``(pc + 1) & 0xFFFF`` (the PC marked, through :func:`rd_op`'s slow path: no in-place range
holds an address above FFFF) and the step after it, ``(pc + 1) & 0xFFFF``, leaves the PC where
it was, so the byte after HALT is read twice (Pan Docs, "halt bug") with no per-instruction
test of a flag. The state row keeps the plain PC and ``HALT_BUG`` (:func:`plain_pc`)."""


@wp.func
def plain_pc(pc: int) -> int:
    """The PC a kernel ``pc`` stands for: itself, or the PC a :data:`HALT_BUG_PC` mark marks."""
    if pc > 0xFFFF:
        return (pc + 1) & 0xFFFF
    return pc


@wp.func
def rom_byte(m: wp.ref[Mem], rom0: int, rom1: int, a: int) -> int:
    """Cartridge ROM at ``a`` (0000-7FFF) with the banks at ROM offsets ``rom0`` / ``rom1``
    (``ROM_OFF0`` / ``ROM_OFF1``, boot ROM unmapped): what :func:`peek` reads there, unchecked
    (:mod:`.raw`), for code that already holds the offsets (the idle fast-forward)."""
    if a < 0x4000:
        return rom_at(m.rom, rom0 + a)
    return rom_at(m.rom, rom1 + a - 0x4000)


@wp.func
def peek(i: int, m: wp.ref[Mem], addr: int) -> int:
    """Read a byte through the memory map without advancing time (no DMA effects)."""
    i = console(i)
    if addr < 0x8000:
        if addr < 0x4000:
            bo = m.st[i, S_BOOT_ON]  # boot ROM mapped: its end (0x100 DMG, 0x900 Color)
            if bo != 0 and (addr < 0x100 or (addr >= 0x200 and addr < bo)):
                return int(m.boot[addr])
            return int(m.rom[m.st[i, S_ROM_OFF0] + addr])
        return int(m.rom[m.st[i, S_ROM_OFF1] + addr - 0x4000])
    if addr < 0xA000:
        if m.st[i, S_VBK] != 0:
            return int(m.cgbx[i, CGBX_VRAM1 + addr - 0x8000])  # Color: VRAM bank 1
        return int(m.vram[i, addr - 0x8000])
    if addr < 0xC000:
        return cram_read(i, m, addr)
    if addr < 0xFE00:
        return int(m.wram[i, addr & 0x1FFF])
    if addr < 0xFEA0:
        return int(m.oam[i, addr - 0xFE00])
    if addr < 0xFF00:
        return unusable_read(i, m, addr)
    return io_read(i, m, addr - 0xFF00)


@wp.func
def unusable_read(i: int, m: wp.ref[Mem], addr: int) -> int:
    """FEA0-FEFF (writes go nowhere): 00 on a DMG; on a Color (revision E, the one modelled) the
    address's second hex digit twice, FEAx reading AA (Pan Docs "FEA0-FEFF range";
    mattcurrie's which.gb tells the Color revisions apart by it: D keeps the bytes written, A-C
    mirror FEA0-FEBF). While the PPU owns OAM (modes 2 and 3) the CPU reads FF, as from OAM."""
    i = console(i)
    if m.st[i, S_CGB] == MODEL_DMG:
        return 0
    a = addr & 0xF0
    return a | (a >> 4)


@wp.func
def poke(i: int, m: wp.ref[Mem], addr: int, v: int):
    """Write a byte through the memory map without advancing time (no DMA effects; a write
    that latches or sets the MBC3 clock first brings the console up to the current cycle)."""
    i = console(i)
    if rtc_needs_sync(i, m, addr):
        sync(i, m)
    if addr < 0x8000:
        cart_write(i, m, addr, v)
    elif addr < 0xA000:
        if m.st[i, S_VBK] != 0:
            m.cgbx[i, CGBX_VRAM1 + addr - 0x8000] = wp.uint8(v)
        else:
            m.vram[i, addr - 0x8000] = wp.uint8(v)
    elif addr < 0xC000:
        cram_write(i, m, addr, v)
    elif addr < 0xFE00:
        m.wram[i, addr & 0x1FFF] = wp.uint8(v)
    elif addr < 0xFEA0:
        m.oam[i, addr - 0xFE00] = wp.uint8(v)
    elif addr >= 0xFF00:
        io_write(i, m, addr - 0xFF00, v)


@wp.func(inline=False)
def cpu_read(i: int, m: wp.ref[Mem], addr: int) -> int:
    """A CPU read at the current cycle (``CLK``: the console has not caught up, so DMA and PPU
    state are computed for that cycle). During an OAM DMA, OAM reads 0xFF and a read of the
    DMA's bus sees the byte the DMA reads (bus conflict, see :mod:`.dma`); VRAM in mode 3 and
    OAM in modes 2 and 3 read 0xFF (:func:`.ppu.vram_blocked`, :func:`.ppu.oam_read_blocked`).
    A VRAM read within the bus's VRAM bound reads without asking the PPU; one outside it that
    is not blocked stores the bound, as :func:`cpu_write` does. The host's memory view uses
    :func:`peek`."""
    i = console(i)
    t = m.st[i, S_CLK]
    dma_copy_due(i, m, t)
    if addr >= 0xFF00:
        return io_read(i, m, addr - 0xFF00)  # IO and HRAM: on no bus a DMA uses, never blocked
    src = dma_conflict(i, m, addr, t)
    if src >= 0:
        if addr >= 0xFE00:
            return 0xFF
        return dma_read(i, m, src)
    if addr >= 0x8000 and addr < 0xA000:
        if t + VRAM_READ_LEAD < m.st[i, S_VRAM_OPEN]:
            return int(m.vram[i, addr - 0x8000])  # (no bound is kept with VRAM bank 1 mapped)
        if vram_blocked(i, m, dots(i, m, t), True):
            return 0xFF
        m.st[i, S_VRAM_OPEN] = vram_write_open_until(i, m, t)
    elif addr >= 0xFE00 and addr < 0xFF00:
        if oam_read_blocked(i, m, dots(i, m, t)):
            return 0xFF
    return peek(i, m, addr)


@wp.func(inline=False)
def cpu_write(i: int, m: wp.ref[Mem], addr: int, v: int):
    """A CPU write at the current cycle (``CLK``): lost if it collides with an OAM DMA (OAM, or
    the bus the DMA reads from, see :mod:`.dma`), or if it targets VRAM in mode 3 or OAM while
    the PPU scans or draws (:func:`.ppu.oam_write_blocked`). A VRAM write that lands also
    stores when the next one could be blocked (``VRAM_OPEN``, for :func:`wr`'s in-place path)."""
    i = console(i)
    t = m.st[i, S_CLK]
    dma_copy_due(i, m, t)
    if dma_conflict(i, m, addr, t) >= 0:
        return
    if addr >= 0x8000 and addr < 0xA000:
        if vram_blocked(i, m, dots(i, m, t), False):
            return
        m.st[i, S_VRAM_OPEN] = vram_write_open_until(i, m, t)
    elif addr >= 0xFE00 and addr < 0xFEA0:
        if oam_write_blocked(i, m, dots(i, m, t)):
            return
    poke(i, m, addr, v)


@wp.func(inline=True)
def tick(i: int, m: wp.ref[Mem], clk: wp.ref[int], nxt: wp.ref[int], dirty: wp.ref[int]):
    """One M-cycle of the lazy clock: add 4 T-cycles; sync when the next event is due.

    ``dirty`` is set whenever out-of-line code ran (IF, IE, banks, a DMA may have changed)."""
    i = console(i)
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
    i = console(i)
    tick(i, m, clk, nxt, dirty)
    if ad >= 0xFE00 and ad < 0xFF00:
        oam_bug(i, m, clk, OAM_BUG_WRITE)


@wp.func(inline=True)
def rd_now(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int],
           dirty: wp.ref[int], rom0: int, rom1: int, rom0_lo: int, wram_end: int,
           rom_end: int) -> int:
    """The read of an M-cycle already ticked (the opcode fetch): WRAM below ``wram_end``, ROM
    below ``rom_end`` and ROM0 from ``rom0_lo`` on (``rom0`` / ``rom1`` bank offsets; ``rom0_lo``
    is 0x100 while the boot ROM is mapped, 0x4000 during an OAM DMA, else 0) and HRAM in place,
    the rest through :func:`cpu_read` at the current cycle."""
    i = console(i)
    if ad >= 0xC000 and ad < wram_end:
        return u8_at(m.wram, i, ad - 0xC000)
    if ad >= 0x4000 and ad < rom_end:
        return rom_at(m.rom, rom1 + ad - 0x4000)
    if ad < 0x4000 and ad >= rom0_lo:
        return rom_at(m.rom, rom0 + ad)
    if ad >= 0xFF80 and ad < 0xFFFF:
        return u8_at(m.hram, i, ad - 0xFF00)
    if ad >= 0xA000 and ad < 0xC000 and rom_end == 0x8000:
        k = cram_index(i, m, ad)
        if k >= 0:
            return u8_at(m.cram, i, k)
    m.st[i, S_CLK] = clk
    if ad >= 0xFE00 and ad < 0xFF00:
        oam_bug(i, m, clk, OAM_BUG_READ)
    v = cpu_read(i, m, ad)
    clk = m.st[i, S_CLK]
    nxt = m.st[i, S_NEXT]  # noqa: F841 (wp.ref: assigns the caller's local)
    dirty = 1  # noqa: F841 (wp.ref: assigns the caller's local)
    return v


@wp.func(inline=True)
def rd_op(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int],
          dirty: wp.ref[int], rom0: int, rom1: int, rom0_lo: int, wram_end: int,
          rom_end: int) -> int:
    """:func:`rd_now` for the opcode fetch: the same result, with the ROM ranges tested first
    (code mostly runs from ROM, data mostly lives in WRAM)."""
    i = console(i)
    if ad < 0x4000 and ad >= rom0_lo:
        return rom_at(m.rom, rom0 + ad)
    if ad >= 0x4000 and ad < rom_end:
        return rom_at(m.rom, rom1 + ad - 0x4000)
    if ad > 0xFFFF:  # the HALT bug's mark (HALT_BUG_PC): the fetch reads at the PC it marks
        return rd_now(i, m, plain_pc(ad), clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end)
    return rd_now(i, m, ad, clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end)


@wp.func(inline=True)
def rd(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int], dirty: wp.ref[int],
       rom0: int, rom1: int, rom0_lo: int, wram_end: int, rom_end: int) -> int:
    """One read M-cycle: :func:`tick`, then :func:`rd_now`."""
    i = console(i)
    tick(i, m, clk, nxt, dirty)
    return rd_now(i, m, ad, clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end)


@wp.func(inline=True)
def rd_pc(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int], dirty: wp.ref[int],
          rom0: int, rom1: int, rom0_lo: int, wram_end: int, rom_end: int) -> int:
    """One read M-cycle at PC (an instruction's immediate byte): :func:`tick`, then
    :func:`rd_op` (ROM first, where the code runs)."""
    i = console(i)
    tick(i, m, clk, nxt, dirty)
    return rd_op(i, m, ad, clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end)


@wp.func(inline=True)
def wr(i: int, m: wp.ref[Mem], ad: int, v: int, clk: wp.ref[int], nxt: wp.ref[int],
       dirty: wp.ref[int], wram_end: int, vram_end: int):
    """One write M-cycle: :func:`tick`, then write the byte ``v & 0xFF`` at ``ad`` (WRAM below
    ``wram_end``, HRAM, and VRAM while ``clk`` is below ``vram_end`` and nothing has run out of
    line since the kernel read it (``dirty``) in place, the rest through :func:`cpu_write` at
    the current cycle)."""
    i = console(i)
    tick(i, m, clk, nxt, dirty)
    if ad >= 0xC000 and ad < wram_end:
        u8_set(m.wram, i, ad - 0xC000, v)
    elif ad >= 0xFF80 and ad < 0xFFFF:
        u8_set(m.hram, i, ad - 0xFF00, v)
    elif ad >= 0x8000 and ad < 0xA000 and clk < vram_end and dirty == 0:
        # (dirty: a catch-up in this instruction moved the clock's origin; vram_end, read by
        # the kernel at the instruction's start, counts from the old one)
        u8_set(m.vram, i, ad - 0x8000, v)
    elif ad >= 0xA000 and ad < 0xC000 and wram_end == 0xE000 and cram_index(i, m, ad) >= 0:
        u8_set(m.cram, i, cram_index(i, m, ad), v)
    else:
        m.st[i, S_CLK] = clk
        if ad >= 0xFE00 and ad < 0xFF00:
            oam_bug(i, m, clk, OAM_BUG_WRITE)
        cpu_write(i, m, ad, v & 0xFF)
        clk = m.st[i, S_CLK]
        nxt = m.st[i, S_NEXT]
        dirty = 1


@wp.func(inline=True)
def rd_idu(i: int, m: wp.ref[Mem], ad: int, clk: wp.ref[int], nxt: wp.ref[int],
           dirty: wp.ref[int], rom0: int, rom1: int, rom0_lo: int, wram_end: int,
           rom_end: int) -> int:
    """A read M-cycle in which the IDU also steps the register holding ``ad`` (``POP``, ``RET``,
    ``LD A,(HL+/-)``): the OAM bug's "read during increase" pattern on FE00-FEFF."""
    i = console(i)
    tick(i, m, clk, nxt, dirty)
    if ad >= 0xFE00 and ad < 0xFF00:
        oam_bug_read_idu(i, m, clk)
    return rd_now(i, m, ad, clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end)
