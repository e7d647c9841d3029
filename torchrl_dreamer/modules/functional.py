"""Pure-tensor DreamerV3 helpers: symlog two-hot, unimix, categorical KL, lambda-returns.

These follow the 2023 DreamerV3 / sheeprl 0.8.4 semantics (see ``docs/dreamer.md``). They are
functions rather than modules so that losses, players and research variants share one definition.

Why our own two-hot: TorchRL's ``two_hot_encode`` / ``SymExpTwoHot`` implement the 2024 design
(bins ``symexp(linspace(-20, 20))`` and interpolation in raw space). The 2023 reference needs bins
``linspace(-20, 20, 255)`` *in symlog space* and interpolation there, which gives different
weights (e.g. target 1 -> {131: 0.5985, 132: 0.4015} instead of {131: 0.6173, 132: 0.3827}).
``symlog``/``symexp`` are TorchRL's own (they match the reference exactly).
"""

from __future__ import annotations

import math

import torch
from torchrl.modules.functional import symexp, symlog

from torchrl_dreamer.data.one_hot import one_hot  # re-exported: the package's one encoding

__all__ = [
    "at_least_fp32",
    "symlog",
    "symexp",
    "symlog_bins",
    "two_hot_weights",
    "two_hot_log_prob",
    "two_hot_mean",
    "unimix_logits",
    "unimix_probs",
    "straight_through_from_probs",
    "one_hot",
    "sample_categorical",
    "sample_one_hot",
    "straight_through_sample",
    "straight_through_mode",
    "categorical_kl",
    "lambda_returns",
    "replay_lambda_returns",
    "discount_weights",
]


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """Upcast half/bfloat16 tensors to fp32; fp32 and fp64 pass through unchanged."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def symlog_bins(
    num_bins: int = 255,
    low: float = -20.0,
    high: float = 20.0,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Two-hot bin centres, uniform in symlog space (``linspace(-20, 20, 255)`` by default).

    The fp32 ``linspace`` is made exactly antisymmetric (``(b - b.flip) / 2``, a change below
    1e-6) so that a uniform distribution predicts exactly 0, as the zero-initialised reward and
    critic heads should.

    Example:
        >>> b = symlog_bins()
        >>> round(float(b[1] - b[0]), 5)
        0.15748
    """
    if num_bins < 2:
        raise ValueError(f"num_bins must be >= 2, got {num_bins}")
    bins = torch.linspace(low, high, num_bins, device=device, dtype=torch.float64)
    if low == -high:
        bins = (bins - bins.flip(0)) / 2
    return bins.to(dtype)


def _two_hot_indices(
    x: torch.Tensor, bins: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Lower/upper bin indices and their weights for targets ``x`` (already in symlog space)."""
    n = bins.shape[-1]
    x = x.to(bins.dtype).contiguous()
    below = (torch.bucketize(x, bins, right=True) - 1).clamp(0, n - 1)
    above = (below + 1).clamp(max=n - 1)
    b_lo = bins[below]
    b_hi = bins[above]
    equal = below == above
    d_lo = torch.where(equal, torch.ones_like(x), (b_lo - x).abs())
    d_hi = torch.where(equal, torch.ones_like(x), (b_hi - x).abs())
    total = d_lo + d_hi
    return below, above, d_hi / total, d_lo / total


def two_hot_weights(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Two-hot target distribution ``[..., num_bins]`` of raw values ``x`` (symlog applied here).

    Values beyond the outer bins put all their mass on the outer bin.

    Example:
        >>> w = two_hot_weights(torch.tensor([1.0]), symlog_bins())
        >>> [round(float(v), 6) for v in w[0, 131:133]]
        [0.598515, 0.401485]
    """
    below, above, w_lo, w_hi = _two_hot_indices(symlog(x), bins)
    n = bins.shape[-1]
    out = one_hot(below, n, bins.dtype) * w_lo.unsqueeze(-1)
    return out + one_hot(above, n, bins.dtype) * w_hi.unsqueeze(-1)


def two_hot_log_prob(
    logits: torch.Tensor, x: torch.Tensor, bins: torch.Tensor, normalized: bool = False
) -> torch.Tensor:
    """Log-likelihood of raw targets ``x`` ``[...]`` under two-hot ``logits`` ``[..., bins]``.

    Computed with two gathers instead of a dense two-hot tensor (cheaper, same value). Pass
    ``normalized=True`` when ``logits`` are already log-probabilities (saves a log-softmax when
    scoring several targets).
    """
    log_p = at_least_fp32(logits)
    log_p = log_p if normalized else log_p.log_softmax(-1)
    below, above, w_lo, w_hi = _two_hot_indices(symlog(at_least_fp32(x.detach())), bins)
    lp_lo = log_p.gather(-1, below.unsqueeze(-1)).squeeze(-1)
    lp_hi = log_p.gather(-1, above.unsqueeze(-1)).squeeze(-1)
    return w_lo * lp_lo + w_hi * lp_hi


def two_hot_mean(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Predicted raw value ``symexp(sum(softmax(logits) * bins))`` of two-hot ``logits``.

    The sum pairs bins symmetrically around the centre, so symmetric distributions (e.g. the
    uniform one of a zero-initialised head) give exactly 0.
    """
    pb = at_least_fp32(logits).softmax(-1) * bins
    n = bins.shape[-1]
    half = n // 2
    paired = (pb[..., :half].flip(-1) + pb[..., n - half :]).sum(-1)
    if n % 2:
        paired = paired + pb[..., half]
    return symexp(paired)


def unimix_probs(logits: torch.Tensor, unimix: float) -> torch.Tensor:
    """``(1 - unimix) * softmax(logits) + unimix / C`` in (at least) fp32."""
    probs = at_least_fp32(logits).softmax(-1)
    if unimix <= 0:
        return probs
    return probs * (1.0 - unimix) + unimix / logits.shape[-1]


def straight_through_from_probs(probs: torch.Tensor, sample: bool = True) -> torch.Tensor:
    """One-hot sample (or argmax when ``sample=False``) of ``probs`` with straight-through grads.

    Without a graph (``probs`` does not require grad, e.g. imagination under ``no_grad``) the
    one-hot is returned as is: the straight-through terms would only add rounding noise.
    """
    plain = probs.detach() if probs.requires_grad else probs
    idx = sample_categorical(plain) if sample else plain.argmax(-1)
    hard = one_hot(idx, probs.shape[-1], probs.dtype)
    if not probs.requires_grad:
        return hard
    return hard + probs - plain


def unimix_logits(logits: torch.Tensor, unimix: float) -> torch.Tensor:
    """Mix ``1 - unimix`` of ``softmax(logits)`` with a uniform, returned as log-probabilities.

    Computed in fp32 (the mixture must not underflow under autocast).

    Example:
        >>> p = unimix_logits(torch.tensor([10.0, 0, 0, 0]), 0.01).exp()
        >>> [round(float(v), 6) for v in p]
        [0.992365, 0.002545, 0.002545, 0.002545]
    """
    logits = at_least_fp32(logits)
    if unimix <= 0:
        return logits.log_softmax(-1)
    probs = logits.softmax(-1)
    probs = (1.0 - unimix) * probs + unimix / logits.shape[-1]
    return probs.log()


def sample_categorical(
    probs: torch.Tensor,
    uniform: torch.Tensor | None = None,
    keepdim: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Indices ``[...]`` sampled from ``probs`` ``[..., C]`` by inverse CDF (one uniform each).

    Cheaper than ``torch.multinomial`` for many small categoricals, and free of host syncs.
    ``uniform``: the ``[..., 1]`` draws to use (e.g. a scan's, drawn for all its steps at once);
    by default drawn here from ``generator`` (the global one when None). ``keepdim``: return
    ``[..., 1]``.

    Inside a ``torch.compile`` graph the CDF is a masked sum and the index a count of the sums
    below ``u``, which the compiler fuses with what computes ``probs`` (compiled for the CPU,
    ``cumsum`` and ``searchsorted`` stay separate aten launches); the same index up to the
    rounding of the sums.
    """
    u = uniform
    if u is None:
        u = torch.rand(probs.shape[:-1] + (1,), device=probs.device, dtype=probs.dtype,
                       generator=generator)
    # first index whose CDF reaches u (= how many CDF entries are below u); searching the first
    # C - 1 sums only, a u past the last sum (rounding) lands on the last class without a clamp
    if torch.compiler.is_compiling():
        k = torch.arange(probs.shape[-1], device=probs.device)
        below = k.unsqueeze(-1) <= k[:-1]  # [j, i]: class j counts in the i-th sum
        cdf = (probs.unsqueeze(-1) * below).sum(-2)
        return (cdf < u).sum(-1, keepdim=keepdim)
    idx = torch.searchsorted(probs[..., :-1].cumsum(-1), u)
    return idx if keepdim else idx.squeeze(-1)


def sample_one_hot(
    probs: torch.Tensor,
    uniform: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A one-hot sample ``[..., C]`` of ``probs`` ``[..., C]`` (:func:`sample_categorical`'s
    index, encoded as :func:`one_hot` does), written into ``out`` when given (a zeroed tensor
    shaped like ``probs``: the fused scan's and rollout's reused buffers) or a new tensor of
    ``probs``' dtype. ``uniform`` and ``generator`` as for :func:`sample_categorical`.

    Example:
        >>> sample_one_hot(torch.tensor([[0.0, 1.0, 0.0]])).tolist()
        [[0.0, 1.0, 0.0]]
    """
    idx = sample_categorical(probs, uniform, generator=generator)
    return one_hot(idx, probs.shape[-1], probs.dtype, out=out)


def straight_through_sample(
    logits: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One-hot sample of ``Categorical(logits)`` with straight-through gradients (fp32), drawn
    from ``generator`` (the global one when None)."""
    probs = at_least_fp32(logits).softmax(-1)
    hard = sample_one_hot(probs.detach(), generator=generator)
    return hard + probs - probs.detach()


def straight_through_mode(logits: torch.Tensor) -> torch.Tensor:
    """One-hot argmax of ``logits`` with straight-through gradients (fp32)."""
    probs = at_least_fp32(logits).softmax(-1)
    hard = one_hot(probs.detach().argmax(-1), probs.shape[-1], probs.dtype)
    return hard + probs - probs.detach()


def categorical_kl(
    p_logits: torch.Tensor, q_logits: torch.Tensor, normalized: bool = False
) -> torch.Tensor:
    """``KL(p || q)`` of categoricals ``[..., S, C]``, summed over S and C.

    Closed form ``sum p (log p - log q)``, as sheeprl 0.8.4. Any logits work; pass
    ``normalized=True`` when both are already log-probabilities (skips two log-softmaxes).
    """
    p_logits = at_least_fp32(p_logits)
    q_logits = at_least_fp32(q_logits)
    if not normalized:
        p_logits = p_logits.log_softmax(-1)
        q_logits = q_logits.log_softmax(-1)
    return (p_logits.exp() * (p_logits - q_logits)).sum((-2, -1))


def lambda_returns(
    rewards: torch.Tensor,
    values: torch.Tensor,
    continues: torch.Tensor,
    lmbda: float | torch.Tensor = 0.95,
) -> torch.Tensor:
    """TD(lambda) returns over a time-major horizon ``[H, ...]`` (``lmbda`` a float, or a
    tensor of the rewards' shape: one lambda per step).

    ``R_t = r_t + c_t [(1 - lambda) v_t + lambda R_{t+1}]`` with ``R_{H-1}`` bootstrapped from
    ``v_{H-1}``. Inputs are already shifted: ``rewards[t]``, ``values[t]`` and ``continues[t]``
    (continue flag times gamma) belong to step ``t + 1`` of the imagined trajectory, as in the
    reference (``rewards[1:]``, ``values[1:]``, ``gamma * continues[1:]``).

    Example (golden values of the reference):
        >>> g = 1 - 1 / 333
        >>> r = lambda_returns(torch.tensor([0.5, 1, -1]), torch.tensor([2.0, 3, 4]),
        ...                    torch.full((3,), g))
        >>> [round(float(v), 5) for v in r]
        [4.36898, 3.97961, 2.98799]
    """
    if not (rewards.shape == values.shape == continues.shape):
        raise ValueError(
            f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and continues "
            f"{tuple(continues.shape)} must have the same time-major shape"
        )
    interm = (rewards + continues * values * (1.0 - lmbda)).unbind(0)
    decay = (continues * lmbda).unbind(0)  # one op each instead of a select per step
    out = []
    last = values[-1]
    for t in range(rewards.shape[0] - 1, -1, -1):
        last = torch.addcmul(interm[t], decay[t], last)
        out.append(last)
    out.reverse()
    return torch.stack(out, 0)


def replay_lambda_returns(
    rewards: torch.Tensor,
    continues: torch.Tensor,
    is_first: torch.Tensor,
    boot: torch.Tensor,
    gamma: float,
    lmbda: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """lambda-returns along replay rows ``[K, ...]`` and their weights, both ``[K-1, ...]``.

    Row ``t`` holds the reward and continue flag of the transition into it and whether it
    starts an episode; ``boot[t]`` is a return estimate of row ``t``'s state (the imagined
    lambda-return from it). The return of row ``t`` is ``R_t = r_{t+1} + gamma c_{t+1}
    [(1 - lambda) boot_{t+1} + lambda R_{t+1}]``, ``R_{K-1} = boot_{K-1}``; lambda is cut to
    0 where row ``t+2`` starts an episode (``R_{t+1}`` would belong to the next one), and a
    row whose next row starts an episode gets weight 0 (its transition is not in the data).
    DreamerV3 2024's ``repval`` targets, in our row layout.

    Example:
        >>> R, w = replay_lambda_returns(torch.tensor([0.0, 1.0, 0.0, 2.0]), torch.ones(4),
        ...     torch.tensor([True, False, True, False]), torch.tensor([5.0, 6.0, 7.0, 8.0]),
        ...     gamma=0.5, lmbda=1.0)
        >>> R.tolist(), w.tolist()  # row 0: 1 + 0.5 * 6, lambda cut (row 2 starts an episode)
        ([4.0, 3.0, 6.0], [1.0, 0.0, 1.0])
    """
    if not (rewards.shape == continues.shape == is_first.shape == boot.shape):
        raise ValueError(
            f"rewards {tuple(rewards.shape)}, continues {tuple(continues.shape)}, is_first "
            f"{tuple(is_first.shape)} and boot {tuple(boot.shape)} must have one [K, ...] shape"
        )
    if rewards.shape[0] < 2:
        raise ValueError(f"replay returns need at least 2 rows, got {rewards.shape[0]}")
    first = is_first.to(rewards.dtype)
    lam = torch.cat([1.0 - first[2:], torch.ones_like(first[:1])], 0) * lmbda
    returns = lambda_returns(rewards[1:], boot[1:], continues[1:] * gamma, lam)
    return returns, 1.0 - first[1:]


def discount_weights(continues: torch.Tensor, gamma: float) -> torch.Tensor:
    """Per-step loss weights ``cumprod(gamma * c) / gamma`` over time-major ``[H+1, ...]``.

    Example:
        >>> w = discount_weights(torch.ones(16), 1 - 1 / 333)
        >>> round(float(w[15]), 6), round(float(w[:15].mean()), 6)
        (0.95589, 0.97925)
    """
    return torch.cumprod(continues * gamma, 0) / gamma


_LN255 = math.log(255.0)
