"""Each run setting is defined once: a field of a section of
:mod:`torchrl_dreamer.collectors.settings`, with its default and docstring. The flat configs of
the collector and the Ray job take the settings they share through ``takes_settings`` (same
name, type and default), never by declaring them again; the defaults modules only name the
sections' defaults.
"""

from __future__ import annotations

import dataclasses

import pytest

from torchrl_dreamer.collectors import AsyncCollectorConfig
from torchrl_dreamer.collectors import defaults as collector_defaults
from torchrl_dreamer.collectors.settings import FLAT, setting_field, takes_settings
from torchrl_dreamer.distributed import RayTrainingConfig, ray_config
from torchrl_dreamer.trainers import ConfigError, TrainConfig
from torchrl_dreamer.trainers import defaults as trainer_defaults

FLAT_CONFIGS = (AsyncCollectorConfig, RayTrainingConfig)

#: (class name, field) -> why a flat config has a field named like a run setting that is not
#: that setting. An entry here is the only way a config may declare such a field itself.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def restated(cls: type, exceptions: dict[tuple[str, str], str]) -> list[str]:
    """The fields of ``cls`` named like a run setting that it declares itself instead of taking
    them with ``takes_settings`` (unless ``exceptions`` says why)."""
    taken = set(getattr(cls, "run_settings", ()))
    return [f"{cls.__name__}.{f.name}" for f in dataclasses.fields(cls)
            if f.name in FLAT and f.name not in taken and (cls.__name__, f.name) not in exceptions]


@pytest.mark.parametrize("cls", FLAT_CONFIGS)
def test_no_flat_config_restates_a_run_setting(cls):
    assert not restated(cls, EXCEPTIONS), (
        "declare the setting once in its section and take it with takes_settings")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in cls.run_settings:
        assert fields[name].default == setting_field(name).default, name


def test_the_check_catches_a_restated_setting():
    @dataclasses.dataclass
    class Mine:
        seq_len: int = 64

    assert restated(Mine, {}) == ["Mine.seq_len"]
    assert restated(Mine, {("Mine", "seq_len"): "why"}) == []
    with pytest.raises(TypeError, match=r"restates the run settings \['seq_len'\]"):
        takes_settings("seq_len")(type("Twice", (), {"__annotations__": {"seq_len": "int"}}))


def test_exceptions_are_documented_and_current():
    for (cls_name, name), why in EXCEPTIONS.items():
        assert len(why) > 20, f"EXCEPTIONS[{cls_name}, {name}] needs a reason"
        cls = next(c for c in FLAT_CONFIGS if c.__name__ == cls_name)
        assert name in {f.name for f in dataclasses.fields(cls)}, f"stale exception {name}"
        assert name not in cls.run_settings, f"stale exception: {cls_name} takes {name} now"


@pytest.mark.parametrize("module", [collector_defaults, trainer_defaults])
def test_every_constant_names_a_section_default(module):
    constants = [n for n in module.__all__ if n.isupper()]
    assert constants
    for const in constants:
        name = {"REPLAY_RATIO": "replay_ratio"}.get(const, const.lower())
        assert getattr(module, const) == setting_field(name).default, const


def test_a_section_reaches_its_flat_config_whole():
    """A setting added to the collector (ray) section reaches AsyncCollectorConfig
    (RayTrainingConfig) with nothing else to change."""
    from torchrl_dreamer.collectors.settings import section_settings

    assert set(section_settings("collector")) <= set(AsyncCollectorConfig.run_settings)
    assert set(section_settings("ray")) <= set(RayTrainingConfig.run_settings)


def test_the_run_backend_is_the_collector_backend():
    assert TrainConfig(task="catch", backend="cuda-twin").collector_config().backend == "cuda-twin"
    assert TrainConfig(task="catch", backend="ray").collector_config().backend == "reference"
    with pytest.raises(ValueError, match="backend='ray'.*torchrl_dreamer.distributed"):
        AsyncCollectorConfig(backend="ray")


def test_the_disagreements_of_the_issue_are_gone():
    """seq_len 32 and replay_ratio 0.05 (the measured values) in every config."""
    assert (setting_field("seq_len").default, setting_field("replay_ratio").default) == (32, 0.05)
    for cls in FLAT_CONFIGS:
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        assert (defaults["seq_len"], defaults["replay_ratio"]) == (32, 0.05), cls
    assert RayTrainingConfig().total_steps == TrainConfig(task="catch").total_steps == 50_000


def test_translators_copy_every_shared_setting():
    cfg = TrainConfig(task="catch", num_envs=4, replay_capacity=400, seq_len=8, batch_size=4,
                      replay_ratio=0.3, learning_starts=64, total_steps=1000, seed=7,
                      steps_per_rollout=8, commit_stride=4, log_every=3, timeout_s=30.0,
                      max_weight_lag=3)
    col, ray = cfg.collector_config(), ray_config(cfg)
    for target in (col, ray):
        shared = cfg.shared_settings(type(target))
        assert set(shared) == set(type(target).run_settings)
        for name, value in shared.items():
            assert getattr(target, name) == value, (type(target).__name__, name)
    assert (col.min_ready_steps, col.safety_margin) == (8, 8)
    assert (col.timeout_s, ray.timeout_s, ray.max_weight_lag) == (30.0, 30.0, 3)


def test_ray_runners_default_to_the_section_capped_at_the_envs():
    assert ray_config(TrainConfig(task="catch", num_envs=4)).num_runners == 2
    assert ray_config(TrainConfig(task="catch", num_envs=1, replay_capacity=64)).num_runners == 1
    assert ray_config(TrainConfig(task="catch", num_envs=4, num_runners=4)).envs_per_runner == 1
    with pytest.raises(ValueError, match="cannot be split evenly over 3"):
        ray_config(TrainConfig(task="catch", num_envs=4, num_runners=3))


@pytest.mark.parametrize(
    "build, owner, error",
    [
        (lambda **kw: AsyncCollectorConfig(**kw), "AsyncCollectorConfig", ValueError),
        (lambda **kw: RayTrainingConfig(**kw), "RayTrainingConfig", ValueError),
        (lambda **kw: TrainConfig(task="catch", **kw), "TrainConfig", ConfigError),
    ],
)
def test_batch_shape_has_one_check(build, owner, error):
    with pytest.raises(error, match=rf"{owner}\.batch_size=0 is invalid: .*batch_size=16"):
        build(batch_size=0)
    with pytest.raises(error, match=rf"{owner}\.seq_len=1 is invalid: .*>= 2.*seq_len=32"):
        build(seq_len=1)
    with pytest.raises(error, match=rf"{owner}\.batch_size=2\.0 is invalid: must be an integer"):
        build(batch_size=2.0)


@pytest.mark.parametrize("name, bad", [
    ("steps_per_rollout", 0), ("learning_starts", -1), ("off_policy_tolerance", 0.5),
    ("timeout_s", 0.0), ("replay_ratio", -1.0), ("seed", 1.5),
])
def test_a_shared_setting_has_one_rule(name, bad):
    """Each config that holds a setting judges it by the setting's own rule, word for word."""
    import re

    from torchrl_dreamer.collectors.settings import setting_problem

    why = setting_problem(name, bad)
    assert why and setting_problem(name, setting_field(name).default) is None
    for build, owner, error in (
        (AsyncCollectorConfig, "AsyncCollectorConfig", ValueError),
        (RayTrainingConfig, "RayTrainingConfig", ValueError),
        (lambda **kw: TrainConfig(task="catch", **kw), "TrainConfig", ConfigError),
    ):
        with pytest.raises(error, match=re.escape(f"{owner}.{name}={bad!r} is invalid: {why}")):
            build(**{name: bad})
