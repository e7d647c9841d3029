"""AsyncCollectorConfig validation, FailFast bundles and MetricsAccumulator."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torchrl.record.loggers import CSVLogger

from torchrl_dreamer.collectors import (
    AsyncCollectorConfig,
    FailFast,
    MetricsAccumulator,
    NonFiniteError,
    tensor_stats,
)

VALID = dict(seq_len=16, min_ready_steps=16, safety_margin=16, commit_stride=8)


class TestConfig:
    def test_defaults_valid_no_warning(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cfg = AsyncCollectorConfig()
        assert cfg.backend == "reference" and cfg.autocast_dtype is torch.float32
        assert cfg.to_dict()["device"] == "cpu"

    @pytest.mark.parametrize(
        "override, field, why",
        [
            ({"commit_stride": 0}, "commit_stride", ">= 1"),
            ({"seq_len": 1, "min_ready_steps": 1, "safety_margin": 1}, "seq_len", ">= 2"),
            ({"min_ready_steps": 15}, "min_ready_steps", "seq_len=16"),
            ({"safety_margin": 8}, "safety_margin", "seq_len=16"),
            ({"steps_per_rollout": 0}, "steps_per_rollout", ">= 1"),
            ({"batch_size": 0}, "batch_size", ">= 1"),
            ({"replay_ratio": -0.5}, "replay_ratio", ">= 0"),
            ({"replay_ratio": float("inf")}, "replay_ratio", "finite"),
            ({"max_learner_steps_per_tick": 0}, "max_learner_steps_per_tick", ">= 1"),
            ({"off_policy_tolerance": 0.5}, "off_policy_tolerance", ">= 1"),
            ({"log_every": 0}, "log_every", ">= 1"),
            ({"precision": "fp8"}, "precision", "one of"),
            ({"backend": "ray"}, "backend", "reference"),
            ({"timeout_s": 0}, "timeout_s", "> 0"),
            ({"learning_starts": -1}, "learning_starts", ">= 0"),
            ({"seq_len": 16.0}, "seq_len", "integer"),
            ({"device": "nope"}, "device", "invalid"),
        ],
    )
    def test_errors_name_field_and_reason(self, override, field, why):
        kw = {**VALID, **override}
        with pytest.raises(ValueError) as err:
            AsyncCollectorConfig(**kw)
        msg = str(err.value)
        assert f"AsyncCollectorConfig.{field}=" in msg and why in msg

    def test_cuda_backend_needs_cuda_device(self):
        with pytest.raises(ValueError, match="device"):
            AsyncCollectorConfig(**VALID, backend="cuda", device="cpu")

    def test_cuda_twin_backend_needs_cpu_device(self):
        assert AsyncCollectorConfig(**VALID, backend="cuda-twin").backend == "cuda-twin"
        with pytest.raises(ValueError, match="cuda-twin.*device='cpu'"):
            AsyncCollectorConfig(**VALID, backend="cuda-twin", device="cuda")

    def test_warns_when_commit_stride_over_half_seq(self):
        with pytest.warns(UserWarning, match="commit_stride=9 > seq_len/2"):
            AsyncCollectorConfig(**{**VALID, "commit_stride": 9})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            AsyncCollectorConfig(**{**VALID, "commit_stride": 8})  # exactly half: fine


class TestFailFast:
    def test_finite_passes(self, tmp_path):
        ff = FailFast(tmp_path)
        for i in range(5):
            ff.watch(i, {"loss": torch.tensor(float(i)), "logits": torch.randn(3, 4)})
        assert not any(tmp_path.iterdir())

    def test_nan_writes_bundle_and_raises(self, tmp_path):
        ff = FailFast(tmp_path, config={"seq_len": 8})
        ff.watch(0, {"loss": torch.tensor(1.0)})
        bad = torch.randn(2, 3)
        bad[0, 1] = float("nan")
        bad[1, 2] = float("inf")
        with pytest.raises(NonFiniteError, match="logits") as err:
            ff.watch(7, {"loss": torch.tensor(2.0), "logits": bad},
                     {"env_idx": torch.tensor([0, 3]), "start": torch.tensor([10, 42])})
        bundle = err.value.bundle
        assert bundle == tmp_path / "failure_step7" and str(bundle) in str(err.value)
        report = json.loads((bundle / "report.json").read_text())
        assert report["step"] == 7 and report["config"] == {"seq_len": 8}
        assert report["offending"] == ["logits"]
        assert report["tensors"]["logits"]["n_nan"] == 1
        assert report["tensors"]["logits"]["n_posinf"] == 1
        assert report["batch"] == {"env_idx": [0, 3], "start": [10, 42]}
        saved = torch.load(bundle / "tensors.pt", weights_only=True)
        assert torch.isnan(saved["logits"][0, 1])

    def test_deferred_check_finds_first_bad_step(self, tmp_path):
        ff = FailFast(tmp_path, check_every=4)
        ff.watch(0, {"loss": torch.tensor(1.0)})
        ff.watch(1, {"loss": torch.tensor(float("-inf"))})  # not read yet: no sync
        ff.watch(2, {"loss": torch.tensor(1.0)})
        with pytest.raises(NonFiniteError, match="update 1"):
            ff.watch(3, {"loss": torch.tensor(1.0)})

    def test_stats(self):
        s = tensor_stats(torch.tensor([1.0, float("nan"), 3.0]))
        assert (s["n_nan"], s["min"], s["max"], s["mean"]) == (1, 1.0, 3.0, 2.0)
        assert tensor_stats(torch.tensor([1, 2]))["n_nan"] == 0

    def test_bad_check_every(self, tmp_path):
        with pytest.raises(ValueError, match="check_every"):
            FailFast(tmp_path, check_every=0)


class TestMetrics:
    def test_means_and_reset(self):
        m = MetricsAccumulator()
        m.add({"loss": torch.tensor(1.0), "vec": torch.tensor([1.0, 3.0])})
        m.add({"loss": torch.tensor(3.0), "vec": torch.tensor([5.0, 7.0])})
        m.add_host({"actor_ms": 4.0})
        m.add_host({"actor_ms": 6.0})
        m.set_host({"fill": 0.1})
        m.set_host({"fill": 0.2})
        assert m.read() == {"loss": 2.0, "vec": 4.0, "actor_ms": 5.0, "fill": 0.2}
        assert m.read() == {} and m.last == {}

    def test_accumulation_stays_on_tensor(self):
        m = MetricsAccumulator()
        x = torch.tensor(2.0)
        m.add({"a": x})
        m.add({"a": x})
        assert x.item() == 2.0  # input not modified in place
        assert isinstance(m._sums["a"], torch.Tensor)

    def test_csv_logger(self, tmp_path):
        logger = CSVLogger("exp", log_dir=str(tmp_path))
        m = MetricsAccumulator()
        m.add({"loss_world_model": torch.tensor(1.5)})
        m.set_host({"replay_ratio_actual": 0.5})
        assert m.log(logger, step=3) == {"loss_world_model": 1.5, "replay_ratio_actual": 0.5}
        files = {p.name for p in tmp_path.rglob("*.csv")}
        assert {"loss_world_model.csv", "replay_ratio_actual.csv"} <= files


def test_protocol_checks_see_module_attributes_on_every_python():
    """A learner's ``world_model``/``actor`` are submodules, which ``nn.Module.__getattr__``
    provides and a static lookup cannot see (Python >= 3.12 checks runtime protocols that way:
    on 3.12 every training run's first weight copy raised TypeError, 2026-11-25). The protocol
    checks and the default weight copy must still recognise them."""
    import inspect

    from torchrl_dreamer.collectors import default_weight_sync
    from torchrl_dreamer.collectors.protocols import DreamerParts, Learner
    from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
    from torchrl_dreamer.objectives import DreamerV3Learner

    wm, actor, critic = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
    learner = DreamerV3Learner(wm, actor, critic)
    with pytest.raises(AttributeError):
        inspect.getattr_static(learner, "world_model")  # the case Python 3.12 gets wrong
    assert isinstance(learner, DreamerParts) and isinstance(learner, Learner)

    class NoActor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.world_model = torch.nn.Linear(1, 1)

    assert not isinstance(NoActor(), DreamerParts)
    twin = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
    player = DreamerPlayer(twin[0], twin[1], num_envs=1)
    default_weight_sync(player, learner)
    for a, b in zip(player.actor.parameters(), actor.parameters()):
        assert torch.equal(a, b)
