"""A small animated-GIF writer for palette frames (no PIL / imageio needed).

Why our own: the eval GIF is the only image the library writes, Game Boy frames have 4 shades,
and neither PIL nor imageio is a dependency. GIF89a with a global palette, LZW-compressed
frames, a NETSCAPE loop block and a per-frame delay; any viewer or browser plays it.

Example:
    >>> import torch
    >>> frames = torch.randint(0, 4, (10, 72, 80), dtype=torch.uint8)  # Game Boy shades
    >>> write_gif(getfixture("tmp_path") / "play.gif", frames, scale=2).name
    'play.gif'
"""

from __future__ import annotations

import struct
from pathlib import Path

import torch

from torchrl_dreamer.emulator.packed2 import DMG_SHADES_RGB

__all__ = ["write_gif"]


def _lzw(indices: bytes, min_code_size: int) -> bytes:
    """GIF-flavoured variable-width LZW of ``indices`` (codes packed LSB first)."""
    clear, eoi = 1 << min_code_size, (1 << min_code_size) + 1
    table = {bytes([i]): i for i in range(clear)}
    next_code, width = eoi + 1, min_code_size + 1
    out, acc, nbits = bytearray(), 0, 0

    def emit(code: int) -> None:
        nonlocal acc, nbits
        acc |= code << nbits
        nbits += width
        while nbits >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8

    emit(clear)
    cur = b""
    for b in indices:
        nxt = cur + bytes([b])
        if nxt in table:
            cur = nxt
            continue
        emit(table[cur])
        if next_code < 4096:
            table[nxt] = next_code
            next_code += 1
            if next_code > (1 << width) and width < 12:
                width += 1
        else:  # table full: restart it
            emit(clear)
            table = {bytes([i]): i for i in range(clear)}
            next_code, width = eoi + 1, min_code_size + 1
        cur = bytes([b])
    if cur:
        emit(table[cur])
    emit(eoi)
    if nbits:
        out.append(acc & 0xFF)
    return bytes(out)


def _blocks(data: bytes) -> bytes:
    """Split into GIF sub-blocks (<= 255 bytes each) ended by a zero-length block."""
    parts = [bytes([len(data[i:i + 255])]) + data[i:i + 255] for i in range(0, len(data), 255)]
    return b"".join(parts) + b"\x00"


def write_gif(
    path: str | Path,
    frames: torch.Tensor,
    palette: list[tuple[int, int, int]] | None = None,
    *,
    fps: float = 10.0,
    scale: int = 1,
    loop: bool = True,
) -> Path:
    """Write ``frames`` (``uint8 [T, H, W]`` palette indices) as an animated GIF.

    Args:
        path: output file.
        frames: palette indices per pixel; values must be ``< len(palette)``.
        palette: RGB triples (at most 256); default the Game Boy grey ramp
            :data:`~torchrl_dreamer.emulator.packed2.DMG_SHADES_RGB` (shade 0 white .. 3 black).
        fps: frames per second (GIF delays are in 1/100 s).
        scale: integer upscaling (nearest) for small frames.
        loop: loop forever.

    Returns:
        the path written.
    """
    palette = list(DMG_SHADES_RGB if palette is None else palette)
    if frames.dim() != 3 or frames.shape[0] < 1:
        raise ValueError(f"frames must be uint8 [T, H, W] with T >= 1, got {tuple(frames.shape)}")
    if not 1 <= len(palette) <= 256:
        raise ValueError(f"palette must have 1..256 colours, got {len(palette)}")
    frames = frames.to("cpu", torch.uint8)
    if int(frames.max()) >= len(palette):
        raise ValueError(f"frame value {int(frames.max())} has no palette entry "
                         f"({len(palette)} colours)")
    if scale > 1:
        frames = frames.repeat_interleave(scale, 1).repeat_interleave(scale, 2)
    t, h, w = frames.shape
    bits = max(1, (len(palette) - 1).bit_length())
    size = 1 << bits
    pal = palette + [(0, 0, 0)] * (size - len(palette))
    min_code = max(2, bits)
    delay = max(1, round(100.0 / fps))
    out = bytearray(b"GIF89a")
    out += struct.pack("<HHBBB", w, h, 0x80 | 0x70 | (bits - 1), 0, 0)
    out += b"".join(bytes(c) for c in pal)
    if loop:
        out += b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
    for i in range(t):
        out += struct.pack("<BBBBHBB", 0x21, 0xF9, 4, 0x04, delay, 0, 0)
        out += struct.pack("<BHHHHB", 0x2C, 0, 0, w, h, 0)
        out += bytes([min_code]) + _blocks(_lzw(frames[i].flatten().numpy().tobytes(), min_code))
    out += b"\x3b"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path
