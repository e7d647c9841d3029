"""OAM DMA and interrupt-dispatch edge cases, each pinned by a micro ROM of our own.

DMG facts (Pan Docs "OAM DMA Transfer"; Gekkio, "Game Boy: Complete Technical Reference";
mooneye-test-suite ``oam_dma_*``, ``interrupts/ie_push``, ``ei_sequence``; BullyGB "DMA bus
conflicts"): the FF46 write is M-cycle 0, M-cycle 1 a start-up delay, bytes are transferred in
M-cycles 2..161; OAM reads 0xFF and ignores writes meanwhile; a CPU access to the bus the DMA
reads from (external: ROM, cart RAM, WRAM; or VRAM) sees the DMA's byte and its writes are lost.
"""

from __future__ import annotations

import pytest

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS

LCD_OFF = """
start:
    di
    xor a
    ldh [$40], a            ; LCD off: VRAM and OAM are free for the CPU
"""

SPIN = """
    jr @
"""


def run(src: str, frames: int = 3, memory: dict[int, bytes] | None = None) -> GameBoy:
    """Build ``src`` (code at $0150), poke ``memory`` in, run ``frames`` frames."""
    gb = GameBoy(bytes(build_rom(assemble(src))), check_header=False)
    for addr, data in (memory or {}).items():
        gb.write_memory(addr, list(data))
    gb.run_frames(frames)
    return gb


def byte(gb: GameBoy, addr: int) -> int:
    return int(gb.read_memory(addr, 1)[0, 0])


VRAM_PATTERN = {0x8000: bytes((k * 7 + 3) & 0xFF for k in range(0xA0))}


@pytest.mark.parametrize(("nops", "expected"), [(0, 0xFF), (1, 3)])
def test_dma_blocks_oam_for_exactly_160_m_cycles(nops, expected):
    """FF46 written in M-cycle 0: the OAM read in M-cycle 161 sees 0xFF, the one in 162 the
    copied byte (VRAM $8000 = 3)."""
    src = LCD_OFF + f"""
    ld hl, $FE00
    ld b, 40
    ld a, $80
    ldh [$46], a            ; M-cycle 0
.w: dec b                   ; 40 x (dec b; jr nz) = 159 M-cycles: M 1..159
    jr nz, .w
    {"nop" if nops else ""}
    ld a, [hl]              ; fetch in M 160 (+nops), read in M 161 (+nops)
    ld [$C000], a
""" + SPIN
    gb = run(src, memory=VRAM_PATTERN)
    assert byte(gb, 0xC000) == expected
    assert gb.read_memory(0xFE00, 0xA0)[0].tolist() == list(VRAM_PATTERN[0x8000])


@pytest.mark.parametrize(("restart", "expected_b"), [(False, 1), (True, 0)])
def test_dma_start_delay_and_restart(restart, expected_b):
    """Code runs into OAM: the opcode fetched from FE00 in M-cycle 1 after the FF46 write is the
    *old* OAM byte (INC B), the one at FE01 in M-cycle 2 reads 0xFF (RST $38). When the write
    restarts a running transfer, the old one still blocks OAM in M-cycle 1 (FE00 reads 0xFF)."""
    # $FDFE-$FDFF (echo of $DDFE): ld [hl], a twice (restart) or nop; ld [hl], a (fresh start)
    code = b"\x77\x77" if restart else b"\x00\x77"
    src = LCD_OFF + """
    ld b, 0
    ld hl, $FF46
    ld a, $80
    jp $FDFE
    org $0038
    ld a, b
    ld [$C000], a
""" + SPIN
    gb = run(src, memory={0xDDFE: code, 0xFE00: b"\x04\x04", 0x8000: b"\x00\x00"})
    assert byte(gb, 0xC000) == expected_b


@pytest.mark.parametrize(("nops", "expected"), [(0, 0xFF), (1, 3)])
def test_dma_restart_blocks_for_the_whole_new_transfer(nops, expected):
    """A restart 8 M-cycles into a transfer: OAM stays blocked until M-cycle 161 of the new one
    (the old transfer alone would have freed it 8 M-cycles earlier)."""
    src = LCD_OFF + f"""
    ld hl, $FE00
    ld b, 40
    ld a, $80
    ldh [$46], a
    nop
    nop
    nop
    nop
    nop
    ldh [$46], a            ; restart: M-cycle 0 of the new transfer
.w: dec b                   ; M 1..159
    jr nz, .w
    {"nop" if nops else ""}
    ld a, [hl]              ; read in M 161 (+nops)
    ld [$C000], a
""" + SPIN
    gb = run(src, memory=VRAM_PATTERN)
    assert byte(gb, 0xC000) == expected


def test_oam_writes_ignored_during_dma():
    src = LCD_OFF + """
    ld a, $80
    ldh [$46], a
    ld a, $77
    ld [$FE10], a           ; during the transfer: lost
    ld b, 50
.w: dec b
    jr nz, .w
    ld a, $66
    ld [$FE11], a           ; after it: written
""" + SPIN
    gb = run(src, memory=VRAM_PATTERN)
    assert byte(gb, 0xFE10) == VRAM_PATTERN[0x8000][0x10]
    assert byte(gb, 0xFE11) == 0x66


# Runs from HRAM (the only memory the CPU can use freely during a DMA): starts a DMA from page
# SRC, then probes WRAM, VRAM and ROM reads and writes at known M-cycles, storing results in HRAM.
HRAM_PROBE = """
probe:
    ldh [$46], a            ; M-cycle 0 (A = source page)
    ld a, [$C000]           ; read in M 4: DMA byte 2 if WRAM is on the DMA's bus
    ldh [$F0], a
    ld a, [$8000]           ; read in M 11: DMA byte 9 if VRAM is
    ldh [$F1], a
    ld a, [$0150]           ; read in M 18: DMA byte 16 if ROM is
    ldh [$F2], a
    ld a, $99
    ld [$C010], a           ; write in M 24
    ld [$8010], a           ; write in M 28
    ld b, 50
.w: dec b
    jr nz, .w
    ret
"""


@pytest.mark.parametrize("page", [0xC1, 0x81])
def test_dma_bus_conflicts(page):
    wram = bytes((k ^ 0x5A) for k in range(0x100))  # C000-C0FF
    wsrc = bytes((k * 3) & 0xFF for k in range(0xA0))  # C100-C19F
    vram = bytes((k * 5 + 1) & 0xFF for k in range(0x100))  # 8000-80FF
    vsrc = bytes((k * 11 + 2) & 0xFF for k in range(0xA0))  # 8100-819F
    probe = bytes(assemble(HRAM_PROBE))
    src = LCD_OFF + f"""
    ld a, ${page:02X}
    call $FF80
""" + SPIN
    gb = run(src, memory={0xC000: wram, 0xC100: wsrc, 0x8000: vram, 0x8100: vsrc,
                          0xFF80: probe})
    rom = bytes(build_rom(assemble(src)))
    dma = wsrc if page == 0xC1 else vsrc
    external = page == 0xC1
    assert byte(gb, 0xFFF0) == (dma[2] if external else wram[0])
    assert byte(gb, 0xFFF1) == (vram[0] if external else dma[9])
    assert byte(gb, 0xFFF2) == (dma[16] if external else rom[0x150])
    assert byte(gb, 0xC010) == (wram[0x10] if external else 0x99)  # lost on a conflict
    assert byte(gb, 0x8010) == (0x99 if external else vram[0x10])
    assert gb.read_memory(0xFE00, 0xA0)[0].tolist() == list(dma)


def test_dma_from_echo_and_high_pages_reads_wram():
    # the transfer and the wait run from HRAM: the ROM shares the external bus with a transfer
    # from WRAM, so code there would read the transfer's bytes as its opcodes
    src = LCD_OFF + """
    ld a, $FE               ; DMG: FE00-FE9F as a source is the WRAM echo of DE00
    jp $FF80
"""
    hram = bytes([0xE0, 0x46, 0x06, 0x32, 0x05, 0x20, 0xFD, 0x18, 0xFE])  # ldh [$46],a; wait; jr @
    data = bytes((k * 13 + 7) & 0xFF for k in range(0xA0))
    gb = run(src, memory={0xDE00: data, 0xFF80: hram})
    assert gb.read_memory(0xFE00, 0xA0)[0].tolist() == list(data)


# ------------------------------------------------------------------ interrupt dispatch edge cases
@pytest.mark.parametrize(("sp", "cancelled"), [(0x0000, True), (0x0001, False)])
def test_dispatch_rereads_ie_after_pushing_pc_high(sp, cancelled):
    """With SP = 0000 the PC high byte push ($01: code at $01xx) lands in IE, dropping the
    timer bit: the dispatch is cancelled, jumps to $0000, leaves IF alone and IME off. With
    SP = 0001 the low byte lands in IE after the vector was chosen: a normal timer dispatch."""
    src = """
start:
    di
    ld hl, after
    xor a
    ldh [$0F], a
    ld a, $04
    ldh [$FF], a            ; IE = timer
    ei
    nop
    ld sp, SP_VALUE
    ldh [$0F], a            ; IF = timer: dispatched after this instruction
    ld a, $EE
    ld [$C002], a           ; not reached
    jr @
after:
    ld sp, $DFF0
    ldh a, [$0F]
    and $1F
    ld [$C001], a
""".replace("SP_VALUE", f"${sp:04X}") + SPIN + """
    org $0000
    ld a, $AA
    ld [$C000], a
    jp hl
    org $0050
    ld a, $50
    ld [$C000], a
    jp hl
"""
    gb = run(src)
    assert byte(gb, 0xC002) == 0
    if cancelled:
        assert byte(gb, 0xC000) == 0xAA
        assert byte(gb, 0xC001) == 0x04  # IF untouched
    else:
        assert byte(gb, 0xC000) == 0x50
        assert byte(gb, 0xC001) == 0x00  # acknowledged
    assert int(gb.registers()["ime"][0]) == 0


def test_ei_ei_takes_the_interrupt_after_the_second_ei():
    """EI while an EI is pending does not delay IME again: EI; EI; EI... with an interrupt
    pending is interrupted right after the second EI (the pushed PC is the third EI's)."""
    src = """
start:
    di
    ld a, $08
    ldh [$0F], a
    ldh [$FF], a            ; serial requested and enabled
    jp $0200
    org $0058
    pop bc
    ld a, b
    ld [$C000], a
    ld a, c
    ld [$C001], a
""" + SPIN + """
    org $0200
    ei
    ei
    ei
    ei
    ei
""" + SPIN
    gb = run(src)
    assert (byte(gb, 0xC000), byte(gb, 0xC001)) == (0x02, 0x02)


# ------------------------------------------------------------------ HALT wake-up timing
def _clock_left_after_3_frames(src: str) -> int:
    """Run ``src`` for 3 frames; the system counter (DIV16 + pending CLK) then, which counts the
    T-cycles since the program's last DIV reset."""
    gb = GameBoy(bytes(build_rom(assemble(src))), check_header=False)
    gb.run_frames(3)
    st = gb.state_tensors()["st"][0]
    return (int(st[FIELDS["DIV16"]]) + int(st[FIELDS["CLK"]])) & 0xFFFF


def _handler_entry_clock(irq: str, halt: bool) -> int:
    """T-cycles from the interrupt handler's DIV reset to the end of frame 3 (the handler then
    halts for good), for an interrupt that wakes HALT or interrupts a run of NOPs."""
    setup = {
        "vblank": "ld a, $01\n    ldh [$FF], a",
        "timer": "ld a, $04\n    ldh [$FF], a\n    ld a, $F0\n    ldh [$05], a\n"
                 "    ld a, $05\n    ldh [$07], a",
    }[irq]
    wait = "halt" if halt else "\n".join(["    nop"] * 18000)
    vector = {"vblank": 0x40, "timer": 0x50}[irq]
    src = f"""
start:
    di
    {setup}
    xor a
    ldh [$0F], a
    ei
    {wait}
    jr @
    org ${vector:04X}
    ldh [$04], a            ; DIV reset in the handler's 3rd M-cycle
    xor a
    ldh [$FF], a
    halt                    ; IME = 0, IE = 0: halted to the end
"""
    return _clock_left_after_3_frames(src)


def test_halt_wakeup_matches_nops_for_vblank_and_is_one_m_cycle_later_for_timer():
    """A VBlank interrupt reaches its handler from HALT exactly as from a run of NOPs (mooneye
    halt_ime1_timing2-GS); a timer interrupt one M-cycle later (gbmicrotest int_timer_halt)."""
    assert _handler_entry_clock("vblank", True) == _handler_entry_clock("vblank", False)
    assert _handler_entry_clock("timer", True) == _handler_entry_clock("timer", False) - 4


def _vblank_point_entry_clock(ie: int) -> int:
    """T-cycles from a handler's DIV reset to the end of frame 3, for the first interrupt after
    HALT entered in line 143's HBlank, with the STAT mode 2 source on and IE = ``ie``."""
    src = f"""
start:
    di
    ld a, $20
    ldh [$41], a            ; STAT: mode 2 source only
.wl:
    ldh a, [$44]
    cp 143
    jr nz, .wl
.w0:
    ldh a, [$41]
    and 3
    jr nz, .w0              ; line 143, mode 0: its mode 2 request is behind us
    ld a, ${ie:02X}
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ei
    halt
    jr @
    org $0040
    jp handler
    org $0048
    jp handler
    org $0200
handler:
    ldh [$04], a            ; DIV reset
    xor a
    ldh [$FF], a
    halt                    ; IME = 0, IE = 0: halted to the end
"""
    return _clock_left_after_3_frames(src)


def test_line_144_mode2_stat_wakes_halt_with_vblank():
    """At the VBlank point the mode 2 STAT source fires too, and wakes HALT in the same M-cycle
    as the VBlank interrupt (mooneye vblank_stat_intr: 'vblank and stat_m2_144 are triggered at
    the same time')."""
    assert _vblank_point_entry_clock(0x02) == _vblank_point_entry_clock(0x01)


def test_the_host_sees_oam_fill_up_during_a_transfer():
    """``read_memory`` of OAM during a transfer: the bytes written so far (one per M-cycle from
    the M-cycle after the start-up one) and OAM's old bytes after them; all new once it ends."""
    src = LCD_OFF + """
    ld a, $C1
    jp $FF80
"""
    hram = bytes([0xE0, 0x46, *[0x00] * 60, 0x18, 0xFE])  # ldh [$46], a; 60 NOPs; jr @
    data = bytes((k * 7 + 3) & 0xFF for k in range(0xA0))
    old = bytes((k * 5 + 1) & 0xFF for k in range(0xA0))
    gb = GameBoy(bytes(build_rom(assemble(src))), check_header=False)
    gb.write_memory(0xC100, list(data))
    gb.write_memory(0xFF80, list(hram))
    gb.write_memory(0xFE00, list(old))
    while int(gb.registers()["pc"][0]) != 0xFF82:  # up to the end of ldh [$46], a
        gb.step_instructions(1)
    for nops in (20, 45):
        gb.step_instructions(nops - int(gb.registers()["pc"][0]) + 0xFF82)
        # the byte a CPU access in the next M-cycle would collide with is byte nops - 2 (the
        # start-up M-cycle, then one byte an M-cycle): the bytes before it are in OAM
        seen = bytes(gb.read_memory(0xFE00, 0xA0)[0].tolist())
        assert seen == data[:nops - 2] + old[nops - 2:], nops
    gb.run_frames(1)
    assert bytes(gb.read_memory(0xFE00, 0xA0)[0].tolist()) == data
