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
paths sample the same trajectory (``test/test_rssm_imagine.py``); on CUDA the draws differ,
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

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["fused_imagine", "uses_fused_imagine"]


def uses_fused_imagine(rssm: nn.Module, actor: nn.Module, h: torch.Tensor) -> bool:
    """Whether :func:`fused_imagine` reproduces ``rssm.imagine(h, z, actor.sample_action, H)``:
    no graph is being recorded, the actor is a discrete
    :class:`~torchrl_dreamer.modules.heads.DreamerV3Actor` and the RSSM an
    :class:`~torchrl_dreamer.modules.rssm.RSSM`, neither overriding the pieces the rollout
    runs (``imagine``, ``_imagine_body``, ``_cell``; ``forward``, ``sample_action``) nor
    swapping their modules, the imagination body is not compiled, no autocast is active and
    the state is fp32/fp64. Otherwise the eager rollout runs, which calls those pieces."""
    from torchrl_dreamer.modules.heads import DreamerV3Actor
    from torchrl_dreamer.modules.layers import MLP, LayerNormGRUCell
    from torchrl_dreamer.modules.rssm import RSSM, _LatentHead, _own_pieces, _plain_precision

    return (
        not torch.is_grad_enabled()
        and isinstance(rssm, RSSM)
        and _own_pieces(rssm, RSSM, ("imagine", "_imagine_body", "_cell"))
        and isinstance(actor, DreamerV3Actor)
        and _own_pieces(actor, DreamerV3Actor, ("forward", "sample_action"))
        and actor.discrete
        and type(actor.net) is MLP
        and type(actor.out) is nn.Linear
        and type(rssm.gru) is LayerNormGRUCell
        and type(rssm.prior) is _LatentHead
        and len(rssm.input_mlp) == 3
        and rssm._compiled_imagine is None
        and _plain_precision(h)
    )


def _mlp_weights(mlp: nn.Sequential) -> list[tuple[torch.Tensor, nn.LayerNorm]]:
    """``(weight.t(), norm)`` per ``Linear -> LayerNorm -> SiLU`` block of an MLP."""
    return [(mlp[i].weight.t(), mlp[i + 1]) for i in range(0, len(mlp), 3)]


def _ln(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _sample_into(probs: torch.Tensor, u: torch.Tensor, out: torch.Tensor, unimix: float) -> None:
    """Unimix ``probs`` (softmax output, in place) and scatter its inverse-CDF one-hot sample
    for uniforms ``u`` ``[..., 1]`` into the zeroed ``out`` (as ``unimix_probs`` and
    ``sample_categorical`` + ``one_hot`` compute them)."""
    if unimix > 0:
        probs.mul_(1.0 - unimix).add_(unimix / probs.shape[-1])
    idx = torch.searchsorted(probs[..., :-1].cumsum(-1), u)
    out.scatter_(-1, idx, 1.0)


@torch.no_grad()
def fused_imagine(
    rssm: nn.Module, actor: nn.Module, h: torch.Tensor, z: torch.Tensor, horizon: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rssm.imagine(h, z, actor.sample_action, horizon)`` without a graph, in fewer ops.

    Args:
        rssm: an :class:`~torchrl_dreamer.modules.rssm.RSSM`; actor: a discrete
            :class:`~torchrl_dreamer.modules.heads.DreamerV3Actor` (check
            :func:`uses_fused_imagine` first).
        h, z: ``[N, D]`` / ``[N, S*C]`` start states.
        horizon: imagined steps ``H``.

    Returns:
        ``latents [H+1, N, S*C + D]`` (``[z, h]``) and one-hot ``actions [H, N, A]``.
    """
    n, sc = z.shape
    d = h.shape[-1]
    s, c = rssm.stoch, rssm.classes
    a_dim = actor.action_dim
    dtype = h.dtype
    w = rssm._scan_weights()
    actor_layers = _mlp_weights(actor.net)
    actor_out_t = actor.out.weight.t()
    in_norm = rssm.input_mlp[1]
    gru_norm = rssm.gru.norm
    prior_norm = rssm.prior.norm
    latents = torch.zeros(horizon + 1, n, sc + d, dtype=dtype, device=h.device)
    latents[0, :, :sc] = z
    latents[0, :, sc:] = h
    actions = torch.zeros(horizon, n, a_dim, dtype=dtype, device=h.device)
    # every step's uniforms in one draw: the action's N, then the latent's N x S
    uniforms = torch.rand(horizon, n * (1 + s), dtype=dtype, device=h.device)
    # per-step views, taken once (each view is a dispatched op too)
    lat_z, lat_h = latents[..., :sc], latents[..., sc:]
    zs, z_onehots, hs = lat_z.unbind(0), lat_z.unflatten(-1, (s, c)).unbind(0), lat_h.unbind(0)
    u_actions = uniforms[:, :n].unsqueeze(-1).unbind(0)
    u_latents = uniforms[:, n:].unflatten(-1, (n, s, 1)).unbind(0)
    for t, (latent, action) in enumerate(zip(latents.unbind(0), actions.unbind(0))):
        # the actor's sample (DreamerV3Actor.sample_action)
        x = latent
        for weight_t, norm in actor_layers:
            x = F.silu(_ln(x @ weight_t, norm), inplace=True)
        probs = torch.addmm(actor.out.bias, x, actor_out_t).softmax(-1)
        _sample_into(probs, u_actions[t], action, actor.unimix)
        # the dynamics step (RSSM._imagine_body)
        x = torch.cat([zs[t], action], -1) @ w.in_t
        x = F.silu(_ln(x, in_norm), inplace=True)
        parts = _ln(torch.cat([x, hs[t]], -1) @ w.gru_t, gru_norm)
        reset, cand, update = parts.chunk(3, -1)
        cand = torch.tanh(torch.sigmoid(reset) * cand)
        update = torch.sigmoid(update - 1.0)
        h = torch.lerp(hs[t], cand, update, out=hs[t + 1])
        y = F.silu(_ln(h @ w.prior_t, prior_norm), inplace=True)
        probs = torch.addmm(rssm.prior.out.bias, y, w.prior_out_t).view(n, s, c).softmax(-1)
        _sample_into(probs, u_latents[t], z_onehots[t + 1], rssm.unimix)
    return latents, actions
