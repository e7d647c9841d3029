"""The spec probe (torchrl_dreamer.envs.spec_check): it refuses a start state that already ends
the episode, attributes every reward to the term that paid it, counts how episodes end, warns
about terms that never pay and episodes that never end, and writes readable PNG frames. All on
our shipped catch game (a few seconds)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
import torch

from torchrl_dreamer.emulator.packed2 import DMG_SHADES_RGB
from torchrl_dreamer.envs.spec import load_task_spec
from torchrl_dreamer.envs.spec_check import (
    StartStateError,
    check_spec,
    check_start,
    main,
    write_png,
)
from torchrl_dreamer.envs.tasks.catch import CatchTask
from torchrl_dreamer.ramsearch import main as ramsearch_main
from torchrl_dreamer.roms import ram_map, rom_path

GREYS = [rgb[0] for rgb in DMG_SHADES_RGB]  # grey level of shades 0..3 in the PNG files

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
CATCH = rom_path("catch")
RAM = ram_map("catch")


def _catch_spec(**changes) -> dict:
    """examples/tasks/catch.yaml as a mapping, with ``changes`` applied."""
    import yaml

    spec = yaml.safe_load((EXAMPLES / "catch.yaml").read_text())
    spec.update(changes)
    return spec


def _read_png(path: Path) -> tuple[int, int, bytes]:
    """Width, height and raw rows (filter bytes included) of an 8-bit grey PNG, read by hand."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        crc = int.from_bytes(data[pos + 8 + n:pos + 12 + n], "big")
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            size = (int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big"))
            assert body[8:10] == b"\x08\x00"  # 8-bit greyscale
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    return size[0], size[1], zlib.decompress(idat)


def test_png_holds_the_shades_scaled(tmp_path):
    shades = torch.tensor([[0, 1, 2], [3, 2, 1]], dtype=torch.uint8)
    w, h, raw = _read_png(write_png(tmp_path / "f.png", shades, scale=2))
    assert (w, h) == (6, 4)
    rows = [raw[r * 7:(r + 1) * 7] for r in range(4)]
    assert all(row[0] == 0 for row in rows)  # filter type "none"
    assert list(rows[0][1:]) == [GREYS[0]] * 2 + [GREYS[1]] * 2 + [GREYS[2]] * 2
    assert rows[3][1:] == rows[2][1:] and list(rows[2][1:3]) == [GREYS[3]] * 2


def test_check_start_passes_a_playable_start_and_leaves_the_task_alone():
    task = load_task_spec(EXAMPLES / "catch.yaml", rom=CATCH)
    check_start(task)
    assert task.buffers == {}  # a copy was probed
    check_start(CatchTask())  # any Task, not only specs


def test_check_start_refuses_a_start_that_is_already_over():
    # LIVES is 3 from the first frame of a game: "== 3" holds before any action
    spec = _catch_spec(terminate=[{"address": RAM["LIVES"], "op": "==", "value": 3}])
    with pytest.raises(StartStateError, match=r"terminate\[0\] \(\$C003 == 3\)"):
        check_start(load_task_spec(spec, rom=CATCH))
    spec = _catch_spec(truncate=[{"address": RAM["GAME_STATE"], "op": "!=", "value": 0}])
    with pytest.raises(StartStateError, match=r"truncate\[0\]"):
        check_start(load_task_spec(spec, rom=CATCH))
    # a change (decreased) cannot hold at the start: nothing has changed yet
    check_start(load_task_spec(_catch_spec(terminate=[
        {"address": RAM["LIVES"], "op": "decreased"}]), rom=CATCH))


def test_probe_attributes_rewards_and_counts_episodes(tmp_path):
    report = check_spec(EXAMPLES / "catch.yaml", rom=CATCH, num_envs=16, steps=140,
                        out_dir=tmp_path, end_frames=2, progress=False, seed=0)
    assert report.ok and report.steps == 140
    score, lives = report.terms
    assert "$C004 u16le" in score.label and "$C003" in lives.label
    # catch ends a game after exactly 3 lost lives: each ended episode paid -3 through LIVES
    ended = len(report.terminated)
    assert ended > 0 and not report.truncated
    assert lives.low == lives.high == -1.0 and lives.total <= -3 * ended
    assert score.fired > 0 and score.low == 1.0  # one point per block caught
    assert score.total + lives.total == pytest.approx(report.reward_total)  # nothing else pays
    assert ended + len(report.running) >= 16
    assert all(n > 2 for n in report.terminated)
    names = [p.name for p in report.frames]
    assert names == ["start.png", "end_0_terminated.png", "end_1_terminated.png"]
    w, h, _ = _read_png(report.frames[0])
    assert (w, h) == (160, 144)
    assert "terminated" in report.text()
    # the only warnings: catch reads LEFT and RIGHT, so its dpad's UP and DOWN do nothing
    assert report.actions.dead == ["UP", "DOWN"] and not report.actions.duplicates
    assert len(report.warnings) == 2 and all("changed nothing" in w for w in report.warnings)
    quiet = check_spec(_catch_spec(actions=["NOOP", "LEFT", "RIGHT"]), rom=CATCH, num_envs=16,
                       steps=140, progress=False, seed=0)
    assert "no problems found" in quiet.text()


def test_probe_warns_about_terms_that_never_pay_and_episodes_that_never_end():
    spec = _catch_spec(reward=[{"kind": "delta", "address": 0xC0A0}], terminate=[],
                       max_episode_steps=None)
    report = check_spec(spec, rom=CATCH, num_envs=4, steps=30, progress=False)
    assert report.ok  # warnings, not errors
    text = " ".join(report.warnings)
    assert "never paid" in text and "no episode ended" in text
    assert len(report.running) == 4 and report.terms[0].fired == 0


def test_probe_reports_a_terminal_start_as_an_error():
    spec = _catch_spec(terminate=[{"address": RAM["LIVES"], "op": ">=", "value": 1}])
    report = check_spec(spec, rom=CATCH, num_envs=4, steps=5, progress=False)
    assert not report.ok and "already holds at the start" in report.errors[0]
    assert report.terminated and max(report.terminated) == 1  # every episode: one step


def test_command_lines(tmp_path, capsys):
    args = [str(EXAMPLES / "catch.yaml"), "--rom", str(CATCH), "--envs", "4", "--steps", "20",
            "--out", str(tmp_path / "a")]
    assert main(args) == 0
    assert "reward[0] delta $C004 u16le" in capsys.readouterr().out
    assert (tmp_path / "a" / "start.png").is_file()
    # the same probe as a subcommand of the RAM finder
    args[-1] = str(tmp_path / "b")
    assert ramsearch_main(["check", *args]) == 0
    assert "reward[1] delta $C003" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text((EXAMPLES / "catch.yaml").read_text().replace(
        'op: "==", value: 2', 'op: "<=", value: 2'))  # GAME_STATE <= 2 holds at once
    assert main([str(bad), "--rom", str(CATCH), "--envs", "2", "--steps", "3",
                 "--out", str(tmp_path / "c")]) == 1
    assert "ERROR" in capsys.readouterr().out


def test_action_probe_finds_dead_and_duplicate_actions():
    """Catch reads LEFT and RIGHT only: A alone is dead, LEFT+A moves as LEFT does, and the
    probe leaves the env it reads where it was."""
    from torchrl_dreamer.envs import GameBoyEnv
    from torchrl_dreamer.envs.action_probe import probe_actions

    env = GameBoyEnv(CatchTask(), num_envs=6, frame_skip=8, seed=0,
                     action_set=["NOOP", "LEFT", "RIGHT", "A", "LEFT+A"])
    env.reset()
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        env.fast_step(torch.randint(0, 5, (6,), generator=g))
    twin = env.replica(3)  # what the probe builds its consoles from
    assert twin.num_envs == 3 and twin.action_set.names == env.action_set.names
    assert (twin.frame_skip, twin.press_frames, twin.noop_max) == (8, 8, 0)
    before = {k: v.clone() for k, v in env.gb.state_tensors().items()}
    probe = probe_actions(env, states=4, after=2)
    assert probe.states == 4 and probe.after == 2
    assert probe.dead == ["A"] and probe.duplicates == [("LEFT", "LEFT+A")]
    assert probe.differs[0] == 0 and min(probe.differs[1], probe.differs[2]) > 0
    assert all(torch.equal(before[k], v) for k, v in env.gb.state_tensors().items())
    text = probe.text()
    assert "(dead)" in text and "(same as LEFT+A)" in text
    # catch moves its paddle for as long as a button is held: no action acts on presses only
    assert len(probe.press_only) == 5 and probe.held_in_vain == []
    assert "acts on a press" not in text
    with pytest.raises(ValueError, match="states must be >= 1"):
        probe_actions(env, states=0)


def test_check_warns_about_dead_and_duplicate_actions(capsys):
    spec = _catch_spec(actions=["NOOP", "LEFT", "RIGHT", "A", "LEFT+A"])
    report = check_spec(spec, rom=CATCH, num_envs=8, steps=20, progress=False,
                        action_states=8)
    assert report.ok and report.actions is not None and report.actions.states == 8
    text = " ".join(report.warnings)
    assert "action A changed nothing on screen in any of 8 states" in text
    assert "actions LEFT and LEFT+A showed the same frames" in text
    assert "(dead)" in report.text()
    assert check_spec(spec, rom=CATCH, num_envs=4, steps=5, progress=False,
                      action_states=0).actions is None


def test_command_line_steps_as_the_spec_trains(tmp_path, capsys):
    """Without --frame-skip / --press-frames the probe takes the spec's train: section (what a
    training run on it would use); the flags override it, and a press longer than the step is
    refused with the config's message."""
    spec = tmp_path / "catch.yaml"
    spec.write_text((EXAMPLES / "catch.yaml").read_text()
                    + "\ntrain: {frame_skip: 12, press_frames: 3}\n")
    base = [str(spec), "--rom", str(CATCH), "--envs", "2", "--steps", "3", "--action-states", "0",
            "--out", str(tmp_path / "o")]
    assert main(base) == 0
    assert "steps of 12 frames, buttons held 3" in capsys.readouterr().out
    assert main([*base, "--frame-skip", "6", "--noop-max", "0"]) == 0
    out = capsys.readouterr().out
    assert "steps of 6 frames, buttons held 3, up to 0 no-op" in out
    assert main([*base, "--press-frames", "20"]) == 2
    assert "press_frames" in capsys.readouterr().err


@pytest.mark.parametrize("train", ["", "\ntrain: {frame_skip: 12, press_frames: 3}\n",
                                   "\ntrain: {noop_max: 5}\n"])
@pytest.mark.parametrize("given", [{}, {"frame_skip": 6}, {"noop_max": 0}])
def test_training_steps_agree_with_the_train_config(tmp_path, train, given):
    """The envs layer's resolution of the step (which the probe and the play CLI use: the envs
    layer may not import the trainers) is the one TrainConfig makes for the same spec and
    overrides."""
    from torchrl_dreamer.envs.gameboy import training_steps
    from torchrl_dreamer.trainers import TrainConfig

    spec = tmp_path / "catch.yaml"
    spec.write_text((EXAMPLES / "catch.yaml").read_text() + train)
    cfg = TrainConfig(task_spec=str(spec), rom=str(CATCH), **given)
    task = load_task_spec(spec, rom=CATCH)
    assert training_steps(task, given.get("frame_skip"), None, given.get("noop_max")) == (
        cfg.frame_skip, cfg.press_frames, cfg.noop_max)
