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


class _FakeSide:
    """Records the button cycles it is asked to play; each cycle takes ``per_cycle`` seconds."""

    def __init__(self, log: list, tag: str, per_cycle: float) -> None:
        self.log, self.tag, self.per_cycle = log, tag, per_cycle
        self.gb, self.c0, self.closed = object(), 7, False

    def cycles(self, k0: int, n: int) -> float:
        self.log.append((self.tag, k0, n))
        return n * self.per_cycle

    def close(self) -> None:
        self.closed = True


def test_paired_gameplay_plays_the_same_chunks_in_turn(bench, monkeypatch):
    log: list = []
    peers: list = []
    monkeypatch.setattr(bench, "_OursPlayer", lambda path, **kw: _FakeSide(log, "ours", 1.0))

    def open_peer(path, cgb=None):
        peers.append(_FakeSide(log, "peer", 2.0))
        return peers[-1]

    monkeypatch.setattr(bench._PeerPlayer, "open", staticmethod(open_peer))
    r = bench.paired_gameplay(Path("x.gb"), 800, 200, 2, {}, {"cgb": False})
    assert r["chunks"] == 8 and r["speedup"] == 2.0 and r["c0"] == 7
    assert r["ours"] == 40.0 and r["peer"] == 20.0  # 1,600 frames in 40 and 80 cycle-seconds
    ours = [x[1:] for x in log if x[0] == "ours"]
    assert ours == [x[1:] for x in log if x[0] == "peer"] == [(0, 5), (5, 5), (10, 5), (15, 5)] * 2
    firsts = [log[2 * k][0] for k in range(8)]
    assert firsts == ["ours", "peer", "ours", "peer", "peer", "ours", "peer", "ours"]
    assert len(peers) == 2 and all(p.closed for p in peers)


def test_paired_gameplay_without_the_peer_times_ours_alone(bench, monkeypatch):
    monkeypatch.setattr(bench, "_OursPlayer", lambda path, **kw: _FakeSide([], "ours", 1.0))
    monkeypatch.setattr(bench._PeerPlayer, "open", staticmethod(lambda path, cgb=None: None))
    r = bench.paired_gameplay(Path("x.gb"), 400, 200, 1, {}, {})
    assert r["peer"] is None and r["speedup"] is None and r["ours"] == 40.0


def test_a_chunk_that_is_not_whole_button_cycles_is_refused(bench, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["emulator.py", "--chunk", "100", "--envs"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "--chunk must be a multiple of 40" in capsys.readouterr().err
