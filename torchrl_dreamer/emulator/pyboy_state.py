"""Load PyBoy ``.state`` savestates into our emulator (:class:`~.state.EmulatorState`).

PyBoy (the test oracle) writes a flat little-endian byte stream: a version byte, then each
component's fields in a fixed order (CPU, OAM DMA, LCD, sound, renderer, RAM, timer, cartridge,
joypad, serial, Super Game Boy). :func:`parse_pyboy_state` walks that stream and returns the
console-visible parts as a :class:`PyBoyState`; :func:`load_pyboy_state` converts them into a
1-env :class:`~.state.EmulatorState` for the ROM the state belongs to, ready for
``gb.load_state(state)`` (it broadcasts to every env).

Supported: state version :data:`PYBOY_STATE_VERSIONS` (29, written by PyBoy 2.8.x), DMG mode
only (our core is a DMG; a state saved with ``cgb=True`` is refused). Older versions are refused
with an error naming the version: their layout differs field by field and there is no writer here
to test them against.

What is carried over: CPU registers, IME / EI delay / HALT / STOP, IE and IF, the OAM DMA in
progress, VRAM, OAM, WRAM, HRAM, the IO registers (LCD, palettes, scroll, window, timer with the
full 16-bit divider, serial, joypad selection, sound registers as PyBoy last stored them), the
PPU position (line and dot from PyBoy's LCD clock), the window WY latch, the first-frame-blank flag
after LCD on, the mapper registers, cartridge RAM and the MBC3 real-time clock, held buttons.
Not carried over: the APU's internal state (channel status bits, length counters, sweep,
envelopes, wave position: PyBoy's sound section is skipped, so they start cleared), SGB data, and
PyBoy's window line counter (not in its state: rebuilt from the lines drawn so far in the frame,
exact when the state was saved at a frame boundary, as ``PyBoy.save_state`` after ``tick()`` is).

A PyBoy state holds no ROM identity (no title, no hash). A state from another ROM is recognised
when its cartridge section does not fit this ROM's header (mapper, RAM banks, RTC, rumble) or
its bank registers are out of range; two ROMs with the same cartridge layout cannot be told
apart, so pass the ROM the state was saved with.

Why our own: this is a reader for PyBoy's on-disk format, written from the field order its
``save_state`` methods define (read for facts only); no other reader exists.

Example:
    >>> from torchrl_dreamer.emulator import GameBoy                       # doctest: +SKIP
    >>> from torchrl_dreamer.emulator.pyboy_state import load_pyboy_state  # doctest: +SKIP
    >>> gb = GameBoy("game.gb", num_envs=8)                                # doctest: +SKIP
    >>> gb.load_state(load_pyboy_state("game.gb.state", "game.gb"))        # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from torchrl_dreamer.emulator import layout
from torchrl_dreamer.emulator.cartridge import Cartridge, load_rom_bytes, parse_cartridge
from torchrl_dreamer.emulator.dma import DMA_PAST_T
from torchrl_dreamer.emulator.mappers import MBC_1, MBC_1M, mapper_for
from torchrl_dreamer.emulator.state import STATE_VERSION, EmulatorState, SavestateError

__all__ = [
    "PYBOY_STATE_VERSIONS",
    "PyBoyState",
    "PyBoyStateError",
    "parse_pyboy_state",
    "load_pyboy_state",
    "set_pyboy_timing",
]

PYBOY_STATE_VERSIONS: tuple[int, ...] = (29,)
"""PyBoy state versions this reader understands (29: PyBoy 2.8.x)."""

_FRAME_CYCLES = 70224
_LINE_CYCLES = 456
# PyBoy allocates at least one 8 KiB RAM bank whatever the header says (RAM size code -> banks)
_PYBOY_RAM_BANKS = {0x00: 1, 0x01: 1, 0x02: 1, 0x03: 4, 0x04: 16, 0x05: 8}
_RUMBLE_TYPES = (0x1C, 0x1D, 0x1E)
_SGB_BYTES = 7 + 4 + 0x2000 + 0x800 + 0x80


class PyBoyStateError(SavestateError):
    """A PyBoy state cannot be loaded (unsupported version, CGB mode, truncated, other ROM)."""


class _Reader:
    """Cursor over the state bytes; every read names the field so truncation errors say where."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise PyBoyStateError(
                f"PyBoy state is truncated: {len(self.data)} bytes, ran out while reading {what} "
                f"at offset {self.pos}"
            )
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        return int.from_bytes(self.take(2, what), "little")

    def u64(self, what: str) -> int:
        return int.from_bytes(self.take(8, what), "little")

    def skip(self, n: int, what: str) -> None:
        self.take(n, what)


@dataclass
class PyBoyState:
    """The console-visible contents of a PyBoy DMG state (see the module docstring).

    Attributes:
        version: PyBoy state version.
        cpu: ``a f b c d e h l sp pc ime ei_delay halted stopped ie if_ cycles``.
        dma: ``active source index start_cycle`` of the OAM DMA.
        lcd: ``lcdc bgp obp0 obp1 stat ly lyc scy scx wy wx first_frame clock clock_target
            last_cycles frame_done wy_latch`` and per-line ``lines`` ([SCX, SCY, WX, WY, LCDC.4]).
        timer: ``div_counter tima tma tac reload_state last_cycles``.
        cart: ``rombank rambank ram_enabled mode reg1 reg2 ram rtc`` (rtc: dict or None).
        serial: ``sb sc transfer internal_clock clock clock_target``.
        joypad: ``directional standard`` nibbles (bit clear = pressed).
        vram / oam / wram / io / hram: memory images (io: FF00-FF4B as PyBoy stored them).
        bootrom_enabled: whether the boot ROM was still mapped.
    """

    version: int
    bootrom_enabled: bool
    cpu: dict[str, int]
    dma: dict[str, int]
    lcd: dict
    timer: dict[str, int]
    cart: dict
    serial: dict[str, int]
    joypad: dict[str, int]
    vram: bytes
    oam: bytes
    wram: bytes
    io: bytes
    hram: bytes
    extra: dict = field(default_factory=dict)


def _read_sound(r: _Reader) -> None:
    """Skip the sound section (version 29 layout; we do not emulate sound)."""
    r.skip(8, "sound buffer head")
    samples = r.u64("sound samples per frame")
    if samples > 1 << 20:
        raise PyBoyStateError(f"PyBoy state is corrupt: {samples} audio samples per frame")
    r.skip(8, "sound cycles per sample")
    r.skip((samples + 1) * 2, "sound buffer")
    r.skip(1 + 8 + 8 + 8 + 8 + 8 + 8 + 8, "sound timing")
    r.skip(3 + 8 + 1, "sound power and panning")
    tone = 5 + 2 + 1 + 1 + 6 * 8 + 3
    r.skip(tone + 3 + 4 * 8 + 2 + 8, "sound channel 1")
    r.skip(tone, "sound channel 2")
    r.skip(16 + 3 + 2 + 1 + 1 + 4 * 8 + 1 + 8 + 1 + 1 + 8, "sound channel 3")
    r.skip(8 + 1 + 7 * 8 + 3 * 8 + 1, "sound channel 4")


def parse_pyboy_state(data: bytes, rom: str | os.PathLike | bytes) -> PyBoyState:
    """Parse a PyBoy state (bytes) saved while running ``rom``; see :class:`PyBoyState`.

    Raises:
        PyBoyStateError: unsupported version, CGB-mode state, truncated or trailing bytes, or a
            cartridge section that does not fit ``rom`` (a state from another ROM).
    """
    cart = parse_cartridge(load_rom_bytes(rom), check=False)
    rom_bytes = load_rom_bytes(rom)
    r = _Reader(bytes(data))
    version = r.u8("the version byte")
    if version not in PYBOY_STATE_VERSIONS:
        raise PyBoyStateError(
            f"PyBoy state version {version} is not supported (this reader knows versions "
            f"{', '.join(map(str, PYBOY_STATE_VERSIONS))}, written by PyBoy 2.8.x); re-save the state "
            "with PyBoy 2.8 (load it there, then save_state)"
        )
    boot = bool(r.u8("bootrom flag"))
    r.skip(3, "key0/key1/double speed")
    if r.u8("CGB flag"):
        raise PyBoyStateError(
            "PyBoy state was saved in CGB mode; our core is a DMG: save it with PyBoy(..., cgb=False)"
        )
    regs = [r.u8(f"register {n}") for n in "AFBCDE"]
    hl, sp, pc = r.u16("HL"), r.u16("SP"), r.u16("PC")
    cpu = dict(zip("afbcde", regs), h=hl >> 8, l=hl & 0xFF, sp=sp, pc=pc)
    cpu.update(ime=r.u8("IME"), ei_delay=r.u8("EI delay"), halted=r.u8("HALT"), stopped=r.u8("STOP"),
               ie=r.u8("IE"), queued=r.u8("interrupt queue"), if_=r.u8("IF"), cycles=r.u64("CPU cycles"))
    dma = dict(active=r.u8("DMA active"), reading=r.u8("DMA reading"), source=r.u8("DMA source"),
               index=r.u8("DMA index"), start_cycle=r.u64("DMA start"))
    vram = r.take(0x2000, "VRAM")
    oam = r.take(0xA0, "OAM")
    lcd: dict = {}
    for k in ("lcdc", "bgp", "obp0", "obp1", "stat", "ly", "lyc", "scy", "scx", "wy", "wx", "opri"):
        lcd[k] = r.u8(f"LCD {k}")
    lines = r.take(144 * 5, "LCD scanline parameters")
    lcd["lines"] = [tuple(lines[5 * y:5 * y + 5]) for y in range(144)]
    lcd_cgb = r.u8("LCD CGB flag")
    r.skip(2, "LCD downgrade / speed")
    if lcd_cgb:
        raise PyBoyStateError("PyBoy state has a CGB-mode LCD; our core is a DMG")
    lcd.update(frame_done=r.u8("LCD frame done"), first_frame=r.u8("LCD first frame"), reset=r.u8("LCD reset"),
               last_cycles=r.u64("LCD last cycles"), clock=r.u64("LCD clock"),
               clock_target=r.u64("LCD clock target"), next_mode=r.u8("LCD next mode"),
               transition=r.u8("LCD transition"))
    _read_sound(r)
    r.skip(144 * 160 * 5, "screen buffer")
    lcd["wy_latch"] = r.u8("window WY latch")
    wram = r.take(0x2000, "WRAM")
    r.skip(0x60, "FEA0-FEFF")
    io = r.take(0x4C, "IO registers")
    hram = r.take(0x7F, "HRAM")
    r.skip(1, "WRAM bank select")
    r.skip(1, "timer DIV")
    timer = dict(tima=r.u8("TIMA"), div_counter=r.u16("DIV counter"), tima_counter=r.u16("TIMA counter"),
                 tma=r.u8("TMA"), tac=r.u8("TAC"), reload_state=r.u8("TIMA reload"),
                 last_cycles=r.u64("timer last cycles"), to_irq=r.u64("timer next IRQ"))
    banks = _PYBOY_RAM_BANKS.get(rom_bytes[0x149], 1)
    need = 4 + banks * 0x2000 + (33 if cart.rtc else 0) + (2 if cart.mbc in (MBC_1, MBC_1M) else 0)
    need += (1 + (cart.type_code in _RUMBLE_TYPES)) if cart.mbc == 5 else 0
    need += 2 + 36 + _SGB_BYTES
    if len(r.data) - r.pos != need:
        raise _other_rom(
            cart, f"its cartridge and later sections take {len(r.data) - r.pos} bytes, this "
            f"cartridge needs {need} ({banks} RAM bank(s) of 8 KiB in PyBoy); or the state is truncated"
        )
    c = dict(rombank=r.u8("ROM bank"), rambank=r.u8("RAM bank"), ram_enabled=r.u8("RAM enable"),
             mode=r.u8("MBC1 mode"))
    c["ram"] = r.take(banks * 0x2000, "cartridge RAM")
    c["rtc"] = None
    if cart.rtc:
        r.skip(8, "RTC time zero")
        r.skip(2, "RTC halt/carry")
        c["rtc"] = dict(s=r.u8("RTC s"), m=r.u8("RTC m"), h=r.u8("RTC h"), dl=r.u8("RTC day low"),
                        dh=r.u8("RTC day high"), halt=r.u8("RTC halt"), carry=r.u8("RTC carry"),
                        cycles=r.u64("RTC cycles"))
        r.skip(8, "RTC save time")
    c["reg1"], c["reg2"] = c["rombank"], 0
    if cart.mbc in (MBC_1, MBC_1M):
        c["reg1"], c["reg2"] = r.u8("MBC1 bank register 1"), r.u8("MBC1 bank register 2")
    elif cart.mbc == 5:
        rumble = r.u8("MBC5 rumble flag")
        if rumble != int(cart.type_code in _RUMBLE_TYPES):
            raise _other_rom(cart, "MBC5 rumble flag")
        if rumble:
            r.skip(1, "MBC5 rumble state")
    joypad = dict(directional=r.u8("joypad directions"), standard=r.u8("joypad buttons"))
    serial = dict(sb=r.u8("SB"), sc=r.u8("SC"), transfer=r.u8("serial active"), internal_clock=r.u8("serial clock"),
                  last_cycles=r.u64("serial last cycles"), to_irq=r.u64("serial next IRQ"),
                  clock=r.u64("serial clock"), clock_target=r.u64("serial target"))
    r.skip(_SGB_BYTES, "SGB state")
    if r.pos != len(r.data):
        raise _other_rom(cart, f"{len(r.data) - r.pos} bytes left over after the last section")
    if c["rombank"] >= max(cart.rom_banks, 2) and cart.rom_banks <= 256:
        raise _other_rom(cart, f"ROM bank {c['rombank']} selected")
    if joypad["directional"] > 0xF or joypad["standard"] > 0xF:
        raise _other_rom(cart, "joypad section misplaced")
    return PyBoyState(version, boot, cpu, dma, lcd, timer, c, serial, joypad, vram, oam, wram, io, hram)


def _other_rom(cart: Cartridge, why: str) -> PyBoyStateError:
    return PyBoyStateError(
        f"PyBoy state does not fit this ROM ({cart.title!r}, {cart.type_name}, "
        f"{cart.rom_banks} ROM banks): {why}. Was it saved with another game? Pass the ROM the state "
        "was saved with"
    )


def _window_count(p: PyBoyState, line: int) -> int:
    """Window lines drawn so far this frame (PyBoy does not save its window line counter)."""
    if line >= 144 or line == 0:
        return 0
    lcdc = p.lcd["lcdc"]
    n = 0
    latched = False
    for y in range(line):
        _scx, _scy, wx7, wy, _ = p.lcd["lines"][y]
        latched = latched or wy == y
        if (lcdc & 0x21) == 0x21 and latched and wx7 < 167:
            n += 1
    return n & 0xFF


def load_pyboy_state(src: str | os.PathLike | bytes, rom: str | os.PathLike | bytes) -> EmulatorState:
    """Read a PyBoy ``.state`` (path or bytes) saved on ``rom`` into a 1-env :class:`EmulatorState`.

    Load it with ``gb.load_state(state)`` into a :class:`~.gameboy.GameBoy` created on the same
    ROM (it broadcasts to every env, or use a mask). See the module docstring for what is kept.

    Raises:
        PyBoyStateError: see :func:`parse_pyboy_state`.
    """
    data = Path(src).read_bytes() if isinstance(src, (str, os.PathLike)) else bytes(src)
    rom_bytes = load_rom_bytes(rom)
    cart = parse_cartridge(rom_bytes, check=False)
    p = parse_pyboy_state(data, rom_bytes)
    f = layout.FIELDS
    st = torch.zeros(1, layout.STATE_WORDS, dtype=torch.int32)

    def put(name: str, value: int) -> None:
        st[0, f[name]] = int(value)

    put("DMA_END", DMA_PAST_T)  # no transfer (one in progress is set below)
    put("DMA_PREV_END", DMA_PAST_T)

    cpu = p.cpu
    for k in "abcdefhl":
        put(k.upper(), cpu[k])
    put("F", cpu["f"] & 0xF0)
    put("SP", cpu["sp"])
    # PyBoy keeps PC on the HALT opcode while halted and steps over it on wake-up; ours points
    # past it (as hardware does once the opcode has been fetched).
    put("PC", (cpu["pc"] + 1) & 0xFFFF if cpu["halted"] else cpu["pc"])
    put("IME", cpu["ime"])
    put("EI_PEND", cpu["ei_delay"])
    put("HALTED", cpu["halted"] or cpu["stopped"])
    put("STOPPED", cpu["stopped"])

    # timer: PyBoy's 16-bit divider counter is our DIV16; bring it to the CPU's cycle count
    t = p.timer
    lag = max(0, cpu["cycles"] - t["last_cycles"])
    put("DIV16", (t["div_counter"] + lag) & 0xFFFF)
    put("TMA", t["tma"])
    put("TAC", t["tac"] & 7)
    if t["reload_state"] == 1:  # overflowed: TIMA reads 0 until the reload
        put("TIMA", 0)
        put("TIMA_OVF", 1)
    else:
        put("TIMA", t["tima"])

    # PPU: PyBoy's LCD clock counts T-cycles from the start of the frame (line 0)
    lcd = p.lcd
    clock = lcd["clock"] + max(0, cpu["cycles"] - lcd["last_cycles"])
    clock %= _FRAME_CYCLES
    line, dot = divmod(clock, _LINE_CYCLES)
    put("LINE", line)
    put("PPU_DOT", dot)
    if line >= 144:
        mode, nxt = 1, _LINE_CYCLES
    elif dot < 80:
        mode, nxt = 2, 80
    elif dot < 252:
        mode, nxt = 3, 252
    else:
        mode, nxt = 0, _LINE_CYCLES
    put("MODE", mode)
    put("PPU_NEXT", nxt)
    put("STAT_EN", lcd["stat"] & 0x78)
    win = _window_count(p, line) | (0x100 if lcd["wy_latch"] else 0)
    if lcd["first_frame"] and (lcd["lcdc"] & 0x80):
        win |= 0x10000  # the first frame after LCD on is blank (ppu.WIN_BLANK)
    put("WIN_LINE", win)
    lcd_on = (lcd["lcdc"] & 0x80) != 0
    stat_line = 0
    if lcd_on:
        en = lcd["stat"]
        stat_line = int(
            ((en & 0x08) and mode == 0) or ((en & 0x10) and mode == 1) or ((en & 0x20) and mode == 2)
            or ((en & 0x40) and line == lcd["lyc"])
        )
    put("STAT_LINE", stat_line)

    # serial: an internally clocked transfer in progress: the shift-clock edges (512 T-cycles
    # apart) still to come in PyBoy's remaining cycles
    s = p.serial
    if s["transfer"] and s["internal_clock"] and s["clock_target"] > s["clock"]:
        put("SER_CNT", min(-(-(s["clock_target"] - s["clock"]) // 512), 8))

    # OAM DMA in progress: copy the rest now (the source is in the state), block OAM reads
    oam = bytearray(p.oam)
    if p.dma["active"]:
        base = p.dma["source"] << 8
        for k in range(p.dma["index"], 0xA0):
            oam[k] = _peek_state(p, rom_bytes, cart, base + k)
        # the remaining bytes, one per M-cycle from the next one (DMA_END: see dma.py)
        put("DMA_END", 4 * (0xA0 - p.dma["index"]) + 4)
        put("DMA_SRC", base)

    joy = ((~p.joypad["standard"]) & 0xF) | (((~p.joypad["directional"]) & 0xF) << 4)
    put("JOY", joy)

    # cartridge mapper
    c = p.cart
    put("MBC", cart.mbc)
    put("ROM_MASK", cart.rom_banks - 1)
    put("RAM_SIZE", cart.ram_size)
    put("RAM_EN", c["ram_enabled"])
    put("RTC_ON", int(cart.rtc))
    if cart.mbc in (MBC_1, MBC_1M):
        b1, b2, mode_ = c["reg1"] or 1, c["reg2"] & 3, c["mode"] & 1
    elif cart.mbc == 5:
        b1, b2, mode_ = c["rombank"] & 0xFF, (c["rombank"] >> 8) & 1, 0
    else:
        b1, b2, mode_ = max(c["rombank"], 1) if cart.mbc else 1, 0, 0
    off0, off1, rambank = mapper_for(cart.mbc).rom_offsets(b1, b2, mode_, cart.rom_banks - 1)
    put("BANK1", b1)
    put("BANK2", b2)
    put("MBC_MODE", mode_)
    put("ROM_OFF0", off0)
    put("ROM_OFF1", off1)
    put("RAM_BANK", rambank if rambank >= 0 else c["rambank"] & 0x0F)
    if c["rtc"] is not None:
        rtc = c["rtc"]
        for k, name in (("s", "RTC_S"), ("m", "RTC_M"), ("h", "RTC_H"), ("dl", "RTC_DL")):
            put(name, rtc[k])
            put(name.replace("RTC_", "RTC_L"), rtc[k])
        dh = (rtc["dh"] & 1) | (0x40 if rtc["halt"] else 0) | (0x80 if rtc["carry"] else 0)
        put("RTC_DH", dh)
        put("RTC_LDH", dh)
        put("RTC_SUB", rtc["cycles"] % 4194304)
    put("BOOT_ON", int(p.bootrom_enabled))

    # memories
    hram = bytearray(0x100)
    hram[0:0x4C] = p.io
    hram[0x00] = p.io[0] & 0x30
    hram[0x01] = s["sb"]
    hram[0x02] = s["sc"] | 0x7E
    hram[0x0F] = cpu["if_"] & 0x1F
    for reg, key in ((0x40, "lcdc"), (0x42, "scy"), (0x43, "scx"), (0x45, "lyc"), (0x47, "bgp"),
                     (0x48, "obp0"), (0x49, "obp1"), (0x4A, "wy"), (0x4B, "wx")):
        hram[reg] = lcd[key]
    hram[0x41] = 0
    hram[0x44] = 0
    hram[0x46] = p.dma["source"]
    hram[0x50] = 0 if p.bootrom_enabled else 1
    hram[0x80:0xFF] = p.hram
    hram[0xFF] = cpu["ie"]
    cram = bytearray(max(cart.ram_size, 1))
    n = min(cart.ram_size, len(c["ram"]))
    if cart.mbc == 2:
        cram[:512] = bytes(b & 0x0F for b in c["ram"][:512])
    else:
        cram[:n] = c["ram"][:n]

    def u8(b: bytes | bytearray) -> torch.Tensor:
        return torch.frombuffer(bytearray(b), dtype=torch.uint8).clone()[None]

    arrays = {
        "st": st,
        "vram": u8(p.vram),
        "oam": u8(oam),
        "wram": u8(p.wram),
        "hram": u8(hram),
        "cram": u8(cram),
        "ser": torch.zeros(1, layout.SERIAL_CAPACITY, dtype=torch.uint8),
        "cgbx": torch.zeros(1, 1, dtype=torch.uint8),  # a DMG: no Color memory
    }
    return EmulatorState(STATE_VERSION, cart.sha256, layout.STATE_WORDS, arrays)


def _peek_state(p: PyBoyState, rom: bytes, cart: Cartridge, addr: int) -> int:
    """A byte of the console's address space as stored in a parsed state (OAM DMA source)."""
    addr &= 0xFFFF
    if addr >= 0xFE00 and cart is not None:  # DMG DMA from FE00-FFFF reads the WRAM echo
        addr -= 0x2000
    if addr < 0x4000:
        return rom[addr]
    if addr < 0x8000:
        bank = (p.cart["rombank"] & (cart.rom_banks - 1)) or 1
        return rom[bank * 0x4000 + addr - 0x4000]
    if addr < 0xA000:
        return p.vram[addr - 0x8000]
    if addr < 0xC000:
        ram = p.cart["ram"]
        return ram[(p.cart["rambank"] * 0x2000 + addr - 0xA000) % len(ram)] if ram else 0xFF
    return p.wram[(addr - 0xC000) & 0x1FFF]


def set_pyboy_timing(gb, enabled: bool = True, mask: torch.Tensor | None = None) -> None:
    """Switch the envs of ``gb`` (all, or those where ``mask`` is True) to PyBoy's timing.

    For frame-by-frame comparison with PyBoy only (the default, off, is hardware timing): frames
    end where PyBoy's ``tick()`` returns (LY 153 -> 0, and when the LCD is switched off, which
    also restarts the frame clock), LY reads as the next line from dot 452 on lines 0-143, and a
    line is drawn at dot 256 instead of 252 when SCX & 7 != 0 (PyBoy's mode-3 fine-scroll
    penalty). Create ``gb`` with ``idle_skip=False``: the LY busy-wait fast-forward assumes
    hardware LY timing. The flag lives in the savestate (state column ``PYBOY_TIMING``).
    """
    col = gb.state_tensors()["st"][:, layout.FIELDS["PYBOY_TIMING"]]
    if mask is None:
        col.fill_(int(enabled))
    else:
        col[mask.to(col.device)] = int(enabled)

