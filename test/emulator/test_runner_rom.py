"""Tests for `runner` (torchrl_dreamer/roms/runner), played in our emulator through its RAM
interface (docs/roms.md): the title waits for START, play scrolls blocks in, the jump arc, a hit
ends the game, a policy that jumps on time passes blocks and SCORE counts them, the obstacles
follow the frame START was pressed on, and examples/tasks/runner.yaml pays for passes in a
GameBoyEnv."""

from __future__ import annotations

from pathlib import Path

import torch
from tensordict import TensorDict

from torchrl_dreamer.emulator import BUTTON_A, BUTTON_B, BUTTON_START, GameBoy
from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.spec import load_task_spec
from torchrl_dreamer.roms import assemble_game, ram_map, rom_path

SPEC = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "runner.yaml"
RAM = ram_map("runner")
SYM = assemble_game("runner").symbols
BASE = 0xC000
STEP = 8  # the trainer's frame skip for Game Boy tasks (button held the whole step)
RUNNER_SX = 40  # runner's left edge + 16, in the obstacles' X units (docs/roms.md)
GROUND_Y = 112

# RUNNER in 4x4-pixel cells from x = 16, y = 24: an independent copy of the documented title
TITLE = ("0111001001010010100101111011100",
         "0100101001011010110101000010010",
         "0111001001010110101101110011100",
         "0101001001010010100101000010100",
         "0100100110010010100101111010010")
FONT = {  # 3x5 digits of the score, as in catch
    0: "111101101101111", 1: "010110010010111", 2: "111001111100111", 3: "111001111001111",
    4: "101101111001001", 5: "111100111001111", 6: "111100111101111", 7: "111001001001001",
    8: "111101111101111", 9: "111101111001111",
}


# ------------------------------------------------------------------ helpers
def console(n: int = 1) -> GameBoy:
    gb = GameBoy(rom_path("runner"), num_envs=n, check_header=False, framebuffer=True)
    gb.run_frames(30)  # boot to the title
    return gb


def ram(gb: GameBoy) -> list[list[int]]:
    """WRAM $C000-$C02F of every console."""
    return gb.read_memory(BASE, 0x30).tolist()


def field(m: list[int], name: str, size: int = 1) -> int:
    a = RAM[name] - BASE
    return m[a] | (m[a + 1] << 8 if size == 2 else 0)


def obstacles(m: list[int]) -> list[tuple[int, int, int, int]]:
    """The 4 slots: (X, W, H, STATE)."""
    a = RAM["OBSTACLES"] - BASE
    return [tuple(m[a + 4 * k: a + 4 * k + 4]) for k in range(4)]


def screen(gb: GameBoy, i: int = 0) -> torch.Tensor:
    """Shades 0 (white) .. 3 (black) of console i's last frame, [144, 160]."""
    return gb.framebuffer[i].clone().to(torch.int64)


def jumps_now(m: list[int]) -> bool:
    """Jump on this 8-frame step when the nearest block ahead would be under the runner at the
    top of the arc (26 frames after take-off) by the middle of the next step."""
    if field(m, "GAME_STATE") != 1 or field(m, "JUMP_T") != 0:
        return False
    ahead = [o for o in obstacles(m) if o[3] == 1]
    if not ahead:
        return False
    x, w, _, _ = min(ahead)
    frames_to_centre = ((x + w / 2) - (RUNNER_SX + 4)) / (field(m, "SPEED") / 128)
    return frames_to_centre <= SYM["JUMP_FRAMES"] // 2 + 4


def play_steps(gb: GameBoy, steps: int, jumping: list[bool]) -> list[list[int]]:
    """`steps` env-like steps; console i plays `jumps_now` if jumping[i], else holds nothing.
    Returns the RAM after every step."""
    seen = []
    for _ in range(steps):
        m = ram(gb)
        buttons = [BUTTON_A if on and jumps_now(row) else 0 for on, row in zip(jumping, m)]
        gb.run_frames(STEP, torch.tensor(buttons, dtype=torch.uint8))
        seen.append(ram(gb))
    return seen


def press_start(gb: GameBoy) -> None:
    gb.run_frames(STEP, BUTTON_START)
    gb.run_frames(2)


def read_score(shades: torch.Tensor) -> int:
    """The 4 score digits of the window: digit k's 3x5 blocks of 2x2 at x = 64 + 8k, y = 130."""
    value = 0
    for k in range(4):
        bits = "".join("1" if int(shades[130 + 2 * r, 64 + 8 * k + 2 * c]) == 3 else "0"
                       for r in range(5) for c in range(3))
        digit = [d for d, f in FONT.items() if f == bits]
        assert len(digit) == 1, f"unreadable digit {k}: {bits}"
        value = value * 10 + digit[0]
    return value


def lfsr_byte(state: int) -> int:
    """8 steps of the documented 16-bit Galois LFSR (taps $B400)."""
    for _ in range(8):
        state = (state >> 1) ^ (0xB400 if state & 1 else 0)
    return state


def warmed(state: int) -> int:
    return lfsr_byte(lfsr_byte(state or 0xACE1))


# ------------------------------------------------------------------ title
def test_title_waits_for_start():
    gb = console()
    m = ram(gb)[0]
    assert field(m, "GAME_STATE") == 0 and field(m, "TITLE_ON") == 1
    shades = screen(gb)
    for r, row in enumerate(TITLE):
        for c, bit in enumerate(row):
            cell = shades[24 + 4 * r: 28 + 4 * r, 16 + 4 * c: 20 + 4 * c]
            assert (cell == (3 if bit == "1" else 0)).all(), (r, c)
    assert (shades[44:96] == 0).all()  # nothing between the title and the runner
    assert (shades[96:112, 24:32] == 3).sum() == 64 - 4 + 64 - 16  # runner: eye and legs' gap
    assert (shades[112:114] == 3).all()  # the ground line
    assert read_score(shades) == 0
    clock = field(m, "CLOCK", 2)
    # 10 s of every button but START: still the title, the runner stands, no block comes
    gb.run_frames(600, BUTTON_A | BUTTON_B)
    m = ram(gb)[0]
    assert field(m, "GAME_STATE") == 0 and field(m, "RUNNER_H") == 0
    assert all(o[3] == 0 for o in obstacles(m))
    assert field(m, "CLOCK", 2) == clock + 600  # the frame counter runs on the title
    assert torch.equal(screen(gb), shades)
    press_start(gb)
    m = ram(gb)[0]
    assert field(m, "GAME_STATE") == 1 and field(m, "SCORE", 2) == 0
    assert field(m, "SPEED") == SYM["SPEED_START"] == 160


def test_play_clears_title_scrolls_and_brings_blocks():
    gb = console()
    before = screen(gb)
    press_start(gb)
    shades = screen(gb)
    assert field(ram(gb)[0], "TITLE_ON") == 0
    assert (shades[:96] == 0).all()  # title letters gone
    assert (shades[96:112, 24:32] == 3).sum() == 108  # the runner stands
    assert field(ram(gb)[0], "SCROLL") > 0
    assert not torch.equal(shades[114:128], before[114:128])  # the pebbles scrolled
    xs: list[int] = []
    while len(xs) < 12:  # the runner stands still: the 13th step would be the hit
        gb.run_frames(STEP)
        m = ram(gb)[0]
        assert field(m, "GAME_STATE") == 1
        on = [o for o in obstacles(m) if o[3] == 1]
        if on:
            assert len(on) == 1
            x, w, h, _ = on[0]
            xs.append(x)
            assert w in (8, 16) and h in (8, 16)
            if 16 <= x <= 176 - w:  # all of it on screen: a black w x h block on the ground
                block = screen(gb)[GROUND_Y - h: GROUND_Y, x - 16: x - 16 + w]
                assert (block == 3).all()
                assert (screen(gb)[GROUND_Y - h - 2: GROUND_Y - h, x - 16: x - 16 + w] == 0).all()
    assert xs[0] >= 176 - 2 * 16  # it came in at the right edge (X 176 = x 160) ...
    steps = [a - b for a, b in zip(xs, xs[1:])]  # ... and moves left 2 pixels per carry
    assert all(s % 2 == 0 and 8 <= s <= 12 for s in steps)  # 1.25 pixels per frame, 8 frames


def test_idle_runner_hits_the_first_block():
    gb = console()
    press_start(gb)
    frames = 0
    while field(ram(gb)[0], "GAME_STATE") == 1 and frames < 600:
        gb.run_frames(1)
        frames += 1
    m = ram(gb)[0]
    assert field(m, "GAME_STATE") == 2 and field(m, "SCORE", 2) == 0
    assert 150 < frames < 400  # the first block comes after about 3.4 s
    hit = [o for o in obstacles(m) if o[3] == 1]
    assert len(hit) == 1 and hit[0][0] < RUNNER_SX + 8 and hit[0][0] + hit[0][1] > RUNNER_SX
    gb.run_frames(2)  # the screen shows the state of the frame before
    frozen = screen(gb)
    gb.run_frames(120, BUTTON_A)  # game over: nothing moves, A does nothing
    still = ram(gb)[0]
    assert obstacles(still) == obstacles(m) and torch.equal(screen(gb), frozen)
    for name in ("GAME_STATE", "SCORE", "RUNNER_H", "JUMP_T", "SCROLL", "SPEED"):
        assert field(still, name) == field(m, name), name
    press_start(gb)  # START plays again at once
    m = ram(gb)[0]
    assert field(m, "GAME_STATE") == 1 and field(m, "SCORE", 2) == 0
    assert all(o[3] == 0 for o in obstacles(m)) and field(m, "SPEED") == 160


def test_jump_arc_and_no_jump_in_the_air():
    frames = SYM["JUMP_FRAMES"]
    arc = [(4 * 48 * t * (frames - t) // frames ** 2) & ~1 for t in range(frames)]
    assert max(arc) == 48 and arc[0] == 0 and arc[1] > 0 and arc[-1] > 0
    gb = console()
    press_start(gb)
    heights, jump_t = [], []
    for t in range(frames + 10):
        # A held from the take-off on, released in the middle and pressed again: one jump only
        gb.run_frames(1, 0 if 20 <= t < 24 else BUTTON_A)
        m = ram(gb)[0]
        heights.append(field(m, "RUNNER_H"))
        jump_t.append(field(m, "JUMP_T"))
        if t == 26:
            shades = screen(gb)
            y = 96 - heights[-1]  # the sprite drawn at the height (a frame behind the RAM)
            top = int((shades[:112, 24:32] == 3).any(1).nonzero()[0])
            assert abs(top - y) <= 4 and (shades[top:top + 16, 24:32] == 3).sum() == 108
    assert jump_t[:frames] == list(range(1, frames)) + [0]
    assert heights[:frames] == arc[1:] + [0]
    assert jump_t[frames] == 1  # A still held after landing: the next jump starts
    gb.run_frames(frames + 4)  # released: lands and stays on the ground
    m = ram(gb)[0]
    assert field(m, "JUMP_T") == 0 and field(m, "RUNNER_H") == 0


def test_jumping_on_time_passes_blocks_and_score_counts_them():
    gb = console(4)
    gb.write_memory(RAM["SEED"], torch.tensor([[1], [2], [77], [200]]))
    gb.write_memory(RAM["NEW_GAME"], 1)
    gb.run_frames(2)
    history = play_steps(gb, 400, [True] * 4)  # 400 steps of 8 frames: 53 s
    for i in range(4):
        m = history[-1][i]
        assert field(m, "GAME_STATE") == 1  # never hit
        score = field(m, "SCORE", 2)
        assert score >= 20
        passes = 0  # slots seen going from "ahead" to "passed"
        prev = obstacles(history[0][i])
        for step in history[1:]:
            now = obstacles(step[i])
            passes += sum(p[3] == 1 and n[3] == 2 for p, n in zip(prev, now))
            prev = now
        assert passes == score
        bcd = field(m, "SCORE_BCD", 2)
        assert int(f"{bcd:04x}") == score
        assert read_score(screen(gb, i)) == score
        assert field(m, "SPEED") == min(255, 160 + 3 * score)
    # never jumping, the runner is hit by the first block
    gb.write_memory(RAM["NEW_GAME"], 1)
    gb.run_frames(2)
    assert all(field(m, "GAME_STATE") == 1 for m in ram(gb))
    history = play_steps(gb, 120, [False] * 4)
    assert all(field(m, "GAME_STATE") == 2 and field(m, "SCORE", 2) == 0 for m in history[-1])


def spawns(gb: GameBoy, frames: int) -> list[list[tuple[int, int, int]]]:
    """Per console, the blocks that came in: (ground scrolled since the previous one came in, in
    pixels, W, H), playing `jumps_now` frame by frame."""
    n = gb.num_envs
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    prev = ram(gb)
    scrolled = [0] * n  # ground scrolled since the last block came in
    for _ in range(frames):
        gb.run_frames(1, torch.tensor([BUTTON_A if jumps_now(r) else 0 for r in prev],
                                      dtype=torch.uint8))
        now = ram(gb)
        for i in range(n):
            scrolled[i] += (field(now[i], "SCROLL") - field(prev[i], "SCROLL")) % 256
            for old, new in zip(obstacles(prev[i]), obstacles(now[i])):
                if old[3] == 0 and new[3] == 1:  # a slot taken: a block came in
                    assert new[0] == 176
                    out[i].append((scrolled[i], new[1], new[2]))
                    scrolled[i] = 0
        prev = now
    return out


def test_obstacles_follow_the_frame_start_was_pressed_on():
    gb = console(3)
    clocks = [field(m, "CLOCK", 2) for m in ram(gb)]
    assert len(set(clocks)) == 1
    # START seen on frame +1 by consoles 0 and 2, on frame +2 by console 1
    gb.run_frames(1, torch.tensor([BUTTON_START, 0, BUTTON_START], dtype=torch.uint8))
    gb.run_frames(1, BUTTON_START)
    gb.run_frames(1)
    m = ram(gb)
    assert [field(r, "GAME_STATE") for r in m] == [1, 1, 1]
    rngs = [field(r, "RNG", 2) for r in m]
    assert rngs == [warmed(clocks[0] + 1), warmed(clocks[0] + 2), warmed(clocks[0] + 1)]
    seq = spawns(gb, 1500)
    assert all(len(s) >= 6 for s in seq)
    assert seq[0] == seq[2]  # same frame, same game
    gaps = [[g for g, _, _ in s[1:6]] for s in seq]
    assert gaps[0] != gaps[1]  # one frame later, other spacing
    assert all(2 * 60 <= g <= 2 * (60 + 63) for s in gaps for g in s)
    # the shared interface: SEED decides the game started by NEW_GAME
    gb.write_memory(RAM["SEED"], torch.tensor([[5], [6], [5]]))
    gb.write_memory(RAM["NEW_GAME"], 1)
    gb.run_frames(2)
    m = ram(gb)
    assert [field(r, "NEW_GAME") for r in m] == [0, 0, 0]
    assert [field(r, "RNG", 2) for r in m] == [warmed(s << 8 | (s ^ 0xA5)) for s in (5, 6, 5)]
    seq = spawns(gb, 1000)
    assert seq[0] == seq[2] and seq[0] != seq[1]


# ------------------------------------------------------------------ task spec
def test_spec_env_pays_a_point_per_block_and_ends_on_a_hit():
    task = load_task_spec(SPEC, rom=rom_path("runner"))
    assert task.start_jitter == 255 and not task.has_success
    env = GameBoyEnv(task, num_envs=8, frame_skip=STEP, seed=0)
    assert list(env.action_set.names) == ["NOOP", "A"] and env.max_episode_steps == 900
    env.reset()
    m = env.gb.read_memory(BASE, 0x30).tolist()
    assert all(field(r, "GAME_STATE") == 1 and field(r, "SCORE", 2) == 0 for r in m)
    assert len({field(r, "RNG", 2) for r in m}) > 1  # START on other frames: other games
    returns = torch.zeros(8)
    ended_at = [None] * 8
    for t in range(200):
        before = env.gb.read_memory(BASE, 0x30).tolist()
        # envs 0-3 jump on time, envs 4-7 never jump
        action = torch.tensor([int(i < 4 and jumps_now(r)) for i, r in enumerate(before)])
        nxt = env.step(TensorDict({"action": action}, batch_size=[8]))["next"]
        after = env.gb.read_memory(BASE, 0x30).tolist()
        for i in range(8):
            if ended_at[i] is not None:
                continue
            gained = field(after[i], "SCORE", 2) - field(before[i], "SCORE", 2)
            assert float(nxt["reward"][i]) == gained
            returns[i] += gained
            hit = field(after[i], "GAME_STATE") == 2
            assert bool(nxt["terminated"][i]) == hit and not bool(nxt["truncated"][i])
            if hit:
                ended_at[i] = t
    assert all(ended_at[i] is None for i in range(4)) and (returns[:4] >= 5).all()
    assert all(e is not None and e < 60 for e in ended_at[4:]) and (returns[4:] == 0).all()
