"""The RSSM's ``kernel`` choice: ``"auto"``, ``"eager"`` and ``"fused"`` step implementations."""

from __future__ import annotations

import collections

import pytest
import torch

import torchrl_dreamer.modules.rssm as rssm_module
import torchrl_dreamer.objectives.actor as actor_module
from torchrl_dreamer.modules import RSSM, DreamerV3Actor, make_dreamer
from torchrl_dreamer.modules.rssm import KERNELS, uses_fused_imagine

T, B, E, A = 7, 3, 8, 3
SIZES = dict(action_dim=A, embed_dim=E, deter=16, hidden=12, stoch=4, classes=5)


class HalfCell(RSSM):  # different step maths: a subclass without ``fused_steps = True``
    def _cell(self, x_pre, h, w):
        return super()._cell(x_pre, h, w) * 0.5


class SameMaths(RSSM):
    fused_steps = True


def _rssm(kernel: str, dtype=torch.float64, cls=RSSM) -> RSSM:
    """The same weights for every kernel (seeded), with non-trivial norm parameters."""
    torch.manual_seed(0)
    rssm = cls(**SIZES, kernel=kernel)
    with torch.no_grad():
        for name, p in rssm.named_parameters():
            if "norm" in name or name.endswith("1.weight") or name.endswith("1.bias"):
                p.add_(0.3 * torch.randn_like(p))
    return rssm.to(dtype)


def _inputs(dtype=torch.float64):
    g = torch.Generator().manual_seed(2)
    embed = torch.randn(T, B, E, generator=g, dtype=dtype)
    act = torch.randn(T, B, A, generator=g, dtype=dtype)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0, 0] = is_first[3, 1] = is_first[5, :] = True
    return embed, act, is_first


def _count_fused_scans(monkeypatch) -> collections.Counter:
    calls = collections.Counter()
    fused = rssm_module.fused_observe_scan

    def counted(*args):
        calls["fused"] += 1
        return fused(*args)

    monkeypatch.setattr(rssm_module, "fused_observe_scan", counted)
    return calls


def _observe_with_grads(rssm, embed, act, is_first):
    """Outputs and every parameter and input gradient of a loss on all four outputs."""
    embed = embed.clone().requires_grad_()
    act = act.clone().requires_grad_()
    g = torch.Generator().manual_seed(99)
    torch.manual_seed(1)
    out = rssm.observe(embed, act, is_first)
    loss = sum((v * torch.randn(v.shape, generator=g, dtype=v.dtype)).sum() for v in out.values())
    loss.backward()
    grads = {n: p.grad for n, p in rssm.named_parameters()}
    grads.update(embed=embed.grad, act=act.grad)
    return {k: v.detach() for k, v in out.items()}, grads


def test_eager_and_fused_kernels_give_the_same_posterior_and_prior(monkeypatch):
    calls = _count_fused_scans(monkeypatch)
    embed, act, is_first = _inputs()
    eager, fused = _rssm("eager"), _rssm("fused")
    out_e, grads_e = _observe_with_grads(eager, embed, act, is_first)
    assert calls["fused"] == 0  # eager: the step-by-step scan under autograd
    out_f, grads_f = _observe_with_grads(fused, embed, act, is_first)
    assert calls["fused"] == 1
    assert out_e.keys() == {"h", "z", "post_logits", "prior_logits"}
    for k in out_e:
        torch.testing.assert_close(out_f[k], out_e[k], rtol=1e-12, atol=1e-12, msg=k)
    assert grads_f.keys() == grads_e.keys()
    for k in grads_e:
        assert grads_e[k].abs().max() > 0, k
        torch.testing.assert_close(grads_f[k], grads_e[k], rtol=1e-9, atol=1e-10, msg=k)


def test_eager_and_fused_kernels_sample_the_same_latents_in_fp32():
    embed, act, is_first = _inputs(torch.float32)
    outs = {}
    for kernel in ("eager", "fused"):
        rssm = _rssm(kernel, torch.float32)
        torch.manual_seed(5)
        with torch.no_grad():
            outs[kernel] = rssm.observe(embed, act, is_first)
    assert torch.equal(outs["eager"]["z"], outs["fused"]["z"])
    for k in ("h", "post_logits", "prior_logits"):
        torch.testing.assert_close(outs["fused"][k], outs["eager"][k], msg=k)


def test_eager_and_fused_kernels_imagine_the_same_trajectory(monkeypatch):
    from torchrl_dreamer.objectives import DreamerV3ActorLoss

    calls = collections.Counter()
    fused_imagine = actor_module.fused_imagine
    monkeypatch.setattr(actor_module, "fused_imagine",
                        lambda *a: calls.update(["fused"]) or fused_imagine(*a))
    torch.manual_seed(0)
    parts = {k: make_dreamer("tiny", {"obs": ("vector", 6)}, 4, kernel=k)
             for k in ("eager", "fused")}
    for k, (wm, _, _) in parts.items():
        assert wm.rssm.kernel == k  # make_dreamer passes it through
    for src, dst in zip(parts["eager"], parts["fused"]):
        dst.load_state_dict(src.state_dict())
    h, z = parts["eager"][0].rssm.initial_state((5,))
    got = {}
    for k, (wm, actor, critic) in parts.items():
        before = calls["fused"]
        torch.manual_seed(1)
        got[k] = DreamerV3ActorLoss(wm, actor, critic).imagine(h, z)
        assert calls["fused"] - before == (k == "fused")
    assert torch.equal(got["fused"][0], got["eager"][0])  # latents
    assert torch.equal(got["fused"][1], got["eager"][1])  # sampled actions
    torch.testing.assert_close(got["fused"][2], got["eager"][2])  # the actor's log-probs


def test_auto_picks_what_it_picked_before_the_kernel_choice(monkeypatch):
    calls = _count_fused_scans(monkeypatch)
    rssm = _rssm("auto", torch.float32)
    assert rssm.kernel == "auto" and RSSM(**SIZES).kernel == "auto"  # the default
    h = torch.zeros(B, 16)
    assert rssm.uses_fused_scan(h)  # the fused scan where it applies
    assert not rssm.uses_fused_scan(h.bfloat16())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not rssm.uses_fused_scan(h)
    assert not HalfCell(**SIZES).uses_fused_scan(h)  # silently the generic path
    assert SameMaths(**SIZES).uses_fused_scan(h)
    rssm.observe(*_inputs(torch.float32))
    assert calls["fused"] == 1
    HalfCell(**SIZES).observe(*_inputs(torch.float32))
    assert calls["fused"] == 1
    actor = DreamerV3Actor(rssm.latent_dim, A, units=8, layers=1)
    assert not uses_fused_imagine(rssm, actor, h)  # a graph is being recorded
    with torch.no_grad():
        assert uses_fused_imagine(rssm, actor, h)
        assert not uses_fused_imagine(HalfCell(**SIZES), actor, h)
        rssm.fused_steps = False  # an instance patched by hand: the generic paths
        assert not rssm.uses_fused_scan(h) and not uses_fused_imagine(rssm, actor, h)


def test_eager_kernel_never_takes_the_fused_paths():
    rssm = _rssm("eager", torch.float32)
    h = torch.zeros(B, 16)
    actor = DreamerV3Actor(rssm.latent_dim, A, units=8, layers=1)
    assert not rssm.uses_fused_scan(h)
    with torch.no_grad():
        assert not uses_fused_imagine(rssm, actor, h)
    assert not SameMaths(**SIZES, kernel="eager").uses_fused_scan(h)
    HalfCell(**SIZES, kernel="eager")  # any class may run the generic paths


def test_fused_kernel_refuses_a_subclass_whose_step_maths_differs():
    with pytest.raises(ValueError, match=r"HalfCell\(kernel='fused'\) is invalid") as err:
        HalfCell(**SIZES, kernel="fused")
    message = str(err.value)
    assert "fused_steps = False" in message
    assert "fused_steps = True in its class body" in message  # what to do
    assert "kernel='auto'" in message and "kernel='eager'" in message
    assert HalfCell(**SIZES).kernel == "auto"  # the other kernels build it
    assert SameMaths(**SIZES, kernel="fused").uses_fused_scan(torch.zeros(B, 16))


def test_fused_kernel_refuses_at_a_call_once_the_step_maths_changed():
    rssm = _rssm("fused", torch.float32)
    h = torch.zeros(B, 16)
    actor = DreamerV3Actor(rssm.latent_dim, A, units=8, layers=1)
    rssm.fused_steps = False
    with pytest.raises(ValueError, match="cannot run its fused paths.*posterior head"):
        rssm.observe(*_inputs(torch.float32))
    with torch.no_grad(), pytest.raises(ValueError, match="cannot run its fused paths.*prior"):
        uses_fused_imagine(rssm, actor, h)
    del rssm.fused_steps
    assert rssm.uses_fused_scan(h)
    rssm.gru = torch.nn.GRUCell(12, 16)  # a swapped step module
    with pytest.raises(ValueError, match="kernel='eager'"):
        rssm.uses_fused_scan(h)


def test_fused_kernel_runs_the_generic_path_where_only_the_call_rules_out_the_fused_one():
    """Precision, autocast and the actor are the call's, not the model's: no error there."""
    rssm = _rssm("fused", torch.float32)
    h = torch.zeros(B, 16)
    assert not rssm.uses_fused_scan(h.bfloat16())
    continuous = DreamerV3Actor(rssm.latent_dim, A, units=8, discrete=False)
    with torch.no_grad():
        assert not uses_fused_imagine(rssm, continuous, h)
    actor = DreamerV3Actor(rssm.latent_dim, A, units=8, layers=1)
    assert not uses_fused_imagine(rssm, actor, h)  # a graph is being recorded


@pytest.mark.parametrize("build", [
    lambda: RSSM(**SIZES, kernel="fast"),
    lambda: make_dreamer("tiny", {"obs": ("vector", 3)}, 2, kernel="Eager"),
])
def test_an_unknown_kernel_lists_the_choices(build):
    with pytest.raises(ValueError, match="is invalid: choose one of 'auto', 'eager', 'fused'"):
        build()
    assert KERNELS == ("auto", "eager", "fused")


def test_kernel_is_read_only_and_the_older_fused_scan_flag_follows_it():
    rssm = _rssm("auto", torch.float32)
    with pytest.raises(AttributeError):
        rssm.kernel = "eager"
    assert rssm.fused_scan
    rssm.fused_scan = False  # what code wrote before the kernel choice
    assert rssm.kernel == "eager" and not rssm.fused_scan
    assert not rssm.uses_fused_scan(torch.zeros(B, 16))
    rssm.fused_scan = True
    assert rssm.kernel == "auto" and rssm.fused_scan
    fused = _rssm("fused", torch.float32)
    fused.fused_scan = True  # already fused: stays so
    assert fused.kernel == "fused"
    assert not _rssm("eager", torch.float32).fused_scan
    assert "fused_scan" not in rssm.state_dict() and "_kernel" not in rssm.state_dict()
