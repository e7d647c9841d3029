"""Micro-ROM tests of the DMG PPU rules behind the mid-line tests (docs/accuracy.md, "Mid-line
PPU rules"): each ROM is our own, written from the protocol of the public test it stands for, and
checked against the hardware result that test documents.

* LY=LYC for LYC = 0 matches on line 153 (LY reads 0 there), so its interrupt comes in VBlank,
  a line before line 0 starts.
* The OAM (mode 2) STAT interrupt of lines 1-143 comes one M-cycle before the line's interrupt
  point for a running CPU (mealybug-tearoom: "line 0 timing is different by 4 cycles"); a halted
  CPU wakes at the point itself on every line (mooneye intr_2_*).
* Mid-line BGP writes from daid's ``ppu_scanline_bgp`` protocol land on the hardware's pixels.
* LCDC.0 is read as each pixel leaves; LCDC.1 cleared during an object fetch abandons it.
"""

from __future__ import annotations

import numpy as np

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy


def _run(source: str, frames: int, framebuffer: bool = False, model: str = "dmg") -> GameBoy:
    rom = bytes(build_rom(assemble(source), title="PPU RULES"))
    gb = GameBoy(rom, framebuffer=framebuffer, check_header=False, ppu="fifo", model=model)
    gb.run_frames(frames)
    return gb


def _lines(*parts: str) -> str:
    return "\n".join(parts)


def _fill(label: str, addr: int, count: int, value: int) -> list[str]:
    """Write ``value`` to ``count`` bytes from ``addr`` (uses A, BC, HL)."""
    return [f"    ld hl, ${addr:04X}", f"    ld bc, ${count:04X}", f"{label}:",
            f"    ld a, ${value:02X}", "    ld [hli], a", "    dec bc", "    ld a, b", "    or c",
            f"    jr nz, {label}"]


def _copy(label: str, src: str, addr: int, count: int) -> list[str]:
    """Copy ``count`` (<= 256) bytes from label ``src`` to ``addr`` (uses A, B, DE, HL)."""
    return [f"    ld hl, ${addr:04X}", f"    ld de, {src}", f"    ld b, {count}", f"{label}:",
            "    ld a, [de]", "    ld [hli], a", "    inc de", "    dec b", f"    jr nz, {label}"]


def _db(data: list[int]) -> str:
    return "    db " + ", ".join(f"${b:02X}" for b in data)


# mealybug's scheme, shared by the mid-line ROMs below: the VBlank vector returns, the STAT
# vector jumps to ``handler``; the setup runs with the LCD off (from VBlank); every mode 2
# interrupt lands in a NOP slide longer than a line, and the handler returns to its top, so
# the dispatch never waits for a longer opcode; ``line_0_fix`` makes the handler one M-cycle
# shorter on LY 0 (its interrupt comes a cycle later)
_MODE2_PRELUDE = ("    org $0040", "    reti", "    org $0048", "    jp handler", "    org $0150",
                  "start:", "    ldh a, [$44]", "    cp 144", "    jr nz, start", "    xor a",
                  "    ldh [$40], a")
_NOP_SLIDE = ("nops:", *["    nop"] * 1200, "    jp nops")
_BACK_TO_SLIDE = ("    pop de", "    ld de, nops", "    push de", "    reti")
_LINE_0_FIX = ("    ldh a, [$44]", "    and a", "    jr nz, .l0", ".l0:")


# ------------------------------------------------------------------ LY=LYC 0 on line 153


def test_lyc0_interrupt_comes_on_line_153():
    """A CPU halted in VBlank with only the LY=LYC source (LYC = 0) on wakes on line 153: the
    handler's first reads see LY 0 with STAT mode 1 (VBlank) and the coincidence bit, not line
    0's mode 2/3 (Pan Docs "LY": LY reads 0 during most of line 153; daid ppu_scanline_bgp's
    hardware screens put its handler's first BGP row on LY 153)."""
    src = """
    org $0048
    jp stat
    org $0150
start:
    ld a, $40
    ldh [$41], a
    xor a
    ldh [$45], a
    ld a, $02
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ei
main:
    halt
    nop
    jr main
stat:
    ldh a, [$44]
    ld [$C000], a
    ldh a, [$41]
    ld [$C001], a
    reti
"""
    gb = _run(src, 3)
    ly, stat = (int(v) for v in gb.read_memory(0xC000, 2)[0])
    assert ly == 0
    assert stat & 0x07 == 0x05, f"STAT {stat:02X}: expected mode 1 with LY=LYC set"


# ------------------------------------------------------------------ OAM interrupt lead


def _stat_mode_after(nops: int, halted: bool, lines=(0, 5)) -> tuple[int, int]:
    """STAT mode bits read by a mode 2 interrupt handler ``nops`` NOPs after its start, on
    ``lines`` (first and second); the CPU waits in a NOP slide (running) or in HALT."""
    store = []
    for k, line in enumerate(lines):
        store += ["    ld a, c", f"    cp {line}", f"    jr nz, .n{k}", "    ld a, b",
                  f"    ld [$C00{k}], a", f".n{k}:"]
    if halted:
        wait = _lines("main:", "    halt", "    nop", "    jr main")
        ret = "    reti"
    else:
        # mealybug's scheme: every interrupt lands in a NOP slide longer than a line, and the
        # handler returns to the slide's top, so the dispatch never waits for a longer opcode
        wait = _lines("main:", *["    nop"] * 200, "    jp main")
        ret = _lines("    pop hl", "    ld hl, main", "    push hl", "    reti")
    src = _lines(
        "    org $0048", "    jp stat", "    org $0150", "start:",
        "    ld a, $20", "    ldh [$41], a", "    ld a, $02", "    ldh [$FF], a",
        "    xor a", "    ldh [$0F], a", "    ei", wait,
        "stat:", *["    nop"] * nops, "    ldh a, [$41]", "    ld b, a", "    ldh a, [$44]",
        "    ld c, a", *store, ret,
    )
    gb = _run(src, 3)
    a, b = (int(v) & 3 for v in gb.read_memory(0xC000, 2)[0])
    return a, b


def _first_mode0(halted: bool) -> tuple[int, int]:
    """The fewest handler NOPs after which STAT reads mode 0, on line 0 and on line 5."""
    first = [None, None]
    for n in range(40, 64):
        modes = _stat_mode_after(n, halted)
        for k in range(2):
            if first[k] is None and modes[k] == 0:
                first[k] = n
        if None not in first:
            return first[0], first[1]
    raise AssertionError(f"mode 0 not reached: {first}")


def test_oam_interrupt_leads_by_one_mcycle_for_a_running_cpu():
    """A running CPU's mode 2 handler starts one M-cycle earlier on line 5 than on line 0, so it
    needs one NOP more to reach mode 0 there (mealybug-tearoom's handlers: "line 0 timing is
    different by 4 cycles"); mode 3 is as long on both lines."""
    line0, line5 = _first_mode0(halted=False)
    assert line5 == line0 + 1


def test_oam_interrupt_wakes_a_halted_cpu_at_the_same_point_on_every_line():
    """A halted CPU does not see the early rise: woken by the mode 2 interrupt it reaches mode 0
    after the same number of NOPs on line 0 and line 5 (mooneye intr_2_* wait in HALT)."""
    line0, line5 = _first_mode0(halted=True)
    assert line5 == line0


# ------------------------------------------------------------------ daid ppu_scanline_bgp

# Ten BGP values per line (daid's data table, rows of 8 or 16 lines), each written 16 dots
# after the one before, one line per loop pass
_E4, _AA, _55 = 0xE4, 0xAA, 0x55
_ROWS = (
    [[_E4] * 10] * 8
    + [[_E4, _E4] + [_AA] * 6 + [_E4, _E4]] * 16
    + [[_E4, _AA] + [_55] * 6 + [_AA, _E4]] * 16
    + [[_E4, _AA, _55, _AA, _55, _55, _AA, _55, _AA, _E4]] * 16
    + [[_E4, _AA] + [_55] * 6 + [_AA, _E4]] * 16
    + [[_E4, _AA, _55, _AA, _AA, _AA, _AA, _55, _AA, _E4]] * 8
    + [[_E4, _AA, _55, _55, _AA, _AA, _55, _55, _AA, _E4]] * 8
    + [[_E4, _E4] + [_AA] * 6 + [_E4, _E4]] * 16
    + [[_E4] * 10] * 48
)

# daid ppu_scanline_bgp on a DMG, LY 23, pixels 0-31: the Shootout's reference screen
# ppu_scanline_bgp_1.dmg.png (the one with the OR pixel at each write; _0 and _2 differ only
# there), as transcribed in a public emulator's test suite
_LY23_HARDWARE = [1] * 13 + [3] + [2] * 15 + [3, 1, 1]


def _scanline_bgp_source() -> str:
    data = [f"    db {', '.join(f'${v:02X}' for v in row)}" for row in _ROWS]
    loop = ["    ld a, [hli]", "    ld [c], a"] * 10 + ["    nop"] * 70 + ["    jp loop"]
    return _lines(
        "    org $0040", "    jp vblank", "    org $0048", "    jp stat", "    org $0150",
        "start:", "    ldh a, [$44]", "    cp 145", "    jr nz, start",
        "    xor a", "    ldh [$40], a",  # LCD off (in VBlank) to clear the map
        *_fill(".clear", 0x9800, 0x400, 0),
        # tile 0 at $9000: colour 1 in its right column and bottom row
        "    ld a, 1", "    ld hl, $9000", *(["    ld [hli], a", "    inc hl"] * 7),
        "    ld a, $FF", "    ld [hli], a", "    xor a", "    ld [hl], a",
        "    ld a, $81", "    ldh [$40], a", "    ld a, $40", "    ldh [$41], a",
        "    ld a, $03", "    ldh [$FF], a", "    xor a", "    ldh [$45], a",
        "    ld c, $47", "    ei", "    halt",
        "vblank:", "    pop hl", "    ei", "    halt",
        "stat:", "    pop hl", "    ei", "    nop", "    ld hl, data",
        "loop:", *loop, "data:", *data,
    )


def _expected_scanline_bgp(or_pixel: bool = True) -> np.ndarray:
    """The frame by the rule the hardware screen shows: row r of the table on LY r - 1 (the
    handler starts on line 153), value k from pixel 16k - 2, and at pixel 16k - 3 (the write's
    own dot) the OR of values k - 1 and k on a DMG, value k on a Color."""
    out = np.zeros((144, 160), np.uint8)
    for y in range(144):
        row = _ROWS[y + 1]
        for x in range(160):
            colour = 1 if (x % 8 == 7 or y % 8 == 7) else 0
            k = min(9, (x + 2) // 16) if x >= 14 else 0
            bgp = row[k]
            if 13 <= x <= 141 and (x + 3) % 16 == 0:
                bgp = row[(x + 3) // 16]
                if or_pixel:
                    bgp |= row[(x + 3) // 16 - 1]
            out[y, x] = (bgp >> (2 * colour)) & 3
    return out


def test_scanline_bgp_writes_land_on_the_hardware_pixels():
    """daid's protocol (one LYC = 0 interrupt out of HALT, then a loop of exactly one line with
    ten BGP writes 16 dots apart): LY 23 shows the hardware screen's pixels, and the whole frame
    follows its rule (value k from pixel 16k - 2, the OR of old and new at 16k - 3)."""
    gb = _run(_scanline_bgp_source(), 10, framebuffer=True)
    frame = gb.framebuffer[0].cpu().numpy()
    assert frame[23, :32].tolist() == _LY23_HARDWARE
    want = _expected_scanline_bgp()
    bad = np.argwhere(frame != want)
    assert len(bad) == 0, f"{len(bad)} pixels differ, first (y, x): {bad[:5].tolist()}"


def test_scanline_bgp_writes_on_a_color_show_the_new_value_on_the_writes_dot():
    """The same protocol on a Color (a DMG cartridge: the compatibility mode, drawn by the
    pixel pipeline): no OR pixel, the new palette from the write's own dot (daid's GBC
    description: "Changing the BGP register will have the next BGP colors used")."""
    gb = _run(_scanline_bgp_source(), 10, framebuffer=True, model="cgb")
    frame = gb.framebuffer[0].cpu().numpy()
    want = _expected_scanline_bgp(or_pixel=False)
    bad = np.argwhere(frame != want)
    assert len(bad) == 0, f"{len(bad)} pixels differ, first (y, x): {bad[:5].tolist()}"


# ------------------------------------------------------------------ LCDC.0 per emitted pixel


# OAM of the mealybug object ROMs: band k (lines 8k..8k+7) holds an object at X = k, tile 0
_OAM_X_BY_BAND = [f"    db ${0x10 + 8 * k:02X}, {k}, 0, 0" for k in range(18)]


def _objects_x_by_band() -> list[str]:
    """Clear OAM, then copy ``_OAM_X_BY_BAND`` (placed at label ``oamd``) into it."""
    return [*_fill(".o", 0xFE00, 160, 0), *_copy(".c", "oamd", 0xFE00, 4 * len(_OAM_X_BY_BAND))]


def _bg_en_source() -> str:
    """mealybug m3_lcdc_bg_en_change's protocol on a solid black background: from the mode 2
    interrupt (running CPU in a NOP slide), 9 NOPs, then LCDC.0 off for 12 dots, on for 8, off
    for 8; band k (lines 8k..8k+7) holds a blank object at X = k."""
    return _lines(
        *_MODE2_PRELUDE,
        # tile 1 solid colour 3 in every map entry; tile 0 (the objects') blank
        *_fill(".t", 0x8010, 16, 0xFF), *_fill(".m", 0x9800, 0x400, 1), *_objects_x_by_band(),
        "    ld a, $20", "    ldh [$41], a", "    ld a, $03", "    ldh [$FF], a", "    ld a, $E4",
        "    ldh [$48], a", "    ldh [$47], a", "    ld b, $93", "    ld c, $92", "    ld hl, $FF40",
        "    ld [hl], b", "    xor a", "    ldh [$0F], a", "    ei",
        *_NOP_SLIDE,
        # mealybug's handler: line_0_fix, 9 NOPs, the writes
        "handler:", *_LINE_0_FIX, *["    nop"] * 9,
        "    ld [hl], c", "    nop", "    ld [hl], b", "    ld [hl], c", "    ld [hl], b",
        *_BACK_TO_SLIDE,
        "oamd:", *_OAM_X_BY_BAND,
    )


def _white_runs(row: np.ndarray) -> list[tuple[int, int]]:
    runs, x = [], 0
    while x < len(row):
        if row[x] == 0:
            start = x
            while x < len(row) and row[x] == 0:
                x += 1
            runs.append((start, x - 1))
        x += 1
    return runs


def test_lcdc0_off_blanks_the_pixels_that_leave_while_it_is_off():
    """LCDC.0 is read as each pixel leaves, not per tile, one dot after the other LCDC bits
    (mealybug m3_lcdc_bg_en_change's DMG reference: in the band of the object at X = 0 white
    runs of exactly 12 pixels, x = -1..10, and 8, x = 19..26, neither on a tile boundary, one
    pixel later in each band up to X = 5; pixel 0 blanked in the bands of objects X = 0-2 only,
    as the object's stall before pixel 0 shortens by a dot per band)."""
    gb = _run(_bg_en_source(), 12, framebuffer=True)
    frame = gb.framebuffer[0].cpu().numpy()
    assert _white_runs(frame[4]) == [(0, 10), (19, 26)]  # band 0: the run from x = -1
    assert _white_runs(frame[12]) == [(0, 11), (20, 27)]
    for band in range(8):
        runs = _white_runs(frame[8 * band + 4])
        assert (runs[0][0] == 0) == (band <= 2), f"band {band}: {runs}"
        if band >= 3:  # the whole first run on screen
            assert [b - a + 1 for a, b in runs] == [12, 8], f"band {band}: {runs}"


# ------------------------------------------------------------------ LCDC.1 during an object fetch


def _obj_en_source() -> str:
    """mealybug m3_lcdc_obj_en_change_variant's protocol with solid objects: band k (lines
    8k..8k+7) holds an object at X = k; from the mode 2 interrupt (running CPU in a NOP slide,
    one M-cycle later from LY 64 on) LCDC.1 is cleared for one write (2 M-cycles) and set again,
    then BGP turns black and white again 28 NOPs later, so the black bar starts at the pixel
    that leaves when the write lands: the later the line's object stall ended, the further left."""
    return _lines(
        *_MODE2_PRELUDE,
        # object tile 0 ($8000) solid colour 3; background tile 0 ($9000, LCDC.4 = 0) blank
        *_fill(".t", 0x8000, 16, 0xFF), *_fill(".z", 0x9000, 16, 0), *_fill(".m", 0x9800, 0x400, 0),
        *_objects_x_by_band(),
        "    ld a, $20", "    ldh [$41], a", "    ld a, $03", "    ldh [$FF], a", "    ld a, $83",
        "    ldh [$40], a", "    ld a, $FF", "    ldh [$48], a", "    xor a", "    ldh [$47], a",
        "    ld c, $40", "    xor a", "    ldh [$0F], a", "    ei",
        *_NOP_SLIDE,
        "handler:", "    ldh a, [$44]", "    cp 64", "    jr nc, .d", ".d:", "    ld a, $81",
        *["    nop"] * 7, "    ld [c], a", "    ld a, $83", "    ld [c], a", *["    nop"] * 28,
        "    ld a, $FF", "    ldh [$47], a", "    xor a", "    ldh [$47], a",
        *_BACK_TO_SLIDE,
        "oamd:", *_OAM_X_BY_BAND,
    )


def test_clearing_lcdc1_abandons_the_object_fetch_in_progress():
    """LCDC.1 cleared while an object is being fetched (the fetcher finishing its background
    tile or the object's own 6 dots) abandons the fetch on the dot of the write: the shifter
    resumes at once and the object is not drawn. Bands 13-15 end their (6-dot) fetches before
    the write, so their bars line up; the objects X = 16, 17 are reached later, a fetch of 11
    and 10 dots that the write cuts short, so their bars start 1 and 2 pixels further right
    instead of 5 and 4 further left (mealybug
    m3_lcdc_obj_en_change_variant's DMG reference: bars at 155, 155, 155, 156, 157)."""
    gb = _run(_obj_en_source(), 12, framebuffer=True)
    frame = gb.framebuffer[0].cpu().numpy()

    def bar(band: int) -> int:
        return 100 + int(np.argmax(frame[8 * band + 4, 100:] == 3))

    def drawn(band: int) -> list[int]:
        row = frame[8 * band + 4, :20]
        return np.nonzero(row == 3)[0].tolist()

    assert bar(13) == bar(14) == bar(15), [bar(b) for b in range(13, 18)]
    assert (bar(16), bar(17)) == (bar(15) + 1, bar(15) + 2), [bar(b) for b in range(13, 18)]
    # the X = 15 object was fetched: its first pixel leaves before the write hides the rest
    assert drawn(15) == [7]


# ------------------------------------------------------------------ the window at WX = 0


def _wx0_source() -> str:
    """mealybug m3_window_timing_wx_0's protocol: the window on from the first pixel (WX = 0,
    WY = 0); on every line the mode 2 handler writes SCX = LY, then BGP white and, 3 NOPs
    later, black, so the black run starts at the pixel that leaves when the write lands."""
    return _lines(
        *_MODE2_PRELUDE,
        # background map tile 0 (light grey at $9000), window map tile 1 (black at $9010)
        *_fill(".m", 0x9800, 0x400, 0), *_fill(".n", 0x9C00, 0x400, 1),
        *_copy(".t", "tiles", 0x9000, 32),
        "    ld a, $20", "    ldh [$41], a", "    ld a, $03", "    ldh [$FF], a",
        "    ld a, $E1", "    ldh [$40], a", "    xor a", "    ldh [$4B], a", "    ldh [$4A], a",
        "    ld hl, $FF47", "    ld b, 0", "    ld c, $FF", "    ld [hl], b", "    xor a",
        "    ldh [$0F], a", "    ei",
        *_NOP_SLIDE,
        "handler:", *_LINE_0_FIX,
        "    ldh a, [$44]", "    ldh [$43], a", "    ld [hl], b", "    nop", "    nop", "    nop",
        "    ld [hl], c", *_BACK_TO_SLIDE,
        "tiles:", _db([0xFF, 0x00] * 8 + [0xFF] * 16),
    )


def test_window_at_wx0_starts_one_dot_later_with_fine_scroll():
    """With WX = 0 the window starts one dot later when SCX & 7 > 0 ("window activating one
    T-cycle later when WX = 0 and SCX > 0", m3_window_timing_wx_0's source), besides the
    fine-scroll discard of a dot per SCX & 7: the black run starts at x = 11 for SCX & 7 = 0
    and at 11 - (SCX & 7) - 1 otherwise (the test's DMG reference: 11, 9, 8, 7, 6, 5, 4, 3)."""
    gb = _run(_wx0_source(), 12, framebuffer=True)
    frame = gb.framebuffer[0].cpu().numpy()
    start = {ly & 7: int(np.argmax(frame[ly] == 3)) for ly in range(8, 16)}
    assert start[0] == 11, start
    assert [start[f] for f in range(1, 8)] == [start[0] - f - 1 for f in range(1, 8)], start



# ------------------------------------------------------------------ the window started again


def _window_again_source() -> str:
    """mealybug m3_lcdc_win_en_change_multiple's protocol with a striped window tile: window map
    all tile 1 (pixel row r of colour r % 3 + 1), background blank; the mode 2 handler moves WX
    to 24, then to 120, clears LCDC.5 for one write and sets it again, so the window starts at
    x = 17, gives way to the background, and starts again at x = 113."""
    tile = []
    for r in range(8):
        c = r % 3 + 1
        tile += [0xFF if c & 1 else 0, 0xFF if c & 2 else 0]
    return _lines(
        *_MODE2_PRELUDE,
        *_fill(".m", 0x9800, 0x400, 0), *_fill(".n", 0x9C00, 0x400, 1), *_fill(".z", 0x8000, 16, 0),
        *_copy(".t", "tiled", 0x8010, 16),
        "    ld a, $20", "    ldh [$41], a", "    ld a, $03", "    ldh [$FF], a",
        "    ld b, $F1", "    ld c, b", "    res 5, c", "    ld a, 7", "    ldh [$4B], a", "    xor a",
        "    ldh [$4A], a", "    ld a, $E4", "    ldh [$47], a", "    ld hl, $FF40", "    ld [hl], b",
        "    xor a", "    ldh [$0F], a", "    ei",
        *_NOP_SLIDE,
        "handler:", *_LINE_0_FIX,
        "    ld a, 24", "    nop", "    ldh [$4B], a", *["    nop"] * 5, "    ld a, 120", "    ldh [$4B], a",
        "    nop", "    nop", "    nop", "    nop", "    ld [hl], c", "    nop", "    nop", "    ld [hl], b",
        *_BACK_TO_SLIDE,
        "tiled:", _db(tile),
    )


def test_window_started_again_draws_the_next_row():
    """A window started a second time on a line (LCDC.5 set again, WX on a pixel not yet drawn)
    draws the next row of the window, and the window line counter advances once per start
    (m3_lcdc_win_en_change_multiple's source: "The current row of the window is incremented each
    time the window is activated, so the second time the window is activated on the row, the
    next row of window pixels are displayed"): line L shows rows 2L and 2L + 1."""
    gb = _run(_window_again_source(), 12, framebuffer=True)
    frame = gb.framebuffer[0].cpu().numpy()
    row = frame[0]
    assert row[10] == 0 and row[30] != 0 and row[80] == 0 and row[130] != 0, row.tolist()
    for line in range(12):
        first, second = 2 * line % 8, (2 * line + 1) % 8
        got = (int(frame[line, 30]), int(frame[line, 130]))
        assert got == (first % 3 + 1, second % 3 + 1), f"line {line}: {got}"


def test_pixel_0_object_is_mixed_a_dot_after_it_leaves():
    """The object of a line's first pixel is mixed one dot after the pixel leaves (the line's
    head lingers in the mixer), every other pixel as it leaves. On the LCDC.1 protocol above
    the objects' last visible pixels leave on one dot in bands 3-5 (stalls of 8, 7, 6 dots):
    band 2's pixel 0 leaves on that same dot, so it is mixed a dot later, with LCDC.1 off, and
    hidden (mealybug m3_lcdc_obj_en_change_variant's DMG reference: band 2 shows no object pixel,
    band 3 shows its pixels 0 and 1)."""
    gb = _run(_obj_en_source(), 12, framebuffer=True)
    frame = gb.framebuffer[0].cpu().numpy()
    shown = {band: np.nonzero(frame[8 * band + 4, :12] == 3)[0].tolist() for band in (2, 3, 4, 5)}
    assert shown == {2: [], 3: [0, 1], 4: [0, 1, 2], 5: [0, 1, 2, 3]}, shown
