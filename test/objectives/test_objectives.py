"""Tests of torchrl_dreamer.objectives: golden losses, stop-gradients, alignment, overfitting."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from conftest import requires_cuda
from tensordict import TensorDict

from torchrl_dreamer.data import shift_actions
from torchrl_dreamer.modules import PRESETS, DreamerPlayer, make_dreamer
from torchrl_dreamer.modules.functional import discount_weights, unimix_logits
from torchrl_dreamer.objectives import (
    LEARNER_PRESETS,
    LOSS_PRESETS,
    DreamerV3ActorLoss,
    DreamerV3CriticLoss,
    DreamerV3Learner,
    DreamerV3LearnerConfig,
    DreamerV3LossConfig,
    DreamerV3WorldModelLoss,
    SlowCritic,
    action_to_vector,
    make_return_norm,
    total_loss,
)
from torchrl_dreamer.objectives.learner import CAPTURE_WARMUP, resolve_acceleration

SMALL = PRESETS["tiny"].with_(deter=16, hidden=16, stoch=4, classes=4, cnn_mult=2, cnn_stages=2)
LN255 = math.log(255.0)


def _agent(obs=None, action_dim=3, discrete=True, cfg=SMALL, seed=0):
    torch.manual_seed(seed)
    obs = obs or {"obs": ("vector", 5)}
    return make_dreamer(cfg, obs, action_dim, discrete=discrete)


def _batch(T=6, B=3, obs_dim=5, action_dim=3, seed=0, **extra):
    g = torch.Generator().manual_seed(seed)
    td = TensorDict(
        {
            "obs": torch.randn(T, B, obs_dim, generator=g),
            "action": torch.randint(action_dim, (T, B), generator=g),
            "reward": torch.randn(T, B, generator=g),
            "is_first": torch.zeros(T, B, dtype=torch.bool),
            "continue_": torch.ones(T, B),
            "terminated": torch.zeros(T, B, dtype=torch.bool),
        },
        [T, B],
    )
    td.update(extra)
    return td


def _packed2_batch(T=4, B=2, action_dim=4, seed=None):
    """:func:`_batch` with packed2 frames (the maze's observations) instead of ``obs``; the
    frames come from ``seed``'s generator, or from the global one when ``seed`` is ``None``."""
    td = _batch(T=T, B=B, action_dim=action_dim, seed=seed or 0).exclude("obs")
    g = None if seed is None else torch.Generator().manual_seed(seed)
    td["pixels"] = torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8, generator=g)
    return td


# ---------------------------------------------------------------- configuration
def test_sheeprl_preset_values():
    c = LOSS_PRESETS["sheeprl"]
    assert (c.kl_dyn, c.kl_rep, c.free_bits, c.horizon, c.lmbda) == (0.5, 0.1, 1.0, 15, 0.95)
    assert abs(c.gamma - 0.996996996996997) < 1e-12
    assert (c.entropy_coef, c.return_ema_decay, c.return_percentiles) == (3e-4, 0.99, (0.05, 0.95))
    assert (c.slow_critic_tau, c.slow_critic_reg) == (0.02, 1.0)
    o = LEARNER_PRESETS["sheeprl"]
    assert (o.wm_lr, o.wm_eps, o.wm_clip) == (1e-4, 1e-8, 1000.0)
    assert (o.actor_lr, o.actor_eps, o.actor_clip) == (3e-5, 1e-5, 100.0)
    assert (o.critic_lr, o.critic_eps, o.critic_clip) == (3e-5, 1e-5, 100.0)
    # optimizer settings are the learner's, and the loss config says so
    with pytest.raises(TypeError, match=r"\['wm_lr'\] are not loss settings.*DreamerV3LearnerConfig"):
        c.with_(wm_lr=1e-3)
    wm, actor, critic = _agent()
    learner = DreamerV3Learner(wm, actor, critic, "sheeprl")
    g = learner.actor_opt.param_groups[0]
    assert g["lr"] == 3e-5 and g["eps"] == 1e-5
    assert learner.wm_opt.param_groups[0]["eps"] == 1e-8
    with pytest.raises(KeyError, match="unknown loss preset"):
        DreamerV3Learner(wm, actor, critic, "dreamerv9")


# ---------------------------------------------------------------- alignment helpers
def test_shift_actions_and_action_formats():
    a = torch.arange(1, 7, dtype=torch.float32).reshape(3, 2, 1)
    first = torch.zeros(3, 2, dtype=torch.bool)
    s = shift_actions(a, first)
    assert torch.equal(s[0], torch.zeros(2, 1)) and torch.equal(s[1:], a[:-1])
    idx = torch.tensor([[0, 2], [1, 1]])
    oh = action_to_vector(idx, 3)
    assert torch.equal(oh.argmax(-1), idx) and oh.sum() == 4
    assert torch.equal(action_to_vector(idx.unsqueeze(-1), 3), oh)
    assert torch.equal(action_to_vector(oh, 3), oh)
    with pytest.raises(ValueError, match="last dim action_dim"):
        action_to_vector(torch.zeros(2, 2, 4), 3)


def test_world_model_loss_uses_shifted_actions_and_forced_first():
    wm, _, _ = _agent()
    loss = DreamerV3WorldModelLoss(wm)
    seen = {}
    orig = wm.rssm.observe

    def spy(embed, prev_action, is_first, state=None):
        seen["a"], seen["f"] = prev_action.clone(), is_first.clone()
        return orig(embed, prev_action, is_first, state)

    wm.rssm.observe = spy
    td = _batch()
    td["is_first"][2, 1] = True
    loss(td)
    oh = action_to_vector(td["action"], 3)
    assert torch.equal(seen["a"][0], torch.zeros(3, 3))
    expected = oh[:-1].clone()
    expected[1, 1] = 0.0  # a new episode at (2, 1) has no previous action (row-alignment contract)
    assert torch.equal(seen["a"][1:], expected)
    assert seen["f"][0].all() and seen["f"][2, 1] and seen["f"][1:].sum() == 1
    assert not td["is_first"][0].any()  # the input batch is not modified


# ---------------------------------------------------------------- world-model goldens
def test_world_model_reward_loss_ln255_at_init_and_outputs():
    wm, _, _ = _agent()
    out = DreamerV3WorldModelLoss(wm)(_batch())
    assert abs(float(out["loss_reward"].detach()) - LN255) < 1e-5
    assert float(out["reward_pred_mean"]) == 0.0
    for k in ["loss_reconstruction", "loss_continue", "loss_kl_dyn", "loss_kl_rep"]:
        assert out[k].shape == () and torch.isfinite(out[k])
    post = out["posterior"]
    assert post.batch_size == (6, 3) and not post["h"].requires_grad
    assert post["z"].shape == (6, 3, 16)
    total = total_loss(out)
    parts = sum(float(out[k]) for k in out.keys() if k.startswith("loss_"))
    assert math.isclose(float(total), parts, rel_tol=1e-6)


def test_kl_free_bits_golden():
    wm, _, _ = _agent()
    loss = DreamerV3WorldModelLoss(wm, DreamerV3LossConfig())
    uniform = unimix_logits(torch.zeros(2, 32, 32), 0.01)
    dyn, rep, kl = loss.kl_loss(uniform, uniform)
    assert abs(float((0.5 * dyn + 0.1 * rep).mean()) - 0.6) < 1e-6
    peaked = torch.zeros(2, 32, 32)
    peaked[..., 0] = 5.0
    dyn, rep, kl = loss.kl_loss(unimix_logits(peaked, 0.01), uniform)
    assert abs(float(kl[0]) - 75.921196) < 1e-3
    assert abs(float(0.5 * dyn[0] + 0.1 * rep[0]) - 45.552718) < 1e-3


def test_kl_stop_gradients():
    wm, _, _ = _agent()
    loss = DreamerV3WorldModelLoss(wm)
    post = torch.randn(2, 4, 4, requires_grad=True)
    prior = torch.randn(2, 4, 4, requires_grad=True)
    dyn, rep, _ = loss.kl_loss(unimix_logits(post, 0.01), unimix_logits(prior, 0.01))
    dyn.sum().backward(retain_graph=True)
    assert post.grad is None and prior.grad.abs().sum() > 0
    prior.grad = None
    rep.sum().backward()
    assert prior.grad is None and post.grad.abs().sum() > 0


def test_prior_head_loss_trains_heads_on_prior_latents():
    """``prior_head_scale`` adds reward/continue terms on ``[z ~ prior(h), h]`` whose gradient
    reaches the heads and, through ``h``, the GRU; 0 adds nothing."""
    wm, _, _ = _agent()
    batch = _batch()
    torch.manual_seed(0)
    out0 = DreamerV3WorldModelLoss(wm)(batch)
    assert "loss_reward_prior" not in out0.keys() and "loss_continue_prior" not in out0.keys()
    loss = DreamerV3WorldModelLoss(wm, DreamerV3LossConfig().with_(prior_head_scale=0.5))
    torch.manual_seed(0)
    out = loss(batch)
    # heads are zero-initialised (reward) / uniform: the prior term equals the posterior one x 0.5
    assert torch.allclose(out["loss_reward_prior"], 0.5 * out["loss_reward"])
    for k in ("loss_reconstruction", "loss_reward", "loss_continue", "loss_kl_dyn"):
        assert torch.allclose(out[k], out0[k])  # the posterior terms are unchanged
    wm.zero_grad()
    (out["loss_reward_prior"] + out["loss_continue_prior"]).backward()

    def grads(m):
        return sum(p.grad.abs().sum() for p in m.parameters() if p.grad is not None)

    assert grads(wm.cont) > 0 and grads(wm.rssm.gru) > 0
    # the reward head starts at zero output weights: its last layer still gets a gradient
    assert grads(wm.reward) > 0
    with pytest.raises(ValueError, match="prior_head_scale"):
        DreamerV3LossConfig().with_(prior_head_scale=-1.0)


def test_continue_target_falls_back_to_terminated_and_batch_major():
    wm, _, _ = _agent()
    td = _batch()
    td["terminated"][3, 0] = True
    td["continue_"][3, 0] = 0.0
    torch.manual_seed(5)
    a = DreamerV3WorldModelLoss(wm)(td)
    torch.manual_seed(5)
    b = DreamerV3WorldModelLoss(wm)(td.exclude("continue_"))
    torch.testing.assert_close(a["loss_continue"], b["loss_continue"])
    assert float(a["posterior"]["continue_"][3, 0]) == 0.0
    torch.manual_seed(5)
    c = DreamerV3WorldModelLoss(wm, batch_major=True)(td.transpose(0, 1).contiguous())
    for k in ["loss_reconstruction", "loss_reward", "loss_continue", "loss_kl_dyn"]:
        torch.testing.assert_close(a[k], c[k])
    with pytest.raises(ValueError, match=r"\[T, B\]"):
        DreamerV3WorldModelLoss(wm)(td[0])


def test_set_keys_renames_inputs():
    wm, _, _ = _agent()
    loss = DreamerV3WorldModelLoss(wm)
    loss.set_keys(reward="rew", action="act")
    td = _batch()
    td.rename_key_("reward", "rew")
    td.rename_key_("action", "act")
    assert torch.isfinite(loss(td)["loss_reward"])
    assert "rew" in loss.in_keys
    with pytest.raises(ValueError, match="not an accepted tensordict key"):
        loss.set_keys(pixels="x")


def test_image_reconstruction_is_summed_over_pixels():
    obs = {"pix": ("image", (1, 8, 8))}
    wm, _, _ = _agent(obs=obs)
    loss = DreamerV3WorldModelLoss(wm)
    td = _batch().exclude("obs")
    td["pix"] = torch.randint(0, 256, (6, 3, 1, 8, 8), dtype=torch.uint8)
    out = loss(td)
    target = td["pix"].float() / 255 - 0.5
    with torch.no_grad():
        recon = {"pix": target + 0.1}
    per_step = loss.reconstruction_loss(recon, {"pix": target})
    torch.testing.assert_close(per_step, torch.full((6, 3), 64 * 0.01))
    assert float(out["loss_reconstruction"]) > 1.0


def test_decode_stride_reconstructs_every_nth_step_only():
    """decode_stride=2 decodes steps 0, 2, 4 of each sequence: the reconstruction loss is their
    mean, the other terms are those of the full decode, and the decoder sees half the rows."""
    wm, _, _ = _agent(obs={"pixels": "packed2"}, action_dim=4)
    td = _packed2_batch(T=6, B=2, seed=3)
    torch.manual_seed(0)  # the same posterior samples in both losses
    full = DreamerV3WorldModelLoss(wm)(td)
    calls = []
    hook = wm.decoders["pixels"].register_forward_hook(lambda m, i, o: calls.append(i[0].shape))
    strided_loss = DreamerV3WorldModelLoss(wm, DreamerV3LossConfig(decode_stride=2))
    torch.manual_seed(0)
    out = strided_loss(td)
    hook.remove()
    assert calls == [torch.Size([3, 2, calls[0][-1]])]  # steps 0, 2, 4 of the 6
    for k in ("loss_reward", "loss_continue", "loss_kl_dyn", "loss_kl_rep"):
        torch.testing.assert_close(out[k], full[k])
    with torch.no_grad():  # the same sum of squares, on the decoded steps only
        targets = wm.preprocess({"pixels": td["pixels"]})
        post = out["posterior"]
        latent = torch.cat([post["z"], post["h"]], -1)[::2]
        want = strided_loss.reconstruction_loss(wm.decode(latent),
                                                {k: v[::2] for k, v in targets.items()}).mean()
    torch.testing.assert_close(out["loss_reconstruction"], want)
    out["loss_reconstruction"].backward()
    assert all(p.grad is not None for p in wm.decoders.parameters())
    with pytest.raises(ValueError, match="decode_stride must be an integer >= 1"):
        DreamerV3LossConfig(decode_stride=0)


# ---------------------------------------------------------------- moments / critic goldens
def test_return_norm_matches_moments_golden():
    norm = make_return_norm(DreamerV3LossConfig())
    x = torch.linspace(0, 100, 101).reshape(-1, 1)
    want = {
        1: (0.05, 1.0),
        2: (0.0995, 1.791),
        10: (0.478090, 8.605614),
        100: (3.169837, 57.057152),
        1000: (4.999808, 89.995872),
    }
    for n in range(1, 1001):
        norm.update(x)
        if n in want:
            off, scale = want[n]
            assert abs(float(norm.low) - off) < 1e-3 * max(1, off), n
            assert abs(float(norm.scale()) - scale) < 1e-3 * max(1, scale), n
    small = make_return_norm(DreamerV3LossConfig().with_(return_ema_decay=0.0))
    small.update(torch.linspace(0, 0.4, 11).reshape(-1, 1))
    assert float(small.scale()) == 1.0


def test_critic_loss_golden_at_init():
    _, _, critic = _agent()
    loss = DreamerV3CriticLoss(critic)
    loss.update_slow_critic()
    H, N = 15, 8
    latent = torch.randn(H + 1, N, 16 + 16)
    imag = TensorDict(
        {
            "latent": latent,
            "lambda_return": torch.randn(H, N) * 3,
            "weight": discount_weights(torch.ones(H + 1, N), 1 - 1 / 333),
        },
        [],
    )
    out = loss(imag)
    assert abs(float(out["loss_critic"]) - 10.8526) < 1e-3
    assert float(out["slow_value_mean"]) == 0.0


def test_slow_critic_hard_copy_then_ema():
    _, _, critic = _agent()
    slow = SlowCritic(critic, tau=0.02)
    with torch.no_grad():
        critic.out.weight.fill_(1.0)
    slow.update()
    assert torch.equal(slow.module.out.weight, critic.out.weight)
    with torch.no_grad():
        critic.out.weight.fill_(2.0)
    slow.update()
    torch.testing.assert_close(slow.module.out.weight, torch.full_like(critic.out.weight, 1.02))
    assert not any(p.requires_grad for p in slow.parameters())
    assert all(p is not q for p, q in zip(slow.parameters(), critic.parameters()))
    with pytest.raises(ValueError, match="tau"):
        SlowCritic(critic, tau=0.0)


# ---------------------------------------------------------------- actor
def _posterior(wm, T=5, B=2, seed=0):
    out = DreamerV3WorldModelLoss(wm)(_batch(T=T, B=B, seed=seed))
    return out["posterior"]


@pytest.mark.parametrize("discrete", [True, False])
def test_actor_loss_touches_only_the_actor(discrete):
    wm, actor, critic = _agent(discrete=discrete)
    loss = DreamerV3ActorLoss(wm, actor, critic, DreamerV3LossConfig().with_(horizon=4))
    out = loss(_posterior(wm))
    out["loss_actor"].backward()
    assert all(p.grad is None for p in wm.parameters())
    assert all(p.grad is None for p in critic.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in actor.parameters())
    assert all(p.requires_grad for p in wm.parameters())  # held-out params are restored
    imag = out["imagination"]
    assert imag["latent"].shape == (5, 10, wm.latent_dim) and imag["lambda_return"].shape == (4, 10)
    assert not imag["latent"].requires_grad


@pytest.mark.parametrize("discrete", [True, False])
def test_imagine_last_starts_from_the_last_steps_only(discrete):
    """imagine_last=K imagines B x K trajectories, started from the posterior states of each
    sequence's last K steps (time-major [T, B]), with the data's continue flags of those steps;
    K >= T is every step, as 0 is."""
    wm, actor, critic = _agent(discrete=discrete)
    post = _posterior(wm, T=5, B=2)
    post["continue_"] = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 1.0]])
    cfg = DreamerV3LossConfig().with_(horizon=3, imagine_last=2)
    out = DreamerV3ActorLoss(wm, actor, critic, cfg)(post)
    imag = out["imagination"]
    assert imag["latent"].shape == (4, 4, wm.latent_dim)
    starts = torch.cat([post["z"], post["h"]], -1)[-2:].reshape(4, -1)
    torch.testing.assert_close(imag["latent"][0], starts)
    # a terminal start (the data's continue 0) weighs nothing: steps 3 and 4 are (0, 1), (1, 1)
    assert (imag["weight"][:, 0] == 0).all() and (imag["weight"][0, 1:] == 1).all()
    out["loss_actor"].backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in actor.parameters())
    for k in (0, 5, 9):
        full = DreamerV3ActorLoss(wm, actor, critic, cfg.with_(imagine_last=k))(post)
        assert full["imagination"]["latent"].shape == (4, 10, wm.latent_dim)
    with pytest.raises(ValueError, match="imagine_last must be an integer >= 0"):
        DreamerV3LossConfig(imagine_last=-1)


def test_set_entropy_coef_changes_the_actor_loss_by_the_entropy_term():
    """The loss is -(w * (objective + weight * H)).mean(): setting the weight from 0 to c moves
    the loss by exactly -c * mean(w * H), with the same imagination (same generator seed)."""
    wm, actor, critic = _agent()
    loss = DreamerV3ActorLoss(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3))
    assert float(loss.entropy_weight) == pytest.approx(loss.config.entropy_coef)
    post = _posterior(wm)
    assert "entropy_weight" not in loss.state_dict()  # old checkpoints load unchanged
    loss.set_entropy_coef(0.0)
    torch.manual_seed(5)
    base = loss(post)
    loss.set_entropy_coef(0.25)
    torch.manual_seed(5)
    out = loss(post)
    w = out["imagination"]["weight"][:-1]
    torch.testing.assert_close(base["imagination"]["latent"], out["imagination"]["latent"])
    shift = float((base["loss_actor"] - out["loss_actor"]).detach())
    assert shift > 0
    # mean(w * H) = shift / 0.25, and H's mean is the logged actor_entropy
    assert shift / 0.25 <= float(out["actor_entropy"]) * float(w.max()) + 1e-6
    with pytest.raises(ValueError, match=">= 0"):
        loss.set_entropy_coef(-1.0)


def test_bonus_weight_takes_its_share_of_the_bonus_out_of_the_reward_target():
    """With a ``bonus`` key, the reward the head learns (and the critic's replay targets get)
    is reward - (1 - w) * bonus: w = 1 is the batch's reward exactly, w = 0 the loss of a
    batch whose reward never held the bonus; a batch without the key ignores w."""
    wm, _, _ = _agent()
    loss = DreamerV3WorldModelLoss(wm)
    assert float(loss.bonus_weight) == 1.0 and "bonus_weight" not in loss.state_dict()
    with torch.no_grad():  # a reward head that is not all zeros, so the target shows
        for p in wm.reward.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    batch = _batch()
    bonus = torch.rand(6, 3, generator=torch.Generator().manual_seed(2))
    with_bonus = batch.clone().set("bonus", bonus)
    without = batch.clone().set("reward", batch["reward"] - bonus)

    def run(b):
        torch.manual_seed(7)
        return loss(b)

    plain = run(batch)
    full = run(with_bonus)
    assert torch.equal(full["loss_reward"], plain["loss_reward"])
    assert torch.equal(full["posterior"]["reward"], batch["reward"])
    loss.set_bonus_weight(0.0)
    none = run(with_bonus)
    torch.testing.assert_close(none["loss_reward"], run(without)["loss_reward"])
    torch.testing.assert_close(none["posterior"]["reward"], batch["reward"] - bonus)
    assert not torch.equal(none["loss_reward"], full["loss_reward"])
    assert torch.equal(run(batch)["loss_reward"], plain["loss_reward"])  # no key: w unused
    loss.set_bonus_weight(0.5)
    torch.testing.assert_close(run(with_bonus)["posterior"]["reward"],
                               batch["reward"] - 0.5 * bonus)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        loss.set_bonus_weight(1.5)


def test_actor_first_continue_from_data_and_weights():
    wm, actor, critic = _agent()
    loss = DreamerV3ActorLoss(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3))
    post = _posterior(wm)
    post["continue_"][:] = 0.0
    imag = loss(post)["imagination"]
    g = 1 - 1 / 333
    # w = cumprod(gamma c) / gamma with c_0 = 0 (terminal start) -> all weights 0
    assert float(imag["weight"].abs().sum()) == 0.0
    post["continue_"][:] = 1.0
    with torch.no_grad():
        wm.cont.out.bias.fill_(50.0)  # continue mode 1 everywhere
    imag = loss(post)["imagination"]
    torch.testing.assert_close(imag["weight"][:, 0], torch.tensor([1, g, g * g, g**3]))


def test_actor_returns_match_lambda_golden_with_constant_heads():
    wm, actor, critic = _agent()
    loss = DreamerV3ActorLoss(wm, actor, critic, DreamerV3LossConfig().with_(horizon=15))
    with torch.no_grad():
        wm.cont.out.bias.fill_(50.0)
    post = _posterior(wm)
    out = loss(post)
    # zero-initialised reward and critic: every return is exactly 0, scale is the floor 1
    assert float(out["imagination"]["lambda_return"].abs().max()) == 0.0
    assert float(out["return_scale"]) == 1.0
    # with zero advantage the loss is -mean(w * 3e-4 * entropy)
    imag = out["imagination"]
    ent = actor.entropy(actor(imag["latent"]))[:-1]
    want = -(imag["weight"][:-1] * 3e-4 * ent).mean()
    torch.testing.assert_close(out["loss_actor"], want)


def test_critic_loss_does_not_touch_actor_or_world_model():
    wm, actor, critic = _agent()
    actor_loss = DreamerV3ActorLoss(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3))
    critic_loss = DreamerV3CriticLoss(critic)
    critic_loss.update_slow_critic()
    imag = actor_loss(_posterior(wm))["imagination"]
    critic_loss(imag)["loss_critic"].backward()
    assert all(p.grad is None for p in actor.parameters())
    assert all(p.grad is None for p in wm.parameters())
    assert all(p.grad is not None for p in critic.parameters())


# ---------------------------------------------------------------- learner
def test_learner_update_metrics_and_slow_critic():
    wm, actor, critic = _agent()
    learner = DreamerV3Learner(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3))
    before = [p.detach().clone() for p in wm.parameters()]
    m = learner.update(_batch())
    for k in ["loss_world_model", "loss_actor", "loss_critic", "grad_norm_world_model", "kl"]:
        assert k in m.keys() and m[k].shape == () and torch.isfinite(m[k])
    assert any(not torch.equal(a, b) for a, b in zip(before, wm.parameters()))
    slow = learner.critic_loss.slow_critic.module
    # step 0 hard-copied the initial critic; the critic then moved, the slow copy did not
    assert not torch.equal(slow.out.weight, critic.out.weight)
    learner.update(_batch(seed=1))
    assert learner.num_updates == 2 and int(learner.critic_loss.slow_critic.count) == 2


def test_world_model_loss_terms_match_their_configured_scales():
    """Every loss term forward() emits is in out_keys and in loss_scales, and is proportional to
    the scale loss_scales names (doubling it doubles that term alone)."""
    wm, _, _ = _agent()
    cfg = DreamerV3LossConfig(prior_head_scale=0.5)
    batch = _batch()

    def terms(config):
        torch.manual_seed(0)
        out = DreamerV3WorldModelLoss(wm, config)(batch)
        return {k: float(v) for k, v in out.items() if k.startswith("loss_")}

    loss = DreamerV3WorldModelLoss(wm, cfg)
    base = terms(cfg)
    assert set(base) == set(loss.loss_scales) and set(base) <= set(loss.out_keys)
    assert "loss_reward_prior" not in terms(DreamerV3LossConfig())  # scale 0: not emitted
    for scale in {f for fs in loss.loss_scales.values() for f in fs}:
        doubled = terms(cfg.with_(**{scale: 2 * getattr(cfg, scale)}))
        for k, v in base.items():
            moved = scale in loss.loss_scales[k]
            assert doubled[k] == pytest.approx(2 * v if moved else v, rel=1e-5), (scale, k)

    class Extra(DreamerV3WorldModelLoss):
        loss_scales = {**DreamerV3WorldModelLoss.loss_scales, "loss_extra": ("extra_scale",)}

    with pytest.raises(ValueError, match=r"\['loss_extra'\] name scales that DreamerV3LossConfig"):
        Extra(wm, cfg)


def test_learner_world_model_warmup_trains_only_the_world_model():
    wm, actor, critic = _agent()
    cfg = DreamerV3LossConfig().with_(horizon=3)
    learner = DreamerV3Learner(wm, actor, critic, cfg,
                               optim=DreamerV3LearnerConfig(world_model_warmup=2))

    def snap(m):
        return [p.detach().clone() for p in m.parameters()]

    def moved(before, m):
        return any(not torch.equal(a, b) for a, b in zip(before, m.parameters()))

    for i in range(2):
        w, a, c = snap(wm), snap(actor), snap(critic)
        m = learner.update(_batch(seed=i))
        assert moved(w, wm) and not moved(a, actor) and not moved(c, critic)
        assert "loss_world_model" in m.keys() and "loss_actor" not in m.keys()
        assert int(learner.critic_loss.slow_critic.count) == 0
    a, c = snap(actor), snap(critic)
    m = learner.update(_batch(seed=2))
    assert moved(a, actor) and moved(c, critic) and "loss_actor" in m.keys()
    assert learner.num_updates == 3 and int(learner.critic_loss.slow_critic.count) == 1


def test_learner_accepts_int_actions_with_trailing_dim_and_one_hot():
    wm, actor, critic = _agent()
    learner = DreamerV3Learner(wm, actor, critic, DreamerV3LossConfig().with_(horizon=2))
    td = _batch()
    td["action"] = td["action"].unsqueeze(-1)
    assert torch.isfinite(learner.update(td)["loss_world_model"])
    td["action"] = action_to_vector(td["action"], 3)
    assert torch.isfinite(learner.update(td)["loss_world_model"])


@pytest.mark.parametrize("pixels", [False, True])
def test_learner_autocast_bf16_runs(pixels):
    """Also with an image decoder, whose sub-pixel output layer has a hand-written backward."""
    obs = {"pix": ("image", (1, 16, 16))} if pixels else None
    wm, actor, critic = _agent(obs=obs)
    if pixels:
        assert wm.decoders["pix"].subpixel
    learner = DreamerV3Learner(
        wm, actor, critic, DreamerV3LossConfig().with_(horizon=2), autocast_dtype=torch.bfloat16
    )
    td = _batch()
    if pixels:
        g = torch.Generator().manual_seed(0)
        td = td.exclude("obs")
        td["pix"] = torch.randint(0, 256, (6, 3, 1, 16, 16), generator=g, dtype=torch.uint8)
    for _ in range(2):
        m = learner.update(td)
        loss = m["loss_world_model"]
        assert torch.isfinite(loss) and loss.dtype == torch.float32
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in wm.parameters())


def test_overfit_one_batch_world_model_loss_halves():
    obs = {"pix": ("image", (1, 16, 16))}
    wm, actor, critic = _agent(obs=obs)
    cfg = DreamerV3LossConfig().with_(horizon=2)
    learner = DreamerV3Learner(wm, actor, critic, cfg, optim=DreamerV3LearnerConfig(wm_lr=1e-3))
    g = torch.Generator().manual_seed(0)
    td = _batch(T=8, B=4).exclude("obs")
    base = torch.randint(0, 256, (1, 4, 1, 16, 16), generator=g, dtype=torch.uint8)
    td["pix"] = base.expand(8, 4, 1, 16, 16).clone()
    td["reward"] = torch.linspace(-1, 1, 8).reshape(8, 1).expand(8, 4).clone()
    first = float(learner.update(td)["loss_world_model"])
    losses = []
    for _ in range(300):
        losses.append(float(learner.update(td)["loss_world_model"]))
        if losses[-1] <= 0.5 * first:
            break
    assert min(losses) <= 0.5 * first, (first, losses[-5:])


def test_shared_critic_logits_equal_recomputed_critic_loss():
    wm, actor, critic = _agent()
    actor_loss = DreamerV3ActorLoss(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3))
    critic_loss = DreamerV3CriticLoss(critic)
    critic_loss.update_slow_critic()
    with torch.no_grad():
        critic.out.weight.normal_()  # non-trivial critic
    imag = actor_loss(_posterior(wm))["imagination"]
    assert imag["critic_logits"].requires_grad
    shared = critic_loss(imag)["loss_critic"]
    recomputed = critic_loss(imag.exclude("critic_logits"))["loss_critic"]
    torch.testing.assert_close(shared, recomputed)
    no_share = DreamerV3ActorLoss(
        wm, actor, critic, DreamerV3LossConfig().with_(horizon=3), share_critic_logits=False
    )
    assert "critic_logits" not in no_share(_posterior(wm)).get("imagination").keys()


def test_learner_continuous_actor_updates_only_through_its_optimizer():
    wm, actor, critic = _agent(discrete=False, action_dim=2)
    learner = DreamerV3Learner(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3))
    td = _batch(action_dim=2)
    td["action"] = torch.rand(6, 3, 2) * 2 - 1
    before = [p.detach().clone() for p in actor.parameters()]
    m = learner.update(td)
    assert torch.isfinite(m["loss_actor"]) and float(m["grad_norm_actor"]) > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, actor.parameters()))


def test_loss_state_follows_the_agent_device():
    """Every buffer the actor and critic losses create sits on the agent's device (found on a
    GPU on 2026-11-25: the return normaliser's EMAs stayed on the CPU and the first CUDA update
    failed); checked here on the meta device, which needs no GPU."""
    wm, actor, critic = (m.to("meta") for m in _agent())
    actor_loss = DreamerV3ActorLoss(wm, actor, critic)
    critic_loss = DreamerV3CriticLoss(critic)
    for loss in (actor_loss, critic_loss):
        devices = {(name, t.device.type) for name, t in loss.named_buffers()}
        assert {d for _, d in devices} == {"meta"}, devices


@requires_cuda
def test_learner_and_player_on_cuda():
    wm, actor, critic = _agent(obs={"pixels": "packed2"}, action_dim=4)
    wm, actor, critic = wm.cuda(), actor.cuda(), critic.cuda()
    learner = DreamerV3Learner(wm, actor, critic, DreamerV3LossConfig().with_(horizon=3))
    td = _packed2_batch()
    m = learner.update(td.cuda())
    assert m["loss_world_model"].device.type == "cuda"
    assert torch.isfinite(m["loss_world_model"]).item()
    player = DreamerPlayer(wm, actor, num_envs=2)
    obs = TensorDict(
        {
            "pixels": torch.randint(0, 256, (2, 1, 72, 20), dtype=torch.uint8),
            "is_first": torch.ones(2, dtype=torch.bool),
        },
        [2],
        device="cuda",
    )
    assert player(obs)["action"].device.type == "cuda"


def test_tiny_preset_packed2_update_decreases_reconstruction():
    torch.manual_seed(0)
    wm, actor, critic = make_dreamer("tiny", {"pixels": "packed2"}, action_dim=8)
    learner = DreamerV3Learner(
        wm, actor, critic, DreamerV3LossConfig().with_(horizon=3),
        optim=DreamerV3LearnerConfig(wm_lr=1e-3),
    )
    td = _packed2_batch(action_dim=8)
    first = learner.update(td)
    for _ in range(5):
        last = learner.update(td)
    assert float(last["loss_reconstruction"]) < float(first["loss_reconstruction"])
    assert float(first["loss_reward"]) == pytest.approx(LN255, abs=1e-4)


def test_slow_critic_restored_from_state_dict_is_not_hard_copied_again():
    _, _, critic = _agent()
    slow = SlowCritic(critic, tau=0.5)
    slow.update()
    with torch.no_grad():
        slow.module.out.weight.fill_(1.0)
    state = slow.state_dict()
    fresh = SlowCritic(critic, tau=0.5)
    fresh.load_state_dict(state)
    with torch.no_grad():
        critic.out.weight.fill_(3.0)
    fresh.update()  # EMA, not a hard copy
    torch.testing.assert_close(fresh.module.out.weight, torch.full_like(critic.out.weight, 2.0))


# ---------------------------------------------------------------- compile / capture
def _assert_same_updates(learner, reference, rtol: float, atol: float, updates: int = 3):
    """``updates`` updates on the same batches and seeds give ``reference``'s metrics and end at
    its parameters."""
    for seed in range(updates):
        torch.manual_seed(seed)
        want = reference.update(_batch(seed=seed))
        torch.manual_seed(seed)
        got = learner.update(_batch(seed=seed))
        for key in want.keys():
            torch.testing.assert_close(got[key], want[key], rtol=rtol, atol=atol, msg=key)
    for a, b in zip(learner.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


def test_capture_on_cpu_warns_once_and_matches_the_eager_learner():
    cfg = DreamerV3LossConfig().with_(horizon=3)
    plain = DreamerV3Learner(*_agent(), cfg)
    with pytest.warns(RuntimeWarning, match="capture=True uses CUDA graphs") as record:
        captured = DreamerV3Learner(*_agent(), cfg, capture=True)
    assert len([r for r in record if r.category is RuntimeWarning]) == 1
    assert (captured.compile_mode, captured.capture) == (None, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no further warning per update
        _assert_same_updates(captured, plain, rtol=0, atol=0)
    # the static buffers are reused: another batch shape is refused, naming the keys
    with pytest.raises(ValueError, match="capture=True needs every batch"):
        captured.update(_batch(T=4))


# ops that read a device value back to the host (a sync, or a data-dependent shape): a CUDA
# graph cannot capture them. (Not aten.equal: under torch 2.11 the update dispatches one, not
# under 2.13, and that update was captured on a GPU all the same, 2026-11-25.)
_UNCAPTURABLE = ("_local_scalar_dense", "nonzero", "is_nonzero", "masked_select", "unique",
                 "_unique2", "_unique", "unique_consecutive")


def test_update_has_nothing_a_cuda_graph_cannot_capture():
    """The CPU twin of the CUDA-graph capture: a whole eager update (after the first, which
    creates the optimizer state) dispatches no op that syncs with the host. (Compiled code is
    not checked here: a dispatch mode sees no op of its fused kernels, and calling it under one
    makes dynamo give up on the step functions for the rest of the process; the compiled
    capture is tested on CUDA.)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bad = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ in _UNCAPTURABLE:
                self.bad.append(str(func))
            return func(*args, **(kwargs or {}))

    learner = DreamerV3Learner(*_agent(obs={"pixels": "packed2"}, action_dim=4),
                               DreamerV3LossConfig().with_(horizon=3))
    batch = _packed2_batch()
    learner.update(batch)
    with Recorder() as rec:
        learner.update(batch)
    assert rec.bad == []


@requires_cuda
@pytest.mark.parametrize("compile", [None, "reduce-overhead"])
def test_capture_on_cuda_replays_one_graph_like_the_eager_learner(compile):
    """capture=True on CUDA: CAPTURE_WARMUP eager updates, then the whole update is one CUDA
    graph whose replays (seeded like the eager learner's updates) give the eager learner's
    metrics and parameters; a replay launches one graph and only a few loose kernels (batch
    staging, the slow critic's EMA)."""
    from torch.profiler import ProfilerActivity, profile

    cfg = DreamerV3LossConfig().with_(horizon=3)
    agent = [m.cuda() for m in _agent(obs={"pixels": "packed2"}, action_dim=4)]
    plain = DreamerV3Learner(*[m.cuda() for m in _agent(obs={"pixels": "packed2"},
                                                          action_dim=4)], cfg)
    captured = DreamerV3Learner(*agent, cfg, capture=True, compile=compile)
    assert captured.compile_mode == (None if compile is None else "default")
    for seed in range(CAPTURE_WARMUP + 3):
        torch.manual_seed(seed)
        want = plain.update(_packed2_batch(seed=seed).cuda())
        torch.manual_seed(seed)
        got = captured.update(_packed2_batch(seed=seed).cuda())
        assert (captured._graph is not None) == (seed >= CAPTURE_WARMUP)
        for key in want.keys():
            torch.testing.assert_close(got[key], want[key], rtol=1e-3, atol=1e-4, msg=key)
    for a, b in zip(captured.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
    batch = _packed2_batch(seed=9).cuda()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        captured.update(batch)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert names.count("cudaGraphLaunch") == 1, sorted(set(names))
    assert sum(n.startswith("cudaLaunchKernel") for n in names) < 40
    # a loaded optimizer state replaces the tensors the graph reads: it is captured again
    captured.wm_opt.load_state_dict(captured.wm_opt.state_dict())
    assert captured._graph is None


def test_compiled_learner_updates_like_the_eager_one():
    """``compile="default"`` on a CPU: the fused scan and rollout run their compiled steps (same
    uniforms, so the same samples), and three updates end where the eager learner's end."""
    cfg = DreamerV3LossConfig().with_(horizon=3)
    plain = DreamerV3Learner(*_agent(), cfg)
    compiled = DreamerV3Learner(*_agent(), cfg, compile="default")
    rssm = compiled.world_model.rssm
    assert rssm._compiled_scan_steps is not None and rssm._compiled_rollout_step is not None
    _assert_same_updates(compiled, plain, rtol=1e-4, atol=1e-5)


def test_compile_and_capture_fallbacks_are_one_warning_or_strict_errors():
    cfg = DreamerV3LossConfig().with_(horizon=3)
    with pytest.raises(RuntimeError, match="strict=True"):
        DreamerV3Learner(*_agent(), cfg, capture=True, strict=True)
    with pytest.raises(RuntimeError, match="CUDA device"):
        DreamerV3Learner(*_agent(), cfg, compile="reduce-overhead", strict=True)
    with pytest.warns(RuntimeWarning, match="mode='default' instead") as record:
        learner = DreamerV3Learner(*_agent(), cfg, compile="reduce-overhead")
    # (torch's own import-time DeprecationWarnings of torch._dynamo are not ours)
    assert len([r for r in record if r.category is RuntimeWarning]) == 1
    assert learner.compile_mode == "default"
    assert learner.world_model.rssm._compiled_observe is not None  # compiled lazily
    with pytest.raises(ValueError, match="compile must be None or one of"):
        DreamerV3Learner(*_agent(), cfg, compile="fast")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # usable requests: no warning at all
        assert resolve_acceleration("cpu", "default", False, strict=True) == ("default", False)
        assert resolve_acceleration("cpu", None, False, strict=True) == (None, False)


def test_fused_adam_and_one_actor_critic_backward_keep_the_sequential_semantics():
    """The update equals the reference order: world-model step, then actor and critic losses
    on the updated world model, each clipped and stepped with its own Adam."""
    cfg = DreamerV3LossConfig().with_(horizon=3)
    wm, actor, critic = _agent()
    learner = DreamerV3Learner(wm, actor, critic, cfg)
    wm2, actor2, critic2 = _agent()
    ref = DreamerV3Learner(wm2, actor2, critic2, cfg)
    batch = _batch()
    torch.manual_seed(5)
    learner.update(batch)
    torch.manual_seed(5)
    ref.critic_loss.update_slow_critic()
    wm_out = ref.world_model_loss(batch)
    ref.wm_opt.zero_grad()
    total_loss(wm_out).backward()
    torch.nn.utils.clip_grad_norm_(wm2.parameters(), ref.optim.wm_clip)
    ref.wm_opt.step()
    actor_out = ref.actor_loss(wm_out["posterior"])
    ref.actor_opt.zero_grad()
    actor_out["loss_actor"].backward()
    torch.nn.utils.clip_grad_norm_(actor2.parameters(), ref.optim.actor_clip)
    ref.actor_opt.step()
    critic_out = ref.critic_loss(actor_out["imagination"])
    ref.critic_opt.zero_grad()
    critic_out["loss_critic"].backward()
    torch.nn.utils.clip_grad_norm_(critic2.parameters(), ref.optim.critic_clip)
    ref.critic_opt.step()
    for a, b in zip(learner.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b)
    assert all(o.param_groups[0]["fused"] for o in learner.optimizers().values())
