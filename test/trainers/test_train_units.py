"""Fast unit tests of the training CLI pieces that need no emulator: config validation, CLI
errors, GIF writer, episode tracker, checkpoint loading rules."""

from __future__ import annotations

import re
import struct
import warnings
from pathlib import Path

import pytest
import torch

from torchrl_dreamer.train import main
from torchrl_dreamer.trainers import (
    CheckpointError,
    ConfigError,
    EpisodeTracker,
    TrainConfig,
    load_checkpoint,
    write_gif,
)
from torchrl_dreamer.trainers.checkpoint import (
    FORMAT,
    FORMAT_VERSION,
    check_compatible,
    learner_state,
    load_learner_state,
)
from torchrl_dreamer.version import __version__


# ---------------------------------------------------------------- config / CLI bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"preset": "huge"}, "unknown preset 'huge'.*tiny"),
        ({"task": "tetris"}, "unknown task 'tetris'.*maze"),
        ({"device": "tpu"}, "device"),
        ({"backend": "mpi"}, "unknown backend"),
        ({"replay_backing": "s3"}, "unknown replay backing"),
        ({"rom": "/nonexistent/game.gb"}, "ROM /nonexistent/game.gb not found"),
        ({"num_envs": 0}, r"TrainConfig\.num_envs=0 is invalid: must be an integer >= 1"),
        ({"threads": 0}, "threads=0 is invalid: must be an integer >= 1"),
        ({"event_fraction": 1.5}, r"event_fraction=1.5 is invalid: must lie in \[0, 1\]"),
        ({"gamma": 0.0}, r"gamma=0.0 is invalid: must lie in \(0, 1\]"),
        ({"entropy_coef": -1e-3}, "entropy_coef=-0.001 is invalid: must be a finite number >= 0"),
        ({"replay_capacity": 8, "num_envs": 4}, "replay-capacity to at least seq_len \\* num_envs = 128"),
    ],
)
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_device_without_cuda_says_what_to_do():
    with pytest.raises(ConfigError, match="CUDA is not available.*--device cpu"):
        TrainConfig(device="cuda")


def test_env_device_is_where_the_consoles_run():
    """env_device unset: the consoles run on --device; set, it names their device (the hybrid
    run's CPU consoles), checked like --device, and workers > 1 follow it."""
    assert TrainConfig(task="maze").consoles_device == "cpu"
    cfg = TrainConfig(task="maze", env_device="cpu", workers=2)
    assert cfg.consoles_device == "cpu" and cfg.env_device == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            TrainConfig(task="maze", env_device="cuda")
    with pytest.raises(ConfigError, match="invalid device"):
        TrainConfig(task="maze", env_device="tpu")


def test_spec_start_is_probed_where_the_consoles_run():
    """A hybrid run (--device cuda --env-device cpu) probes its spec's start on the CPU: on
    the run's device it compiled the emulator's CUDA module (148 s of NVRTC on an H200,
    2026-11-30) for consoles that never run there. Here a stand-in config names a run device
    this machine cannot use, so a probe there fails."""
    from types import SimpleNamespace

    from torchrl_dreamer.roms import rom_path
    from torchrl_dreamer.trainers.builder import check_spec_start

    spec = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "catch.yaml"
    env = SimpleNamespace(task_spec=str(spec), rom=str(rom_path("catch")), frame_skip=4,
                          press_frames=4)
    check_spec_start(SimpleNamespace(env=env, run=SimpleNamespace(device="meta"),
                                     consoles_device="cpu"))
    with pytest.raises(Exception, match="meta"):
        check_spec_start(SimpleNamespace(env=env, run=SimpleNamespace(device="cpu"),
                                         consoles_device="meta"))


def test_config_file_and_unknown_keys(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("task: catch\nnum_envs: 4\nseq_len: 16\n")
    cfg = TrainConfig.from_file(f, num_envs=8)
    assert (cfg.task, cfg.num_envs, cfg.seq_len) == ("catch", 8, 16)
    f.write_text("tsk: maze\n")
    with pytest.raises(ConfigError, match="unknown config keys \\['tsk'\\]"):
        TrainConfig.from_file(f)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--preset", "nope"], "unknown preset"),
        (["--task", "nope"], "unknown task"),
        (["--device", "quantum"], "device"),
        (["eval", "--checkpoint", "/nonexistent/run"], "no checkpoint"),
    ],
)
def test_cli_bad_input_exits_2_with_message(argv, match, capsys, tmp_path):
    rc = main([*argv] if argv[0] == "eval" else [*argv, "--log-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ")
    assert re.search(match, err), err


def test_cli_bench_lists_benchmarks(capsys):
    assert main(["bench", "--list"]) == 0
    names = capsys.readouterr().out.split()
    assert "learner" in names and "replay" in names
    assert "game_envs" not in names  # a helper the GPU benchmarks load, not a benchmark
    assert main(["bench", "--name", "nope"]) == 2


def test_every_listed_benchmark_takes_quick():
    """``bench`` runs each benchmark with ``--quick``: every script's parser must accept it."""
    from torchrl_dreamer.train import benchmark_names, benchmarks_dir

    root = benchmarks_dir()
    names = benchmark_names(root)
    assert len(names) >= 10
    # a micro-ROM benchmark takes its command line from memory_paths' runner
    assert '"--quick"' in (root / "memory_paths.py").read_text()
    lacking = [n for n in names if '"--quick"' not in (text := (root / f"{n}.py").read_text())
               and "MP.run_micro_roms(" not in text]
    assert lacking == [], f"benchmarks without --quick: {lacking}"


# ---------------------------------------------------------------- GIF
def _lzw_decode(data: bytes, min_code: int) -> bytes:
    clear, eoi = 1 << min_code, (1 << min_code) + 1
    acc = nbits = 0
    it = iter(data)

    def fresh():
        return [bytes([i]) for i in range(clear)] + [b"", b""], min_code + 1

    table, width = fresh()
    out, prev = bytearray(), None
    while True:
        while nbits < width:
            acc |= next(it) << nbits
            nbits += 8
        code = acc & ((1 << width) - 1)
        acc >>= width
        nbits -= width
        if code == clear:
            table, width = fresh()
            prev = None
            continue
        if code == eoi:
            return bytes(out)
        if prev is None:
            out += table[code]
        else:
            entry = table[code] if code < len(table) else table[prev] + table[prev][:1]
            table.append(table[prev] + entry[:1])
            out += entry
        prev = code
        if len(table) == (1 << width) and width < 12:
            width += 1


def read_gif(path) -> tuple[list[tuple[int, int, int]], list[bytes], tuple[int, int]]:
    """Minimal GIF89a reader (global palette, full-frame images) used to check our writer."""
    data = open(path, "rb").read()
    assert data[:6] == b"GIF89a" and data[-1:] == b"\x3b"
    w, h, flags = struct.unpack("<HHB", data[6:11])
    ncol = 2 ** ((flags & 7) + 1)
    pal = [tuple(data[13 + 3 * i: 16 + 3 * i]) for i in range(ncol)]
    pos = 13 + 3 * ncol
    frames = []
    while data[pos] != 0x3B:
        if data[pos] == 0x21:  # extension: skip sub-blocks
            pos += 2
            while data[pos]:
                pos += data[pos] + 1
            pos += 1
        else:
            assert data[pos] == 0x2C
            pos += 10
            min_code = data[pos]
            pos += 1
            raw = bytearray()
            while data[pos]:
                raw += data[pos + 1: pos + 1 + data[pos]]
                pos += data[pos] + 1
            pos += 1
            frames.append(_lzw_decode(bytes(raw), min_code))
    return pal, frames, (w, h)


@pytest.mark.parametrize("shape, colours, scale", [((3, 72, 80), 4, 2), ((2, 50, 61), 256, 1),
                                                   ((1, 5, 7), 2, 3)])
def test_gif_roundtrip(tmp_path, shape, colours, scale):
    g = torch.Generator().manual_seed(0)
    frames = torch.randint(0, colours, shape, generator=g, dtype=torch.uint8)
    frames[0, :2] = 0  # long runs exercise the LZW table growth
    palette = [(i, 255 - i, i // 2) for i in range(colours)]
    path = write_gif(tmp_path / "a.gif", frames, palette, scale=scale)
    pal, got, (w, h) = read_gif(path)
    assert (h, w) == (shape[1] * scale, shape[2] * scale)
    assert pal[:colours] == palette
    up = frames.repeat_interleave(scale, 1).repeat_interleave(scale, 2)
    assert got == [up[i].flatten().numpy().tobytes() for i in range(shape[0])]


def test_gif_rejects_bad_frames(tmp_path):
    with pytest.raises(ValueError, match="no palette entry"):
        write_gif(tmp_path / "x.gif", torch.full((1, 4, 4), 7, dtype=torch.uint8))
    with pytest.raises(ValueError, match="T, H, W"):
        write_gif(tmp_path / "x.gif", torch.zeros(4, 4, dtype=torch.uint8))


# ---------------------------------------------------------------- episode tracker
def test_episode_tracker_reads_committed_rows():
    from torchrl_dreamer.data import TimeMajorStorage, dreamer_schema

    n = 2
    st = TimeMajorStorage(64, n, spec=dreamer_schema(), auto_commit=False)
    # env 0: episode of 3 rows ending terminated with reward 1 (success), then a new one.
    # env 1: episode truncated after 4 rows, rewards 0.5 each after the first row.
    rows = [
        # (reward, is_first, terminated, truncated) per env
        ((0, 1, 0, 0), (0, 1, 0, 0)),
        ((0, 0, 0, 0), (0.5, 0, 0, 0)),
        ((1, 0, 1, 0), (0.5, 0, 0, 0)),
        ((0, 1, 0, 0), (0.5, 0, 0, 1)),
        ((0, 0, 0, 0), (0, 1, 0, 0)),
    ]
    tracker = EpisodeTracker(n, window=4)
    for i, r in enumerate(rows):
        step = {k: v for k, v in {
            "pixels": torch.zeros(n, 1, 72, 20, dtype=torch.uint8),
            "action": torch.zeros(n, dtype=torch.int64),
            "reward": torch.tensor([r[0][0], r[1][0]], dtype=torch.float32),
            "is_first": torch.tensor([r[0][1], r[1][1]], dtype=torch.bool),
            "terminated": torch.tensor([r[0][2], r[1][2]], dtype=torch.bool),
            "truncated": torch.tensor([r[0][3], r[1][3]], dtype=torch.bool),
            "continue_": torch.ones(n),
            "episode_id": torch.zeros(n, dtype=torch.int32),
        }.items()}
        st.write(step)
        if i == 1:
            st.commit(1)
            assert tracker.update(st) == []  # nothing finished yet
    assert tracker.update(st) == []  # nothing new committed
    st.commit(4)
    eps = tracker.update(st)
    assert eps == [(1.0, 2, True), (1.5, 3, False)]  # length = transitions after is_first
    rec = tracker.recent()
    assert rec["success"] == 0.5 and rec["return"] == 1.25 and rec["episodes"] == 2
    clone = EpisodeTracker(n, window=4)
    clone.load_state_dict(tracker.state_dict())
    assert clone.recent() == rec and clone.next_t == 5


# ---------------------------------------------------------------- checkpoint rules
def test_learner_state_round_trip_restores_weights_count_and_optimizers():
    """The learner's part of a checkpoint (the local trainer's and the Ray trainer's)."""

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 1)
            self.opt = torch.optim.Adam(self.lin.parameters())
            self.num_updates = 0

        def optimizers(self):
            return {"opt": self.opt}

    a = Tiny()
    a.lin(torch.ones(2)).sum().backward()
    a.opt.step()
    a.num_updates = 7
    b = Tiny()
    load_learner_state(b, learner_state(a))
    assert b.num_updates == 7 and torch.equal(b.lin.weight, a.lin.weight)
    assert b.opt.state_dict()["state"][0]["step"] == 1


class _Opaque:
    """A class weights_only loading must refuse to rebuild."""


def test_load_checkpoint_checks_format_version_and_pickles(tmp_path):
    good = {"format": FORMAT, "format_version": FORMAT_VERSION, "version": __version__,
            "config": TrainConfig().to_dict()}
    torch.save(good, tmp_path / "state.pt")
    assert load_checkpoint(tmp_path)["config"]["task"] == "maze"
    # a checkpoint from before press_frames was recorded ran with min(8, frame_skip)
    old = {k: v for k, v in good["config"].items() if k != "press_frames"}
    torch.save({**good, "config": {**old, "frame_skip": 16}}, tmp_path / "state.pt")
    assert load_checkpoint(tmp_path)["config"]["press_frames"] == 8
    torch.save({**good, "config": {**old, "frame_skip": 4}}, tmp_path / "state.pt")
    assert load_checkpoint(tmp_path)["config"]["press_frames"] == 4
    torch.save({**good, "version": "0.0.1"}, tmp_path / "state.pt")
    with pytest.raises(CheckpointError, match="written by torchrl_dreamer 0.0.1"):
        load_checkpoint(tmp_path)
    torch.save({"format": "other"}, tmp_path / "state.pt")
    with pytest.raises(CheckpointError, match="not a torchrl_dreamer checkpoint"):
        load_checkpoint(tmp_path)
    # weights_only=True: arbitrary pickled objects are refused, never executed.
    torch.save({**good, "evil": _Opaque()}, tmp_path / "state.pt")
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        load_checkpoint(tmp_path)


def test_check_compatible_names_the_differences():
    saved = TrainConfig().to_dict()
    check_compatible(saved, TrainConfig(total_steps=123, log_dir="elsewhere"))
    with pytest.raises(CheckpointError, match="num_envs: checkpoint 16 vs now 8; preset: checkpoint "
                       ".tiny. vs now .XS.; loss_preset: checkpoint .fast-pixels. vs now .sheeprl."):
        check_compatible(saved, TrainConfig(num_envs=8, preset="XS"))


def test_check_compatible_compares_resolved_defaults():
    # A config holds the values its defaults resolved to (gamma: the maze's 0.98); a checkpoint
    # records them, and a resume is compared on them.
    saved = TrainConfig().to_dict()
    assert saved["gamma"] == 0.98 and saved["replay_ratio"] == 0.18
    with pytest.raises(CheckpointError, match=r"gamma: checkpoint 0\.99699.* vs now 0\.98"):
        check_compatible({**saved, "gamma": 1.0 - 1.0 / 333.0}, TrainConfig())
    # an explicit value equal to what the default resolved to resumes
    check_compatible(saved, TrainConfig(gamma=0.98, replay_ratio=0.18, learning_starts=2048))
    with pytest.raises(CheckpointError, match="replay_ratio: checkpoint 0.18 vs now 0.1"):
        check_compatible(saved, TrainConfig(replay_ratio=0.1))
    # checkpoints written before defaults were resolved into the config (None + "resolved")
    old = {**saved, "gamma": None, "replay_ratio": None}
    check_compatible(old, TrainConfig(), {"gamma": 0.98, "replay_ratio": 0.18})
    with pytest.raises(CheckpointError, match=r"replay_ratio: checkpoint 0.08 vs now 0.18"):
        check_compatible(old, TrainConfig(), {"gamma": 0.98, "replay_ratio": 0.08})
    check_compatible(old, TrainConfig())  # no entry: today's defaults
    assert TrainConfig(task="catch").gamma == pytest.approx(1.0 - 1.0 / 333.0)


def test_task_training_defaults_apply_unless_given():
    # `--task maze` alone gives the measured best settings (the shipped config's)
    cfg = TrainConfig()
    assert (cfg.batch_size, cfg.replay_ratio, cfg.learning_starts, cfg.gamma,
            cfg.entropy_coef) == (8, 0.18, 2048, 0.98, 5e-3)
    # a setting given explicitly wins, even when it equals the generic default
    assert TrainConfig(batch_size=16).batch_size == 16
    assert TrainConfig(replay_ratio=None).replay_ratio == 0.18  # None = not given
    # another task: its own defaults, the field defaults elsewhere
    catch = TrainConfig(task="catch")
    assert (catch.batch_size, catch.replay_ratio, catch.learning_starts) == (16, 0.2, 1024)
    # with_() re-derives what was not given for the new task, keeps what was
    assert cfg.with_(task="catch").batch_size == 16
    assert TrainConfig(batch_size=4).with_(task="catch").batch_size == 4


def test_task_registered_outside_the_package_sets_its_defaults():
    from torchrl_dreamer.envs import Task, register_task
    from torchrl_dreamer.envs.registry import unregister_task

    class Outside(Task):
        name = "outside-defaults-test"
        train_defaults = {"seq_len": 16, "replay_ratio": 0.3}

    class Typo(Task):
        name = "outside-typo-test"
        train_defaults = {"batchsize": 8}

    register_task(Outside)
    register_task(Typo)
    try:
        cfg = TrainConfig(task="outside-defaults-test")
        # its own settings, then the Game Boy defaults (batch 8) for the rest
        assert (cfg.seq_len, cfg.replay_ratio, cfg.batch_size) == (16, 0.3, 8)
        with pytest.raises(ConfigError, match=r"Typo.train_defaults sets \['batchsize'\].*batch_size"):
            TrainConfig(task="outside-typo-test")
    finally:
        unregister_task("outside-defaults-test")
        unregister_task("outside-typo-test")


def test_cli_help_shows_every_field_with_default_and_doc(capsys):
    from torchrl_dreamer.collectors.settings import FLAT
    from torchrl_dreamer.train import setting_flags
    from torchrl_dreamer.trainers.config import field_docs

    docs = field_docs(TrainConfig)
    assert set(docs) == set(FLAT) and all(docs.values())
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in FLAT:
        for flag in setting_flags(name):  # the dotted flag and its flat alias
            assert flag in out, flag
        assert " ".join(docs[name].replace("``", "").split()[:4]) in out, name
    # a task's value: its train_defaults over the Game Boy defaults (the maze's batch 8 is one)
    assert "(default: 16; task maze: 8)" in out and "(default: 0.05; task maze: 0.18)" in out
    with pytest.raises(SystemExit):
        main(["--task", "catch", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 0.05; task catch: 0.2)" in out and "task catch: 16)" not in out


def test_loss_preset_default_follows_model_preset():
    assert TrainConfig().loss_preset == "fast-pixels"
    assert TrainConfig(task="catch").loss_preset == "fast-pixels"
    assert TrainConfig(task="gym:CartPole-v1").loss_preset == "fast"
    assert TrainConfig().with_(task="gym:CartPole-v1").loss_preset == "fast"
    assert TrainConfig(preset="XS").loss_preset == "sheeprl"
    assert TrainConfig(preset="XS", loss_preset="fast").loss_preset == "fast"
    # a default picked from the model preset follows a later change of the preset...
    assert TrainConfig().with_(preset="XS").loss_preset == "sheeprl"
    assert TrainConfig().with_(seed=3).with_(preset="XS").loss_preset == "sheeprl"
    # ...an explicit choice does not
    assert TrainConfig(loss_preset="fast").with_(preset="XS").loss_preset == "fast"
    assert TrainConfig().with_(preset="XS", loss_preset="fast").loss_preset == "fast"


def test_cli_missing_rom_of_registered_task(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHRL_DREAMER_POKEMON_RED_ROM", raising=False)
    monkeypatch.delenv("TORCHRL_DREAMER_POKEMON_RED_STATE", raising=False)
    rc = main(["--task", "pokemon_red_exit_lab", "--log-dir", str(tmp_path), "--no-progress"])
    assert rc == 2
    assert "--rom PATH to a ROM you own" in capsys.readouterr().err


def test_cli_config_precedence(tmp_path):
    from torchrl_dreamer.train import build_parser, config_from_args
    from torchrl_dreamer.trainers.config import MAX_AUTO_THREADS, usable_cores

    f = tmp_path / "c.yaml"
    f.write_text("num_envs: 4\nseq_len: 16\nseed: 7\n")
    args = build_parser("train").parse_args(["--config", str(f), "--seed", "9"])
    cfg = config_from_args(args)
    assert (cfg.num_envs, cfg.seq_len, cfg.seed, cfg.task) == (4, 16, 9, "maze")
    assert cfg.threads is None and cfg.torch_threads == min(usable_cores(), MAX_AUTO_THREADS)
    args = build_parser("train").parse_args(["--config", str(f), "--threads", "2"])
    assert (config_from_args(args).threads, config_from_args(args).torch_threads) == (2, 2)
    args = build_parser("train").parse_args(["--config", str(f), "--no-progress",
                                             "--no-checkpoint-replay"])
    cfg = config_from_args(args)
    assert (cfg.progress, cfg.checkpoint_replay) == (False, False)


def test_deferred_reset_gym_env():
    pytest.importorskip("gymnasium")
    from torchrl.envs.utils import check_env_specs

    from torchrl_dreamer.trainers.gym_env import DeferredResetGymEnv

    env = DeferredResetGymEnv("CartPole-v1", num_envs=3, seed=0)
    check_env_specs(env, seed=0)
    td = env.rollout(120, break_when_any_done=False)
    done = td["next", "done"].squeeze(-1)
    first = td["next", "is_first"].squeeze(-1)
    reward = td["next", "reward"].squeeze(-1)
    assert bool(done.any())
    # The step after a done step is the reset: is_first, reward 0, not done; only there.
    assert torch.equal(first[:, 1:], done[:, :-1])
    assert bool((reward[first] == 0).all()) and not bool(done[first].any())
    assert bool((reward[~first] == 1).all())
    assert env.success_rule == "truncated" and env.max_episode_steps == 500


def test_obs_spec_of_refuses_an_observation_the_world_model_cannot_use():
    """An integer vector used to vanish from the world model's inputs without a word; now the
    run stops and names the key, its shape and dtype and what is supported."""
    from types import SimpleNamespace

    from torchrl.data import Categorical, Composite, Unbounded

    from torchrl_dreamer.trainers.builder import obs_spec_of

    def env_with(**leaves):
        flag = Categorical(2, shape=(3, 1), dtype=torch.bool)
        spec = Composite(is_first=flag, success=flag.clone(), shape=(3,), **leaves)
        return SimpleNamespace(observation_spec=spec, batch_size=torch.Size([3]))

    vec = Unbounded(shape=(3, 5), dtype=torch.float32)
    image = Unbounded(shape=(3, 1, 8, 8), dtype=torch.uint8)
    assert obs_spec_of(env_with(obs=vec, img=image)) == {"obs": ("vector", 5),
                                                        "img": ("image", (1, 8, 8))}
    ram = Unbounded(shape=(3, 4), dtype=torch.int64)
    with pytest.raises(ConfigError, match=r"observation 'ram' of shape \[4\] and dtype "
                                          r"torch.int64 .*float vectors \[D\].*cast"):
        obs_spec_of(env_with(obs=vec, ram=ram))
    grid = Unbounded(shape=(3, 6, 7), dtype=torch.float32)
    with pytest.raises(ConfigError, match=r"'grid' of shape \[6, 7\]"):
        obs_spec_of(env_with(grid=grid))


# ---------------------------------------------------------------- Game Boy defaults, budgets
def test_game_defaults_frame_skip_noops_and_discount_follow_the_step_length():
    from torchrl_dreamer.trainers.config import (
        GAME_FRAMES_PER_UPDATE,
        GAME_TRAIN_DEFAULTS,
        game_discount,
    )

    maze = TrainConfig(task="maze")  # the maze keeps its measured 24 frames and fixed start
    assert (maze.frame_skip, maze.noop_max, maze.gamma) == (24, 0, pytest.approx(0.98))
    game = TrainConfig(task="snake")  # a registered task without its own settings
    assert game.frame_skip == GAME_TRAIN_DEFAULTS["frame_skip"] == 8
    assert game.noop_max == GAME_TRAIN_DEFAULTS["noop_max"] == 30
    assert (game.batch_size, game.replay_ratio, game.entropy_coef) == (8, 0.1, 5e-3)
    assert (maze.batch_size, maze.replay_ratio) == (8, 0.18)  # the maze's own, measured
    assert TrainConfig(task="catch").batch_size == 16  # catch keeps its measured batch
    gym = TrainConfig(task="gym:CartPole-v1")  # not a Game Boy task: the field defaults
    assert (gym.batch_size, gym.frame_skip, gym.noop_max) == (16, 1, 0)
    assert game.gamma == pytest.approx(game_discount(8)) == pytest.approx(1 - 8 / 1200)
    assert TrainConfig(task="snake", frame_skip=4).gamma == pytest.approx(1 - 4 / 1200)
    # the replay ratio follows the step too: one update per 80 frames of game collected
    assert GAME_FRAMES_PER_UPDATE * game.replay_ratio == game.frame_skip
    assert TrainConfig(task="snake", frame_skip=4).replay_ratio == pytest.approx(0.05)
    assert TrainConfig(task="snake", frame_skip=24).replay_ratio == pytest.approx(0.3)
    assert TrainConfig(task="snake", frame_skip=4, replay_ratio=0.2).replay_ratio == 0.2
    assert TrainConfig(task="maze", frame_skip=8).replay_ratio == 0.18  # the task's own wins
    assert TrainConfig(task="snake", gamma=0.9).gamma == 0.9  # given wins
    assert TrainConfig(task="snake", noop_max=0).noop_max == 0
    assert TrainConfig(task="snake", decode_stride=2).loss_config().decode_stride == 2
    # imagination from each sequence's last 16 steps, but for the maze and catch (measured with all)
    assert game.loss_config().imagine_last == 16 and gym.loss_config().imagine_last == 0
    assert maze.imagine_last == TrainConfig(task="catch").imagine_last == 0
    assert TrainConfig(task="snake", imagine_last=0).loss_config().imagine_last == 0
    assert game.loss_config().horizon == 15  # unset: the preset's (DreamerV3's)
    # no decoder for Game Boy tasks (catch's own overlay included), but for the maze
    assert game.representation == "contrastive" and gym.representation == "decoder"
    assert TrainConfig(task="catch").representation == "contrastive"
    assert maze.representation == "decoder"
    assert TrainConfig(task="snake", representation="decoder").representation == "decoder"
    assert TrainConfig(task="snake", horizon=30).loss_config().horizon == 30


def test_press_frames_default_to_the_step_or_eight_and_reach_the_env():
    from torchrl_dreamer.trainers.builder import make_env

    assert TrainConfig(task="snake").press_frames == 8  # min(8, 8 frames a step)
    assert TrainConfig(task="snake", frame_skip=4).press_frames == 4
    assert TrainConfig(task="maze").press_frames == 8  # 24 frames a step: 8 held, 16 released
    cfg = TrainConfig(task="catch", frame_skip=16, press_frames=2, num_envs=2)
    assert cfg.press_frames == 2
    env = make_env(cfg)
    assert (env.frame_skip, env.press_frames) == (16, 2)
    env = make_env(cfg, frame_skip=4)  # an override of the step takes the env's press for it
    assert (env.frame_skip, env.press_frames) == (4, 4)
    with pytest.raises(ConfigError, match=r"press_frames=9 exceeds frame_skip=8.*--press-frames"):
        TrainConfig(task="snake", press_frames=9)
    with pytest.raises(ConfigError, match=r"press_frames=-1 is invalid"):
        TrainConfig(task="snake", press_frames=-1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"noop_max": -1}, "noop_max=-1 is invalid: must be an integer >= 0"),
        ({"time_limit": "soon"}, "time_limit 'soon' is not a duration.*60m"),
        ({"time_limit": "0m"}, "time_limit must be > 0"),
        ({"eval_time_limit": "x"}, "eval_time_limit 'x' is not a duration"),
        ({"eval_max_steps": 0}, "eval_max_steps=0 is invalid: must be an integer >= 1"),
        ({"workers": 0}, "workers=0 is invalid: must be an integer >= 1"),
        ({"decode_stride": 0}, "decode_stride=0 is invalid: must be an integer >= 1"),
        ({"horizon": 0}, "horizon=0 is invalid: must be an integer >= 1"),
        ({"noop_max": 5, "task": "gym:CartPole-v1"}, "noop_max applies to Game Boy tasks only"),
    ],
)
def test_budget_settings_reject_bad_values(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig(**kwargs)


def test_time_limit_alone_bounds_the_run_and_reserves_the_evaluation():
    from torchrl_dreamer.trainers.config import FINISH_RESERVE_S, parse_duration

    assert [parse_duration(v) for v in ("90", "90s", "2m", "1.5h")] == [90, 90, 120, 5400]
    cfg = TrainConfig(task="maze", time_limit="60m")
    assert not cfg.steps_bounded  # no total_steps given: the clock alone ends it
    # a Game Boy task: the greedy and sampled final evaluations and eval_policy="best"'s duel
    # (its two sides half a bound each), at most a minute each
    assert cfg.eval.policy == "best"
    assert cfg.training_deadline(100.0) == pytest.approx(100 + 3600 - 180 - FINISH_RESERVE_S)
    last = cfg.with_(eval_policy="last")  # no duel
    assert last.training_deadline(100.0) == pytest.approx(100 + 3600 - 120 - FINISH_RESERVE_S)
    greedy_only = last.with_(eval_sampled=False)
    assert greedy_only.training_deadline(100.0) == pytest.approx(100 + 3600 - 60 - FINISH_RESERVE_S)
    both = TrainConfig(task="maze", time_limit="1h", total_steps=5000, eval_episodes=0)
    assert both.steps_bounded and both.training_deadline(0.0) == 3600 - FINISH_RESERVE_S
    assert TrainConfig(task="maze").training_deadline(0.0) is None



def test_time_limit_the_evaluations_eat_is_refused_or_warned():
    """A time limit no longer than its reserve (final evaluations and the last checkpoint) is
    refused, naming what takes the time; one the reserve takes more than half of warns."""
    with pytest.raises(ConfigError, match=r"leaves no time to train: 3 final evaluation\(s\) "
                                          r"of up to 60 s and 30 s .* take 210 s"):
        TrainConfig(task="maze", time_limit="210s")  # greedy, sampled, eval_policy's duel
    with pytest.raises(ConfigError, match=r"leaves no time to train: 2 final evaluation\(s\) "
                                          r"of up to 60 s and 30 s .* take 150 s"):
        TrainConfig(task="maze", time_limit="150s", eval_policy="last")
    with pytest.warns(UserWarning, match=r"trains for 50 s at most: .* 150 s of the 200 s"):
        TrainConfig(task="maze", time_limit="200s", eval_policy="last")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainConfig(task="maze", time_limit="200s", eval_episodes=0)  # 170 s of training
        TrainConfig(task="maze", time_limit="140s", eval_time_limit="20s", eval_sampled=False)


def test_unknown_setting_in_a_task_or_spec_train_section_lists_the_fields(tmp_path):
    from torchrl_dreamer.roms import rom_path

    spec = tmp_path / "s.yaml"
    spec.write_text("reward: [{kind: delta, address: 0xC000}]\ntrain: {batch: 8}\n")
    with pytest.raises(ConfigError, match=r"sets \['batch'\].*batch_size"):
        TrainConfig(task_spec=str(spec), rom=str(rom_path("catch")))


def _tracker_rows(n, rows, success=None, score=None):
    from torchrl_dreamer.data import TimeMajorStorage, dreamer_schema
    from torchrl_dreamer.data.schema import FieldSpec

    schema = dreamer_schema()
    if success is not None:
        schema["success"] = FieldSpec((), torch.bool)
    if score is not None:
        schema["score"] = FieldSpec((), torch.float32)
    st = TimeMajorStorage(64, n, spec=schema, auto_commit=False)
    for i, (reward, first, term, trunc) in enumerate(rows):
        step = {"pixels": torch.zeros(n, 1, 72, 20, dtype=torch.uint8),
                "action": torch.zeros(n, dtype=torch.int64),
                "reward": torch.tensor(reward, dtype=torch.float32),
                "is_first": torch.tensor(first, dtype=torch.bool),
                "terminated": torch.tensor(term, dtype=torch.bool),
                "truncated": torch.tensor(trunc, dtype=torch.bool),
                "continue_": torch.ones(n), "episode_id": torch.zeros(n, dtype=torch.int32)}
        if success is not None:
            step["success"] = torch.tensor(success[i], dtype=torch.bool)
        if score is not None:
            step["score"] = torch.tensor(score[i], dtype=torch.float32)
        st.write(step)
    st.commit(len(rows) - 1)
    return st


def test_episode_tracker_flag_and_none_rules():
    # env 0 reaches the task's success mid-episode then dies (terminated, negative reward);
    # env 1 ends terminated with a positive reward but never sets the flag
    rows = [([0, 0], [1, 1], [0, 0], [0, 0]), ([1, 0], [0, 0], [0, 0], [0, 0]),
            ([-1, 1], [0, 0], [1, 1], [0, 0])]
    flags = [[0, 0], [1, 0], [0, 0]]
    t = EpisodeTracker(2, success_rule="flag")
    assert [ok for *_, ok in t.update(_tracker_rows(2, rows, flags))] == [True, False]
    plain = EpisodeTracker(2)  # the terminal-reward guess gets both wrong
    assert [ok for *_, ok in plain.update(_tracker_rows(2, rows))] == [False, True]
    none = EpisodeTracker(2, success_rule="none")
    eps = none.update(_tracker_rows(2, rows))
    assert [r for r, *_ in eps] == [0.0, 1.0]
    rec = none.recent()
    assert rec["return"] == 0.5 and rec["success"] != rec["success"]  # NaN: no success notion


def test_episode_tracker_scores_from_a_score_field():
    """A replay with a ``score`` field (a shaped reward's task) gives each finished episode its
    score, the game's measure, beside the shaped return; without one there are none."""
    rows = [([0, 0], [1, 1], [0, 0], [0, 0]), ([0.3, 1.1], [0, 0], [0, 0], [0, 0]),
            ([-0.2, 0.1], [0, 0], [1, 0], [0, 0]), ([0.5, 0.9], [1, 0], [0, 0], [0, 1])]
    score = [[0, 0], [0, 1], [0, 0], [0, 1]]
    t = EpisodeTracker(2, success_rule="none")
    eps = t.update(_tracker_rows(2, rows, score=score))
    assert [round(r, 4) for r, *_ in eps] == [0.1, 2.1]  # env 0 ends at row 2, env 1 at row 3
    assert t.last_scores == [0.0, 2.0]
    assert t.recent()["score"] == 1.0
    clone = EpisodeTracker(2, success_rule="none")
    clone.load_state_dict(t.state_dict())
    assert clone.recent()["score"] == 1.0 and torch.equal(clone.scores, t.scores)
    plain = EpisodeTracker(2, success_rule="none")
    plain.update(_tracker_rows(2, rows))
    assert plain.last_scores == [] and "score" not in plain.recent()


def test_busy_cores_note_only_when_every_core_was_taken_beside_other_work(monkeypatch, capsys):
    import os

    from torchrl_dreamer import train
    from torchrl_dreamer.trainers import TrainConfig
    from torchrl_dreamer.trainers import config as config_mod

    monkeypatch.setattr(config_mod, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 1.0, 1.0))
    train._warn_if_cores_busy(TrainConfig())  # unset: both cores, beside a load of 1.2
    assert "give each run --threads 1" in capsys.readouterr().err
    train._warn_if_cores_busy(TrainConfig(threads=2))  # asked for: no note
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    train._warn_if_cores_busy(TrainConfig())  # an idle machine: no note
    assert capsys.readouterr().err == ""


def test_best_policy_keeps_new_highs_of_full_windows_and_nominates_only_a_separate_higher_one():
    """BestPolicy: copies on a full window's new high mean only; the copy is a candidate for the
    duel only with no episode shared with the last window and a higher mean, and clearly better
    only with a gap over two standard errors; the state survives a weights-only save. clearly_ahead: a gap over two standard errors of the difference, any
    gap between noiseless (identical) episodes, never with an empty side."""
    import io

    from torchrl_dreamer.trainers import BestPolicy
    from torchrl_dreamer.trainers.best_policy import clearly_ahead

    net = torch.nn.Linear(3, 2)
    best = BestPolicy(window=4)
    assert not best.candidate([0.0] * 4, episodes=10)  # nothing kept yet
    assert not best.observe([5.0, 5.0, 5.0], episodes=3, step=10, modules={"net": net})  # not full
    assert best.observe([1.0, 2.0, 1.0, 2.0], episodes=4, step=20, modules={"net": net})
    assert not best.observe([1.0, 2.0, 1.0, 2.0], episodes=5, step=30, modules={"net": net})
    assert not best.observe([9.0] * 4, episodes=4, step=30, modules={"net": net})  # no new episode
    assert best.observe([3.0, 3.5, 3.0, 3.5], episodes=8, step=40, modules={"net": net})
    assert best.step == 40 and best.mean == pytest.approx(3.25)
    assert not best.candidate([0.0] * 4, episodes=10)  # shares episodes with the kept window
    assert not best.candidate([3.0, 3.6, 2.9, 3.5], episodes=12)  # no lower than the kept one
    assert best.candidate([3.0, 3.6, 2.9, 3.4], episodes=12)  # lower, however little: duel
    assert not best.clearly_better([3.0, 3.6, 2.9, 3.4], episodes=12)  # ... but not clearly
    assert not best.clearly_better([0.0] * 4, episodes=10)  # shares episodes with the kept window
    assert best.clearly_better([0.0, 0.5, 0.0, 0.5], episodes=12)
    assert clearly_ahead([3.0, 3.5, 3.0, 3.5], [0.0, 0.5, 0.0, 0.5])
    assert not clearly_ahead([3.0, 3.5, 3.0, 3.5], [3.0, 3.6, 2.9, 3.4])  # within the noise
    assert not clearly_ahead([0.0, 0.5] * 2, [3.0, 3.5] * 2)  # behind, not ahead
    assert clearly_ahead([1.0] * 3, [0.0] * 3) and not clearly_ahead([1.0] * 3, [1.0] * 3)
    assert not clearly_ahead([], [0.0]) and not clearly_ahead([1.0], [])
    buf = io.BytesIO()
    torch.save(best.state_dict(), buf)
    buf.seek(0)
    again = BestPolicy()
    again.load_state_dict(torch.load(buf, weights_only=True))
    assert again.step == 40 and again.window == 4 and again.clearly_better([0.0, 0.5] * 2, 12)
    with pytest.raises(KeyError, match="no kept weights"):
        again.restore({"other": net})
