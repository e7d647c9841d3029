"""Random PPU scenes for the pixel pipeline's equivalence tests (``test_ppu_fifo*.py``), and the
pipeline run they compare."""

from __future__ import annotations

import torch
import warp as wp

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.fifo import fifo_run, fifo_start
from torchrl_dreamer.emulator.layout import FIELDS, S_WIN_LINE
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.ppu import MODE3_DOT, mode3_end


def randomize_objects_and_registers(gb: GameBoy, line: int, g: torch.Generator,
                                    registers: tuple[int, ...]) -> None:
    """OAM with objects near ``line`` (X anywhere, incl. < 8 and >= 160, and clusters), the LCD
    registers ``registers`` (FF00 offsets) random, LCDC random with the LCD on, WY around
    ``line``, WX 7-171, and a window state (line counter, and the WY latch set when WY matched
    an earlier line), for every console of ``gb``."""
    n = gb.num_envs
    t = gb.state_tensors()
    oam = torch.randint(0, 256, (n, 0xA0), generator=g, dtype=torch.uint8)
    oam[:, 0::4] = (line + 16 - torch.randint(0, 18, (n, 40), generator=g)).to(torch.uint8)
    few = torch.randint(0, 12, (n, 40), generator=g) < 4  # some X in the left 8 pixels / clusters
    oam[:, 1::4] = torch.where(few, torch.randint(0, 12, (n, 40), generator=g),
                               oam[:, 1::4].to(torch.int64)).to(torch.uint8)
    t["oam"][:] = oam
    hram = t["hram"]
    for r in registers:
        hram[:, r] = torch.randint(0, 256, (n,), generator=g, dtype=torch.uint8)
    hram[:, 0x40] = (torch.randint(0, 128, (n,), generator=g) | 0x80).to(torch.uint8)
    hram[:, 0x4A] = torch.randint(0, line + 20, (n,), generator=g).to(torch.uint8)
    hram[:, 0x4B] = torch.randint(7, 172, (n,), generator=g).to(torch.uint8)
    st = t["st"]
    latch = (hram[:, 0x4A].to(torch.int64) < line).to(torch.int32) << 8
    st[:, FIELDS["WIN_LINE"]] = torch.randint(0, 40, (n,), generator=g).to(torch.int32) | latch
    st[:, FIELDS["PPU_M0"]] = 0


@wp.func
def run_pipeline_to_end(i: int, m: wp.ref[Mem], line: int, out: wp.array2d(dtype=wp.int32)) -> int:
    """Run ``line``'s pixel pipeline of console ``i`` from mode-3 start to its end with the
    registers as they are, drawing; ``out[i, 0]`` its mode-3 end, ``out[i, 1]``
    :func:`~torchrl_dreamer.emulator.ppu.mode3_end`'s. Returns the window state it started from."""
    wl = m.st[i, S_WIN_LINE]
    fifo_start(i, m, line, MODE3_DOT, wl)
    out[i, 0] = fifo_run(i, m, line, MODE3_DOT, 1 << 20, True, False, wl & 0xFF)
    out[i, 1] = mode3_end(i, m, line)
    return wl
