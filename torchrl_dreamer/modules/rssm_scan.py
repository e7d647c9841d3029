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
distribution does not). ``test/test_rssm_scan.py`` checks outputs and every gradient against
autograd through the eager scan. The straight-through sample is returned as the exact one-hot
(the eager path's ``hard + probs - probs`` differs from it by float rounding); its gradient is
the identity onto the probabilities, as there.

Example:
    >>> from torchrl_dreamer.modules.rssm import RSSM
    >>> rssm = RSSM(action_dim=3, embed_dim=8, deter=16, hidden=16, stoch=4, classes=4)
    >>> out = rssm.observe(torch.randn(6, 2, 8), torch.zeros(6, 2, 3),
    ...                    torch.zeros(6, 2, dtype=torch.bool))
    >>> out["z"].sum(-1).unique().tolist()  # one one-hot per latent, 4 latents
    [4.0]
"""

from __future__ import annotations

import torch
from torch import nn

from torchrl_dreamer.modules.functional import sample_categorical

__all__ = ["fused_observe_scan"]

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
    )


def _flat(x: torch.Tensor) -> torch.Tensor:
    """``[T, B, ...]`` -> ``[T * B, last]`` (for the whole-sequence weight gradients)."""
    return x.reshape(-1, x.shape[-1])


class _ObserveScan(torch.autograd.Function):
    """Forward: the eager scan without a graph. Backward: state gradients step by step in
    reverse, weight gradients batched over the sequence."""

    @staticmethod
    def forward(ctx, h, z, keep, h_reset, z_reset, a_proj, e_proj, w_in_z, ln1_w, ln1_b,
                w_gru, ln2_w, ln2_b, w_post_h, ln3_w, ln3_b, w_out, b_out, consts):
        stoch, classes, unimix, eps1, eps2, eps3 = consts
        deter = h.shape[-1]
        # sigmoid(u - 1) of the GRU's update gate: the -1 folded into the norm's bias
        shift = torch.zeros_like(ln2_b)
        shift[2 * deter :] = 1.0
        ln2_b_u = ln2_b - shift
        w_in_z_t, w_gru_t, w_post_h_t, w_out_t = w_in_z.t(), w_gru.t(), w_post_h.t(), w_out.t()
        floor = torch.full((h.shape[0], stoch, classes), unimix / classes, dtype=h.dtype,
                           device=h.device)
        # what the backward reads (the GRU input h is xh's second half)
        names = ("zin", "x1", "n1", "m1", "r1", "xh", "g", "m2", "r2", "r", "pc", "c", "u", "h",
                 "y1", "n3", "m3", "r3", "y2", "soft")
        saved: dict[str, list[torch.Tensor]] = {k: [] for k in names}
        probs_steps = []
        T, B = a_proj.shape[:2]
        # every step's uniforms in one draw (on a CPU the same numbers, in the same order, as
        # one draw of sample_categorical per step) and the one-hots scattered into one buffer
        uniforms = torch.rand(T, B, stoch, 1, dtype=h.dtype, device=h.device)
        z_all = torch.zeros(T, B, stoch, classes, dtype=h.dtype, device=h.device)
        for keep_t, hr_t, zr_t, a_t, e_t, u_t, z_t in zip(
            keep.unbind(0), h_reset.unbind(0), z_reset.unbind(0), a_proj.unbind(0),
            e_proj.unbind(0), uniforms.unbind(0), z_all.unbind(0),
        ):
            hin = torch.addcmul(hr_t, h, keep_t)
            zin = torch.addcmul(zr_t, z, keep_t)
            x1 = torch.addmm(a_t, zin, w_in_z_t)
            n1, m1, r1 = _aten.native_layer_norm(x1, [x1.shape[-1]], ln1_w, ln1_b, eps1)
            xh = torch.cat([torch.nn.functional.silu(n1), hin], -1)
            g = xh @ w_gru_t
            n2, m2, r2 = _aten.native_layer_norm(g, [g.shape[-1]], ln2_w, ln2_b_u, eps2)
            pr, pc, pu = n2.chunk(3, -1)
            r = torch.sigmoid(pr)
            c = torch.tanh(r * pc)
            u = torch.sigmoid(pu)
            h = torch.lerp(hin, c, u)
            y1 = torch.addmm(e_t, h, w_post_h_t)
            n3, m3, r3 = _aten.native_layer_norm(y1, [y1.shape[-1]], ln3_w, ln3_b, eps3)
            y2 = torch.nn.functional.silu(n3)
            logits = torch.addmm(b_out, y2, w_out_t).view(-1, stoch, classes)
            soft = logits.softmax(-1)
            probs = torch.add(floor, soft, alpha=1.0 - unimix)
            idx = sample_categorical(probs, u_t)
            z = z_t.scatter_(-1, idx.unsqueeze(-1), 1.0).view(B, -1)
            for k, v in zip(names, (zin, x1, n1, m1, r1, xh, g, m2, r2, r, pc, c, u, h, y1, n3,
                                    m3, r3, y2, soft)):
                saved[k].append(v)
            probs_steps.append(probs)
        h_all = torch.stack(saved["h"], 0)
        z_all = z_all.view(T, B, -1)
        probs_all = torch.stack(probs_steps, 0)
        ctx.consts = consts
        if any(ctx.needs_input_grad):
            stacked = {k: torch.stack(v, 0) for k, v in saved.items() if k != "h"}
            ctx.names = tuple(stacked)
            ctx.save_for_backward(
                keep, w_in_z, ln1_w, ln1_b, w_gru, ln2_w, ln2_b_u, w_post_h, ln3_w, ln3_b, w_out,
                b_out, h_all, *stacked.values(),
            )
        return h_all, z_all, probs_all

    @staticmethod
    def backward(ctx, g_h, g_z, g_probs):
        stoch, classes, unimix, _, _, _ = ctx.consts
        (keep, w_in_z, ln1_w, ln1_b, w_gru, ln2_w, ln2_b_u, w_post_h, ln3_w, ln3_b, w_out,
         b_out, h_all, *rest) = ctx.saved_tensors
        s = dict(zip(ctx.names, rest))
        T, B, D = h_all.shape
        H = s["x1"].shape[-1]
        # straight-through: z's gradient goes to the probabilities; unimix scales softmax's
        w_out_s = w_out * (1.0 - unimix)
        g_p = (g_probs + g_z.view_as(g_probs)).unbind(0)
        g_h = g_h.unbind(0)
        per_t = {k: v.unbind(0) for k, v in s.items()}
        per_t["hin"] = s["xh"][..., H:].unbind(0)  # the GRU's input state: xh's second half
        keep_t = keep.unbind(0)
        d_logits, d_n3, d_y1, d_g, d_n1, d_x1, d_hin, d_zin = ([] for _ in range(8))
        # the GRU norm's output gradient, written in place by its three gate parts
        d_n2 = torch.empty_like(s["g"])
        d_n2_t = d_n2.unbind(0)
        gh, gp = g_h[T - 1], g_p[T - 1]  # gradients reaching step t's h and probabilities
        for t in range(T - 1, -1, -1):
            p = {k: v[t] for k, v in per_t.items()}  # the saved values of step t
            dl = _aten._softmax_backward_data(gp, p["soft"], -1, gp.dtype).view(B, -1)
            dn3 = _aten.silu_backward(dl @ w_out_s, p["n3"])
            dy1 = _aten.native_layer_norm_backward(
                dn3, p["y1"], [H], p["m3"], p["r3"], ln3_w, ln3_b, [True, False, False])[0]
            dht = torch.addmm(gh, dy1, w_post_h)
            hin, c, u, r, pc = p["hin"], p["c"], p["u"], p["r"], p["pc"]
            dc = dht * u
            du = dht * (c - hin)
            dhin = dht - dc
            dct = _aten.tanh_backward(dc, c)
            dn2 = d_n2_t[t]
            _aten.sigmoid_backward.grad_input(dct * pc, r, grad_input=dn2[:, :D])
            torch.mul(dct, r, out=dn2[:, D : 2 * D])
            _aten.sigmoid_backward.grad_input(du, u, grad_input=dn2[:, 2 * D :])
            dg = _aten.native_layer_norm_backward(
                dn2, p["g"], [3 * D], p["m2"], p["r2"], ln2_w, ln2_b_u, [True, False, False])[0]
            dxh = dg @ w_gru
            dhin = dhin + dxh[:, H:]
            dn1 = _aten.silu_backward(dxh[:, :H], p["n1"])
            dx1 = _aten.native_layer_norm_backward(
                dn1, p["x1"], [H], p["m1"], p["r1"], ln1_w, ln1_b, [True, False, False])[0]
            dzin = dx1 @ w_in_z
            if t > 0:  # through the reset mix into step t - 1's outputs
                gh = torch.addcmul(g_h[t - 1], dhin, keep_t[t])
                gp = torch.addcmul(g_p[t - 1], dzin.view(B, stoch, classes),
                                   keep_t[t].unsqueeze(-1))
            for lst, v in zip((d_logits, d_n3, d_y1, d_g, d_n1, d_x1, d_hin, d_zin),
                              (dl, dn3, dy1, dg, dn1, dx1, dhin, dzin)):
                lst.append(v)
        dh, dz = dhin * keep_t[0], dzin * keep_t[0]  # into the state before step 0
        rev = lambda lst: torch.stack(lst[::-1], 0)  # noqa: E731 -- steps back in time order
        d_logits, d_n3, d_y1, d_g, d_n1, d_x1, d_hin, d_zin = map(
            rev, (d_logits, d_n3, d_y1, d_g, d_n1, d_x1, d_hin, d_zin))
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
        )


def _ln_params(d_out, x, mean, rstd, w, b):
    """Weight and bias gradients of a LayerNorm over all ``T x B`` rows at once."""
    n = x.shape[-1]
    _, gw, gb = _aten.native_layer_norm_backward(
        _flat(d_out), _flat(x), [n], _flat(mean), _flat(rstd), w, b, [False, True, True])
    return gw, gb
