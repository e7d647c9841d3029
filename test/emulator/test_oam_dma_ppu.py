"""What the PPU reads from OAM while an OAM DMA runs (``emulator/oam_view.py``), on a micro ROM of
our own written from the rules SameBoy's ``Core/display.c`` and the "Red from OAM" test notes
state (docs/accuracy.md, "OAM DMA during a frame"):

* an OAM scan entry read while a transfer runs is not read: a DMG judges it with the pair the
  PPU read last (the entry before, or the previous line's last read for a scan inside the
  transfer from its start; DocBoy's PPU notes, Hacktix strikethrough's reference screen); an
  entry read before the end of a transfer that ends mid-scan is not selected;
* an object selected before a transfer and fetched while it runs takes its tile number and
  attributes from the OAM byte pair the transfer is writing.

The ROM restores the "old" objects with a DMA in every VBlank and starts a second DMA, of the
"new" objects, from the LY=LYC interrupt of line 42, so every frame shows: line 41 the old objects,
line 42 the old objects the scan read before the transfer (then copies of the last one, at its
X), with the tiles of the transfer's byte pairs, line 43 (its whole scan inside the transfer,
judged with line 42's last fetch: tile 1 as a Y) no object, lines 44-47 the new objects.
"""

from __future__ import annotations

import numpy as np
import pytest

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

LINE = 42  # the line whose OAM scan the transfers cut
SKIP = 14  # old entries 0..13 are below the screen, 14..39 on lines 40-47 (X = 8, 12, ...)
Y, Y_OFF = 56, 176  # an entry's Y on lines 40-47, below the screen
TILE_OLD, TILE_Y, TILE_NEW = 1, 56, 58  # old and new tile numbers (TILE_Y: what a Y byte names)
# (LY=LYC line, countdown iterations) putting transfer A's first byte on line 42's dot
# A_DOT + 4 * NOPs, or transfer B's end on line 42's dot B_DOT + 4 * NOPs: the emulator's
# interrupt, CPU and DMA timing (each checked by mooneye's tests), read off its state when FF46
# is written (2026-11-27)
CUT_START, A_DOT = (LINE - 1, 26), 28
CUT_END, B_DOT = (LINE - 2, 15), 36


def _hex(data: list[int]) -> str:
    return "    db " + ", ".join(f"${b:02X}" for b in data)


def _tables() -> tuple[list[int], list[int]]:
    old, new = [], []
    for s in range(40):
        k = s - SKIP
        old += [Y if k >= 0 else Y_OFF, 8 + 4 * max(k, 0), TILE_OLD, 0]
        new += [Y, 8 + 4 * s, TILE_NEW, 0]
    return old, new


def _copy(label: str, src: str, addr: int, count: int) -> list[str]:
    return [f"    ld hl, ${addr:04X}", f"    ld de, {src}", f"    ld b, {count}", f"{label}:",
            "    ld a, [de]", "    ld [hli], a", "    inc de", "    dec b", f"    jr nz, {label}"]


def _tile(label: str, addr: int, lo: int, hi: int) -> list[str]:
    return [f"    ld hl, ${addr:04X}", "    ld b, 8", f"{label}:", f"    ld a, ${lo:02X}",
            "    ld [hli], a", f"    ld a, ${hi:02X}", "    ld [hli], a", "    dec b",
            f"    jr nz, {label}"]


def _source(lyc: int = LINE, loops: int = 0, nops: int = 0) -> str:
    """The ROM: the LY=LYC interrupt of line ``lyc`` waits ``loops`` countdown iterations and
    ``nops`` NOPs (4 M-cycles and 1 each), then starts the transfer of the new objects."""
    old, new = _tables()
    # HRAM routines (the CPU waits there: a transfer from WRAM blocks the ROM's bus):
    # [ld a, loops; dec a; jr nz, -3]; nop * nops; ld a, $C0; ldh [$46], a; wait; reti
    wait = [0x3E, 0x28, 0x3D, 0x20, 0xFD, 0xD9]
    delay = [0x3E, loops, 0x3D, 0x20, 0xFD] if loops else []
    lycr = [*delay, *[0x00] * nops, 0x3E, 0xC0, 0xE0, 0x46, *wait]
    vblr = [0x3E, 0xC1, 0xE0, 0x46, *wait]  # the old objects back in every VBlank
    return "\n".join([
        "    org $0040", "    jp $FFC0", "    org $0048", "    jp $FF80", "    org $0150",
        "start:", "    ldh a, [$44]", "    cp 144", "    jr nz, start", "    xor a", "    ldh [$40], a",
        # every byte an object fetch may take as its tile names a solid tile
        *_tile(".t1", 0x8000 + 16 * TILE_OLD, 0xFF, 0x00),  # colour 1
        *_tile(".t2", 0x8000 + 16 * TILE_Y, 0x00, 0xFF),  # colour 2
        *_tile(".t4", 0x8000 + 16 * Y_OFF, 0x00, 0xFF),  # colour 2
        *_tile(".t3", 0x8000 + 16 * TILE_NEW, 0xFF, 0xFF),  # colour 3
        "    ld hl, $9800", "    ld bc, $0400", ".m:", "    xor a", "    ld [hli], a", "    dec bc",
        "    ld a, b", "    or c", "    jr nz, .m",
        *_copy(".c1", "newt", 0xC000, 160), *_copy(".c2", "oldt", 0xC100, 160),
        *_copy(".c3", "oldt", 0xFE00, 160), *_copy(".c4", "lycr", 0xFF80, len(lycr)),
        *_copy(".c5", "vblr", 0xFFC0, len(vblr)),
        "    ld a, $E4", "    ldh [$47], a", "    ldh [$48], a", "    ldh [$49], a",
        f"    ld a, {lyc}", "    ldh [$45], a", "    ld a, $40", "    ldh [$41], a",
        "    ld a, $03", "    ldh [$FF], a", "    ld a, $93", "    ldh [$40], a", "    xor a",
        "    ldh [$0F], a", "    ei",
        "slide:", *["    nop"] * 200, "    jp slide",
        "newt:", *[_hex(new[k:k + 16]) for k in range(0, 160, 16)],
        "oldt:", *[_hex(old[k:k + 16]) for k in range(0, 160, 16)],
        "lycr:", _hex(lycr), "vblr:", _hex(vblr),
    ])


def _frame(lyc: int, loops: int, nops: int, ppu: str) -> np.ndarray:
    rom = bytes(build_rom(assemble(_source(lyc, loops, nops)), title="OAM DMA PPU"))
    gb = GameBoy(rom, framebuffer=True, check_header=False, ppu=ppu)
    gb.run_frames(4)
    return gb.framebuffer[0].cpu().numpy()


def _first_unread(dot: int) -> int:
    """The first OAM entry the scan reads on or after line dot ``dot`` (entry s on dot 1 + 2 s)."""
    return (dot - 1 + 1) // 2


def _extent(row: np.ndarray) -> tuple[int, int]:
    """First and last x of the drawn run of ``row`` (asserted contiguous)."""
    x = np.nonzero(row)[0]
    assert len(x) > 0 and (np.diff(x) == 1).all(), row
    return int(x[0]), int(x[-1])


@pytest.mark.parametrize("ppu", ["line", "fifo"])
def test_a_transfer_from_mid_scan_hides_the_rest_and_garbles_the_fetches(ppu):
    """Transfer A starts during line 42's OAM scan, 4 dots later per NOP: the scan selects the
    old entries it read before the first byte (2 fewer hidden per NOP: an entry every 2 dots),
    and their fetches, in mode 3, read the transfer's byte pairs (new tiles: colours 2 and 3)."""
    lyc, loops = CUT_START
    spans = []
    for nops in range(1, 5):
        frame = _frame(lyc, loops, nops, ppu)
        assert not frame[:40].any() and not frame[48:].any()
        assert (frame[LINE - 1, :44] == 1).all() and not frame[LINE - 1, 44:].any()  # old
        assert not frame[LINE + 1].any()  # line 43: its whole scan inside the transfer
        for ly in range(LINE + 2, 48):  # after the transfer: the new objects
            assert (frame[ly, :44] == 3).all() and not frame[ly, 44:].any(), ly
        first, last = _extent(frame[LINE])
        assert first == 0
        spans.append(last + 1)
        assert set(frame[LINE, :last + 1].tolist()) & {2, 3}, "no fetch read the transfer"
    objects = [(w - 4) // 4 for w in spans]  # 8-wide objects at x = 0, 4, 8, ...
    assert objects == [_first_unread(A_DOT + 4 * n) - SKIP for n in range(1, 5)] == [2, 4, 6, 8]


@pytest.mark.parametrize("ppu", ["line", "fifo"])
def test_a_transfer_that_ends_mid_scan_shows_the_new_entries_after_it(ppu):
    """Transfer B ends during line 42's OAM scan, 4 dots later per NOP: the entries read before
    its end are hidden, those after it are the new ones (2 more hidden per NOP)."""
    lyc, loops = CUT_END
    firsts = []
    for nops in range(4):
        frame = _frame(lyc, loops, nops, ppu)
        assert (frame[LINE - 2, :44] == 1).all() and not frame[LINE - 2, 44:].any()  # old
        assert not frame[LINE - 1].any()  # line 41: its whole scan inside the transfer
        first, last = _extent(frame[LINE])
        assert (frame[LINE, first:last + 1] == 3).all() and last - first == 43  # 10 new ones
        firsts.append(first)
        for ly in range(LINE + 1, 48):
            assert (frame[ly, :44] == 3).all() and not frame[ly, 44:].any(), ly
    entries = [x // 4 for x in firsts]  # new entry s is drawn from x = 4 s
    assert entries == [_first_unread(B_DOT + 4 * n) for n in range(4)] == [18, 20, 22, 24]


def _struck_row_source() -> str:
    """Hacktix strikethrough's protocol (our ROM, no text): 40 objects at Y = $54 (line 68), X =
    23 + 8 k (mod 256), tile 0 (a one-row bar); every frame the LY=LYC interrupt of line 67
    waits for its HBlank, 28 NOPs, then transfers a table of $01 bytes (entry 0's Y $63, entry
    11's tile byte $00) into OAM, which runs through line 68's whole OAM scan; each VBlank
    transfers the 40 objects back."""
    init = []
    for k in range(40):
        init += [0x54, (23 + 8 * k) % 256, 0, 0]
    table = [0x63, 1, 1, 1] + [1] * 40 + [1, 1, 0, 1] + [1] * 112
    memcpy = ["memcpy:", "    ld a, [de]", "    inc de", "    ld [hli], a", "    dec bc",
              "    ld a, b", "    or c", "    jr nz, memcpy", "    ret"]
    return "\n".join([
        "    org $0048", "    jp stat", "    org $0150",
        "start:", "    ldh a, [$44]", "    cp 144", "    jr c, start", "    xor a", "    ldh [$40], a",
        "    ld a, $FC", "    ldh [$47], a", "    ldh [$48], a",
        "    ld hl, dmar", "    ld b, 8", "    ld c, $80", ".r:", "    ld a, [hli]", "    ld [c], a",
        "    inc c", "    dec b", "    jr nz, .r",
        "    ld hl, $9800", "    ld bc, $0400", ".m:", "    ld a, $FF", "    ld [hli], a", "    dec bc",
        "    ld a, b", "    or c", "    jr nz, .m",
        *_tile(".z", 0x8FF0, 0x00, 0x00),
        "    ld hl, $8000", "    ld de, bar", "    ld bc, 16", "    call memcpy",
        "    ld hl, $C000", "    ld de, init", "    ld bc, 160", "    call memcpy",
        "    ld a, $C0", "    call $FF80",
        "    ld a, $02", "    ldh [$FF], a", "    ld a, $40", "    ldh [$41], a", "    ld a, $43",
        "    ldh [$45], a", "    xor a", "    ldh [$0F], a", "    ei", "    ld a, $93", "    ldh [$40], a",
        "run:", "    ld hl, $C000", "    ld de, table", "    ld bc, 160", "    call memcpy", "    halt",
        ".v:", "    ldh a, [$41]", "    and 3", "    dec a", "    jr nz, .v",
        "    ld hl, $C000", "    ld de, init", "    ld bc, 160", "    call memcpy",
        "    ld a, $C0", "    call $FF80", "    jr run",
        "stat:", "    ldh a, [$41]", "    and 3", "    jr nz, stat", *["    nop"] * 28,
        "    ld a, $C0", "    call $FF80", "    reti",
        *memcpy,
        "dmar:", "    ldh [$46], a", "    ld a, 40", ".w:", "    dec a", "    jr nz, .w", "    ret",
        "init:", *[_hex(init[k:k + 16]) for k in range(0, 160, 16)],
        "table:", *[_hex(table[k:k + 16]) for k in range(0, 160, 16)],
        "bar:", _hex([0xFF, 0xFF] + [0] * 14),
    ])


@pytest.mark.parametrize("ppu", ["line", "fifo"])
def test_a_scan_inside_a_transfer_keeps_the_last_pair_read(ppu):
    """A transfer running through line 68's whole OAM scan: the scan reads nothing, and judges
    each entry with the pair the PPU read last (line 67, without objects, read entry 39: Y $54,
    X 79), so it selects 10 copies of that object at X 79; their fetches read the transfer's
    byte pairs, and only the one that meets entry 11's tile byte (0: the bar) shows. Hacktix's
    strikethrough reference screen: the one struck letter at x = 71..78 of line 68."""
    rom = bytes(build_rom(assemble(_struck_row_source()), title="OAM DMA PPU"))
    gb = GameBoy(rom, framebuffer=True, check_header=False, ppu=ppu)
    gb.run_frames(20)
    frame = gb.framebuffer[0].cpu().numpy()
    ys, xs = np.nonzero(frame)
    assert sorted(set(ys.tolist())) == [68] and xs.tolist() == list(range(71, 79))
