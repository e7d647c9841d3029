"""OAM DMA: writing FF46 copies 160 bytes from ``page << 8`` into OAM, one byte per M-cycle.

Timing (DMG hardware; mooneye ``oam_dma_start`` / ``oam_dma_timing`` / ``oam_dma_restart``):
the write to FF46 happens in M-cycle 0; M-cycle 1 is a start-up delay (OAM still accessible);
byte ``k`` is transferred in M-cycle ``2 + k``, so OAM is unavailable to the CPU in M-cycles
2..161 and free again from M-cycle 162 (in M-cycle 1 the CPU still reads the old OAM). A write while a transfer runs restarts it, but the old
transfer keeps running (and blocking OAM) in M-cycles 0 and 1 until the new one's first byte.

While a transfer runs (:func:`dma_source_at`) the CPU reads 0xFF from OAM (FE00-FEFF) and its
writes there are ignored, and on a DMG the CPU shares a bus with the DMA unit: the *external*
bus (cartridge ROM/RAM and WRAM: 0000-7FFF, A000-FDFF) or the *VRAM* bus (8000-9FFF). A CPU
access to the bus the DMA is reading from is a bus conflict: a read sees the byte the DMA
reads in that M-cycle and a write is lost (BullyGB "DMA bus conflicts"). HRAM and the IO
registers are on neither bus, which is why games wait for the DMA in HRAM.

Sources: DMA reads its source through the cartridge, VRAM and WRAM; sources at E000 and above
read the WRAM echo on a DMG (Pan Docs "OAM DMA Transfer"; mooneye ``oam_dma/sources-GS``).

How it is emulated with the lazy clock: time is kept as ``DMA_END`` / ``DMA_PREV_END``,
T-cycles from the lazy origin (``CLK`` = 0) to just after the last M-cycle of the current
(previous) transfer, moved by :func:`dma_advance` on every catch-up. A transfer's times stay
negative after it ends (down to ``DMA_PAST``), so the PPU, which catches up after the DMA, can
still place a transfer that ended inside the catch-up's window (:func:`dma_source_at` with
``t`` < 0); a time at or past ``DMA_END`` is idle. So the byte the DMA reads at any CPU or PPU
access is arithmetic on ``CLK``, with no per-M-cycle work and no scheduled event. The 160 bytes
are copied into OAM at once when the transfer ends (``DMA_COPY`` is set until then;
:func:`dma_copy_due`, called after each catch-up, before a CPU access outside the fast paths and
before the PPU scans a line after the end): while it runs, the CPU reads 0xFF from OAM and the
PPU reads no OAM entry in its scan and the transfer's current byte pair in an object fetch
(:func:`dma_oam_pair`), so OAM keeps its old bytes for the PPU's reads before the transfer, and
the CPU cannot change the source (a write to the DMA's bus is lost): the copy ends identical to a
byte-per-M-cycle one. The generated CPU kernel sends every access except HRAM's through
:func:`~.bus.cpu_read` / :func:`~.bus.cpu_write` while ``DMA_END`` is ahead of the clock.

What the PPU sees (:mod:`.oam_view`): an OAM scan entry read while a transfer runs is not read
(a DMG judges it with the pair its OAM latch read last), and an object fetched in mode 3 while
a transfer runs takes its tile number and attributes from the OAM byte pair the transfer is
writing (the even byte the tile, the odd byte the attributes). These are what
``strikethrough`` (Hacktix) and "Red from OAM" show on screen.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    CGBX_VRAM1,
    S_BOOT_ON,
    S_DMA_COPY,
    S_DMA_END,
    S_DMA_PREV_END,
    S_DMA_PREV_SRC,
    S_DMA_SRC,
    S_PPU_M0,
    S_ROM_OFF0,
    S_ROM_OFF1,
    S_VBK,
)
from torchrl_dreamer.emulator.mappers import cram_read
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.raw import u8_copy
from torchrl_dreamer.emulator.registers import R_DMA

__all__ = ["oam_dma", "dma_advance", "dma_source_at", "dma_read", "dma_conflict", "dma_busy",
           "dma_copy_due", "dma_recent", "dma_ran_since", "dma_progress", "dma_oam_byte",
           "dma_oam_pair", "DMA_PAST", "DMA_PAST_T"]

DMA_BYTES = wp.constant(160)
DMA_DELAY = wp.constant(8)  # T-cycles from the FF46 write to the first byte (M-cycles 0 and 1)
DMA_SPAN = wp.constant(640)  # T-cycles from the first byte to just after the last (160 M-cycles)
DMA_PAST_T = -(1 << 24)
"""Earliest time kept for a finished transfer (~4 s before ``CLK``); also a console's
``DMA_END`` / ``DMA_PREV_END`` at power-on (no transfer ever ran)."""
DMA_PAST = wp.constant(DMA_PAST_T)
DMA_RECENT = wp.constant(1024)  # > two lines of dots: see dma_recent

BUS_NONE = wp.constant(0)  # HRAM, IO: never shared with the DMA unit
BUS_EXTERNAL = wp.constant(1)  # cartridge ROM / RAM and WRAM (and its echo)
BUS_VRAM = wp.constant(2)
BUS_OAM = wp.constant(3)  # the DMA's destination: unavailable to the CPU during a transfer


@wp.func
def dma_read(i: int, m: wp.ref[Mem], addr: int) -> int:
    """A byte as the DMA unit reads it from ``addr`` (no IO registers, no OAM: WRAM echo)."""
    i = console(i)
    if addr < 0x8000:
        if addr < 0x4000:
            bo = m.st[i, S_BOOT_ON]  # the boot ROM's end while it is mapped
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
    return int(m.wram[i, addr & 0x1FFF])


@wp.func
def cpu_bus(addr: int) -> int:
    """Which bus a CPU access to ``addr`` uses (``BUS_*``)."""
    if addr >= 0xFF00:
        return BUS_NONE
    if addr >= 0xFE00:
        return BUS_OAM
    if addr >= 0x8000 and addr < 0xA000:
        return BUS_VRAM
    return BUS_EXTERNAL


@wp.func
def dma_bus(src: int) -> int:
    """Which bus the DMA unit reads source address ``src`` on (E000-FFFF is the WRAM echo)."""
    if src >= 0x8000 and src < 0xA000:
        return BUS_VRAM
    return BUS_EXTERNAL


@wp.func(inline=False)
def oam_dma(i: int, m: wp.ref[Mem], src: int):
    """FF46 written with ``src`` at the current cycle (the console has caught up: ``CLK`` = 0).

    A transfer still running becomes the previous one, which runs on until the new first byte.
    The cached mode-3 end (``PPU_M0``) is dropped: a transfer during a line's OAM scan hides
    entries from it (:mod:`.oam_view`).
    """
    i = console(i)
    m.hram[i, R_DMA] = wp.uint8(src)
    m.st[i, S_PPU_M0] = 0
    m.st[i, S_DMA_PREV_END] = m.st[i, S_DMA_END]
    m.st[i, S_DMA_PREV_SRC] = m.st[i, S_DMA_SRC]
    m.st[i, S_DMA_END] = DMA_DELAY + DMA_SPAN
    m.st[i, S_DMA_SRC] = src << 8
    m.st[i, S_DMA_COPY] = 1


@wp.func(inline=False)
def dma_copy(i: int, m: wp.ref[Mem]):
    """Copy the current transfer's 160 source bytes into OAM.

    A source at C000 or above (WRAM, its echo, and the FE / FF pages, which read the echo too:
    :func:`dma_read`) is 160 contiguous WRAM bytes (the page starts on a multiple of 0x100, so
    ``& 0x1FFF`` never wraps inside it): copied in place (:mod:`.raw`), the source games use
    every frame. Other sources go byte by byte through :func:`dma_read`."""
    i = console(i)
    m.st[i, S_DMA_COPY] = 0
    base = m.st[i, S_DMA_SRC]
    if base >= 0xC000:
        u8_copy(m.oam, i, 0, m.wram, base & 0x1FFF, DMA_BYTES)
        return
    for k in range(DMA_BYTES):
        m.oam[i, k] = wp.uint8(dma_read(i, m, (base + k) & 0xFFFF))


@wp.func
def dma_copy_due(i: int, m: wp.ref[Mem], t: int):
    """Do the pending copy if lazy time ``t`` has reached the transfer's end."""
    i = console(i)
    if m.st[i, S_DMA_COPY] != 0 and t >= m.st[i, S_DMA_END]:
        dma_copy(i, m)


@wp.func
def dma_progress(i: int, m: wp.ref[Mem], t: int) -> wp.vec2i:
    """(bytes written, source address) of the transfer running at lazy time ``t`` (the current
    or the previous one), or (-1, 0) if none runs then."""
    i = console(i)
    end = m.st[i, S_DMA_END]
    if t >= end:
        return wp.vec2i(-1, 0)
    t0 = end - DMA_SPAN
    if t >= t0:
        return wp.vec2i((t - t0) // 4, m.st[i, S_DMA_SRC])
    end = m.st[i, S_DMA_PREV_END]
    t0 = end - DMA_SPAN
    if t >= end or t < t0:
        return wp.vec2i(-1, 0)
    return wp.vec2i((t - t0) // 4, m.st[i, S_DMA_PREV_SRC])


@wp.func
def dma_source_at(i: int, m: wp.ref[Mem], t: int) -> int:
    """Address the DMA unit reads in the M-cycle of an access at lazy time ``t`` (``CLK``), or
    -1 if no transfer runs then (idle, or the start-up M-cycle of a fresh one)."""
    i = console(i)
    p = dma_progress(i, m, t)
    if p[0] < 0:
        return -1
    return (p[1] + p[0]) & 0xFFFF


@wp.func
def dma_conflict(i: int, m: wp.ref[Mem], addr: int, t: int) -> int:
    """Source address the DMA reads if a CPU access to ``addr`` at lazy time ``t`` collides with
    it (same bus, or OAM), else -1."""
    i = console(i)
    bus = cpu_bus(addr)
    if bus == BUS_NONE:
        return -1
    src = dma_source_at(i, m, t)
    if src < 0:
        return -1
    if bus == BUS_OAM or bus == dma_bus(src):
        return src
    return -1


@wp.func
def dma_busy(i: int, m: wp.ref[Mem], t: int) -> bool:
    """Whether a transfer (or its start-up delay) is still ahead of lazy time ``t``."""
    i = console(i)
    return m.st[i, S_DMA_END] > t


@wp.func
def dma_ran_since(i: int, m: wp.ref[Mem], t: int) -> bool:
    """Whether a transfer (the current or the previous one) runs at or after lazy time ``t``."""
    i = console(i)
    return m.st[i, S_DMA_END] > t or m.st[i, S_DMA_PREV_END] > t


@wp.func
def dma_recent(i: int, m: wp.ref[Mem]) -> bool:
    """Whether a transfer runs now or ended within the last ``DMA_RECENT`` T-cycles: the only
    ones that can reach the PPU's reads of the current line (which started at most a line ago,
    two lines of CPU T-cycles in double speed) or of later lines (a cheap first test)."""
    i = console(i)
    return dma_ran_since(i, m, -DMA_RECENT)


@wp.func
def dma_oam_byte(i: int, m: wp.ref[Mem], p: wp.vec2i, b: int) -> int:
    """OAM byte ``b`` during a transfer ``p`` (:func:`dma_progress`): the source's byte where
    the transfer has written it, else OAM's (old) byte."""
    i = console(i)
    if b < p[0]:
        return dma_read(i, m, (p[1] + b) & 0xFFFF)
    return int(m.oam[i, b])


@wp.func
def dma_oam_pair(i: int, m: wp.ref[Mem], t: int, odd: int) -> int:
    """The OAM byte an object fetch reads at lazy time ``t`` while a transfer runs: byte
    ``odd`` (0: the tile number, 1: the attributes) of the pair holding the next byte the
    transfer writes (:func:`dma_oam_byte`); -1 if no transfer runs then."""
    i = console(i)
    p = dma_progress(i, m, t)
    if p[0] < 0:
        return -1
    return dma_oam_byte(i, m, p, (p[0] & 0xFE) | odd)


@wp.func(inline=True)
def dma_advance(i: int, m: wp.ref[Mem], c: int):
    """Move the transfer times ``c`` T-cycles closer (the lazy origin moves by ``c``), keeping a
    finished transfer's times (down to ``DMA_PAST``) for the PPU's catch-up that follows."""
    i = console(i)
    e = m.st[i, S_DMA_END] - c
    if e < DMA_PAST:
        e = DMA_PAST
    m.st[i, S_DMA_END] = e
    p = m.st[i, S_DMA_PREV_END] - c
    if p < DMA_PAST:
        p = DMA_PAST
    m.st[i, S_DMA_PREV_END] = p
