"""Idle-loop fast-forward: polling LY / STAT gives bit-identical consoles with and without it."""

from __future__ import annotations

import pytest
import torch
from test_emulator_romkit import make_rom

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS


def _poll(reg: int, alu: int, k: int, jr: int) -> bytes:
    """``ldh a,(reg); cp|and k; jr cc,-6``: a 6-byte busy-wait loop."""
    return bytes([0xF0, reg, alu, k, jr, 0xFA])


# main program at 0x150: timer + VBlank IRQs on, then per frame wait on LY / STAT in several
# shapes and log DIV and TIMA at each exit into WRAM (C100..), so any exit-cycle drift shows.
_LOG = bytes([0xF0, 0x04, 0x22, 0xF0, 0x05, 0x22])  # ldh a,(DIV); ld (hl+),a; same for TIMA
_SETUP = bytes([0xF3, 0x3E, 0x05, 0xE0, 0x07, 0x3E, 0x05, 0xE0, 0xFF, 0x21, 0x00, 0xC1, 0xFB])
_BODY = (
    _poll(0x44, 0xFE, 0x90, 0x20) + _LOG      # wait LY == 144 (cp; jr nz)
    + _poll(0x44, 0xFE, 0x10, 0x30) + _LOG    # wait LY < 16 (cp; jr nc)
    + _poll(0x44, 0xFE, 0x40, 0x38) + _LOG    # wait LY >= 64 (cp; jr c)
    + _poll(0x41, 0xE6, 0x03, 0x20) + _LOG    # wait STAT mode 0 (and; jr nz)
    + _poll(0x41, 0xE6, 0x03, 0x28) + _LOG    # wait while mode 0 (and; jr z)
    + _poll(0x41, 0xE6, 0x04, 0x28) + _LOG    # wait LY == LYC (and; jr z)
)
_BODY = _BODY + bytes([0x18, (-(len(_BODY) + 2)) & 0xFF])  # jr back to the first wait
# IRQ handlers count into C001 (VBlank) / C002 (timer) without touching HL
_HANDLER_V = bytes([0xF5, 0xFA, 0x01, 0xC0, 0x3C, 0xEA, 0x01, 0xC0, 0xF1, 0xD9])
_HANDLER_T = bytes([0xF5, 0xFA, 0x02, 0xC0, 0x3C, 0xEA, 0x02, 0xC0, 0xF1, 0xD9])
ROM = make_rom(_SETUP + _BODY, vectors={
    0x40: b"\xc3\x60\x00", 0x50: b"\xc3\x70\x00", 0x60: _HANDLER_V, 0x70: _HANDLER_T})


def _run(idle_skip: bool, frames: int) -> GameBoy:
    gb = GameBoy(ROM, num_envs=2, framebuffer=True, idle_skip=idle_skip)
    gb.write_memory(0xFF45, 100)  # LYC
    gb.run_frames(frames)
    return gb


def _assert_same_consoles(slow: GameBoy, fast: GameBoy) -> None:
    """Every state array, register and picture equal (the skip counter column aside)."""
    cyc = FIELDS["CYCLES"]
    for name, t in slow.state_tensors().items():
        u = fast.state_tensors()[name]
        if name == "st":
            t, u = t.clone(), u.clone()
            t[:, cyc] = 0
            u[:, cyc] = 0
        assert torch.equal(t, u), name
    for k, v in slow.registers().items():
        assert torch.equal(v, fast.registers()[k]), k
    assert torch.equal(slow.framebuffer, fast.framebuffer)
    assert torch.equal(slow.packed2, fast.packed2)


def _fast_slow_count(rom: bytes, run) -> tuple[GameBoy, GameBoy, float]:
    """``run(gb)`` on three consoles of ``rom``: fast-forward on, off, and the instruction
    counting variant. Returns (fast, slow, executed): the instructions the fast console ran
    itself (all the count variant ran, less what the fast one skipped)."""
    from torchrl_dreamer.emulator.codegen import load_kernel_module

    runs = {}
    for name, kw in (("fast", {"idle_skip": True}), ("slow", {"idle_skip": False}),
                     ("count", {})):
        gb = GameBoy(rom, framebuffer=True, **kw)
        if name == "count":
            gb._kmod = load_kernel_module("cpu", count=True)
        run(gb)
        runs[name] = gb
    cyc = FIELDS["CYCLES"]
    total = int(runs["count"].state_tensors()["st"][0, cyc])
    return runs["fast"], runs["slow"], total - int(runs["fast"].state_tensors()["st"][0, cyc])

def test_idle_skip_is_bit_identical_and_skips():
    torch.set_num_threads(1)
    fast, slow = _run(True, 12), _run(False, 12)
    cyc = FIELDS["CYCLES"]
    skipped = fast.state_tensors()["st"][:, cyc].clone()
    assert (skipped > 100).all()  # whole loop iterations were fast-forwarded
    assert (slow.state_tensors()["st"][:, cyc] == 0).all()
    _assert_same_consoles(slow, fast)
    log = slow.read_memory(0xC100, 144)
    assert torch.equal(log, fast.read_memory(0xC100, 144))
    assert int(log[0].count_nonzero()) > 40  # the program ran and logged its exits
    assert int(slow.read_memory(0xC001, 1)[0, 0]) >= 10  # VBlank IRQs were taken
    assert int(slow.read_memory(0xC002, 1)[0, 0]) > 0  # timer IRQs were taken


# ------------------------------------------------------------------------------ RAM-byte polls
# Main program: wait in several RAM-poll shapes for flags that only the VBlank / timer handlers
# set, clear them, and log DIV and TIMA at each exit (C100..). Handlers save AF/HL.
_LOG_DE = bytes([0xF0, 0x04, 0x12, 0x13, 0xF0, 0x05, 0x12, 0x13])  # log via DE (HL/BC in use)
_RAM_SETUP = bytes([
    0xF3, 0x3E, 0x05, 0xE0, 0x07,  # di; TAC = 05 (TIMA overflows every 4096 T-cycles)
    0x3E, 0x05, 0xE0, 0xFF,  # IE = VBlank | timer
    0xAF, 0xEA, 0x10, 0xC0, 0xEA, 0x11, 0xC0, 0xE0, 0x90, 0xE0, 0x92,  # flags = 0
    0x11, 0x00, 0xC1, 0xFB,  # de = C100 (log); ei
])
_RAM_BODY = (
    bytes([0xFA, 0x10, 0xC0, 0xA7, 0x28, 0xFA]) + bytes([0xAF, 0xEA, 0x10, 0xC0])  # (a16); and a; jr z
    + _LOG_DE
    + bytes([0xF0, 0x90, 0xFE, 0x01, 0x20, 0xFA, 0xAF, 0xE0, 0x90])  # ldh; cp 1; jr nz (timer flag)
    + _LOG_DE
    + bytes([0x21, 0x10, 0xC0, 0x7E, 0xB7, 0x28, 0xFC, 0x36, 0x00])  # (hl); or a; jr z; (hl) = 0
    + _LOG_DE
    + bytes([0xFA, 0x11, 0xC0, 0xFE, 0x03, 0x38, 0xF9, 0xAF, 0xEA, 0x11, 0xC0])  # cp 3; jr c (>= 3 VBlanks)
    + _LOG_DE
    + bytes([0x3E, 0x04, 0xE0, 0x92, 0x01, 0x92, 0xFF])  # FF92 = 4 (timer handler counts down); bc = FF92
    + bytes([0x0A, 0xFE, 0x01, 0x30, 0xFB])  # ld a,(bc); cp 1; jr nc (while >= 1)
    + _LOG_DE
    + bytes([0xF0, 0x90, 0xE6, 0x01, 0x28, 0xFA, 0xAF, 0xE0, 0x90])  # ldh; and 1; jr z
    + _LOG_DE
    + bytes([0x7A, 0xFE, 0xC2, 0x38, 0x03, 0x11, 0x00, 0xC1])  # log wraps from C200 to C100
)
_RAM_BODY = _RAM_BODY + bytes([0x18, (-(len(_RAM_BODY) + 2)) & 0xFF])
# VBlank: C010 = 1, C011 += 1, C001 += 1. Timer: FF90 = 1, FF92 -= 1 if nonzero, C002 += 1.
_RAM_HANDLER_V = bytes([0xF5, 0xE5, 0x21, 0x10, 0xC0, 0x36, 0x01, 0x2C, 0x34, 0x21, 0x01, 0xC0,
                        0x34, 0xE1, 0xF1, 0xD9])
_RAM_HANDLER_T = bytes([0xF5, 0x3E, 0x01, 0xE0, 0x90, 0xF0, 0x92, 0xB7, 0x28, 0x03, 0x3D, 0xE0,
                        0x92, 0xFA, 0x02, 0xC0, 0x3C, 0xEA, 0x02, 0xC0, 0xF1, 0xD9])
RAM_ROM = make_rom(_RAM_SETUP + _RAM_BODY, vectors={
    0x40: b"\xc3\x60\x00", 0x50: b"\xc3\x80\x00", 0x60: _RAM_HANDLER_V, 0x80: _RAM_HANDLER_T})


def test_ram_poll_skip_is_bit_identical_and_skips():
    torch.set_num_threads(1)
    runs = {}
    for skip in (True, False):
        gb = GameBoy(RAM_ROM, num_envs=2, framebuffer=True, idle_skip=skip)
        gb.write_memory(0xFF92, torch.tensor([[0], [2]], dtype=torch.uint8))  # envs start apart
        for k in range(6):  # several launches: state carried across kernel calls
            gb.run_frames(1 + k % 3)
        runs[skip] = gb
    fast, slow = runs[True], runs[False]
    cyc = FIELDS["CYCLES"]
    assert (fast.state_tensors()["st"][:, cyc] > 200).all()  # poll iterations were skipped
    assert (slow.state_tensors()["st"][:, cyc] == 0).all()
    _assert_same_consoles(slow, fast)
    log = slow.read_memory(0xC100, 256)
    assert torch.equal(log, fast.read_memory(0xC100, 256))
    assert int(slow.read_memory(0xC001, 1)[0, 0]) >= 10  # VBlank IRQs were taken
    assert int(slow.read_memory(0xC002, 1)[0, 0]) >= 20  # timer IRQs were taken
    # 6 exits of 2 bytes per pass: >= 36 logged bytes = every wait shape exited >= 3 times
    assert int(log[0].count_nonzero()) >= 36


def test_ram_poll_skip_leaves_other_loops_alone():
    """A WRAM poll that never ends (IME=0) is skipped up to every event and stays identical; the
    same loop reading VRAM (which the PPU side can make read differently) is not skipped."""
    torch.set_num_threads(1)
    # (the exit path ``INC B; JR -3`` is no loop the fast-forward knows: the VRAM write may be
    # dropped in mode 3 and VRAM reads FF then, which leaves the poll)
    wram = bytes([0xF3, 0xAF, 0xEA, 0x10, 0xC0, 0xFA, 0x10, 0xC0, 0xA7, 0x28, 0xFA, 0x04, 0x18, 0xFD])
    vram = bytes([0xF3, 0xAF, 0xEA, 0x10, 0x80, 0xFA, 0x10, 0x80, 0xA7, 0x28, 0xFA, 0x04, 0x18, 0xFD])
    cyc = FIELDS["CYCLES"]
    for code, skips in ((wram, True), (vram, False)):
        fast = GameBoy(make_rom(code), framebuffer=True, idle_skip=True)
        slow = GameBoy(make_rom(code), framebuffer=True, idle_skip=False)
        fast.run_frames(3)
        slow.run_frames(3)
        assert bool(fast.state_tensors()["st"][0, cyc] > 1000) == skips
        _assert_same_consoles(slow, fast)


# ------------------------------------------------------------------------------ general loops
# idle.py's families beyond the shapes above: countdown delay loops (8- and 16-bit, NOP / JR +0
# fillers, JR NZ / JP NZ / exit + JR back, RET Z), polls with a register operand, BIT b,(HL),
# BIT b,A, JP cc, JOYP, and an OAM-DMA wait in HRAM. Each wait logs DIV and TIMA at its exit.
class _Code:
    """A tiny assembler: bytes at 0x150 onwards, with backward jumps to named heads."""

    def __init__(self):
        self.b = bytearray()
        self.heads = {}

    def __call__(self, *xs: int) -> _Code:
        self.b += bytes(xs)
        return self

    def head(self, name: str) -> _Code:
        self.heads[name] = len(self.b)
        return self

    def jr(self, op: int, name: str) -> _Code:
        return self(op, (self.heads[name] - (len(self.b) + 2)) & 0xFF)

    def jp(self, op: int, name: str) -> _Code:
        addr = 0x150 + self.heads[name]
        return self(op, addr & 0xFF, addr >> 8)


def _general_rom() -> bytes:
    k = _Code()
    k(*_RAM_SETUP)
    k.head("top")
    k(0x06, 200).head("c8")(0x05).jr(0x20, "c8")(*_LOG_DE)  # ld b,200; dec b; jr nz
    k(0x0E, 60).head("c8f")(0x18, 0x00, 0x00, 0x0D, 0x00).jp(0xC2, "c8f")(*_LOG_DE)  # fillers, jp nz
    k(0x01, 0xB8, 0x0B).head("c16")(0x0B, 0x78, 0xB1, 0x28, 0x03, 0x00).jr(0x18, "c16")  # exit jr z
    k(*_LOG_DE)
    k(0x21, 0xD0, 0x07).head("c16n")(0x2B, 0x7D, 0xB4).jr(0x20, "c16n")(*_LOG_DE)  # dec hl; ld a,l; or h
    k(0xD5, 0xCD)  # push de; call the RET Z countdown (placed after the main loop)
    call_at = len(k.b)
    k(0x00, 0x00, 0xD1)(*_LOG_DE)  # (address patched below); pop de
    k(0x06, 0x40).head("lyb")(0xF0, 0x44, 0xB8).jr(0x20, "lyb")(*_LOG_DE)  # ldh a,(LY); cp b; jr nz
    k.head("lyjp")(0xF0, 0x44, 0xFE, 0x90).jp(0xDA, "lyjp")(*_LOG_DE)  # cp 144; jp c
    k(0x21, 0x41, 0xFF).head("bhl")(0xCB, 0x4E).jr(0x20, "bhl")(*_LOG_DE)  # bit 1,(hl); jr nz
    k.head("ba")(0xF0, 0x41, 0xCB, 0x4F).jr(0x28, "ba")(*_LOG_DE)  # ldh a,(STAT); bit 1,a; jr z
    k(0x0E, 0x01).head("andc")(0xFA, 0x10, 0xC0, 0xA1).jr(0x28, "andc")  # ld a,(C010); and c; jr z
    k(0xAF, 0xEA, 0x10, 0xC0)(*_LOG_DE)
    k(0x3E, 0x20, 0xE0, 0x00).head("joy")(0xF0, 0x00, 0xE6, 0x01).jr(0x20, "joy")(*_LOG_DE)  # RIGHT
    k(0xCD, 0x80, 0xFF)(*_LOG_DE)  # call the OAM DMA routine in HRAM
    k(0x7A, 0xFE, 0xC2, 0x38, 0x03, 0x11, 0x00, 0xC1)  # log wraps from C200 to C100
    k.jp(0xC3, "top")
    sub = 0x150 + len(k.b)
    k.b[call_at:call_at + 2] = bytes([sub & 0xFF, sub >> 8])
    k(0x11, 0x20, 0x03).head("ret")(0x1B, 0x7B, 0xB2, 0xC8, 0x00, 0x00).jr(0x18, "ret")  # ret z
    return make_rom(bytes(k.b), vectors={
        0x40: b"\xc3\x60\x00", 0x50: b"\xc3\x80\x00", 0x60: _RAM_HANDLER_V, 0x80: _RAM_HANDLER_T})


# ld a,$C0; ldh (DMA),a; ld a,40; .w: dec a; jr nz,.w; ret (the usual OAM DMA routine)
_DMA_ROUTINE = bytes([0x3E, 0xC0, 0xE0, 0x46, 0x3E, 0x28, 0x3D, 0x20, 0xFD, 0xC9])


def test_general_loops_are_bit_identical_and_skip():
    torch.set_num_threads(1)
    rom = _general_rom()
    runs = {}
    for skip in (True, False):
        gb = GameBoy(rom, num_envs=2, framebuffer=True, idle_skip=skip)
        gb.write_memory(0xFF80, torch.tensor([list(_DMA_ROUTINE)] * 2, dtype=torch.uint8))
        gb.write_memory(0xFF92, torch.tensor([[0], [2]], dtype=torch.uint8))
        for k in range(16):  # RIGHT on every third launch releases the JOYP wait
            gb.run_frames(1 + k % 3, buttons=16 if k % 3 == 2 else 0)
        runs[skip] = gb
    fast, slow = runs[True], runs[False]
    cyc = FIELDS["CYCLES"]
    assert (fast.state_tensors()["st"][:, cyc] > 5000).all()
    assert (slow.state_tensors()["st"][:, cyc] == 0).all()
    _assert_same_consoles(slow, fast)
    log = slow.read_memory(0xC100, 256)
    assert torch.equal(log, fast.read_memory(0xC100, 256))
    # 13 exits of 2 bytes per pass: every wait shape exited at least twice
    assert int(log[0].count_nonzero()) >= 52


def test_spin_loop_is_bit_identical_and_skips():
    """``JR @`` with the VBlank and timer handlers doing the work: skipped up to every event."""
    torch.set_num_threads(1)
    code = bytes(_RAM_SETUP) + bytes([0x18, 0xFE])
    vec = {0x40: b"\xc3\x60\x00", 0x50: b"\xc3\x80\x00", 0x60: _RAM_HANDLER_V,
           0x80: _RAM_HANDLER_T}
    fast = GameBoy(make_rom(code, vectors=vec), framebuffer=True, idle_skip=True)
    slow = GameBoy(make_rom(code, vectors=vec), framebuffer=True, idle_skip=False)
    for gb in (fast, slow):
        for k in range(4):
            gb.run_frames(1 + k)
    assert int(fast.state_tensors()["st"][0, FIELDS["CYCLES"]]) > 10000
    _assert_same_consoles(slow, fast)
    assert int(slow.read_memory(0xC001, 1)[0, 0]) >= 9


def test_ly_stat_poll_skips_through_values_that_keep_waiting():
    """A wait for LY 144 runs through 144 LY values and a wait for mode 0/1 through modes 2 and
    3: the fast-forward goes on through each following value that keeps the branch taken (up
    to the next event), so a frame executes a handful of instructions instead of >= 3 per line,
    and stays bit-identical. Fails if the skip stops at every LY / STAT change."""
    torch.set_num_threads(1)
    code = bytes([
        0xF3, 0x06, 0x90, 0x11, 0x00, 0xC1, 0x21, 0x41, 0xFF,  # di; b = 144; de = C100; hl = STAT
        0xF0, 0x44, 0xB8, 0x20, 0xFB,  # wait: ldh a,(LY); cp b; jr nz,wait (LY == 144)
        0xF0, 0x04, 0x12, 0x1C,  # ldh a,(DIV); ld (de),a; inc e (log the exit cycle)
        0xF0, 0x44, 0xB8, 0x28, 0xFB,  # ldh a,(LY); cp b; jr z (until LY 145)
        0xF0, 0x44, 0xA7, 0x20, 0xFB,  # ldh a,(LY); and a; jr nz (until LY 0)
        0xCB, 0x4E, 0x28, 0xFC,  # bit 1,(hl); jr z (until mode 2 or 3)
        0xCB, 0x4E, 0x20, 0xFC,  # bit 1,(hl); jr nz (through modes 2 and 3: until mode 0)
        0xF0, 0x04, 0x12, 0x1C,  # log
        0x18, 0xDC,  # jr back to the LY == 144 wait
    ])
    def run(gb: GameBoy) -> None:
        for k in range(6):
            gb.run_frames(5 + k, render=False)

    fast, slow, executed = _fast_slow_count(make_rom(code), run)
    _assert_same_consoles(slow, fast)
    log = slow.read_memory(0xC100, 256)
    assert int(log[0].count_nonzero()) > 40  # both waits exited every frame
    frames = sum(5 + k for k in range(6))
    total = executed + int(fast.state_tensors()["st"][0, FIELDS["CYCLES"]])
    assert total > 3 * 144 * frames  # without skipping: >= one 3-instruction iteration a line
    assert executed < 40 * frames


def test_ly_poll_runs_its_last_iteration_in_the_fast_forward():
    """Waits for LY 145 ... 152 (each exits mid-VBlank, with no event in between): the
    fast-forward also runs the iteration that reads the exit value and hands back the PC after
    the loop, so each wait executes only its first iteration (3 instructions, not 6), and the
    consoles stay bit-identical. Fails if the last iteration is left to the kernel."""
    torch.set_num_threads(1)
    waits = bytes([0xF0, 0x44, 0xFE, 0x90, 0x20, 0xFA])  # ldh a,(LY); cp 144; jr nz
    for ly in range(145, 153):
        waits += bytes([0xF0, 0x44, 0xFE, ly, 0x20, 0xFA])
    body = waits + bytes([0xF0, 0x04, 0x12, 0x1C]) + bytes(24)  # log DIV; NOPs (a long jr back)
    code = bytes([0xF3, 0x11, 0x00, 0xC1]) + body + bytes([0x18, (-(len(body) + 2)) & 0xFF])
    frames = 20
    fast, slow, executed = _fast_slow_count(make_rom(code),
                                            lambda gb: gb.run_frames(frames, render=False))
    _assert_same_consoles(slow, fast)
    assert int(slow.read_memory(0xC100, 32)[0].count_nonzero()) >= frames - 2
    executed = executed / frames
    # per frame: 29 for the log, NOPs and jr, ~10 for the LY 144 wait (its exit follows the
    # VBlank event), 3 for each of the 8 others; 6 each would give ~87
    assert executed < 29 + 10 + 8 * 3 + 6, executed


def test_unknown_outer_loop_to_a_poll_head_keeps_the_poll_skipped():
    """``w: ldh a,(LY); cp 144; jr nz,w; (log); jr w``: the short outer loop back to the poll's
    head is not a loop the fast-forward knows and is rejected, which must not switch off the
    poll's own fast-forward (the rejection hint is keyed by the closing branch, not the head).
    Fails with ~5,900 instructions a frame when the hint blocks the head."""
    torch.set_num_threads(1)
    code = bytes([0xF3, 0x11, 0x00, 0xC1,        # di; de = C100
                  0xF0, 0x44, 0xFE, 0x90, 0x20, 0xFA,  # w: ldh a,(LY); cp 144; jr nz,w
                  0xF0, 0x04, 0x12, 0x1C,        # ldh a,(DIV); ld (de),a; inc e
                  0x18, 0xF4])                   # jr w
    frames = 10
    fast, slow, executed = _fast_slow_count(make_rom(code),
                                            lambda gb: gb.run_frames(frames, render=False))
    _assert_same_consoles(slow, fast)
    assert int(slow.read_memory(0xC100, 16)[0].count_nonzero()) >= frames - 2
    assert executed / frames < 200, executed / frames


def test_poll_through_ldh_a_c_and_test_chains_is_skipped():
    """Polls of other shapes: ``ld a,(c)`` (LDH A,(C)) with ``cp 144``, and STAT waits with two
    tests (``and 3; cp 1``: into and out of VBlank). Bit-identical with the fast-forward off,
    and skipped: ~50 instructions a frame instead of ~7,000."""
    torch.set_num_threads(1)
    body = bytes([
        0x0E, 0x44,  # ld c,LY
        0xF2, 0xFE, 0x90, 0x20, 0xFB,  # w1: ld a,(c); cp 144; jr nz,w1
        0xF0, 0x04, 0x12, 0x1C,  # ldh a,(DIV); ld (de),a; inc e
        0xF0, 0x41, 0xE6, 0x03, 0xFE, 0x01, 0x28, 0xF8,  # w2: ldh a,(STAT); and 3; cp 1; jr z
        0xF0, 0x41, 0xE6, 0x03, 0xFE, 0x01, 0x20, 0xF8,  # w3: the same, jr nz (until VBlank)
        0xF0, 0x04, 0x12, 0x1C,  # log
    ]) + bytes(24)  # NOPs: the jump back is too long to ask about
    code = bytes([0xF3, 0x11, 0x00, 0xC1]) + body + bytes([0x18, (-(len(body) + 2)) & 0xFF])
    frames = 10
    fast, slow, executed = _fast_slow_count(make_rom(code),
                                            lambda gb: gb.run_frames(frames, render=False))
    _assert_same_consoles(slow, fast)
    assert int(slow.read_memory(0xC100, 32)[0].count_nonzero()) >= 2 * frames - 4
    assert executed / frames < 200, executed / frames


def test_hram_dma_wait_skipped_while_the_dma_runs():
    """The HRAM wait of the usual OAM-DMA routine (``dec a; jr nz``) reads only registers and
    fetches its opcodes from HRAM, which no DMA conflicts with: it is fast-forwarded while the
    DMA runs, and what follows sees what it would have seen had the loop run: a read of the
    DMA's bus (WRAM) gets the byte the DMA reads then and an OAM read FF while the transfer
    runs; every state column, OAM and the picture stay identical. Waits
    from 3 to 60 iterations end before, at and after the transfer's 160 M-cycles."""
    torch.set_num_threads(1)
    code = bytes([0xF3, 0xCD, 0x80, 0xFF, 0x04, 0x18, 0xFD])  # di; call $FF80; .x: inc b; jr .x
    cyc = FIELDS["CYCLES"]
    pattern = torch.tensor([(7 * k + 3) & 0xFF for k in range(256)], dtype=torch.uint8)
    for n in (3, 10, 30, 39, 40, 41, 45, 60):
        # ld a,$C0; ldh (DMA),a; ld a,n; .w: dec a; jr nz,.w; ld a,($C010); ldh ($F0),a;
        # ld a,($FE00); ldh ($F1),a; ret
        routine = bytes([0x3E, 0xC0, 0xE0, 0x46, 0x3E, n, 0x3D, 0x20, 0xFD, 0xFA, 0x10, 0xC0,
                         0xE0, 0xF0, 0xFA, 0x00, 0xFE, 0xE0, 0xF1, 0xC9])
        runs = {}
        for skip in (True, False):
            gb = GameBoy(make_rom(code), framebuffer=True, idle_skip=skip)
            gb.write_memory(0xC000, pattern)
            gb.write_memory(0xFF80, torch.tensor(list(routine), dtype=torch.uint8))
            gb.run_frames(2)
            runs[skip] = gb
        fast, slow = runs[True], runs[False]
        assert int(fast.state_tensors()["st"][0, cyc]) > 0, n  # the wait was skipped
        _assert_same_consoles(slow, fast)
        assert torch.equal(slow.read_memory(0xFE00, 160), fast.read_memory(0xFE00, 160))
        if n <= 30:  # the transfer still runs at the reads: OAM reads FF, WRAM the DMA's byte
            assert int(slow.read_memory(0xFFF1, 1)[0, 0]) == 0xFF, n
            assert int(slow.read_memory(0xFFF0, 1)[0, 0]) != int(pattern[0x10]), n


def test_no_dma_time_poll_skip():
    """A poll loop run from HRAM (here on an HRAM byte) that starts with an OAM DMA: every state
    column and the picture are the same with and without the fast-forward, which takes the
    loop over once the transfer is done (``idle_loop`` declines polls during a DMA)."""
    torch.set_num_threads(1)
    code = bytes([0xF3, 0xCD, 0x80, 0xFF, 0x04, 0x18, 0xFD])
    # ld a,$C0; ldh (DMA),a; .w: ldh a,($F2); cp $00; jr z,.w (forever: $F2 stays 0)
    routine = bytes([0x3E, 0xC0, 0xE0, 0x46, 0xF0, 0xF2, 0xFE, 0x00, 0x28, 0xFA])
    runs = {}
    for skip in (True, False):
        gb = GameBoy(make_rom(code), framebuffer=True, idle_skip=skip)
        gb.write_memory(0xFF80, torch.tensor(list(routine), dtype=torch.uint8))
        gb.run_frames(2)
        runs[skip] = gb
    _assert_same_consoles(runs[False], runs[True])
    assert int(runs[True].state_tensors()["st"][0, FIELDS["CYCLES"]]) > 0  # after the DMA


def test_no_skip_from_a_branch_that_ended_the_frame():
    """A long 16-bit delay loop (``dec bc; ld a,b; or c; ret z; nop; jr``) run one frame per
    launch: a frame end that falls in the closing JR's M-cycles must stop the launch there, not
    after a fast-forward (the frame end phase moves through the loop from frame to frame)."""
    torch.set_num_threads(1)
    code = bytes([0xF3, 0x01, 0x00, 0x00, 0x0B, 0x78, 0xB1, 0xC8, 0x00, 0x18, 0xF9])
    fast = GameBoy(make_rom(code), framebuffer=True, idle_skip=True)
    slow = GameBoy(make_rom(code), framebuffer=True, idle_skip=False)
    for _ in range(30):
        for gb in (fast, slow):
            gb.run_frames(1)
        _assert_same_consoles(slow, fast)
    assert int(fast.state_tensors()["st"][0, FIELDS["CYCLES"]]) > 100000


# ------------------------------------------------------------------------------ shared games
_GAMEPLAY = (1, 8, 16, 32, 64, 128, 2, 0)  # A START RIGHT LEFT UP DOWN B none


def _shared_games() -> list:
    from torchrl_dreamer._roms import roms_dir

    root = roms_dir() / "games"
    found = sorted(p for d in root.glob("*") for p in (*d.glob("*.gb"), *d.glob("*.gbc")))
    return found or [pytest.param(None, marks=pytest.mark.skip(reason="no shared games"))]


@pytest.mark.parametrize("rom", _shared_games(), ids=lambda p: getattr(p, "stem", "none"))
def test_shared_game_identical_with_and_without_fast_forward(rom):
    """Every shared game over 3,000 frames of gameplay input: registers, memory, every state
    column and the observation equal after every 40-frame step with and without the skip."""
    torch.set_num_threads(1)
    fast = GameBoy(rom, check_header=False, framebuffer=True, idle_skip=True)
    slow = GameBoy(rom, check_header=False, framebuffer=True, idle_skip=False)
    for gb in (fast, slow):
        gb.run_frames(300)
    for k in range(67):
        for gb in (fast, slow):
            gb.step(_GAMEPLAY[k % 8], frames=40, press_frames=8)
        if k % 8 == 7 or k == 66:
            _assert_same_consoles(slow, fast)
        else:
            assert torch.equal(slow.packed2, fast.packed2), k


def test_ly_stat_reads_without_catch_up_equal_caught_up_reads():
    """IO reads of LY/STAT derive the value from the dot counter (``ppu.ppu_poll``) instead of
    catching the console up: at many points of a frame, with cycles pending (``CLK`` > 0), they
    read what they read after a catch-up (forced by rewriting TMA, which syncs first; an SCY
    write is a plain store outside mode 3, ``ppu.lcd_write_is_plain``)."""
    torch.set_num_threads(1)
    code = bytes([0xF3, 0x3E, 0x40, 0xE0, 0x45, 0x3E, 0x78, 0xE0, 0x41])  # LYC=64; STAT sources on
    code += bytes([0x00, 0x04, 0x0C, 0x18, 0xFB])  # nop; inc b; inc c; jr back (no IO)
    gb = GameBoy(make_rom(code), idle_skip=False)
    clk = FIELDS["CLK"]
    pending = 0
    for _ in range(120):
        gb.step_instructions(97)
        pending += int(gb.state_tensors()["st"][0, clk] > 0)
        lazy = gb.read_memory(0xFF41, 4)  # STAT, SCY, SCX, LY
        gb.write_memory(0xFF06, gb.read_memory(0xFF06, 1))
        assert int(gb.state_tensors()["st"][0, clk]) == 0
        assert torch.equal(gb.read_memory(0xFF41, 4), lazy)
    assert pending > 100
