"""Tests of torchrl_dreamer.modules: golden numbers, shapes, presets, RSSM resets, player."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from tensordict import TensorDict

from torchrl_dreamer.emulator.packed2 import gather_packed2, packed2_normalized_lut
from torchrl_dreamer.modules import (
    PRESETS,
    RSSM,
    DreamerPlayer,
    ImageDecoder,
    ImageEncoder,
    LayerNormGRUCell,
    Packed2Encoder,
    make_dreamer,
    symexp,
    symlog,
    symlog_bins,
    two_hot_log_prob,
    two_hot_mean,
    two_hot_weights,
    unimix_logits,
)
from torchrl_dreamer.modules.functional import (
    categorical_kl,
    discount_weights,
    lambda_returns,
    sample_categorical,
    straight_through_mode,
)
from torchrl_dreamer.modules.init import hafner_init_

G = 1.0 - 1.0 / 333.0


def _n(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


# ---------------------------------------------------------------- functional goldens
def test_symlog_symexp_golden():
    x = torch.tensor([0.5, 1.0, 10.0, 1000.0], dtype=torch.float64)
    want = torch.tensor([0.405465, 0.693147, 2.397895, 6.908755], dtype=torch.float64)
    torch.testing.assert_close(symlog(x), want, atol=1e-6, rtol=0)
    torch.testing.assert_close(symlog(-x), -want, atol=1e-6, rtol=0)
    y = torch.linspace(-1e4, 1e4, 1001, dtype=torch.float64)
    assert (symexp(symlog(y)) - y).abs().max() < 1e-9
    assert math.isclose(
        float(symexp(torch.tensor(20.0, dtype=torch.float64))), 4.8517e8, rel_tol=1e-4
    )


def test_two_hot_bins_and_weights_golden():
    bins = symlog_bins()
    assert bins.shape == (255,)
    assert math.isclose(float(bins[1] - bins[0]), 0.15748031, rel_tol=1e-6)
    assert abs(float(bins[127])) < 1e-6
    cases = {
        1.0: {131: 0.598515, 132: 0.401485},
        -1.0: {122: 0.401485, 123: 0.598515},
        5.0: {138: 0.622327, 139: 0.377673},
        100.0: {156: 0.693985, 157: 0.306015},
        0.0: {127: 1.0},
        1e10: {254: 1.0},
    }
    for x, want in cases.items():
        w = two_hot_weights(torch.tensor([x]), bins)[0]
        assert math.isclose(float(w.sum()), 1.0, abs_tol=1e-6)
        for i, v in want.items():
            assert abs(float(w[i]) - v) < 1e-5, (x, i, float(w[i]), v)
        assert float(w.sum() - sum(w[i] for i in want)) < 1e-5  # no mass elsewhere


def test_two_hot_log_prob_matches_dense_and_ln255():
    bins = symlog_bins()
    x = torch.tensor([1.0, -3.0, 250.0, 0.0, 1e10])
    logits = torch.randn(5, 255)
    dense = (two_hot_weights(x, bins) * logits.log_softmax(-1)).sum(-1)
    torch.testing.assert_close(two_hot_log_prob(logits, x, bins), dense)
    ce = -two_hot_log_prob(torch.zeros(5, 255), x, bins)
    torch.testing.assert_close(ce, torch.full((5,), math.log(255)))
    assert abs(math.log(255) - 5.541264) < 1e-6
    assert abs(float(two_hot_mean(torch.zeros(255), bins))) < 1e-6


def test_lambda_returns_golden():
    r = torch.tensor([0.5, 1.0, -1.0], dtype=torch.float64)
    v = torch.tensor([2.0, 3.0, 4.0], dtype=torch.float64)
    one = torch.ones(3, dtype=torch.float64)

    def check(c, lmbda, want):
        got = lambda_returns(r, v, c * G, lmbda)
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), atol=1e-6, rtol=0)

    check(one, 0.95, [4.368980, 3.979614, 2.987988])
    check(torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64), 0.95, [1.546847, 1.0, 2.987988])
    check(one, 1.0, [4.467066, 3.979015, 2.987988])
    check(one, 0.0, [2.493994, 3.990991, 2.987988])
    long = lambda_returns(torch.ones(15), torch.zeros(15), torch.full((15,), G))
    assert abs(float(long[0]) - 10.541431) < 1e-4 and abs(float(long[14]) - 1.0) < 1e-6
    with pytest.raises(ValueError, match="same time-major shape"):
        lambda_returns(r, v[:2], one)


def test_discount_weights_golden():
    w = discount_weights(torch.ones(16, dtype=torch.float64), G)
    torch.testing.assert_close(
        w[:4],
        torch.tensor([1, 0.996997, 0.994003, 0.991018], dtype=torch.float64),
        atol=1e-6,
        rtol=0,
    )
    assert abs(float(w[15]) - 0.955890) < 1e-6
    assert abs(float(w[:15].mean()) - 0.979250) < 1e-6


def test_unimix_kl_and_misc_golden():
    p = unimix_logits(torch.tensor([10.0, 0.0, 0.0, 0.0]), 0.01).exp()
    torch.testing.assert_close(
        p, torch.tensor([0.992365, 0.002545, 0.002545, 0.002545]), atol=1e-6, rtol=0
    )
    uniform = unimix_logits(torch.zeros(32, 32), 0.01)
    assert float(categorical_kl(uniform, uniform)) == 0.0
    peaked = torch.zeros(32, 32)
    peaked[:, 0] = 5.0
    kl = categorical_kl(unimix_logits(peaked, 0.01), uniform)
    assert abs(float(kl) - 75.921196) < 1e-3
    ent = -(uniform.exp() * uniform).sum()
    assert abs(float(ent) - 110.9035) < 1e-3
    cell = LayerNormGRUCell(8, 16)
    with torch.no_grad():
        cell.linear.weight.zero_()
    h = torch.randn(3, 16)
    # zero pre-activations: update gate sigmoid(-1), candidate tanh(0.5 * 0) = 0
    out = cell(torch.zeros(3, 8), h)
    torch.testing.assert_close(out, (1 - torch.sigmoid(torch.tensor(-1.0))) * h)
    assert abs(float(torch.sigmoid(torch.tensor(-1.0))) - 0.268941) < 1e-6


def test_hafner_init_std():
    torch.manual_seed(0)
    lin = hafner_init_(torch.nn.Linear(512, 512))
    from torchrl_dreamer.modules.init import _TRUNC_STD, fan_avg

    assert abs(math.sqrt(1 / fan_avg(lin.weight)) / _TRUNC_STD - 0.050242) < 1e-5
    w = lin.weight
    assert w.abs().max() <= 2 * 0.050242 + 1e-6
    # truncated at 2 sigma: std of the samples is 0.8796 * sigma
    assert abs(float(w.detach().std()) - 0.8796 * 0.050242) < 1e-3
    assert float(lin.bias.abs().sum()) == 0.0


def test_sample_categorical_frequencies():
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.6, 0.3]).expand(20000, 3)
    idx = sample_categorical(probs)
    freq = torch.bincount(idx, minlength=3).float() / idx.numel()
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.6, 0.3]), atol=0.02, rtol=0)


# ---------------------------------------------------------------- encoders / decoders
def test_packed2_unpack_layout():
    lut = packed2_normalized_lut()
    # byte 0b11_10_01_00: pixel k is (b >> 2k) & 3 -> shades 0, 1, 2, 3 left to right
    x = torch.tensor([[[[0b11100100, 0b00000011]]]], dtype=torch.uint8)
    got = gather_packed2(x, lut).flatten()
    want = torch.tensor([0, 1, 2, 3, 3, 0, 0, 0]) / 3.0 - 0.5
    torch.testing.assert_close(got, want)
    with pytest.raises(TypeError, match="uint8"):
        gather_packed2(x.float(), lut)


@pytest.mark.parametrize("stem", ["conv", "space_to_depth"])
def test_packed2_encoder_and_decoder_shapes(stem):
    enc = Packed2Encoder(mult=4, stem=stem)
    x = torch.randint(0, 256, (3, 2, 1, 72, 20), dtype=torch.uint8)
    pre = enc.preprocess(x)
    assert pre.shape == (3, 2, 1, 72, 80) and pre.min() >= -0.5 and pre.max() <= 0.5
    assert enc(pre).shape == (3, 2, enc.out_features) and enc.out_features == 32 * 4 * 5
    dec = ImageDecoder(24, (1, 72, 80), mult=4, stem=stem)
    assert dec(torch.randn(3, 2, 24)).shape == (3, 2, 1, 72, 80)
    with pytest.raises(ValueError, match="packed2 observations"):
        enc.preprocess(torch.zeros(2, 1, 72, 80, dtype=torch.uint8))


def test_image_encoder_decoder_generic_sizes():
    enc = ImageEncoder((3, 64, 64), mult=2)
    assert enc(enc.preprocess(torch.zeros(5, 3, 64, 64, dtype=torch.uint8))).shape == (
        5,
        2 * 8 * 16,
    )
    assert torch.equal(
        enc.preprocess(torch.full((1, 3, 64, 64), 255, dtype=torch.uint8)),
        torch.full((1, 3, 64, 64), 0.5),
    )
    for shape in [(1, 72, 80), (3, 64, 64), (2, 50, 34)]:
        dec = ImageDecoder(8, shape, mult=2)
        assert dec(torch.zeros(2, 8)).shape == (2, *shape)
    with pytest.raises(ValueError, match="even H and W"):
        ImageEncoder((1, 71, 80), stem="space_to_depth")


# ---------------------------------------------------------------- presets
@pytest.mark.parametrize(
    "name,total,world",
    [("XS", 8.27e6, 7.54e6), ("S", 17.94e6, None), ("M", 36.91e6, None), ("L", 76.77e6, None)],
)
def test_preset_param_counts_match_reference(name, total, world):
    with torch.device("meta"):
        wm, actor, critic = make_dreamer(name, {"image": ("image", (3, 64, 64))}, action_dim=18)
    n = _n(wm) + _n(actor) + _n(critic)
    assert abs(n - total) / total < 0.01, (name, n)
    if world is not None:
        assert abs(_n(wm) - world) / world < 0.01


def test_preset_xl_param_count():
    cfg = PRESETS["XL"]
    assert (cfg.deter, cfg.hidden, cfg.mlp_layers, cfg.cnn_mult) == (4096, 1024, 5, 96)
    with torch.device("meta"):
        parts = make_dreamer("XL", {"image": ("image", (3, 64, 64))}, action_dim=18)
    assert abs(sum(_n(m) for m in parts) - 200.75e6) / 200.75e6 < 0.01


def test_make_dreamer_errors():
    with pytest.raises(KeyError, match="unknown preset"):
        make_dreamer("XXL", {"o": ("vector", 3)}, 2)
    with pytest.raises(ValueError, match="ac_hidden and ac_layers must be >= 1"):
        make_dreamer(PRESETS["tiny"].with_(ac_layers=0), {"o": ("vector", 3)}, 2)
    with pytest.raises(ValueError, match="unknown observation kind"):
        make_dreamer("tiny", {"o": "rgb"}, 2)


def test_actor_critic_sizes_apart_from_world_model():
    """``ac_hidden``/``ac_layers`` size the actor and critic only; the heads keep ``hidden``."""
    cfg = PRESETS["tiny"].with_(ac_hidden=48, ac_layers=3)
    wm, actor, critic = make_dreamer(cfg, {"o": ("vector", 3)}, 5)
    for net in (actor, critic):
        linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
        assert [m.out_features for m in linears[:-1]] == [48, 48, 48]
        assert linears[0].in_features == wm.latent_dim
    assert actor(torch.zeros(2, wm.latent_dim)).shape[-1] == 5
    reward_linears = [m for m in wm.reward.modules() if isinstance(m, torch.nn.Linear)]
    assert reward_linears[0].out_features == cfg.hidden and len(reward_linears) == 2
    # None (the default) keeps DreamerV3's shared sizes
    _, actor0, _ = make_dreamer("tiny", {"o": ("vector", 3)}, 5)
    lin0 = [m for m in actor0.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in lin0[:-1]] == [PRESETS["tiny"].hidden]


def test_reward_and_critic_zero_at_init():
    wm, actor, critic = make_dreamer("tiny", {"pixels": "packed2"}, action_dim=8)
    lat = torch.randn(7, wm.latent_dim)
    assert torch.equal(wm.reward.mean(wm.reward(lat)), torch.zeros(7))
    assert torch.equal(critic.mean(critic(lat)), torch.zeros(7))
    assert float(wm.cont(lat).abs().sum()) > 0  # continue head is not zero-initialised


# ---------------------------------------------------------------- RSSM
def _small_rssm(**kw):
    torch.manual_seed(0)
    return RSSM(action_dim=3, embed_dim=6, deter=16, hidden=16, stoch=4, classes=5, **kw)


def test_rssm_initial_state_is_tanh_h0_and_prior_mode():
    rssm = _small_rssm()
    with torch.no_grad():
        rssm.h0.normal_()
    h, z = rssm.initial_state((2,))
    torch.testing.assert_close(h, torch.tanh(rssm.h0).expand(2, -1))
    mode = rssm.prior_logits(torch.tanh(rssm.h0)).argmax(-1)
    assert torch.equal(z.reshape(2, 4, 5).argmax(-1), mode.expand(2, -1))
    assert torch.equal(z.sum(-1), torch.full((2,), 4.0))


def test_rssm_is_first_mid_sequence_resets_exactly():
    rssm = _small_rssm()
    with torch.no_grad():
        rssm.h0.normal_()
    rssm.sample_probs = lambda p: straight_through_mode(p.log()).flatten(-2)  # deterministic
    rssm.fused_steps = False  # a patched step method: the eager scan, which calls it
    T, B, k = 6, 2, 3
    embed = torch.randn(T, B, 6)
    act = torch.randn(T, B, 3)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0] = True
    is_first[k, 0] = True  # env 0 starts a new episode at step k
    with torch.no_grad():
        full = rssm.observe(embed, act, is_first)
        fresh_first = torch.zeros(T - k, B, dtype=torch.bool)
        fresh_first[0] = True
        fresh = rssm.observe(embed[k:], act[k:], fresh_first)
    # env 0 from step k on equals a fresh run (action zeroed, h and z reset)
    torch.testing.assert_close(full["h"][k:, 0], fresh["h"][:, 0])
    torch.testing.assert_close(full["z"][k:, 0], fresh["z"][:, 0])
    # env 1 was not reset: it differs from a fresh start, and steps before k are untouched
    assert not torch.allclose(full["h"][k, 1], fresh["h"][0, 1])
    no_reset = is_first.clone()
    no_reset[k, 0] = False
    with torch.no_grad():
        ref = rssm.observe(embed, act, no_reset)
    torch.testing.assert_close(full["h"][:k], ref["h"][:k])
    torch.testing.assert_close(full["h"][:, 1], ref["h"][:, 1])
    assert not torch.allclose(full["h"][k, 0], ref["h"][k, 0])


def test_rssm_observe_shape_errors_and_prior_is_batched():
    rssm = _small_rssm()
    out = rssm.observe(
        torch.randn(4, 2, 6), torch.zeros(4, 2, 3), torch.ones(4, 2, dtype=torch.bool)
    )
    torch.testing.assert_close(out["prior_logits"], rssm.prior_logits(out["h"]))
    assert torch.allclose(out["post_logits"].exp().sum(-1), torch.ones(4, 2, 4))
    with pytest.raises(ValueError, match="time-major"):
        rssm.observe(torch.randn(4, 2, 6), torch.zeros(3, 2, 3), torch.ones(4, 2, dtype=torch.bool))


def test_rssm_straight_through_gradients_reach_posterior():
    rssm = _small_rssm()
    out = rssm.observe(
        torch.randn(3, 2, 6), torch.zeros(3, 2, 3), torch.ones(3, 2, dtype=torch.bool)
    )
    out["z"].pow(2).sum().backward()
    assert rssm.posterior.out.weight.grad.abs().sum() > 0


def test_gru_fp32_under_autocast():
    cell = LayerNormGRUCell(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = cell(torch.randn(2, 8, dtype=torch.bfloat16), torch.randn(2, 16))
    assert out.dtype == torch.float32


def test_rssm_float64_and_imagine_shapes():
    rssm = _small_rssm().double()
    h, z = rssm.initial_state((5,))
    assert h.dtype == torch.float64

    def policy(latent):
        return torch.zeros(latent.shape[0], 3, dtype=latent.dtype)

    lat, act = rssm.imagine(h, z, policy, horizon=4)
    assert lat.shape == (5, 5, rssm.latent_dim) and act.shape == (4, 5, 3)
    assert lat.dtype == torch.float64


def test_compile_rssm_step_and_encoder_fullgraph():
    rssm = _small_rssm()
    h, z = rssm.initial_state((4,))
    step = torch.compile(rssm.obs_step, backend="aot_eager", fullgraph=True)
    torch.manual_seed(1)
    out = step(h, z, torch.zeros(4, 3), torch.randn(4, 6), torch.zeros(4, dtype=torch.bool))
    assert out[0].shape == (4, 16) and torch.isfinite(out[0]).all()
    enc = Packed2Encoder(mult=2, stem="space_to_depth")
    cenc = torch.compile(enc, backend="aot_eager", fullgraph=True)
    x = enc.preprocess(torch.randint(0, 256, (2, 1, 72, 20), dtype=torch.uint8))
    torch.testing.assert_close(cenc(x), enc(x))
    # the decoder's sub-pixel output layer (a custom autograd function) traces whole, both ways
    dec = ImageDecoder(8, (1, 72, 80), mult=2, stem="space_to_depth")
    cdec = torch.compile(dec, backend="aot_eager", fullgraph=True)
    latent = torch.randn(2, 8, requires_grad=True)
    grads = [torch.autograd.grad(m(latent).square().sum(), latent)[0] for m in (dec, cdec)]
    torch.testing.assert_close(cdec(latent), dec(latent))
    torch.testing.assert_close(grads[1], grads[0])


def test_compile_inductor_small_head():
    wm, _, _ = make_dreamer(
        PRESETS["tiny"].with_(hidden=16, deter=16, stoch=2, classes=2), {"o": ("vector", 3)}, 2
    )
    head = torch.compile(wm.reward)
    lat = torch.randn(4, wm.latent_dim)
    torch.testing.assert_close(head(lat), wm.reward(lat))


# ---------------------------------------------------------------- player
def _player(num_envs=3, **kw):
    torch.manual_seed(0)
    wm, actor, critic = make_dreamer(
        PRESETS["tiny"].with_(deter=16, hidden=16, stoch=4, classes=4), {"obs": ("vector", 5)}, 4
    )
    return wm, actor, DreamerPlayer(wm, actor, num_envs=num_envs, **kw)


def test_player_resets_only_masked_envs():
    wm, actor, player = _player()
    td = TensorDict({"obs": torch.randn(3, 5), "is_first": torch.ones(3, dtype=torch.bool)}, [3])
    a = player(td)["action"]
    assert a.shape == (3,) and a.dtype == torch.int64
    td.set("is_first", torch.zeros(3, dtype=torch.bool))
    player(td)
    h_before = player.h.clone()
    player.init_states(torch.tensor([False, True, False]))
    h0, z0 = wm.rssm.initial_state(())
    torch.testing.assert_close(player.h[1], h0)
    torch.testing.assert_close(player.z[1], z0)
    assert float(player.prev_action[1].abs().sum()) == 0.0
    torch.testing.assert_close(player.h[[0, 2]], h_before[[0, 2]])


def test_player_matches_rssm_filter_and_load_from():
    wm, actor, player = _player(num_envs=2, greedy=True, action_format="one_hot")
    player.world_model.rssm.sample = lambda lg, gen=None: straight_through_mode(lg).flatten(-2)
    obs = torch.randn(2, 5)
    a = player.act({"obs": obs}, torch.ones(2, dtype=torch.bool))
    torch.testing.assert_close(a.sum(-1), torch.ones(2))  # one-hot up to straight-through rounding
    # same as one RSSM step from the initial state with a zero action
    h0, z0 = wm.rssm.initial_state((2,))
    with torch.no_grad():
        h = wm.rssm.recurrent(z0, torch.zeros(2, 4), h0)
    torch.testing.assert_close(player.h, h)
    # weights are copies: change the learner, then load_from syncs them
    with torch.no_grad():
        wm.rssm.h0.add_(1.0)
    assert not torch.equal(player.world_model.rssm.h0, wm.rssm.h0)
    player.load_from(wm, actor)
    assert torch.equal(player.world_model.rssm.h0, wm.rssm.h0)
    assert not player.world_model.rssm.h0.requires_grad


@pytest.mark.parametrize("discrete", [True, False])
def test_player_draws_from_its_own_generator(discrete):
    # acting must never advance the global generator: on CUDA a captured learner holds the
    # device's default generator while it captures, and an acting thread's draw then fails
    torch.manual_seed(0)
    wm, actor, _ = make_dreamer("tiny", {"obs": ("vector", 5)}, 2, discrete=discrete)
    fmt = "index" if discrete else "one_hot"
    players = []
    for _ in range(2):
        torch.manual_seed(1)
        players.append(DreamerPlayer(wm, actor, num_envs=4, action_format=fmt))
    obs = torch.randn(4, 5)
    first = torch.ones(4, dtype=torch.bool)
    before = torch.get_rng_state()
    acts = [[p.act({"obs": obs}, first if t == 0 else None) for t in range(5)] for p in players]
    assert torch.equal(torch.get_rng_state(), before)
    # seeded from the global generator at construction: the same seed acts the same
    for a, b in zip(*acts):
        assert torch.equal(a, b)
    # and the draws are random: a player seeded otherwise acts otherwise somewhere
    torch.manual_seed(2)
    other = DreamerPlayer(wm, actor, num_envs=4, action_format=fmt)
    other_acts = [other.act({"obs": obs}, first if t == 0 else None) for t in range(5)]
    assert any(not torch.equal(a, b) for a, b in zip(acts[0], other_acts))


def test_player_state_dict_carries_its_generator():
    torch.manual_seed(0)
    wm, actor, _ = make_dreamer("tiny", {"obs": ("vector", 5)}, 3)
    player = DreamerPlayer(wm, actor, num_envs=4)
    obs, first = torch.randn(4, 5), torch.ones(4, dtype=torch.bool)
    player.act({"obs": obs}, first)
    saved = copy.deepcopy(player.state_dict())
    later = [player.act({"obs": obs}) for _ in range(4)]
    torch.manual_seed(9)  # another player, another generator: loading makes it draw the same
    other = DreamerPlayer(wm, actor, num_envs=4)
    other.load_state_dict(saved)
    assert all(torch.equal(a, other.act({"obs": obs})) for a in later)
    # a state saved without the generator (older checkpoints) still loads
    old = {k: v for k, v in saved.items() if k != "_extra_state"}
    other.load_state_dict(old)


def test_player_share_and_errors():
    wm, actor, _ = _player()
    p = DreamerPlayer(wm, actor, num_envs=2, share=True)
    assert p.world_model is wm
    cont_wm, cont_actor, _ = make_dreamer("tiny", {"obs": ("vector", 5)}, 2, discrete=False)
    with pytest.raises(ValueError, match="discrete actor"):
        DreamerPlayer(cont_wm, cont_actor, 2)
    pc = DreamerPlayer(cont_wm, cont_actor, 2, action_format="one_hot")
    act = pc.act({"obs": torch.randn(2, 5)}, torch.ones(2, dtype=torch.bool))
    assert act.shape == (2, 2) and act.abs().max() <= 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(3, 2, 8, 6), (2, 1, 6, 10)])
def test_space_to_depth_matches_pixel_shuffle_layout(shape, dtype):
    from torchrl_dreamer.modules.encoders import DepthToSpace, SpaceToDepth

    # 4- and 2-byte dtypes take the pair-view copies, float64 the plain permute; an odd
    # storage offset (a view one element into a buffer) cannot be paired either
    x = torch.randn(shape).to(dtype)
    offset = torch.randn(x.numel() + 1).to(dtype)[1:].view(shape)
    for img in (x, offset, x.contiguous(memory_format=torch.channels_last)):
        y = SpaceToDepth()(img)
        assert torch.equal(y, torch.nn.functional.pixel_unshuffle(img, 2))
        assert y.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(DepthToSpace()(y), img)
        assert torch.equal(DepthToSpace()(y.contiguous()), img)
    # gradients are the inverse rearrangement
    x = x.float().requires_grad_()
    w = torch.randn(shape[0], shape[1] * 4, shape[2] // 2, shape[3] // 2)
    (SpaceToDepth()(x) * w).sum().backward()
    assert torch.equal(x.grad, torch.nn.functional.pixel_shuffle(w, 2))
    y = w.clone().requires_grad_()
    (DepthToSpace()(y) * x.detach()).sum().backward()
    assert torch.equal(y.grad, torch.nn.functional.pixel_unshuffle(x.detach(), 2))


def test_rssm_compiled_scan_bodies_match_eager_fullgraph():
    rssm = _small_rssm()
    rssm.sample_probs = lambda p: straight_through_mode(p.log()).flatten(-2)  # deterministic
    rssm.fused_steps = False  # a patched step method: the eager scan, which calls it
    embed, act = torch.randn(5, 2, 6), torch.randn(5, 2, 3)
    first = torch.zeros(5, 2, dtype=torch.bool)
    first[0] = True
    first[3, 1] = True
    ref = rssm.observe(embed, act, first)
    ref["h"].square().sum().backward()
    ref_grads = [p.grad.clone() for p in rssm.parameters()]
    rssm.zero_grad()
    # fullgraph: the bodies have no graph break (what CUDA-graph capture needs)
    rssm.compile_steps("default", backend="aot_eager", fullgraph=True)
    out = rssm.observe(embed, act, first)
    for key in ref:
        torch.testing.assert_close(out[key], ref[key])
    out["h"].square().sum().backward()
    for p, g in zip(rssm.parameters(), ref_grads):
        torch.testing.assert_close(p.grad, g)
    h, z = rssm.initial_state((4,))
    with torch.no_grad():
        lat, actions = rssm.imagine(h, z, lambda latent: torch.zeros(4, 3), horizon=3)
    assert lat.shape == (4, 4, rssm.latent_dim) and actions.shape == (3, 4, 3)
    # copies (e.g. a player's) get the eager bodies, never ones bound to this module
    assert copy.deepcopy(rssm)._compiled_observe is None
    assert rssm.compile_steps(None)._compiled_observe is None


def test_sample_categorical_is_the_inverse_cdf_of_one_uniform_each():
    probs = torch.randn(64, 16, 16).softmax(-1)
    torch.manual_seed(3)
    idx = sample_categorical(probs)
    torch.manual_seed(3)
    u = torch.rand(64, 16, 1)
    # the index is the number of CDF entries below u (clamped for rounding at the top)
    assert torch.equal(idx, (probs.cumsum(-1) < u).sum(-1).clamp(max=15))


def _decoded_both_ways(dec, latent, target, autocast=None):
    """``dec``'s outputs (fp32) and parameter gradients of a squared error, sub-pixel output
    layer first, then the ConvT of ``net``; under CPU autocast to ``autocast`` if given."""
    outs, grads = [], []
    for subpixel in (True, False):
        dec.subpixel = subpixel
        dec.zero_grad()
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            out = dec(latent)
        ((out.float() - target) ** 2).sum().backward()
        outs.append(out.detach().float())
        grads.append({k: p.grad.clone() for k, p in dec.named_parameters()})
    return outs, grads


@pytest.mark.parametrize(
    "shape,stem", [((1, 72, 80), "space_to_depth"), ((1, 72, 80), "conv"),
                   ((3, 64, 64), "space_to_depth"), ((2, 50, 34), "conv")]
)
def test_image_decoder_subpixel_output_layer_matches_the_conv_transpose(shape, stem):
    torch.manual_seed(0)
    dec = ImageDecoder(24, shape, mult=4, stem=stem)
    with torch.no_grad():  # non-zero biases and norms
        for p in dec.parameters():
            p.add_(0.1 * torch.randn_like(p))
    assert dec.subpixel
    outs, grads = _decoded_both_ways(dec, torch.randn(3, 2, 24), torch.randn(3, 2, *shape))
    assert outs[0].shape == (3, 2, *shape) and outs[0].is_contiguous()
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    for k in grads[1]:
        torch.testing.assert_close(grads[0][k], grads[1][k], rtol=1e-4, atol=1e-4, msg=k)
    # an output stage with output_padding (odd height) keeps the ConvT
    assert not ImageDecoder(8, (1, 71, 80), mult=2).subpixel


@pytest.mark.parametrize("stem", ["space_to_depth", "conv"])
def test_image_decoder_subpixel_under_bf16_autocast_matches_the_conv_transpose(stem):
    """Under autocast the sub-pixel layer computes in bf16 like the ConvT it replaces, and its
    hand-written backward returns each gradient in its parameter's dtype."""
    torch.manual_seed(0)
    dec = ImageDecoder(24, (1, 72, 80), mult=4, stem=stem)
    outs, grads = _decoded_both_ways(dec, torch.randn(3, 2, 24), torch.randn(3, 2, 1, 72, 80),
                                     autocast=torch.bfloat16)
    assert all(g.dtype == torch.float32 for g in grads[0].values())
    torch.testing.assert_close(outs[0], outs[1], rtol=2e-2, atol=2e-2)
    for k in grads[1]:
        scale = grads[1][k].abs().max().item() + 1e-6
        torch.testing.assert_close(grads[0][k] / scale, grads[1][k] / scale, rtol=0, atol=3e-2,
                                   msg=k)
