"""Tests of the graph-free imagination rollout (torchrl_dreamer.modules.rssm_imagine)."""

from __future__ import annotations

import pytest
import torch

from torchrl_dreamer.modules import RSSM, DreamerV3Actor
from torchrl_dreamer.modules.rssm import uses_fused_imagine
from torchrl_dreamer.modules.rssm_imagine import fused_imagine


def _parts(layers: int = 1, unimix: float = 0.01):
    torch.manual_seed(0)
    rssm = RSSM(action_dim=5, embed_dim=8, deter=24, hidden=16, stoch=4, classes=6, unimix=unimix)
    actor = DreamerV3Actor(rssm.latent_dim, 5, units=16, layers=layers, unimix=unimix)
    with torch.no_grad():  # non-trivial norms and biases
        for p in list(rssm.parameters()) + list(actor.parameters()):
            p.add_(0.3 * torch.randn_like(p))
    h = torch.randn(7, 24)
    z = torch.nn.functional.one_hot(torch.randint(6, (7, 4)), 6).float().flatten(-2)
    return rssm, actor, h, z


@pytest.mark.parametrize("layers,unimix", [(1, 0.01), (2, 0.01), (1, 0.0)])
def test_fused_imagine_equals_the_eager_rollout_bit_for_bit(layers, unimix):
    rssm, actor, h, z = _parts(layers, unimix)
    with torch.no_grad():
        assert uses_fused_imagine(rssm, actor, h)
        torch.manual_seed(3)
        want = rssm.imagine(h, z, actor.sample_action, 6)
        torch.manual_seed(3)
        got = fused_imagine(rssm, actor, h, z, 6)
    assert torch.equal(got[1], want[1])  # the same sampled actions
    assert torch.equal(got[0], want[0])  # and latents
    assert got[1].sum(-1).eq(1).all()
    assert got[0][1:, :, :24].reshape(6, 7, 4, 6).sum(-1).eq(1).all()


def test_fused_imagine_only_where_it_reproduces_the_eager_pieces():
    rssm, actor, h, _ = _parts()
    assert not uses_fused_imagine(rssm, actor, h)  # grad enabled: a graph is being recorded
    with torch.no_grad():
        assert uses_fused_imagine(rssm, actor, h)
        assert not uses_fused_imagine(rssm, actor, h.half())
        continuous = DreamerV3Actor(rssm.latent_dim, 5, units=16, discrete=False)
        assert not uses_fused_imagine(rssm, continuous, h)

        class Greedy(DreamerV3Actor):
            def sample_action(self, latent):
                return super().sample_action(latent) * 0

        greedy = Greedy(rssm.latent_dim, 5, units=16)
        assert not uses_fused_imagine(rssm, greedy, h)
        rssm.fused_steps = False  # the instance's switch (e.g. after patching a step method)
        assert not uses_fused_imagine(rssm, actor, h)
        del rssm.fused_steps

        class HalfCell(type(rssm)):  # overrides the step: the generic rollout, which calls it
            def _cell(self, x_pre, h, w):
                return super()._cell(x_pre, h, w) * 0.5

        class Logged(type(rssm)):
            fused_steps = True  # declares the step maths RSSM's own: keeps the fused rollout

        kw = dict(action_dim=5, embed_dim=rssm.embed_dim, deter=rssm.deter, hidden=rssm.hidden,
                  stoch=rssm.stoch, classes=rssm.classes)
        assert uses_fused_imagine(rssm, actor, h)
        assert not uses_fused_imagine(HalfCell(**kw), actor, h)
        assert uses_fused_imagine(Logged(**kw), actor, h)


def test_actor_loss_uses_the_fused_rollout_and_keeps_its_samples():
    from torchrl_dreamer.modules import make_dreamer
    from torchrl_dreamer.objectives import DreamerV3ActorLoss

    torch.manual_seed(0)
    wm, actor, critic = make_dreamer("tiny", {"obs": ("vector", 6)}, 4)
    loss = DreamerV3ActorLoss(wm, actor, critic)
    h, z = wm.rssm.initial_state((5,))
    calls = []
    eager = wm.rssm.imagine
    wm.rssm.imagine = lambda *a: calls.append(1) or eager(*a)
    wm.rssm.fused_steps = False  # an override, declared: the eager path
    torch.manual_seed(1)
    want = loss.imagine(h, z)
    assert calls == [1]
    del wm.rssm.imagine, wm.rssm.fused_steps
    torch.manual_seed(1)
    got = loss.imagine(h, z)
    assert calls == [1]  # not called again: the fused rollout ran
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    torch.testing.assert_close(got[2], want[2])
    assert got[2].requires_grad  # the batched actor pass keeps its graph


def test_compiled_rollout_step_samples_what_the_eager_one_samples():
    """After ``compile_steps`` the graph-free rollout runs its compiled step (no graph break):
    the same uniforms give the same actions and latents up to the compiler's rounding."""
    rssm, actor, h, z = _parts(2)
    with torch.no_grad():
        torch.manual_seed(3)
        want = fused_imagine(rssm, actor, h, z, 6)
        rssm.compile_steps("default", fullgraph=True)
        step, calls = rssm._compiled_rollout_step, []
        rssm._compiled_rollout_step = lambda *a: calls.append(1) or step(*a)
        assert uses_fused_imagine(rssm, actor, h)
        torch.manual_seed(3)
        got = fused_imagine(rssm, actor, h, z, 6)
    assert len(calls) == 6
    assert torch.equal(got[1], want[1])
    torch.testing.assert_close(got[0], want[0])
    assert torch.equal(got[0][..., :24], want[0][..., :24])  # the same one-hot latents
