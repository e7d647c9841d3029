"""Hardware edge cases with micro-ROMs of our own: TIMA reload, post-boot DIV/P1/serial phase,
a user boot ROM's hand-over, the MBC3 real-time clock, MBC1 multicarts and STOP.

Each test asserts what a program running on a DMG observes (register reads, RAM it wrote), with
the facts from Pan Docs and the mooneye test sources quoted in the docstrings.
"""

from __future__ import annotations

import pytest
from test_emulator_romkit import STOP_FOREVER, make_rom

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.registers import (
    IRQ_SERIAL,
    IRQ_TIMER,
    R_DIV,
    R_IE,
    R_IF,
    R_JOYP,
    R_SC,
    R_TAC,
    R_TIMA,
    R_TMA,
)

NOP = b"\x00"
XOR_A = b"\xaf"


def ldh_w(r: int) -> bytes:
    return bytes([0xE0, r])  # ldh (FF00+r),a


def ldh_r(r: int) -> bytes:
    return bytes([0xF0, r])  # ldh a,(FF00+r)


def ld_a(v: int) -> bytes:
    return bytes([0x3E, v])


def st_a(addr: int) -> bytes:
    return bytes([0xEA, addr & 0xFF, addr >> 8])  # ld (nn),a


def run_rom(code: bytes, frames: int = 2, **kw) -> GameBoy:
    gb = GameBoy(make_rom(code + STOP_FOREVER, **kw), check_header=False)
    gb.run_frames(frames)
    return gb


# ------------------------------------------------------------------------------------ timer
def reload_probe(target: int, nops: list[int]) -> list[tuple[int, int]]:
    """mooneye tima/tma_write_reloading's protocol, plus IF: TIMA = FE at a 64 T-cycle rate
    from a DIV reset, then ``ld a,h`` and ``nops`` NOPs, a write of 7F to ``target`` and reads
    of TIMA and IF."""
    code = b"\xf3\x26\x7f" + XOR_A + ldh_w(R_IE)  # di; ld h,7F; IE = 0
    code += ld_a(0xFE) + ldh_w(R_TMA) + ld_a(0x06) + ldh_w(R_TAC)  # 64 T-cycles a tick
    for k, n in enumerate(nops):
        code += XOR_A + ldh_w(R_IF) + ld_a(0xFE) + ldh_w(R_TMA)
        code += ldh_w(R_DIV) + ldh_w(R_TIMA) + ldh_w(R_DIV) + b"\x7c" + NOP * n
        code += ldh_w(target) + ldh_r(R_TIMA) + st_a(0xC000 + 2 * k) + ldh_r(R_IF) + st_a(0xC001 + 2 * k)
    out = run_rom(code).read_memory(0xC000, 2 * len(nops))[0].tolist()
    return [(out[2 * k], out[2 * k + 1] & IRQ_TIMER) for k in range(len(nops))]


def test_tima_write_around_the_reload():
    """27 NOPs: before the overflow (7F then one tick). 28: in the overflow M-cycle, the write
    wins and cancels the reload and its interrupt. 29: in the reload M-cycle the write is
    ignored (TIMA = TMA, IRQ raised). 30: after it, the write wins; the IRQ stays raised."""
    assert reload_probe(R_TIMA, [27, 28, 29, 30]) == [
        (0x80, 0), (0x7F, 0), (0xFE, IRQ_TIMER), (0x7F, IRQ_TIMER)]


def test_tma_write_around_the_reload():
    """A TMA write in the overflow M-cycle is reloaded (7F); one in the reload M-cycle is
    also loaded into TIMA (7F); later writes leave TIMA at the old TMA (FE)."""
    assert reload_probe(R_TMA, [28, 29, 30, 31]) == [
        (0x7F, IRQ_TIMER), (0x7F, IRQ_TIMER), (0xFE, IRQ_TIMER), (0xFE, IRQ_TIMER)]


# ------------------------------------------------------------------------------------ post-boot state
@pytest.mark.parametrize(("nops", "div"), [(5, 0xAB), (6, 0xAC), (69, 0xAC), (70, 0xAD)])
def test_post_boot_div_phase(nops, div):
    """DMG-ABC: DIV increments to AC 14 M-cycles after PC reaches 0100 (mooneye boot_div): a
    read in the 3rd M-cycle of ``ldh a,(DIV)`` after ``nop; jp 0150`` and 6 NOPs sees AC, after
    5 NOPs AB; 64 M-cycles later the same holds one count up."""
    gb = run_rom(NOP * nops + ldh_r(R_DIV) + st_a(0xC000))
    assert gb.read_memory(0xC000, 1)[0, 0] == div


def test_post_boot_io_registers():
    """P1 reads CF (both select lines low, nothing pressed), SC 7E, TAC F8, IF E1 (mooneye
    boot_hwio), LCDC 91, STAT's unused bit 7 set."""
    gb = GameBoy(make_rom(), check_header=False)
    read = lambda r: int(gb.read_memory(0xFF00 + r, 1)[0, 0])  # noqa: E731
    assert [read(R_JOYP), read(R_SC), read(R_TAC), read(R_IF)] == [0xCF, 0x7E, 0xF8, 0xE1]
    assert read(0x40) == 0x91 and read(0x41) & 0x80


# ------------------------------------------------------------------------------------ serial
def serial_end_div(start_nops: int, div_reset_nops: int | None = None) -> tuple[int, int]:
    """DIV reset, ``start_nops`` NOPs, SC = 81 (internal clock), [``div_reset_nops`` NOPs and a
    DIV reset]; spin until SC bit 7 clears; returns (DIV then, IF & serial)."""
    code = b"\xf3" + XOR_A + ldh_w(R_IE) + ldh_w(R_IF) + ldh_w(R_DIV) + NOP * start_nops
    code += ld_a(0x81) + ldh_w(R_SC)
    if div_reset_nops is not None:
        code += NOP * div_reset_nops + ldh_w(R_DIV)
    code += ldh_r(R_SC) + b"\x17\x38\xfb"  # loop: ldh a,(SC); rla; jr c,loop
    code += ldh_r(R_DIV) + st_a(0xC000) + ldh_r(R_IF) + st_a(0xC001)
    out = run_rom(code).read_memory(0xC000, 2)[0].tolist()
    return out[0], out[1] & IRQ_SERIAL


@pytest.mark.parametrize("start_nops", [0, 40, 100])
def test_serial_clock_is_the_system_counter(start_nops):
    """The shift clock is DIV16 bit 8: the 8th falling edge after the start is at DIV16 = 4096
    whenever in the first 512 T-cycles the transfer starts (mooneye boot_sclk_align), so the
    completion is seen at DIV 10 (a 4096-cycle timer from the SC write would end at DIV 11
    for a start 100 NOPs in)."""
    assert serial_end_div(start_nops) == (0x10, IRQ_SERIAL)


def test_serial_clock_follows_a_div_reset():
    """Resetting DIV while bit 8 is set is a falling edge (1 bit); the other 7 follow 512
    T-cycles apart from the reset: the transfer ends at DIV16 = 7 * 512 (DIV 0E)."""
    assert serial_end_div(0, div_reset_nops=80) == (0x0E, IRQ_SERIAL)


# ------------------------------------------------------------------------------------ boot ROM
def homemade_boot_rom() -> bytes:
    """The last steps of a DMG boot ROM: LCD and palette on, wait for DIV to reach AB, the CPU
    registers of the hand-over, then ``ld a,1; ldh (50),a`` at 00FC-00FF, so the next fetch,
    at 0100, is the cartridge's. It first copies 0000 (its own first byte) to C002."""
    code = b"\xfa\x00\x00" + st_a(0xC002)  # ld a,(0000); ld (C002),a
    code += b"\x31\xfe\xff"  # ld sp,FFFE
    code += ld_a(0xFC) + ldh_w(0x47) + ld_a(0x91) + ldh_w(0x40)  # BGP = FC, LCDC = 91
    tail = ldh_r(R_DIV) + b"\xfe\xab\x20\xfa"  # wait: ldh a,(DIV); cp AB; jr nz,wait
    tail += b"\x21\xb0\x01\xe5\xf1"  # ld hl,01B0; push hl; pop af  (A = 01, F = B0)
    tail += b"\x01\x13\x00\x11\xd8\x00\x21\x4d\x01"  # ld bc,0013; ld de,00D8; ld hl,014D
    tail += ld_a(0x01) + ldh_w(0x50)  # at 00FC-00FF
    boot = bytearray(256)  # NOPs between the two parts
    boot[: len(code)] = code
    boot[256 - len(tail):] = tail
    return bytes(boot)


def test_user_boot_rom_hands_over_in_its_own_state():
    """With a boot ROM nothing is preset: the console powers on with DIV = 0, the LCD off and
    0000-00FF mapped to the boot ROM; what the boot code does is the state the cartridge sees.
    After the FF50 write 0000-00FF reads the cartridge; the boot ROM cannot be mapped back."""
    cart = b"\xf5\xfa\x00\x00" + st_a(0xC001)  # push af; ld a,(0000); ld (C001),a
    cart += ldh_r(R_DIV) + st_a(0xC000) + ld_a(0) + ldh_w(0x50) + b"\xf1"  # DIV; FF50 = 0; pop af
    rom = make_rom(cart + b"\x18\xfe")
    boot = homemade_boot_rom()
    gb = GameBoy(rom, boot_rom=boot, check_header=False)
    assert gb.registers()["pc"][0] == 0 and gb.read_memory(0x0000, 1)[0, 0] == boot[0]
    assert int(gb.read_memory(0xFF04, 1)[0, 0]) == 0 and int(gb.read_memory(0xFF40, 1)[0, 0]) == 0
    assert int(gb.read_memory(0xFF44, 1)[0, 0]) == 0  # LCD off: LY 0
    gb.run_frames(3)
    regs = {k: int(v[0]) for k, v in gb.registers().items()}
    assert {k: regs[k] for k in "afbcdehl"} == {"a": 0x01, "f": 0xB0, "b": 0x00, "c": 0x13,
                                                 "d": 0x00, "e": 0xD8, "h": 0x01, "l": 0x4D}
    assert regs["sp"] == 0xFFFE and 0x150 < regs["pc"] < 0x170
    div, cart0, boot0 = gb.read_memory(0xC000, 3)[0].tolist()
    assert (boot0, cart0) == (boot[0], rom[0])  # 0000 before and after the hand-over
    assert div == 0xAB  # DIV ran from 0 through the boot code
    assert gb.read_memory(0x0000, 4)[0].tolist() == list(rom[:4])  # FF50 = 0 did not remap it
    assert int(gb.read_memory(0xFF40, 1)[0, 0]) == 0x91 and int(gb.read_memory(0xFF50, 1)[0, 0]) == 0xFF


# ------------------------------------------------------------------------------------ MBC3 clock
RTC_CART = dict(cart_type=0x10, rom_size_code=2, ram_code=3)  # MBC3+TIMER+RAM+BATTERY, 32 KiB
S, M, H, DL, DH = 0x08, 0x09, 0x0A, 0x0B, 0x0C  # RTC register selects


def rtc_gb(cart=None, **kw) -> GameBoy:
    gb = GameBoy(make_rom(**(cart or RTC_CART)), check_header=False, **kw)
    gb.write_memory(0x0000, 0x0A)  # RAM and RTC enable
    return gb


def latch(gb: GameBoy, values=(0, 1)) -> None:
    for v in values:
        gb.write_memory(0x6000, v)


def rtc_write(gb: GameBoy, reg: int, v: int) -> None:
    gb.write_memory(0x4000, reg)
    gb.write_memory(0xA000, v)


def rtc_read(gb: GameBoy, regs=(S, M, H, DL, DH)) -> list[int]:
    out = []
    for reg in regs:
        gb.write_memory(0x4000, reg)
        out.append(int(gb.read_memory(0xA000, 1)[0, 0]))
    return out


def test_rtc_counts_emulated_cycles_only():
    """4,194,304 T-cycles are one second; the host clock plays no part (two consoles agree).
    180 frames from power-on: 65,664 + 179 x 70,224 T-cycles = 3.01 s."""
    gb = rtc_gb(num_envs=2)
    assert rtc_read(gb) == [0, 0, 0, 0, 0]  # nothing latched yet
    gb.run_frames(180)
    assert rtc_read(gb) == [0, 0, 0, 0, 0]  # reads come from the latched copy
    latch(gb)
    gb.write_memory(0x4000, S)
    assert gb.read_memory(0xA000, 1)[:, 0].tolist() == [3, 3]


@pytest.mark.parametrize(("first", "then"), [(0, 1), (0, 3), (4, 3), (0, 2), (1, 1), (1, 0)])
def test_rtc_every_latch_write_latches(first, then):
    """Every write to 6000-7FFF copies the counters, whatever its bit 0 did: on the MBC3 that
    CasualPokePlayer's latch-rtc-test ran on, each single random write relatched (see
    test_mbc3_rtc.py; this replaces the bit-0-rising rule of docboy-test-suite's
    mbc3_rtc_latch_* tests, which the shootout's hardware result contradicts)."""
    gb = rtc_gb()
    latch(gb, (first,))
    gb.run_frames(70)  # > 1 s
    latch(gb, (then,))
    assert rtc_read(gb, (S,)) == [1]


def test_rtc_writes_go_to_the_counters_masked():
    """Writes land in the live counters (seen after the next latch), masked to 6/6/5/8 bits and
    day high's bits 0, 6, 7; the unused bits read 0."""
    gb = rtc_gb()
    rtc_write(gb, DH, 0xFF)  # halts the clock too
    for reg in (S, M, H, DL):
        rtc_write(gb, reg, 0xFF)
    assert rtc_read(gb) == [0, 0, 0, 0, 0]
    latch(gb)
    assert rtc_read(gb) == [0x3F, 0x3F, 0x1F, 0xFF, 0xC1]


def test_rtc_halt_stops_and_disable_does_not():
    """Day high bit 6 stops the clock; disabling cartridge RAM only unmaps the registers."""
    gb = rtc_gb()
    gb.write_memory(0x0000, 0x00)
    gb.run_frames(70)
    gb.write_memory(0x0000, 0x0A)
    latch(gb)
    assert rtc_read(gb, (S,)) == [1]
    rtc_write(gb, DH, 0x40)
    gb.run_frames(140)
    latch(gb, (0, 1))
    assert rtc_read(gb) == [1, 0, 0, 0, 0x40]


def test_rtc_counter_carries_and_out_of_range_values():
    """Seconds 62 count 63, then 0 without a minute carry; 23:59:59 on day 511 rolls over to
    day 0 with the sticky day carry (day high 0x80)."""
    gb = rtc_gb()
    rtc_write(gb, DH, 0x40)
    rtc_write(gb, M, 5)
    rtc_write(gb, S, 62)
    rtc_write(gb, DH, 0x00)
    gb.run_frames(60)  # 1.005 s
    latch(gb)
    assert rtc_read(gb, (S, M)) == [63, 5]
    gb.run_frames(60)
    latch(gb)
    assert rtc_read(gb, (S, M)) == [0, 5]
    rtc_write(gb, DH, 0x41)
    for reg, v in ((H, 23), (M, 59), (DL, 0xFF), (S, 59)):
        rtc_write(gb, reg, v)
    rtc_write(gb, DH, 0x01)
    gb.run_frames(60)
    latch(gb)
    assert rtc_read(gb) == [0, 0, 0, 0, 0x80]


def test_rtc_seconds_write_restarts_the_second():
    """A seconds write resets the sub-second counter (docboy reset_on_write_seconds); a minutes
    write does not (reset_on_write_minutes): 30 + 40 frames straddle a second only without."""
    for reg, expect in ((S, 0), (M, 1)):
        gb = rtc_gb()
        gb.run_frames(30)
        rtc_write(gb, reg, 0)
        gb.run_frames(40)
        latch(gb)
        assert rtc_read(gb, (S,)) == [expect], reg


def test_rtc_invalid_selects_and_no_crystal():
    """With the clock, selects 04-07 and 0D-0F map nothing (read FF, writes dropped:
    CasualPokePlayer's rtc-invalid-banks-test); without it 04-07 mirror the RAM banks (mod the
    RAM size). An MBC3 without TIMER keeps the registers but its clock never ticks."""
    gb = rtc_gb()
    rtc_write(gb, 0x00, 0x5A)
    for reg in (0x04, 0x07, 0x0D, 0x0E, 0x0F):
        rtc_write(gb, reg, 0x12)
        assert rtc_read(gb, (reg,)) == [0xFF]
    assert rtc_read(gb, (0x00,)) == [0x5A]
    gb = rtc_gb(dict(cart_type=0x13, rom_size_code=2, ram_code=3))
    rtc_write(gb, 0x00, 0x5A)
    assert rtc_read(gb, (0x04,)) == [0x5A]
    gb.run_frames(70)
    latch(gb)
    assert rtc_read(gb, (S,)) == [0]


def test_rtc_advances_within_a_frame():
    """The clock is caught up at the exact M-cycle of each latch: a program that zeroes the
    seconds and then latches and reads them in an 80 T-cycle loop sees the second end after
    4,194,304 / 80 = 52,429 iterations (a clock advanced at frame ends would be up to 878 off)."""
    code = ld_a(0x0A) + st_a(0x0000) + ld_a(S) + st_a(0x4000) + XOR_A + st_a(0xA000)
    code += b"\x01\x00\x00"  # ld bc,0
    code += XOR_A + st_a(0x6000) + b"\x3c" + st_a(0x6000)  # loop: latch (0, 1)
    code += b"\xfa\x00\xa0\x03\xa7\x28\xf1"  # ld a,(A000); inc bc; and a; jr z,loop
    code += b"\x78" + st_a(0xC001) + b"\x79" + st_a(0xC000)  # C000 = BC
    gb = run_rom(code, frames=80, **RTC_CART)
    lo, hi = gb.read_memory(0xC000, 2)[0].tolist()
    assert abs((hi << 8 | lo) - 52429) <= 1


def test_rtc_in_battery_file_and_savestate():
    """``battery_ram`` appends the 48-byte BGB/VBA-M trailer (live then latched S, M, H, DL, DH
    as u32, a u64 time stamp); loading it sets the clock. Savestates keep the clock exactly,
    fraction of a second included."""
    import struct

    gb = rtc_gb()
    rtc_write(gb, DH, 0x40)
    for reg, v in ((S, 7), (M, 8), (H, 9), (DL, 10)):
        rtc_write(gb, reg, v)
    latch(gb)
    rtc_write(gb, DH, 0x01)
    gb.write_memory(0x4000, 0x00)
    gb.write_memory(0xA000, 0x99)
    sav = gb.battery_ram(0, rtc_timestamp=1234)
    assert len(sav) == 0x8000 + 48 and sav[0] == 0x99
    assert struct.unpack("<10IQ", sav[0x8000:]) == (7, 8, 9, 10, 1, 7, 8, 9, 10, 0x40, 1234)
    gb2 = rtc_gb()
    gb2.load_battery_ram(sav)
    assert rtc_read(gb2) == [7, 8, 9, 10, 0x40]  # latched copy
    latch(gb2)
    assert rtc_read(gb2) == [7, 8, 9, 10, 1]
    gb2.load_battery_ram(sav[:-4])  # 44-byte variant (u32 time stamp)
    with pytest.raises(ValueError, match="battery RAM must be"):
        gb2.load_battery_ram(sav[:-1])
    gb3 = rtc_gb(dict(cart_type=0x0F, rom_size_code=1, ram_code=0))  # clock, no RAM
    assert len(gb3.battery_ram()) == 48
    # savestate: the fraction of the current second survives
    gb4 = rtc_gb()
    gb4.run_frames(30)
    snap = gb4.save_state()
    gb4.run_frames(40)
    latch(gb4)
    first = rtc_read(gb4, (S,))
    gb4.load_state(snap)
    gb4.run_frames(40)
    latch(gb4)
    assert rtc_read(gb4, (S,)) == first == [1]


# ------------------------------------------------------------------------------------ MBC1 multicart
def multicart_rom(logo: bool) -> bytes:
    from torchrl_dreamer.emulator.cartridge import NINTENDO_LOGO

    rom = bytearray(make_rom(cart_type=0x01, rom_size_code=5))  # 1 MiB = 8 Mbit, 64 banks
    if logo:
        rom[0x40104:0x40134] = NINTENDO_LOGO
    return bytes(rom)


def test_mbc1_multicart_detected_and_wired():
    """An 8 Mbit MBC1 with a second game header at bank 10 is a multicart: BANK1 bit 4 is not
    wired (its zero test still sees 5 bits: 10 selects bank 0 of the game) and BANK2 picks the
    16-bank game, also at 0000-3FFF in mode 1 (mooneye emulator-only/mbc1/multicart_rom_8Mb)."""
    from torchrl_dreamer.emulator.registers import MBC_1, MBC_1M

    plain = GameBoy(multicart_rom(False), check_header=False)
    gb = GameBoy(multicart_rom(True), check_header=False)
    assert (plain.cartridge.mbc, gb.cartridge.mbc) == (MBC_1, MBC_1M)

    def bank(g, addr=0x4000):
        lo, hi = g.read_memory(addr, 2)[0].tolist()
        return lo | hi << 8

    for b1, b2, want, want_plain in ((0x00, 0, 1, 1), (0x10, 0, 0, 0x10), (0x12, 1, 0x12, 0x32),
                                     (0x1F, 3, 0x3F, 0x3F), (0x05, 2, 0x25, 0x05)):  # plain: 0x45 & 63
        for g in (gb, plain):
            g.write_memory(0x2000, b1)
            g.write_memory(0x4000, b2)
        assert bank(gb) == want
        assert bank(plain) == want_plain
    gb.write_memory(0x6000, 1)  # mode 1: 0000-3FFF is the game's bank 0
    gb.write_memory(0x4000, 1)
    assert bank(gb, 0x0000) == 0x10


# ------------------------------------------------------------------------------------ STOP
def test_stop_blanks_the_lcd_until_a_button_wakes_it():
    """DMG STOP with no button held: DIV resets and the system clock stops (DIV stands still),
    the LCD goes dark (framebuffer and packed2 blank, no VBlank interrupts) until a button press
    wakes the CPU; then the picture comes back. The ROM paints the whole screen shade 3
    (BGP = FF), waits 5 VBlanks, clears IF, STOPs, then stores DIV and a flag."""
    from torchrl_dreamer.emulator import BUTTON_A

    code = b"\xf3" + ld_a(0xFF) + ldh_w(0x47) + ld_a(0x01) + ldh_w(R_IE) + b"\x06\x05"
    code += XOR_A + ldh_w(R_IF) + b"\x76\x05\x20\xf9"  # wait: IF = 0; halt; dec b; jr nz,wait
    code += XOR_A + ldh_w(R_IF) + b"\x10\x00"  # IF = 0; stop
    code += ldh_r(R_DIV) + st_a(0xC001) + ld_a(1) + st_a(0xC000)
    gb = GameBoy(make_rom(code + b"\x18\xfe"), check_header=False, framebuffer=True)
    gb.run_frames(3)
    assert (gb.framebuffer == 3).all() and (gb.packed2 == 0xFF).all()
    gb.run_frames(10)
    assert gb.read_memory(0xC000, 1)[0, 0] == 0  # still stopped
    assert (gb.framebuffer == 0).all() and (gb.packed2 == 0).all()
    assert int(gb.read_memory(0xFF0F, 1)[0, 0]) & 0x01 == 0  # no VBlank while stopped
    gb.run_frames(2, buttons=BUTTON_A)
    assert gb.read_memory(0xC000, 2)[0].tolist() == [1, 0]  # woken; DIV 0: it stood still
    gb.run_frames(2)
    assert (gb.framebuffer == 3).all()
