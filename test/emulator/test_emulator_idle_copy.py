"""The fast-forward of the memory copy idiom (:mod:`torchrl_dreamer.emulator.idle_copy`):
bit-identical consoles with and without it, with timer and VBlank interrupts landing inside
copies, and the copies it must leave to the interpreter (VRAM, IO) still exact."""

from __future__ import annotations

import torch
from test_emulator_idle import _assert_same_consoles

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS


def _copy(src: str, dst: str, n: int, swap: bool = False) -> str:
    """A call of the tutorials' Memcopy (``swap``: its ``ld a,c; or b`` spelling)."""
    return f"ld de, {src}\nld hl, {dst}\nld bc, {n}\ncall {'copy_cb' if swap else 'copy'}\n"


def _memcopy(branch: str = "jr") -> str:
    """The tutorials' Memcopy as the routine ``copy`` (closed by ``jr nz`` or ``jp nz``)."""
    return f"""copy:   ld a, [de]
        ld [hl+], a
        inc de
        dec bc
        ld a, b
        or c
        {branch} nz, copy
        ret
"""


def _fast_and_slow(rom: bytes, calls: int) -> tuple[GameBoy, GameBoy]:
    """Two consoles a side run ``calls`` calls of 1-3 frames with the fast-forward on and off;
    every state array, register and picture must come out equal."""
    runs = []
    for skip in (True, False):
        gb = GameBoy(rom, num_envs=2, idle_skip=skip, check_header=False, framebuffer=True)
        for k in range(calls):
            gb.run_frames(1 + k % 3)
        runs.append(gb)
    _assert_same_consoles(runs[1], runs[0])
    return runs[0], runs[1]


# the start of the programs below: the timer at 262 kHz (an interrupt every 1,024 T-cycles,
# IE = timer only), whose handler counts its interrupts in C001
_TIMER_START = """org $0050
        jp on_timer
org $0150
start:  di
        ld a, $05
        ldh [$07], a
        ld a, $04
        ldh [$FF], a
"""
_TIMER_COUNTER = """on_timer: push af
        ld a, [$C001]
        inc a
        ld [$C001], a
        pop af
        reti
"""


# Timer (262 kHz: an interrupt every 1,024 T-cycles, so inside most copies) and VBlank
# interrupts count into C000 / C001; each pass copies ROM to WRAM, ROM to HRAM, WRAM to WRAM
# overlapping (a smear: the copy reads bytes it wrote), ROM to VRAM with the LCD on (left to
# the interpreter) and to the serial IO register, logging DIV and TIMA after each copy.
_PROGRAM = f"""
section "vars", $C000
ticks: ds 1
vbls:  ds 1
log:   ds 2
org $0040
        jp on_vblank
org $0050
        jp on_timer
org $0150
start:  di
        ld a, $05
        ldh [$07], a
        ld a, $05
        ldh [$FF], a
        xor a
        ld [ticks], a
        ld [vbls], a
        ld hl, log
        ld [hl], $10
        ei
top:    {_copy("table", "$C100", 300)}
        call mark
        {_copy("table + 7", "$FF90", 40, swap=True)}
        call mark
        {_copy("$C100", "$C101", 200)}
        call mark
        {_copy("table", "$9800", 64)}
        call mark
        {_copy("table", "$FF01", 3)}
        call mark
        {_copy("table + 3", "$D000", 2)}
        call mark
        jp top
mark:   ld a, [log]
        ld l, a
        ld h, $C3
        ldh a, [$04]
        ld [hl+], a
        ldh a, [$05]
        ld [hl+], a
        ld a, l
        ld [log], a
        ret
copy:   ld a, [de]
        ld [hl+], a
        inc de
        dec bc
        ld a, b
        or c
        jr nz, copy
        ret
copy_cb: ld a, [de]
        ld [hl+], a
        inc de
        dec bc
        ld a, c
        or b
        jr nz, copy_cb
        ret
on_vblank: push af
        ld a, [vbls]
        inc a
        ld [vbls], a
        pop af
        reti
on_timer: push af
        ld a, [ticks]
        inc a
        ld [ticks], a
        pop af
        reti
table:
{chr(10).join("db " + ", ".join(str((k * 37 + j * 11) & 0xFF) for j in range(16)) for k in range(20))}
"""


def _run(idle_skip: bool) -> GameBoy:
    gb = GameBoy(build_rom(assemble(_PROGRAM), title="COPY"), num_envs=2, framebuffer=True,
                 idle_skip=idle_skip, check_header=False)
    for k in range(12):
        gb.run_frames(1 + k % 3)
    return gb


def test_copy_idiom_is_bit_identical_and_skipped():
    torch.set_num_threads(1)
    fast, slow = _run(True), _run(False)
    _assert_same_consoles(slow, fast)
    assert int(slow.read_memory(0xC000, 1)[0, 0]) > 50, "timer interrupts landed during the run"
    assert torch.equal(slow.read_memory(0xC300, 256), fast.read_memory(0xC300, 256))
    # the copies into RAM were done by the fast-forward: (300 + 40 + 200 - 3) x 7 instructions
    # a pass at most, less the iterations cut by interrupts
    skipped = int(fast.state_tensors()["st"][0, FIELDS["CYCLES"]])
    passes = (int(slow.read_memory(0xC002, 1)[0, 0]) - 0x10) // 12
    assert skipped > 2000 * max(passes, 1)
    assert passes >= 3, "the copies ran several times (the log advances 12 bytes a pass)"


def _bank_bytes(bank: int, n: int) -> list[int]:
    return [(bank * 53 + j * 7 + (j >> 3)) & 0xFF for j in range(n)]


# An MBC1 cartridge: copies from the tail of bank 0 across $4000 into the switched bank (2),
# and from bank 2 itself, with timer interrupts landing inside the copies.
_BANKED = f"""
{_TIMER_START}        ld a, 2
        ld [$2000], a
        ei
top:    {_copy("$3FF0", "$C100", 48)}
        {_copy("$4020", "$C200", 400)}
        ld hl, $C000
        inc [hl]
        jp top
{_memcopy()}{_TIMER_COUNTER}org $3FF0
        db {", ".join(str(v) for v in _bank_bytes(0, 16))}
bank 1
        db {", ".join(str(v) for v in _bank_bytes(1, 64))}
bank 2
        db {", ".join(str(v) for v in _bank_bytes(2, 0x20 + 400))}
"""


def test_copy_idiom_reads_the_switched_bank_and_across_4000():
    torch.set_num_threads(1)
    rom = build_rom(assemble(_BANKED), title="COPYBANK", cart_type=0x01, rom_size=0x10000)
    fast, slow = _fast_and_slow(rom, calls=6)
    assert int(slow.read_memory(0xC000, 1)[0, 0]) >= 3, "several passes of both copies"
    assert int(slow.read_memory(0xC001, 1)[0, 0]) > 20, "timer interrupts landed during the run"
    want = _bank_bytes(0, 16) + _bank_bytes(2, 32)
    assert fast.read_memory(0xC100, 48)[0].tolist() == want
    assert fast.read_memory(0xC200, 400)[0].tolist() == _bank_bytes(2, 0x20 + 400)[0x20:]
    assert int(fast.state_tensors()["st"][0, FIELDS["CYCLES"]]) > 1000, "the copies were skipped"


# The gbdev tutorial's spelling (``jp nz``) into VRAM: 1,500 bytes with the LCD off, then,
# with the LCD on, 96 bytes at a time at every phase of the line (a delay that grows by 4
# M-cycles a pass), so that copies run into mode 3, where the PPU locks VRAM and the write is
# lost: each pass copies from another offset of the table, so a lost byte shows.
_VRAM = f"""
{_TIMER_START}        xor a
        ldh [$40], a
        ld de, table
        ld hl, $8000
        ld bc, 1500
        call copy
        ld a, $91
        ldh [$40], a
        ei
top:    ld hl, $C000
        inc [hl]
        ld b, [hl]
.wait:  dec b
        jr nz, .wait
        ld a, [hl]
        and 63
        ld e, a
        ld d, 0
        ld hl, table
        add hl, de
        ld d, h
        ld e, l
        ld hl, $9800
        ld bc, 96
        call copy
        jp top
{_memcopy("jp")}{_TIMER_COUNTER}table:
{chr(10).join("db " + ", ".join(str((k * 29 + j * 13 + 7) & 0xFF) for j in range(16)) for k in range(100))}
"""


def test_copy_idiom_into_vram_with_the_lcd_off_and_on():
    torch.set_num_threads(1)
    rom = build_rom(assemble(_VRAM), title="COPYVRAM")
    fast, slow = _fast_and_slow(rom, calls=20)
    assert int(slow.read_memory(0xC000, 1)[0, 0]) > 100, "many passes, at many line phases"
    assert int(slow.read_memory(0xC001, 1)[0, 0]) > 20, "timer interrupts landed during the run"
    table = [(k * 29 + j * 13 + 7) & 0xFF for k in range(100) for j in range(16)]
    assert fast.read_memory(0x8000, 1500)[0].tolist() == table[:1500]
    # the copy with the LCD off alone is 1,499 skippable iterations of 7 instructions
    assert int(fast.state_tensors()["st"][0, FIELDS["CYCLES"]]) > 1499 * 7
