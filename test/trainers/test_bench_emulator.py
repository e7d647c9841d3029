"""Case selection of benchmarks/emulator.py: the Color case runs both emulators in Color mode,
and an unknown game is refused by name (no timing is asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("emulator")


def _pandoras(bench) -> Path:
    path = bench.color_games(bench.games()).get("pandoras_blocks_cgb")
    if path is None or not path.is_file():
        pytest.skip("shared ROM games/pandoras-blocks not available")
    return path


def test_color_case_is_the_dual_mode_cartridge_and_not_in_the_default_set(bench):
    path = _pandoras(bench)
    assert path.suffix == ".gbc" and path.read_bytes()[0x143] & 0x80
    assert "pandoras_blocks_cgb" not in bench.games()


def test_peer_runs_the_mode_asked_for(bench, tmp_path):
    pytest.importorskip("pyboy")
    from pyboy.utils import PyBoyInvalidInputException

    rom = bench._untitled_copy(_pandoras(bench), str(tmp_path))
    for cgb in (True, False):
        pb = bench._pyboy(rom, 1, cgb=cgb)
        try:  # VRAM bank 1 exists on the Color only (PyBoy refuses the bank in DMG mode)
            if cgb:
                pb.memory[1, 0x8000]
            else:
                with pytest.raises(PyBoyInvalidInputException):
                    pb.memory[1, 0x8000]
        finally:
            pb.stop(save=False)


def test_unknown_game_is_refused_with_the_known_names(bench, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["emulator.py", "--games", "no_such_game", "--envs"])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no_such_game" in err and "pandoras_blocks_cgb" in err
