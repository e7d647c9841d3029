"""``GameBoy(..., workers=K)``: consoles emulated in K slices on K threads, byte for byte as K = 1.

Every launch path is exercised against a ``workers=1`` twin over many steps of per-console
random input: ``step`` (into ``packed2`` and into ``obs_out``), ``run_frames`` with and without
rendering, ``read_memory``, masked ``write_memory``, masked ``load_state``, ``ResetCache``
restores (a whole snapshot and per-env rows of a pool) and ``step_instructions``; with real
games, the shipped maze, and N not divisible by K.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import rom_path

from torchrl_dreamer.emulator import GameBoy, ResetCache
from torchrl_dreamer.emulator.workers import (
    LaunchPool,
    available_cores,
    check_workers,
    slice_bounds,
)
from torchrl_dreamer.roms import rom_path as shipped_rom

needs_two_cores = pytest.mark.skipif(available_cores() < 2, reason="workers=2 needs 2 CPU cores")


def _assert_same(a: GameBoy, b: GameBoy, where: str) -> None:
    for name, t in a.state_tensors().items():
        u = b.state_tensors()[name]
        assert torch.equal(t, u), f"{where}: state array {name!r} differs"
    assert torch.equal(a.packed2, b.packed2), f"{where}: packed2 differs"
    assert torch.equal(a.framebuffer, b.framebuffer), f"{where}: framebuffer differs"


def _play(rom, n: int, workers: int, steps: int, warmup: int) -> list[torch.Tensor]:
    """A scripted session touching every launch path; returns every observation and read."""
    gb = GameBoy(rom, num_envs=n, check_header=False, framebuffer=True, workers=workers)
    gen = torch.Generator().manual_seed(1234)
    seen: list[torch.Tensor] = []
    gb.run_frames(warmup, render=False)
    cache = pool = None
    saved = None
    out = torch.empty(n, 1, 72, 20, dtype=torch.uint8)
    for k in range(steps):
        buttons = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=gen)
        mask = torch.rand(n, generator=gen) < 0.3
        if k % 3 == 0:
            seen.append(gb.step(buttons, frames=24, press_frames=8).clone())
        elif k % 3 == 1:
            seen.append(gb.step(buttons, frames=24, press_frames=8, obs_out=out).clone())
        else:
            gb.run_frames(7, buttons=int(buttons[0]), render=bool(k % 2))
            gb.run_frames(5)
            seen.append(gb.packed2.clone())
        if k % 10 == 4:
            seen.append(gb.read_memory(0xC000, 64))
            seen.append(gb.read_memory(0xFF40, 12))
        if k % 25 == 7:
            gb.write_memory(0xC100, torch.randint(0, 256, (n, 3), generator=gen), mask=mask)
        if k == steps // 4:
            saved = gb.save_state()
            cache = ResetCache(gb)
            pool = ResetCache(gb, saved, pool=True)  # a start-state pool picked per env
        if saved is not None and k % 40 == 39:
            gb.load_state(saved, mask=mask)
        if cache is not None and k % 40 == 19:
            cache.restore(mask)
        if pool is not None and k % 40 == 29:
            pool.restore(mask, rows=torch.randint(0, n, (n,), generator=gen))
        seen.append(gb.frame_count.clone())
        seen.append(gb.registers()["pc"])
    seen.extend(gb.state_tensors().values())
    seen.append(gb.framebuffer.clone())
    return seen


@needs_two_cores
@pytest.mark.parametrize("game", ["games/2048-wyattferguson/2048.gb",
                                  "games/tobutobugirl/tobu.gb", "maze"])
@pytest.mark.parametrize("n", [7, 8])
def test_two_workers_equal_one_bit_for_bit(roms, game, n):
    """200 steps of per-console random input (5,000+ frames a console) with every launch path:
    every observation, memory read, frame count, PC and, at the end, every state array and the
    framebuffer equal ``workers=1``'s, for N divisible by 2 and not."""
    torch.set_num_threads(1)
    rom = shipped_rom("maze") if game == "maze" else rom_path(roms, game)
    one = _play(rom, n, 1, 200, 120)
    two = _play(rom, n, 2, 200, 120)
    assert len(one) == len(two)
    for k, (a, b) in enumerate(zip(one, two)):
        assert torch.equal(a, b), f"output {k} differs"
    assert any(t.any() for t in one[:30]), "the game should draw something"


@needs_two_cores
def test_two_workers_are_deterministic_and_independent_of_each_other(roms):
    """Two workers=2 batches driven alike stay identical, and a console's run does not depend
    on which slice it lands in (console 5 of a 6-console batch equals a 1-console run)."""
    rom = rom_path(roms, "games/2048-wyattferguson/2048.gb")
    a = GameBoy(rom, num_envs=6, framebuffer=True, workers=2)
    b = GameBoy(rom, num_envs=6, framebuffer=True, workers=2)
    solo = GameBoy(rom, num_envs=1, framebuffer=True)
    gen = torch.Generator().manual_seed(7)
    for _ in range(60):
        buttons = torch.randint(0, 256, (6,), dtype=torch.uint8, generator=gen)
        a.step(buttons)
        b.step(buttons)
        solo.step(buttons[5:])
    _assert_same(a, b, "two workers=2 batches")
    for name, t in solo.state_tensors().items():
        assert torch.equal(t[0], a.state_tensors()[name][5]), name
    assert torch.equal(solo.packed2[0], a.packed2[5])


@needs_two_cores
def test_step_instructions_is_sliced_the_same(roms):
    rom = rom_path(roms, "games/postbot/PostBot.gb")
    one = GameBoy(rom, num_envs=5, framebuffer=True)
    two = GameBoy(rom, num_envs=5, framebuffer=True, workers=2)
    for gb in (one, two):
        gb.run_frames(60, buttons=torch.tensor([1, 2, 4, 8, 16], dtype=torch.uint8))
        gb.step_instructions(1000)
    _assert_same(one, two, "step_instructions")


@needs_two_cores
def test_env_with_two_workers_equals_one(roms):
    """``GameBoyEnv(workers=2)``: the same rollout as ``workers=1`` (pixels, rewards, dones,
    auto-resets), on the maze with varied starts and on a spec task of a real game."""
    from torchrl_dreamer.envs import GameBoyEnv
    from torchrl_dreamer.envs.spec import load_task_spec

    spec = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "snake.yaml"
    snake = rom_path(roms, "games/gb_raw_snake/snake.gb")
    for make, noop_max in ((lambda: "maze", 30), (lambda: load_task_spec(spec, rom=snake), 0)):
        envs = [GameBoyEnv(make(), num_envs=5, workers=w, seed=3, noop_max=noop_max, start_pool=4)
                for w in (1, 2)]
        assert envs[1].gb.workers == 2 and envs[0].gb.workers == 1
        gen = torch.Generator().manual_seed(0)
        dones = 0
        for _ in range(120):
            action = torch.randint(0, envs[0].action_set.n, (5,), generator=gen)
            outs = [env.fast_step(action) for env in envs]
            for key in outs[0].keys():
                assert torch.equal(outs[0][key], outs[1][key]), key
            dones += int(outs[0]["done"].sum())
        assert dones > 0, "some episodes should end (and auto-reset) in 120 random steps"


def test_workers_validation_errors():
    cpu = torch.device("cpu")
    for bad in (0, -1, 1.5, "2", True, None):
        with pytest.raises(ValueError, match="workers must be an int >= 1"):
            check_workers(bad, cpu)
    too_many = available_cores() + 1
    with pytest.raises(ValueError, match=rf"workers={too_many} is more than the {too_many - 1} CPU cores"):
        check_workers(too_many, cpu)
    with pytest.raises(ValueError, match="pass workers=1"):
        check_workers(2, torch.device("cuda"))
    assert check_workers(1, torch.device("cuda")) == 1


def test_gameboy_rejects_bad_workers_before_allocating():
    rom = shipped_rom("maze")
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        GameBoy(rom, num_envs=4, check_header=False, workers=0)
    with pytest.raises(ValueError, match="CPU cores this process may use"):
        GameBoy(rom, num_envs=4, check_header=False, workers=available_cores() + 1)
    # on a machine without CUDA too: the workers error comes first and says what to pass
    with pytest.raises(ValueError, match="pass workers=1"):
        GameBoy(rom, num_envs=4, device="cuda", check_header=False, workers=2)


def test_env_rejects_bad_workers():
    from torchrl_dreamer.envs import GameBoyEnv

    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        GameBoyEnv("maze", num_envs=2, workers=0)


@needs_two_cores
def test_workers_capped_by_console_count():
    rom = shipped_rom("maze")
    assert GameBoy(rom, num_envs=1, check_header=False, workers=2).workers == 1
    gb = GameBoy(rom, num_envs=3, check_header=False, workers=2)
    assert gb.workers == 2 and [(s.lo, s.hi) for s in gb._slices] == [(0, 1), (1, 3)]


def test_slice_bounds_cover_the_batch_evenly():
    for n in range(1, 40):
        for k in range(1, min(n, 9) + 1):
            b = slice_bounds(n, k)
            assert b[0][0] == 0 and b[-1][1] == n
            assert all(x[1] == y[0] for x, y in zip(b, b[1:]))
            sizes = [hi - lo for lo, hi in b]
            assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
    with pytest.raises(ValueError):
        slice_bounds(2, 3)


def test_launch_pool_runs_jobs_at_once_and_waits_for_all():
    pool = LaunchPool(3)
    barrier = threading.Barrier(3, timeout=30)  # only passes if all three jobs run at once
    threads: list[int] = []

    def job() -> None:
        threads.append(threading.get_ident())
        barrier.wait()

    pool.run([job, job, job])
    assert len(set(threads)) == 3 and threading.get_ident() in threads
    # an error is raised only after the other jobs have finished
    finished: list[str] = []

    def slow() -> None:
        time.sleep(0.2)
        finished.append("slow")

    def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        pool.run([boom, slow])
    assert finished == ["slow"]
    with pytest.raises(ValueError, match="4 jobs for a pool of 3 workers"):
        pool.run([job] * 4)
    pool.close()
    pool.run([lambda: finished.append("again"), lambda: None])  # close() then run() works
    assert finished[-1] == "again"


def _child_steps(conn) -> None:
    gb = _FORK_GB
    gb.step(3)
    conn.send(bytes(gb.packed2.flatten().tolist()))  # plain bytes: no torch fd sharing
    conn.close()


_FORK_GB: GameBoy | None = None


@needs_two_cores
def test_forked_child_gets_its_own_threads():
    """A process forked after the pool started has no pool threads; its first launch must start
    new ones instead of waiting forever."""
    global _FORK_GB
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    gb = GameBoy(shipped_rom("maze"), num_envs=4, check_header=False, workers=2)
    gb.run_frames(20)
    _FORK_GB = gb
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child_steps, args=(child,))
    proc.start()
    try:
        assert parent.poll(120), "the forked child hung on its first sliced launch"
        got = parent.recv()
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
        _FORK_GB = None
    gb.step(3)
    assert got == bytes(gb.packed2.flatten().tolist())
