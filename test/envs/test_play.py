"""The play tool: button mapping, scripts, headless play on the shipped maze, savestates that a
spec starts from, the CLI, the no-display refusal and the SDL window (dummy video driver)."""

from __future__ import annotations

import ctypes
import importlib.util
import warnings

import pytest
import torch

from torchrl_dreamer.data.demonstrations import Demonstration, replay_demonstration
from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.actions import make_action_set
from torchrl_dreamer.envs.spec import load_task_spec
from torchrl_dreamer.envs.tasks.maze import MazeTask
from torchrl_dreamer.play import (
    PlaySession,
    ScriptError,
    buttons_of,
    nearest_action,
    parse_script,
    parse_watch,
    play,
    resolve_task,
)
from torchrl_dreamer.play.__main__ import main
from torchrl_dreamer.play.core import FreePlayTask
from torchrl_dreamer.play.sdl import NoDisplayError, check_display
from torchrl_dreamer.roms import rom_path

# Layout 0 of the shipped maze: the player starts at (2, 5), the exit is at (6, 1); the shortest
# path (from maze_distances) is 10 moves.
MAZE0_PATH = "LEFT\nUP x4\nRIGHT x5\n"


def maze0() -> MazeTask:
    return MazeTask(rom=rom_path("maze"), seed_values=[0])


def quiet(_line: str) -> None:
    pass


# ------------------------------------------------------------------------------ pure helpers
def test_nearest_action_prefers_held_buttons_and_never_presses_unheld_ones():
    dpad = make_action_set("dpad")
    combos = make_action_set("combos")
    assert nearest_action(buttons_of("RIGHT"), dpad) == dpad.index("RIGHT")
    assert nearest_action(buttons_of("A"), dpad) == dpad.index("NOOP")
    assert nearest_action(0, combos) == combos.index("NOOP")
    assert nearest_action(buttons_of("UP+A"), combos) == combos.index("UP+A")
    assert nearest_action(buttons_of("UP+A+B"), combos, recent=buttons_of("B")) == combos.index("UP+B")
    # UP+LEFT is not in the D-pad set: the button pressed last decides
    assert nearest_action(buttons_of("UP+LEFT"), dpad, recent=buttons_of("LEFT")) == dpad.index("LEFT")
    assert nearest_action(buttons_of("UP+LEFT"), dpad, recent=buttons_of("UP")) == dpad.index("UP")
    # a set without NOOP: the action pressing the fewest unheld buttons
    only = make_action_set(["A", "UP+B"])
    assert nearest_action(buttons_of("UP"), only) == 1


def test_parse_script_lines_and_errors():
    cmds = parse_script("RIGHT x3   # walk\n\nup+a\n- *2\nsave s.trdstate\nreset\nquit\n")
    assert [(c.kind, c.buttons, c.repeat, c.path) for c in cmds] == [
        ("buttons", buttons_of("RIGHT"), 3, None),
        ("buttons", buttons_of("UP+A"), 1, None),
        ("buttons", 0, 2, None),
        ("save", 0, 1, "s.trdstate"),
        ("reset", 0, 1, None),
        ("quit", 0, 1, None),
    ]
    with pytest.raises(ScriptError, match="line 2"):
        parse_script(["RIGHT", "JUMP"])
    with pytest.raises(ScriptError, match="line 1"):
        parse_script(["RIGHT twice"])
    with pytest.raises(ScriptError, match="reset takes no argument"):
        parse_script(["reset now"])


def test_parse_watch_forms():
    w = parse_watch("0xC0A0")
    assert (w.label, w.ram.address, w.ram.length, w.ram.encoding) == ("0xc0a0", 0xC0A0, 1, "u8")
    w = parse_watch("hp=0xD015:2")
    assert (w.label, w.ram.length, w.ram.encoding) == ("hp", 2, "u16le")
    with pytest.raises(ValueError, match="encoding"):
        parse_watch("0xC000:2:utf8")


def test_check_display_refuses_linux_without_display():
    with pytest.raises(NoDisplayError, match="--headless --script"):
        check_display({}, "linux")
    check_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    check_display({"SDL_VIDEODRIVER": "dummy"}, "linux")
    check_display({}, "darwin")


def test_play_refuses_a_window_without_display(monkeypatch):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    with pytest.raises(NoDisplayError, match="headless"):
        play("maze", log=quiet)
    with pytest.raises(ValueError, match="needs a script"):
        play("maze", headless=True, log=quiet)


# ------------------------------------------------------------------------------ the core
def test_resolve_task_forms(tmp_path):
    assert resolve_task("maze").name == "maze"
    assert resolve_task(rom_path("catch")).name == "catch"
    other = tmp_path / "copy.gb"
    data = rom_path("maze").read_bytes()
    other.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # not the shipped image
    assert isinstance(resolve_task(other), FreePlayTask)
    with pytest.raises(FileNotFoundError, match="not a registered task"):
        resolve_task(tmp_path / "missing.gb")


def test_frame_by_frame_steps_match_one_launch():
    """The window's per-frame stepping gives the env's own observations, rewards and resets."""
    frames: list[int] = []
    session = PlaySession(maze0(), max_episode_steps=6, seed=5)
    session.on_frame = lambda k, gb: frames.append(k)
    env = GameBoyEnv(maze0(), 1, max_episode_steps=6, seed=5)
    ref = env.reset()
    assert torch.equal(session.pixels, ref["pixels"])
    g = torch.Generator().manual_seed(0)
    for _ in range(15):  # through two truncations (deferred resets)
        a = int(torch.randint(5, (1,), generator=g))
        r = session.act(a)
        out = env.fast_step(torch.tensor([a]))
        assert torch.equal(session.pixels, out["pixels"])
        assert torch.equal(session.env.gb.packed2, out["pixels"])  # drawn frame by frame
        assert r.reward == pytest.approx(float(out["reward"]))
        assert (r.terminated, r.truncated, r.is_first) == (
            bool(out["terminated"]), bool(out["truncated"]), bool(out["is_first"]))
    assert frames == list(range(24)) * 15
    assert session.frame_rgb().shape == (144, 160, 3)
    assert session.frame_rgb("agent").shape == (72, 80, 3)


def test_headless_script_reaches_the_maze_exit_and_the_recording_replays(tmp_path):
    record = tmp_path / "maze0.pt"
    session = play(task=maze0(), inputs=MAZE0_PATH, headless=True, record=record, log=quiet)
    last = session.readout
    assert last.step == 10 and last.terminated and not last.truncated
    assert last.watches["PLAYER_X"] == 6 and last.watches["PLAYER_Y"] == 1
    assert last.watches["WON"] == 1 and last.watches["GAME_STATE"] == 2
    assert last.episode_return == pytest.approx(2.0)  # +1 at the exit, 10 x 0.1 shaping
    demo = Demonstration.load(record)
    assert len(demo) == 11 and demo.num_episodes == 1
    assert [demo.action_names[a] for a in demo.action.tolist()] == (
        ["LEFT"] + ["UP"] * 4 + ["RIGHT"] * 5 + ["NOOP"])
    assert bool(demo.terminated[-1]) and demo.episode_returns() == [pytest.approx(2.0)]
    # the rows are a GameBoyEnv episode: replaying the actions gives the same observations
    replayed = replay_demonstration(demo, GameBoyEnv(maze0(), 1, seed=0))
    assert torch.equal(replayed.pixels, demo.pixels)
    assert torch.equal(replayed.reward, demo.reward)


def test_play_records_with_the_tasks_own_step_and_press():
    """A spec's train: frame_skip and press_frames are what its training runs use, so playing
    it (and the demonstrations recorded while playing) takes both; a frame skip given by hand
    keeps the env's press default."""
    spec = {"name": "maze_press", "rom": {"logo": False}, "actions": "dpad",
            "reward": [{"kind": "delta", "address": 0xC00A}],
            "train": {"frame_skip": 16, "press_frames": 4}}
    task = load_task_spec(spec, rom=rom_path("maze"))
    player = PlaySession(task)
    assert (player.env.frame_skip, player.env.press_frames) == (16, 4)
    player = PlaySession(load_task_spec(spec, rom=rom_path("maze")), frame_skip=6)
    assert (player.env.frame_skip, player.env.press_frames) == (6, 6)


def test_saved_state_starts_a_spec_task(tmp_path):
    state = tmp_path / "start.trdstate"
    play(task=maze0(), inputs=["LEFT", "UP x2", f"save {state}"], headless=True, log=quiet)
    spec = {"name": "maze_from_state", "rom": {"logo": False}, "start": {"state": str(state)},
            "actions": "dpad", "reward": [{"kind": "delta", "address": 0xC00A}]}
    env = GameBoyEnv(load_task_spec(spec, rom=rom_path("maze")), 1)
    env.reset()
    x, y = env.gb.read_memory(0xC004, 2)[0].tolist()  # PLAYER_X, PLAYER_Y
    assert (x, y) == (1, 3)


def test_script_reset_records_a_truncated_row_and_replays(tmp_path):
    session = play(task=maze0(), inputs=["UP x2", "reset", "DOWN"], headless=True,
                   record=tmp_path / "d.pt", log=quiet)
    demo = session.demonstration()
    assert demo.is_first.tolist() == [True, False, False, True, False]
    assert demo.truncated.tolist() == [False, False, True, False, False]
    assert demo.episode_id.tolist() == [0, 0, 0, 1, 1]
    replayed = replay_demonstration(demo, GameBoyEnv(maze0(), 1, seed=0))
    assert torch.equal(replayed.pixels, demo.pixels)


def test_spec_game_watches_and_recording_replay(roms, tmp_path):
    """A spec task on a real game (no reset hook: episodes start from the start state's own
    picture): its watches show, and a recording over two truncated episodes replays."""
    from conftest import rom_path as shared_rom

    rom = shared_rom(roms, "games/gb_raw_snake/snake.gb")
    spec = "examples/tasks/snake.yaml"
    session = play(rom, spec=spec, inputs=["UP x3", "LEFT x4", "DOWN x3"], headless=True,
                   max_episode_steps=4, record=tmp_path / "snake.pt", log=quiet)
    labels = list(session.readout.watches)
    assert any(label.startswith("reward[0]@0xc00c") for label in labels), labels
    assert any("@0xfff7" in label for label in labels), labels
    demo = session.demonstration()
    assert demo.task == "snake_spec" and demo.num_episodes == 3
    assert demo.meta["spec"] == spec
    env = GameBoyEnv(load_task_spec(spec, rom=rom), 1, max_episode_steps=4,
                     frame_skip=demo.frame_skip, seed=0)
    replayed = replay_demonstration(demo, env)
    assert torch.equal(replayed.pixels, demo.pixels)


# ------------------------------------------------------------------------------ the CLI
def test_cli_headless_script_records(tmp_path, capsys):
    script = tmp_path / "moves.txt"
    script.write_text("RIGHT x2\nsave\nDOWN\n")
    record = tmp_path / "demo.pt"
    saved = tmp_path / "start.trdstate"
    rc = main([str(rom_path("maze")), "--headless", "--script", str(script), "--record",
               str(record), "--save-state", str(saved), "--quiet", "--watch", "pos=0xC004:2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert saved.is_file() and f"saved state {saved}" in out
    demo = Demonstration.load(record)
    assert len(demo) == 4 and demo.task == "maze"
    assert "pos=" in out


def test_cli_errors(tmp_path, capsys, monkeypatch):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert main(["maze"]) == 2
    assert "--headless --script" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["maze", "--headless"])
    assert "--script" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("JUMP\n")
    assert main(["maze", "--headless", "--script", str(bad)]) == 2
    assert "script line 1" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the window
@pytest.mark.skipif(importlib.util.find_spec("sdl2") is None,
                    reason="needs the 'play' extra: pip install 'torchrl_dreamer[play]'")
def test_sdl_window_keys_drive_the_game(tmp_path, monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from torchrl_dreamer.play.sdl import run_window

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sdl2

    def key(sym: int, down: bool = True) -> None:
        ev = sdl2.SDL_Event()
        ev.type = sdl2.SDL_KEYDOWN if down else sdl2.SDL_KEYUP
        ev.key.keysym.sym = sym
        sdl2.SDL_PushEvent(ctypes.byref(ev))

    shown = []
    state = tmp_path / "w.trdstate"

    def on_step(win, r):
        shown.append(win.frames_shown)
        if r.step == 1:  # hold LEFT for two steps, then tap UP (down and up within a step)
            key(sdl2.SDLK_LEFT)
        elif r.step == 3:
            key(sdl2.SDLK_LEFT, down=False)
            key(sdl2.SDLK_UP)
            key(sdl2.SDLK_UP, down=False)
        elif r.step == 4:
            key(sdl2.SDLK_F2)
            key(sdl2.SDLK_r)
        elif r.step == 6:
            key(sdl2.SDLK_ESCAPE)

    session = PlaySession(maze0(), record=True)
    run_window(session, speed=8, save_state_path=state, on_step=on_step, log=quiet)
    names = [r.action_name for r in session.history]
    # step 1: no key yet; 2-3: LEFT held; 4: the UP tap; 5: R ended the episode; 6: nothing held
    assert names == ["NOOP", "NOOP", "LEFT", "LEFT", "UP", "NOOP", "NOOP"]
    assert session.history[5].is_first and session.history[5].episode == 1
    assert state.is_file()
    assert shown[0] >= 24 and all(b - a >= 24 for a, b in zip(shown, shown[1:]))  # every frame
    demo = session.demonstration()
    assert demo.truncated.tolist()[4] and demo.is_first.tolist()[5]


@pytest.mark.skipif(importlib.util.find_spec("sdl2") is None,
                    reason="needs the 'play' extra: pip install 'torchrl_dreamer[play]'")
def test_sdl_failing_to_open_a_display_is_refused(monkeypatch):
    from torchrl_dreamer.play.sdl import SdlWindow

    monkeypatch.setenv("SDL_VIDEODRIVER", "no_such_driver")
    with pytest.raises(NoDisplayError, match="SDL could not open a display.*--headless"):
        SdlWindow("x")
