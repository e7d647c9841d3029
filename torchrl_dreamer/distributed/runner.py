"""``EnvRunner``: one env (any TorchRL env factory) and one player, feeding a replay service.

The runner steps its env with the local collector's :class:`~torchrl_dreamer.collectors.EnvDriver`
(same row alignment, deferred resets, zero-copy packed2 frames) into a small local
:class:`~torchrl_dreamer.data.TimeMajorStorage` ring, and every ``chunk_len`` env steps sends the
chunk to the replay service, which commits it before replying. Between chunks it fetches new
weights from the :class:`~torchrl_dreamer.distributed.WeightStore` (only when the version
differs) and honours the service's backpressure (``paused``: poll until resumed) and ``stop``.

It is a plain class: ``remote_class(EnvRunner).remote(...)`` makes it a Ray actor, and the same
object runs in-process for tests. Why not TorchRL's ``RayCollector``: its workers own the rollout
buffer and push batches to the trainer; Dreamer's runners write replay rows for a learner that
samples at its own ratio, with commit acknowledgements and a runner registry on the service side.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl_dreamer.collectors.env_driver import EnvDriver
from torchrl_dreamer.collectors.protocols import Parametrised, RecurrentPolicy, Seedable
from torchrl_dreamer.data import TimeMajorStorage
from torchrl_dreamer.distributed.cluster import call, get
from torchrl_dreamer.distributed.weights import apply_weights, unpack_weights

__all__ = ["EnvRunner"]


class EnvRunner:
    """Collects chunks of env steps into a replay service, with versioned weights and backpressure.

    Args:
        name: slot name on the service (stable across restarts: a restarted runner resumes it).
        env_factory: ``() -> env`` (TorchRL env, ``batch_size=[N]``, returns ``is_first``), e.g.
            ``lambda: GameBoyEnv("maze", num_envs=8)``.
        policy_factory: ``(env) -> policy`` (``td -> td`` writing ``"action"``; e.g. a
            :class:`~torchrl_dreamer.modules.DreamerPlayer`). ``None``: random actions only.
        service: the replay service (actor handle or object) or a
            :class:`~torchrl_dreamer.distributed.ControlModeRouter`.
        weights: the :class:`~torchrl_dreamer.distributed.WeightStore` (handle/object) or ``None``.

    Keyword Args:
        chunk_len: env steps per chunk sent to the service.
        group: runner group (its share of sampled sequences is the group's weight).
        weight: this runner's sampling weight, reported to the service.
        learning_starts: act randomly until the run has this many policy steps.
        control_mode: value written to a ``"control_mode"`` field of every row (``None``: no
            field), for routing agent vs human data.
        apply_fn: ``(policy, weights_dict)`` loading published weights (default
            :func:`~torchrl_dreamer.distributed.apply_weights`).
        poll_s: sleep between polls while paused.
        seed: seeds torch, the env and the random-action generator.
        torch_threads: ``torch.set_num_threads`` in this process (Ray workers share cores).

    Example:
        The shipped maze, in-process; on Ray the runner is an actor.

        >>> from torchrl_dreamer.distributed import ReplayService, WeightStore
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> service, store = ReplayService(256, seq_len=8, max_queued=64), WeightStore()
        >>> runner = EnvRunner("r0", lambda: GameBoyEnv("maze", num_envs=4), None, service, store,
        ...                    chunk_len=16)
        >>> runner.run(max_chunks=3)["chunks"]
        3
    """

    def __init__(
        self,
        name: str,
        env_factory: Callable[[], Any],
        policy_factory: Callable[[Any], Any] | None,
        service: Any,
        weights: Any = None,
        *,
        chunk_len: int = 16,
        group: str = "default",
        weight: float = 1.0,
        learning_starts: int = 0,
        control_mode: int | None = None,
        apply_fn: Callable[[Any, dict], None] | None = None,
        poll_s: float = 0.01,
        seed: int = 0,
        torch_threads: int | None = 1,
    ) -> None:
        if int(chunk_len) < 1:
            raise ValueError(f"EnvRunner: chunk_len={chunk_len} must be >= 1.")
        if torch_threads is not None:
            torch.set_num_threads(int(torch_threads))
        torch.manual_seed(seed)
        self.name = str(name)
        self.env = env_factory()
        if isinstance(self.env, Seedable):
            self.env.set_seed(seed)
        self.policy = policy_factory(self.env) if policy_factory is not None else None
        self.service, self.weights = service, weights
        self.chunk_len = int(chunk_len)
        self.group, self.weight = group, float(weight)
        self.learning_starts = int(learning_starts)
        self.control_mode = control_mode
        self.apply_fn = apply_fn if apply_fn is not None else apply_weights
        self.poll_s = float(poll_s)
        self.num_envs = int(self.env.batch_size[0])
        env_device = getattr(self.env, "device", None) or torch.device("cpu")
        # Local ring on the env's device (a CUDA env renders frames straight into it): one chunk
        # plus the row the env may render ahead (zero copy). Chunks go to the host once each.
        self.buffer = TimeMajorStorage(self.chunk_len + 1, self.num_envs, device=env_device,
                                       auto_commit=True)
        gen = torch.Generator(device=env_device)
        gen.manual_seed(seed + 1)
        self.driver = EnvDriver(self.env, self.buffer, self._act, gen)
        self.version = 0
        self.fetches = 0
        self.chunks = 0
        self.paused_s = 0.0
        self.step_s = 0.0
        self.runner_id: int | None = None
        self.last_reply: dict[str, Any] = {}
        self.stopped = False
        self._started = False
        self._policy_started = False

    # ------------------------------------------------------------------ pieces
    def _act(self, td):
        return self.policy(td)

    def register(self) -> dict[str, Any]:
        """Registers with the service (new id; the learner's step and run counters back)."""
        reply = call(self.service, "register", self.name, self.num_envs, group=self.group,
                     weight=self.weight)
        self.runner_id = reply["runner_id"]
        self.last_reply = reply
        return reply

    def maybe_fetch_weights(self) -> bool:
        """Fetches and applies the latest weights if their version differs from ours."""
        if self.weights is None or self.policy is None:
            return False
        out = call(self.weights, "fetch", self.name, self.version)
        if out is None:
            return False
        version, payload = out
        packet = get(payload[0])
        self.apply_fn(self.policy, unpack_weights(packet, writable=False))  # read, copy in
        self.version = int(version)
        self.fetches += 1
        return True

    def collect_chunk(self) -> TensorDictBase:
        """Steps the env ``chunk_len`` times; returns the rows ``[chunk_len, num_envs, ...]``."""
        start = time.perf_counter()
        random = self.policy is None or (
            self.last_reply.get("policy_steps", 0) < self.learning_starts
        )
        if not random and not self._policy_started:
            self._policy_started = True  # recurrent state from the current (published) weights
            if isinstance(self.policy, RecurrentPolicy):
                self.policy.init_states()
        first = self.buffer.total_steps
        for _ in range(self.chunk_len):
            self.driver.step(random=random)
        rows = torch.arange(first, first + self.chunk_len) % self.buffer.capacity
        data = self.buffer.get(rows).to("cpu")
        if self.control_mode is not None:
            data.set("control_mode", torch.full(data.batch_size, int(self.control_mode),
                                                dtype=torch.int8))
        self.step_s += time.perf_counter() - start
        return data

    def _wait_unpaused(self) -> bool:
        """Polls while the service says pause (fetching weights meanwhile); False on stop."""
        start = time.perf_counter()
        reply = self.last_reply
        while reply.get("paused") and not reply.get("stop"):
            self.maybe_fetch_weights()
            time.sleep(self.poll_s)
            reply = call(self.service, "report", self.runner_id, step=self.driver.env_steps,
                         queued_steps=0, weight=self.weight)
        self.last_reply = reply
        self.paused_s += time.perf_counter() - start
        return not reply.get("stop")

    def run(self, max_chunks: int | None = None, block: bool = True) -> dict[str, Any]:
        """Registers, then loops (weights, chunk, send, backpressure) until stop or ``max_chunks``.

        ``block=False`` returns at once instead of waiting while paused (in-process stepping).
        On ``stop`` the runner disconnects cleanly. Returns :meth:`stats` (``"_ran"``: chunks
        sent by this call, ``"stopped"``: whether the service stopped the runner).
        """
        if self.runner_id is None and not self.stopped:
            self.register()
            if not self._started:
                self.driver.reset()
                self._started = True
        ran = 0
        while not self.stopped and (max_chunks is None or ran < max_chunks):
            if self.last_reply.get("paused") and not block:
                self.maybe_fetch_weights()
                self.last_reply = call(self.service, "report", self.runner_id,
                                       step=self.driver.env_steps, weight=self.weight)
                if self.last_reply.get("paused") and not self.last_reply.get("stop"):
                    break
            if not self._wait_unpaused():
                self.stopped = True
                break
            self.maybe_fetch_weights()
            data = self.collect_chunk()
            self.last_reply = call(self.service, "add_chunk", self.runner_id, data, self.version)
            self.chunks += 1
            ran += 1
            if self.last_reply.get("stop"):
                self.stopped = True
        if self.stopped:
            self.disconnect()
        out = self.stats()
        out["_ran"] = ran
        return out

    def disconnect(self) -> None:
        """Tells the service (and the weight store) this runner is gone; data stays."""
        if self.runner_id is not None:
            call(self.service, "disconnect", self.runner_id)
            self.runner_id = None
        if self.weights is not None:
            call(self.weights, "forget", self.name)

    def stats(self) -> dict[str, Any]:
        """Chunks sent, env steps, weight version and fetches, time stepping and paused."""
        return {
            "name": self.name,
            "chunks": self.chunks,
            "env_steps": self.driver.env_steps,
            "policy_steps": self.driver.env_steps * self.num_envs,
            "version": self.version,
            "fetches": self.fetches,
            "step_s": self.step_s,
            "paused_s": self.paused_s,
            "stopped": self.stopped,
        }

    def weights_checksum(self) -> float:
        """Sum of the policy's floating-point weights (to check which version it acts with)."""
        if not isinstance(self.policy, Parametrised):
            return 0.0
        return float(sum(p.detach().double().sum() for p in self.policy.parameters()))

    def ping(self) -> str:
        """Liveness probe."""
        return self.name
