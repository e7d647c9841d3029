"""benchmarks/event_paths.py: each micro ROM keeps the CPU busy and takes the interrupts it names,
and bad input is refused by name (no timing is asserted)."""

from __future__ import annotations

import pytest
from conftest import load_benchmark

from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.layout import FIELDS


@pytest.fixture(scope="module")
def ep():
    return load_benchmark("event_paths")


def _run(ep, case: str, frames: int = 20) -> GameBoy:
    gb = GameBoy(ep.build(case), check_header=False)
    gb.run_frames(frames, render=False)
    st = gb.state_tensors()["st"][0]
    assert int(st[FIELDS["LOCKED"]]) == 0
    assert 0x150 <= int(st[FIELDS["PC"]]) < 0x200  # in its code, not lost in memory
    return gb


def test_every_case_builds_and_runs(ep):
    assert set(ep.CASES) == {"cpu_loop", "hblank_irq", "lyc_irq", "timer_irq", "vblank_frame",
                             "apu_driver"}
    for case in ep.CASES:
        gb = _run(ep, case)
        assert int(gb.read_memory(0xC100, 200)[0].count_nonzero()) > 0  # the work ran


def test_each_case_takes_its_interrupts(ep):
    # 20 frames of 144 HBlank interrupts, one count each (mod 256), SCX following it
    gb = _run(ep, "hblank_irq")
    count = int(gb.read_memory(0xC000, 1)[0, 0])
    assert abs(count - (20 * 144) % 256) <= 2  # (where the first frame starts)
    assert int(gb.read_memory(0xFF43, 1)[0, 0]) == count
    # the LYC handler walks LYC over the visible lines in steps of 8
    lyc = {int(_run(ep, "lyc_irq", n).read_memory(0xFF45, 1)[0, 0]) for n in (19, 20, 21)}
    assert lyc and all(v % 8 == 0 and v < 144 for v in lyc)
    # 4,096 Hz for 20 frames (~1,373 interrupts), counted mod 256
    assert int(_run(ep, "timer_irq").read_memory(0xC000, 1)[0, 0]) != 0
    # the HRAM DMA routine was copied whole, and its DMA filled OAM from the work's page C1
    gb = _run(ep, "vblank_frame")
    assert gb.read_memory(0xFF80, 10)[0].tolist()[-1] == 0xC9  # its RET
    assert int(gb.read_memory(0xFE00, 160)[0].count_nonzero()) > 100
    # one sound step a frame
    assert int(_run(ep, "apu_driver").read_memory(0xC000, 1)[0, 0]) == 20


@pytest.mark.parametrize("argv, message", [
    (["--cases", "nope"], "unknown case(s) ['nope']"),
    (["--frames", "10"], "at least 200"),
    (["--rounds", "0"], "at least 1"),
])
def test_bad_input_is_refused_by_name(ep, argv, message, capsys):
    with pytest.raises(SystemExit):
        ep.main(argv)
    assert message in capsys.readouterr().err
