"""DMG scanline renderer as Warp functions, shared by the CPU and CUDA emulator kernels.

The emulator core calls :func:`render_scanline` once per visible line when that line's drawing
completes (start of HBlank), with the LCD registers as they are at that moment, so mid-frame
scroll, palette and window changes come out right (per-scanline latching). The line is written as
palette-mapped DMG shades 0..3 into ``fb[i, ly, 0:160]``; :func:`pack_line_packed2` then packs even
lines into the ``packed2`` observation (see ``docs/packed2.md``).

What is rendered (DMG, Pan Docs semantics):

* background: tile maps 9800/9C00 (LCDC.3), tile data 8000 unsigned / 8800 signed (LCDC.4),
  SCX/SCY scrolling with 256x256 wrap-around;
* window: LCDC.5 and map 9800/9C00 (LCDC.6), shown from screen x = WX-7 (WX < 7 shifts it left)
  once LY == WY happened in the frame (the WY latch), with its own line counter that only
  advances on lines where the window was drawn;
* objects: LCDC.1 enable, 8x8 / 8x16 (LCDC.2, tile index bit 0 ignored), the first 10 objects of
  OAM on the line (hidden ones at X=0 or X>=168 count too), priority by X then OAM index, X/Y
  flip, OBP0/OBP1, OBJ-behind-BG (drawn only over BG/window colour 0). As on hardware the
  highest-priority opaque object pixel decides alone: when it is behind a non-zero BG pixel the
  BG shows, even if a lower-priority object is opaque there;
* LCDC.0 clear: background and window are blank (colour 0 through BGP) and objects always show;
* LCDC.7 clear (LCD off): the line is shade 0.

Where PyBoy 2.8.1 (the test oracle) departs from hardware we follow hardware; games rarely hit
these (none did in 10,000 frames of each test game): PyBoy draws the window while LCDC.0 is
clear, hides behind-BG objects while LCDC.0 is clear, lets a lower-priority object show through
a higher-priority behind-BG object on non-zero BG, and shows BGP colour 0 (not shade 0) while
the LCD is off. ``test/emulator/test_render.py`` pins each of these cases down.

The window state is one opaque ``int`` (the ``win_line`` of the contract): the core keeps it per
env, resets it to :data:`WINDOW_STATE_RESET` when a frame starts (LY = 0) and passes back what the
function returned. It packs the window line counter (low 8 bits) with the WY-latch flag.

Written for Warp (not reused from elsewhere) because the renderer must run inside the emulator's
own CPU/CUDA kernels, per env, with no allocation: every buffer is a fixed-size local.
:func:`render_frame` is a host-side helper that renders whole frames from VRAM/OAM snapshots
(tests, debugging, screenshots of saved states).
"""

from __future__ import annotations

import torch
import warp as wp

from torchrl_dreamer.emulator.registers import LCDC_BG_ON, LCDC_WIN_ON

__all__ = [
    "VRAM_SIZE",
    "OAM_SIZE",
    "LINE_REGISTERS",
    "WINDOW_STATE_RESET",
    "render_scanline",
    "render_scanline_row",
    "pack_line_packed2",
    "pack_row_packed2",
    "window_line",
    "window_state",
    "WIN_TRIGGERED",
    "WIN_COUNT_MASK",
    "line_registers",
    "render_frame",
    "obj_on_line",
    "row_pixel",
    "window_enabled",
    "SOURCE_BG",
    "SOURCE_OBJ0",
    "SOURCE_OBJ1",
]

VRAM_SIZE = 0x2000
"""Bytes of VRAM per env; index 0 is address 0x8000."""
OAM_SIZE = 0xA0
"""Bytes of OAM per env; index 0 is address 0xFE00."""
LINE_REGISTERS = ("lcdc", "scx", "scy", "wx", "wy", "bgp", "obp0", "obp1")
"""Column order of the per-line register table taken by :func:`render_frame`."""
WINDOW_STATE_RESET = 0
"""Window state at the start of every frame (counter 0, WY latch clear)."""

WIN_TRIGGERED = 0x100
"""Window state bit: the WY latch (LY == WY happened this frame)."""
WIN_COUNT_MASK = 0xFF
"""Window state bits holding the window line counter."""
_CLAIMED = 0x80  # composition byte: an object pixel decided this pixel (shade in bits 2-3,
# its palette's source in bits 4-5)
SOURCE_BG = wp.constant(0)
"""Pixel source (``sources``): BGP, the background or window (or an object behind it)."""
SOURCE_OBJ0 = wp.constant(1)
"""Pixel source: an object through OBP0."""
SOURCE_OBJ1 = wp.constant(2)
"""Pixel source: an object through OBP1."""
_SCREEN_W = 160
_SCREEN_H = 144

ObjectKeys = wp.types.vector(length=10, dtype=wp.int32)
"""A line's (at most 10) objects as sort keys (``X * 64 + OAM index`` on a DMG). Each renderer
inserts them in its own loop: one shared ``@wp.func`` for the insertion measured 2-5 % slower on
Tobu Tobu Girl (``docs/decisions/kernel_shape.md``)."""


@wp.func
def obj_on_line(y: int, line: int, h: int) -> bool:
    """Whether an object with OAM Y byte ``y`` and height ``h`` (8 or 16) covers ``line``:
    ``Y - 16 <= line < Y - 16 + h`` as one masked subtraction (the OAM scan of every
    renderer and of the mode-3 length runs it on all 40 entries)."""
    return ((line + 16 - y) & -h) == 0


@wp.func
def _tile_row_addr(vram: wp.array2d(dtype=wp.uint8), i: int, map_addr: int, lcdc: int, row: int):
    """VRAM offset of the 2 bytes of a BG/window tile row, honouring LCDC.4 addressing."""
    tile = int(vram[i, map_addr])
    base = tile * 16
    if (lcdc & 0x10) == 0:
        base = 0x800 + (tile ^ 0x80) * 16  # 8800 mode: signed index relative to 0x9000
    return base + row * 2


@wp.func
def _pixel_color(lo: int, hi: int, bit: int):
    return ((lo >> bit) & 1) | (((hi >> bit) & 1) << 1)


@wp.func
def window_enabled(lcdc: int, color_mode: bool) -> bool:
    """Whether LCDC lets the window show: LCDC.5, and on a DMG (and in the Color's compatibility
    mode) LCDC.0 too; in Color mode LCDC.0 is the background's master priority instead, so
    LCDC.5 alone. The line renderers, the pixel pipeline and the mode-3 length all ask this."""
    need = LCDC_WIN_ON | LCDC_BG_ON
    if color_mode:
        need = LCDC_WIN_ON
    return (lcdc & need) == need


@wp.func
def row_pixel(lo: int, hi: int, px: int, xflip: bool) -> int:
    """Colour index 0-3 of pixel ``px`` (0 = leftmost) of the tile row ``lo`` / ``hi``, read
    from the right end when ``xflip`` (an object's or a Color map attribute's X flip); every
    drawing path of both models."""
    bit = 7 - px
    if xflip:
        bit = px
    return _pixel_color(lo, hi, bit)


@wp.func
def _palette_shade(palette: int, color: int):
    return (palette >> (color * 2)) & 3


@wp.func
def render_scanline_row(
    i: int,
    ly: int,
    row: int,
    vram: wp.array2d(dtype=wp.uint8),
    oam: wp.array2d(dtype=wp.uint8),
    lcdc: int,
    scx: int,
    scy: int,
    wx: int,
    wy: int,
    bgp: int,
    obp0: int,
    obp1: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
    sources: bool,
) -> int:
    """Render screen line ``ly`` of env ``i`` into ``fb[i, row, 0:160]``; return the window state.

    Same as :func:`render_scanline` with the destination row separate from ``ly``, so a caller
    can use a one-line buffer (``fb`` of shape ``[N, 1, 160]``, ``row = 0``). Lines outside
    0..143 are ignored (nothing written, state unchanged). With ``sources`` each pixel also
    says which palette drew it, as ``shade | source << 2`` (:data:`SOURCE_BG`,
    :data:`SOURCE_OBJ0`, :data:`SOURCE_OBJ1`): the Color's compatibility mode colours the line
    from that (:func:`~.render_compat.colour_line_compat`).
    """
    if ly < 0 or ly >= _SCREEN_H:
        return win_line
    if (lcdc & 0x80) == 0:
        for x in range(_SCREEN_W):
            fb[i, row, x] = wp.uint8(0)
        return win_line

    triggered = (win_line & WIN_TRIGGERED) != 0 or ly == wy
    win_count = win_line & WIN_COUNT_MASK
    window_on = window_enabled(lcdc, False) and triggered and wx < 167
    win_x0 = wx - 7

    # Pass 1: background / window colour indices 0..3 into fb.
    if (lcdc & 0x01) == 0:
        for x in range(_SCREEN_W):
            fb[i, row, x] = wp.uint8(0)
    else:
        bg_end = int(_SCREEN_W)
        if window_on:
            bg_end = wp.max(win_x0, 0)
        bg_map = 0x1800
        if (lcdc & 0x08) != 0:
            bg_map = 0x1C00
        y = (ly + scy) & 255
        map_row = bg_map + (y >> 3) * 32
        lo = int(0)  # noqa: UP018 (Warp: a dynamic variable, not a constant)
        hi = int(0)  # noqa: UP018 (Warp: a dynamic variable, not a constant)
        for x in range(bg_end):
            bx = (x + scx) & 255
            if x == 0 or (bx & 7) == 0:
                addr = _tile_row_addr(vram, i, map_row + (bx >> 3), lcdc, y & 7)
                lo = int(vram[i, addr])
                hi = int(vram[i, addr + 1])
            fb[i, row, x] = wp.uint8(_pixel_color(lo, hi, 7 - (bx & 7)))
        if window_on:
            win_map = 0x1800
            if (lcdc & 0x40) != 0:
                win_map = 0x1C00
            wrow = win_map + (win_count >> 3) * 32
            x_start = wp.max(win_x0, 0)
            for x in range(x_start, _SCREEN_W):
                wxp = x - win_x0
                if x == x_start or (wxp & 7) == 0:
                    addr = _tile_row_addr(vram, i, wrow + (wxp >> 3), lcdc, win_count & 7)
                    lo = int(vram[i, addr])
                    hi = int(vram[i, addr + 1])
                fb[i, row, x] = wp.uint8(_pixel_color(lo, hi, 7 - (wxp & 7)))
            win_count = win_count + 1

    # Pass 2: objects, highest priority first; the first opaque object pixel claims the pixel.
    if (lcdc & 0x02) != 0:
        height = 8
        if (lcdc & 0x04) != 0:
            height = 16
        keys = ObjectKeys()
        n = int(0)  # noqa: UP018
        for s in range(40):
            if n < 10:
                if obj_on_line(int(oam[i, s * 4]), ly, height):
                    key = int(oam[i, s * 4 + 1]) * 64 + s  # X first, then OAM index
                    k = n
                    while k > 0:
                        if keys[k - 1] > key:
                            keys[k] = keys[k - 1]
                            k = k - 1
                        else:
                            break
                    keys[k] = key
                    n = n + 1
        for t in range(n):
            s = keys[t] & 63
            sx = (keys[t] >> 6) - 8
            sy = int(oam[i, s * 4]) - 16
            tile = int(oam[i, s * 4 + 2])
            attr = int(oam[i, s * 4 + 3])
            if height == 16:
                tile = tile & 0xFE
            line = ly - sy
            if (attr & 0x40) != 0:
                line = height - 1 - line
            addr = tile * 16 + line * 2
            lo = int(vram[i, addr])
            hi = int(vram[i, addr + 1])
            pal = obp0
            obj_source = SOURCE_OBJ0
            if (attr & 0x10) != 0:
                pal = obp1
                obj_source = SOURCE_OBJ1
            for px in range(8):
                x = sx + px
                if x >= 0 and x < _SCREEN_W:
                    v = int(fb[i, row, x])
                    if (v & _CLAIMED) == 0:
                        c = row_pixel(lo, hi, px, (attr & 0x20) != 0)
                        if c != 0:
                            shade = _palette_shade(pal, c)
                            src = obj_source
                            if (attr & 0x80) != 0 and (v & 3) != 0:
                                shade = _palette_shade(bgp, v & 3)
                                src = SOURCE_BG
                            fb[i, row, x] = wp.uint8(_CLAIMED | (src << 4) | (shade << 2) | (v & 3))

    # Pass 3: resolve to shades (and, with ``sources``, the palette each came from).
    keep = 3  # an object pixel's bits 2-3 (shade), with ``sources`` also 4-5 (its palette)
    if sources:
        keep = 15
    for x in range(_SCREEN_W):
        v = int(fb[i, row, x])
        shade = _palette_shade(bgp, v & 3)
        if (v & _CLAIMED) != 0:
            shade = (v >> 2) & keep
        fb[i, row, x] = wp.uint8(shade)

    state = win_count
    if triggered:
        state = state | WIN_TRIGGERED
    return state


@wp.func
def render_scanline(
    i: int,
    ly: int,
    vram: wp.array2d(dtype=wp.uint8),
    oam: wp.array2d(dtype=wp.uint8),
    lcdc: int,
    scx: int,
    scy: int,
    wx: int,
    wy: int,
    bgp: int,
    obp0: int,
    obp1: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
) -> int:
    """Render visible line ``ly`` (0..143) of env ``i`` into ``fb[i, ly, 0:160]`` as shades 0..3.

    ``vram[i, a]`` is address ``0x8000 + a``, ``oam[i, a]`` is ``0xFE00 + a``; registers are their
    raw byte values at the end of the line's drawing. ``win_line`` is the opaque window state
    (start each frame with :data:`WINDOW_STATE_RESET`); returns the state for the next line.
    """
    return render_scanline_row(
        i, ly, ly, vram, oam, lcdc, scx, scy, wx, wy, bgp, obp0, obp1, win_line, fb, False
    )


@wp.func
def pack_row_packed2(
    i: int, ly: int, row: int, fb: wp.array3d(dtype=wp.uint8), obs: wp.array4d(dtype=wp.uint8)
):
    """For even ``ly``: pack ``fb[i, row, 0:160:2]`` into ``obs[i, 0, ly // 2, 0:20]``."""
    if (ly & 1) == 0 and ly < _SCREEN_H:
        oy = ly >> 1
        for b in range(20):
            v = int(0)  # noqa: UP018
            for k in range(4):
                v = v | ((int(fb[i, row, b * 8 + k * 2]) & 3) << (k * 2))
            obs[i, 0, oy, b] = wp.uint8(v)


@wp.func
def pack_line_packed2(
    i: int, ly: int, fb: wp.array3d(dtype=wp.uint8), obs: wp.array4d(dtype=wp.uint8)
):
    """For even ``ly``: pack ``fb[i, ly, 0:160:2]`` into ``obs[i, 0, ly // 2, 0:20]``.

    2 bits per pixel, leftmost pixel in the low bits (``docs/packed2.md``); odd lines are skipped.
    """
    pack_row_packed2(i, ly, ly, fb, obs)


@wp.func
def window_line(win_state: int) -> int:
    """The window's internal line counter held in a window state word."""
    return win_state & WIN_COUNT_MASK


@wp.func
def window_state(count: int, triggered: bool) -> int:
    """The window state word of a window line counter (wrapped to 8 bits) and the WY latch."""
    state = count & WIN_COUNT_MASK
    if triggered:
        state = state | WIN_TRIGGERED
    return state


@wp.kernel
def _render_frame_kernel(
    vram: wp.array2d(dtype=wp.uint8),
    oam: wp.array2d(dtype=wp.uint8),
    regs: wp.array3d(dtype=wp.int32),
    fb: wp.array3d(dtype=wp.uint8),
    obs: wp.array4d(dtype=wp.uint8),
):
    i = wp.tid()
    win = int(WINDOW_STATE_RESET)
    for ly in range(_SCREEN_H):
        win = render_scanline(
            i,
            ly,
            vram,
            oam,
            regs[i, ly, 0],
            regs[i, ly, 1],
            regs[i, ly, 2],
            regs[i, ly, 3],
            regs[i, ly, 4],
            regs[i, ly, 5],
            regs[i, ly, 6],
            regs[i, ly, 7],
            win,
            fb,
        )
        pack_line_packed2(i, ly, fb, obs)


def line_registers(num_envs: int = 1, device: torch.device | str = "cpu", **values) -> torch.Tensor:
    """Build the ``int32[N, 144, 8]`` per-line register table for :func:`render_frame`.

    Each keyword of :data:`LINE_REGISTERS` takes an int (all envs, all lines) or a tensor
    broadcastable to ``[N, 144]`` (e.g. ``[144]`` for a per-line value). Unspecified registers
    default to the post-boot DMG values (LCDC 0x91, BGP 0xFC, OBP0/OBP1 0xFF, others 0).

    Example:
        >>> regs = line_registers(2, lcdc=0x93, scx=torch.arange(144) % 256)
        >>> regs.shape
        torch.Size([2, 144, 8])
    """
    unknown = set(values) - set(LINE_REGISTERS)
    if unknown:
        raise ValueError(
            f"unknown registers {sorted(unknown)}; expected names from {LINE_REGISTERS}"
        )
    defaults = {"lcdc": 0x91, "bgp": 0xFC, "obp0": 0xFF, "obp1": 0xFF}
    regs = torch.zeros(num_envs, _SCREEN_H, len(LINE_REGISTERS), dtype=torch.int32, device=device)
    for col, name in enumerate(LINE_REGISTERS):
        value = values.get(name, defaults.get(name, 0))
        regs[:, :, col] = torch.as_tensor(value, device=device).to(torch.int32) & 0xFF
    return regs


def render_frame(
    vram: torch.Tensor, oam: torch.Tensor, regs: torch.Tensor, packed2: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Render whole frames from VRAM/OAM snapshots with the in-kernel renderer.

    Args:
        vram: ``uint8[N, 0x2000]`` (0x8000-0x9FFF).
        oam: ``uint8[N, 0xA0]`` (0xFE00-0xFE9F).
        regs: ``int32[N, 144, 8]`` register values per line (:func:`line_registers`).
        packed2: also return the ``uint8[N, 1, 72, 20]`` packed2 observation.

    Returns:
        Shades ``uint8[N, 144, 160]`` (and packed2), on the inputs' device (CPU or CUDA).
    """
    n = vram.shape[0] if vram.dim() == 2 else -1
    if vram.dtype != torch.uint8 or tuple(vram.shape) != (n, VRAM_SIZE):
        raise ValueError(
            f"vram must be uint8 [N, {VRAM_SIZE:#x}], got {vram.dtype} {tuple(vram.shape)}"
        )
    if oam.dtype != torch.uint8 or tuple(oam.shape) != (n, OAM_SIZE):
        raise ValueError(
            f"oam must be uint8 [{n}, {OAM_SIZE:#x}], got {oam.dtype} {tuple(oam.shape)}"
        )
    if tuple(regs.shape) != (n, _SCREEN_H, len(LINE_REGISTERS)):
        raise ValueError(
            f"regs must be [{n}, 144, {len(LINE_REGISTERS)}] (see line_registers), got {tuple(regs.shape)}"
        )
    if oam.device != vram.device or regs.device != vram.device:
        raise ValueError("vram, oam and regs must be on the same device")
    wp.init()  # idempotent; from_torch needs the runtime
    device = vram.device
    vram = vram.contiguous()
    oam = oam.contiguous()
    regs = regs.to(torch.int32).contiguous()
    fb = torch.empty(n, _SCREEN_H, _SCREEN_W, dtype=torch.uint8, device=device)
    obs = torch.empty(n, 1, _SCREEN_H // 2, 20, dtype=torch.uint8, device=device)
    wp.launch(
        _render_frame_kernel,
        dim=n,
        inputs=[
            wp.from_torch(vram),
            wp.from_torch(oam),
            wp.from_torch(regs),
            wp.from_torch(fb),
            wp.from_torch(obs),
        ],
        device=str(device) if device.type == "cuda" else "cpu",
    )
    return (fb, obs) if packed2 else fb
