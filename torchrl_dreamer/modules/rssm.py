"""Recurrent state-space model of DreamerV3 (2023 design, sheeprl 0.8.4 semantics).

State: deterministic ``h`` ``[..., deter]`` and stochastic ``z`` ``[..., stoch * classes]``
(flattened one-hots). One step: ``x = MLP([z, a])``, ``h' = LayerNormGRU(x, h)``,
prior ``p(z'|h')``, posterior ``q(z'|h', e)``; logits get 1% unimix, samples are one-hot with
straight-through gradients.

Why not ``torchrl.modules.RSSMRolloutV3``: it is batch-major, resets to a *zero* state (no
learnable ``tanh`` initial state, no prior-mode ``z``), and offers a plain GRUCell or an RMSNorm
block GRU rather than the LayerNorm GRU. Speed choices (same maths as the reference): the
observation half of the posterior's first layer is applied to the whole sequence at once, and
priors are computed for all steps after the scan.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, NamedTuple, get_args

import torch
import torch.nn.functional as F
from torch import nn

from torchrl_dreamer.modules.functional import (
    straight_through_from_probs,
    straight_through_mode,
    straight_through_sample,
    unimix_logits,
    unimix_probs,
)
from torchrl_dreamer.modules.heads import DreamerV3Actor
from torchrl_dreamer.modules.init import hafner_init_, uniform_init_
from torchrl_dreamer.modules.latent import latent_of
from torchrl_dreamer.modules.layers import LN_EPS, MLP, LayerNormGRUCell
from torchrl_dreamer.modules.rssm_imagine import compile_rollout_step
from torchrl_dreamer.modules.rssm_scan import compile_scan_steps, fused_observe_scan

__all__ = ["KERNELS", "Kernel", "RSSM", "uses_fused_imagine"]

#: The step implementations :class:`RSSM` can run (its ``kernel`` argument): ``"auto"`` the
#: fused posterior scan and graph-free rollout wherever they reproduce the step maths, else
#: the generic step-by-step paths; ``"eager"`` always the generic paths; ``"fused"`` the
#: fused paths, an error where the model cannot run them.
Kernel = Literal["auto", "eager", "fused"]
KERNELS: tuple[str, ...] = get_args(Kernel)


class _LatentHead(nn.Module):
    """``Linear(no bias) -> LN -> SiLU -> Linear`` producing ``[..., stoch, classes]`` logits."""

    def __init__(self, in_features: int, hidden: int, stoch: int, classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, hidden, bias=False)
        self.norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.out = nn.Linear(hidden, stoch * classes)
        self.stoch, self.classes = stoch, classes

    def tail(self, x: torch.Tensor, out_t: torch.Tensor | None = None) -> torch.Tensor:
        """Logits from the first layer's output ``x``; ``out_t``: ``self.out.weight.t()`` given
        by a scan for 2-D ``x`` (one ``addmm`` per step instead of a transpose and an ``addmm``)."""
        y = F.silu(self.norm(x))
        y = self.out(y) if out_t is None else torch.addmm(self.out.bias, y, out_t)
        return y.reshape(*y.shape[:-1], self.stoch, self.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(self.linear(x))


class RSSM(nn.Module):
    """LayerNorm-GRU RSSM with learnable ``tanh`` initial state and discrete latents.

    Args:
        action_dim: size of the (one-hot or continuous) action vector.
        embed_dim: size of the observation embedding.
        deter: GRU state size. hidden: MLP width. stoch, classes: latent shape (32x32).
        unimix: uniform mix of prior/posterior probabilities (0.01).
        kernel: (keyword only) which implementation runs the posterior scan (:meth:`observe`)
            and a discrete actor's imagination (see :data:`KERNELS`): ``"auto"`` (default) the
            fused paths wherever they apply, else the generic step-by-step ones; ``"eager"``
            always the generic paths, which call the step methods under autograd; ``"fused"``
            the fused paths, and a ``ValueError`` where they cannot stand in for the step
            maths: at construction for a class whose :attr:`fused_steps` is false, at a call
            for an instance whose step modules or :attr:`fused_steps` were changed since. In
            every mode, a call under autocast or on a state that is not fp32/fp64 (and an
            imagination with a graph, a continuous actor or one that overrides its sampling)
            runs the generic path, the only one there is for it. Read back as :attr:`kernel`.

    Fast paths: :meth:`observe` can run the fused posterior scan
    (:mod:`~torchrl_dreamer.modules.rssm_scan`) and a discrete actor's imagination the
    graph-free rollout (:mod:`~torchrl_dreamer.modules.rssm_imagine`). Both re-implement this
    class's step maths (:meth:`sample_probs`, the GRU cell, the observe and imagine step bodies)
    instead of calling those methods, so they run only where the class attribute
    :attr:`fused_steps` is true. ``RSSM`` sets it; a subclass starts with ``False`` (the generic
    per-step path, which calls its methods, whatever it overrides) and sets
    ``fused_steps = True`` in its class body to state that its step maths is this class's own
    (a subclass that only adds methods, say). An instance may set it too (``False`` after
    patching a step method on that instance). ``kernel`` picks between the paths (above);
    :meth:`uses_fused_scan` and :func:`uses_fused_imagine` say which path runs.

    Example:
        >>> rssm = RSSM(action_dim=4, embed_dim=16, deter=32, hidden=32, stoch=4, classes=4)
        >>> out = rssm.observe(torch.zeros(5, 2, 16), torch.zeros(5, 2, 4),
        ...                    torch.ones(5, 2, dtype=torch.bool))
        >>> out["h"].shape, out["post_logits"].shape
        (torch.Size([5, 2, 32]), torch.Size([5, 2, 4, 4]))

        The switch: a subclass that changes the step gets the generic path; one that keeps the
        step maths opts back in.

        >>> class HalfCell(RSSM):  # a research variant: the generic path calls its cell
        ...     def _cell(self, x_pre, h, w):
        ...         return super()._cell(x_pre, h, w) * 0.5
        >>> class Logged(RSSM):
        ...     fused_steps = True  # same step maths as RSSM: keep the fused paths
        >>> RSSM.fused_steps, HalfCell.fused_steps, Logged.fused_steps
        (True, False, True)
        >>> h = torch.zeros(2, 32)
        >>> rssm.uses_fused_scan(h), HalfCell(4, 16, 32, 32, 4, 4).uses_fused_scan(h)
        (True, False)

        The kernel choice: ``"eager"`` turns the fused paths off, ``"fused"`` insists on them.

        >>> eager = RSSM(4, 16, 32, 32, 4, 4, kernel="eager")
        >>> eager.kernel, eager.uses_fused_scan(h)
        ('eager', False)
        >>> HalfCell(4, 16, 32, 32, 4, 4, kernel="fused")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: HalfCell(kernel='fused') is invalid: ...
    """

    #: Whether the fused scan and the graph-free rollout may stand in for this class's step
    #: methods (they reproduce ``RSSM``'s own step maths). ``True`` here; every subclass gets
    #: ``False`` unless its class body sets it (see :meth:`__init_subclass__`).
    fused_steps: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs) -> None:
        """A subclass that does not set :attr:`fused_steps` in its own body runs the generic
        per-step path: its methods are called, whatever it overrides."""
        super().__init_subclass__(**kwargs)
        if "fused_steps" not in cls.__dict__:
            cls.fused_steps = False

    def __init__(
        self,
        action_dim: int,
        embed_dim: int,
        deter: int = 512,
        hidden: int = 512,
        stoch: int = 32,
        classes: int = 32,
        unimix: float = 0.01,
        *,
        kernel: Kernel = "auto",
    ) -> None:
        if kernel not in KERNELS:
            raise ValueError(
                f"{type(self).__name__}(kernel={kernel!r}) is invalid: choose one of "
                + ", ".join(repr(k) for k in KERNELS)
            )
        if kernel == "fused" and not self.fused_steps:
            raise ValueError(
                f"{type(self).__name__}(kernel='fused') is invalid: the fused posterior scan "
                f"and imagination reproduce RSSM's own step maths, and {type(self).__name__} "
                "has fused_steps = False (a subclass gets it unless its class body sets it). "
                "Set fused_steps = True in its class body if its step maths is RSSM's own, or "
                "pass kernel='auto' (fused where it applies) or kernel='eager'."
            )
        super().__init__()
        self._kernel: str = kernel
        self.action_dim, self.embed_dim = action_dim, embed_dim
        self.deter, self.hidden, self.stoch, self.classes = deter, hidden, stoch, classes
        self.stoch_flat = stoch * classes
        self.unimix = unimix
        self.input_mlp = MLP(self.stoch_flat + action_dim, hidden, 1)
        self.gru = LayerNormGRUCell(hidden, deter)
        self.prior = _LatentHead(deter, hidden, stoch, classes)
        # posterior input is [h, embed]; its first weight is split by column in ``observe``.
        self.posterior = _LatentHead(deter + embed_dim, hidden, stoch, classes)
        self.h0 = nn.Parameter(torch.zeros(deter))
        # compiled scan bodies (compile_steps); plain attributes, not part of the state dict:
        # the autograd bodies of the eager scan and rollout, the fused scan's forward and
        # backward steps, the graph-free rollout's step
        self._compiled_observe = self._compiled_imagine = None
        self._compiled_scan_steps = self._compiled_rollout_step = None
        hafner_init_(self)
        uniform_init_(self.prior.out, 1.0)
        uniform_init_(self.posterior.out, 1.0)

    def __getstate__(self) -> dict:
        # copies (e.g. the player's) get eager bodies: a compiled body is bound to this module
        state = super().__getstate__()
        return {**state, "_compiled_observe": None, "_compiled_imagine": None,
                "_compiled_scan_steps": None, "_compiled_rollout_step": None}

    @property
    def kernel(self) -> str:
        """The step implementation chosen at construction: ``"auto"``, ``"eager"`` or
        ``"fused"`` (see the ``kernel`` argument). Read-only (only the setter of the older
        :attr:`fused_scan` flag changes it).

        Example:
            >>> RSSM(4, 16, 32, 32, 4, 4).kernel, RSSM(4, 16, 32, 32, 4, 4, kernel="eager").kernel
            ('auto', 'eager')
        """
        return self._kernel

    @property
    def fused_scan(self) -> bool:
        """Whether the fused paths may run: ``kernel != "eager"``. Kept for code that set it
        before ``kernel`` existed: setting ``False`` makes :attr:`kernel` ``"eager"`` (which
        also turns the fused imagination off, not only the fused scan), ``True`` makes an
        ``"eager"`` kernel ``"auto"`` and leaves the others as they are. New code passes
        ``kernel`` to the constructor.

        Example:
            >>> rssm = RSSM(4, 16, 32, 32, 4, 4)
            >>> rssm.fused_scan = False
            >>> rssm.kernel
            'eager'
            >>> rssm.fused_scan = True
            >>> rssm.kernel, rssm.fused_scan
            ('auto', True)
        """
        return self._kernel != "eager"

    @fused_scan.setter
    def fused_scan(self, value: bool) -> None:
        if not value:
            self._kernel = "eager"
        elif self._kernel == "eager":
            self._kernel = "auto"

    @property
    def compiled_scan_steps(self) -> tuple | None:
        """The fused scan's compiled ``(forward step, backward step)`` after
        :meth:`compile_steps`, ``None`` before (the scan then runs the eager steps)."""
        return self._compiled_scan_steps

    @property
    def compiled_rollout_step(self) -> Any:
        """The graph-free rollout's compiled step after :meth:`compile_steps`, ``None``
        before (the rollout then runs the eager step)."""
        return self._compiled_rollout_step

    @property
    def latent_dim(self) -> int:
        """Size of the feature ``[z, h]`` fed to heads and the actor."""
        return self.stoch_flat + self.deter

    # ------------------------------------------------------------------ pieces
    def prior_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Unimixed prior log-probs ``[..., stoch, classes]`` from ``h``."""
        return unimix_logits(self.prior(h), self.unimix)

    def posterior_logits(self, h: torch.Tensor, embed: torch.Tensor) -> torch.Tensor:
        """Unimixed posterior log-probs from ``h`` and the observation embedding."""
        return unimix_logits(self.posterior(torch.cat([h, embed], -1)), self.unimix)

    def sample(
        self, logits: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Straight-through one-hot sample, flattened to ``[..., stoch * classes]``, drawn from
        ``generator`` (the global one when None)."""
        return straight_through_sample(logits, generator).flatten(-2)

    def sample_probs(self, probs: torch.Tensor) -> torch.Tensor:
        """Like :meth:`sample` but from (unimixed) probabilities (skips a softmax)."""
        return straight_through_from_probs(probs).flatten(-2)

    def recurrent(self, z: torch.Tensor, action: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """GRU step ``h' = GRU(MLP([z, a]), h)``."""
        return self.gru(self.input_mlp(torch.cat([z, action.to(z.dtype)], -1)), h)

    def initial_state(
        self, batch_shape: tuple[int, ...] | torch.Size
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tanh(h0), prior mode)`` expanded to ``batch_shape`` (fresh, writable tensors)."""
        h = torch.tanh(self.h0)
        z = straight_through_mode(self.prior_logits(h)).flatten(-2)
        shape = tuple(batch_shape)
        return h.expand(*shape, -1).clone(), z.expand(*shape, -1).clone()

    def img_step(
        self, h: torch.Tensor, z: torch.Tensor, action: torch.Tensor, sample: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One imagination step: returns ``(h', z')`` with ``z'`` from the prior."""
        h = self.recurrent(z, action, h)
        probs = unimix_probs(self.prior(h), self.unimix)
        return h, straight_through_from_probs(probs, sample).flatten(-2)

    def obs_step(
        self,
        h: torch.Tensor,
        z: torch.Tensor,
        action: torch.Tensor,
        embed: torch.Tensor,
        is_first: torch.Tensor | None = None,
        sample: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One filtering step (resetting where ``is_first``): returns ``(h', z', post_logits)``.

        ``generator`` draws the posterior sample (the global one when None; an acting thread
        passes its own, see :class:`~torchrl_dreamer.modules.DreamerPlayer`)."""
        if is_first is not None:
            h, z, action = self._reset(h, z, action, is_first)
        h = self.recurrent(z, action, h)
        logits = self.posterior_logits(h, embed)
        z = self.sample(logits, generator) if sample else straight_through_mode(logits).flatten(-2)
        return h, z, logits

    def _reset(self, h, z, action, is_first):
        m = is_first.to(h.dtype).unsqueeze(-1)
        h0, z0 = self.initial_state(())
        keep = 1.0 - m
        return h * keep + h0 * m, z * keep + z0 * m, action * keep.to(action.dtype)

    # ------------------------------------------------------------------ scan
    def scan_weights(self) -> _ScanWeights:
        """Transposed / split weights a scan uses at every step, taken once per scan (read by
        the eager step bodies and by the fused rollout of
        :mod:`~torchrl_dreamer.modules.rssm_imagine`)."""
        w_in = self.input_mlp[0].weight
        w_post = self.posterior.linear.weight
        return _ScanWeights(
            in_t=w_in.t(),
            in_z_t=w_in[:, : self.stoch_flat].t(),
            in_a=w_in[:, self.stoch_flat :],
            gru_t=self.gru.linear.weight.t(),
            post_h_t=w_post[:, : self.deter].t(),
            post_e=w_post[:, self.deter :],
            post_out_t=self.posterior.out.weight.t(),
            prior_t=self.prior.linear.weight.t(),
            prior_out_t=self.prior.out.weight.t(),
        )

    def _cell(self, x_pre: torch.Tensor, h: torch.Tensor, w: _ScanWeights) -> torch.Tensor:
        """GRU step from the input MLP's pre-activation ``x_pre`` (its ``Linear`` already done)."""
        x = F.silu(self.input_mlp[1](x_pre))
        return self.gru.step(x, h, w.gru_t)

    def observe(
        self,
        embed: torch.Tensor,
        prev_action: torch.Tensor,
        is_first: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Time-major posterior scan over ``[T, B]``.

        Args:
            embed: ``[T, B, E]`` observation embeddings.
            prev_action: ``[T, B, A]``; row ``t`` is the action taken *before* ``o_t``.
            is_first: ``[T, B]`` bool; at flagged steps the action is zeroed, ``h`` becomes
                ``tanh(h0)`` and ``z`` the prior mode of that ``h`` before the step.
            state: optional ``(h, z)`` ``[B, ...]`` to start from (default: initial state).

        Returns:
            dict with ``h``, ``z`` ``[T, B, ...]``, ``post_logits`` and ``prior_logits``
            ``[T, B, stoch, classes]`` (unimixed log-probs).

        Everything that does not depend on the previous step runs once over the whole sequence
        before the loop: the observation and action halves of the posterior's and the input
        MLP's first layers, the reset masks and values, the weight transposes; the loop body
        is one ``addmm`` per layer plus the norms, gates and the sample.
        """
        T, B = embed.shape[:2]
        if prev_action.shape[:2] != (T, B) or is_first.shape[:2] != (T, B):
            raise ValueError(
                f"embed {tuple(embed.shape)}, prev_action {tuple(prev_action.shape)} and is_first "
                f"{tuple(is_first.shape)} must share the time-major [T, B] leading dims"
            )
        h, z = self.initial_state((B,)) if state is None else state
        h0, z0 = self.initial_state(())
        w = self.scan_weights()
        mask = is_first.to(h.dtype).unsqueeze(-1)
        keep = 1.0 - mask
        e_proj = F.linear(embed, w.post_e)  # whole sequence at once
        a_proj = F.linear(prev_action.to(h.dtype) * keep, w.in_a)
        # reset values depend only on parameters: precompute the mixed-in part.
        h_reset, z_reset = h0 * mask, z0 * mask
        if self.uses_fused_scan(h):
            h_all, z_all, probs_all = fused_observe_scan(
                self, h, z, keep, h_reset, z_reset, a_proj, e_proj
            )
        else:
            h_all, z_all, probs_all = self._eager_scan(
                h, z, keep, h_reset, z_reset, a_proj, e_proj, w
            )
        return {
            "h": h_all,
            "z": z_all,
            "post_logits": probs_all.log(),
            "prior_logits": self.prior_logits(h_all),
        }

    def _eager_scan(self, h, z, keep, h_reset, z_reset, a_proj, e_proj, w):
        """:meth:`observe`'s loop over its (eager or compiled) step body, under autograd:
        ``(h [T, B, D], z [T, B, S*C], probs [T, B, S, C])``."""
        steps = zip(keep.unbind(0), h_reset.unbind(0), z_reset.unbind(0), a_proj.unbind(0),
                    e_proj.unbind(0))
        hs, zs, probs_all = [], [], []
        body = self._observe_body if self._compiled_observe is None else self._compiled_observe
        for keep_t, h_reset_t, z_reset_t, a_t, e_t in steps:
            h, z, probs = body(h, z, keep_t, h_reset_t, z_reset_t, a_t, e_t, w)
            hs.append(h)
            zs.append(z)
            probs_all.append(probs)
        return torch.stack(hs, 0), torch.stack(zs, 0), torch.stack(probs_all, 0)

    def uses_fused_scan(self, h: torch.Tensor) -> bool:
        """Whether :meth:`observe` runs :func:`fused_observe_scan` (with compiled steps after
        :meth:`compile_steps`): when :attr:`kernel` is not ``"eager"``, :attr:`fused_steps` is
        on, the GRU and posterior modules are the ones built here (not swapped), no autocast is
        active and the state is fp32/fp64. Otherwise the eager scan runs, which calls
        ``sample_probs``, ``_cell`` and ``_observe_body``.

        Raises:
            ValueError: :attr:`kernel` is ``"fused"`` and :attr:`fused_steps` is off or a step
                module was swapped (the fused scan would not run this model's maths).
        """
        if self.kernel == "eager":
            return False
        return _own_steps(self, "posterior") and _plain_precision(h)

    def imagine(
        self,
        h: torch.Tensor,
        z: torch.Tensor,
        policy,
        horizon: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Roll the prior forward ``horizon`` steps from ``(h, z)`` ``[N, ...]`` under ``policy``.

        ``policy(latent) -> action`` is called on ``[z, h]`` of states ``0..H-1`` (the action
        of the last state is never used by the losses, so it is not computed).

        Returns:
            ``latents [H+1, N, latent_dim]`` and ``actions [H, N, A]`` (action ``t`` leads from
            state ``t`` to ``t + 1``).
        """
        w = self.scan_weights()
        body = self._imagine_body if self._compiled_imagine is None else self._compiled_imagine
        latent = latent_of(z, h)
        latents, actions = [latent], []
        for _ in range(horizon):
            a = policy(latent)
            actions.append(a)
            h, z, latent = body(h, z, a, w)
            latents.append(latent)
        return torch.stack(latents, 0), torch.stack(actions, 0)

    # ------------------------------------------------------------------ scan bodies
    def _observe_body(
        self,
        h: torch.Tensor,
        z: torch.Tensor,
        keep: torch.Tensor,
        h_reset: torch.Tensor,
        z_reset: torch.Tensor,
        a_proj: torch.Tensor,
        e_proj: torch.Tensor,
        w: _ScanWeights,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of :meth:`observe`: ``(h, z, unimixed posterior probs)``."""
        h = torch.addcmul(h_reset, h, keep)  # h * keep + h0 * mask
        z = torch.addcmul(z_reset, z, keep)
        h = self._cell(torch.addmm(a_proj, z, w.in_z_t), h, w)
        logits = self.posterior.tail(torch.addmm(e_proj, h, w.post_h_t), w.post_out_t)
        probs = unimix_probs(logits, self.unimix)
        return h, self.sample_probs(probs), probs

    def _imagine_body(
        self, h: torch.Tensor, z: torch.Tensor, action: torch.Tensor, w: _ScanWeights
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of :meth:`imagine`: ``(h, z, [z, h])`` with ``z`` sampled from the prior."""
        x_pre = torch.cat([z, action.to(z.dtype)], -1) @ w.in_t
        h = self._cell(x_pre, h, w)
        logits = self.prior.tail(h @ w.prior_t, w.prior_out_t)
        z = straight_through_from_probs(unimix_probs(logits, self.unimix)).flatten(-2)
        return h, z, latent_of(z, h)

    def compile_steps(self, mode: str | None = "default", **kwargs) -> RSSM:
        """``torch.compile`` the per-step bodies of :meth:`observe` and :meth:`imagine`.

        Compiled: the fused posterior scan's graph-free forward and backward steps
        (:mod:`~torchrl_dreamer.modules.rssm_scan`), the graph-free rollout's step
        (:mod:`~torchrl_dreamer.modules.rssm_imagine`), and the autograd bodies of the eager
        scan and rollout that run when those fused paths cannot (overridden pieces, autocast,
        a continuous actor). Each compiles at its first call. Shapes are static
        (``dynamic=False``): one graph per batch size. ``mode=None`` restores the eager
        bodies; ``kwargs`` go to ``torch.compile`` (e.g. ``backend="aot_eager"``, which takes no
        mode).

        The step bodies never use CUDA graphs: a step's outputs are kept (for the backward,
        or as the next step's input) past the next call, and a replayed CUDA graph would
        overwrite them; ``"reduce-overhead"`` compiles them with ``"default"`` and
        ``"max-autotune"`` with ``"max-autotune-no-cudagraphs"``. The fused steps take the
        uniforms drawn once per scan, so they sample what the eager steps sample (up to the
        compiler's rounding of the probabilities); the eager autograd bodies, compiled, draw
        from the compiler's random stream (same distribution, different samples).
        Returns ``self``.

        Example:
            >>> rssm = RSSM(action_dim=4, embed_dim=16, deter=32, hidden=32, stoch=4, classes=4)
            >>> rssm.compile_steps(None)._compiled_observe is None
            True
        """
        if mode is None:
            self._compiled_observe = self._compiled_imagine = None
            self._compiled_scan_steps = self._compiled_rollout_step = None
            return self
        kwargs.setdefault("dynamic", False)
        if kwargs.get("backend", "inductor") == "inductor":  # modes are inductor's
            kwargs["mode"] = NO_CUDA_GRAPH_MODES.get(mode, mode)
        self._compiled_observe = torch.compile(self._observe_body, **kwargs)
        self._compiled_imagine = torch.compile(self._imagine_body, **kwargs)
        self._compiled_scan_steps = compile_scan_steps(**kwargs)
        self._compiled_rollout_step = compile_rollout_step(**kwargs)
        return self


#: each ``torch.compile`` mode that uses CUDA graphs, and the same mode without them: for the
#: per-step bodies, whose outputs outlive a replay (:meth:`RSSM.compile_steps`), and for code
#: captured inside a larger CUDA graph (``DreamerV3Learner(capture=True)``)
NO_CUDA_GRAPH_MODES = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def uses_fused_imagine(rssm: nn.Module, actor: nn.Module, h: torch.Tensor) -> bool:
    """Whether :func:`~torchrl_dreamer.modules.rssm_imagine.fused_imagine` reproduces
    ``rssm.imagine(h, z, actor.sample_action, H)``: no graph is being recorded, the RSSM is an
    :class:`RSSM` with :attr:`RSSM.fused_steps` on (its ``imagine``, ``_imagine_body`` and
    ``_cell`` are ``RSSM``'s maths) and its own modules (not swapped), the actor
    a discrete :class:`~torchrl_dreamer.modules.heads.DreamerV3Actor` whose ``forward`` and
    ``sample_action`` are that class's own and whose modules are not swapped, no autocast is
    active and the state is fp32/fp64 (after :meth:`RSSM.compile_steps` the rollout's step runs
    compiled), and :attr:`RSSM.kernel` is not ``"eager"``. Otherwise the eager rollout runs,
    which calls those pieces.

    Raises:
        ValueError: ``rssm.kernel`` is ``"fused"`` and its :attr:`~RSSM.fused_steps` is off or
            a step module was swapped (the conditions on the actor, the precision and the graph
            are the call's: there the eager rollout runs, whatever the kernel).
    """
    if not isinstance(rssm, RSSM) or rssm.kernel == "eager":
        return False
    return (
        _own_steps(rssm, "prior")
        and not torch.is_grad_enabled()
        and isinstance(actor, DreamerV3Actor)
        and _own_pieces(actor, DreamerV3Actor, ("forward", "sample_action"))
        and actor.discrete
        and type(actor.net) is MLP
        and type(actor.out) is nn.Linear
        and _plain_precision(h)
    )


def _own_steps(rssm: RSSM, head: str) -> bool:
    """Whether ``rssm`` steps with the maths the fused paths implement: :attr:`~RSSM.fused_steps`
    on, and the GRU, input MLP and ``head`` (``"posterior"`` for the scan, ``"prior"`` for the
    imagination) that :class:`RSSM` builds. Raises where it does not but ``rssm.kernel`` is
    ``"fused"``."""
    own = (
        rssm.fused_steps
        and type(rssm.gru) is LayerNormGRUCell
        and type(getattr(rssm, head)) is _LatentHead
        and len(rssm.input_mlp) == 3
    )
    if not own and rssm.kernel == "fused":
        raise ValueError(
            f"{type(rssm).__name__}(kernel='fused') cannot run its fused paths: they need "
            f"fused_steps on (it is {rssm.fused_steps}) and the GRU, input MLP and {head} head "
            "that RSSM builds. Keep the step maths RSSM's own, or build it with "
            "kernel='auto' (fused where it applies) or kernel='eager'."
        )
    return bool(own)


def _own_pieces(obj: nn.Module, cls: type, names: tuple[str, ...]) -> bool:
    """Whether ``obj`` runs ``cls``'s own public methods ``names`` (no subclass or instance
    override): the actor's condition for the fused rollout, which stands in for them."""
    return all(
        name not in obj.__dict__ and getattr(type(obj), name) is getattr(cls, name)
        for name in names
    )


def _plain_precision(h: torch.Tensor) -> bool:
    """Whether a fused scan may run on state ``h``: fp32/fp64 and no autocast active."""
    return h.dtype in (torch.float32, torch.float64) and not torch.is_autocast_enabled(
        h.device.type
    )


class _ScanWeights(NamedTuple):
    """Per-scan views of the RSSM weights (see :meth:`RSSM.scan_weights`)."""

    in_t: torch.Tensor
    in_z_t: torch.Tensor
    in_a: torch.Tensor
    gru_t: torch.Tensor
    post_h_t: torch.Tensor
    post_e: torch.Tensor
    post_out_t: torch.Tensor
    prior_t: torch.Tensor
    prior_out_t: torch.Tensor
