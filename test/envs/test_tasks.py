"""Tasks on the real Warp emulator: our shipped games (maze, catch), the homebrew snake ROM of the
shared test data, and the user-supplied Pokémon Red task (skips without the user's files).

Scripted agents read the games' RAM (documented in each ``.asm``) to act, and the tests check the
rewards, terminations and deferred resets the env reports.
"""

from __future__ import annotations

import os
from collections import deque

import pytest
import torch
from conftest import rom_path

from torchrl_dreamer.envs import GameBoyEnv, TaskMismatchError, list_tasks, make_task

NOOP, UP, DOWN, LEFT, RIGHT = range(5)  # the "dpad" action set
MOVES = {UP: (0, -1), DOWN: (0, 1), LEFT: (-1, 0), RIGHT: (1, 0)}


@pytest.fixture(scope="module")
def backend():
    """The real emulator (GameBoy + ResetCache); skips while the emulator build lacks them."""
    from torchrl_dreamer import emulator

    try:
        emulator.GameBoy  # noqa: B018
        emulator.ResetCache  # noqa: B018
    except (ImportError, AttributeError) as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"emulator not complete yet: {err}")
    return emulator


def _act(env, actions):
    return env.fast_step(torch.as_tensor(actions, dtype=torch.int64))


def _maze_path(gb, env_idx, ram):
    """Shortest action sequence from the player to the exit (BFS on the RAM grid)."""
    grid = gb.read_memory(ram["MAZE"], 81)[env_idx].view(9, 9).tolist()
    x, y = (int(v) for v in gb.read_memory(ram["PLAYER_X"], 2)[env_idx])
    prev = {(x, y): None}
    queue = deque([(x, y)])
    while queue:
        cx, cy = queue.popleft()
        if grid[cy][cx] == 2:
            path = []
            node = (cx, cy)
            while prev[node] is not None:
                node, action = prev[node]
                path.append(action)
            return path[::-1]
        for action, (dx, dy) in MOVES.items():
            nx, ny = cx + dx, cy + dy
            if 0 <= nx < 9 and 0 <= ny < 9 and grid[ny][nx] != 1 and (nx, ny) not in prev:
                prev[(nx, ny)] = ((cx, cy), action)
                queue.append((nx, ny))
    raise AssertionError("maze has no path to the exit")


def test_registry_lists_builtin_tasks():
    names = list_tasks()
    for name in ("maze", "maze-sparse", "catch", "snake", "pokemon_red_exit_lab"):
        assert name in names
    with pytest.raises(ValueError, match="unknown task 'tetris'.*catch.*maze"):
        make_task("tetris")


@pytest.mark.parametrize("name, step_reward, final_reward",
                         [("maze-sparse", 0.0, 1.0), ("maze", 0.1, 1.1)])
def test_maze_solved_by_shortest_path(backend, name, step_reward, final_reward):
    env = GameBoyEnv(name, num_envs=2, backend=backend, seed=3)
    env.reset()
    task = env.task
    path = _maze_path(env.gb, 0, task.ram)
    assert 1 <= len(path) <= 40
    layout0 = int(env.gb.read_memory(task.ram["ACTIVE_LAYOUT"])[0, 0])
    for i, action in enumerate(path):
        out = _act(env, [action, NOOP])
        last = i == len(path) - 1
        assert out["terminated"][0].item() == last, i
        assert out["reward"][0].item() == pytest.approx(final_reward if last else step_reward)
        assert out["reward"][1].item() == 0.0  # NOOP: no move, no shaping
        assert not out["done"][1].item()
    # deferred reset: the next step restarts env 0 with a fresh layout draw, ignoring its action
    out = _act(env, [path[0], NOOP])
    assert out["is_first"].flatten().tolist() == [True, False]
    assert out["episode_id"].flatten().tolist() == [1, 0]
    assert out["reward"][0].item() == 0.0
    assert int(env.gb.read_memory(task.ram["GAME_STATE"])[0, 0]) == 1
    assert int(env.gb.read_memory(task.ram["MOVES"])[0, 0]) == 0
    assert 0 <= layout0 < 16


def test_maze_shaping_is_potential_based(backend):
    """Shaped rewards telescope: sum = alpha * (d_start - d_end) + won, with BFS distances that
    agree with a BFS on the grid the game holds in RAM."""
    env = GameBoyEnv("maze", num_envs=4, backend=backend, seed=7, max_episode_steps=1000,
                     task_kwargs={"shaping": 0.1, "shaping_kind": "potential"})
    env.reset()
    task = env.task
    d0 = task.distance(env.gb).clone()
    for i in range(4):
        assert d0[i].item() == len(_maze_path(env.gb, i, task.ram))
    g = torch.Generator().manual_seed(0)
    total = torch.zeros(4)
    alive = torch.ones(4, dtype=torch.bool)
    won = torch.zeros(4, dtype=torch.bool)
    for _ in range(30):
        out = _act(env, torch.randint(0, 5, (4,), generator=g))
        r = out["reward"].flatten()
        assert set(torch.round(r[alive] * 10).tolist()) <= {-1.0, 0.0, 1.0, 11.0}
        total += torch.where(alive, r, torch.zeros_like(r))
        won |= alive & out["terminated"].flatten()
        alive &= ~out["done"].flatten()
    d_end = torch.where(won, torch.zeros(4), task.distance(env.gb))
    expected = 0.1 * (d0 - d_end) + won.float()
    assert torch.allclose(total, expected, atol=1e-5), (total, expected)


def test_maze_distance_shaping_pays_minus_alpha_d(backend):
    """``shaping_kind="distance"``: every step pays ``won - alpha * d(s')`` (no reward can be
    collected by walking back and forth), the winning step pays exactly 1, a reset step 0."""
    alpha = 0.05
    env = GameBoyEnv("maze", num_envs=4, backend=backend, seed=5, max_episode_steps=1000,
                     task_kwargs={"shaping": alpha, "shaping_kind": "distance"})
    env.reset()
    task = env.task
    # env 0 walks its shortest path, the others act at random
    path = _maze_path(env.gb, 0, task.ram)
    g = torch.Generator().manual_seed(1)
    seen = set()
    for i, step0 in enumerate(path):
        actions = torch.randint(0, 5, (4,), generator=g)
        actions[0] = step0
        out = _act(env, actions)
        r = out["reward"].flatten()
        term = out["terminated"].flatten()
        d = task.distance(env.gb)
        for k in range(4):
            if out["is_first"].flatten()[k]:
                assert r[k].item() == 0.0
                continue
            if term[k]:
                assert r[k].item() == pytest.approx(1.0)
            else:
                assert r[k].item() == pytest.approx(-alpha * d[k].item(), abs=1e-6)
                seen.add(round(d[k].item()))
        assert term[0].item() == (i == len(path) - 1)
    assert len(seen) > 3  # several distances were actually exercised


def test_maze_shaping_rejects_negative():
    with pytest.raises(ValueError, match="shaping must be >= 0"):
        make_task("maze", shaping=-1.0)
    with pytest.raises(ValueError, match="unknown shaping_kind 'manhattan'.*distance.*potential"):
        make_task("maze", shaping_kind="manhattan")


def test_maze_distances_check_the_rom():
    from torchrl_dreamer import roms
    from torchrl_dreamer.envs.tasks.maze import maze_distances

    rom = roms.rom_path("maze").read_bytes()
    dist = maze_distances(rom)
    assert dist.shape == (16, 9, 9) and bool((dist == 0).sum() == 16)  # one exit per layout
    for bad in (bytes(len(rom)), rom[:2000]):  # no layout table / truncated ROM
        with pytest.raises(ValueError, match="layout table .* does not hold a valid 9x9 layout"):
            maze_distances(bad)


def test_maze_walls_block_and_give_no_reward(backend):
    env = GameBoyEnv("maze", num_envs=1, backend=backend, seed=0)
    env.reset()
    ram = env.task.ram
    grid = env.gb.read_memory(ram["MAZE"], 81)[0].view(9, 9).tolist()
    x, y = (int(v) for v in env.gb.read_memory(ram["PLAYER_X"], 2)[0])
    blocked = [a for a, (dx, dy) in MOVES.items() if grid[y + dy][x + dx] == 1]
    assert blocked, "start cell has no wall around it"
    out = _act(env, [blocked[0]])
    assert out["reward"].item() == 0.0 and not out["done"].item()
    assert [int(v) for v in env.gb.read_memory(ram["PLAYER_X"], 2)[0]] == [x, y]
    assert int(env.gb.read_memory(ram["BUMPS"])[0, 0]) == 1


def test_maze_layouts_vary_with_seed_and_seed_values(backend):
    env = GameBoyEnv("maze", num_envs=8, backend=backend, seed=1)
    first = env.reset()["pixels"]
    layouts = env.gb.read_memory(env.task.ram["ACTIVE_LAYOUT"])[:, 0].tolist()
    assert len(set(layouts)) > 1
    # different layouts look different on screen
    a, b = layouts.index(layouts[0]), next(i for i, v in enumerate(layouts) if v != layouts[0])
    assert not torch.equal(first[a], first[b])
    fixed = GameBoyEnv("maze", num_envs=4, backend=backend, task_kwargs={"seed_values": [5]})
    fixed.reset()
    assert fixed.gb.read_memory(fixed.task.ram["ACTIVE_LAYOUT"])[:, 0].tolist() == [5] * 4


def test_catch_rewards_catches_and_misses(backend):
    env = GameBoyEnv("catch", num_envs=2, backend=backend, seed=0)
    env.reset()
    ram = env.task.ram
    rewards = torch.zeros(2)
    caught_steps = 0
    for _ in range(120):
        mem = env.gb.read_memory(ram["PADDLE_X"], 2).int()
        paddle, obj = mem[0, 0].item(), mem[0, 1].item()
        # env 0 follows the block (paddle centre 12 px right of its left edge); env 1 idles
        target = obj + 4 - 12
        a0 = RIGHT if paddle < target - 8 else LEFT if paddle > target + 8 else NOOP
        out = _act(env, [a0, NOOP])
        rewards += out["reward"].flatten()
        caught_steps += int(out["reward"][0].item() > 0)
        if out["done"][1].item():
            break
    score0 = int(env.gb.read_memory(ram["SCORE"])[0, 0])
    assert caught_steps >= 2 and score0 >= 2
    assert rewards[0].item() == score0 - (3 - int(env.gb.read_memory(ram["LIVES"])[0, 0]))
    # the idle env misses most blocks: -1 per life lost, game over (terminated) after 3 misses
    score1 = int(env.gb.read_memory(ram["SCORE"])[1, 0])
    assert out["terminated"][1].item() and int(env.gb.read_memory(ram["LIVES"])[1, 0]) == 0
    assert rewards[1].item() == score1 - 3


def test_snake_death_terminates(backend, roms):
    rom = rom_path(roms, "games/gb_raw_snake/snake.gb")
    env = GameBoyEnv("snake", num_envs=1, backend=backend, rom=rom)
    env.reset()
    outs = [_act(env, [NOOP]) for _ in range(12)]  # the snake runs right into the wall
    died = [i for i, o in enumerate(outs) if o["terminated"].item()]
    assert died, "the snake never hit the wall"
    assert outs[died[0]]["reward"].item() == -1.0
    assert outs[died[0] + 1]["is_first"].item()


def test_task_rom_mismatch(backend):
    from torchrl_dreamer.roms import rom_path as shipped

    with pytest.raises(TaskMismatchError, match="TRLD MAZE.*TRLD CATCH"):
        GameBoyEnv("maze", backend=backend, rom=shipped("catch"))
    with pytest.raises(TaskMismatchError, match="specific ROM image"):
        GameBoyEnv("snake", backend=backend, rom=shipped("maze"))


def test_check_env_specs_real_emulator(backend):
    from torchrl.envs.utils import check_env_specs

    env = GameBoyEnv("catch", num_envs=3, backend=backend, noop_max=10)
    check_env_specs(env, seed=0)
    assert len(set(env.noop_frames.tolist())) > 1


def test_pokemon_red_exit_lab_skips_without_user_files(backend):
    rom = os.environ.get("TORCHRL_DREAMER_POKEMON_RED_ROM")
    state = os.environ.get("TORCHRL_DREAMER_POKEMON_RED_STATE")
    if not (rom and state and os.path.isfile(rom) and os.path.isfile(state)):
        with pytest.raises(FileNotFoundError, match="your own Pokémon Red ROM"):
            GameBoyEnv("pokemon_red_exit_lab", backend=backend)
        pytest.skip("set TORCHRL_DREAMER_POKEMON_RED_ROM and _STATE to run the Pokémon Red task")
    env = GameBoyEnv("pokemon_red_exit_lab", num_envs=2, backend=backend)
    td = env.rollout(20, break_when_any_done=False)
    assert td["next", "pixels"].shape == (2, 20, 1, 72, 20)


def test_partial_reset_and_noop_starts_real_emulator(backend):
    env = GameBoyEnv("maze", num_envs=3, backend=backend, noop_max=12, seed=4)
    td = env.reset()
    start_frames = env.gb.frame_count.clone()
    # each console starts noop frames after the task's start state (+ the reset step's frames)
    assert (start_frames - env.noop_frames).unique().numel() == 1
    ram = env.task.ram
    for _ in range(3):
        td = env.step(td.set("action", torch.tensor([DOWN, RIGHT, UP])))["next"]
    moves = env.gb.read_memory(ram["MOVES"])[:, 0].clone()
    frames = env.gb.frame_count.clone()
    td.set("_reset", torch.tensor([[False], [True], [False]]))
    out = env.reset(td)
    assert out["is_first"].flatten().tolist() == [False, True, False]
    assert out["episode_id"].flatten().tolist() == [0, 1, 0]
    after = env.gb.frame_count
    assert after[0] == frames[0] and after[2] == frames[2]  # untouched consoles rolled back
    assert env.gb.read_memory(ram["MOVES"])[:, 0].tolist() == [moves[0], 0, moves[2]]


def test_collector_real_emulator_never_resets(backend):
    from torchrl.collectors import Collector

    env = GameBoyEnv("maze", num_envs=2, backend=backend, max_episode_steps=4)
    resets = []
    orig = env._reset
    env._reset = lambda td=None, **kw: resets.append(1) or orig(td, **kw)
    col = Collector(env, policy=None, frames_per_batch=20, total_frames=20)
    batch = next(iter(col))
    col.shutdown()
    assert batch["next", "truncated"][:, :, 0].sum() >= 2
    assert batch["next", "is_first"][:, 4, 0].all()  # the step after truncation restarts
    assert len(resets) == 1


def test_start_state_file_and_wrong_rom_state(backend, tmp_path):
    from torchrl_dreamer.roms import rom_path as shipped

    gb = backend.GameBoy(shipped("catch"), num_envs=2)
    gb.run_frames(40)
    path = tmp_path / "catch.state"
    gb.save_state().save(path)
    env = GameBoyEnv("catch", num_envs=3, backend=backend, state=path)
    assert env.reset()["pixels"].shape == (3, 1, 72, 20)
    with pytest.raises(TaskMismatchError, match="does not fit the ROM.*another ROM"):
        GameBoyEnv("maze", num_envs=1, backend=backend, state=path)


def test_same_seed_same_rollout_real_emulator(backend):
    def run(seed):
        env = GameBoyEnv("catch", num_envs=2, backend=backend, noop_max=6)
        env.set_seed(seed)
        torch.manual_seed(0)  # the random policy of rollout()
        return env.rollout(12, break_when_any_done=False)

    a, b = run(7), run(7)
    assert torch.equal(a["next", "pixels"], b["next", "pixels"])
    assert torch.equal(a["next", "reward"], b["next", "reward"])
    c = run(8)
    assert not torch.equal(a["next", "pixels"], c["next", "pixels"])


def _real_maze_env():
    return GameBoyEnv("maze", num_envs=2, seed=0)


def test_serial_and_parallel_env_real_emulator(backend):
    """The real Warp emulator inside TorchRL's SerialEnv and ParallelEnv (worker processes)."""
    from torchrl.envs import ParallelEnv, SerialEnv

    ser = SerialEnv(2, _real_maze_env)
    try:
        td_ser = ser.rollout(3, break_when_any_done=False)
    finally:
        ser.close()
    assert td_ser["next", "pixels"].shape == (2, 2, 3, 1, 72, 20)  # [workers, envs, time, ...]
    assert td_ser["next", "pixels"].dtype == torch.uint8
    assert td_ser["next", "pixels"].any()  # the maze is drawn, not a blank screen
    par = ParallelEnv(2, _real_maze_env, mp_start_method="fork")
    try:
        td_par = par.rollout(3, break_when_any_done=False)
    finally:
        par.close()
    assert td_par["next", "pixels"].shape == (2, 2, 3, 1, 72, 20)  # [workers, envs, time, ...]
    assert td_par["next", "pixels"].any()
    assert td_par["next", "is_first"].shape[:3] == (2, 2, 3)
