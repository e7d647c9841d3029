"""Each run setting has one default: the config classes that share a field (same name, same
unit) give it the same default, taken from its home, unless :data:`EXCEPTIONS` says why not.

The homes: :mod:`torchrl_dreamer.collectors.defaults` (the settings the collector shares with
the trainers' and the Ray job's configs), :mod:`torchrl_dreamer.trainers.defaults`
(``total_steps``), and a loss setting's :class:`DreamerV3LossConfig` field.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from torchrl_dreamer.collectors import AsyncCollectorConfig
from torchrl_dreamer.collectors import defaults as collector_defaults
from torchrl_dreamer.distributed import RayTrainingConfig, ray_config
from torchrl_dreamer.modules import DreamerV3Config
from torchrl_dreamer.objectives import DreamerV3LearnerConfig, DreamerV3LossConfig
from torchrl_dreamer.trainers import ConfigError, TrainConfig
from torchrl_dreamer.trainers import defaults as trainer_defaults

CONFIGS = (TrainConfig, AsyncCollectorConfig, RayTrainingConfig, DreamerV3LossConfig,
           DreamerV3LearnerConfig, DreamerV3Config)

#: (class name, field) -> why that class's default of a shared field differs from the others'.
#: An entry here is the only way two config classes may disagree on a shared field's default.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("TrainConfig", "gamma"): (
        "None means 'resolved per run': a 20-second horizon for Game Boy tasks "
        "(game_discount(frame_skip)), the loss preset's (DreamerV3LossConfig.gamma) for gym: tasks."
    ),
    ("TrainConfig", "entropy_coef"): (
        "None means 'the loss preset's' (DreamerV3LossConfig.entropy_coef, or fast-pixels' 1e-3), "
        "unless the task's train_defaults or GAME_TRAIN_DEFAULTS set it."
    ),
}


def _defaults(cls: type) -> dict[str, object]:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def disagreements(classes, exceptions) -> list[str]:
    """``'A.x=1 vs B.x=2'`` for every field two of ``classes`` share with different defaults,
    neither side listed in ``exceptions``."""
    found = []
    for a, b in itertools.combinations(classes, 2):
        da, db = _defaults(a), _defaults(b)
        for name in sorted(set(da) & set(db)):
            if da[name] == db[name]:
                continue
            if (a.__name__, name) in exceptions or (b.__name__, name) in exceptions:
                continue
            found.append(f"{a.__name__}.{name}={da[name]!r} vs {b.__name__}.{name}={db[name]!r}")
    return found


def test_shared_fields_have_one_default():
    bad = disagreements(CONFIGS, EXCEPTIONS)
    assert not bad, (
        "config classes give a shared field different defaults: " + "; ".join(bad) + ". Take "
        "the default from its one home (torchrl_dreamer.collectors.defaults / "
        "trainers.defaults), or list (class, field) in EXCEPTIONS with the reason."
    )


def test_the_check_catches_a_disagreement():
    @dataclasses.dataclass
    class A:
        seq_len: int = 32

    @dataclasses.dataclass
    class B:
        seq_len: int = 64

    assert disagreements((A, B), {}) == ["A.seq_len=32 vs B.seq_len=64"]
    assert disagreements((A, B), {("B", "seq_len"): "why"}) == []


def test_exceptions_are_documented_and_current():
    fields = {cls.__name__: _defaults(cls) for cls in CONFIGS}
    for (cls_name, name), why in EXCEPTIONS.items():
        assert len(why) > 20, f"EXCEPTIONS[{cls_name}, {name}] needs a reason"
        assert name in fields[cls_name], f"stale exception: {cls_name} has no field {name!r}"
        others = [c for c, d in fields.items() if c != cls_name and name in d]
        assert others, f"stale exception: {cls_name}.{name} is not shared with another config"
        assert any(fields[c][name] != fields[cls_name][name] for c in others), (
            f"stale exception: {cls_name}.{name} agrees with the others now; remove it")


@pytest.mark.parametrize("module", [collector_defaults, trainer_defaults])
def test_every_config_takes_the_constant(module):
    """A field named like a constant of a defaults module defaults to that constant."""
    constants = [n for n in module.__all__ if n.isupper()]
    assert constants
    for const in constants:
        users = [cls for cls in CONFIGS if const.lower() in _defaults(cls)]
        assert users, f"{module.__name__}.{const} is no config's default"
        for cls in users:
            assert _defaults(cls)[const.lower()] == getattr(module, const), (cls, const)


def test_the_disagreements_of_the_issue_are_gone():
    """seq_len 32 and replay_ratio 0.05 (the measured values) in every config."""
    for cls in (TrainConfig, AsyncCollectorConfig, RayTrainingConfig):
        assert _defaults(cls)["seq_len"] == 32
        assert _defaults(cls)["replay_ratio"] == 0.05
    assert _defaults(TrainConfig)["total_steps"] == _defaults(RayTrainingConfig)["total_steps"]


def test_translators_copy_every_shared_setting():
    cfg = TrainConfig(task="catch", num_envs=4, replay_capacity=400, seq_len=8, batch_size=4,
                      replay_ratio=0.3, learning_starts=64, total_steps=1000, seed=7,
                      steps_per_rollout=8, commit_stride=4, log_every=3)
    col, ray = cfg.collector_config(), ray_config(cfg)
    for target in (col, ray):
        shared = cfg.shared_settings(type(target))
        assert {"seq_len", "batch_size", "replay_ratio", "seed"} <= set(shared)
        for name, value in shared.items():
            assert getattr(target, name) == value, (type(target).__name__, name)
    assert (col.min_ready_steps, col.safety_margin) == (8, 8)


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
