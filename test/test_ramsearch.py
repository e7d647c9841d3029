"""The batched RAM finder ranks the addresses a game's RAM map documents (our catch, and the
shared snake whose head bytes the snake task uses), and refuses a ROM that does not boot."""

from __future__ import annotations

import pytest
from conftest import rom_path as shared_rom

from torchrl_dreamer.envs.spec import parse_task_spec
from torchrl_dreamer.ramsearch import RamSearchError, draft_spec, main, ram_search
from torchrl_dreamer.roms import ram_map, rom_path


@pytest.fixture(scope="module")
def catch_result():
    return ram_search(rom_path("catch"), num_envs=16, steps=200, frame_skip=8,
                      macro=[(0, 30)], pokes=[(ram_map("catch")["NEW_GAME"], 1)], seed=0)


def test_catch_map_found(catch_result):
    ram = ram_map("catch")
    assert catch_result.position[0].address == ram["PADDLE_X"]
    assert catch_result.lives[0].address == ram["LIVES"]
    assert ram["SCORE"] in [c.address for c in catch_result.score[:6]]


def test_draft_spec_is_a_valid_spec(catch_result):
    import yaml

    spec = parse_task_spec(yaml.safe_load(draft_spec(catch_result, "catch.gb")))
    assert spec.name == "catch" and spec.explore_ram is not None
    assert spec.terminate[0].watch.address == ram_map("catch")["LIVES"]


def test_snake_head_found(roms):
    res = ram_search(shared_rom(roms, "games/gb_raw_snake/snake.gb"), num_envs=16, steps=256,
                     frame_skip=8, seed=0)
    top = [c.address for c in res.position[:3]]
    assert 0xC004 in top and 0xC005 in top  # head y / x (see envs/tasks/homebrew.py)


def test_rom_that_does_not_boot(tmp_path):
    rom = bytearray(0x8000)
    rom[0x100] = 0xD3  # an illegal opcode at the entry point: the CPU locks up
    with pytest.raises(RamSearchError, match="locked up"):
        ram_search(bytes(rom), num_envs=2, steps=4)
    path = tmp_path / "dead.gb"
    path.write_bytes(bytes(rom))
    assert main([str(path), "--envs", "2", "--steps", "4"]) == 2
