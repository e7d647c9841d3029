"""The examples run end to end (quick settings) and their config files are valid."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchrl_dreamer.trainers import TrainConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["config", "config_catch", "config_cartpole"])
def test_dreamer_v3_configs_are_valid(name):
    if "cartpole" in name:
        pytest.importorskip("gymnasium")
    cfg = TrainConfig.from_file(EXAMPLES / "dreamer_v3" / f"{name}.yaml")
    assert cfg.total_steps >= 20_000 and cfg.preset == "tiny"


def test_pipeline_example_quick(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "pipeline.py"), "--quick", "--num-envs", "4",
         "--log-dir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("done: 256 policy steps")
    updates = int(last.split(",")[1].split()[0])
    assert updates > 0
    assert (tmp_path / "pipeline" / "scalars" / "loss_world_model.csv").is_file()


def test_dreamer_v3_train_script_quick(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES / "dreamer_v3"))
    torch.set_num_threads(1)
    mod = runpy.run_path(str(EXAMPLES / "dreamer_v3" / "train.py"))
    small = ["num_envs=4", "batch_size=4", "seq_len=8", "steps_per_rollout=8",
             "commit_stride=4", "replay_capacity=512", "learning_starts=32",
             "frame_skip=6", "total_steps=128", "checkpoint_every=64", "eval_episodes=2",
             "backend=reference", "progress=false", f"log_dir={tmp_path}"]
    summary = mod["main"](small)
    assert summary["policy_steps"] == 128.0 and summary["updates"] > 0
    assert 0.0 <= summary["eval_success_rate"] <= 1.0
    assert (tmp_path / "eval.gif").is_file()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_128",
                                                                            "step_64"]
    # resume=true continues the same run directory to a longer total.
    summary = mod["main"]([*small[:-4], "total_steps=192", "checkpoint_every=64",
                           "eval_episodes=0", "progress=false", f"log_dir={tmp_path}",
                           "resume=true"])
    assert summary["policy_steps"] == 192.0


def test_cartpole_example_quick(tmp_path, capsys, monkeypatch):
    pytest.importorskip("gymnasium")
    torch.set_num_threads(1)
    monkeypatch.setattr(sys, "argv", ["cartpole.py", "--quick", "--num-envs", "4",
                                      "--log-dir", str(tmp_path)])
    runpy.run_path(str(EXAMPLES / "cartpole.py"), run_name="__main__")
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["policy_steps"] == 300.0 and out["updates"] > 0
    assert out["eval_mean_return"] >= 8  # CartPole episodes last >= 8 steps


def test_plot_learning_curve_writes_svg(tmp_path, monkeypatch):
    ep = tmp_path / "run" / "logs" / "scalars" / "episode"
    ep.mkdir(parents=True)
    (ep / "success.csv").write_text("".join(f"{100 * i},{i % 2}\n" for i in range(1, 11)))
    out = tmp_path / "curve.svg"
    monkeypatch.setattr(sys, "argv", ["plot", str(tmp_path / "run"), "--window", "2",
                                      "--hline", "0.1", "--out", str(out)])
    runpy.run_path(str(EXAMPLES / "plot_learning_curve.py"), run_name="__main__")
    svg = out.read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    line = svg.split('<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="')[1]
    assert len(line.split('"')[0].split()) == 10  # one point per episode


def test_world_model_probe_quick():
    probe = runpy.run_path(str(EXAMPLES / "world_model_probe.py"))
    torch.set_num_threads(1)
    data = probe["collect"]("maze", num_envs=3, rows=80, seed=0)
    assert data["pixels"].shape == (80, 3, 1, 72, 20) and int(data["num_actions"]) == 5
    assert bool(data["is_first"][0].all())  # every env starts an episode on row 0
    log = probe["probe"](data, cnn_mult=2, lr=1e-3, seconds=600, every=2, batch=2, seq=8,
                         max_steps=4)
    assert [r["step"] for r in log] == [2, 4]
    # the world model learns: held-out reconstruction falls from its initial value
    assert log[-1]["reconstruction"] < log[0]["reconstruction"]
    with pytest.raises(ValueError, match="need >= 3 envs"):
        probe["probe"]({**data, "action": data["action"][:, :2]}, 2, 1e-3, 1, 1, 2, 8)


def test_scripted_demos_play_catch_and_load_into_its_run(tmp_path):
    """The scripted catch player catches blocks (far above random's -2.3 a game), and its files
    load into a run of the same task (same ROM, actions, frame skip and press length)."""
    from torchrl_dreamer.data.demonstrations import load_demonstrations
    from torchrl_dreamer.trainers import make_env

    mod = runpy.run_path(str(EXAMPLES / "scripted_demos.py"))
    torch.set_num_threads(1)
    demos = mod["record"]("catch", episodes=1, epsilon=0.0, seed=0, max_steps=60)
    demo = demos[0]
    assert len(demo) == 61 and bool(demo.is_first[0]) and not bool(demo.is_first[1:].any())
    assert float(demo.reward.sum()) >= 4  # a block reaches the paddle every ~10 steps
    assert float(demo.reward.min()) >= 0  # and none is missed
    mod["main"](["--task", "catch", "--episodes", "1", "--max-steps", "20", "--epsilon", "0.5",
                 "--out", str(tmp_path)])
    env = make_env(TrainConfig(task="catch"), num_envs=1)
    loaded = load_demonstrations(tmp_path, env=env)
    assert len(loaded) == 1 and len(loaded[0]) == 21
    with pytest.raises(ValueError, match="no scripted player"):
        mod["record"]("maze", 1, 0.0, 0)


@pytest.fixture(scope="module")
def catch_run(tmp_path_factory):
    """A short catch run whose latest checkpoint keeps its replay (the reward probe's input)."""
    from torchrl_dreamer.trainers import DreamerTrainer

    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("probe") / "run"
    cfg = TrainConfig(task="catch", preset="tiny", num_envs=2, batch_size=4, seq_len=8,
                      steps_per_rollout=8, commit_stride=4, replay_capacity=256,
                      learning_starts=16, replay_ratio=0.1, frame_skip=6, total_steps=128,
                      eval_episodes=0, progress=False, backend="reference", seed=3, threads=1,
                      log_dir=str(run))
    trainer = DreamerTrainer(cfg, quiet=True)
    try:
        trainer.train()
    finally:
        trainer.close()
    return run


def test_reward_probe_reads_each_rewarded_step_of_a_checkpoint(catch_run):
    run = catch_run
    probe = runpy.run_path(str(EXAMPLES / "reward_probe.py"))["probe"]
    every, summary = probe(str(run), steps=60, envs=2, min_reward=-1e9, ahead=(1, 3),
                           samples=2)
    # with no threshold every console step is a row, the reward read on the frame it came with
    assert summary["rewarded_steps"] == summary["console_steps"] == 120
    assert sorted((r["step"], r["env"]) for r in every) == [
        (t, i) for t in range(1, 61) for i in range(2)]
    assert any(r["reward"] != 0 for r in every)  # catch pays +1 a block, -1 a life
    # imagination starts k steps back, never before the history or the episode holds them
    assert all(set(r["prior"]) == {1} for r in every if r["step"] < 3)
    assert all(set(r["prior"]) == {1, 3} for r in every if 3 <= r["step"] < 20)
    # the same seed plays the same episodes: a threshold keeps exactly the rows above it
    caught, _ = probe(str(run), steps=60, envs=2, min_reward=0.5, ahead=(1, 3), samples=2)
    drop = ("prior",)  # prior draws come from the global generator, which the rows consume
    assert [{k: v for k, v in r.items() if k not in drop} for r in caught] == [
        {k: v for k, v in r.items() if k not in drop} for r in every if r["reward"] >= 0.5]
    assert summary["value_all_std"] >= 0.0 and summary["posterior"] is not None


def test_reward_probe_reads_the_rewarded_rows_of_the_replay(catch_run):
    script = runpy.run_path(str(EXAMPLES / "reward_probe.py"))
    storage = script["load_replay"](script["resolve_checkpoint"](catch_run))
    held = storage.chronological_rows()
    reward, first = storage.fields["reward"][held], storage.fields["is_first"][held]
    base = storage.total_steps - len(held)
    # with no threshold every row is probed but the oldest and each episode's first (no row
    # before it in its episode); each reads its own stored reward
    every, summary = script["probe_replay"](str(catch_run), min_reward=-1e9, ahead=(1, 3),
                                            samples=2, context=4)
    expect = [(base + s, i) for s in range(1, len(held)) for i in range(storage.num_envs)
              if not first[s, i]]
    assert sorted((r["step"], r["env"]) for r in every) == expect
    assert all(r["reward"] == float(reward[r["step"] - base, r["env"]]) for r in every)
    assert any(r["reward"] != 0 for r in every)
    # imagination starts k rows back, within the context and the row's episode only
    for r in every:
        s, i = r["step"] - base, r["env"]
        begin = max(0, s - 3)
        starts = [b for b in range(begin, s + 1) if first[b, i]]
        back = s - (starts[-1] if starts else begin)
        assert set(r["prior"]) == {k for k in (1, 3) if k <= back}
    assert {3} <= {k for r in every for k in r["prior"]}
    # a context of 2 keeps one row before the rewarded one: one step of imagination at most
    short, _ = script["probe_replay"](str(catch_run), min_reward=-1e9, ahead=(1, 3),
                                      samples=2, context=2)
    assert all(set(r["prior"]) == {1} for r in short) and len(short) == len(every)
    # a threshold keeps the paid rows only
    paid, _ = script["probe_replay"](str(catch_run), min_reward=0.5, ahead=(1,), samples=2)
    assert [(r["step"], r["env"]) for r in paid] == sorted(
        (r["step"], r["env"]) for r in every if r["reward"] >= 0.5)
    assert summary["value_all"] is not None and summary["held_steps"] == reward.numel()


def test_checkpoint_scan_plays_the_chosen_checkpoints_and_names_the_best(tmp_path, capsys):
    """examples/checkpoint_scan.py: every n-th checkpoint and the last, or the named steps; one
    row each with what the evaluation measured, then the best by success, score, return."""
    from torchrl_dreamer.trainers import DreamerTrainer

    torch.set_num_threads(1)
    run = tmp_path / "run"
    cfg = TrainConfig(task="catch", preset="tiny", num_envs=2, batch_size=4, seq_len=8,
                      steps_per_rollout=8, commit_stride=4, replay_capacity=256,
                      learning_starts=16, replay_ratio=0.1, frame_skip=6, total_steps=96,
                      checkpoint_every=32, eval_episodes=0, progress=False,
                      backend="reference", seed=3, threads=1, log_dir=str(run))
    trainer = DreamerTrainer(cfg, quiet=True)
    try:
        trainer.train()
    finally:
        trainer.close()
    mod = runpy.run_path(str(EXAMPLES / "checkpoint_scan.py"))
    found = mod["checkpoints"](run)
    assert [n for n, _ in found] == [32, 64, 96]
    assert all(d == run / "checkpoints" / f"step_{n}" for n, d in found)
    assert [n for n, _ in mod["checkpoints"](run, every=2)] == [32, 96]
    with pytest.raises(FileNotFoundError, match="no checkpoint at steps"):
        mod["checkpoints"](run, steps=[40])
    with pytest.raises(FileNotFoundError, match="no checkpoint under"):
        mod["checkpoints"](tmp_path)
    assert mod["main"]([str(run), "--steps", "32", "96", "--episodes", "2",
                        "--max-steps", "20"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    rows, last = lines[:-1], lines[-1]
    assert [r["step"] for r in rows] == [32, 96]
    assert all(r["episodes"] + r["unfinished"] == 2 for r in rows)
    assert last["played"] == 2 and last["best_step"] == max(rows, key=mod["rank_key"])["step"]
    key = mod["rank_key"]
    assert key({"success_rate": 0.5, "mean_return": 1.0}) > key({"success_rate": 0.25,
                                                                  "mean_return": 9.0})
    assert key({"success_rate": float("nan"), "mean_return": 2.0}) > key(
        {"success_rate": float("nan"), "mean_return": 1.0})
