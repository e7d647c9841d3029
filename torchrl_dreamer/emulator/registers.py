"""Named hardware registers, interrupt bits and mapper ids: the numbers the kernel speaks in.

IO registers are offsets from 0xFF00, which is also their index in the per-console ``hram``
array (``m.hram[i, R_LCDC]``). Every constant is a :func:`warp.constant`, which returns the plain
``int``: the same name serves Warp functions and Python code (tests, savestate converters).
Facts from Pan Docs' memory map and hardware register list.

Example:
    >>> from torchrl_dreamer.emulator.registers import R_LCDC, IRQ_VBLANK
    >>> hex(0xFF00 + R_LCDC), IRQ_VBLANK
    ('0xff40', 1)
"""

from __future__ import annotations

import warp as wp

# ---------------------------------------------------------------- IO registers (offset from FF00)
R_JOYP = wp.constant(0x00)  # joypad select / state
R_SB = wp.constant(0x01)  # serial data
R_SC = wp.constant(0x02)  # serial control
R_DIV = wp.constant(0x04)  # divider (upper byte of the 16-bit system counter)
R_TIMA = wp.constant(0x05)  # timer counter
R_TMA = wp.constant(0x06)  # timer modulo
R_TAC = wp.constant(0x07)  # timer control
R_IF = wp.constant(0x0F)  # interrupt flags
R_NR10 = wp.constant(0x10)  # channel 1 sweep (the first sound register)
R_NR11 = wp.constant(0x11)  # channel 1 duty, length load
R_NR12 = wp.constant(0x12)  # channel 1 envelope (bits 3-7: DAC power)
R_NR13 = wp.constant(0x13)  # channel 1 frequency low
R_NR14 = wp.constant(0x14)  # channel 1 trigger, length enable, frequency high
R_NR21 = wp.constant(0x16)  # channel 2 duty, length load (FF15 is unused)
R_NR22 = wp.constant(0x17)  # channel 2 envelope
R_NR23 = wp.constant(0x18)  # channel 2 frequency low
R_NR24 = wp.constant(0x19)  # channel 2 trigger, length enable, frequency high
R_NR30 = wp.constant(0x1A)  # channel 3 (wave) DAC power
R_NR31 = wp.constant(0x1B)  # channel 3 length load
R_NR32 = wp.constant(0x1C)  # channel 3 output level
R_NR33 = wp.constant(0x1D)  # channel 3 frequency low
R_NR34 = wp.constant(0x1E)  # channel 3 trigger, length enable, frequency high
R_NR41 = wp.constant(0x20)  # channel 4 (noise) length load (FF1F is unused)
R_NR42 = wp.constant(0x21)  # channel 4 envelope
R_NR43 = wp.constant(0x22)  # channel 4 polynomial counter
R_NR44 = wp.constant(0x23)  # channel 4 trigger, length enable
R_NR50 = wp.constant(0x24)  # master volume, VIN
R_NR51 = wp.constant(0x25)  # panning
R_NR52 = wp.constant(0x26)  # sound on/off, channel status
R_WAVE = wp.constant(0x30)  # wave pattern RAM FF30-FF3F
R_LCDC = wp.constant(0x40)  # LCD control
R_STAT = wp.constant(0x41)  # LCD status
R_SCY = wp.constant(0x42)  # background scroll Y
R_SCX = wp.constant(0x43)  # background scroll X
R_LY = wp.constant(0x44)  # current line
R_LYC = wp.constant(0x45)  # line compare
R_DMA = wp.constant(0x46)  # OAM DMA source page
R_BGP = wp.constant(0x47)  # background palette
R_OBP0 = wp.constant(0x48)  # object palette 0
R_OBP1 = wp.constant(0x49)  # object palette 1
R_WY = wp.constant(0x4A)  # window Y
R_WX = wp.constant(0x4B)  # window X + 7
R_KEY1 = wp.constant(0x4D)  # Color: speed switch (bit 7 current speed, bit 0 armed)
R_VBK = wp.constant(0x4F)  # Color: VRAM bank
R_BOOT = wp.constant(0x50)  # boot ROM disable
R_HDMA1 = wp.constant(0x51)  # Color: HDMA source high
R_HDMA2 = wp.constant(0x52)  # Color: HDMA source low
R_HDMA3 = wp.constant(0x53)  # Color: HDMA destination high
R_HDMA4 = wp.constant(0x54)  # Color: HDMA destination low
R_HDMA5 = wp.constant(0x55)  # Color: HDMA length / mode / start
R_BCPS = wp.constant(0x68)  # Color: BG palette index (bit 7 auto-increment)
R_BCPD = wp.constant(0x69)  # Color: BG palette data
R_OCPS = wp.constant(0x6A)  # Color: OBJ palette index
R_OCPD = wp.constant(0x6B)  # Color: OBJ palette data
R_OPRI = wp.constant(0x6C)  # Color: object priority mode
R_SVBK = wp.constant(0x70)  # Color: WRAM bank
R_PCM12 = wp.constant(0x76)  # Color: channels 1 and 2 amplitudes (read-only)
R_PCM34 = wp.constant(0x77)  # Color: channels 3 and 4 amplitudes (read-only)
R_HRAM = wp.constant(0x80)  # first byte of high RAM (FF80-FFFE)
R_IE = wp.constant(0xFF)  # interrupt enable

# ---------------------------------------------------------------- interrupt bits (IF / IE)
IRQ_VBLANK = wp.constant(0x01)
IRQ_STAT = wp.constant(0x02)
IRQ_TIMER = wp.constant(0x04)
IRQ_SERIAL = wp.constant(0x08)
IRQ_JOYPAD = wp.constant(0x10)
IRQ_MASK = wp.constant(0x1F)

# ---------------------------------------------------------------- LCDC / STAT bits
LCDC_ON = wp.constant(0x80)
LCDC_WIN_ON = wp.constant(0x20)  # window enable
LCDC_OBJ_TALL = wp.constant(0x04)  # 8x16 objects
LCDC_OBJ_ON = wp.constant(0x02)  # objects enable
LCDC_BG_ON = wp.constant(0x01)  # background (and window) enable on the DMG
STAT_LYC_FLAG = wp.constant(0x04)  # LY == LYC (read-only bit)
STAT_HBLANK = wp.constant(0x08)  # mode 0 interrupt source
STAT_VBLANK = wp.constant(0x10)  # mode 1 interrupt source
STAT_OAM = wp.constant(0x20)  # mode 2 interrupt source
STAT_LYC = wp.constant(0x40)  # LY == LYC interrupt source
STAT_SOURCES = wp.constant(0x78)

# ---------------------------------------------------------------- cartridge mapper ids
# defined by each mapper's module (emulator/mappers/), re-exported here with the other ids
from torchrl_dreamer.emulator.mappers import MBC_1, MBC_1M, MBC_2, MBC_3, MBC_5, MBC_NONE  # noqa: E402, F401

# ---------------------------------------------------------------- flags register bits
FLAG_Z = wp.constant(0x80)
FLAG_N = wp.constant(0x40)
FLAG_H = wp.constant(0x20)
FLAG_C = wp.constant(0x10)
