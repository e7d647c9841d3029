"""Tests for the games we ship (torchrl_dreamer/roms): reproducible builds and, run in PyBoy,
the behaviour their RAM interface documents (docs/roms.md)."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np
import pytest

from torchrl_dreamer.asm import global_checksum, header_checksum
from torchrl_dreamer.roms import GAMES, assemble_game, build_game, ram_map, rom_path
from torchrl_dreamer.roms.build import main as build_main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "roms.md"
PALETTE = (0xFFFFFF, 0xAAAAAA, 0x555555, 0x000000)
PRESS, RELEASE = 8, 16  # the env's default step: button held 8 frames, released for 16


# ------------------------------------------------------------------ builds
@pytest.mark.parametrize("game", sorted(GAMES))
def test_rebuild_equals_committed(game):
    assert rom_path(game).read_bytes() == build_game(game)


def test_build_check_cli(capsys):
    assert build_main(["--check"]) == 0
    out = capsys.readouterr().out
    assert all(f"{g}: ok" in out for g in GAMES)
    with pytest.raises(SystemExit):
        build_main(["--check", "nosuchgame"])


@pytest.mark.parametrize("game", sorted(GAMES))
def test_header(game):
    rom = rom_path(game).read_bytes()
    assert len(rom) == 32768
    assert rom[0x147] == 0 and rom[0x148] == 0 and rom[0x149] == 0  # ROM only, 32 KiB, no RAM
    assert rom[0x143] == 0  # DMG
    assert rom[0x134:0x144].rstrip(b"\0").decode() == GAMES[game].title
    assert rom[0x104:0x134] == bytes(48)  # no Nintendo logo shipped
    assert rom[0x14D] == header_checksum(rom)
    assert (rom[0x14E] << 8 | rom[0x14F]) == global_checksum(rom)


@pytest.mark.parametrize("game", sorted(GAMES))
def test_ram_map_documented(game):
    """Every WRAM symbol of the game is documented with its address in docs/roms.md."""
    rmap = ram_map(game)
    assert rmap["GAME_STATE"] == 0xC000 and rmap["NEW_GAME"] == 0xC001
    assert rmap["SEED"] == 0xC002
    doc = DOCS.read_text()
    section = doc.split(f"## {game}")[1].split("\n## ")[0]
    common = doc.split("## Shared RAM interface")[1].split("\n## ")[0]
    for name, addr in rmap.items():
        if name == "VBLANK_FLAG":
            continue
        rows = [ln for ln in (section + common).splitlines() if ln.startswith("| `$")]
        assert any(f"| `${addr:04X}` | `{name}` |" in ln for ln in rows), (game, name, hex(addr))


# ------------------------------------------------------------------ PyBoy helpers
class Console:
    """A shipped game in PyBoy, driven like the env drives it."""

    def __init__(self, game: str):
        pyboy = pytest.importorskip("pyboy")
        self.gb = pyboy.PyBoy(str(rom_path(game)), window="null", sound_emulated=False,
                              color_palette=PALETTE)
        self.gb.set_emulation_speed(0)
        self.ram = ram_map(game)
        self.gb.tick(100, False)  # PyBoy's boot ROM, then the game's init
        assert self["GAME_STATE"] == 0

    def __getitem__(self, name: str) -> int:
        return self.gb.memory[self.ram[name]]

    def __setitem__(self, name: str, value: int) -> None:
        self.gb.memory[self.ram[name]] = value

    def new_game(self, seed: int) -> None:
        self["SEED"] = seed
        self["NEW_GAME"] = 1
        self.gb.tick(2, False)
        assert self["GAME_STATE"] == 1 and self["NEW_GAME"] == 0

    def step(self, button: str | None) -> None:
        if button:
            self.gb.button_press(button)
        self.gb.tick(PRESS, False)
        if button:
            self.gb.button_release(button)
        self.gb.tick(RELEASE, False)

    def screen(self) -> np.ndarray:
        """Shades 0..3 of the 80x72 observation (top-left pixel of each 2x2 block)."""
        self.gb.tick(1, True)
        self.gb.tick(1, True)  # PyBoy's first rendered frame after unrendered ticks can be stale
        rgb = np.asarray(self.gb.screen.ndarray)[:, :, 0]
        return (3 - rgb.astype(np.int64) // 85)[::2, ::2]

    def close(self) -> None:
        self.gb.stop(save=False)


@pytest.fixture
def maze():
    c = Console("maze")
    yield c
    c.close()


@pytest.fixture
def catch():
    c = Console("catch")
    yield c
    c.close()


# ------------------------------------------------------------------ maze
MOVES = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def maze_grid(c: Console) -> np.ndarray:
    return np.array([c.gb.memory[c.ram["MAZE"] + i] for i in range(81)]).reshape(9, 9)


def shortest_path(grid: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> list[str]:
    prev: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    q = deque([start])
    while q:
        cell = q.popleft()
        for name, (dx, dy) in MOVES.items():
            n = (cell[0] + dx, cell[1] + dy)
            if grid[n[1], n[0]] != 1 and n not in prev:
                prev[n] = (cell, name)
                q.append(n)
    path, cell = [], goal
    while prev[cell] is not None:
        cell, name = prev[cell]  # type: ignore[misc]
        path.append(name)
    return path[::-1]


def cell_pixels(obs: np.ndarray, x: int, y: int) -> np.ndarray:
    """The 8x8 observation pixels of maze cell (x, y) (cells are 16x16 screen pixels at x+8)."""
    return obs[y * 8: y * 8 + 8, 4 + x * 8: 4 + x * 8 + 8]


def test_maze_layouts_from_rom(maze):
    """The layout byte picks one of 16 layouts stored in ROM; MAZE holds it; exit and start fit."""
    prog = assemble_game("maze")
    rom = rom_path("maze").read_bytes()
    table = prog.symbols["layout_table"]
    for layout in (0, 5, 15, 16 + 3):
        maze.new_game(layout)
        ptr = rom[table + 2 * (layout % 16)] | rom[table + 2 * (layout % 16) + 1] << 8
        data = rom[ptr: ptr + 85]
        grid = maze_grid(maze)
        assert grid.flatten().tolist() == list(data[:81])
        assert (maze["PLAYER_X"], maze["PLAYER_Y"], maze["EXIT_X"], maze["EXIT_Y"]) == tuple(data[81:])
        assert maze["ACTIVE_LAYOUT"] == layout % 16
        assert grid[maze["EXIT_Y"], maze["EXIT_X"]] == 2 and (grid == 2).sum() == 1
        assert grid[0].all() and grid[-1].all() and grid[:, 0].all() and grid[:, -1].all()


def test_maze_screen_shows_layout_and_layouts_differ(maze):
    screens = []
    for layout in range(16):
        maze.new_game(layout)
        obs = maze.screen()
        grid = maze_grid(maze)
        px, py = maze["PLAYER_X"], maze["PLAYER_Y"]
        for y in range(9):
            for x in range(9):
                cell = cell_pixels(obs, x, y)
                if (x, y) == (px, py):
                    # player ring: black 6x6 with a white 2x2 hole, white 1-pixel margin
                    assert cell[1:7, 1:7].sum() == 3 * 32 and (cell[3:5, 3:5] == 0).all()
                    assert (cell[0] == 0).all() and (cell[:, 0] == 0).all()
                elif grid[y, x] == 1:
                    assert (cell == 3).all()
                elif grid[y, x] == 2:
                    assert sorted(np.unique(cell).tolist()) == [0, 3] and (cell == 3).sum() == 32
                    assert cell[0, 0] == 3 and cell[0, 2] == 0 and cell[2, 0] == 0
                else:
                    assert (cell == 0).all()
        assert (obs[:, :4] == 0).all() and (obs[:, 76:] == 0).all()  # margins
        screens.append(obs)
    flat = {s.tobytes() for s in screens}
    assert len(flat) == 16


def test_maze_walls_block_and_one_move_per_step(maze):
    maze.new_game(2)
    grid = maze_grid(maze)
    x, y = maze["PLAYER_X"], maze["PLAYER_Y"]
    blocked = [d for d, (dx, dy) in MOVES.items() if grid[y + dy, x + dx] == 1]
    free = [d for d, (dx, dy) in MOVES.items() if grid[y + dy, x + dx] != 1]
    assert blocked and free
    maze.step(blocked[0])
    assert (maze["PLAYER_X"], maze["PLAYER_Y"]) == (x, y)
    assert maze["BUMPS"] == 1 and maze["MOVES"] == 0
    maze.step(free[0])
    dx, dy = MOVES[free[0]]
    assert (maze["PLAYER_X"], maze["PLAYER_Y"]) == (x + dx, y + dy)
    assert maze["MOVES"] == 1
    maze.step(None)
    assert (maze["PLAYER_X"], maze["PLAYER_Y"]) == (x + dx, y + dy)


def straight_run(grid: np.ndarray) -> tuple[tuple[int, int], str]:
    """A floor cell with at least 3 free cells to its right."""
    for y in range(1, 8):
        for x in range(1, 5):
            if all(grid[y, x + k] != 1 for k in range(4)):
                return (x, y), "right"
    raise AssertionError("no straight corridor")


def test_maze_auto_repeat_while_held(maze):
    """Holding a direction moves on the press and then every 12 frames."""
    maze.new_game(0)
    grid = maze_grid(maze)
    (x, y), _ = straight_run(grid)
    for d in shortest_path(grid, (maze["PLAYER_X"], maze["PLAYER_Y"]), (x, y)):
        maze.step(d)
    assert (maze["PLAYER_X"], maze["PLAYER_Y"]) == (x, y) and maze["GAME_STATE"] == 1
    maze.gb.button_press("right")
    maze.gb.tick(2, False)  # the press is seen at the next VBlank
    assert maze["PLAYER_X"] == x + 1
    t = 0
    while maze["PLAYER_X"] == x + 1:
        maze.gb.tick(1, False)
        t += 1
    assert maze["PLAYER_X"] == x + 2 and 10 <= t <= 12
    maze.gb.tick(11, False)
    assert maze["PLAYER_X"] == x + 2
    maze.gb.tick(1, False)
    assert maze["PLAYER_X"] == x + 3
    maze.gb.button_release("right")
    maze.gb.tick(30, False)
    assert maze["PLAYER_X"] == x + 3


def test_maze_every_layout_solvable_and_exit_wins(maze):
    lengths = []
    for layout in range(16):
        maze.new_game(layout)
        start = (maze["PLAYER_X"], maze["PLAYER_Y"])
        goal = (maze["EXIT_X"], maze["EXIT_Y"])
        path = shortest_path(maze_grid(maze), start, goal)
        lengths.append(len(path))
        for i, d in enumerate(path):
            assert maze["GAME_STATE"] == 1 and maze["WON"] == 0
            maze.step(d)
            assert maze["MOVES"] == i + 1
        assert (maze["PLAYER_X"], maze["PLAYER_Y"]) == goal
        assert maze["GAME_STATE"] == 2 and maze["WON"] == 1
        maze.step("left")  # finished: input no longer moves the player
        assert (maze["PLAYER_X"], maze["PLAYER_Y"]) == goal and maze["GAME_STATE"] == 2
    assert min(lengths) >= 6 and max(lengths) <= 20
    assert len(set(lengths)) > 3


def test_maze_new_game_resets_after_win(maze):
    maze.new_game(0)
    path = shortest_path(maze_grid(maze), (maze["PLAYER_X"], maze["PLAYER_Y"]),
                         (maze["EXIT_X"], maze["EXIT_Y"]))
    for d in path[:-1]:
        maze.step(d)
    before = maze.screen()
    assert (cell_pixels(before, 0, 0) == 3).all() and (before[:, :4] == 0).all()
    maze.step(path[-1])
    assert maze["GAME_STATE"] == 2
    won = maze.screen()  # the won screen is inverted: walls white, margins black
    assert (cell_pixels(won, 0, 0) == 0).all() and (won[:, :4] == 3).all()
    grid = maze_grid(maze)
    for y in range(9):
        for x in range(9):
            if grid[y, x] == 1:
                assert (cell_pixels(won, x, y) == 0).all()
    maze.new_game(1)
    assert maze["WON"] == 0 and maze["MOVES"] == 0 and maze["BUMPS"] == 0
    assert maze["ACTIVE_LAYOUT"] == 1
    again = maze.screen()  # palette restored
    assert (cell_pixels(again, 0, 0) == 3).all() and (again[:, :4] == 0).all()


@pytest.mark.parametrize("game", sorted(GAMES))
def test_start_frames_show_the_new_game(game):
    """After `start_frames` rendered frames from the request, the new game is fully on screen."""
    c = Console(game)
    try:
        for seed in (0, 1):
            c.gb.tick(5 + seed * 7, True)  # request at different points of the frame
            c["SEED"] = seed
            c["NEW_GAME"] = 1
            for _ in range(GAMES[game].start_frames):
                c.gb.tick(1, True)
            rgb = np.asarray(c.gb.screen.ndarray)[:, :, 0]
            obs = (3 - rgb.astype(np.int64) // 85)[::2, ::2]
            assert c["GAME_STATE"] == 1
            if game == "maze":
                walls = (maze_grid(c) == 1).sum()
                assert (obs == 3).sum() == 64 * walls + 32 + 32  # walls, exit, player ring
            elif game == "runner":
                assert (obs[:48] == 0).all()  # the title letters are gone, no block yet
                assert (obs[48:56, 12:16] == 3).sum() == 27  # the runner stands (eye, legs)
                assert (obs[56] == 3).all()  # the ground line
                for k in range(4):  # score 0000 in the window at the bottom
                    digit = obs[65:70, 32 + 4 * k: 35 + 4 * k].flatten()
                    assert "".join("1" if v == 3 else "0" for v in digit) == FONT[0]
            else:
                assert read_lives(obs) == 3 and read_score(obs) == 0
                assert (obs[64:68] == 3).sum() == 48  # the paddle
    finally:
        c.close()


def test_maze_waiting_screen_hides_player(maze):
    obs = maze.screen()
    assert (obs == 0).all()
    maze.gb.button_press("start")  # human play: START starts the next layout
    maze.gb.tick(4, False)
    maze.gb.button_release("start")
    assert maze["GAME_STATE"] == 1 and maze["ACTIVE_LAYOUT"] == 1


# ------------------------------------------------------------------ catch
FONT = {  # 3x5 digits, an independent copy of the documented font
    0: "111101101101111", 1: "010110010010111", 2: "111001111100111", 3: "111001111001111",
    4: "101101111001001", 5: "111100111001111", 6: "111100111101111", 7: "111001001001001",
    8: "111101111101111", 9: "111101111001111",
}


def read_score(obs: np.ndarray) -> int:
    """Decode the 4 score digits from the observation (digit k at screen x = 8 + 8k, y = 2)."""
    value = 0
    for k in range(4):
        block = obs[1:6, 4 + 4 * k: 4 + 4 * k + 3]
        bits = "".join("1" if v == 3 else "0" for v in block.flatten())
        digit = [d for d, f in FONT.items() if f == bits]
        assert len(digit) == 1, f"unreadable digit {k}: {bits}"
        value = value * 10 + digit[0]
    return value


def read_lives(obs: np.ndarray) -> int:
    bars = [obs[1:6, 64 + 4 * k: 67 + 4 * k] for k in range(3)]
    for b in bars:
        assert (b == 3).all() or (b == 0).all()
    return sum(int((b == 3).all()) for b in bars)


def chase(c: Console) -> str | None:
    target = c["OBJ_X"] + 4 - 12  # centre the paddle under the block
    if c["PADDLE_X"] > target + 4:
        return "left"
    if c["PADDLE_X"] < target - 4:
        return "right"
    return None


def test_catch_new_game_state(catch):
    catch.new_game(9)
    assert catch["LIVES"] == 3 and catch["SCORE"] == 0 and catch["MISSES"] == 0
    assert catch["PADDLE_X"] == 68 and catch["OBJ_Y"] == 24
    assert 0 <= catch["OBJ_COL"] < 10 and catch["OBJ_X"] == 16 * catch["OBJ_COL"] + 4
    obs = catch.screen()
    assert read_score(obs) == 0 and read_lives(obs) == 3
    assert (obs[8] == 3).all()  # HUD separator line at y = 16
    # paddle (24x8 at y=128) and block (8x8) in the decimated frame
    px, ox, oy = catch["PADDLE_X"], catch["OBJ_X"], catch["OBJ_Y"]
    assert (obs[64:68, px // 2: px // 2 + 12] == 3).all()
    assert (obs[oy // 2: oy // 2 + 4, ox // 2: ox // 2 + 4] == 3).all()
    assert (obs[12:60] == 3).sum() == 16  # nothing else in the playfield


def spawned_columns(c: Console, seed: int, steps: int) -> list[int]:
    """Columns of the blocks of one game, played by the chasing policy for `steps` env steps."""
    c.new_game(seed)
    cols = [c["OBJ_COL"]]
    done = 0
    for _ in range(steps):
        c.step(chase(c))
        if c["SCORE"] + c["MISSES"] != done:  # a block was caught or missed: a new one spawned
            done = c["SCORE"] + c["MISSES"]
            cols.append(c["OBJ_COL"])
    return cols


def test_catch_columns_follow_seed(catch):
    first = spawned_columns(catch, 1, 60)
    assert len(first) >= 7 and all(0 <= col < 10 for col in first)
    assert len(set(first)) >= 4
    assert spawned_columns(catch, 1, 60) == first  # same seed, same game
    assert spawned_columns(catch, 2, 60) != first
    rng = set()
    for seed in (0, 1, 0xA5, 255):
        catch.new_game(seed)
        rng.add(catch["RNG"] | catch.gb.memory[catch.ram["RNG"] + 1] << 8)
    assert len(rng) == 4 and 0 not in rng


def test_catch_paddle_moves_and_clamps(catch):
    catch.new_game(5)
    catch.step("right")
    assert catch["PADDLE_X"] == 68 + 16
    catch.step("left")
    catch.step("left")
    assert catch["PADDLE_X"] == 68 - 16
    for _ in range(6):
        catch.step("left")
    assert catch["PADDLE_X"] == 0
    for _ in range(12):
        catch.step("right")
    assert catch["PADDLE_X"] == 136
    catch.step("up")
    assert catch["PADDLE_X"] == 136


def test_catch_scoring_and_screen(catch):
    catch.new_game(11)
    for _ in range(150):
        catch.step(chase(catch))
    score = catch["SCORE"] | catch.gb.memory[catch.ram["SCORE"] + 1] << 8
    assert score >= 12 and catch["LIVES"] == 3 and catch["MISSES"] == 0
    assert catch["FALL_PERIOD"] == 4  # faster from a score of 10
    bcd = catch["SCORE_BCD"]
    assert (bcd >> 4) * 10 + (bcd & 15) == score
    obs = catch.screen()
    assert read_score(obs) == score and read_lives(obs) == 3


def test_catch_misses_cost_lives_then_game_over(catch):
    catch.new_game(11)
    lives_seen = []
    for _ in range(60):
        # run away from the block: always a miss
        catch.step("right" if catch["OBJ_X"] < 80 else "left")
        lives_seen.append(catch["LIVES"])
        if catch["GAME_STATE"] != 1:
            break
    assert catch["GAME_STATE"] == 2 and catch["LIVES"] == 0 and catch["MISSES"] == 3
    assert catch["SCORE"] == 0
    assert [v for i, v in enumerate(lives_seen) if i == 0 or v != lives_seen[i - 1]] == [3, 2, 1, 0]
    obs = catch.screen()
    assert read_lives(obs) == 0 and read_score(obs) == 0
    assert (obs[12:60] == 3).sum() == 0  # block hidden once the game is over
    catch.new_game(12)
    assert catch["LIVES"] == 3 and catch["MISSES"] == 0
    assert read_lives(catch.screen()) == 3
