"""Per-console state layout: the columns of the ``int32 [N, STATE_WORDS]`` state array.

Every console (env) keeps its CPU registers, timer, PPU, serial, DMA, joypad and cartridge-mapper
state in one row of a structure-of-arrays ``state`` array, so that the Warp kernel, savestates and
the reset cache all deal with plain dense arrays. The column indices are Warp constants so the
kernel source stays readable (``m.st[i, S_PC]``).
"""

from __future__ import annotations

import warp as wp

_NAMES = [
    # CPU
    "A", "F", "B", "C", "D", "E", "H", "L", "SP", "PC", "IME", "EI_PEND", "HALTED", "HALT_BUG",
    "STOPPED", "LOCKED",
    # timer
    "DIV16", "TIMA", "TMA", "TAC", "TIMA_OVF",
    # PPU
    "PPU_DOT", "PPU_NEXT", "LINE", "MODE", "STAT_EN", "STAT_LINE", "WIN_LINE", "FRAME_DONE", "PACK",
    "PPU_M0",  # (line + 1) * 512 + the dot mode 0 starts on that line (0: not computed yet)
    # serial, DMA, joypad
    "SER_CNT", "SER_N", "DMA_END", "DMA_SRC", "DMA_PREV_END", "DMA_PREV_SRC", "DMA_COPY", "JOY",
    # cartridge mapper
    "MBC", "ROM_MASK", "RAM_SIZE", "ROM_OFF0", "ROM_OFF1", "RAM_BANK", "RAM_EN", "BANK1", "BANK2",
    "MBC_MODE", "RTC_S", "RTC_M", "RTC_H", "RTC_DL", "RTC_DH", "RTC_LS", "RTC_LM", "RTC_LH",
    "RTC_LDL", "RTC_LDH", "RTC_SUB", "RTC_LATCH", "RTC_ON",
    # misc
    "BOOT_ON", "FRAMES", "CYCLES", "CLK", "NEXT",
    # 0 (default): hardware timing, a frame ends when VBlank starts (LY 144). 1: PyBoy's frame
    # protocol and PPU timing details, for frame-exact comparison with PyBoy (see ppu.py)
    "PYBOY_TIMING",
    # APU (see apu.py): frame-sequencer step count, first-step skip, NR52 channel status bits,
    # length-enable bits (NRx4 bit 6 of channels 1-4), length counters 1-4, sweep shadow frequency / timer / flags (1 enabled, 2 negate used),
    # envelopes of channels 1, 2, 4 (volume | timer << 4), wave sample position, T-cycles to
    # the next wave fetch, and the period that fetch reloaded (0: none since the trigger)
    "APU_FS", "APU_SKIP", "APU_ACT", "APU_LEN_EN", "APU_LEN1", "APU_LEN2", "APU_LEN3", "APU_LEN4",
    "APU_SW_FREQ", "APU_SW_TIMER", "APU_SW_FLAGS", "APU_ENV1", "APU_ENV2", "APU_ENV4",
    "APU_WAVE_POS", "APU_WAVE_CNT", "APU_WAVE_PER",
    # PPU mode: 0 draws whole lines (render.py), 1 adds the mode-3 pixel pipeline (fifo.py) on
    # lines with a mid-mode-3 register write; then the pipeline's state (see fifo.py; contiguous)
    "PPU_FIFO",
    "FIFO_LINE", "FIFO_DOT", "FIFO_KP", "FIFO_SX", "FIFO_FETCH", "FIFO_TILE", "FIFO_LO", "FIFO_HI",
    "FIFO_BG", "FIFO_OBJ", "FIFO_STALL", "FIFO_OBJN", "FIFO_WIN", "FIFO_FINE", "FIFO_OBJH",
    # Game Boy Color (see cgb.py; all 0 on a DMG): the model (MODEL_*), double speed (0/1),
    # the VRAM bank (0/1) and WRAM bank mapped at D000 (1-7), the HDMA source / destination
    # pointers and its state (0 idle, else 1 + blocks left | HDMA_HBLANK for the HBlank kind)
    "CGB", "SPEED", "VBK", "SVBK", "HDMA_SRC", "HDMA_DST", "HDMA",
    # Color mode only (apu_pcm.py, for PCM12/PCM34): the square channels' duty step (bits 0-2)
    # and latched output (bit 3) and dots to the next step, the noise LFSR, dots to its
    # counter's next increment and the shifts not applied yet; the APU's dots since power-on modulo 8 (its 1 MHz
    # and 512 kHz phases); the wave channel's output buffer (the sample it plays until its
    # first fetch after a trigger)
    "APU_SQ1_POS", "APU_SQ1_CNT", "APU_SQ2_POS", "APU_SQ2_CNT", "APU_LFSR", "APU_NOISE_CNT",
    "APU_NOISE_PEND", "APU_PH", "APU_WAVE_OUT",
    # Color mode (apu_pcm.py): the noise channel's 14-bit counter, whose bit NR43 >> 4 clocks
    # the LFSR, with two flags (bit 14: its next reload is 4 dots longer; bit 15: it was
    # reloaded at the time of the last catch-up); APU_NOISE_CNT is then the dots to its next
    # increment
    "APU_NOISE_CTR",
    # the bus's VRAM fast path (bus.py): CPU T-cycles from the last catch-up before which a CPU
    # write to VRAM cannot be blocked (0: not known; set by an unblocked write, moved on by each
    # catch-up, cleared by every IO register write, a speed switch and STOP)
    "VRAM_OPEN",
]

STATE_WORDS: int = len(_NAMES)
"""Number of int32 words of per-console state."""

FIELDS: dict[str, int] = {name: k for k, name in enumerate(_NAMES)}
"""Column index of every state field, by name (``FIELDS["PC"]``)."""

S_A = wp.constant(FIELDS["A"])
S_F = wp.constant(FIELDS["F"])
S_B = wp.constant(FIELDS["B"])
S_C = wp.constant(FIELDS["C"])
S_D = wp.constant(FIELDS["D"])
S_E = wp.constant(FIELDS["E"])
S_H = wp.constant(FIELDS["H"])
S_L = wp.constant(FIELDS["L"])
S_SP = wp.constant(FIELDS["SP"])
S_PC = wp.constant(FIELDS["PC"])
S_IME = wp.constant(FIELDS["IME"])
S_EI_PEND = wp.constant(FIELDS["EI_PEND"])
S_HALTED = wp.constant(FIELDS["HALTED"])
S_HALT_BUG = wp.constant(FIELDS["HALT_BUG"])
S_STOPPED = wp.constant(FIELDS["STOPPED"])
S_LOCKED = wp.constant(FIELDS["LOCKED"])
S_DIV16 = wp.constant(FIELDS["DIV16"])
S_TIMA = wp.constant(FIELDS["TIMA"])
S_TMA = wp.constant(FIELDS["TMA"])
S_TAC = wp.constant(FIELDS["TAC"])
S_TIMA_OVF = wp.constant(FIELDS["TIMA_OVF"])
S_PPU_DOT = wp.constant(FIELDS["PPU_DOT"])
S_PPU_NEXT = wp.constant(FIELDS["PPU_NEXT"])
S_LINE = wp.constant(FIELDS["LINE"])
S_MODE = wp.constant(FIELDS["MODE"])
S_STAT_EN = wp.constant(FIELDS["STAT_EN"])
S_STAT_LINE = wp.constant(FIELDS["STAT_LINE"])
S_WIN_LINE = wp.constant(FIELDS["WIN_LINE"])
S_FRAME_DONE = wp.constant(FIELDS["FRAME_DONE"])
S_PACK = wp.constant(FIELDS["PACK"])
S_PPU_M0 = wp.constant(FIELDS["PPU_M0"])
S_SER_CNT = wp.constant(FIELDS["SER_CNT"])
S_SER_N = wp.constant(FIELDS["SER_N"])
S_DMA_END = wp.constant(FIELDS["DMA_END"])
S_DMA_SRC = wp.constant(FIELDS["DMA_SRC"])
S_DMA_PREV_END = wp.constant(FIELDS["DMA_PREV_END"])
S_DMA_PREV_SRC = wp.constant(FIELDS["DMA_PREV_SRC"])
S_DMA_COPY = wp.constant(FIELDS["DMA_COPY"])
S_JOY = wp.constant(FIELDS["JOY"])
S_MBC = wp.constant(FIELDS["MBC"])
S_ROM_MASK = wp.constant(FIELDS["ROM_MASK"])
S_RAM_SIZE = wp.constant(FIELDS["RAM_SIZE"])
S_ROM_OFF0 = wp.constant(FIELDS["ROM_OFF0"])
S_ROM_OFF1 = wp.constant(FIELDS["ROM_OFF1"])
S_RAM_BANK = wp.constant(FIELDS["RAM_BANK"])
S_RAM_EN = wp.constant(FIELDS["RAM_EN"])
S_BANK1 = wp.constant(FIELDS["BANK1"])
S_BANK2 = wp.constant(FIELDS["BANK2"])
S_MBC_MODE = wp.constant(FIELDS["MBC_MODE"])
S_RTC_S = wp.constant(FIELDS["RTC_S"])
S_RTC_M = wp.constant(FIELDS["RTC_M"])
S_RTC_H = wp.constant(FIELDS["RTC_H"])
S_RTC_DL = wp.constant(FIELDS["RTC_DL"])
S_RTC_DH = wp.constant(FIELDS["RTC_DH"])
S_RTC_LS = wp.constant(FIELDS["RTC_LS"])
S_RTC_LM = wp.constant(FIELDS["RTC_LM"])
S_RTC_LH = wp.constant(FIELDS["RTC_LH"])
S_RTC_LDL = wp.constant(FIELDS["RTC_LDL"])
S_RTC_LDH = wp.constant(FIELDS["RTC_LDH"])
S_RTC_SUB = wp.constant(FIELDS["RTC_SUB"])
S_RTC_LATCH = wp.constant(FIELDS["RTC_LATCH"])
S_RTC_ON = wp.constant(FIELDS["RTC_ON"])
S_BOOT_ON = wp.constant(FIELDS["BOOT_ON"])
S_FRAMES = wp.constant(FIELDS["FRAMES"])
S_CYCLES = wp.constant(FIELDS["CYCLES"])
S_CLK = wp.constant(FIELDS["CLK"])
S_NEXT = wp.constant(FIELDS["NEXT"])
S_PYBOY_TIMING = wp.constant(FIELDS["PYBOY_TIMING"])
S_APU_FS = wp.constant(FIELDS["APU_FS"])
S_APU_SKIP = wp.constant(FIELDS["APU_SKIP"])
S_APU_ACT = wp.constant(FIELDS["APU_ACT"])
S_APU_LEN_EN = wp.constant(FIELDS["APU_LEN_EN"])
S_APU_LEN1 = wp.constant(FIELDS["APU_LEN1"])
S_APU_LEN2 = wp.constant(FIELDS["APU_LEN2"])
S_APU_LEN3 = wp.constant(FIELDS["APU_LEN3"])
S_APU_LEN4 = wp.constant(FIELDS["APU_LEN4"])
S_APU_SW_FREQ = wp.constant(FIELDS["APU_SW_FREQ"])
S_APU_SW_TIMER = wp.constant(FIELDS["APU_SW_TIMER"])
S_APU_SW_FLAGS = wp.constant(FIELDS["APU_SW_FLAGS"])
S_APU_ENV1 = wp.constant(FIELDS["APU_ENV1"])
S_APU_ENV2 = wp.constant(FIELDS["APU_ENV2"])
S_APU_ENV4 = wp.constant(FIELDS["APU_ENV4"])
S_APU_WAVE_POS = wp.constant(FIELDS["APU_WAVE_POS"])
S_APU_WAVE_CNT = wp.constant(FIELDS["APU_WAVE_CNT"])
S_APU_WAVE_PER = wp.constant(FIELDS["APU_WAVE_PER"])
S_PPU_FIFO = wp.constant(FIELDS["PPU_FIFO"])
S_FIFO_LINE = wp.constant(FIELDS["FIFO_LINE"])
S_FIFO_DOT = wp.constant(FIELDS["FIFO_DOT"])
S_FIFO_KP = wp.constant(FIELDS["FIFO_KP"])
S_FIFO_SX = wp.constant(FIELDS["FIFO_SX"])
S_FIFO_FETCH = wp.constant(FIELDS["FIFO_FETCH"])
S_FIFO_TILE = wp.constant(FIELDS["FIFO_TILE"])
S_FIFO_LO = wp.constant(FIELDS["FIFO_LO"])
S_FIFO_HI = wp.constant(FIELDS["FIFO_HI"])
S_FIFO_BG = wp.constant(FIELDS["FIFO_BG"])
S_FIFO_OBJ = wp.constant(FIELDS["FIFO_OBJ"])
S_FIFO_STALL = wp.constant(FIELDS["FIFO_STALL"])
S_FIFO_OBJN = wp.constant(FIELDS["FIFO_OBJN"])
S_FIFO_WIN = wp.constant(FIELDS["FIFO_WIN"])
S_FIFO_FINE = wp.constant(FIELDS["FIFO_FINE"])
S_FIFO_OBJH = wp.constant(FIELDS["FIFO_OBJH"])
FIFO_WORDS = wp.constant(FIELDS["FIFO_OBJH"] - FIELDS["FIFO_LINE"] + 1)
S_CGB = wp.constant(FIELDS["CGB"])
S_SPEED = wp.constant(FIELDS["SPEED"])
S_VBK = wp.constant(FIELDS["VBK"])
S_SVBK = wp.constant(FIELDS["SVBK"])
S_HDMA_SRC = wp.constant(FIELDS["HDMA_SRC"])
S_HDMA_DST = wp.constant(FIELDS["HDMA_DST"])
S_HDMA = wp.constant(FIELDS["HDMA"])
S_APU_SQ1_POS = wp.constant(FIELDS["APU_SQ1_POS"])
S_APU_SQ1_CNT = wp.constant(FIELDS["APU_SQ1_CNT"])
S_APU_SQ2_POS = wp.constant(FIELDS["APU_SQ2_POS"])
S_APU_SQ2_CNT = wp.constant(FIELDS["APU_SQ2_CNT"])
S_APU_LFSR = wp.constant(FIELDS["APU_LFSR"])
S_APU_NOISE_CNT = wp.constant(FIELDS["APU_NOISE_CNT"])
S_APU_NOISE_PEND = wp.constant(FIELDS["APU_NOISE_PEND"])
S_APU_PH = wp.constant(FIELDS["APU_PH"])
S_APU_WAVE_OUT = wp.constant(FIELDS["APU_WAVE_OUT"])
S_APU_NOISE_CTR = wp.constant(FIELDS["APU_NOISE_CTR"])
S_VRAM_OPEN = wp.constant(FIELDS["VRAM_OPEN"])

MODEL_DMG = wp.constant(0)
"""``CGB`` column: an original Game Boy."""
MODEL_CGB = wp.constant(1)
"""``CGB`` column: a Game Boy Color running a Color cartridge (Color mode)."""
MODEL_CGB_COMPAT = wp.constant(2)
"""``CGB`` column: a Game Boy Color running a DMG-only cartridge (its compatibility mode: the
Color's post-boot state and timing, the DMG's registers and picture)."""
HDMA_HBLANK = wp.constant(0x10000)
"""``HDMA`` column bit: the transfer in progress copies 16 bytes per HBlank."""

SERIAL_CAPACITY: int = 8192
"""Bytes of serial output kept per console (later bytes are dropped)."""

FRAME_CYCLES: int = 70224
"""T-cycles per DMG frame (154 lines x 456 dots)."""

# Memory regions kept per console (bytes).
VRAM_SIZE = 0x2000
WRAM_SIZE = 0x2000
OAM_SIZE = 0xA0
HRAM_SIZE = 0x100  # FF00-FFFF: IO registers, HRAM and IE

# The Color's extra memory, one ``cgbx`` row per console (allocated for the Color only; a DMG
# console has a 1-byte row): VRAM bank 1, the backing store of WRAM banks 1-7 (the bank mapped
# at D000 lives in ``wram`` itself, see cgb.py), then BG and OBJ palette RAM.
CGBX_VRAM1 = wp.constant(0x0000)
CGBX_WRAM = wp.constant(0x2000)  # bank k (1-7) at CGBX_WRAM + (k - 1) * 0x1000
CGBX_BGPAL = wp.constant(0x9000)  # 8 palettes x 4 colours x 2 bytes (RGB555, little-endian)
CGBX_OBJPAL = wp.constant(0x9040)
CGBX_SIZE = 0x9080
