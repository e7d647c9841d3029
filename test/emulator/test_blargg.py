"""blargg's test ROMs must report "Passed" (serial text, the A000 status protocol, or the screen).

PyBoy fails instr_timing and halt_bug; we must not. Each ROM runs until it reports a verdict or
hits its frame budget; the verdict text is part of the failure message.
"""

from __future__ import annotations

import pytest
import torch
from conftest import rom_path

from torchrl_dreamer.emulator import GameBoy

CASES = [
    ("cpu_instrs/individual/01-special.gb", 1500),
    ("cpu_instrs/individual/02-interrupts.gb", 1500),
    ("cpu_instrs/individual/03-op sp,hl.gb", 1500),
    ("cpu_instrs/individual/04-op r,imm.gb", 1500),
    ("cpu_instrs/individual/05-op rp.gb", 1500),
    ("cpu_instrs/individual/06-ld r,r.gb", 1500),
    ("cpu_instrs/individual/07-jr,jp,call,ret,rst.gb", 1500),
    ("cpu_instrs/individual/08-misc instrs.gb", 1500),
    ("cpu_instrs/individual/09-op r,r.gb", 2000),
    ("cpu_instrs/individual/10-bit ops.gb", 2500),
    ("cpu_instrs/individual/11-op a,(hl).gb", 3000),
    ("cpu_instrs/cpu_instrs.gb", 6000),
    ("instr_timing/instr_timing.gb", 1000),
    ("mem_timing/individual/01-read_timing.gb", 1000),
    ("mem_timing/individual/02-write_timing.gb", 1000),
    ("mem_timing/individual/03-modify_timing.gb", 1000),
    ("mem_timing/mem_timing.gb", 1000),
    ("mem_timing-2/rom_singles/01-read_timing.gb", 1000),
    ("mem_timing-2/rom_singles/02-write_timing.gb", 1000),
    ("mem_timing-2/rom_singles/03-modify_timing.gb", 1000),
    ("mem_timing-2/mem_timing.gb", 1000),
    ("halt_bug.gb", 1000),
]


def screen_text(gb: GameBoy, env: int = 0) -> str:
    """The BG map at 9800 as text (blargg's font maps tile n to ASCII n)."""
    rows = gb.read_memory(0x9800, 32 * 18)[env].view(18, 32).tolist()
    return "\n".join(bytes(c if 32 <= c < 127 else 32 for c in r).decode().rstrip() for r in rows)


def verdict(gb: GameBoy, env: int = 0) -> str | None:
    """The test's verdict text once it has one, else None."""
    serial = gb.serial_output(env).decode(errors="replace")
    if "Passed" in serial or "Failed" in serial:
        return serial
    a0 = gb.read_memory(0xA000, 0x2000)[env].tolist()  # the text can be long (oam_bug)
    if a0[1:4] == [0xDE, 0xB0, 0x61] and a0[0] != 0x80:
        return bytes(a0[4:]).split(b"\0")[0].decode(errors="replace")
    text = screen_text(gb, env)
    if "Passed" in text or "Failed" in text:
        return text
    return None


def run_until_verdict(gb: GameBoy, max_frames: int, chunk: int = 100) -> str | None:
    frames = 0
    while frames < max_frames:
        gb.run_frames(chunk)
        frames += chunk
        v = verdict(gb)
        if v is not None:
            return v
    return None


@pytest.mark.parametrize("rel,max_frames", CASES, ids=[c[0] for c in CASES])
def test_blargg_passes(roms, rel, max_frames):
    gb = GameBoy(rom_path(roms, "blargg/" + rel), check_header=False)
    v = run_until_verdict(gb, max_frames)
    assert v is not None, f"{rel}: no verdict after {max_frames} frames"
    assert "Passed" in v and "Failed" not in v, f"{rel} failed:\n{v}"
    assert not bool(gb.locked[0])


def test_blargg_multi_env_matches_single(roms):
    """N consoles in one launch give exactly the single-console result (same ROM, same inputs)."""
    path = rom_path(roms, "blargg/cpu_instrs/individual/04-op r,imm.gb")
    many = GameBoy(path, num_envs=3, check_header=False)
    one = GameBoy(path, num_envs=1, check_header=False)
    many.run_frames(300)
    one.run_frames(300)
    for k, v in one.registers().items():
        assert torch.equal(many.registers()[k], v.expand(3)), k
    for env in range(3):
        assert many.serial_output(env) == one.serial_output(0)
        assert "Passed" in many.serial_output(env).decode()
