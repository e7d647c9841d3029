"""The run tree: one frozen TrainConfig of sections, reached by dotted or flat names through one
mapping; the command line's dotted flags and their flat aliases; overlays (task defaults,
config files) that hold only differences; older flat records that still load."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
import yaml

from torchrl_dreamer.collectors.settings import FLAT, SECTIONS, ReplaySection, flatten_settings
from torchrl_dreamer.train import build_parser, config_from_args, setting_flags
from torchrl_dreamer.trainers import ConfigError, TrainConfig
from torchrl_dreamer.trainers.checkpoint import check_compatible
from torchrl_dreamer.trainers.config import (
    GAME_TRAIN_DEFAULTS,
    redundant_settings,
    task_train_defaults,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIGS = sorted((ROOT / "examples" / "dreamer_v3").glob("*.yaml"))


def _parse(argv: list[str]) -> TrainConfig:
    return config_from_args(build_parser("train").parse_args(argv))


# ---------------------------------------------------------------- the tree and the mapping
def test_each_part_has_its_section_and_flat_names_read_the_same_fields():
    cfg = TrainConfig(task="catch", seq_len=16, replay_capacity=1024)
    assert [f.name for f in dataclasses.fields(cfg)] == list(SECTIONS)
    assert isinstance(cfg.replay, ReplaySection)
    assert (cfg.replay.seq_len, cfg.replay.capacity, cfg.replay.ratio) == (16, 1024, 0.2)
    for name, (section, field) in FLAT.items():
        assert getattr(cfg, name) == getattr(getattr(cfg, section), field), name
    with pytest.raises(AttributeError, match="no setting 'seqlen'"):
        cfg.seqlen  # noqa: B018


def test_the_tree_is_frozen():
    cfg = TrainConfig(task="catch")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.replay = ReplaySection()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.replay.seq_len = 8
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # Ray ships it to the runners


def test_flat_dotted_and_nested_settings_build_the_same_config():
    flat = TrainConfig(task="catch", seq_len=16, replay_capacity=1024, gamma=0.9)
    dotted = TrainConfig(**{"env.task": "catch", "replay.seq_len": 16, "replay.capacity": 1024,
                            "loss.gamma": 0.9})
    nested = TrainConfig(env={"task": "catch"}, replay={"seq_len": 16, "capacity": 1024},
                         loss={"gamma": 0.9})
    assert flat == dotted == nested
    assert TrainConfig.from_dict(flat.to_tree()) == flat == TrainConfig.from_dict(flat.to_dict())
    assert flat.with_(**{"replay.seq_len": 8}).seq_len == 8
    assert flat.with_(replay={"seq_len": 8}) == flat.with_(seq_len=8)


def test_unknown_settings_fail_with_the_list_of_fields(tmp_path):
    for bad in ({"batchsize": 8}, {"replay.batchsize": 8}, {"replay": {"batchsize": 8}}):
        with pytest.raises(ConfigError, match=r"unknown config keys \['(replay\.)?batchsize'\] in TrainConfig; "
                                              r"valid keys: \[.*'batch_size'.*\]"):
            TrainConfig(**bad)
    f = tmp_path / "c.yaml"
    f.write_text("replay:\n  seq_len: 16\n  sequence: 3\n")
    with pytest.raises(ConfigError, match=r"\['replay.sequence'\] in .*c.yaml; valid keys"):
        TrainConfig.from_file(f)
    with pytest.raises(ConfigError, match="must be a mapping"):
        TrainConfig(replay=16)


# ---------------------------------------------------------------- the command line
@pytest.mark.parametrize("name, value", [
    ("seq_len", "16"), ("replay_capacity", "4096"), ("batch_size", "4"), ("gamma", "0.9"),
    ("loss_preset", "sheeprl"), ("eval_episodes", "3"), ("num_envs", "8"), ("log_dir", "x"),
    ("timeout_s", "45.5"), ("num_runners", "4"),
])
def test_dotted_and_alias_flags_parse_to_the_same_config(name, value):
    dotted, alias = setting_flags(name)
    assert dotted.count(".") == 1 and "." not in alias
    a, b = _parse([dotted, value]), _parse([alias, value])
    assert a == b and str(getattr(a, name)) == value and name in a.given


def test_boolean_flags_have_dotted_and_alias_negations():
    for argv in (["--no-run.progress", "--no-eval.sampled"], ["--no-progress", "--no-eval-sampled"]):
        cfg = _parse(argv)
        assert (cfg.run.progress, cfg.eval.sampled) == (False, False)
    assert _parse(["--learner.capture"]).learner.capture is True
    assert _parse(["--capture"]).learner.capture is True


def test_a_nested_config_file_and_flags_merge_by_setting(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("env:\n  task: catch\nreplay:\n  seq_len: 16\n  batch_size: 4\nseed: 7\n")
    cfg = _parse(["--config", str(f), "--batch-size", "2", "--run.seed", "9"])
    assert (cfg.task, cfg.seq_len, cfg.batch_size, cfg.seed) == ("catch", 16, 2, 9)


# ---------------------------------------------------------------- overlays
def _registered_task_classes() -> dict[str, type]:
    from torchrl_dreamer.envs import list_tasks, task_class

    return {name: task_class(name) for name in list_tasks()}


def test_game_defaults_differ_from_the_field_defaults():
    from torchrl_dreamer.collectors.settings import flat_defaults

    defaults = flat_defaults()
    same = [k for k, v in GAME_TRAIN_DEFAULTS.items() if defaults[k] == v]
    assert not same and set(GAME_TRAIN_DEFAULTS) <= set(FLAT)


@pytest.mark.parametrize("name", sorted(_registered_task_classes()))
def test_each_task_train_defaults_hold_only_differences(name):
    """Drop one key of a task's train_defaults at a time (a probe task of the same class):
    the run must then use another value for it, or the key restates a default beneath it."""
    from torchrl_dreamer.envs import register_task
    from torchrl_dreamer.envs.registry import unregister_task

    cls = _registered_task_classes()[name]
    overlay = task_train_defaults(name)
    if not overlay:
        return
    probe_name = f"overlay-probe-{name}"

    def build(rest: dict) -> TrainConfig:
        probe = type("Probe", (cls,), {"name": probe_name, "train_defaults": rest})
        register_task(probe)
        try:
            return TrainConfig(task=probe_name)
        finally:
            unregister_task(probe_name)

    cfg = build(dict(overlay))
    assert all(getattr(cfg, k) == v for k, v in overlay.items())
    assert redundant_settings(overlay, build) == []


def test_the_gym_task_defaults_hold_only_differences():
    from torchrl_dreamer.collectors.settings import flat_defaults
    from torchrl_dreamer.trainers.gym_env import DeferredResetGymEnv

    overlay = task_train_defaults("gym:CartPole-v1")
    assert overlay == dict(DeferredResetGymEnv.train_defaults)
    assert [k for k, v in overlay.items() if flat_defaults()[k] == v] == []


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=lambda p: p.name)
def test_each_example_config_holds_only_differences(path):
    if "cartpole" in path.name:
        pytest.importorskip("gymnasium")
    overlay = yaml.safe_load(path.read_text())
    assert redundant_settings(overlay, lambda d: TrainConfig.from_dict(d)) == []


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "tasks").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_each_example_spec_train_section_is_known_and_holds_only_differences(path):
    spec = yaml.safe_load(path.read_text())
    train = spec.get("train") or {}
    flatten_settings(train, str(path))  # unknown names fail here
    base = {k: v for k, v in flatten_settings(train).items()}
    # a spec's train: overlays the Game Boy defaults
    same = [k for k, v in base.items() if GAME_TRAIN_DEFAULTS.get(k, object()) == v]
    assert not same, f"{path.name} train: restates Game Boy defaults {same}"


# ---------------------------------------------------------------- older records
#: A checkpoint's config as the flat TrainConfig of 2026-11-26 (commit 0703a74) recorded it.
OLD_RECORD = {
    "task": "maze", "rom": None, "task_spec": None, "preset": "tiny", "loss_preset": "fast-pixels",
    "device": "cpu", "env_device": None, "num_envs": 16, "total_steps": 50000,
    "replay_capacity": 100000, "replay_backing": "memory", "backend": "reference", "seed": 0,
    "log_dir": "runs/dreamer", "replay_ratio": 0.18, "learning_starts": 2048, "batch_size": 8,
    "seq_len": 32, "gamma": 0.98, "entropy_coef": 0.005, "entropy_final": None, "demos": None,
    "demo_share": 0.25, "decode_stride": 1, "event_fraction": 0.0, "steps_per_rollout": 16,
    "commit_stride": 8, "checkpoint_every": 10000, "checkpoint_replay": True, "log_every": 10,
    "precision": "fp32", "compile": None, "capture": False, "strict_acceleration": False,
    "threads": 1, "workers": 1, "frame_skip": 24, "noop_max": 0, "time_limit": None,
    "ppu": "fifo", "eval_episodes": 32, "eval_time_limit": "1m", "eval_max_steps": 5000,
    "eval_sampled": True, "video_every": 0, "logger": "csv", "progress": True,
}


def test_an_older_flat_record_loads_and_resumes():
    cfg = TrainConfig.from_dict(OLD_RECORD)
    # the record keeps its one thread (the default then; unset now means every core)
    assert cfg == TrainConfig(task="maze", threads=1)
    assert {k: cfg.to_dict()[k] for k in OLD_RECORD} == OLD_RECORD
    check_compatible(OLD_RECORD, TrainConfig(task="maze"))


def test_an_older_record_resumes_through_the_cli(tmp_path):
    import torch

    from torchrl_dreamer.trainers.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / "checkpoints" / "step_16", {"config": OLD_RECORD})
    args = build_parser("train").parse_args(["--resume", str(tmp_path), "--total-steps", "99"])
    cfg = config_from_args(args)
    assert cfg.total_steps == 99 and cfg.replay_ratio == 0.18
    assert args.resume.endswith("step_16")
    assert torch.load(Path(args.resume) / "state.pt", weights_only=True)["config"] == OLD_RECORD


# ---------------------------------------------------------------- remote collection
def test_remote_collections_register_by_backend():
    from torchrl_dreamer.collectors.remote import (
        register_remote_collection,
        remote_collection,
        unregister_remote_collection,
    )

    class Half:
        def envs_per_runner(self, config):
            return config.num_envs // 2

    with pytest.raises(TypeError, match="needs envs_per_runner, load_demonstrations and collector"):
        register_remote_collection("half-test", Half())

    class Full(Half):
        def load_demonstrations(self, paths, probe_env):
            return None

        def collector(self, config, env_factory, policy_factory, learner, *, logger=None,
                      demonstrations=None):
            return (config.num_envs, learner)

    class Other(Full):
        pass

    try:
        assert register_remote_collection("full-test", Full()) is remote_collection("full-test")
        register_remote_collection("full-test", Full())  # the same kind again: replaced
        with pytest.raises(ValueError, match="already collects"):
            register_remote_collection("full-test", Other())
    finally:
        unregister_remote_collection("full-test")
    assert remote_collection("full-test") is None


def test_a_given_value_is_checked_before_defaults_follow_from_it():
    # frame_skip 0 would divide the Game Boy discount's horizon by zero
    with pytest.raises(ConfigError, match=r"TrainConfig\.frame_skip=0 is invalid: must be an "
                                          r"integer >= 1"):
        TrainConfig(task="snake", frame_skip=0)
    with pytest.raises(ConfigError, match=r"TrainConfig\.backend='mpi' is invalid: unknown "
                                          r"backend 'mpi'; choose one of reference"):
        TrainConfig(backend="mpi")


def test_console_setting_picks_the_model_and_refuses_an_unknown_one():
    """``--console`` / ``--env.console``: the consoles' Game Boy model reaches the env (a DMG
    ROM on a Color runs in its compatibility mode); an unknown one is refused with the list."""
    from torchrl_dreamer.trainers.builder import make_env

    assert _parse(["--console", "cgb"]) == _parse(["--env.console", "cgb"])
    assert TrainConfig().env.console is None
    with pytest.raises(ConfigError, match="unknown console 'gba'; choose one of dmg, cgb"):
        TrainConfig(console="gba")
    env = make_env(TrainConfig(task="catch", console="cgb"), num_envs=1)
    assert env.gb.model == "cgb"
    assert make_env(TrainConfig(task="catch"), num_envs=1).gb.model == "dmg"
