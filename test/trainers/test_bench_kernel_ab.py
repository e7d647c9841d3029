"""benchmarks/kernel_ab.py: the renamed package copy, the paired protocol and its bad input
(no timing is asserted, and no kernel is compiled)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_benchmark

_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ab():
    return load_benchmark("kernel_ab")


def test_the_copy_renames_every_import_of_the_package(ab, tmp_path):
    out = ab.copy_renamed(_ROOT, "tdx", tmp_path)
    assert (out / "emulator" / "bus.py").is_file() and not (out / "__pycache__").exists()
    for path in out.rglob("*.py"):
        assert "torchrl_dreamer" not in path.read_text(), path
    assert "from tdx.emulator." in (out / "emulator" / "bus.py").read_text()
    with pytest.raises(FileNotFoundError, match="not a checkout"):
        ab.copy_renamed(tmp_path, "tdy", tmp_path)


class _Console:
    def __init__(self, log: list, tag: str) -> None:
        self.log, self.tag = log, tag

    def run_frames(self, n: int, buttons: int = 0, render: bool = True) -> None:
        self.log.append((self.tag, n, buttons))


def test_both_sides_play_the_same_frames_taking_turns_first(ab):
    log: list = []
    r = ab.paired([_Console(log, "a"), _Console(log, "b")], [1, 2, 4], 480, 80)
    assert r["chunks"] == 6
    a = [x[1:] for x in log if x[0] == "a"]
    b = [x[1:] for x in log if x[0] == "b"]
    assert a == b and sum(n for n, _ in a) == 480
    assert [btn for n, btn in a if n == ab.PRESS] == [1, 2, 4] * 4
    per_chunk = 2 * 80 // (ab.PRESS + ab.RELEASE)  # run_frames calls per chunk
    firsts = [log[k * 2 * per_chunk][0] for k in range(6)]
    assert firsts == ["a", "b"] * 3


@pytest.mark.parametrize("argv, message", [
    (["--chunk", "100"], "multiple of 40"),
    (["--chunk", "400", "--frames", "600"], "at least two chunks"),
])
def test_bad_sizes_are_refused_by_name(ab, argv, message, capsys):
    with pytest.raises(SystemExit):
        ab.main([str(_ROOT), str(_ROOT), *argv])
    assert message in capsys.readouterr().err


def test_defaults_measure_this_checkout_against_itself(ab):
    args = ab.parse_args(["--quick"])
    assert args.baseline == args.candidate == _ROOT
    assert args.games == ["maze"] and args.frames % args.chunk == 0
    full = ab.parse_args([])
    assert full.frames == 16000 and "pandoras-blocks" in full.games
    assert ab.gameplay_rom(_ROOT / "no-roms", "maze").suffix == ".gb"  # ours need no shared folder
    with pytest.raises(FileNotFoundError, match="no ROM"):
        ab.gameplay_rom(_ROOT / "no-roms", "nope")


def test_a_rom_file_and_a_model_can_be_named(ab, tmp_path):
    rom = tmp_path / "x.gb"
    rom.write_bytes(b"\0" * 0x8000)
    assert ab.gameplay_rom(_ROOT / "no-roms", str(rom)) == rom
    args = ab.parse_args(["--games", str(rom), "--model", "cgb"])
    assert args.model == "cgb" and ab.parse_args([]).model is None
