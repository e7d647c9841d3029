"""The decoder-free world-model loss (``ContrastiveWorldModelLoss``, ``--representation
contrastive``) and the ``representation_loss`` hook it overrides: the InfoNCE term, what it
trains and what it leaves alone, its heads in the learner's optimizer and checkpoints, and the
setting from the command line."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from torchrl_dreamer.collectors.learner_state import learner_state, load_learner_state
from torchrl_dreamer.modules import PRESETS, make_dreamer
from torchrl_dreamer.objectives import (
    WORLD_MODEL_LOSSES,
    ContrastiveWorldModelLoss,
    DreamerV3Learner,
    DreamerV3LossConfig,
    DreamerV3WorldModelLoss,
    info_nce,
    total_loss,
)

SMALL = PRESETS["tiny"].with_(deter=16, hidden=16, stoch=4, classes=4, cnn_mult=2, cnn_stages=2)


def _nets(seed=0):
    torch.manual_seed(seed)
    return make_dreamer(SMALL, {"pixels": "packed2"}, action_dim=3)


def _batch(T=8, B=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDict({
        "pixels": torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8, generator=g),
        "action": torch.randint(3, (T, B), generator=g),
        "reward": torch.randn(T, B, generator=g),
        "is_first": torch.zeros(T, B, dtype=torch.bool),
        "continue_": torch.ones(T, B),
    }, [T, B])


def test_info_nce_is_log_n_without_information_and_falls_with_matched_pairs():
    n = 6
    same = torch.ones(n, 4)  # every key alike: each query's softmax is uniform over n
    torch.testing.assert_close(info_nce(same, same, 0.1), torch.full((n,), math.log(n)))
    g = torch.Generator().manual_seed(0)
    q = torch.randn(n, 4, generator=g)
    matched, shuffled = info_nce(q, q, 0.1), info_nce(q, q.roll(1, 0), 0.1)
    assert matched.mean() < 0.5 < math.log(n) < shuffled.mean()
    # symmetric: both directions of the similarity matrix count, so the roles can swap
    k = torch.randn(n, 4, generator=g)
    torch.testing.assert_close(info_nce(q, k, 0.1), info_nce(k, q, 0.1))


def test_the_default_representation_is_the_decoders_reconstruction_of_every_nth_step():
    wm, _, _ = _nets()
    cfg = DreamerV3LossConfig().with_(decode_stride=2)
    loss = DreamerV3WorldModelLoss(wm, cfg)
    batch = _batch()
    torch.manual_seed(1)
    out = loss(batch)
    targets = wm.preprocess({"pixels": batch["pixels"]})
    torch.manual_seed(1)
    embed = wm.embed(targets)
    from torchrl_dreamer.data.dreamer_inputs import rssm_inputs
    from torchrl_dreamer.modules.latent import latent_of

    prev, first = rssm_inputs(batch["action"], batch["is_first"], wm.action_dim)
    post = wm.rssm.observe(embed, prev, first)
    latent = latent_of(post["z"], post["h"])
    recon = wm.decode(latent[::2])
    want = loss.reconstruction_loss(recon, {"pixels": targets["pixels"][::2]})
    assert want.shape == (4, 3)
    torch.testing.assert_close(out["loss_reconstruction"], want.mean())
    assert loss.representation_key == "loss_reconstruction"


def test_the_contrastive_loss_trains_encoder_rssm_and_heads_but_runs_no_decoder():
    wm, _, _ = _nets()
    loss = ContrastiveWorldModelLoss(wm)
    calls = []
    for d in wm.decoders.values():
        d.register_forward_hook(lambda *a: calls.append(1))
    out = loss(_batch())
    assert {k for k in loss.loss_scales if "prior" not in k} <= set(out.keys())
    assert "loss_reconstruction" not in out.keys()
    # at initialisation the term is about log(T * B): the latents do not know their frame yet
    assert 0.5 * math.log(24) < float(out["loss_contrastive"]) < 2 * math.log(24)
    total_loss(out).backward()
    assert calls == []
    assert all(p.grad is None for p in wm.decoders.parameters())
    for module in (wm.encoders, wm.rssm, loss.latent_projection, loss.embed_projection):
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        assert grads and any(g.abs().sum() > 0 for g in grads), module


def test_the_learner_steps_the_variants_heads_and_checkpoints_them():
    wm, actor, critic = _nets()
    learner = DreamerV3Learner(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3),
                               world_model_loss_cls=ContrastiveWorldModelLoss)
    heads = learner.world_model_loss.latent_projection.weight
    assert any(heads is p for g in learner.wm_opt.param_groups for p in g["params"])
    before_head = heads.detach().clone()
    before_dec = [p.detach().clone() for p in wm.decoders.parameters()]
    before_enc = [p.detach().clone() for p in wm.encoders.parameters()]
    metrics = learner.update(_batch())
    assert torch.isfinite(metrics["loss_contrastive"])
    assert not torch.equal(before_head, heads)
    assert any(not torch.equal(a, b) for a, b in zip(before_enc, wm.encoders.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(before_dec, wm.decoders.parameters()))
    # the heads travel in the learner's checkpoint
    state = learner_state(learner)
    wm2, actor2, critic2 = _nets(seed=1)
    other = DreamerV3Learner(wm2, actor2, critic2, DreamerV3LossConfig().with_(horizon=3),
                             world_model_loss_cls=ContrastiveWorldModelLoss)
    assert not torch.equal(other.world_model_loss.latent_projection.weight, heads)
    load_learner_state(other, state)
    torch.testing.assert_close(other.world_model_loss.latent_projection.weight, heads)
    torch.testing.assert_close(other.world_model_loss.embed_projection.bias,
                               learner.world_model_loss.embed_projection.bias)


def test_a_decoder_runs_world_model_optimizer_holds_the_same_parameters_as_before():
    wm, actor, critic = _nets()
    learner = DreamerV3Learner(wm, actor, critic)
    held = [p for g in learner.wm_opt.param_groups for p in g["params"]]
    assert len(held) == len(list(wm.parameters()))
    assert all(a is b for a, b in zip(held, wm.parameters()))  # same order: old checkpoints load


def test_the_setting_chooses_the_world_model_loss_and_names_the_choices():
    from torchrl_dreamer.train import build_parser, config_from_args
    from torchrl_dreamer.trainers import TrainConfig
    from torchrl_dreamer.trainers.builder import RunFactories
    from torchrl_dreamer.trainers.config import ConfigError

    assert set(WORLD_MODEL_LOSSES) == {"decoder", "contrastive"}
    cfg = config_from_args(build_parser("train").parse_args(
        ["--task", "catch", "--representation", "contrastive"]))
    assert cfg.loss.representation == "contrastive"
    assert config_from_args(build_parser("train").parse_args([])).loss.representation == "decoder"
    f = RunFactories(cfg.with_(num_envs=2), None, None)
    f = f.with_env(f.env())
    assert type(f.learner(*f.networks()).world_model_loss) is ContrastiveWorldModelLoss
    with pytest.raises(ConfigError, match="contrastive"):
        TrainConfig.from_dict({"representation": "autoencoder"})


def test_world_model_videos_are_refused_without_a_trained_decoder(tmp_path):
    from torchrl_dreamer.trainers import TrainConfig
    from torchrl_dreamer.trainers.checkpoint import CheckpointError, save_checkpoint
    from torchrl_dreamer.trainers.config import ConfigError
    from torchrl_dreamer.trainers.evaluate import world_model_video_checkpoint

    with pytest.raises(ConfigError, match="trains no decoder"):
        TrainConfig.from_dict({"representation": "contrastive", "video_every": 1000})
    cfg = TrainConfig.from_dict({"task": "catch", "representation": "contrastive"})
    ckpt = save_checkpoint(tmp_path / "step_1", {
        "config": cfg.to_dict(), "learner": {"world_model.rssm.h0": torch.zeros(2)}})
    with pytest.raises(CheckpointError, match="decoder was never trained"):
        world_model_video_checkpoint(ckpt, tmp_path / "wm.gif")
