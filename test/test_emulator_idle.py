"""Idle-loop fast-forward: polling LY / STAT gives bit-identical consoles with and without it."""

from __future__ import annotations

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


def test_idle_skip_is_bit_identical_and_skips():
    torch.set_num_threads(1)
    fast, slow = _run(True, 12), _run(False, 12)
    cyc = FIELDS["CYCLES"]
    skipped = fast.state_tensors()["st"][:, cyc].clone()
    assert (skipped > 100).all()  # whole loop iterations were fast-forwarded
    assert (slow.state_tensors()["st"][:, cyc] == 0).all()
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
    log = slow.read_memory(0xC100, 144)
    assert torch.equal(log, fast.read_memory(0xC100, 144))
    assert int(log[0].count_nonzero()) > 40  # the program ran and logged its exits
    assert int(slow.read_memory(0xC001, 1)[0, 0]) >= 10  # VBlank IRQs were taken
    assert int(slow.read_memory(0xC002, 1)[0, 0]) > 0  # timer IRQs were taken
