"""``RunnerPool``: starts the env runners, notices dead ones and restarts them.

On Ray each runner is an actor running :meth:`EnvRunner.run` as one long call; the pool keeps
that call's ``ObjectRef`` and polls it with ``ray.wait(timeout=0)``. A finished call is a runner
that stopped cleanly (its stats are kept); a ``RayActorError`` is a dead process (killed, OOM,
node lost): the pool drops it from the weight store's lag accounting and starts a new actor under
the same name, which re-registers and resumes its replay slot (rows it had committed are kept;
rows of the chunk it was collecting are lost, as they were never committed). Any other error is a
bug in the runner and is re-raised with the runner's name. Ray's own ``max_restarts`` is not used
because the restarted actor must also restart its ``run`` call, and we want the count visible.

In-process (``use_ray=False``) the pool steps each runner one chunk per :meth:`step` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchrl_dreamer.distributed.cluster import call, require_ray

__all__ = ["RunnerPool", "RunnerRestartLimit"]


class RunnerRestartLimit(RuntimeError):
    """A runner died more often than ``max_restarts`` allows."""


class RunnerPool:
    """Supervises named env runners (Ray actors or in-process :class:`EnvRunner` objects).

    Args:
        names: one stable name per runner.
        make: ``(index) -> runner`` building runner ``index`` (actor handle or object).
        use_ray: runners are actors (else in-process objects stepped by :meth:`step`).
        max_restarts: restarts allowed per runner.
        weights: the weight store (restarted runners are forgotten in its lag accounting).

    Example:
        In-process runners on the shipped maze; with ``use_ray=True`` ``make`` returns actor
        handles and :meth:`poll` supervises them.

        >>> from torchrl_dreamer.distributed import EnvRunner, ReplayService, WeightStore
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> svc, store = ReplayService(256, seq_len=8, max_queued=64), WeightStore()
        >>> def make_runner(i):
        ...     return EnvRunner(f"r{i}", lambda: GameBoyEnv("maze", num_envs=2), None, svc, store,
        ...                      chunk_len=8, seed=i)
        >>> pool = RunnerPool(["r0", "r1"], make_runner, use_ray=False, max_restarts=3)
        >>> pool.start()
        >>> pool.step()  # one chunk per runner; returns the number still running
        2
        >>> svc.stats()["policy_steps"]  # 2 runners x 8 steps x 2 envs
        32
    """

    def __init__(
        self,
        names: list[str],
        make: Callable[[int], Any],
        *,
        use_ray: bool,
        max_restarts: int = 3,
        weights: Any = None,
    ) -> None:
        self.names = list(names)
        self.make = make
        self.use_ray = bool(use_ray)
        self.max_restarts = int(max_restarts)
        self.weights = weights
        self.runners: list[Any] = [None] * len(names)
        self.futures: list[Any] = [None] * len(names)
        self.finished: dict[int, dict[str, Any]] = {}
        self.restarts = [0] * len(names)
        self.events: list[tuple[str, str]] = []

    def start(self) -> None:
        """Builds every runner and (on Ray) starts its ``run`` loop."""
        for i in range(len(self.names)):
            self._launch(i)

    def _launch(self, i: int) -> None:
        self.runners[i] = self.make(i)
        if self.use_ray:
            self.futures[i] = self.runners[i].run.remote()
        self.events.append(("start", self.names[i]))

    @property
    def running(self) -> int:
        """Runners not finished."""
        return len(self.names) - len(self.finished)

    def poll(self) -> int:
        """Collects finished runners and restarts dead ones; returns how many still run."""
        if not self.use_ray:
            return self.running
        ray = require_ray()
        from ray.exceptions import RayActorError

        live = [f for i, f in enumerate(self.futures) if i not in self.finished]
        if not live:
            return 0
        ready, _ = ray.wait(live, num_returns=len(live), timeout=0)
        for ref in ready:
            i = self.futures.index(ref)
            try:
                self.finished[i] = {k: v for k, v in ray.get(ref).items() if k != "_ran"}
                self.events.append(("finished", self.names[i]))
            except RayActorError:
                self.restart(i)
            except Exception as err:
                raise RuntimeError(f"env runner {self.names[i]!r} failed: {err}") from err
        return self.running

    def restart(self, i: int) -> None:
        """Replaces runner ``i`` (dead) by a new one with the same name."""
        name = self.names[i]
        self.restarts[i] += 1
        self.events.append(("died", name))
        if self.restarts[i] > self.max_restarts:
            raise RunnerRestartLimit(
                f"env runner {name!r} died {self.restarts[i]} times (max_restarts="
                f"{self.max_restarts}); check its logs (ray logs) for the cause."
            )
        if self.weights is not None:
            call(self.weights, "forget", name)
        self._launch(i)

    def step(self) -> int:
        """In-process: one chunk per unfinished, unpaused runner; returns chunks collected."""
        done = 0
        for i, runner in enumerate(self.runners):
            if i in self.finished:
                continue
            stats = runner.run(max_chunks=1, block=False)
            done += stats.pop("_ran", 0)
            if stats.get("stopped"):
                self.finished[i] = stats
        return done

    def kill(self, i: int) -> None:
        """Kills runner ``i``'s process (fault-injection for tests); :meth:`poll` restarts it."""
        if not self.use_ray:
            raise RuntimeError("kill() needs Ray actors (use_ray=True).")
        require_ray().kill(self.runners[i], no_restart=True)

    def stop(self, timeout: float = 30.0) -> None:
        """Waits for running runners to end (after the service asked them to stop), then kills."""
        if not self.use_ray:
            for i, runner in enumerate(self.runners):
                if i not in self.finished and runner is not None:
                    runner.disconnect()
                    self.finished[i] = runner.stats()
            return
        ray = require_ray()
        live = [f for i, f in enumerate(self.futures) if i not in self.finished]
        if live:
            ray.wait(live, num_returns=len(live), timeout=timeout)
        for i, ref in enumerate(self.futures):
            if i in self.finished:
                continue
            try:
                out = ray.get(ref, timeout=0.1)
                self.finished[i] = {k: v for k, v in out.items() if k != "_ran"}
            except Exception:  # dead or still running: nothing more to collect
                pass
        for runner in self.runners:
            if runner is not None:
                ray.kill(runner, no_restart=True)
