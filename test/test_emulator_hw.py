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
