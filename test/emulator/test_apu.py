"""The APU's registers and timing: blargg's dmg_sound ROMs plus micro tests of our own.

The micro ROMs (built with the in-repo assembler) reset the divider, power the APU on (so the
next frame-sequencer step is step 0, at divider 8192) and poll NR52 until a channel's status bit
clears, then store DIV: the frame-sequencer step that disabled the channel is read off DIV
(step k happens at divider ``(k + 1) * 8192``, i.e. DIV ``0x20 * (k + 1)``).
"""

from __future__ import annotations

import pytest
from conftest import rom_path

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

DMG_SOUND = [
    "01-registers", "02-len_ctr", "03-trigger", "04-sweep", "05-sweep_details",
    "06-overflow_on_trigger", "07-len_sweep_period_sync", "08-len_ctr_during_power",
    "09-wave_read_while_on", "10-wave_trigger_while_on", "11-regs_after_power",
    "12-wave_write_while_on",
]


def status_verdict(gb: GameBoy) -> str | None:
    """The A000 status protocol's result (the text can exceed 512 bytes here), or None."""
    a0 = gb.read_memory(0xA000, 0x1000)[0].tolist()
    if a0[1:4] != [0xDE, 0xB0, 0x61] or a0[0] == 0x80:
        return None
    text = bytes(a0[4:]).split(b"\0")[0].decode(errors="replace")
    return f"status {a0[0]}: {text}"


@pytest.mark.parametrize("name", DMG_SOUND)
def test_dmg_sound(roms, name):
    gb = GameBoy(rom_path(roms, f"blargg/dmg_sound/{name}.gb"), check_header=False)
    v = None
    for _ in range(40):
        gb.run_frames(50)
        v = status_verdict(gb)
        if v is not None:
            break
    assert v is not None, f"{name}: no verdict after 2000 frames"
    assert v.startswith("status 0:") and "Passed" in v, v


# ------------------------------------------------------------------------------ micro ROMs
_PROLOGUE = """
start:  di
        xor a
        ldh [$26], a        ; APU off
        ldh [$04], a        ; divider = 0
        ld a, $80
        ldh [$26], a        ; APU on: the next frame-sequencer step is step 0
"""
_EPILOGUE = """
.wait:  ldh a, [$26]
        and {bit}
        jr nz, .wait
        ldh a, [$04]
        ld [$C000], a
        ld a, 1
        ld [$C001], a
.spin:  jr .spin
"""


def _div_when_disabled(setup: str, bit: int) -> int:
    """Run a micro ROM: APU on, ``setup``, wait for NR52 ``bit`` to clear; DIV at that moment."""
    src = _PROLOGUE + setup + _EPILOGUE.format(bit=bit)
    gb = GameBoy(bytes(build_rom(assemble(src), title="APU TEST")), check_header=False)
    gb.run_frames(10)
    done, div = gb.read_memory(0xC000, 2)[0].tolist()[::-1]
    assert done == 1, "the channel never turned off"
    return div


def _trigger(ch: int, nrx1: int, nrx4: int) -> str:
    """Setup lines: DAC on, length load ``nrx1``, then ``nrx4`` (trigger / length enable)."""
    base = 0x10 + 5 * ch
    dac_reg, dac_on = (0x1A, 0x80) if ch == 2 else (base + 2, 0xF0)
    return f"""
        ld a, ${dac_on:02X}
        ldh [${dac_reg:02X}], a
        ld a, {nrx1}
        ldh [${base + 1:02X}], a
        ld a, ${nrx4:02X}
        ldh [${base + 4:02X}], a
"""


@pytest.mark.parametrize("ch", [0, 1, 2, 3])
def test_length_expires_on_step_0(ch):
    """Length 1 with length enabled: the first step (step 0, DIV 0x20) disables the channel."""
    assert _div_when_disabled(_trigger(ch, 255 if ch == 2 else 63, 0xC0), 1 << ch) == 0x20


def test_length_is_clocked_on_even_steps_only():
    """Length 2: steps 0 and 2 clock it (256 Hz), so the channel stops at step 2 (DIV 0x60)."""
    assert _div_when_disabled(_trigger(1, 62, 0xC0), 2) == 0x60


@pytest.mark.parametrize("wait_div,expected", [(0x21, 0x60), (0x41, 0xA0)])
def test_enabling_length_in_first_half_of_period_clocks_it(wait_div, expected):
    """Length 2, enabled after step 0 (the next step does not clock length): one extra clock,
    so step 2 stops the channel; enabled after step 1 (next step clocks): stops at step 4."""
    setup = _trigger(1, 62, 0x80) + f"""
.w0:    ldh a, [$04]
        cp ${wait_div:02X}
        jr c, .w0
        ld a, $40
        ldh [$19], a        ; enable length
"""
    assert _div_when_disabled(setup, 2) == expected


def test_sweep_overflow_disables_channel_1():
    """Sweep period 1, shift 2, up, from 0x500: 0x640 at step 2, then the check of 0x7D0 + 0x1F4
    overflows at step 6 (DIV 0xE0) and disables channel 1."""
    setup = """
        ld a, $12
        ldh [$10], a
        ld a, $F0
        ldh [$12], a
        xor a
        ldh [$13], a
        ld a, $85
        ldh [$14], a
"""
    assert _div_when_disabled(setup, 1) == 0xE0


def test_sweep_overflow_on_trigger():
    """A non-zero shift runs the overflow check at trigger: 0x7FF + 0x3FF disables at once."""
    setup = """
        ld a, $11
        ldh [$10], a
        ld a, $F0
        ldh [$12], a
        ld a, $FF
        ldh [$13], a
        ld a, $87
        ldh [$14], a
"""
    assert _div_when_disabled(setup, 1) == 0x00


# ------------------------------------------------------------------ registers through the bus
READ_MASKS = {
    0x10: 0x80, 0x11: 0x3F, 0x12: 0x00, 0x13: 0xFF, 0x14: 0xBF, 0x15: 0xFF, 0x16: 0x3F,
    0x17: 0x00, 0x18: 0xFF, 0x19: 0xBF, 0x1A: 0x7F, 0x1B: 0xFF, 0x1C: 0x9F, 0x1D: 0xFF,
    0x1E: 0xBF, 0x1F: 0xFF, 0x20: 0xFF, 0x21: 0x00, 0x22: 0x00, 0x23: 0xBF, 0x24: 0x00,
    0x25: 0x00,
}


def _idle_gb() -> GameBoy:
    gb = GameBoy(bytes(build_rom(assemble("start: di\n.spin: jr .spin"), title="APU REGS")),
                 check_header=False)
    gb.run_frames(1)
    return gb


def _read(gb: GameBoy, r: int) -> int:
    return int(gb.read_memory(0xFF00 + r)[0, 0])


def test_post_boot_nr52():
    assert _read(_idle_gb(), 0x26) == 0xF1  # APU on, the boot chime's channel 1 still on


def test_register_read_masks():
    gb = _idle_gb()
    for r, mask in READ_MASKS.items():
        gb.write_memory(0xFF00 + r, 0)
        assert _read(gb, r) == mask, hex(r)
    for r in range(0x27, 0x30):
        assert _read(gb, r) == 0xFF, hex(r)
    gb.write_memory(0xFF26, 0x8F)  # only bit 7 is writable; the status bits are read-only
    assert _read(gb, 0x26) == 0xF0  # (NR12 = 0 turned channel 1's DAC and channel off)


def test_power_off_clears_registers_and_ignores_writes():
    gb = _idle_gb()
    for r in READ_MASKS:
        if r != 0x1A:
            gb.write_memory(0xFF00 + r, 0xFF)
    gb.write_memory(0xFF30, list(range(16)))
    gb.write_memory(0xFF26, 0x00)
    assert _read(gb, 0x26) == 0x70
    for r, mask in READ_MASKS.items():
        assert _read(gb, r) == mask, hex(r)
    gb.write_memory(0xFF12, 0xF0)  # ignored while off
    gb.write_memory(0xFF11, 0xC5)  # DMG: the length part is written while off, the duty is not
    assert _read(gb, 0x12) == 0x00 and _read(gb, 0x11) == 0x3F
    assert gb.read_memory(0xFF30, 16)[0].tolist() == list(range(16))  # wave RAM is kept
    gb.write_memory(0xFF30, 0xAB)
    assert _read(gb, 0x30) == 0xAB
    gb.write_memory(0xFF26, 0x80)
    assert _read(gb, 0x26) == 0xF0  # on, every channel off


def test_dac_off_disables_and_blocks_trigger():
    gb = _idle_gb()
    gb.write_memory(0xFF21, 0xF0)
    gb.write_memory(0xFF23, 0x80)
    assert _read(gb, 0x26) & 8
    gb.write_memory(0xFF21, 0x07)  # DAC off (volume 0, decrease)
    assert not _read(gb, 0x26) & 8
    gb.write_memory(0xFF23, 0x80)  # a trigger does not enable a channel whose DAC is off
    assert not _read(gb, 0x26) & 8
