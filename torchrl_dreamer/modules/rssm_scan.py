"""The RSSM posterior scan as one autograd node with a hand-written backward.

Why: under autograd every op of the 32-step posterior scan records a graph node, and its
backward runs ~80 dispatched ops per step, among them one gradient accumulation per weight per
step (``aten.add`` of each weight's gradient, 32 times over). Here the forward runs without a
graph, keeps what the backward needs, and the backward walks the steps in reverse carrying only
the state gradients (~22 kernels a step); every weight and LayerNorm gradient is then one
matrix product (or one batched ``native_layer_norm_backward``) over all ``T x B`` rows at once.
The forward draws every step's uniforms at once and scatters the one-hot samples into one
buffer. On the ``tiny`` maze update (B8xT32) this cuts the dispatched aten ops from 5,376 to
3,823 and the non-view ones (kernel launches on a GPU; ``benchmarks/learner.py``) from 3,718 to
2,654; CPU time barely moves at one thread (the update is compute-bound there), 1.11x at two.

The maths is the eager scan's (:meth:`RSSM._observe_body`) step for step: the same reset mix,
input MLP, LayerNorm GRU, posterior head and 1 % unimix, and the same inverse-CDF samples: on a
CPU one draw of ``T x B x S`` uniforms gives the numbers ``T`` per-step draws give, in the same
order, so with the same seed both paths sample the same latents (on CUDA the draws differ, the
distribution does not). ``test/modules/test_rssm_scan.py`` checks outputs and every gradient against
autograd through the eager scan. The straight-through sample is returned as the exact one-hot
(the eager path's ``hard + probs - probs`` differs from it by float rounding); its gradient is
the identity onto the probabilities, as there.

One step each way is a plain function (:func:`_forward_step`, :func:`_backward_step`), which
:meth:`RSSM.compile_steps <torchrl_dreamer.modules.rssm.RSSM.compile_steps>` compiles: the
compiled scan keeps this backward and fuses each step's norms, gates and sample into a few
kernels around its matrix products (a maze update: 2,793 kernel launches eager, 1,629 compiled;
``benchmarks/learner.py``).

Example:
    >>> from torchrl_dreamer.modules.rssm import RSSM
    >>> rssm = RSSM(action_dim=3, embed_dim=8, deter=16, hidden=16, stoch=4, classes=4)
    >>> out = rssm.observe(torch.randn(6, 2, 8), torch.zeros(6, 2, 3),
    ...                    torch.zeros(6, 2, dtype=torch.bool))
    >>> out["z"].sum(-1).unique().tolist()  # one one-hot per latent, 4 latents
    [4.0]
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from torchrl_dreamer.modules.functional import sample_one_hot

__all__ = ["compile_scan_steps", "fused_observe_scan"]

_aten = torch.ops.aten


def fused_observe_scan(
    rssm: nn.Module,
    h: torch.Tensor,
    z: torch.Tensor,
    keep: torch.Tensor,
    h_reset: torch.Tensor,
    z_reset: torch.Tensor,
    a_proj: torch.Tensor,
    e_proj: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Posterior scan of ``rssm`` over ``[T, B]``: ``(h [T,B,D], z [T,B,S*C], probs [T,B,S,C])``.

    Args:
        rssm: an :class:`~torchrl_dreamer.modules.rssm.RSSM` (its weights are read here).
        h, z: ``[B, D]`` / ``[B, S*C]`` state before step 0.
        keep: ``[T, B, 1]`` ``1 - is_first``; h_reset, z_reset: ``[T, B, ...]`` the initial
            state times ``is_first`` (mixed in as ``state * keep + reset``).
        a_proj: ``[T, B, H]`` the action half of the input MLP's first layer;
            e_proj: ``[T, B, H]`` the embedding half of the posterior's first layer.

    Gradients flow to every tensor argument but ``keep`` and to the RSSM's weights used
    inside the loop (input MLP, GRU, posterior head).
    """
    w_in = rssm.input_mlp[0].weight
    ln1 = rssm.input_mlp[1]
    gru = rssm.gru
    post = rssm.posterior
    z_flat = rssm.stoch_flat
    return _ObserveScan.apply(
        h, z, keep, h_reset, z_reset, a_proj, e_proj,
        w_in[:, :z_flat], ln1.weight, ln1.bias,
        gru.linear.weight, gru.norm.weight, gru.norm.bias,
        post.linear.weight[:, : rssm.deter], post.norm.weight, post.norm.bias,
        post.out.weight, post.out.bias,
        (rssm.stoch, rssm.classes, float(rssm.unimix), float(ln1.eps), float(gru.norm.eps),
         float(post.norm.eps)),
        rssm.compiled_scan_steps or (_forward_step, _backward_step),
    )


def compile_scan_steps(**kwargs) -> tuple:
    """``(forward step, backward step)``, each ``torch.compile(..., **kwargs)``, for
    :meth:`RSSM.compile_steps <torchrl_dreamer.modules.rssm.RSSM.compile_steps>`, which keeps
    them as :attr:`~torchrl_dreamer.modules.rssm.RSSM.compiled_scan_steps` for
    :func:`fused_observe_scan`."""
    return torch.compile(_forward_step, **kwargs), torch.compile(_backward_step, **kwargs)


def _flat(x: torch.Tensor) -> torch.Tensor:
    """``[T, B, ...]`` -> ``[T * B, last]`` (for the whole-sequence weight gradients)."""
    return x.reshape(-1, x.shape[-1])


class _StepWeights(NamedTuple):
    """What a posterior step reads: the weights (transposed once per scan) and LayerNorm
    parameters of the input MLP (``in``), the GRU (``gru``; its update-gate bias shifted by
    -1) and the posterior head (``post``, ``out``), and the unimix floor ``[B, S, C]``."""

    in_z_t: torch.Tensor
    ln1_w: torch.Tensor
    ln1_b: torch.Tensor
    gru_t: torch.Tensor
    ln2_w: torch.Tensor
    ln2_b_u: torch.Tensor
    post_h_t: torch.Tensor
    ln3_w: torch.Tensor
    ln3_b: torch.Tensor
    out_t: torch.Tensor
    out_b: torch.Tensor
    floor: torch.Tensor


#: the per-step values :func:`_forward_step` returns for the backward, in order
_SAVED = ("zin", "x1", "n1", "m1", "r1", "xh", "g", "m2", "r2", "r", "pc", "c", "u", "h", "y1",
          "n3", "m3", "r3", "y2", "soft")


def _forward_step(h, z, keep_t, hr_t, zr_t, a_t, e_t, u_t, z_out, w: _StepWeights, consts):
    """One posterior step without a graph: ``(h, z, probs, saved)`` (``saved``: the
    :data:`_SAVED` values). ``z_out``: the zeroed ``[B, S, C]`` buffer the one-hot sample is
    scattered into (eager), or ``None`` to return a fresh one (a compiled step, whose outputs
    must not alias its inputs)."""
    stoch, classes, unimix, eps1, eps2, eps3 = consts
    B = h.shape[0]
    hin = torch.addcmul(hr_t, h, keep_t)
    zin = torch.addcmul(zr_t, z, keep_t)
    x1 = torch.addmm(a_t, zin, w.in_z_t)
    n1, m1, r1 = _aten.native_layer_norm(x1, [x1.shape[-1]], w.ln1_w, w.ln1_b, eps1)
    xh = torch.cat([torch.nn.functional.silu(n1), hin], -1)
    g = xh @ w.gru_t
    n2, m2, r2 = _aten.native_layer_norm(g, [g.shape[-1]], w.ln2_w, w.ln2_b_u, eps2)
    pr, pc, pu = n2.chunk(3, -1)
    r = torch.sigmoid(pr)
    c = torch.tanh(r * pc)
    u = torch.sigmoid(pu)
    h = torch.lerp(hin, c, u)
    y1 = torch.addmm(e_t, h, w.post_h_t)
    n3, m3, r3 = _aten.native_layer_norm(y1, [y1.shape[-1]], w.ln3_w, w.ln3_b, eps3)
    y2 = torch.nn.functional.silu(n3)
    logits = torch.addmm(w.out_b, y2, w.out_t).view(-1, stoch, classes)
    soft = logits.softmax(-1)
    probs = torch.add(w.floor, soft, alpha=1.0 - unimix)
    z = sample_one_hot(probs, u_t, z_out).view(B, -1)
    saved = (zin, x1, n1, m1, r1, xh, g, m2, r2, r, pc, c, u, h, y1, n3, m3, r3, y2, soft)
    return h, z, probs, saved


def _backward_step(gh, gp, gh_prev, gp_prev, keep_t, keep3_t, p, dn2, w: _BackWeights,
                   consts):
    """One posterior step back: the gradients reaching step ``t``'s ``h`` (``gh``) and
    probabilities (``gp``) to those of its internals, and through the reset mix to step
    ``t - 1``'s ``h`` and ``z`` (plus their own ``gh_prev`` / ``gp_prev``). ``p``: step ``t``'s
    :data:`_SAVED` values and its GRU input ``hin``. ``dn2``: the ``[B, 3D]`` buffer the
    GRU-norm gradient is written into (eager), or ``None`` to concatenate a fresh one
    (compiled). Returns ``(gh_prev, gp_prev, dl, dn3, dy1, dg, dn1, dx1, dhin, dzin, dn2)``."""
    stoch, classes, unimix, _, _, _ = consts
    B, D = gh.shape
    H = w.ln1_w.shape[0]
    dl = _aten._softmax_backward_data(gp, p["soft"], -1, gp.dtype).view(B, -1)
    dn3 = _aten.silu_backward(dl @ w.out_s, p["n3"])
    dy1 = _aten.native_layer_norm_backward(
        dn3, p["y1"], [H], p["m3"], p["r3"], w.ln3_w, w.ln3_b, [True, False, False])[0]
    dht = torch.addmm(gh, dy1, w.post_h)
    hin, c, u, r, pc = p["hin"], p["c"], p["u"], p["r"], p["pc"]
    dc = dht * u
    du = dht * (c - hin)
    dhin = dht - dc
    dct = _aten.tanh_backward(dc, c)
    if dn2 is None:
        dn2 = torch.cat([_aten.sigmoid_backward(dct * pc, r), dct * r,
                         _aten.sigmoid_backward(du, u)], -1)
    else:
        _aten.sigmoid_backward.grad_input(dct * pc, r, grad_input=dn2[:, :D])
        torch.mul(dct, r, out=dn2[:, D : 2 * D])
        _aten.sigmoid_backward.grad_input(du, u, grad_input=dn2[:, 2 * D :])
    dg = _aten.native_layer_norm_backward(
        dn2, p["g"], [3 * D], p["m2"], p["r2"], w.ln2_w, w.ln2_b_u, [True, False, False])[0]
    dxh = dg @ w.gru
    dhin = dhin + dxh[:, H:]
    dn1 = _aten.silu_backward(dxh[:, :H], p["n1"])
    dx1 = _aten.native_layer_norm_backward(
        dn1, p["x1"], [H], p["m1"], p["r1"], w.ln1_w, w.ln1_b, [True, False, False])[0]
    dzin = dx1 @ w.in_z
    gh_prev = torch.addcmul(gh_prev, dhin, keep_t)
    gp_prev = torch.addcmul(gp_prev, dzin.view(B, stoch, classes), keep3_t)
    return gh_prev, gp_prev, dl, dn3, dy1, dg, dn1, dx1, dhin, dzin, dn2


class _BackWeights(NamedTuple):
    """What a backward step reads: the untransposed weights (the posterior output's scaled by
    ``1 - unimix``, the softmax-to-probabilities factor) and the LayerNorm parameters."""

    out_s: torch.Tensor
    post_h: torch.Tensor
    gru: torch.Tensor
    in_z: torch.Tensor
    ln1_w: torch.Tensor
    ln1_b: torch.Tensor
    ln2_w: torch.Tensor
    ln2_b_u: torch.Tensor
    ln3_w: torch.Tensor
    ln3_b: torch.Tensor


class _ObserveScan(torch.autograd.Function):
    """Forward: the eager scan without a graph. Backward: state gradients step by step in
    reverse, weight gradients batched over the sequence. ``steps``: the ``(forward, backward)``
    step functions (:func:`_forward_step`, :func:`_backward_step` or compiled versions)."""

    @staticmethod
    def forward(ctx, h, z, keep, h_reset, z_reset, a_proj, e_proj, w_in_z, ln1_w, ln1_b,
                w_gru, ln2_w, ln2_b, w_post_h, ln3_w, ln3_b, w_out, b_out, consts, steps):
        stoch, classes, unimix = consts[:3]
        deter = h.shape[-1]
        compiled = steps[0] is not _forward_step
        # sigmoid(u - 1) of the GRU's update gate: the -1 folded into the norm's bias
        shift = torch.zeros_like(ln2_b)
        shift[2 * deter :] = 1.0
        ln2_b_u = ln2_b - shift
        floor = torch.full((h.shape[0], stoch, classes), unimix / classes, dtype=h.dtype,
                           device=h.device)
        w = _StepWeights(w_in_z.t(), ln1_w, ln1_b, w_gru.t(), ln2_w, ln2_b_u, w_post_h.t(),
                         ln3_w, ln3_b, w_out.t(), b_out, floor)
        saved: list[list[torch.Tensor]] = [[] for _ in _SAVED]
        probs_steps = []
        T, B = a_proj.shape[:2]
        # every step's uniforms in one draw (on a CPU the same numbers, in the same order, as
        # one draw of sample_categorical per step); eager steps scatter the one-hots into one
        # buffer, compiled ones return theirs
        uniforms = torch.rand(T, B, stoch, 1, dtype=h.dtype, device=h.device)
        if compiled:
            z_outs = [None] * T
        else:
            z_all = torch.zeros(T, B, stoch, classes, dtype=h.dtype, device=h.device)
            z_outs = z_all.unbind(0)
        # the state before step 0 may be a leaf that requires grad, the later ones never do:
        # detached, every step presents the same inputs (one compiled graph, not two)
        h, z = h.detach(), z.detach()
        z_steps = []
        for keep_t, hr_t, zr_t, a_t, e_t, u_t, z_t in zip(
            keep.unbind(0), h_reset.unbind(0), z_reset.unbind(0), a_proj.unbind(0),
            e_proj.unbind(0), uniforms.unbind(0), z_outs,
        ):
            h, z, probs, step_saved = steps[0](h, z, keep_t, hr_t, zr_t, a_t, e_t, u_t, z_t, w,
                                               consts)
            for lst, v in zip(saved, step_saved):
                lst.append(v)
            probs_steps.append(probs)
            z_steps.append(z)
        h_all = torch.stack(saved[_SAVED.index("h")], 0)
        z_all = torch.stack(z_steps, 0) if compiled else z_all.view(T, B, -1)
        probs_all = torch.stack(probs_steps, 0)
        ctx.consts, ctx.steps = consts, steps
        if any(ctx.needs_input_grad):  # the backward's inputs, stacked only when it will run
            stacked = {k: torch.stack(v, 0) for k, v in zip(_SAVED, saved) if k != "h"}
            ctx.names = tuple(stacked)
            ctx.save_for_backward(
                keep, w_in_z, ln1_w, ln1_b, w_gru, ln2_w, ln2_b_u, w_post_h, ln3_w, ln3_b, w_out,
                b_out, h_all, *stacked.values(),
            )
        return h_all, z_all, probs_all

    @staticmethod
    def backward(ctx, g_h, g_z, g_probs):
        consts, steps = ctx.consts, ctx.steps
        stoch, classes, unimix = consts[:3]
        compiled = steps[1] is not _backward_step
        (keep, w_in_z, ln1_w, ln1_b, w_gru, ln2_w, ln2_b_u, w_post_h, ln3_w, ln3_b, w_out,
         b_out, h_all, *rest) = ctx.saved_tensors
        s = dict(zip(ctx.names, rest))
        T, B, D = h_all.shape
        H = s["x1"].shape[-1]
        # straight-through: z's gradient goes to the probabilities; unimix scales softmax's
        w = _BackWeights(w_out * (1.0 - unimix), w_post_h, w_gru, w_in_z, ln1_w, ln1_b, ln2_w,
                         ln2_b_u, ln3_w, ln3_b)
        g_p = (g_probs + g_z.view_as(g_probs)).unbind(0)
        g_h = g_h.unbind(0)
        per_t = {k: v.unbind(0) for k, v in s.items()}
        per_t["hin"] = s["xh"][..., H:].unbind(0)  # the GRU's input state: xh's second half
        keep_t, keep3_t = keep.unbind(0), keep.unsqueeze(-1).unbind(0)
        grads: list[list[torch.Tensor]] = [[] for _ in range(8)]
        # the GRU norm's output gradient: eager steps write its three gate parts in place into
        # one buffer, compiled ones return theirs
        if compiled:
            d_n2_t = [None] * T
        else:
            d_n2 = torch.empty_like(s["g"])
            d_n2_t = d_n2.unbind(0)
        dn2_steps = []
        gh, gp = g_h[T - 1], g_p[T - 1]  # gradients reaching step t's h and probabilities
        zero_h, zero_p = torch.zeros_like(gh), torch.zeros_like(gp)
        for t in range(T - 1, -1, -1):
            p = {k: v[t] for k, v in per_t.items()}  # the saved values of step t
            prev = (g_h[t - 1], g_p[t - 1]) if t > 0 else (zero_h, zero_p)
            gh, gp, *step_grads, dn2 = steps[1](gh, gp, *prev, keep_t[t], keep3_t[t], p,
                                                d_n2_t[t], w, consts)
            for lst, v in zip(grads, step_grads):
                lst.append(v)
            dn2_steps.append(dn2)
        dh, dz = gh, gp.view(B, -1)  # into the state before step 0 (through its reset mix)
        rev = lambda lst: torch.stack(lst[::-1], 0)  # noqa: E731 -- steps back in time order
        d_logits, d_n3, d_y1, d_g, d_n1, d_x1, d_hin, d_zin = map(rev, grads)
        if compiled:
            d_n2 = rev(dn2_steps)
        need = ctx.needs_input_grad
        g_ln1 = _ln_params(d_n1, s["x1"], s["m1"], s["r1"], ln1_w, ln1_b) if need[8] else (None,) * 2
        g_ln2 = _ln_params(d_n2, s["g"], s["m2"], s["r2"], ln2_w, ln2_b_u) if need[11] else (None,) * 2
        g_ln3 = _ln_params(d_n3, s["y1"], s["m3"], s["r3"], ln3_w, ln3_b) if need[14] else (None,) * 2
        dl_flat = _flat(d_logits)
        return (
            dh,
            dz,
            None,
            d_hin,
            d_zin,
            d_x1,
            d_y1,
            _flat(d_x1).t() @ _flat(s["zin"]),
            *g_ln1,
            _flat(d_g).t() @ _flat(s["xh"]),
            *g_ln2,
            _flat(d_y1).t() @ _flat(h_all),
            *g_ln3,
            (dl_flat.t() @ _flat(s["y2"])) * (1.0 - unimix),
            dl_flat.sum(0) * (1.0 - unimix),
            None,
            None,
        )


def _ln_params(d_out, x, mean, rstd, w, b):
    """Weight and bias gradients of a LayerNorm over all ``T x B`` rows at once."""
    n = x.shape[-1]
    _, gw, gb = _aten.native_layer_norm_backward(
        _flat(d_out), _flat(x), [n], _flat(mean), _flat(rstd), w, b, [False, True, True])
    return gw, gb
