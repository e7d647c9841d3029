"""The memory bus, timer, PPU timing, serial, OAM DMA and cartridge mappers as Warp functions.

The generated CPU kernel (see :mod:`torchrl_dreamer.emulator.codegen`) calls :func:`rd` /
:func:`wr` for every bus access and :func:`tick` for every internal M-cycle. Each of them first
advances the rest of the console by one M-cycle (4 T-cycles), so memory accesses land on the
M-cycle they happen on in hardware (what blargg's ``instr_timing`` / ``mem_timing`` check).

Why our own: no Warp Game Boy bus exists to reuse; the code is written from hardware documentation
(Pan Docs facts) and is shared verbatim by the CPU and CUDA devices.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_BANK1,
    S_BANK2,
    S_BOOT_ON,
    S_CLK,
    S_DIV16,
    S_DMA_CNT,
    S_FRAME_DONE,
    S_FRAMES,
    S_JOY,
    S_LINE,
    S_MBC,
    S_MBC_MODE,
    S_MODE,
    S_NEXT,
    S_PACK,
    S_PPU_DOT,
    S_PPU_NEXT,
    S_PYBOY_TIMING,
    S_RAM_BANK,
    S_RAM_EN,
    S_RAM_SIZE,
    S_ROM_MASK,
    S_ROM_OFF0,
    S_ROM_OFF1,
    S_RTC_DH,
    S_RTC_DL,
    S_RTC_H,
    S_RTC_LATCH,
    S_RTC_LDH,
    S_RTC_LDL,
    S_RTC_LH,
    S_RTC_LM,
    S_RTC_LS,
    S_RTC_M,
    S_RTC_S,
    S_RTC_SUB,
    S_SER_CNT,
    S_SER_N,
    S_STAT_EN,
    S_STAT_LINE,
    S_TAC,
    S_TIMA,
    S_TIMA_OVF,
    S_TMA,
    S_WIN_LINE,
)
from torchrl_dreamer.emulator.layout import SERIAL_CAPACITY as _SER_CAP
from torchrl_dreamer.emulator.render import pack_line_packed2, render_scanline

SER_CAP = wp.constant(_SER_CAP)

# Mapper ids stored in state column MBC.
MBC_NONE = wp.constant(0)
MBC_1 = wp.constant(1)
MBC_2 = wp.constant(2)
MBC_3 = wp.constant(3)
MBC_5 = wp.constant(5)


@wp.struct
class Mem:
    """Every per-console array the kernel touches, bundled so helpers take one argument.

    ``st`` is the int32 state table (see :mod:`~torchrl_dreamer.emulator.layout`); the uint8 arrays
    are indexed ``[env, offset]``; ``rom`` and ``boot`` are shared by all consoles.
    """

    st: wp.array2d(dtype=wp.int32)
    vram: wp.array2d(dtype=wp.uint8)
    oam: wp.array2d(dtype=wp.uint8)
    wram: wp.array2d(dtype=wp.uint8)
    hram: wp.array2d(dtype=wp.uint8)
    cram: wp.array2d(dtype=wp.uint8)
    ser: wp.array2d(dtype=wp.uint8)
    rom: wp.array(dtype=wp.uint8)
    boot: wp.array(dtype=wp.uint8)
    fb: wp.array3d(dtype=wp.uint8)
    obs: wp.array4d(dtype=wp.uint8)


# ----------------------------------------------------------------------------------------- timer
@wp.func
def timer_mask(tac: int) -> int:
    """Bit of the 16-bit divider whose falling edge clocks TIMA for TAC's clock select."""
    sel = tac & 3
    if sel == 0:
        return 512
    if sel == 1:
        return 8
    if sel == 2:
        return 32
    return 128


@wp.func(inline=False)
def tima_inc(i: int, m: Mem):
    """Increment TIMA; on overflow it reads 0 for one M-cycle, then reloads TMA and raises IRQ 2."""
    t = m.st[i, S_TIMA] + 1
    if t > 255:
        m.st[i, S_TIMA] = 0
        m.st[i, S_TIMA_OVF] = 1
    else:
        m.st[i, S_TIMA] = t


@wp.func
def raise_irq(i: int, m: Mem, bit: int):
    """Set a bit of IF (FF0F)."""
    m.hram[i, 0x0F] = wp.uint8(int(m.hram[i, 0x0F]) | bit)


# ------------------------------------------------------------------------------------------- PPU
@wp.func(inline=False)
def stat_update(i: int, m: Mem):
    """Recompute the STAT interrupt line; its rising edge requests the LCD STAT interrupt."""
    sig = 0
    if (int(m.hram[i, 0x40]) & 0x80) != 0:
        en = m.st[i, S_STAT_EN]
        mode = m.st[i, S_MODE]
        if (en & 0x08) != 0 and mode == 0:
            sig = 1
        if (en & 0x10) != 0 and mode == 1:
            sig = 1
        if (en & 0x20) != 0 and mode == 2:
            sig = 1
        if (en & 0x40) != 0 and m.st[i, S_LINE] == int(m.hram[i, 0x45]):
            sig = 1
    if sig == 1 and m.st[i, S_STAT_LINE] == 0:
        raise_irq(i, m, 2)
    m.st[i, S_STAT_LINE] = sig


# WIN_LINE bit set from LCD on until the next frame starts: that first frame is blank (shade 0)
# on hardware. It lives above the renderer's window state bits and is cleared at LY 0.
WIN_BLANK = wp.constant(0x10000)


@wp.func(inline=False)
def clear_obs(i: int, m: Mem):
    """Blank the env's packed2 observation and framebuffer (LCD off shows shade 0).

    With ``PYBOY_TIMING`` the blank is BGP colour 0, as PyBoy paints it (not hardware).
    """
    shade = 0
    if m.st[i, S_PYBOY_TIMING] != 0:
        shade = int(m.hram[i, 0x47]) & 3
    for y in range(72):
        for x in range(20):
            m.obs[i, 0, y, x] = wp.uint8(shade * 0x55)
    for y in range(144):
        for x in range(160):
            m.fb[i, y, x] = wp.uint8(shade)


@wp.func
def cur_mode(i: int, m: Mem) -> int:
    """PPU mode at the current (caught-up) dot: 2 OAM scan, 3 drawing, 0 HBlank, 1 VBlank."""
    if m.st[i, S_LINE] >= 144:
        return 1
    dot = m.st[i, S_PPU_DOT]
    if dot < 80:
        return 2
    if dot < 252:
        return 3
    return 0


@wp.func(inline=False)
def ppu_refine(i: int, m: Mem):
    """Switch to per-mode events on the current line (after a STAT or LYC write)."""
    if m.st[i, S_LINE] >= 144:
        m.st[i, S_PPU_NEXT] = 456
    elif (int(m.hram[i, 0x40]) & 0x80) != 0:
        mode = cur_mode(i, m)
        m.st[i, S_MODE] = mode
        if mode == 2:
            m.st[i, S_PPU_NEXT] = 80
        elif mode == 3:
            m.st[i, S_PPU_NEXT] = 252
        else:
            m.st[i, S_PPU_NEXT] = 456


@wp.func(inline=False)
def ppu_event(i: int, m: Mem):
    """Advance the PPU state machine: mode 2 (80 dots) -> 3 (172) -> 0 (204); VBlank lines 144-153.

    The internal line counter keeps running while the LCD is off (so frames still end every
    70224 T-cycles), but LY then reads 0 and no interrupts or pixels are produced.
    """
    lcd_on = (int(m.hram[i, 0x40]) & 0x80) != 0
    mode = m.st[i, S_MODE]
    line = m.st[i, S_LINE]
    if mode == 2:
        m.st[i, S_MODE] = 3
        m.st[i, S_PPU_NEXT] = 252
        if m.st[i, S_PYBOY_TIMING] != 0 and (int(m.hram[i, 0x43]) & 7) != 0:
            # PyBoy lengthens mode 3 by the fine scroll rounded up to an M-cycle (4 dots) and
            # draws the line when mode 3 ends: mid-line SCX writes land as in PyBoy
            m.st[i, S_PPU_NEXT] = 256
        return
    if mode == 3:
        m.st[i, S_MODE] = 0
        m.st[i, S_PPU_NEXT] = 456
        if lcd_on and m.st[i, S_PACK] != 0:
            lcdc = int(m.hram[i, 0x40])
            if (m.st[i, S_WIN_LINE] & WIN_BLANK) != 0:
                lcdc = lcdc & 0x7F  # first frame after LCD on: the renderer draws shade 0
            wl = render_scanline(
                i, line, m.vram, m.oam, lcdc, int(m.hram[i, 0x43]),
                int(m.hram[i, 0x42]), int(m.hram[i, 0x4B]), int(m.hram[i, 0x4A]),
                int(m.hram[i, 0x47]), int(m.hram[i, 0x48]), int(m.hram[i, 0x49]),
                m.st[i, S_WIN_LINE], m.fb,
            )
            m.st[i, S_WIN_LINE] = wl
            if (line & 1) == 0:
                pack_line_packed2(i, line, m.fb, m.obs)
        if lcd_on:
            stat_update(i, m)
        return
    # end of one or more lines (coarse scheduling may have skipped lines with nothing to observe)
    k = m.st[i, S_PPU_DOT] // 456
    m.st[i, S_PPU_DOT] = m.st[i, S_PPU_DOT] - 456 * k
    line = line + k
    if line >= 154:
        line = 0
        m.st[i, S_WIN_LINE] = 0
        if m.st[i, S_PYBOY_TIMING] != 0:
            m.st[i, S_FRAME_DONE] = 1  # PyBoy's tick() ends a frame here
    m.st[i, S_LINE] = line
    if line < 144:
        m.st[i, S_MODE] = 2
        m.st[i, S_PPU_NEXT] = 80
        if m.st[i, S_PACK] == 0 and (m.st[i, S_STAT_EN] & 0x28) == 0:
            # nothing observes modes 2/3/0 before the next interesting line: skip to it (LY and
            # STAT reads derive the line and mode from the dot counter, see ppu_normalize)
            m.st[i, S_MODE] = 4
            m.st[i, S_PPU_NEXT] = 456 * (next_ppu_line(i, m, line, 144) - line)
    else:
        m.st[i, S_MODE] = 1
        m.st[i, S_PPU_NEXT] = 456 * (next_ppu_line(i, m, line, 154) - line)
        if line == 144:
            if m.st[i, S_PYBOY_TIMING] == 0:
                m.st[i, S_FRAME_DONE] = 1
            if lcd_on:
                raise_irq(i, m, 1)
                if (m.st[i, S_PYBOY_TIMING] != 0 and m.st[i, S_PACK] != 0
                        and (m.st[i, S_WIN_LINE] & WIN_BLANK) != 0):
                    clear_obs(i, m)  # PyBoy blanks the first frame after LCD on with BGP colour 0
            elif m.st[i, S_PACK] != 0:
                clear_obs(i, m)
    if lcd_on:
        stat_update(i, m)


@wp.func
def next_ppu_line(i: int, m: Mem, line: int, limit: int) -> int:
    """Next line (<= ``limit``) whose start must be an event: ``limit`` or the LYC line (and the
    line after it, where the LY=LYC signal drops) when the LYC STAT interrupt is enabled."""
    target = limit
    if (m.st[i, S_STAT_EN] & 0x40) != 0:
        lyc = int(m.hram[i, 0x45])
        if lyc == line:
            target = line + 1
        elif lyc > line and lyc < limit:
            target = lyc
    return target


@wp.func
def ppu_normalize(i: int, m: Mem):
    """Fold whole lines of a coarse skip into LINE so LINE / PPU_DOT are the current LY / dot."""
    k = m.st[i, S_PPU_DOT] // 456
    if k > 0:
        m.st[i, S_LINE] = m.st[i, S_LINE] + k
        m.st[i, S_PPU_DOT] = m.st[i, S_PPU_DOT] - 456 * k
        m.st[i, S_PPU_NEXT] = m.st[i, S_PPU_NEXT] - 456 * k


# ------------------------------------------------------------------------------------------ tick
# Time is lazy: tick() only adds 4 to CLK (T-cycles since the last sync) and compares it with
# NEXT (T-cycles from the last sync to the next event: a PPU mode change, a TIMA overflow or its
# reload, the end of a serial transfer). sync() then advances DIV, TIMA, the PPU dot counter and
# the serial counter arithmetically and handles the events due. IO accesses sync first, so
# registers read exactly as if every M-cycle had been simulated.
@wp.func(inline=True)
def catch_up(i: int, m: Mem):
    """Advance timer, PPU, serial and DMA counters by the CLK cycles elapsed; handle due events."""
    c = m.st[i, S_CLK]
    if c <= 0:
        return
    m.st[i, S_CLK] = 0
    m.st[i, S_NEXT] = m.st[i, S_NEXT] - c  # keep NEXT relative to the new origin
    if m.st[i, S_TIMA_OVF] != 0 and c >= 4:
        m.st[i, S_TIMA_OVF] = 0
        m.st[i, S_TIMA] = m.st[i, S_TMA]
        raise_irq(i, m, 4)
    d = m.st[i, S_DIV16]
    nd = d + c
    tac = m.st[i, S_TAC]
    if (tac & 4) != 0:
        sh = 10
        msk = timer_mask(tac)
        if msk == 8:
            sh = 4
        if msk == 32:
            sh = 6
        if msk == 128:
            sh = 8
        t = m.st[i, S_TIMA] + (nd >> sh) - (d >> sh)
        if t > 255:
            t = 0
            m.st[i, S_TIMA_OVF] = 1
        m.st[i, S_TIMA] = t
    m.st[i, S_DIV16] = nd & 0xFFFF
    dot = m.st[i, S_PPU_DOT] + c
    m.st[i, S_PPU_DOT] = dot
    while m.st[i, S_PPU_DOT] >= m.st[i, S_PPU_NEXT]:
        ppu_event(i, m)
    ppu_normalize(i, m)
    sc = m.st[i, S_SER_CNT]
    if sc > 0:
        sc = sc - c
        if sc <= 0:
            sc = 0
            m.hram[i, 0x01] = wp.uint8(0xFF)
            m.hram[i, 0x02] = wp.uint8(int(m.hram[i, 0x02]) & 0x7F)
            raise_irq(i, m, 8)
        m.st[i, S_SER_CNT] = sc
    dc = m.st[i, S_DMA_CNT] - c
    if dc < 0:
        dc = 0
    m.st[i, S_DMA_CNT] = dc


@wp.func(inline=True)
def schedule(i: int, m: Mem):
    """Set NEXT: T-cycles (from now, CLK = 0) to the earliest upcoming event."""
    n = m.st[i, S_PPU_NEXT] - m.st[i, S_PPU_DOT]
    if m.st[i, S_TIMA_OVF] != 0:
        if n > 4:
            n = 4
    else:
        tac = m.st[i, S_TAC]
        if (tac & 4) != 0:
            period = timer_mask(tac) * 2
            d = m.st[i, S_DIV16]
            t = period - (d & (period - 1)) + (255 - m.st[i, S_TIMA]) * period
            if t < n:
                n = t
    sc = m.st[i, S_SER_CNT]
    if sc > 0 and sc < n:
        n = sc
    m.st[i, S_NEXT] = n


@wp.func(inline=False)
def sync(i: int, m: Mem):
    """Bring the console up to the current cycle and reschedule the next event."""
    catch_up(i, m)
    schedule(i, m)


@wp.func
def tick(i: int, m: Mem):
    """Advance the whole console except the CPU by one M-cycle (4 T-cycles)."""
    c = m.st[i, S_CLK] + 4
    m.st[i, S_CLK] = c
    if c >= m.st[i, S_NEXT]:
        sync(i, m)


@wp.func(inline=True)
def halt_advance(i: int, m: Mem):
    """While halted: jump straight to the next event (no per-M-cycle spinning)."""
    n = m.st[i, S_NEXT]
    if n < 4:
        n = 4
    m.st[i, S_CLK] = n
    sync(i, m)


# ------------------------------------------------------------------------------------- cartridge
@wp.func(inline=False)
def mbc_update(i: int, m: Mem):
    """Recompute ROM/RAM bank offsets from the raw mapper registers."""
    mbc = m.st[i, S_MBC]
    mask = m.st[i, S_ROM_MASK]
    b1 = m.st[i, S_BANK1]
    b2 = m.st[i, S_BANK2]
    if mbc == MBC_1:
        m.st[i, S_ROM_OFF1] = (((b2 << 5) | b1) & mask) * 0x4000
        if m.st[i, S_MBC_MODE] != 0:
            m.st[i, S_ROM_OFF0] = ((b2 << 5) & mask) * 0x4000
            m.st[i, S_RAM_BANK] = b2
        else:
            m.st[i, S_ROM_OFF0] = 0
            m.st[i, S_RAM_BANK] = 0
    elif mbc == MBC_5:
        m.st[i, S_ROM_OFF1] = (((b2 << 8) | b1) & mask) * 0x4000
    else:
        m.st[i, S_ROM_OFF1] = (b1 & mask) * 0x4000


@wp.func(inline=False)
def cart_write(i: int, m: Mem, addr: int, v: int):
    """Write to 0000-7FFF: mapper control registers."""
    mbc = m.st[i, S_MBC]
    if mbc == MBC_NONE:
        return
    if mbc == MBC_2:
        if addr < 0x4000:
            if (addr & 0x100) == 0:
                m.st[i, S_RAM_EN] = int((v & 0x0F) == 0x0A)
            else:
                b = v & 0x0F
                if b == 0:
                    b = 1
                m.st[i, S_BANK1] = b
                mbc_update(i, m)
        return
    if addr < 0x2000:
        m.st[i, S_RAM_EN] = int((v & 0x0F) == 0x0A)
        return
    if mbc == MBC_1:
        if addr < 0x4000:
            b = v & 0x1F
            if b == 0:
                b = 1
            m.st[i, S_BANK1] = b
        elif addr < 0x6000:
            m.st[i, S_BANK2] = v & 3
        else:
            m.st[i, S_MBC_MODE] = v & 1
        mbc_update(i, m)
        return
    if mbc == MBC_3:
        if addr < 0x4000:
            b = v & 0x7F
            if b == 0:
                b = 1
            m.st[i, S_BANK1] = b
            mbc_update(i, m)
        elif addr < 0x6000:
            m.st[i, S_RAM_BANK] = v & 0x0F
        else:
            if m.st[i, S_RTC_LATCH] == 0 and v == 1:
                m.st[i, S_RTC_LS] = m.st[i, S_RTC_S]
                m.st[i, S_RTC_LM] = m.st[i, S_RTC_M]
                m.st[i, S_RTC_LH] = m.st[i, S_RTC_H]
                m.st[i, S_RTC_LDL] = m.st[i, S_RTC_DL]
                m.st[i, S_RTC_LDH] = m.st[i, S_RTC_DH]
            m.st[i, S_RTC_LATCH] = v
        return
    if mbc == MBC_5:
        if addr < 0x3000:
            m.st[i, S_BANK1] = v
            mbc_update(i, m)
        elif addr < 0x4000:
            m.st[i, S_BANK2] = v & 1
            mbc_update(i, m)
        elif addr < 0x6000:
            m.st[i, S_RAM_BANK] = v & 0x0F


@wp.func(inline=False)
def cram_read(i: int, m: Mem, addr: int) -> int:
    """Read A000-BFFF: cartridge RAM (banked), MBC2 nibble RAM or the MBC3 RTC registers."""
    if m.st[i, S_RAM_EN] == 0:
        return 0xFF
    mbc = m.st[i, S_MBC]
    if mbc == MBC_2:
        return 0xF0 | int(m.cram[i, addr & 0x1FF])
    bank = m.st[i, S_RAM_BANK]
    if mbc == MBC_3 and bank >= 8:
        if bank == 8:
            return m.st[i, S_RTC_LS]
        if bank == 9:
            return m.st[i, S_RTC_LM]
        if bank == 10:
            return m.st[i, S_RTC_LH]
        if bank == 11:
            return m.st[i, S_RTC_LDL]
        if bank == 12:
            return m.st[i, S_RTC_LDH]
        return 0xFF
    off = bank * 0x2000 + (addr - 0xA000)
    size = m.st[i, S_RAM_SIZE]
    if size == 0:
        return 0xFF
    return int(m.cram[i, off % size])


@wp.func(inline=False)
def cram_write(i: int, m: Mem, addr: int, v: int):
    """Write A000-BFFF (see :func:`cram_read`)."""
    if m.st[i, S_RAM_EN] == 0:
        return
    mbc = m.st[i, S_MBC]
    if mbc == MBC_2:
        m.cram[i, addr & 0x1FF] = wp.uint8(v & 0x0F)
        return
    bank = m.st[i, S_RAM_BANK]
    if mbc == MBC_3 and bank >= 8:
        if bank == 8:
            m.st[i, S_RTC_S] = v & 0x3F
            m.st[i, S_RTC_SUB] = 0
        elif bank == 9:
            m.st[i, S_RTC_M] = v & 0x3F
        elif bank == 10:
            m.st[i, S_RTC_H] = v & 0x1F
        elif bank == 11:
            m.st[i, S_RTC_DL] = v
        elif bank == 12:
            m.st[i, S_RTC_DH] = v & 0xC1
        return
    size = m.st[i, S_RAM_SIZE]
    if size == 0:
        return
    off = bank * 0x2000 + (addr - 0xA000)
    m.cram[i, off % size] = wp.uint8(v)


@wp.func(inline=False)
def rtc_advance(i: int, m: Mem, tcycles: int):
    """Advance the MBC3 real-time clock by emulated T-cycles (deterministic, 4 MiHz = 1 s)."""
    if m.st[i, S_MBC] != MBC_3 or (m.st[i, S_RTC_DH] & 0x40) != 0:
        return
    sub = m.st[i, S_RTC_SUB] + tcycles
    while sub >= 4194304:
        sub = sub - 4194304
        s = m.st[i, S_RTC_S] + 1
        if s == 60:
            s = 0
            mi = m.st[i, S_RTC_M] + 1
            if mi == 60:
                mi = 0
                h = m.st[i, S_RTC_H] + 1
                if h == 24:
                    h = 0
                    day = ((m.st[i, S_RTC_DH] & 1) << 8) + m.st[i, S_RTC_DL] + 1
                    dh = m.st[i, S_RTC_DH] & 0xFE
                    if day > 511:
                        day = 0
                        dh = dh | 0x80
                    m.st[i, S_RTC_DL] = day & 0xFF
                    m.st[i, S_RTC_DH] = dh | (day >> 8)
                m.st[i, S_RTC_H] = h
            m.st[i, S_RTC_M] = mi
        m.st[i, S_RTC_S] = s
    m.st[i, S_RTC_SUB] = sub


# -------------------------------------------------------------------------------------------- IO
@wp.func
def joyp_value(i: int, m: Mem) -> int:
    """FF00 as read: selected button groups pulled low by the pressed buttons."""
    sel = int(m.hram[i, 0x00]) & 0x30
    joy = m.st[i, S_JOY]
    v = 0x0F
    if (sel & 0x10) == 0:
        v = v & (((joy >> 4) & 0x0F) ^ 0x0F)
    if (sel & 0x20) == 0:
        v = v & ((joy & 0x0F) ^ 0x0F)
    return 0xC0 | sel | v


@wp.func(inline=False)
def set_joypad(i: int, m: Mem, buttons: int):
    """Set the held buttons; a newly pulled-low selected line raises the joypad interrupt."""
    before = joyp_value(i, m) & 0x0F
    m.st[i, S_JOY] = buttons
    after = joyp_value(i, m) & 0x0F
    if (before & (after ^ 0x0F)) != 0:
        raise_irq(i, m, 16)


@wp.func(inline=False)
def io_read(i: int, m: Mem, r: int) -> int:
    """Read FF00-FFFF."""
    if r >= 0x80:
        return int(m.hram[i, r])
    catch_up(i, m)
    if r == 0x00:
        return joyp_value(i, m)
    if r == 0x02:
        return int(m.hram[i, r]) | 0x7E
    if r == 0x04:
        return m.st[i, S_DIV16] >> 8
    if r == 0x05:
        return m.st[i, S_TIMA]
    if r == 0x06:
        return m.st[i, S_TMA]
    if r == 0x07:
        return m.st[i, S_TAC] | 0xF8
    if r == 0x0F:
        return int(m.hram[i, r]) | 0xE0
    if r == 0x41:
        v = 0x80 | m.st[i, S_STAT_EN]
        if (int(m.hram[i, 0x40]) & 0x80) != 0:
            v = v | cur_mode(i, m)
            if m.st[i, S_LINE] == int(m.hram[i, 0x45]):
                v = v | 4
        elif int(m.hram[i, 0x45]) == 0:
            v = v | 4
        return v
    if r == 0x44:
        if (int(m.hram[i, 0x40]) & 0x80) != 0:
            line = m.st[i, S_LINE]
            if m.st[i, S_PYBOY_TIMING] != 0 and line < 144 and m.st[i, S_PPU_DOT] >= 452:
                return line + 1  # PyBoy increments LY 4 dots before a visible line ends
            return line
        return 0
    return int(m.hram[i, r]) | io_unused_bits(r)


@wp.func
def io_unused_bits(r: int) -> int:
    """Bits of FF00-FF7F that read as 1 on a DMG (unmapped registers read FF)."""
    if r >= 0x4C:
        return 0xFF
    if r == 0x03 or (r >= 0x08 and r <= 0x0E) or r == 0x15 or r == 0x1F:
        return 0xFF
    if (r >= 0x27 and r <= 0x2F) or r == 0x13 or r == 0x18 or r == 0x1B or r == 0x1D or r == 0x20:
        return 0xFF
    if r == 0x10:
        return 0x80
    if r == 0x11 or r == 0x16:
        return 0x3F
    if r == 0x14 or r == 0x19 or r == 0x1E or r == 0x23:
        return 0xBF
    if r == 0x1A:
        return 0x7F
    if r == 0x1C:
        return 0x9F
    if r == 0x26:
        return 0x70
    return 0


@wp.func(inline=False)
def oam_dma(i: int, m: Mem, src: int):
    """OAM DMA: copy 160 bytes from ``src << 8``; OAM reads give FF for the next 160 M-cycles."""
    base = src << 8
    for k in range(160):
        m.oam[i, k] = wp.uint8(peek(i, m, (base + k) & 0xFFFF))
    m.st[i, S_DMA_CNT] = 644 + m.st[i, S_CLK]


@wp.func(inline=False)
def io_write(i: int, m: Mem, r: int, v: int):
    """Write FF00-FFFF, with each register's side effects, then reschedule the next event."""
    if r >= 0x80:
        m.hram[i, r] = wp.uint8(v)
        return
    catch_up(i, m)
    io_write_reg(i, m, r, v)
    schedule(i, m)


@wp.func(inline=False)
def io_write_reg(i: int, m: Mem, r: int, v: int):
    """The register side effects of :func:`io_write` (timer and PPU already caught up)."""
    if r == 0x00:
        before = joyp_value(i, m) & 0x0F
        m.hram[i, 0] = wp.uint8(v & 0x30)
        after = joyp_value(i, m) & 0x0F
        if (before & (after ^ 0x0F)) != 0:
            raise_irq(i, m, 16)
        return
    if r == 0x02:
        m.hram[i, 2] = wp.uint8(v | 0x7E)
        if (v & 0x81) == 0x81:
            n = m.st[i, S_SER_N]
            if n < SER_CAP:
                m.ser[i, n] = m.hram[i, 1]
                m.st[i, S_SER_N] = n + 1
            m.st[i, S_SER_CNT] = 4096
        return
    if r == 0x04:
        tac = m.st[i, S_TAC]
        if (tac & 4) != 0 and (m.st[i, S_DIV16] & timer_mask(tac)) != 0:
            tima_inc(i, m)
        m.st[i, S_DIV16] = 0
        return
    if r == 0x05:
        m.st[i, S_TIMA_OVF] = 0
        m.st[i, S_TIMA] = v
        return
    if r == 0x06:
        m.st[i, S_TMA] = v
        return
    if r == 0x07:
        old = m.st[i, S_TAC]
        d = m.st[i, S_DIV16]
        was = (old & 4) != 0 and (d & timer_mask(old)) != 0
        now = (v & 4) != 0 and (d & timer_mask(v)) != 0
        if was and not now:
            tima_inc(i, m)
        m.st[i, S_TAC] = v & 7
        return
    if r == 0x0F:
        m.hram[i, r] = wp.uint8(v & 0x1F)
        return
    if r == 0x40:
        old = int(m.hram[i, 0x40])
        m.hram[i, 0x40] = wp.uint8(v)
        if (old & 0x80) == 0 and (v & 0x80) != 0:
            # LCD switched on: restart at line 0, mode 2
            m.st[i, S_LINE] = 0
            m.st[i, S_PPU_DOT] = 0
            m.st[i, S_MODE] = 2
            m.st[i, S_PPU_NEXT] = 80
            m.st[i, S_WIN_LINE] = WIN_BLANK
            m.st[i, S_STAT_LINE] = 0
            stat_update(i, m)
        if (old & 0x80) != 0 and (v & 0x80) == 0:
            m.st[i, S_STAT_LINE] = 0
            if m.st[i, S_PYBOY_TIMING] != 0:
                # PyBoy's frame protocol: LCD off ends the frame (blank) and restarts the frame
                # clock, so later frames end every 70224 T-cycles from here
                m.st[i, S_LINE] = 0
                m.st[i, S_PPU_DOT] = 0
                m.st[i, S_MODE] = 2
                m.st[i, S_PPU_NEXT] = 80
                m.st[i, S_FRAME_DONE] = 1
                if m.st[i, S_PACK] != 0:
                    clear_obs(i, m)
        return
    if r == 0x41:
        m.st[i, S_STAT_EN] = v & 0x78
        ppu_refine(i, m)
        stat_update(i, m)
        return
    if r == 0x44:
        return
    if r == 0x45:
        m.hram[i, r] = wp.uint8(v)
        ppu_refine(i, m)
        stat_update(i, m)
        return
    if r == 0x46:
        m.hram[i, r] = wp.uint8(v)
        oam_dma(i, m, v)
        return
    if r == 0x50:
        if v != 0:
            m.st[i, S_BOOT_ON] = 0
        return
    m.hram[i, r] = wp.uint8(v)


# ------------------------------------------------------------------------------------------- bus
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
        if m.st[i, S_DMA_CNT] - m.st[i, S_CLK] > 0:
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


@wp.func
def rd(i: int, m: Mem, addr: int) -> int:
    """One bus read M-cycle: advance the console 4 T-cycles, then read."""
    tick(i, m)
    return peek(i, m, addr)


@wp.func
def wr(i: int, m: Mem, addr: int, v: int):
    """One bus write M-cycle: advance the console 4 T-cycles, then write."""
    tick(i, m)
    poke(i, m, addr, v & 0xFF)


@wp.func(inline=False)
def frame_end(i: int, m: Mem):
    """Book-keeping at the end of every emulated frame (frame counter, RTC)."""
    m.st[i, S_FRAME_DONE] = 0
    m.st[i, S_FRAMES] = m.st[i, S_FRAMES] + 1
    rtc_advance(i, m, 70224)


__all__ = [
    "Mem",
    "frame_end",
    "halt_advance",
    "peek",
    "poke",
    "rd",
    "set_joypad",
    "tick",
    "wr",
]
