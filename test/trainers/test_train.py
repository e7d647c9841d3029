"""End-to-end tests of ``python -m torchrl_dreamer.train`` on the shipped maze (a few hundred
policy steps): CLI run with checkpoints, logs and eval GIF; exact resume; eval command; a
checkpoint from another configuration."""

from __future__ import annotations

import json
import math

import pytest
import torch
from test_train_units import read_gif

from torchrl_dreamer.train import main
from torchrl_dreamer.trainers import ConfigError, DreamerTrainer, TrainConfig
from torchrl_dreamer.trainers.checkpoint import CheckpointError, load_checkpoint

# Small but complete: 4 consoles, 6-frame steps, B4 x T8 batches, a few dozen gradient steps.
SMALL = dict(task="maze", preset="tiny", num_envs=4, batch_size=4, seq_len=8,
             steps_per_rollout=8, commit_stride=4, replay_capacity=512, learning_starts=32,
             replay_ratio=0.1, frame_skip=6, log_every=2, eval_episodes=0, progress=False,
             backend="reference", seed=3, threads=1)
SMALL_ARGS = ["--task", "maze", "--preset", "tiny", "--num-envs", "4", "--batch-size", "4",
              "--seq-len", "8", "--steps-per-rollout", "8", "--commit-stride", "4",
              "--replay-capacity", "512", "--learning-starts", "32", "--replay-ratio", "0.1",
              "--frame-skip", "6", "--log-every", "2", "--no-progress", "--seed", "3",
              "--threads", "1"]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """One CLI training run of 256 policy steps with a checkpoint every 128 and a final eval."""
    run = tmp_path_factory.mktemp("cli_run")
    torch.set_num_threads(1)
    rc = main([*SMALL_ARGS, "--total-steps", "256", "--checkpoint-every", "128",
               "--eval-episodes", "2", "--log-dir", str(run)])
    assert rc == 0
    return run


def test_cli_run_writes_checkpoints_logs_and_gif(cli_run):
    ckpts = sorted(p.name for p in (cli_run / "checkpoints").iterdir())
    assert ckpts == ["step_128", "step_256"]
    for c in ckpts:
        assert (cli_run / "checkpoints" / c / "state.pt").is_file()
    # only the latest checkpoint keeps the replay (an older one resumes with an empty replay)
    assert (cli_run / "checkpoints" / "step_256" / "replay" / "meta.json").is_file()
    assert not (cli_run / "checkpoints" / "step_128" / "replay").exists()
    # the values the run used (gamma: the 20-second horizon at 6 frames a step; entropy: the
    # maze's task default) are stored for --resume
    state = load_checkpoint(cli_run / "checkpoints" / "step_128")
    assert {k: state["config"][k] for k in ("gamma", "entropy_coef", "replay_ratio",
                                            "learning_starts")} == {
        "gamma": pytest.approx(0.995), "entropy_coef": 5e-3, "replay_ratio": 0.1,
        "learning_starts": 32}
    rows = (cli_run / "logs" / "scalars" / "loss_world_model.csv").read_text().splitlines()
    assert len(rows) >= 2  # logged every 2 gradient steps
    progress = json.loads((cli_run / "progress.json").read_text())
    assert [p["policy_steps"] for p in progress] == [128.0, 256.0]
    assert progress[-1]["updates"] > 0 and progress[-1]["replay_ratio"] > 0
    ev = json.loads((cli_run / "eval.json").read_text())
    assert ev["episodes"] == 2 and 0.0 <= ev["success_rate"] <= 1.0
    sampled = json.loads((cli_run / "eval_sampled.json").read_text())  # eval_sampled: default on
    assert sampled["episodes"] == 2 and (cli_run / "eval_sampled.gif").is_file()
    pal, frames, (w, h) = read_gif(cli_run / "eval.gif")
    assert (w, h) == (160, 144)  # 80x72 frames upscaled x2
    # the best episode: its reset frame + one per step until done
    assert len(frames) == ev["lengths"][ev["gif_episode"]] + 1
    assert all(len(f) == w * h for f in frames)


def test_eval_command_prints_success_rate_and_writes_gif(cli_run, capsys, tmp_path):
    gif = tmp_path / "play.gif"
    assert main(["eval", "--checkpoint", str(cli_run), "--episodes", "2", "--gif", str(gif)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["checkpoint"].endswith("step_256")
    assert out["episodes"] == 2 and 0.0 <= out["success_rate"] <= 1.0
    _, frames, _ = read_gif(gif)
    assert len(frames) == out["lengths"][out["gif_episode"]] + 1
    assert main(["eval", "--checkpoint", str(cli_run), "--episodes", "2", "--gif", str(gif),
                 "--gif-episode", "first"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["gif_episode"] == 0 and len(read_gif(gif)[1]) == out["lengths"][0] + 1


def test_eval_writes_world_model_video_and_mp4_agent_video(cli_run, capsys, tmp_path):
    """eval --video: the world model's open-loop report (3 panels per sequence) as MP4; an
    .mp4 --gif path makes the agent's video an MP4 too."""
    imageio = pytest.importorskip("imageio.v2")
    video, agent = tmp_path / "wm.mp4", tmp_path / "agent.mp4"
    assert main(["eval", "--checkpoint", str(cli_run), "--episodes", "2", "--gif", str(agent),
                 "--video", str(video), "--video-context", "4"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["video"] == str(video) and out["gif"] == str(agent)
    frames = [f for f in imageio.get_reader(video)]  # list() would ask for an infinite length
    assert len(frames) == 48 and frames[0].shape[1] >= 3 * 80 * 2  # real | recon | imagined
    assert len([f for f in imageio.get_reader(agent)]) >= 2


def test_world_model_video_needs_a_world_model(cli_run, tmp_path):
    from torchrl_dreamer.trainers.checkpoint import CheckpointError, resolve_checkpoint
    from torchrl_dreamer.trainers.evaluate import world_model_video_checkpoint

    state = load_checkpoint(resolve_checkpoint(cli_run))
    state["learner"] = {k: v for k, v in state["learner"].items()
                        if not k.startswith("world_model.")}
    d = tmp_path / "ckpt"
    d.mkdir()
    torch.save(state, d / "state.pt")
    with pytest.raises(CheckpointError, match="no world model"):
        world_model_video_checkpoint(d, tmp_path / "v.mp4")


def test_resume_with_another_config_is_refused(cli_run, capsys):
    rc = main(["--log-dir", str(cli_run), "--resume", "--num-envs", "2", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "num_envs: checkpoint 4 vs now 2" in err


def test_resume_continues_the_same_run(tmp_path):
    """128 steps + resume to 256 == 256 steps in one go: weights, counters, replay, episodes."""
    torch.set_num_threads(1)
    full = DreamerTrainer(TrainConfig(**SMALL, total_steps=256, checkpoint_every=128,
                                      log_dir=str(tmp_path / "full")), quiet=True)
    full.train()
    half_cfg = TrainConfig(**SMALL, total_steps=128, checkpoint_every=128,
                           log_dir=str(tmp_path / "half"), replay_backing="memmap")
    half = DreamerTrainer(half_cfg, quiet=True)
    half.train()
    half.close()
    resumed = DreamerTrainer(half_cfg.with_(total_steps=256), resume=tmp_path / "half",
                             quiet=True)
    assert resumed.policy_steps == 128 and resumed.resumed_from.name == "step_128"
    resumed.train()
    a, b = full.parts, resumed.parts
    assert a.collector.updates == b.collector.updates > 0
    assert a.collector.env_steps == b.collector.env_steps == 64
    assert a.collector.versions == b.collector.versions
    sa, sb = a.learner.state_dict(), b.learner.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    for k in a.storage.fields:
        assert torch.equal(a.storage.fields[k], b.storage.fields[k]), k
    assert full.tracker.state_dict()["episodes"] == resumed.tracker.state_dict()["episodes"]
    full.close()
    resumed.close()


def test_event_fraction_reaches_the_run_sampler(tmp_path):
    """--event-fraction / TrainConfig.event_fraction builds the run's sampler with
    event_key="terminated" and that share (the sampling itself: test_replay_sampler.py)."""
    from torchrl_dreamer.train import build_parser
    from torchrl_dreamer.trainers.builder import build_run

    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path), "event_fraction": 0.5})
    parts = build_run(cfg)
    assert (parts.sampler.event_key, parts.sampler.event_fraction) == ("terminated", 0.5)
    off = build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "b")}))
    assert off.sampler.event_fraction == 0.0
    args = build_parser("train").parse_args(["--event-fraction", "0.25"])
    assert args.event_fraction == 0.25
    paid = build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "c"), "event_fraction": 0.25,
                                    "event_key": "reward"}))
    assert (paid.sampler.event_key, paid.sampler.event_fraction) == ("reward", 0.25)
    args = build_parser("train").parse_args(["--event-key", "reward"])
    assert args.event_key == "reward"
    with pytest.raises(ConfigError, match="unknown event key 'won'; choose one of terminated, reward"):
        TrainConfig(**{**SMALL, "event_key": "won"})


def test_gamma_reaches_the_run_learner(tmp_path, monkeypatch):
    """--gamma / TrainConfig.gamma, else the task default, else a 20-second horizon (Game Boy
    tasks) or the loss preset's discount (gym tasks)."""
    from torchrl_dreamer.envs.tasks.maze import MazeTask
    from torchrl_dreamer.objectives import LOSS_PRESETS
    from torchrl_dreamer.train import build_parser
    from torchrl_dreamer.trainers.builder import build_run

    parts = build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "a"), "gamma": 0.9}))
    assert parts.learner.config.gamma == 0.9
    assert parts.learner.actor_loss.config.gamma == 0.9
    monkeypatch.setattr(MazeTask, "train_defaults", {"gamma": 0.8})
    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "b")})
    assert cfg.gamma == 0.8 and cfg.loss_config().gamma == 0.8
    monkeypatch.setattr(MazeTask, "train_defaults", {})
    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "c")})
    assert cfg.gamma == pytest.approx(1 - 1 / (20 * 60 / 6))  # 200 steps of 6 frames
    assert cfg.with_(frame_skip=24).gamma == pytest.approx(0.98)
    assert cfg.decode_stride == 2 and cfg.imagine_last == 16  # Game Boy defaults: none of its own
    assert cfg.loss_config() == LOSS_PRESETS[cfg.loss_preset].with_(
        gamma=cfg.gamma, entropy_coef=cfg.entropy_coef, decode_stride=2, imagine_last=16)
    assert build_parser("train").parse_args(["--gamma", "0.95"]).gamma == 0.95


def test_entropy_coef_reaches_the_run_learner(tmp_path, monkeypatch):
    """--entropy-coef / TrainConfig.entropy_coef, else the task default, else the Game Boy
    default (Game Boy tasks) or the preset's (gym tasks)."""
    from torchrl_dreamer.envs.tasks.maze import MazeTask
    from torchrl_dreamer.objectives import LOSS_PRESETS
    from torchrl_dreamer.train import build_parser
    from torchrl_dreamer.trainers.builder import build_run

    parts = build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "a"), "entropy_coef": 0.02}))
    assert parts.learner.actor_loss.config.entropy_coef == 0.02
    monkeypatch.setattr(MazeTask, "train_defaults", {"entropy_coef": 0.007})
    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "b")})
    assert cfg.entropy_coef == 0.007 and cfg.loss_config().entropy_coef == 0.007
    assert cfg.to_dict()["entropy_coef"] == 0.007
    monkeypatch.setattr(MazeTask, "train_defaults", {})
    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "c")})
    assert cfg.entropy_coef == 5e-3  # the Game Boy default (the loss preset has 1e-3)
    gym = TrainConfig(task="gym:CartPole-v1", log_dir=str(tmp_path / "g"))
    assert gym.entropy_coef == LOSS_PRESETS[gym.loss_preset].entropy_coef
    args = build_parser("train").parse_args(["--entropy-coef", "0.004"])
    assert args.entropy_coef == 0.004


def test_learning_rates_reach_the_run_optimizers(tmp_path):
    """--wm-lr / --actor-lr / --critic-lr override the loss preset's learner preset; unset,
    each resolves to the preset's value (recorded, so a checkpoint compares what it used)."""
    from torchrl_dreamer.objectives import LEARNER_PRESETS
    from torchrl_dreamer.train import build_parser
    from torchrl_dreamer.trainers.builder import build_run
    from torchrl_dreamer.trainers.config import ConfigError

    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "a"), "actor_lr": 3e-4})
    preset = LEARNER_PRESETS[cfg.loss_preset]
    assert (cfg.wm_lr, cfg.critic_lr) == (preset.wm_lr, preset.critic_lr)
    assert cfg.to_dict()["actor_lr"] == 3e-4 and cfg.learner_config().actor_eps == preset.actor_eps
    parts = build_run(cfg)
    lrs = {name: opt.param_groups[0]["lr"] for name, opt in
           (("wm", parts.learner.wm_opt), ("actor", parts.learner.actor_opt),
            ("critic", parts.learner.critic_opt))}
    assert lrs == {"wm": preset.wm_lr, "actor": 3e-4, "critic": preset.critic_lr}
    assert cfg.with_(loss_preset="sheeprl").critic_lr == LEARNER_PRESETS["sheeprl"].critic_lr
    args = build_parser("train").parse_args(["--critic-lr", "1e-4", "--learner.wm-lr", "2e-4"])
    assert (args.critic_lr, args.wm_lr) == (1e-4, 2e-4)
    with pytest.raises(ConfigError, match="actor_lr"):
        TrainConfig(**{**SMALL, "actor_lr": -1.0})


def test_entropy_final_anneals_the_learner_entropy_weight_over_the_run(tmp_path):
    """--entropy-final: the actor loss's entropy weight starts at entropy_coef and reaches
    entropy_final by the end of the run (steps bounded here), logged in each progress row."""
    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "a"), "total_steps": 256,
                         "entropy_coef": 1e-2, "entropy_final": 1e-4})
    trainer = DreamerTrainer(cfg, quiet=True)
    loss = trainer.parts.learner.actor_loss
    assert float(loss.entropy_weight) == pytest.approx(1e-2)
    trainer.train()
    weights = [row["entropy_coef"] for row in trainer.history]
    assert weights[-1] == pytest.approx(1e-4)
    assert float(loss.entropy_weight) == pytest.approx(1e-4)
    assert all(a >= b for a, b in zip(weights, weights[1:]))  # it only falls
    trainer.close()
    with pytest.raises(ConfigError, match="entropy_final"):
        TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "b"), "entropy_final": -1.0})


def test_bonus_final_weighs_the_replayed_exploration_bonus_down_over_the_run(tmp_path):
    """--bonus-final: a spec with an exploration bonus gets a ``bonus`` field in its replay,
    and the world-model loss's bonus weight falls from 1 to bonus_final by the end of the run,
    logged in each progress row; a task without a bonus refuses the setting by name."""
    from torchrl_dreamer.roms import rom_path
    from torchrl_dreamer.trainers.builder import build_run

    spec = tmp_path / "explore.yaml"
    spec.write_text("reward: [{kind: delta, address: 0xC0F0}]\n"
                    "exploration: {screen: {scale: 0.05}}\n")
    base = {**SMALL, "task": None, "task_spec": str(spec), "rom": str(rom_path("catch")),
            "total_steps": 256}
    cfg = TrainConfig(**{**base, "log_dir": str(tmp_path / "a"), "bonus_final": 0.0})
    trainer = DreamerTrainer(cfg, quiet=True)
    loss = trainer.parts.learner.world_model_loss
    assert float(loss.bonus_weight) == 1.0
    assert "bonus" in trainer.parts.storage.fields
    trainer.train()
    weights = [row["bonus_weight"] for row in trainer.history]
    assert weights[-1] == pytest.approx(0.0) and float(loss.bonus_weight) == pytest.approx(0.0)
    assert all(a >= b for a, b in zip(weights, weights[1:]))  # it only falls
    stored = trainer.parts.storage.fields["bonus"][: trainer.parts.storage.total_steps]
    assert float(stored.sum()) > 0  # the bonus the env paid is in the replay
    trainer.close()
    with pytest.raises(ConfigError, match="bonus_final"):
        TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "b"), "bonus_final": 2.0})
    with pytest.raises(ConfigError, match="bonus_final=0.5 weighs an exploration bonus, but "
                                          "task 'maze' pays none"):
        build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "c"), "bonus_final": 0.5}))


def test_capture_and_compile_reach_the_learner_with_one_warning_or_strict_error(tmp_path):
    """--capture / --compile / --strict-acceleration reach the run's learner through the trainer:
    on the CPU capture=True warns once and trains on the static-buffer path; strict fails
    before training; an unknown mode is a ConfigError; the flags parse."""
    import warnings

    from torchrl_dreamer.train import build_parser
    from torchrl_dreamer.trainers.config import ConfigError

    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "a"), "total_steps": 64,
                         "checkpoint_every": 0, "logger": "none", "capture": True})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer = DreamerTrainer(cfg, quiet=True)
    ours = [w for w in record if issubclass(w.category, RuntimeWarning)
            and "capture=True uses CUDA graphs" in str(w.message)]
    assert len(ours) == 1
    learner = trainer.parts.learner
    assert (learner.compile_mode, learner.capture) == (None, True)
    trainer.train()
    assert learner.num_updates > 0 and learner._static is not None  # the static-buffer path ran
    trainer.close()
    with pytest.raises(RuntimeError, match="strict=True"):
        DreamerTrainer(cfg.with_(strict_acceleration=True, log_dir=str(tmp_path / "b")),
                       quiet=True)
    with pytest.raises(RuntimeError, match="compile='reduce-overhead' uses CUDA graphs"):
        DreamerTrainer(cfg.with_(capture=False, compile="reduce-overhead",
                                 strict_acceleration=True, log_dir=str(tmp_path / "c")),
                       quiet=True)
    with pytest.raises(ConfigError,
                       match="unknown compile 'fast'; choose one of default, reduce-overhead"):
        cfg.with_(compile="fast")
    args = build_parser("train").parse_args(["--compile", "default", "--capture",
                                             "--strict-acceleration"])
    assert (args.compile, args.capture, args.strict_acceleration) == ("default", True, True)


def test_cli_trains_a_shared_game_from_its_spec_file(roms, tmp_path):
    """The path from a ROM we did not write to a training run needs no code: ``--rom`` and
    ``--task-spec`` (snake's spec: its start macro, action set, rewards and death) train, log
    episodes that end on the game's own death signal with their scores, and evaluate."""
    from pathlib import Path

    from conftest import rom_path as shared_rom

    spec = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "snake.yaml"
    rom = shared_rom(roms, "games/gb_raw_snake/snake.gb")
    torch.set_num_threads(1)
    args = list(SMALL_ARGS)
    args[args.index("--task") : args.index("--task") + 2] = ["--rom", str(rom), "--task-spec",
                                                           str(spec)]
    args[args.index("--frame-skip") + 1] = "24"
    run = tmp_path / "snake"
    assert main([*args, "--total-steps", "160", "--eval-episodes", "2", "--log-dir", str(run)]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["task"] == "snake_spec" and config["task_spec"] == str(spec)
    scores = (run / "logs" / "scalars" / "episode" / "score.csv").read_text().splitlines()[1:]
    values = [float(r.split(",")[1]) for r in scores]
    assert len(values) >= 2  # random early play dies within a few dozen moves: episodes end
    assert all(v.is_integer() for v in values) and -1.0 in values  # food +1, death -1
    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["episodes"] == 2 and len(evaluation["returns"]) == len(evaluation["scores"]) == 2


def test_shaped_spec_run_logs_and_evaluates_the_game_score(tmp_path):
    """A spec whose reward holds a ``shaping: true`` term: training logs each episode's score
    (the unmarked terms) beside its shaped return, and the evaluation reports the mean score."""
    from torchrl_dreamer.roms import rom_path

    spec = tmp_path / "shaped.yaml"
    spec.write_text("actions: dpad\nrom: {logo: false}\nstart: {macro: [{wait: 30}]}\n"
                    "max_episode_steps: 5\nreward:\n"
                    "  - {kind: event, address: 0xC0F0, op: changed}\n"  # the frame counter
                    "  - {kind: level, address: 0xC0F0, scale: 0.001, shaping: true}\n")
    torch.set_num_threads(1)
    args = list(SMALL_ARGS)
    args[args.index("--task") : args.index("--task") + 2] = [
        "--rom", str(rom_path("catch")), "--task-spec", str(spec)]
    run = tmp_path / "run"
    assert main([*args, "--total-steps", "96", "--eval-episodes", "2", "--log-dir", str(run)]) == 0
    logs = run / "logs" / "scalars" / "episode"
    scores = [float(r.split(",")[1]) for r in (logs / "score.csv").read_text().splitlines()[1:]]
    returns = [float(r.split(",")[1]) for r in (logs / "return.csv").read_text().splitlines()[1:]]
    assert len(scores) == len(returns) >= 8
    assert set(scores) == {5.0}  # one paid step each of an episode's 5 (the counter runs)
    assert all(r > 5.0 for r in returns)  # plus the shaping
    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["scores"] == [5.0, 5.0] and evaluation["mean_score"] == 5.0
    assert evaluation["mean_return"] > 5.0


def test_deadline_stops_training_and_saves(tmp_path):
    """A run bounded by the clock alone stops at its deadline, checkpoints and reports."""
    import time

    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path), "time_limit": "1h",
                         "checkpoint_every": 0})
    assert not cfg.steps_bounded
    trainer = DreamerTrainer(cfg, quiet=True)
    t0 = time.perf_counter()
    row = trainer.train(deadline=time.perf_counter() + 3.0)
    took = time.perf_counter() - t0
    trainer.close()
    assert row["updates"] > 0 and took < 60  # it stopped long before the hour
    saved = sorted((tmp_path / "checkpoints").iterdir())
    assert [p.name for p in saved] == [f"step_{int(row['policy_steps'])}"]


def test_evaluation_within_budget_reports_what_it_covered():
    from torchrl_dreamer.envs import GameBoyEnv
    from torchrl_dreamer.modules import make_dreamer
    from torchrl_dreamer.trainers import evaluate

    env = GameBoyEnv("maze", num_envs=3, max_episode_steps=4)
    wm, actor, _ = make_dreamer("tiny", {"pixels": "packed2"}, env.action_spec.space.n)
    full = evaluate(env, wm, actor)
    assert full.stopped_by == "done" and full.episodes == 3 and full.unfinished == 0
    assert full.distinct == 3  # random layouts: three different episodes
    one = GameBoyEnv("maze", num_envs=3, max_episode_steps=4, task_kwargs={"seed_values": [0]})
    with torch.no_grad():  # an actor that always picks NOOP
        actor.out.weight.zero_()
        actor.out.bias.copy_(torch.tensor([5.0, 0, 0, 0, 0]))
    # one layout, a fixed start and a fixed policy: every env plays the same episode
    assert evaluate(one, wm, actor).distinct == 1
    cut = evaluate(env, wm, actor, max_steps=2)
    assert cut.stopped_by == "max_steps" and cut.episodes == 0 and cut.unfinished == 3
    assert len(cut.unfinished_returns) == 3 and cut.steps == 2
    # nothing finished: the means are unknown, not a measured 0 (maze has a success rule)
    assert math.isnan(cut.success_rate) and math.isnan(cut.mean_return)
    assert math.isnan(cut.mean_length) and full.success_rate == full.success_rate
    none = evaluate(env, wm, actor, time_limit=0.0)
    assert none.stopped_by == "time_limit" and none.steps == 0 and none.unfinished == 3


class _ScriptedEnv:
    """Three envs whose episodes last 5, 9 and 7 steps and pay 0.1, 1.0 and 0.5 a step; every
    frame's bytes hold the step count (so a GIF's frames can be counted)."""

    pixels_format, success_rule, device, max_episode_steps = "packed2", "none", "cpu", 20
    lengths, pay = torch.tensor([5, 9, 7]), torch.tensor([0.1, 1.0, 0.5])

    def __init__(self):
        from tensordict import TensorDict

        self.batch_size, self.t, self.TensorDict = torch.Size([3]), 0, TensorDict

    def _obs(self, first: bool):
        return self.TensorDict({
            "pixels": torch.full((3, 1, 72, 20), self.t % 256, dtype=torch.uint8),
            "is_first": torch.full((3, 1), first)}, [3])

    def reset(self):
        self.t = 0
        return self._obs(True)

    def step(self, td):
        self.t += 1
        nxt = self._obs(False)
        end = (self.t == self.lengths).unsqueeze(1)
        nxt.update({"reward": self.pay.unsqueeze(1), "terminated": end,
                    "truncated": torch.zeros_like(end)})
        return td.set("next", nxt)


def test_evaluation_gif_draws_the_best_episode_within_a_frame_cap(tmp_path, monkeypatch):
    """The GIF shows the best episode (the highest return: env 1, 9 steps), or env 0's with
    ``gif_episode="first"``; a longer episode than GIF_MAX_FRAMES is drawn every n-th step."""
    import importlib

    from torchrl_dreamer.modules import make_dreamer
    from torchrl_dreamer.trainers import evaluate

    evaluate_module = importlib.import_module("torchrl_dreamer.trainers.evaluate")
    wm, actor, _ = make_dreamer("tiny", {"pixels": "packed2"}, 5)
    best = evaluate(_ScriptedEnv(), wm, actor, gif=tmp_path / "best.gif")
    assert best.returns == pytest.approx([0.5, 9.0, 3.5]) and best.gif_episode == 1
    assert len(read_gif(tmp_path / "best.gif")[1]) == 10 and best.gif_stride == 1
    first = evaluate(_ScriptedEnv(), wm, actor, gif=tmp_path / "first.gif", gif_episode="first")
    assert first.gif_episode == 0 and len(read_gif(tmp_path / "first.gif")[1]) == 6
    monkeypatch.setattr(evaluate_module, "GIF_MAX_FRAMES", 4)
    capped = evaluate(_ScriptedEnv(), wm, actor, gif=tmp_path / "capped.gif")
    _, frames, _ = read_gif(tmp_path / "capped.gif")
    assert capped.gif_stride == 3 and len(frames) == 4  # steps 0, 3, 6 and the last, 9
    with pytest.raises(ValueError, match="gif_episode"):
        evaluate(_ScriptedEnv(), wm, actor, gif=tmp_path / "x.gif", gif_episode="worst")


def test_demos_setting_mixes_demonstrations_into_every_batch(tmp_path):
    """--demos / --demo-share reach the run's sampler; a recording for another frame skip is
    refused before training with the setting named."""
    from torchrl_dreamer.play import play
    from torchrl_dreamer.trainers import ConfigError
    from torchrl_dreamer.trainers.builder import build_run

    for fs in (6, 24):
        play(task="maze", inputs=["LEFT", "UP x4", "RIGHT x5", "UP x10"], headless=True,
             frame_skip=fs, record=tmp_path / f"fs{fs}" / "a.pt", log=lambda line: None)
    parts = build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "run"),
                                     "demos": str(tmp_path / "fs6"), "demo_share": 0.5}))
    assert parts.sampler.share == 0.5
    parts.collector.shutdown()
    with pytest.raises(ConfigError, match="--demos:.*frame"):
        build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "bad"),
                                 "demos": str(tmp_path / "fs24")}))
    with pytest.raises(ConfigError, match="demo_share=.* is invalid: must lie in"):
        TrainConfig(**{**SMALL, "demo_share": 1.5})


def test_spec_whose_start_already_terminates_is_refused_before_the_run(tmp_path):
    """A spec that ends every episode at its start state would train on one-step episodes: the
    run refuses it before building anything, naming the entry."""
    from torchrl_dreamer.roms import rom_path
    from torchrl_dreamer.trainers import ConfigError
    from torchrl_dreamer.trainers.builder import build_run

    spec = tmp_path / "always_over.yaml"
    spec.write_text("reward: [{kind: delta, address: 0xC000}]\n"
                    "terminate: [{address: 0xC000, op: '>=', value: 0}]\n")
    cfg = TrainConfig(**{**SMALL, "task": None, "task_spec": str(spec),
                         "rom": str(rom_path("catch")), "log_dir": str(tmp_path / "run")})
    with pytest.raises(ConfigError, match="terminate.*already holds at the start"):
        build_run(cfg)


def test_eval_policy_best_plays_the_kept_weights_only_when_they_win_the_duel(tmp_path):
    """eval_policy="best": the trainer keeps the acting weights of the best full window of
    training episodes and checkpoints them. At the end a kept window that shares no episode with
    the last one and is higher nominates them for a greedy duel against the last weights (the
    same starts for both). The side clearly ahead in the duel is played; a duel within the noise
    leaves it to the windows (the kept ones only when their window is clearly better). Whenever
    the last weights win, they are back in place."""
    torch.set_num_threads(1)
    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path / "a"), "total_steps": 64,
                         "eval_policy": "best", "eval_duel_episodes": 3, "eval_max_steps": 200})
    trainer = DreamerTrainer(cfg, quiet=True)
    trainer.train()
    assert not trainer.best.state  # no full window yet: the last weights, no best_window_* keys
    assert trainer.choose_eval_policy() == {"eval_policy_step": float(trainer.policy_steps)}
    window = trainer.tracker.window
    mods = trainer.acting_modules()
    kept = {n: {k: v.clone() for k, v in m.state_dict().items()} for n, m in mods.items()}
    high = [1.0, 0.9] * (window // 2)
    assert trainer.best.observe(high, episodes=window, step=40, modules=mods)
    assert trainer._record(None, 0.0, 0, 0.0)["best_window_return"] == pytest.approx(0.95)
    with torch.no_grad():  # training moves on
        for p in trainer.parts.actor.parameters():
            p.add_(1.0)
    last = {n: {k: v.clone() for k, v in m.state_dict().items()} for n, m in mods.items()}

    def holds(state):  # whether the acting modules hold `state`
        return all(torch.equal(v, state[n][k]) for n, m in mods.items()
                   for k, v in m.state_dict().items())

    played = []

    def play(values_if_kept, values_if_last):
        def side():
            played.append("kept" if holds(kept) else "last" if holds(last) else "other")
            return values_if_kept if played[-1] == "kept" else values_if_last
        return side

    trainer.tracker.recent_eps.clear()
    trainer.tracker.recent_eps.extend((0.9 + 0.1 * (k % 2), 10, False) for k in range(window))
    trainer.tracker.episodes = 2 * window  # the same mean: no candidate, no duel
    out = trainer.choose_eval_policy(play([9.0], [0.0]))
    assert out["eval_policy_step"] == trainer.policy_steps and not played and "duel_best" not in out

    def window_of(*values):  # the last window: episodes returning `values` in turn
        trainer.tracker.recent_eps.clear()
        trainer.tracker.recent_eps.extend((values[k % len(values)], 10, False)
                                          for k in range(window))

    def choose(kept_values, last_values):  # from the state training ended in
        for n, m in mods.items():
            m.load_state_dict(last[n])
        played.clear()
        out = trainer.choose_eval_policy(play(kept_values, last_values))
        assert played == ["last", "kept"]
        assert out["duel_best"] == pytest.approx(sum(kept_values) / len(kept_values))
        assert out["duel_last"] == pytest.approx(sum(last_values) / len(last_values))
        assert holds(kept if out["eval_policy_step"] == 40 else last)
        return out["eval_policy_step"]

    noisy_duel = ([2.0, 1.0, 2.0], [1.0, 2.0, 1.0])
    window_of(0.4, 1.4)  # a lower window (0.9), but not clearly: the duel decides
    assert choose(*noisy_duel) == trainer.policy_steps
    assert choose([3.0] * 3, [1.0] * 3) == 40
    window_of(0.0)  # a clearly lower window: the duel still overrules it ...
    assert choose([1.0] * 3, [3.0] * 3) == trainer.policy_steps
    assert choose(*noisy_duel) == 40  # ... but a noisy duel leaves it to the windows
    real = trainer.duel_play()  # the default side: greedy episodes of the modules as they are
    assert len(real) == 3 and real == trainer.duel_play()  # the same starts and draws
    for n, m in mods.items():  # the checkpoint's last weights are the last ones
        m.load_state_dict(last[n])
    ckpt = trainer.save()
    trainer.close()
    saved = load_checkpoint(ckpt)
    assert saved["best_policy"]["step"] == 40
    from torchrl_dreamer.trainers import make_env
    from torchrl_dreamer.trainers.evaluate import modules_from_checkpoint

    env = make_env(cfg, num_envs=1)
    for weights, same in (("best", True), ("last", False)):  # train eval --policy best / last
        _, actor = modules_from_checkpoint(saved, env, weights=weights)
        params = dict(actor.named_parameters())  # the +1 above moved every parameter
        assert params and all(torch.equal(v, kept["actor"][k]) == same
                              for k, v in params.items()), weights
    saved.pop("best_policy")
    with pytest.raises(CheckpointError, match="kept no best weights"):
        modules_from_checkpoint(saved, env, weights="best")
    resumed = DreamerTrainer(cfg.with_(total_steps=128), resume=ckpt, quiet=True)
    assert resumed.best.step == 40 and resumed.best.mean == pytest.approx(0.95)
    resumed.close()
    plain = DreamerTrainer(cfg.with_(eval_policy="last", log_dir=str(tmp_path / "b")), quiet=True)
    assert plain.best is None
    assert plain.choose_eval_policy() == {"eval_policy_step": 0.0}
    plain.close()
    with pytest.raises(ConfigError, match="eval_policy"):
        TrainConfig(**{**SMALL, "eval_policy": "middle"})
