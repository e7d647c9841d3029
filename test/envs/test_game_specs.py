"""The task specs shipped in examples/tasks/ for the five shared homebrew games: each validates
against its ROM, builds an env, and scripted play produces the rewards and episode ends the
spec promises (addresses in each file's header)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import rom_path
from tensordict import TensorDict

from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.spec import load_task_spec
from torchrl_dreamer.envs.task import TaskMismatchError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
GAMES = {
    "snake": "games/gb_raw_snake/snake.gb",
    "2048": "games/2048-wyattferguson/2048.gb",
    "pandoras_blocks": "games/pandoras-blocks/PandorasBlocks.gbc",
    "tobutobugirl": "games/tobutobugirl/tobu.gb",
    "postbot": "games/postbot/PostBot.gb",
}


def _env(roms, game: str, num_envs: int = 2, **kw) -> GameBoyEnv:
    task = load_task_spec(EXAMPLES / f"{game}.yaml", rom=rom_path(roms, GAMES[game]))
    env = GameBoyEnv(task, num_envs=num_envs, seed=0, **kw)
    env.reset()
    return env


def _play(env: GameBoyEnv, actions, steps: int, key: str = "reward"):
    """Step ``steps`` times with ``actions(t)`` (names); per-step rewards (or another output,
    ``key``), terminated, truncated."""
    names = env.action_set.names
    rew, term, trunc = [], [], []
    for t in range(steps):
        a = actions(t)
        idx = torch.tensor([names.index(x) for x in a] if isinstance(a, list)
                           else [names.index(a)] * env.num_envs)
        nxt = env.step(TensorDict({"action": idx}, batch_size=[env.num_envs]))["next"]
        rew.append(nxt[key].reshape(-1).clone())
        term.append(nxt["terminated"].reshape(-1).clone())
        trunc.append(nxt["truncated"].reshape(-1).clone())
    return torch.stack(rew), torch.stack(term), torch.stack(trunc)


def test_every_game_has_a_spec():
    shipped = {p.stem for p in EXAMPLES.glob("*.yaml")} - {"catch", "runner"}  # our own ROMs
    assert shipped == set(GAMES)


@pytest.mark.parametrize("game", sorted(GAMES))
def test_spec_fits_its_rom_and_not_another(roms, game):
    env = _env(roms, game, num_envs=1)
    # the shipped specs give their limit in game frames: the same game time at any frame skip
    frames = env.task.spec.max_episode_frames
    fast = GameBoyEnv(env.task, num_envs=1, frame_skip=8)
    if env.decision_watch:  # a step per game tick: the frames run bound the episode
        assert frames and env.max_episode_steps == fast.max_episode_steps == frames
    else:
        assert frames and env.max_episode_steps == -(-frames // env.frame_skip)
        assert fast.max_episode_steps == -(-frames // 8) and fast.max_episode_steps * 8 >= frames
    other = next(g for g in GAMES if g != game)
    task = load_task_spec(EXAMPLES / f"{game}.yaml", rom=rom_path(roms, GAMES[other]))
    with pytest.raises(TaskMismatchError, match="sha256"):
        GameBoyEnv(task, num_envs=1)


def test_snake_wall_ends_the_episode(roms):
    """Going straight on (a step per move), the snake hits the right wall (x 40 -> 160, 8 px a
    move): the death sound ends the episode with a score of -1, every time; on the way the
    shaping pays +-0.1 a move (towards, then past the food) but no score."""
    env = _env(roms, "snake")
    score, term, _ = _play(env, lambda t: "RIGHT", 40, key="score")
    first = int(torch.nonzero(term[:, 0])[0])
    assert first == 15  # 15 moves to x 160, the 16th hits the wall
    assert score[first].tolist() == [-1.0, -1.0] and score[:first].abs().sum() == 0
    assert int(term[:, 0].sum()) >= 2  # each new episode runs into the wall again
    env = _env(roms, "snake")
    rew, _, _ = _play(env, lambda t: "RIGHT", first)
    assert set(rew.reshape(-1).tolist()) == {0.10000000149011612, -0.10000000149011612}


def test_snake_food_pays(roms):
    """Steered to the food (right until one move before its column, as a press turns the snake
    one move later, then up), the snake eats it: a score of +1 once, and every move on the way
    went towards it (+0.1 of shaping each)."""
    env = _env(roms, "snake", num_envs=1)
    head, food = env.gb.read_memory(0xC004, 2)[0], env.gb.read_memory(0xC008, 2)[0]  # (y, x)
    assert head[0] > food[0] and head[1] < food[1]  # food up and to the right of the head
    score, rew, term = [], [], []
    for _ in range(20):
        x = int(env.gb.read_memory(0xC005)[0, 0])
        a = "RIGHT" if x < int(food[1]) - 8 else "UP"
        nxt = env.step(TensorDict({"action": torch.tensor([env.action_set.names.index(a)])},
                                  batch_size=[1]))["next"]
        score.append(float(nxt["score"])), rew.append(float(nxt["reward"]))
        term.append(bool(nxt["terminated"]))
        if score[-1] > 0:
            break
    assert score.count(1.0) == 1 and not any(term)
    assert all(abs(r - 0.1) < 1e-6 for r in rew[:-1])


def test_2048_merge_pays_and_full_board_ends(roms):
    """The start board holds two 2s stacked in column 2: UP merges them (score +4 -> reward 1).
    A board filled with tiles that cannot merge ends the game on the next move."""
    env = _env(roms, "2048")
    board = env.gb.read_memory(0xC0B1, 50)  # UINT16 board[5][5], little-endian
    assert board[0].reshape(25, 2)[:, 0].tolist().count(2) == 2
    rew, term, _ = _play(env, lambda t: "UP", 1)
    assert rew[0].tolist() == [1.0, 1.0] and not term.any()
    vals = []
    for r in range(5):
        for c in range(5):
            v = (2 if (r + c) % 2 == 0 else 4) * (1 if r % 2 == 0 else 4)
            vals += [v & 255, v >> 8]
    env.gb.write_memory(0xC0B1, torch.tensor([vals] * 2, dtype=torch.uint8))
    rew, term, _ = _play(env, lambda t: "LEFT", 2)
    assert term.any(0).tolist() == [True, True] and (rew >= 0).all()


def test_2048_episodes_draw_new_tiles(roms):
    """The on_reset RNG seed gives each console its own tile sequence."""
    env = _env(roms, "2048", num_envs=4)
    _play(env, lambda t: ["LEFT", "UP", "RIGHT", "DOWN"][t % 4], 6)
    boards = env.gb.read_memory(0xC0B1, 50)
    assert len({tuple(b.tolist()) for b in boards}) > 1


def _trained_env(roms, game: str, num_envs: int) -> GameBoyEnv:
    """The env a plain training run builds for ``game`` (its spec's ``train:`` resolved)."""
    from torchrl_dreamer.trainers.builder import make_env
    from torchrl_dreamer.trainers.config import TrainConfig

    cfg = TrainConfig(task_spec=str(EXAMPLES / f"{game}.yaml"), rom=rom_path(roms, GAMES[game]),
                      num_envs=num_envs, noop_max=0)
    env = make_env(cfg)
    env.reset()
    return env


def test_2048_trains_at_one_move_a_step(roms):
    """2048-gb moves again for as long as a direction is held, and a move takes up to 18 frames
    to draw. At the spec's training settings (16 frames a step, 4 held) every step of random
    play makes one move: its random generator advances in one burst (a new tile) per step."""
    env = _trained_env(roms, "2048", num_envs=8)
    assert (env.frame_skip, env.press_frames) == (16, 4)
    g = torch.Generator().manual_seed(0)
    bursts, steps = 0, 0
    for _ in range(40):
        alive = env.gb.read_memory(0xC0EE)[:, 0] == 1
        buttons = torch.tensor([16, 32, 64, 128])[torch.randint(0, 4, (8,), generator=g)]
        prev, busy = env.gb.read_memory(0xC0E5, 2).clone(), torch.zeros(8, dtype=torch.bool)
        count = torch.zeros(8, dtype=torch.int64)
        for f in range(env.frame_skip):  # frame by frame, as one env step would run them
            press = buttons if f < env.press_frames else torch.zeros_like(buttons)
            env.gb.step(press.to(torch.uint8), frames=1, press_frames=1)
            now = env.gb.read_memory(0xC0E5, 2)
            changed = (now != prev).any(1)
            count += (changed & ~busy).long()
            busy, prev = changed, now.clone()
        bursts += int(count[alive].sum())
        steps += int(alive.sum())
    assert steps > 200 and bursts / steps > 0.97  # 8 frames held of 8: 0.65 moves a step


def test_pandoras_blocks_pieces_pay_until_game_over(roms):
    """Soft-dropping every piece in the middle stacks them to the top: +1 per piece, then
    MODE_GAME_OVER ends the episode."""
    env = _env(roms, "pandoras_blocks")
    rew, term, _ = _play(env, lambda t: "DOWN", 200)
    assert term.any(0).all()
    first = int(torch.nonzero(term[:, 0])[0])
    assert rew[:first, 0].sum() >= 8 and (rew >= 0).all()


def test_tobutobugirl_fall_ends_and_climb_pays(roms):
    """Holding LEFT the girl misses the first bat and falls (-1, episode over); random play
    bounces on bats and climbs (progress reward)."""
    env = _env(roms, "tobutobugirl")
    rew, term, _ = _play(env, lambda t: "LEFT", 30)
    first = int(torch.nonzero(term[:, 0])[0])
    assert rew[first, 0] == -1.0 and first < 20
    env = _env(roms, "tobutobugirl", num_envs=8)
    g = torch.Generator().manual_seed(0)
    names = env.action_set.names
    rew, term, _ = _play(env, lambda t: [names[i] for i in torch.randint(0, len(names), (8,),
                                                                            generator=g)], 150)
    assert (rew > 0).any() and term.any()


def test_tobutobugirl_actions_reach_the_jetpack_and_both_dashes(roms):
    """Each action of the spec does what its comment says, pressed once from the same start
    at the top of the first bounce (player x 0xC0BB, y 0xC0BC, progress 0xC19E; y 84 is the
    scroll line): B keeps the girl
    higher than NOOP as she falls back, UP+A climbs (progress +1 at once), DOWN+A drops her,
    and the four moves move. A spec with A and B swapped (A alone does nothing in this game)
    fails here."""
    names = ["NOOP", "B", "LEFT+B", "RIGHT+B", "UP+A", "DOWN+A", "LEFT", "RIGHT"]
    env = _env(roms, "tobutobugirl", num_envs=len(names), noop_max=0, frame_skip=4)
    assert sorted(env.action_set.names) == sorted(names)

    def ram(addr):
        return dict(zip(names, env.gb.read_memory(addr, 1)[:, 0].long().tolist(), strict=True))

    _play(env, lambda _: "NOOP", 6)  # the first bounce's top: she falls back from here
    x0, p0 = ram(0xC0BB)["NOOP"], ram(0xC19E)["NOOP"]
    ys, ps = [], []
    for t in range(5):
        _play(env, lambda _, first=t == 0: names if first else ["NOOP"] * len(names), 1)
        ys.append(ram(0xC0BC))
        ps.append(ram(0xC19E))
    x = ram(0xC0BB)
    assert x["LEFT"] < x0 < x["RIGHT"] and x["LEFT+B"] < x0 < x["RIGHT+B"]
    assert x["NOOP"] == x["B"] == x["UP+A"] == x["DOWN+A"] == x0
    assert ys[-1]["B"] < ys[-1]["NOOP"] - 10  # the jetpack holds her up
    assert ps[0]["UP+A"] > ps[0]["NOOP"] == p0  # the dash lifts her past the scroll line
    assert ys[0]["DOWN+A"] > ys[0]["NOOP"] + 8  # the dash drops her


def test_postbot_start_lands_in_the_level(roms):
    """The start macro reaches level 1 (screen 1, one objective); A runs the robot's program
    (screen 2); nothing pays but the exploration bonus until the start program's transmission
    leaves the robot (the shaping's first reading, from where the game left it at 0, 0, to
    the robot: about 1), and nothing ends the episode."""
    env = _env(roms, "postbot")
    assert env.gb.read_memory(0xC0B9)[:, 0].tolist() == [1, 1]
    assert env.gb.read_memory(0xC0BB)[:, 0].tolist() == [1, 1]
    assert env.gb.read_memory(0xC22D, 3)[:, [0, 2]].tolist() == [[0, 0], [0, 0]]
    rew, term, _ = _play(env, lambda t: "A", 3)
    assert env.gb.read_memory(0xC0B9)[:, 0].tolist() == [2, 2]
    assert (env.gb.read_memory(0xC22D)[:, 0] > 0).all()        # a transmission has flown
    assert not term.any() and (rew > 0).all() and (rew[:2] < 0.05).all()
    assert ((rew[2] > 0.9) & (rew[2] < 1.3)).all()


def test_postbot_trains_with_a_fresh_press_every_step(roms):
    """PostBot's editor acts on a button's press, not its hold (cursor.c compares the pad with
    its last reading). At the spec's training settings a step releases its buttons before the
    next, so A three times cycles the command under the cursor three times; held for the whole
    step (8 of 8 frames) the second and third A would do nothing."""
    env = _trained_env(roms, "postbot", num_envs=2)
    assert env.press_frames < env.frame_skip
    _play(env, lambda t: ["SELECT", "NOOP"][t], 2)
    assert env.gb.read_memory(0xC0B9)[:, 0].tolist() == [3, 3]  # the editor
    first = env.gb.read_memory(0xC0A5)[:, 0].tolist()
    _play(env, lambda t: "A", 3)
    assert env.gb.read_memory(0xC0A5)[:, 0].tolist() == [(v + 3) % 7 for v in first]


def test_postbot_pays_the_flight_to_the_mast(roms):
    """Level 1's answer (move, turn right, transmit: the start program with a right turn in its
    second slot) keyed in and run: the transmission's flight towards the mast pays 0.08 a step
    of 8 pixels (potential-based shaping, marked so the score leaves it out), and the delivery
    pays 11 and ends the episode."""
    keys = ["SELECT", "NOOP", "RIGHT", "A", "A", "A", "SELECT", "NOOP", "A"]
    env = _trained_env(roms, "postbot", num_envs=2)
    rew, term, _ = _play(env, lambda t: keys[t], len(keys))
    assert env.gb.read_memory(0xC0A5, 3).tolist() == [[1, 3, 4]] * 2   # the program written
    rest = _play(env, lambda t: "NOOP", 40 - len(keys))
    rew, term = torch.cat([rew, rest[0]]), torch.cat([term, rest[1]])
    score, _, _ = _play(_trained_env(roms, "postbot", num_envs=2),
                        lambda t: keys[t] if t < len(keys) else "NOOP", 40, key="score")
    end = int(term[:, 0].nonzero()[0])
    assert term[end].all() and rew[end, 0] > 11 and score[end, 0] == 11
    assert (score[:end] == 0).all()                      # the shaping is not the game's measure
    flight = rew[end - 8:end, 0]                         # the last steps of the flight
    assert torch.allclose(flight, flight.new_full(flight.shape, 0.08), atol=0.025)


def test_action_probe_finds_postbots_press_only_buttons(roms):
    """Held for a whole step (8 of 8 frames), every PostBot button acts once: the probe names
    them, and the spec check warns; with a release in each step (4 of 8) nothing is probed."""
    from torchrl_dreamer.envs.action_probe import probe_actions

    held = _env(roms, "postbot", num_envs=4, frame_skip=8, press_frames=8)
    _play(held, lambda t: ["SELECT", "NOOP", "DOWN", "NOOP"][t % 4], 3)  # the editor
    probe = probe_actions(held, states=4, after=1)
    assert {"A", "B", "SELECT"} <= set(probe.held_in_vain) and "NOOP" not in probe.held_in_vain
    assert "acts on a press" in probe.text()
    released = _env(roms, "postbot", num_envs=4, frame_skip=8, press_frames=4)
    assert probe_actions(released, states=4, after=1).press_only == []


def test_training_start_warns_about_press_only_buttons(roms, recwarn):
    """A run whose steps hold their buttons to the end probes the spec's start state: PostBot's
    SELECT (it opens the editor on a press) is named with the setting that helps; 2048's
    directions move while held, so its spec draws no warning."""
    from types import SimpleNamespace

    from torchrl_dreamer.trainers.builder import warn_press_only

    def cfg(game):
        return SimpleNamespace(consoles_device="cpu", env=SimpleNamespace(
            task_spec=str(EXAMPLES / f"{game}.yaml"), frame_skip=8, press_frames=8))

    postbot = load_task_spec(EXAMPLES / "postbot.yaml", rom=rom_path(roms, GAMES["postbot"]))
    with pytest.warns(UserWarning, match=r"actions SELECT act on a press.*--press-frames 4"):
        assert warn_press_only(postbot, cfg("postbot")) == ["SELECT"]
    game = load_task_spec(EXAMPLES / "2048.yaml", rom=rom_path(roms, GAMES["2048"]))
    assert warn_press_only(game, cfg("2048")) == []
    assert not [w for w in recwarn if "act on a press" in str(w.message)]


def test_random_baseline_keeps_each_envs_first_episodes_not_the_first_to_end():
    """random_returns takes the first ceil(episodes / envs) episodes of every env: env 0's
    one-step episodes (return 0) end long before env 1's ten-step ones (return 10), and the
    first four episodes to end would all be env 0's (mean 0) where the game's mean is 5."""
    import runpy
    from types import SimpleNamespace

    class TwoSpeeds:  # env 0: episodes of 1 step and return 0; env 1: 10 steps, 1 a step
        num_envs = 2
        action_set = SimpleNamespace(names=["NOOP", "A"])
        observation_spec = {"pixels": None}
        device = torch.device("cpu")

        def reset(self):
            self.t = torch.zeros(2, dtype=torch.int64)

        def step(self, td):
            self.t += 1
            done = torch.stack([self.t[0] >= 1, self.t[1] >= 10])
            reward = torch.tensor([0.0, 1.0])
            self.t[done] = 0
            nxt = TensorDict({"reward": reward.reshape(2, 1), "terminated": done.reshape(2, 1),
                              "truncated": torch.zeros(2, 1, dtype=torch.bool)}, batch_size=[2])
            return TensorDict({"next": nxt}, batch_size=[2])

    mod = runpy.run_path(str(EXAMPLES.parent / "random_baseline.py"))
    returns, lengths, scores = mod["random_returns"](TwoSpeeds(), 4)
    assert returns == [0.0, 10.0, 0.0, 10.0] and lengths == [1, 10, 1, 10] and scores == []
    returns, _, _ = mod["random_returns"](TwoSpeeds(), 3)  # a partial last round: env order
    assert returns == [0.0, 10.0, 0.0]


def test_random_baseline_script(roms):
    """examples/random_baseline.py: random snake episodes end in a death (a score of -1) long
    before the time limit; the script's JSON line reports them, the score apart from the
    shaped return."""
    import json
    import runpy

    mod = runpy.run_path(str(EXAMPLES.parent / "random_baseline.py"))
    env = _env(roms, "snake", num_envs=4)
    returns, lengths, scores = mod["random_returns"](env, 8, seed=0)
    assert len(returns) == len(scores) == 8  # the spec's shaping: the score is reported apart
    assert all(s <= 1.0 for s in scores) and -1.0 in scores and returns != scores
    assert all(1 <= n < env.max_episode_steps for n in lengths)
    out = []
    mod["main"].__globals__["print"] = out.append
    assert mod["main"](["--task-spec", str(EXAMPLES / "snake.yaml"), "--rom",
                        str(rom_path(roms, GAMES["snake"])), "--episodes", "4", "--envs", "2"]) == 0
    row = json.loads(out[0])
    assert row["episodes"] == 4 and row["max_episode_steps"] == 9600  # a step per move
    assert row["mean_score"] < 0.5 and row["mean_score"] != row["mean_return"]
    # the training run's resolution: the Game Boy defaults' frame skip and no-op starts
    assert (row["frame_skip"], row["noop_max"]) == (8, 30)
