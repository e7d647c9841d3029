"""The fused posterior scan (modules/rssm_scan.py) against autograd through the eager scan."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchrl_dreamer.modules.rssm import RSSM

T, B, E, A = 7, 3, 8, 3


def _rssm(dtype=torch.float64, seed=0) -> RSSM:
    torch.manual_seed(seed)
    rssm = RSSM(action_dim=A, embed_dim=E, deter=16, hidden=12, stoch=4, classes=5)
    # non-trivial norm affine parameters, so their gradients and uses are exercised
    with torch.no_grad():
        for name, p in rssm.named_parameters():
            if "norm" in name or name.endswith("1.weight") or name.endswith("1.bias"):
                p.add_(0.3 * torch.randn_like(p))
    return rssm.to(dtype)


def _run(rssm, fused, embed, act, is_first, state=None, seed=1):
    """Outputs and every gradient of a loss touching all four outputs."""
    rssm.fused_scan = fused
    rssm.zero_grad(set_to_none=True)
    leaves = [t for t in (embed, act, *(state or ())) if t.requires_grad]
    for t in leaves:
        t.grad = None
    g = torch.Generator().manual_seed(99)
    weights = {k: torch.randn(s, generator=g, dtype=embed.dtype) for k, s in
               (("h", (T, B, 16)), ("z", (T, B, 20)), ("post_logits", (T, B, 4, 5)),
                ("prior_logits", (T, B, 4, 5)))}
    torch.manual_seed(seed)
    out = rssm.observe(embed, act, is_first, state=state)
    loss = sum((out[k] * w).sum() for k, w in weights.items())
    loss = loss + (out["post_logits"].exp() * weights["post_logits"]).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in rssm.named_parameters() if p.grad is not None}
    grads.update({f"input{i}": t.grad.clone() for i, t in enumerate(leaves)})
    return {k: v.detach() for k, v in out.items()}, grads


@pytest.mark.parametrize("with_state", [False, True])
def test_fused_scan_matches_autograd_through_the_eager_scan(with_state):
    rssm = _rssm()
    embed = torch.randn(T, B, E, dtype=torch.float64, requires_grad=True)
    act = torch.randn(T, B, A, dtype=torch.float64, requires_grad=True)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0, 0] = is_first[3, 1] = is_first[5, :] = True
    state = None
    if with_state:
        state = (torch.randn(B, 16, dtype=torch.float64, requires_grad=True),
                 torch.randn(B, 20, dtype=torch.float64, requires_grad=True))
    out_e, grads_e = _run(rssm, False, embed, act, is_first, state)
    out_f, grads_f = _run(rssm, True, embed, act, is_first, state)
    for k in out_e:
        torch.testing.assert_close(out_f[k], out_e[k], rtol=1e-12, atol=1e-12, msg=k)
    assert grads_f.keys() == grads_e.keys()
    assert len(grads_e) == len(list(rssm.parameters())) + 2 + 2 * with_state  # all, inputs, state
    for k in grads_e:
        assert grads_e[k].abs().max() > 0, k
        torch.testing.assert_close(grads_f[k], grads_e[k], rtol=1e-9, atol=1e-10, msg=k)


def test_fused_scan_same_samples_as_eager_in_fp32_and_without_grad():
    rssm = _rssm(torch.float32)
    embed, act = torch.randn(T, B, E), torch.randn(T, B, A)
    is_first = torch.rand(T, B, generator=torch.Generator().manual_seed(3)) < 0.3
    outs = []
    for fused in (False, True):
        rssm.fused_scan = fused
        torch.manual_seed(5)
        with torch.no_grad():
            outs.append(rssm.observe(embed, act, is_first))
    assert torch.equal(outs[0]["z"], outs[1]["z"])  # same uniform draws, same one-hots
    torch.testing.assert_close(outs[1]["h"], outs[0]["h"])
    torch.testing.assert_close(outs[1]["post_logits"], outs[0]["post_logits"])


def test_fused_scan_is_skipped_under_autocast_and_when_disabled():
    rssm = _rssm(torch.float32)
    h = torch.zeros(B, 16)
    assert rssm.uses_fused_scan(h)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not rssm.uses_fused_scan(h)
    assert not rssm.uses_fused_scan(h.bfloat16())
    rssm.fused_scan = False
    assert not rssm.uses_fused_scan(h)


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def test_fused_scan_backward_dispatches_far_fewer_ops():
    """The point of the fused scan: no per-step weight-gradient accumulation in the backward."""
    rssm = _rssm(torch.float32)
    embed = torch.randn(T, B, E, requires_grad=True)
    act = torch.randn(T, B, A)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    counts = {}
    for fused in (False, True):
        rssm.fused_scan = fused
        out = rssm.observe(embed, act, is_first)
        loss = out["h"].sum() + out["z"].sum() + out["post_logits"].sum()
        with _Count() as c:
            loss.backward()
        counts[fused] = c.n
    # eager: one gradient add per weight per step; fused: per-step state gradients only
    assert counts[True]["aten.add"] < counts[False]["aten.add"] / 3
    assert sum(counts[True].values()) < 0.7 * sum(counts[False].values())


def test_fused_scan_steps_aside_for_overridden_step_pieces():
    """A research variant that overrides the sampler (or the step) keeps getting it called:
    a subclass runs the generic per-step path unless it sets ``fused_steps = True``; an
    instance patched by hand says so with its own ``fused_steps = False``."""
    rssm = _rssm(torch.float32)
    h = torch.zeros(B, 16)
    assert RSSM.fused_steps and rssm.uses_fused_scan(h)  # the base class: the fused scan
    rssm.sample_probs = lambda p: p.flatten(-2)  # e.g. no sampling at all
    rssm.fused_steps = False
    assert not rssm.uses_fused_scan(h)

    class SameMaths(RSSM):
        fused_steps = True

    assert SameMaths(action_dim=A, embed_dim=E, deter=16, hidden=12, stoch=4,
                     classes=5).uses_fused_scan(h)

    class Variant(RSSM):
        def _cell(self, x_pre, h, w):
            return super()._cell(x_pre, h, w) * 0.5

    variant = Variant(action_dim=A, embed_dim=E, deter=16, hidden=12, stoch=4, classes=5)
    assert not variant.uses_fused_scan(h)
    out = variant.observe(torch.randn(T, B, E), torch.randn(T, B, A),
                          torch.zeros(T, B, dtype=torch.bool))
    assert out["h"].abs().max() <= 0.5  # the overridden cell ran: |h| = |lerp| / 2 <= 0.5


def _counting(fn, calls, key):
    def wrapped(*args):
        calls[key] += 1
        return fn(*args)

    return wrapped


def test_compiled_scan_steps_match_the_eager_fused_scan():
    """``compile_steps``: the fused scan keeps its hand-written backward and runs its forward and
    backward steps compiled (inductor, no graph break): same samples, outputs and gradients."""
    rssm = _rssm()
    embed = torch.randn(T, B, E, dtype=torch.float64, requires_grad=True)
    act = torch.randn(T, B, A, dtype=torch.float64, requires_grad=True)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0, 0] = is_first[3, 1] = True
    out_e, grads_e = _run(rssm, True, embed, act, is_first)
    rssm.compile_steps("default", fullgraph=True)
    calls = collections.Counter()
    forward, backward = rssm._compiled_scan_steps
    rssm._compiled_scan_steps = (_counting(forward, calls, "forward"),
                                 _counting(backward, calls, "backward"))
    assert rssm.uses_fused_scan(torch.zeros(B, 16, dtype=torch.float64))
    out_c, grads_c = _run(rssm, True, embed, act, is_first)
    assert calls == {"forward": T, "backward": T}  # every step ran compiled
    assert torch.equal(out_c["z"], out_e["z"])  # the same uniforms: the same one-hots
    for k in out_e:
        torch.testing.assert_close(out_c[k], out_e[k], rtol=1e-9, atol=1e-10, msg=k)
    assert grads_c.keys() == grads_e.keys()
    for k in grads_e:
        torch.testing.assert_close(grads_c[k], grads_e[k], rtol=1e-7, atol=1e-9, msg=k)
    assert rssm.compile_steps(None)._compiled_scan_steps is None


@pytest.mark.parametrize("mode,step_mode", [("default", "default"),
                                            ("reduce-overhead", "default"),
                                            ("max-autotune", "max-autotune-no-cudagraphs")])
def test_compiled_steps_never_use_cuda_graphs(monkeypatch, mode, step_mode):
    """A step's outputs outlive its next call, which a replayed CUDA graph would overwrite."""
    seen = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: seen.append(kw["mode"]) or fn)
    _rssm(torch.float32).compile_steps(mode)
    assert seen == [step_mode] * 5
