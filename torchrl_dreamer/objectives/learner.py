"""``DreamerV3Learner``: one full DreamerV3 update (world model, then actor, then critic).

Owns the three losses, their Adam optimizers (:class:`DreamerV3LearnerConfig`: sheeprl settings
by default), global-norm gradient clipping and the slow-critic EMA (advanced before each gradient
step, hard copy at step 0). The collector calls :meth:`DreamerV3Learner.update` with a replay
sample and gets a TensorDict of detached scalar metrics back (no host sync inside).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, replace
from typing import Literal, get_args

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torch.profiler import record_function

from torchrl_dreamer.modules.encoders import ImageDecoder, ImageEncoder
from torchrl_dreamer.modules.heads import DreamerV3Actor, DreamerV3Critic
from torchrl_dreamer.modules.rssm import NO_CUDA_GRAPH_MODES
from torchrl_dreamer.modules.world_model import WorldModel
from torchrl_dreamer.objectives.actor import DreamerV3ActorLoss
from torchrl_dreamer.objectives.config import LOSS_PRESETS, DreamerV3LossConfig
from torchrl_dreamer.objectives.critic import DreamerV3CriticLoss
from torchrl_dreamer.objectives.utils import total_loss
from torchrl_dreamer.objectives.world_model import DreamerV3WorldModelLoss

__all__ = [
    "CAPTURE_WARMUP",
    "COMPILE_MODES",
    "CompileMode",
    "DreamerV3Learner",
    "DreamerV3LearnerConfig",
    "LEARNER_PRESETS",
    "resolve_acceleration",
]


@dataclass(frozen=True)
class DreamerV3LearnerConfig:
    """Optimizer settings of :class:`DreamerV3Learner` (the losses' are
    :class:`~torchrl_dreamer.objectives.DreamerV3LossConfig`).

    Defaults: sheeprl 0.8.4 / DreamerV3 2023, Adam world model lr 1e-4 / eps 1e-8 / clip 1000,
    actor and critic lr 3e-5 / eps 1e-5 / clip 100 (global gradient norm).

    ``world_model_warmup`` (0 in the reference): the first that many gradient steps train the
    world model only (no imagination, no actor or critic step). DreamerV3 has no such phase; it
    is the "pretrain" phase of DreamerV1/V2 run on the first replay. It keeps the actor from
    fitting a world model that cannot yet see the small sprites of our games, and each warm-up
    step costs about half a full one (see ``docs/learning_results.md``).

    Example:
        >>> LEARNER_PRESETS["fast-pixels"].wm_lr
        0.001
    """

    wm_lr: float = 1e-4
    wm_eps: float = 1e-8
    wm_clip: float = 1000.0
    actor_lr: float = 3e-5
    actor_eps: float = 1e-5
    actor_clip: float = 100.0
    critic_lr: float = 3e-5
    critic_eps: float = 1e-5
    critic_clip: float = 100.0
    world_model_warmup: int = 0

    def with_(self, **kwargs) -> DreamerV3LearnerConfig:
        """Copy with some fields changed."""
        return replace(self, **kwargs)


#: Learner presets, by the names of the loss presets they pair with (``TrainConfig.loss_preset``
#: picks both): ``sheeprl``; ``sheeprl-0.5`` (sheeprl 0.5's actor/critic lr 8e-5; 0.8.4 and the
#: 2023 official code use 3e-5); ``fast`` (3x / 3.3x / 10x the world-model / actor / critic
#: rates: short CPU runs of small models, where a few thousand gradient steps must do) and
#: ``fast-pixels`` (``fast`` with a 10x world-model rate: our games' key objects are sprites of
#: 16-36 observation pixels, which a ``tiny`` world model at 3e-4 only starts to reconstruct after
#: ~2,500 gradient steps; see ``docs/learning_results.md``).
LEARNER_PRESETS: dict[str, DreamerV3LearnerConfig] = {
    "sheeprl": DreamerV3LearnerConfig(),
    "sheeprl-0.5": DreamerV3LearnerConfig(actor_lr=8e-5, critic_lr=8e-5),
    "fast": DreamerV3LearnerConfig(wm_lr=3e-4, actor_lr=1e-4, critic_lr=3e-4),
    "fast-pixels": DreamerV3LearnerConfig(wm_lr=1e-3, actor_lr=1e-4, critic_lr=3e-4),
}


def _adam(params, lr: float, eps: float, capturable: bool = False) -> torch.optim.Adam:
    """Fused Adam (CPU and CUDA): one kernel per step for all parameters, and its step counts
    stay tensors on the device (the ``foreach`` version reads each one back with ``.item()``).
    ``capturable`` lets a CUDA graph capture its step (the whole-update graph)."""
    return torch.optim.Adam(list(params), lr=lr, eps=eps, fused=True, capturable=capturable)


CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
"""A ``torch.compile`` mode :class:`DreamerV3Learner` accepts (``compile=``)."""

COMPILE_MODES: tuple[str, ...] = get_args(CompileMode)
"""``torch.compile`` modes :class:`DreamerV3Learner` accepts (``compile=``)."""

# compile modes that use CUDA graphs: off CUDA they fall back to "default"; under capture=True
# they compile as NO_CUDA_GRAPH_MODES says (their graphs would nest inside the update's, which
# CUDA does not allow)
_CUDA_GRAPH_MODES = tuple(NO_CUDA_GRAPH_MODES)

CAPTURE_WARMUP = 2
"""Eager updates (on a side stream) a ``capture=True`` learner on CUDA runs before it captures
its update graph: they build cuBLAS/cuDNN handles, the optimizers' state and any compiled code,
none of which may be created during a capture."""


def resolve_acceleration(
    device: torch.device | str, compile: str | None, capture: bool, strict: bool = False
) -> tuple[str | None, bool]:
    """The ``(compile mode, capture)`` a learner on ``device`` will actually use.

    Asking for what the device or build cannot do (CUDA graphs off CUDA, ``torch.compile``
    where dynamo is unsupported) falls back with one ``RuntimeWarning`` that says what runs
    instead, or raises ``RuntimeError`` when ``strict``. ``capture`` keeps its static-buffer
    path on every device (the CPU twin); an unknown mode is always a ``ValueError``. With
    ``capture`` on CUDA the whole update is one CUDA graph, so a mode's own CUDA graphs are left
    out (``"reduce-overhead"`` compiles as ``"default"``, ``"max-autotune"`` as
    ``"max-autotune-no-cudagraphs"``): not a fallback, the update graph holds their kernels.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     resolve_acceleration("cpu", None, capture=True)
        (None, True)
        >>> resolve_acceleration("cpu", None, capture=False)
        (None, False)
    """
    device = torch.device(device)
    if compile is not None and compile not in COMPILE_MODES:
        raise ValueError(f"compile must be None or one of {COMPILE_MODES}, got {compile!r}")
    mode = compile
    problems = []
    if capture and device.type != "cuda":
        problems.append(
            f"capture=True uses CUDA graphs, which need a CUDA device (the learner is on "
            f"{device.type}): running the same static-buffer path without a graph instead"
        )
    if mode in _CUDA_GRAPH_MODES and device.type != "cuda":
        problems.append(
            f"compile={mode!r} uses CUDA graphs, which need a CUDA device (the learner is "
            f"on {device.type}): compiling with mode='default' instead"
        )
        mode = "default"
    elif mode in _CUDA_GRAPH_MODES and capture:
        mode = NO_CUDA_GRAPH_MODES[mode]
    if mode is not None and not torch._dynamo.is_dynamo_supported():
        problems.append(
            f"torch.compile is not supported by this build/Python: running eagerly instead of "
            f"mode={mode!r}"
        )
        mode = None
    if problems:
        message = "DreamerV3Learner: " + "; ".join(problems) + "."
        if strict:
            raise RuntimeError(message + " (strict=True: not falling back)")
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    return mode, capture


class DreamerV3Learner(nn.Module):
    """Runs the three DreamerV3 losses in order with their optimizers.

    Args:
        world_model, actor, critic: from :func:`torchrl_dreamer.modules.make_dreamer`.
        config: a :class:`DreamerV3LossConfig` or preset name (``"sheeprl"``, the default).
        optim: a :class:`DreamerV3LearnerConfig` or preset name; default: the learner preset of
            ``config``'s name when it is a name, else ``"sheeprl"``.
        batch_major: replay samples are ``[B, T]`` instead of ``[T, B]``.
        autocast_dtype: e.g. ``torch.bfloat16`` to run the forward passes under autocast (the
            GRU and latent distributions stay fp32).
        world_model_loss_cls, actor_loss_cls, critic_loss_cls: loss classes to use (research
            variants subclass the defaults and override their hooks).
        compile: ``None`` (eager, the default) or a ``torch.compile`` mode (``"default"``,
            ``"reduce-overhead"``, ``"max-autotune"``, ``"max-autotune-no-cudagraphs"``) for the
            world model's image encoders/decoders and the RSSM's per-step bodies
            (:meth:`~torchrl_dreamer.modules.rssm.RSSM.compile_steps`; static shapes: each
            distinct batch shape compiles once). It cuts the kernel launches of a maze update
            from 2,793 to 1,629; off by default because on the 2-core CPU an update is no
            faster and compiling takes ~35 s (``docs/concepts/running_on_gpu.md``).
        capture: the CUDA-graph path: every batch is copied into buffers allocated at the first
            update (a batch of another shape or dtype raises ``ValueError``); on CUDA, after
            :data:`CAPTURE_WARMUP` eager updates, the whole update (losses, backward passes,
            clipping, the three Adam steps) is captured once as one CUDA graph and each later
            update replays it: one graph launch instead of thousands of kernel launches. The
            slow critic's EMA runs before each replay, outside the graph. It may combine with
            ``compile`` (a mode's own CUDA graphs are then left out: they would nest). Loading
            an optimizer's state drops the graph (it is captured again). On a CPU the same
            static-buffer path runs without a graph (the tested twin), after one warning.
        strict: raise ``RuntimeError`` instead of warning when ``compile``/``capture`` cannot be
            used as asked on this device or build (e.g. CUDA graphs on a CPU); without it the
            learner falls back (CUDA-graph modes on a CPU: ``mode="default"``; ``capture`` on
            a CPU: the static-buffer path without a graph; no compiler: eager) with exactly one
            ``RuntimeWarning``.

    Example:
        >>> from torchrl_dreamer.modules import make_dreamer
        >>> wm, actor, critic = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
        >>> learner = DreamerV3Learner(wm, actor, critic)
        >>> T, B = 8, 2
        >>> batch = TensorDict({"obs": torch.randn(T, B, 3),
        ...     "action": torch.randint(2, (T, B)), "reward": torch.randn(T, B),
        ...     "is_first": torch.zeros(T, B, dtype=torch.bool),
        ...     "continue_": torch.ones(T, B)}, [T, B])
        >>> sorted(learner.update(batch).keys())[:3]
        ['actor_entropy', 'advantage_mean', 'grad_norm_actor']
    """

    #: ``record_function`` labels of :meth:`update`'s phases (``actor/forward`` includes the
    #: imagination rollout; ``benchmarks/learner.py`` reports them apart).
    PROFILE_PHASES: tuple[str, ...] = (
        "world_model/forward",
        "world_model/backward",
        "world_model/optimizer",
        "actor/imagination",
        "actor/forward",
        "critic/forward",
        "actor_critic/backward",
        "actor_critic/optimizer",
    )

    def __init__(
        self,
        world_model: WorldModel,
        actor: DreamerV3Actor,
        critic: DreamerV3Critic,
        config: DreamerV3LossConfig | str = "sheeprl",
        *,
        optim: DreamerV3LearnerConfig | str | None = None,
        batch_major: bool = False,
        autocast_dtype: torch.dtype | None = None,
        world_model_loss_cls: type[DreamerV3WorldModelLoss] = DreamerV3WorldModelLoss,
        actor_loss_cls: type[DreamerV3ActorLoss] = DreamerV3ActorLoss,
        critic_loss_cls: type[DreamerV3CriticLoss] = DreamerV3CriticLoss,
        compile: str | None = None,
        capture: bool = False,
        strict: bool = False,
    ) -> None:
        super().__init__()
        if optim is None:
            optim = config if isinstance(config, str) else "sheeprl"
        if isinstance(config, str):
            if config not in LOSS_PRESETS:
                raise KeyError(
                    f"unknown loss preset {config!r}; choose one of {sorted(LOSS_PRESETS)}"
                )
            config = LOSS_PRESETS[config]
        if isinstance(optim, str):
            if optim not in LEARNER_PRESETS:
                raise KeyError(
                    f"unknown learner preset {optim!r}; choose one of {sorted(LEARNER_PRESETS)}"
                )
            optim = LEARNER_PRESETS[optim]
        self.config, self.optim = config, optim
        self.world_model, self.actor, self.critic = world_model, actor, critic
        self.world_model_loss = world_model_loss_cls(world_model, config, batch_major=batch_major)
        self.actor_loss = actor_loss_cls(world_model, actor, critic, config)
        self.critic_loss = critic_loss_cls(critic, config)
        device = world_model.rssm.h0.device
        self.compile_mode, self.capture = resolve_acceleration(device, compile, capture, strict)
        # the whole-update CUDA graph (capture=True on CUDA), captured at the first update after
        # the world-model warm-up and CAPTURE_WARMUP eager ones
        self._graphs = self.capture and device.type == "cuda"
        self._graph: torch.cuda.CUDAGraph | None = None
        self._graph_metrics: TensorDictBase | None = None
        self._eager_before_capture = 0
        # the world-model loss's parameters: the world model's, then a variant's own heads
        # (ContrastiveWorldModelLoss's projections), trained and clipped with it
        self.wm_opt = _adam(self.world_model_loss.parameters(), optim.wm_lr, optim.wm_eps,
                            self._graphs)
        self.actor_opt = _adam(actor.parameters(), optim.actor_lr, optim.actor_eps, self._graphs)
        self.critic_opt = _adam(
            critic.parameters(), optim.critic_lr, optim.critic_eps, self._graphs
        )
        if self._graphs:  # a loaded optimizer state has new tensors: capture again
            for opt in self.optimizers().values():
                opt.register_load_state_dict_post_hook(lambda _opt: self.drop_graph())
        self.autocast_dtype = autocast_dtype
        self.num_updates = 0
        self._static: TensorDictBase | None = None
        if self.compile_mode is not None:
            for module in [*world_model.encoders.values(), *world_model.decoders.values()]:
                if isinstance(module, (ImageEncoder, ImageDecoder)):
                    module.compile(mode=self.compile_mode, dynamic=False)
            world_model.rssm.compile_steps(self.compile_mode)

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        # a CUDA graph must not capture autocast's weight-cast cache (its casts would be stale)
        return torch.autocast(self.world_model.rssm.h0.device.type, dtype=self.autocast_dtype,
                              cache_enabled=not self._graphs)

    @staticmethod
    def _clip_and_step(opt: torch.optim.Optimizer, module: nn.Module, clip: float) -> torch.Tensor:
        """Global-norm clip of ``module``'s gradients, then ``opt.step()``; returns the norm."""
        norm = torch.nn.utils.clip_grad_norm_(module.parameters(), clip, foreach=True)
        opt.step()
        return norm.detach()

    def update(self, batch: TensorDictBase) -> TensorDictBase:
        """One gradient step on each of world model, actor and critic; returns detached metrics.

        Order (the reference's): the world model steps first, then the actor and critic losses
        are computed on imagination from the *updated* world model. The actor and critic losses
        share one backward pass (their graphs touch disjoint parameters: the actor's sees the
        critic only through detached values, the critic's sees detached latents), then each is
        clipped and stepped with its own optimizer. The phases are labelled with
        ``torch.profiler.record_function`` (:attr:`PROFILE_PHASES`).

        During the first ``optim.world_model_warmup`` updates only the world model steps (the
        metrics then hold no actor/critic entries). With ``capture=True`` on CUDA the later
        updates replay one captured CUDA graph (:meth:`_replay`).
        """
        if self.capture:
            batch = self._stage(batch)
        warmup = self.num_updates < self.optim.world_model_warmup
        if not warmup:
            self.critic_loss.update_slow_critic()
        if self._graphs and not warmup:
            metrics = self._replay(batch)
        else:
            metrics = self._step(batch, warmup)
        self.num_updates += 1
        return metrics

    def _step(self, batch: TensorDictBase, warmup: bool) -> TensorDictBase:
        """The gradient steps of one update (all but the slow critic's EMA); no host sync."""
        cfg = self.optim
        with record_function("world_model/forward"), self._autocast():
            wm_out = self.world_model_loss(batch)
            wm_loss = total_loss(wm_out)
        with record_function("world_model/backward"):
            self.wm_opt.zero_grad(set_to_none=True)
            wm_loss.backward()
        with record_function("world_model/optimizer"):
            g_wm = self._clip_and_step(self.wm_opt, self.world_model_loss, cfg.wm_clip)
        if warmup:
            return self._metrics((wm_out,), wm_loss, {"grad_norm_world_model": g_wm})
        with record_function("actor/forward"), self._autocast():
            actor_out = self.actor_loss(wm_out.get("posterior"))
        with record_function("critic/forward"), self._autocast():
            critic_out = self.critic_loss(actor_out.get("imagination"))
        with record_function("actor_critic/backward"):
            self.actor_opt.zero_grad(set_to_none=True)
            self.critic_opt.zero_grad(set_to_none=True)
            (actor_out.get("loss_actor") + critic_out.get("loss_critic")).backward()
        with record_function("actor_critic/optimizer"):
            g_actor = self._clip_and_step(self.actor_opt, self.actor, cfg.actor_clip)
            g_critic = self._clip_and_step(self.critic_opt, self.critic, cfg.critic_clip)
        return self._metrics(
            (wm_out, actor_out, critic_out),
            wm_loss,
            {"grad_norm_world_model": g_wm, "grad_norm_actor": g_actor, "grad_norm_critic": g_critic},
        )

    def _replay(self, batch: TensorDictBase) -> TensorDictBase:
        """One update through the CUDA graph: the first :data:`CAPTURE_WARMUP` calls run eagerly
        on a side stream (as CUDA-graph capture requires), the next one captures
        :meth:`_step` on the static ``batch`` and every call replays it; returns a copy of the
        graph's metrics (the graph overwrites its own at the next replay)."""
        if self._graph is None:
            if self._eager_before_capture < CAPTURE_WARMUP:
                self._eager_before_capture += 1
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    metrics = self._step(batch, warmup=False)
                torch.cuda.current_stream().wait_stream(side)
                return metrics
            graph = torch.cuda.CUDAGraph()
            # thread_local: CUDA work of other threads (actors, the emulator) may go on meanwhile
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._graph_metrics = self._step(batch, warmup=False)
            self._graph = graph
        self._graph.replay()
        return self._graph_metrics.clone()

    def drop_graph(self) -> None:
        """Forget the captured update graph: the next update captures it again (after
        :data:`CAPTURE_WARMUP` eager ones). Needed when tensors the graph reads are replaced
        rather than updated in place (done for you when an optimizer's state is loaded)."""
        self._graph, self._graph_metrics, self._eager_before_capture = None, None, 0

    def _stage(self, batch: TensorDictBase) -> TensorDictBase:
        """Copy ``batch`` into the static buffers of the capture path (allocated on first use)."""
        if self._static is None:
            self._static = batch.clone()
            return self._static
        got = {k: (tuple(v.shape), v.dtype) for k, v in batch.items(True, True)}
        want = {k: (tuple(v.shape), v.dtype) for k, v in self._static.items(True, True)}
        if got != want:
            diff = sorted(str(k) for k in set(got) | set(want) if got.get(k) != want.get(k))
            raise ValueError(
                f"capture=True needs every batch to match the first one's keys, shapes and "
                f"dtypes; these differ: {diff} (first batch {want}, this one {got}). Sample "
                f"fixed-size batches, or build the learner with capture=False."
            )
        self._static.update_(batch)
        return self._static

    @staticmethod
    def _metrics(outs, wm_loss: torch.Tensor, norms: dict[str, torch.Tensor]) -> TensorDictBase:
        """The scalar entries of the loss outputs, the world-model loss and the gradient norms."""
        metrics = TensorDict({}, [])
        for out in outs:
            for k, v in out.items():
                if isinstance(v, torch.Tensor) and v.dim() == 0:
                    metrics.set(k, v.detach())
        metrics.set("loss_world_model", wm_loss.detach())
        for k, v in norms.items():
            metrics.set(k, v)
        return metrics

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The three optimizers by name (for checkpoints)."""
        return {"world_model": self.wm_opt, "actor": self.actor_opt, "critic": self.critic_opt}
