"""The graph-free imagination rollout of a discrete actor in fewer dispatched ops.

Why: a discrete actor's loss samples its imagined trajectory without a graph (REINFORCE needs
none; the loss re-runs the actor over all states at once), and the eager rollout
(:meth:`RSSM.imagine` calling :meth:`DreamerV3Actor.sample_action`) dispatches ~48 aten ops a
step: weight transposes per call, a fresh one-hot buffer and a uniform draw per sample, a
``cat`` per latent and a ``stack`` at the end. Here the weights are transposed once, every
step's uniforms come from one draw, one-hot actions and latents are scattered and written into
buffers allocated once, and the activations run in place: ~33 ops a step, 15 steps a maze
update.

The maths is the eager rollout's op for op (the same matrix products on the same operands, the
same LayerNorms, gates, unimix and inverse-CDF samples), so the outputs are equal bit for bit.
On a CPU one draw of ``H x (N + N x S)`` uniforms gives the numbers the eager rollout's per-step
draws give, in the same order (action, then latent, each step), so with the same seed both
paths sample the same trajectory (``test/modules/test_rssm_imagine.py``); on CUDA the draws differ,
the distribution does not.

Example:
    >>> from torchrl_dreamer.modules import RSSM, DreamerV3Actor
    >>> rssm = RSSM(action_dim=3, embed_dim=8, deter=16, hidden=16, stoch=4, classes=4)
    >>> actor = DreamerV3Actor(rssm.latent_dim, 3, units=16, layers=1)
    >>> h, z = rssm.initial_state((5,))
    >>> with torch.no_grad():
    ...     latents, actions = fused_imagine(rssm, actor, h, z, horizon=4)
    >>> latents.shape, actions.shape, actions.sum(-1).unique().tolist()
    (torch.Size([5, 5, 32]), torch.Size([4, 5, 3]), [1.0])
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from torchrl_dreamer.modules.functional import sample_one_hot
from torchrl_dreamer.modules.latent import latent_of

__all__ = ["compile_rollout_step", "fused_imagine"]


def _sample_into(
    probs: torch.Tensor, u: torch.Tensor, out: torch.Tensor | None, unimix: float
) -> torch.Tensor:
    """Unimix ``probs`` (softmax output, in place) and scatter its inverse-CDF one-hot sample
    for uniforms ``u`` ``[..., 1]`` into the zeroed ``out`` (a fresh one if ``None``), as
    ``unimix_probs`` and ``sample_one_hot`` compute them."""
    if unimix > 0:
        probs.mul_(1.0 - unimix).add_(unimix / probs.shape[-1])
    return sample_one_hot(probs, u, out)


class _RolloutWeights(NamedTuple):
    """What a rollout step reads: the actor's ``(weight.t(), norm)`` per hidden layer and its
    output layer, the RSSM's transposed weights (``RSSM.scan_weights``), its three LayerNorms
    and the prior's output bias; each norm as ``(weight, bias, eps)`` (:func:`_norm`)."""

    actor_layers: tuple[tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, float]], ...]
    actor_out_t: torch.Tensor
    actor_out_b: torch.Tensor
    in_t: torch.Tensor
    gru_t: torch.Tensor
    prior_t: torch.Tensor
    prior_out_t: torch.Tensor
    prior_out_b: torch.Tensor
    norms: tuple[tuple[torch.Tensor, torch.Tensor, float], ...]


def _norm(module: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, float]:
    """A LayerNorm's ``(weight, bias, eps)``: what :func:`_ln` applies."""
    return module.weight, module.bias, module.eps


def _ln(x: torch.Tensor, norm: tuple[torch.Tensor, torch.Tensor, float]) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), norm[0], norm[1], norm[2])


def _rollout_step(latent, z, h, u_action, u_latent, outs, w: _RolloutWeights, consts):
    """One imagined step from ``latent = [z, h]``: the actor's sample, then the dynamics.

    ``outs``: ``(action, h, z one-hot)`` buffers to write into (eager: views of the rollout's
    output buffers, so nothing is copied), or ``None`` (a compiled step, whose outputs must not
    alias its inputs): then returns ``(action, next latent)`` as fresh tensors.
    """
    stoch, classes, actor_unimix, unimix = consts
    n = latent.shape[0]
    action_out, h_out, z_out = (None, None, None) if outs is None else outs
    in_norm, gru_norm, prior_norm = w.norms
    # the actor's sample (DreamerV3Actor.sample_action)
    x = latent
    for weight_t, norm in w.actor_layers:
        x = F.silu(_ln(x @ weight_t, norm), inplace=True)
    probs = torch.addmm(w.actor_out_b, x, w.actor_out_t).softmax(-1)
    action = _sample_into(probs, u_action, action_out, actor_unimix)
    # the dynamics step (RSSM._imagine_body)
    x = torch.cat([z, action], -1) @ w.in_t
    x = F.silu(_ln(x, in_norm), inplace=True)
    parts = _ln(torch.cat([x, h], -1) @ w.gru_t, gru_norm)
    reset, cand, update = parts.chunk(3, -1)
    cand = torch.tanh(torch.sigmoid(reset) * cand)
    update = torch.sigmoid(update - 1.0)
    h = torch.lerp(h, cand, update) if h_out is None else torch.lerp(h, cand, update, out=h_out)
    y = F.silu(_ln(h @ w.prior_t, prior_norm), inplace=True)
    probs = torch.addmm(w.prior_out_b, y, w.prior_out_t).view(n, stoch, classes).softmax(-1)
    z = _sample_into(probs, u_latent, z_out, unimix)
    if outs is None:
        return action, latent_of(z.view(n, -1), h)
    return action, None


@torch.no_grad()
def fused_imagine(
    rssm: nn.Module, actor: nn.Module, h: torch.Tensor, z: torch.Tensor, horizon: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rssm.imagine(h, z, actor.sample_action, horizon)`` without a graph, in fewer ops.

    Args:
        rssm: an :class:`~torchrl_dreamer.modules.rssm.RSSM`; actor: a discrete
            :class:`~torchrl_dreamer.modules.heads.DreamerV3Actor` (check
            :func:`~torchrl_dreamer.modules.rssm.uses_fused_imagine` first).
        h, z: ``[N, D]`` / ``[N, S*C]`` start states.
        horizon: imagined steps ``H``.

    Returns:
        ``latents [H+1, N, S*C + D]`` (``[z, h]``) and one-hot ``actions [H, N, A]``.

    After :meth:`RSSM.compile_steps <torchrl_dreamer.modules.rssm.RSSM.compile_steps>` the
    step runs compiled (same uniforms, so the same samples up to the compiler's rounding).
    """
    n, sc = z.shape
    d = h.shape[-1]
    s, c = rssm.stoch, rssm.classes
    a_dim = actor.action_dim
    dtype = h.dtype
    sw = rssm.scan_weights()
    net = actor.net  # Linear -> LayerNorm -> SiLU blocks
    w = _RolloutWeights(
        tuple((net[i].weight.t(), _norm(net[i + 1])) for i in range(0, len(net), 3)),
        actor.out.weight.t(), actor.out.bias, sw.in_t, sw.gru_t, sw.prior_t, sw.prior_out_t,
        rssm.prior.out.bias,
        (_norm(rssm.input_mlp[1]), _norm(rssm.gru.norm), _norm(rssm.prior.norm)),
    )
    consts = (s, c, float(actor.unimix), float(rssm.unimix))
    step = rssm.compiled_rollout_step
    # every step's uniforms in one draw: the action's N, then the latent's N x S
    uniforms = torch.rand(horizon, n * (1 + s), dtype=dtype, device=h.device)
    u_actions = uniforms[:, :n].unsqueeze(-1).unbind(0)
    u_latents = uniforms[:, n:].unflatten(-1, (n, s, 1)).unbind(0)
    if step is not None:  # compiled: fresh outputs each step, stacked at the end
        latent = latent_of(z, h)
        latents, actions = [latent], []
        for t in range(horizon):
            action, latent = step(latent, latent[:, :sc], latent[:, sc:], u_actions[t],
                                  u_latents[t], None, w, consts)
            latents.append(latent)
            actions.append(action)
        return torch.stack(latents, 0), torch.stack(actions, 0)
    latents = torch.zeros(horizon + 1, n, sc + d, dtype=dtype, device=h.device)
    latents[0, :, :sc] = z
    latents[0, :, sc:] = h
    actions = torch.zeros(horizon, n, a_dim, dtype=dtype, device=h.device)
    # per-step views, taken once (each view is a dispatched op too)
    lat_z, lat_h = latents[..., :sc], latents[..., sc:]
    zs, z_onehots, hs = lat_z.unbind(0), lat_z.unflatten(-1, (s, c)).unbind(0), lat_h.unbind(0)
    for t, (latent, action) in enumerate(zip(latents.unbind(0), actions.unbind(0))):
        _rollout_step(latent, zs[t], hs[t], u_actions[t], u_latents[t],
                      (action, hs[t + 1], z_onehots[t + 1]), w, consts)
    return latents, actions


def compile_rollout_step(**kwargs):
    """``torch.compile(step, **kwargs)`` of the rollout's step, for
    :meth:`RSSM.compile_steps <torchrl_dreamer.modules.rssm.RSSM.compile_steps>`, which keeps it
    as :attr:`~torchrl_dreamer.modules.rssm.RSSM.compiled_rollout_step` for
    :func:`fused_imagine`."""
    return torch.compile(_rollout_step, **kwargs)
