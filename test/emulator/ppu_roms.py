"""PPU micro test ROM builders and the pure-numpy DMG reference renderer used to check them.

The reference renderer is written pixel by pixel straight from the Pan Docs rules (no code shared
with the Warp renderer in ``torchrl_dreamer/emulator/render.py``), so the two check each other;
it also computes the expected frame of every micro test ROM built here.
"""

from __future__ import annotations

import numpy as np

W, H = 160, 144


def encode_tile(pixels) -> bytes:
    """2bpp bytes of a tile given as rows of colour indices (8 wide, 8 or 16 rows)."""
    out = bytearray()
    for row in pixels:
        lo = hi = 0
        for x, c in enumerate(row):
            lo |= (c & 1) << (7 - x)
            hi |= ((c >> 1) & 1) << (7 - x)
        out += bytes((lo, hi))
    return bytes(out)


def put_tile(vram: np.ndarray, offset: int, pixels) -> None:
    """Write a tile's 2bpp bytes at VRAM offset ``offset`` (0 = 0x8000)."""
    data = encode_tile(pixels)
    vram[offset : offset + len(data)] = np.frombuffer(data, dtype=np.uint8)


def tile_color(vram: np.ndarray, addr: int, x: int, y: int) -> int:
    """Colour index of pixel (x, y) of the tile whose data starts at VRAM offset ``addr``."""
    lo = int(vram[addr + 2 * y])
    hi = int(vram[addr + 2 * y + 1])
    return ((lo >> (7 - x)) & 1) | (((hi >> (7 - x)) & 1) << 1)


def bg_tile_addr(index: int, lcdc: int) -> int:
    """VRAM offset of BG/window tile ``index`` under LCDC.4 (8000 unsigned / 8800 signed)."""
    if lcdc & 0x10:
        return 0x0000 + 16 * index
    signed = index - 256 if index >= 128 else index
    return 0x1000 + 16 * signed


def map_color(vram: np.ndarray, map_base: int, lcdc: int, px: int, py: int) -> int:
    """Colour index at pixel (px, py) of the 256x256 tile map at ``map_base`` (0x1800/0x1C00)."""
    index = int(vram[map_base + (py // 8) * 32 + (px // 8)])
    return tile_color(vram, bg_tile_addr(index, lcdc), px % 8, py % 8)


def shade(palette: int, color: int) -> int:
    return (palette >> (2 * color)) & 3


def reference_frame(vram: np.ndarray, oam: np.ndarray, regs: np.ndarray) -> np.ndarray:
    """Render one frame: ``vram`` uint8[0x2000], ``oam`` uint8[0xA0], ``regs`` int[144, 8]
    (lcdc, scx, scy, wx, wy, bgp, obp0, obp1 per line). Returns shades uint8[144, 160]."""
    out = np.zeros((H, W), dtype=np.uint8)
    wy_seen = False
    win_y = 0
    for ly in range(H):
        lcdc, scx, scy, wx, wy, bgp, obp0, obp1 = (int(v) for v in regs[ly])
        if not lcdc & 0x80:
            continue  # LCD off: shade 0
        wy_seen = wy_seen or ly == wy
        bg_on = bool(lcdc & 0x01)
        win_here = bg_on and bool(lcdc & 0x20) and wy_seen and wx <= 166
        bg_map = 0x1C00 if lcdc & 0x08 else 0x1800
        win_map = 0x1C00 if lcdc & 0x40 else 0x1800
        bg = [0] * W
        for x in range(W):
            if not bg_on:
                bg[x] = 0
            elif win_here and x >= wx - 7:
                bg[x] = map_color(vram, win_map, lcdc, x - (wx - 7), win_y)
            else:
                bg[x] = map_color(vram, bg_map, lcdc, (x + scx) % 256, (ly + scy) % 256)
        if win_here:
            win_y += 1
        line = [shade(bgp, c) for c in bg]
        if lcdc & 0x02:
            height = 16 if lcdc & 0x04 else 8
            chosen = []
            for n in range(40):
                y = int(oam[4 * n]) - 16
                if y <= ly < y + height and len(chosen) < 10:
                    chosen.append(n)
            chosen.sort(key=lambda n: (int(oam[4 * n + 1]), n))  # X, then OAM index
            for x in range(W):
                for n in chosen:  # first opaque object pixel in priority order decides
                    sy, sx = int(oam[4 * n]) - 16, int(oam[4 * n + 1]) - 8
                    tile, attr = int(oam[4 * n + 2]), int(oam[4 * n + 3])
                    if not sx <= x < sx + 8:
                        continue
                    if height == 16:
                        tile &= 0xFE
                    ty = ly - sy
                    tx = x - sx
                    if attr & 0x40:
                        ty = height - 1 - ty
                    if attr & 0x20:
                        tx = 7 - tx
                    c = tile_color(vram, 16 * tile, tx, ty)  # ty >= 8 runs into the next tile
                    if c == 0:
                        continue
                    if not (attr & 0x80 and bg[x] != 0):
                        line[x] = shade(obp1 if attr & 0x10 else obp0, c)
                    break
        out[ly] = line
    return out


# ------------------------------------------------------------------------------ micro test ROMs
#
# Every ROM writes a whole VRAM image and OAM (LCD off), sets the registers of the frame's first
# line, turns the LCD on and then only reacts to interrupts: the VBlank handler restores the
# first line's registers each frame, and register changes at line L are done by an LY=LYC STAT
# interrupt raised on line L-1 whose handler waits for that line's HBlank before writing, so
# line L and the following ones see the new values on hardware, in PyBoy and in our core alike.
# The expected frame is then ``reference_frame(vram, oam, regs)`` with ``regs`` the resulting
# per-line register table.

REG_ADDR = {
    "lcdc": 0x40,
    "scy": 0x42,
    "scx": 0x43,
    "bgp": 0x47,
    "obp0": 0x48,
    "obp1": 0x49,
    "wy": 0x4A,
    "wx": 0x4B,
}
REG_COLUMNS = ("lcdc", "scx", "scy", "wx", "wy", "bgp", "obp0", "obp1")  # render.LINE_REGISTERS


class MicroRom:
    """One PPU micro test ROM: its image, the expected frame and RAM facts to check.

    Attributes:
        name: short id (``bg_scroll``, ``window``, ``sprites``, ``stat_mode0``, ``stat_mode2``,
            ``lcd_off``).
        rom: the 32 KiB cartridge image.
        expected: shades ``uint8[144, 160]`` of every frame once the picture is stable.
        frames: frames to run before comparing (past the blank first frame after LCD on).
        memory: ``{address: value}`` the ROM leaves in WRAM (e.g. LY read while the LCD is off).
    """

    def __init__(self, name, rom, expected, frames=12, memory=None):
        self.name = name
        self.rom = rom
        self.expected = expected
        self.frames = frames
        self.memory = memory or {}


def _db_lines(data: bytes) -> str:
    return "\n".join(
        "    db " + ", ".join(f"${b:02X}" for b in data[k : k + 16])
        for k in range(0, len(data), 16)
    )


def _write_regs(values: dict[str, int]) -> str:
    return "\n".join(
        f"    ld a, ${v & 0xFF:02X}\n    ldh [${REG_ADDR[r]:02X}], a" for r, v in values.items()
    )


def _source(
    vram: np.ndarray,
    oam: np.ndarray,
    init: dict[str, int],
    events: list[tuple[int, dict[str, int]]],
    stat_select: int,
    stat_body: str = "",
    main_body: str = "",
    lcd_off_after_setup: bool = False,
    stat_vector: str = "",
) -> str:
    """Assembly of a micro ROM (see the module comment for the scheme)."""
    events = sorted(events, key=lambda e: e[0])
    if any(line < 1 or line > 143 for line, _ in events):
        raise ValueError("events must be on lines 1..143 (line 0 uses the init registers)")
    first_lyc = events[0][0] - 1 if events else 0xFF
    ie = 0x01 | (0x02 if (events or stat_select) else 0)
    dispatch = []
    handlers = []
    for k, (line, regs) in enumerate(events):
        nxt = events[k + 1][0] - 1 if k + 1 < len(events) else 0xFF
        dispatch.append(f"    cp {line - 1}\n    jr z, .ev{k}")
        handlers.append(
            f".ev{k}:\n.w{k}:\n    ldh a, [$41]\n    and 3\n    jr nz, .w{k}\n"
            f"{_write_regs(regs)}\n    ld a, {nxt}\n    ldh [$45], a\n    jr .out"
        )
    stat = "\n".join(
        [
            "stat_handler:",
            "    push af",
            stat_body,
            "    ldh a, [$44]",
            *dispatch,
            "    jr .out",
            *handlers,
            ".out:",
            "    pop af",
            "    reti",
        ]
    )
    lcdc_on = init["lcdc"] | 0x80
    return f"""
    org $0040
    jp vblank_handler
    org $0048
{stat_vector or "    jp stat_handler"}
    org $0150
start:
    di
    ld sp, $DFFE
.wait:
    ldh a, [$44]
    cp 144
    jr nz, .wait
    xor a
    ldh [$40], a
    ld hl, $8000
    ld de, vram_data
    ld bc, $2000
    call memcpy
    ld hl, $FE00
    ld de, oam_data
    ld bc, $A0
    call memcpy
{_write_regs({r: v for r, v in init.items() if r != "lcdc"})}
    ld a, {first_lyc}
    ldh [$45], a
    ld a, {stat_select}
    ldh [$41], a
    ld a, {ie}
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ld a, {lcdc_on & 0x7F if lcd_off_after_setup else lcdc_on}
    ldh [$40], a
    ei
main:
{main_body if main_body else "    halt" + chr(10) + "    nop"}
    jr main

memcpy:
    ld a, [de]
    ld [hli], a
    inc de
    dec bc
    ld a, b
    or c
    jr nz, memcpy
    ret

vblank_handler:
    push af
{_write_regs({r: v for r, v in init.items() if r != "lcdc"})}
    ld a, {lcdc_on}
    ldh [$40], a
    ld a, {first_lyc}
    ldh [$45], a
    pop af
    reti

{stat}

vram_data:
{_db_lines(bytes(vram))}
oam_data:
{_db_lines(bytes(oam))}
"""


def _regs_table(init: dict[str, int], events) -> np.ndarray:
    regs = np.zeros((H, len(REG_COLUMNS)), dtype=np.int32)
    defaults = {"lcdc": 0x91, "bgp": 0xFC, "obp0": 0xFF, "obp1": 0xFF}
    for c, name in enumerate(REG_COLUMNS):
        regs[:, c] = init.get(name, defaults.get(name, 0))
    regs[:, 0] |= 0x80
    for line, values in sorted(events, key=lambda e: e[0]):
        for name, v in values.items():
            regs[line:, REG_COLUMNS.index(name)] = v
    return regs


def _assemble(name: str, source: str) -> bytes:
    from torchrl_dreamer.asm import assemble, build_rom

    return bytes(build_rom(assemble(source), title=f"PPU {name}".upper()[:15]))


def _random_vram(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, 0x2000, dtype=np.uint8)


def _build(
    name,
    vram,
    oam,
    init,
    events=(),
    stat_select=0,
    stat_body="",
    main_body="",
    lcd_off_after_setup=False,
    regs=None,
    memory=None,
    stat_vector="",
) -> MicroRom:
    events = list(events)
    if events:
        stat_select |= 0x40
    src = _source(
        vram, oam, init, events, stat_select, stat_body, main_body, lcd_off_after_setup, stat_vector
    )
    table = _regs_table(init, events) if regs is None else regs
    expected = (
        np.zeros((H, W), np.uint8) if lcd_off_after_setup else reference_frame(vram, oam, table)
    )
    return MicroRom(name, _assemble(name, src), expected, memory=memory)


def bg_scroll_rom() -> MicroRom:
    """BG: 8800 signed data + 9C00 map with SCX/SCY wrap on top, 8000 data + 9800 map below."""
    vram = _random_vram(11)
    oam = np.zeros(0xA0, np.uint8)
    init = {"lcdc": 0x89, "scx": 13, "scy": 250, "bgp": 0xE4}
    events = [(72, {"lcdc": 0x91, "scx": 200, "scy": 3}), (110, {"bgp": 0x1B, "scx": 255})]
    return _build("bg_scroll", vram, oam, init, events)


def window_rom() -> MicroRom:
    """Window at WX=47/WY=30 from the 9C00 map; off on lines 60-79 (its line counter pauses),
    WX=3 from line 100 (left of the screen edge), WY moved away at 120 (latched: stays on)."""
    vram = _random_vram(12)
    oam = np.zeros(0xA0, np.uint8)
    init = {"lcdc": 0xF1, "wx": 47, "wy": 30, "bgp": 0xE4, "scx": 5}
    events = [(60, {"lcdc": 0xD1}), (80, {"lcdc": 0xF1}), (100, {"wx": 3}), (120, {"wy": 140})]
    return _build("window", vram, oam, init, events)


def sprites_rom() -> MicroRom:
    """Objects: 11 on one line (10 shown), X-then-index priority, flips, OBP0/OBP1,
    behind-BG over colour 0 only, 8x16 on top half, 8x8 from line 72."""
    rng = np.random.default_rng(13)
    vram = _random_vram(13)
    vram[0x1800:0x1C00] = rng.integers(0, 4, 0x400)  # BG map: tiles 0..3 (mixed colour 0)
    oam = np.zeros(0xA0, np.uint8)

    def obj(n, y, x, tile, attr=0):
        oam[4 * n : 4 * n + 4] = (y + 16, x + 8, tile, attr)

    for n in range(11):  # 11 objects on lines 10..25 (8x16): the 11th (leftmost) is dropped
        obj(n, 10, 150 - 13 * n, 0x20 + 2 * n, 0x10 if n % 3 == 0 else 0)
    obj(11, 40, 30, 0x40, 0x20)  # X flip
    obj(12, 40, 34, 0x41, 0x40)  # Y flip (8x16: halves swap), overlaps 11 -> 11 wins (smaller X)
    obj(13, 44, 60, 0x42, 0x60)  # both flips
    obj(14, 44, 60, 0x44, 0x10)  # same X as 13: 13 wins by OAM index
    obj(15, 90, 20, 0x50, 0x80)  # behind BG (8x8 part of the frame)
    obj(16, 100, 80, 0x51, 0x90)  # behind BG, OBP1
    obj(17, 100, 92, 0x52)  # (not overlapping 16: PyBoy lets a lower object show through)
    obj(18, 120, 0, 0x53)  # partially off the left edge
    obj(19, 130, 156, 0x54, 0x20)  # partially off the right edge
    init = {"lcdc": 0x97, "bgp": 0xE4, "obp0": 0xD2, "obp1": 0x39}
    events = [(72, {"lcdc": 0x93})]
    return _build("sprites", vram, oam, init, events)


def stat_mode0_rom() -> MicroRom:
    """HBlank (mode 0) STAT interrupt: SCX += 1 after every line, so line L shows SCX = L."""
    vram = _random_vram(14)
    oam = np.zeros(0xA0, np.uint8)
    init = {"lcdc": 0x91, "scx": 0, "bgp": 0xE4}
    body = "    ldh a, [$43]\n    inc a\n    ldh [$43], a"
    regs = _regs_table(init, [])
    regs[:, REG_COLUMNS.index("scx")] = np.arange(H)
    return _build("stat_mode0", vram, oam, init, stat_select=0x08, stat_body=body, regs=regs)


def stat_mode2_rom() -> MicroRom:
    """OAM-scan (mode 2) STAT interrupt: SCY = 2 * LY written during the line's own mode 2.

    The handler sits in the vector itself (no JP, no PUSH: the main loop keeps nothing in A) so
    the write lands about 13 M-cycles into the line, before mode 3 starts at 20: on hardware
    too the whole line is fetched with the new SCY.
    """
    vram = _random_vram(15)
    oam = np.zeros(0xA0, np.uint8)
    init = {"lcdc": 0x91, "scy": 0, "bgp": 0xE4}
    vector = "    ldh a, [$44]\n    add a\n    ldh [$42], a\n    reti"
    regs = _regs_table(init, [])
    regs[:, REG_COLUMNS.index("scy")] = (2 * np.arange(H)) & 0xFF
    return _build("stat_mode2", vram, oam, init, stat_select=0x20, regs=regs, stat_vector=vector)


def lcd_off_rom() -> MicroRom:
    """LCD left off after setup (dark BG ready, LCDC = $11): the screen stays blank (shade 0)
    and LY reads 0; the main loop (no HALT: no interrupts come) stores LY at $C000 and STAT's
    mode bits at $C001."""
    vram = np.zeros(0x2000, np.uint8)
    vram[0:16] = 0xFF  # tile 0 all colour 3
    oam = np.zeros(0xA0, np.uint8)
    init = {"lcdc": 0x91, "bgp": 0xE4}
    body = "    ldh a, [$44]\n    ld [$C000], a\n    ldh a, [$41]\n    and 3\n    ld [$C001], a"
    rom = _build(
        "lcd_off",
        vram,
        oam,
        init,
        main_body=body,
        lcd_off_after_setup=True,
        memory={0xC000: 0, 0xC001: 0},
    )
    return rom


MICRO_ROMS = {
    "bg_scroll": bg_scroll_rom,
    "window": window_rom,
    "sprites": sprites_rom,
    "stat_mode0": stat_mode0_rom,
    "stat_mode2": stat_mode2_rom,
    "lcd_off": lcd_off_rom,
}
"""Builders of every PPU micro test ROM, by name."""
