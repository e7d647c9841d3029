"""``ControlModeRouter``: agent-collected and human-in-the-loop data in two replay services.

Chunks carry a ``"control_mode"`` field (0 = agent, 1 = human by default); the router sends each
chunk to the service of its mode, and its :meth:`~ControlModeRouter.sample` draws a batch from
both services in configurable proportions (equal by default). It offers the service interface
(``register``/``report``/``add_chunk``/``disconnect``/``sample``), so an
:class:`~torchrl_dreamer.distributed.EnvRunner` or the trainer uses it in place of one service.
The router holds no data: it is a small client object copied into each runner (the services are
Ray actors or in-process objects).

Why two services rather than one tagged table: human data arrives at a human's pace and must
never be paused or evicted by agent throughput, so it gets its own capacity and no rate limiter
(build that service with ``rate_limited=False``); the agent service keeps the replay-ratio
accounting, so a mixed batch takes its gradient-step grant from the agent service only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl_dreamer.data.demonstrations import demo_sequences
from torchrl_dreamer.distributed.cluster import call
from torchrl_dreamer.distributed.replay_service import batch_from_numpy

__all__ = ["AGENT", "HUMAN", "ControlModeRouter"]

#: ``control_mode`` value of agent-collected rows.
AGENT = 0
#: ``control_mode`` value of human-in-the-loop rows.
HUMAN = 1


class ControlModeRouter:
    """Routes chunks by ``control_mode`` into per-mode services and mixes them when sampling.

    Args:
        services: ``{mode: service}`` (actor handles or objects), e.g. ``{0: agent, 1: human}``.
        proportions: ``{mode: share}`` of each sampled batch (normalised; default equal).
        primary: the mode whose rate limiter a batch counts against (default: the smallest key).
        default_mode: where chunks without a ``"control_mode"`` field go (default ``primary``).
        exact: ``True`` gives each other mode exactly
            :func:`~torchrl_dreamer.data.demonstrations.demo_sequences` ``(share, B)`` sequences
            of a batch of ``B`` (``share``: its proportion among the modes that can sample) and
            the primary the rest, as the local
            :class:`~torchrl_dreamer.data.demonstrations.DemoMixingSampler` does (a Ray run's
            demonstrations); ``False`` (default) draws each sequence's mode.

    A chunk must have one mode in every row (split human and agent envs into different
    runners); a mixed chunk is a ``ValueError``. When only some services can give sequences,
    the batch is drawn from those.

    Example:
        In-process runners on the shipped maze; the human one acts randomly here.

        >>> from torchrl_dreamer.distributed import EnvRunner, ReplayService, WeightStore
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> services = {m: ReplayService(256, seq_len=8, learning_starts=0, max_queued=64,
        ...                              rate_limited=m == AGENT) for m in (AGENT, HUMAN)}
        >>> router = ControlModeRouter(services)
        >>> for name, mode in (("agent-0", AGENT), ("human-0", HUMAN)):
        ...     _ = EnvRunner(name, lambda: GameBoyEnv("maze", num_envs=2), None, router,
        ...                   WeightStore(), chunk_len=16, control_mode=mode).run(max_chunks=1)
        >>> batch, info = router.sample(16)  # ~8 agent + ~8 human sequences
        >>> batch.batch_size
        torch.Size([8, 16])
    """

    def __init__(
        self,
        services: Mapping[int, Any],
        proportions: Mapping[int, float] | None = None,
        *,
        primary: int | None = None,
        default_mode: int | None = None,
        seed: int = 0,
        exact: bool = False,
    ) -> None:
        if len(services) < 1:
            raise ValueError("ControlModeRouter needs at least one {mode: service}.")
        self.services = {int(k): v for k, v in services.items()}
        props = {k: 1.0 for k in self.services} if proportions is None else dict(proportions)
        unknown = set(props) - set(self.services)
        if unknown or any(p < 0 for p in props.values()) or sum(props.values()) <= 0:
            raise ValueError(
                f"proportions {props} must give a share >= 0 (sum > 0) to modes of "
                f"{sorted(self.services)} only."
            )
        self.proportions = {k: float(props.get(k, 0.0)) for k in self.services}
        self.primary = min(self.services) if primary is None else int(primary)
        if self.primary not in self.services:
            raise ValueError(f"primary mode {self.primary} has no service.")
        self.default_mode = self.primary if default_mode is None else int(default_mode)
        self.exact = bool(exact)
        self.generator = torch.Generator().manual_seed(int(seed))
        # Per runner (keyed by its id on the primary service): its id on each service and the
        # mode of its last chunk. Works whether the router is shared or copied into runners.
        self._ids: dict[int, dict[int, int]] = {}
        self._mode: dict[int, int] = {}

    # ------------------------------------------------------------------ runner side
    def register(self, name: str, num_envs: int, **kwargs: Any) -> dict[str, Any]:
        """Registers the runner with every service; returns the primary service's reply."""
        replies = {m: call(s, "register", name, num_envs, **kwargs)
                   for m, s in self.services.items()}
        rid = replies[self.primary]["runner_id"]
        self._ids[rid] = {m: r["runner_id"] for m, r in replies.items()}
        self._mode[rid] = self.default_mode
        return dict(replies[self.primary])

    def _runner(self, runner_id: int) -> dict[int, int]:
        ids = self._ids.get(int(runner_id))
        if ids is None:
            raise KeyError(f"runner_id {runner_id} did not register through this router.")
        return ids

    def _mode_of(self, chunk: TensorDictBase | Mapping[str, torch.Tensor]) -> int:
        if "control_mode" not in chunk.keys():
            return self.default_mode
        modes = torch.unique(chunk["control_mode"])
        if modes.numel() != 1:
            raise ValueError(
                f"chunk mixes control modes {modes.tolist()}: a chunk must come from one mode; "
                "run agent and human envs in different runners."
            )
        mode = int(modes.item())
        if mode not in self.services:
            raise ValueError(
                f"control_mode={mode} has no replay service (modes: {sorted(self.services)})."
            )
        return mode

    def add_chunk(self, runner_id: int, chunk: Any, policy_version: int = 0) -> dict[str, Any]:
        """Sends ``chunk`` to its mode's service; replies with that service's answer."""
        ids = self._runner(runner_id)
        mode = self._mode_of(chunk)
        self._mode[int(runner_id)] = mode
        return call(self.services[mode], "add_chunk", ids[mode], chunk, policy_version)

    def report(self, runner_id: int, **kwargs: Any) -> dict[str, Any]:
        """Reports to the service of the runner's current mode (its backpressure applies)."""
        ids = self._runner(runner_id)
        mode = self._mode[int(runner_id)]
        return call(self.services[mode], "report", ids[mode], **kwargs)

    def disconnect(self, runner_id: int) -> dict[str, Any]:
        """Disconnects from every service."""
        ids = self._ids.pop(int(runner_id), None) or {}
        self._mode.pop(int(runner_id), None)
        replies = {m: call(s, "disconnect", ids[m]) for m, s in self.services.items() if m in ids}
        return replies.get(self.primary, {})

    # ------------------------------------------------------------------ learner side
    def sample(self, batch_size: int, consume: int = 1) -> tuple[TensorDictBase, dict] | None:
        """A ``[T, batch_size]`` batch mixed from the services by ``proportions``; ``None`` if starved.

        The primary service must be able to sample (its limiter grants the gradient step);
        sequences are split by drawing each one's mode with the proportions among services
        that can sample (``exact``: by :meth:`counts`). ``info["mode"]`` gives each sequence's
        mode; the other modes' sequences come first, the primary's last.
        """
        primary = self.services[self.primary]
        if not call(primary, "can_sample"):
            return None
        ready = [m for m in sorted(self.services)
                 if self.proportions[m] > 0
                 and (m == self.primary or call(self.services[m], "can_sample"))]
        if not ready:
            return None
        if self.exact:
            counts = self.counts(ready, int(batch_size))
        else:
            w = torch.tensor([self.proportions[m] for m in ready], dtype=torch.float64)
            idx = torch.multinomial(w, int(batch_size), replacement=True,
                                    generator=self.generator)
            counts = torch.bincount(idx, minlength=len(ready)).tolist()
        parts, modes, infos = [], [], []
        # Other modes first (they take no grant), the primary last: a starved answer then
        # wastes no gradient-step grant.
        order = sorted(range(len(ready)), key=lambda i: ready[i] == self.primary)
        for i in order:
            m, k = ready[i], counts[i]
            if k == 0:
                continue
            out = batch_from_numpy(
                call(self.services[m], "sample_numpy", k, 1 if m == self.primary else 0))
            if out is None:
                return None
            parts.append(out[0])
            infos.append(out[1])
            modes.append(torch.full((k,), m))
        if self.primary not in ready or counts[ready.index(self.primary)] == 0:
            # Every sequence came from other services: still count the step on the primary.
            call(primary, "consume", 1)
        batch = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        info = {"mode": torch.cat(modes),
                "env_idx": torch.cat([i["env_idx"] for i in infos]),
                "start": torch.cat([i["start"] for i in infos])}
        return batch, info

    def counts(self, modes: list[int], batch_size: int) -> list[int]:
        """Sequences of each of ``modes`` in a batch of ``batch_size`` with ``exact``: every mode
        but the primary :func:`~torchrl_dreamer.data.demonstrations.demo_sequences` of its
        proportion among ``modes``, the primary (else the last mode) the rest.

        Example:
            >>> r = ControlModeRouter({AGENT: None, HUMAN: None}, {AGENT: 0.75, HUMAN: 0.25})
            >>> r.counts([AGENT, HUMAN], 16), r.counts([AGENT, HUMAN], 6), r.counts([HUMAN], 6)
            ([12, 4], [4, 2], [6])
        """
        total = sum(self.proportions[m] for m in modes)
        rest = self.primary if self.primary in modes else modes[-1]
        out, left = {}, int(batch_size)
        for m in modes:
            if m == rest:
                continue
            share = self.proportions[m] if abs(total - 1.0) < 1e-12 else self.proportions[m] / total
            out[m] = min(left, demo_sequences(share, batch_size))
            left -= out[m]
        out[rest] = left
        return [out[m] for m in modes]

    def can_sample(self) -> bool:
        """Whether the primary service grants a gradient step and holds data."""
        return bool(call(self.services[self.primary], "can_sample"))

    def stats(self) -> dict[int, Any]:
        """``{mode: service.stats()}``."""
        return {m: call(s, "stats") for m, s in self.services.items()}
