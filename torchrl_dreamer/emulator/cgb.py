"""The Game Boy Color's registers: speed switch, VRAM/WRAM banks, palette memory, HDMA.

A Color console in Color mode (``CGB`` column = :data:`~.layout.MODEL_CGB`) answers these IO
registers; a DMG, or a Color running a DMG-only cartridge (its compatibility mode), reads them
as FF and ignores writes, as the Color's boot ROM locks them for such cartridges. The IO page
(:mod:`~.io`) calls :func:`cgb_io_read` / :func:`cgb_io_write` for FF4C-FF7F in Color mode
only, so a DMG pays one comparison on those (rare) addresses.

- KEY1 (FF4D): bit 0 arms a speed switch, done by the next STOP (:func:`speed_switch`, a pause
  of :data:`SPEED_SWITCH_DOTS` while the PPU runs on); bit 7
  reads the current speed (:mod:`~.speed`).
- VBK (FF4F): VRAM bank 1 (``cgbx`` row, see :mod:`~.layout`) at 8000-9FFF for the CPU and HDMA.
- SVBK (FF70): WRAM bank 1-7 at D000-DFFF (0 selects 1). The mapped bank always lives in the
  ``wram`` row itself, so every in-place WRAM access of the CPU kernel stays as on a DMG; a bank
  switch swaps the 4 KiB at D000 with the new bank's store in ``cgbx`` (8 KiB of copying per
  switch, in exchange for nothing on every access).
- BCPS/BCPD, OCPS/OCPD (FF68-FF6B): 64 bytes each of BG / OBJ palette memory (8 palettes of 4
  RGB555 colours, little-endian), written through an index with optional auto-increment; in
  mode 3 the data registers read FF and writes are dropped (the index still increments).
- HDMA1-5 (FF51-FF55): :mod:`~.hdma`.
- OPRI (FF6C): bit 0 set orders objects by X first as on a DMG (:mod:`~.render_cgb`); clear
  (the Color's own order), by OAM index.
- PCM12 / PCM34 (FF76 / FF77): the channels' current amplitudes (:mod:`~.apu_pcm`).

Facts: Pan Docs "CGB Registers", "Palettes", "Memory Map".
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.apu_pcm import apu_pcm
from torchrl_dreamer.emulator.hdma import hdma_pointer_write, hdma_read, hdma_write
from torchrl_dreamer.emulator.layout import (
    CGBX_BGPAL,
    CGBX_OBJPAL,
    CGBX_WRAM,
    MODEL_CGB,
    MODEL_CGB_COMPAT,
    MODEL_DMG,
    S_BOOT_ON,
    S_CGB,
    S_CLK,
    S_SPEED,
    S_SVBK,
    S_VBK,
    S_VRAM_OPEN,
)
from torchrl_dreamer.emulator.mappers import rtc_advance
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.ppu import (
    lcd_on,
    ppu_advance,
    ppu_next_event,
    ppu_refine,
    ppu_value,
    vram_blocked,
)
from torchrl_dreamer.emulator.registers import (
    R_BCPD,
    R_BCPS,
    R_HDMA1,
    R_HDMA4,
    R_HDMA5,
    R_KEY1,
    R_OCPD,
    R_OCPS,
    R_OPRI,
    R_PCM12,
    R_PCM34,
    R_STAT,
    R_SVBK,
    R_VBK,
)
from torchrl_dreamer.emulator.render_cgb import STOP_IN_MODE3, STOP_VRAM_LOCKED
from torchrl_dreamer.emulator.scheduler import schedule
from torchrl_dreamer.emulator.speed import cpu_cycles

__all__ = ["color_mode", "cgb_io_read", "cgb_io_write", "speed_switch", "stop_kind", "wram_bank"]

R_UNDOC72 = wp.constant(0x72)  # FF72-FF74: undocumented read/write bytes (Pan Docs "Undocumented registers")
R_UNDOC74 = wp.constant(0x74)
R_UNDOC75 = wp.constant(0x75)  # FF75: bits 4-6 read/write
R_KEY0 = wp.constant(0x4C)  # written by the Color boot ROM: bit 2 set = DMG compatibility mode


@wp.func
def color_mode(i: int, m: wp.ref[Mem]) -> bool:
    """Whether the console is a Game Boy Color in Color mode (not a DMG, not compatibility)."""
    i = console(i)
    return m.st[i, S_CGB] == MODEL_CGB


@wp.func(inline=False)
def wram_bank(i: int, m: wp.ref[Mem], v: int):
    """SVBK written with ``v``: map WRAM bank ``v & 7`` (0 means 1) at D000 by swapping the
    mapped 4 KiB with that bank's store (see the module docstring)."""
    i = console(i)
    new = v & 7
    if new == 0:
        new = 1
    old = m.st[i, S_SVBK]
    if new == old:
        return
    ob = CGBX_WRAM + (old - 1) * 0x1000
    nb = CGBX_WRAM + (new - 1) * 0x1000
    for k in range(0x1000):
        x = m.wram[i, 0x1000 + k]
        m.wram[i, 0x1000 + k] = m.cgbx[i, nb + k]
        m.cgbx[i, ob + k] = x
    m.st[i, S_SVBK] = new


@wp.func
def palette_base(r: int) -> int:
    """``cgbx`` offset of the palette memory behind BCPS/BCPD (``r`` <= BCPD) or OCPS/OCPD."""
    if r <= R_BCPD:
        return CGBX_BGPAL
    return CGBX_OBJPAL


@wp.func
def cgb_io_read(i: int, m: wp.ref[Mem], r: int) -> int:
    """Read Color register ``r`` (offset from FF00, FF4C-FF7F; Color mode, clock caught up)."""
    i = console(i)
    if r == R_KEY1:
        return 0x7E | (m.st[i, S_SPEED] << 7) | (int(m.hram[i, r]) & 1)
    if r == R_VBK:
        return 0xFE | m.st[i, S_VBK]
    if r == R_HDMA5:
        return hdma_read(i, m)
    if r == R_BCPS or r == R_OCPS:
        return int(m.hram[i, r]) | 0x40
    if r == R_BCPD or r == R_OCPD:
        if vram_blocked(i, m, 0, False):
            return 0xFF  # mode 3: the PPU owns palette memory
        return int(m.cgbx[i, palette_base(r) + (int(m.hram[i, r - 1]) & 0x3F)])
    if r == R_OPRI:
        return int(m.hram[i, r]) | 0xFE
    if r == R_SVBK:
        return int(m.hram[i, r]) | 0xF8
    if r == R_PCM12 or r == R_PCM34:
        return apu_pcm(i, m, r - R_PCM12)
    if r >= R_UNDOC72 and r <= R_UNDOC74:
        return int(m.hram[i, r])  # undocumented scratch registers: read/write, 0 after boot
    if r == R_UNDOC75:
        return int(m.hram[i, r]) | 0x8F  # bits 4-6 read/write, the others read 1
    return 0xFF


@wp.func(inline=False)
def cgb_io_write(i: int, m: wp.ref[Mem], r: int, v: int):
    """Write Color register ``r`` (FF4C-FF7F but FF50; Color mode, clock caught up)."""
    i = console(i)
    if r == R_KEY1:
        m.hram[i, r] = wp.uint8(v & 1)
    elif r == R_KEY0:
        if m.st[i, S_BOOT_ON] != 0 and (v & 4) != 0:
            m.st[i, S_CGB] = MODEL_CGB_COMPAT  # the boot ROM found a DMG-only cartridge
    elif r == R_VBK:
        m.st[i, S_VBK] = v & 1
    elif r >= R_HDMA1 and r <= R_HDMA4:
        hdma_pointer_write(i, m, r, v)
    elif r == R_HDMA5:
        # an HBlank transfer started with the LCD off or in mode 0 copies a block at once
        hblank_now = (v & 0x80) != 0 and (not lcd_on(i, m) or (ppu_value(i, m, R_STAT, 0) & 3) == 0)
        wait = hdma_write(i, m, v, hblank_now)
        if (v & 0x80) != 0:
            ppu_refine(i, m)  # an HBlank transfer needs every line's mode 0 point (observed)
        if wait > 0:
            # the CPU stands still while the bytes move: the lazy clock runs on by that long
            m.st[i, S_CLK] = m.st[i, S_CLK] + cpu_cycles(i, m, wait)
    elif r == R_BCPS or r == R_OCPS:
        m.hram[i, r] = wp.uint8(v & 0xBF)
    elif r == R_BCPD or r == R_OCPD:
        ix = int(m.hram[i, r - 1])
        if not vram_blocked(i, m, 0, False):
            m.cgbx[i, palette_base(r) + (ix & 0x3F)] = wp.uint8(v)
        if (ix & 0x80) != 0:
            m.hram[i, r - 1] = wp.uint8(0x80 | ((ix + 1) & 0x3F))
    elif r == R_OPRI:
        m.hram[i, r] = wp.uint8(v & 1)
    elif r == R_SVBK:
        m.hram[i, r] = wp.uint8(v & 7)
        wram_bank(i, m, v)
    elif r == R_PCM12 or r == R_PCM34:
        return
    elif r == R_UNDOC75:
        m.hram[i, r] = wp.uint8(v & 0x70)
    else:
        m.hram[i, r] = wp.uint8(v)


SPEED_SWITCH_DOTS = wp.constant(65556)
"""PPU dots a speed switch pauses the CPU, counted from STOP's M-cycle: the PPU and the MBC3
clock run on, while DIV (held at 0 from STOP's reset), TIMA, the serial clock, OAM DMA and the
APU, all clocked from the system counter, stand still. The hardware tables of daid's
speed_switch_timing_ly and _stat (a switch begun at line 144's start ends in line 133's HBlank
about 143 lines later; ``test_speed_switch.py``) hold in this model for 65,556 dots and no
other even value (65,554 fails the LY table, 65,558 the STAT table). Public emulators' notes
put their own constant at 65,540 with other M-cycles of the protocol counted elsewhere (a
Color HALT exit, STOP); Pan Docs' 2,050 M-cycles is ruled out by the LY table."""


@wp.func(inline=False)
def stop_kind(i: int, m: wp.ref[Mem]) -> int:
    """The ``STOPPED`` value of a STOP that stops (after STOP's catch-up): a Color stopped in
    mode 3 keeps its PPU's VRAM access (:data:`~.render_cgb.STOP_IN_MODE3`: the picture stays),
    any other STOP locks it (:data:`~.render_cgb.STOP_VRAM_LOCKED`; a DMG's LCD goes dark).
    Facts: daid's stop_instr and stop_instr_gbc_mode3 descriptions."""
    i = console(i)
    if m.st[i, S_CGB] != MODEL_DMG and lcd_on(i, m) and (ppu_value(i, m, R_STAT, 0) & 3) == 3:
        return STOP_IN_MODE3
    return STOP_VRAM_LOCKED


@wp.func(inline=False)
def speed_switch(i: int, m: wp.ref[Mem]) -> int:
    """STOP on a Color with KEY1 armed: switch speed instead of stopping (1), else 0.

    Called right after STOP's DIV reset (so the clock has caught up at the old speed). The CPU
    then waits :data:`SPEED_SWITCH_DOTS` while the PPU runs on (its interrupts are requested,
    and taken after the pause), and the next events are rescheduled in CPU T-cycles of the new
    speed."""
    i = console(i)
    if not color_mode(i, m) or (int(m.hram[i, R_KEY1]) & 1) == 0:
        return 0
    m.st[i, S_SPEED] = m.st[i, S_SPEED] ^ 1
    m.st[i, S_VRAM_OPEN] = 0  # the bus's VRAM bound counts T-cycles of the old speed
    m.hram[i, R_KEY1] = wp.uint8(0)
    left = int(SPEED_SWITCH_DOTS)
    while left > 0:  # event by event: ppu_advance expects no more than one event's span
        n = wp.min(ppu_next_event(i, m), left)
        ppu_advance(i, m, n)
        left = left - n
    rtc_advance(i, m, SPEED_SWITCH_DOTS)
    schedule(i, m)
    return 1
