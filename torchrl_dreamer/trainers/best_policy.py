"""``BestPolicy``: keep the acting weights of the best stretch of training, and evaluate them
instead of the last ones when they play clearly better.

Why: a policy can learn a trick mid-run and lose it later, and the final evaluation then
measures the forgotten policy (measurements: ``docs/learning_results.md``, "PostBot:
evaluating the best stretch of training instead of the last"). With
``eval_policy="best"`` the trainer watches the mean return of the last ``window`` finished
training episodes (:class:`~torchrl_dreamer.trainers.EpisodeTracker`'s window) and copies the
world model's and the actor's weights whenever that mean reaches a new high.

At the end the copy is a *candidate* when its window shares no episode with the last window
and its mean is higher (:meth:`BestPolicy.candidate`). A candidate then plays a short greedy
*duel* against the last weights (:meth:`~torchrl_dreamer.trainers.DreamerTrainer.choose_eval_policy`:
the same starts for both, seeded apart from the final evaluation's). The side clearly ahead
there (:func:`clearly_ahead`: a gap over two standard errors) is played; a duel within the noise
(e.g. no delivery on either side of a puzzle) leaves the choice to the windows, and the copy is
played only when its window is clearly better (:meth:`BestPolicy.clearly_better`). The duel
comes first because the window lags: its episodes were played with sampled actions by older
policies (a 3,000-step episode on 16 consoles spans 48k policy steps), so it says little about
greedy play. The duel measures what the final evaluation measures, on episodes of its own, so
the evaluation that follows is not the one that chose.

Example:
    >>> import torch
    >>> net = torch.nn.Linear(2, 1)
    >>> best = BestPolicy(window=4)
    >>> best.observe([1.0, 1.0, 1.0, 1.0], episodes=4, step=100, modules={"net": net})
    True
    >>> with torch.no_grad():
    ...     _ = net.weight.fill_(0.0)
    >>> best.observe([0.0, 0.1, 0.0, 0.1], episodes=8, step=200, modules={"net": net})
    False
    >>> best.candidate([0.0, 0.1, 0.0, 0.1], episodes=8)
    True
    >>> best.clearly_better([0.0, 0.1, 0.0, 0.1], episodes=8)
    True
    >>> clearly_ahead([3.0, 3.0, 3.0], [1.0, 1.5, 1.0])
    True
    >>> best.restore({"net": net}); float(net.weight.abs().sum()) > 0
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = ["BestPolicy", "clearly_ahead", "load_snapshot", "snapshot", "window_stats"]

CLEAR_GAP_SE = 2.0
"""How many standard errors of the difference one set of episodes' mean must lead another's by
to count as clearly ahead (:func:`clearly_ahead`)."""


def window_stats(returns: Sequence[float]) -> tuple[float, float]:
    """Mean and squared standard error of the mean of a window of episode returns.

    Example:
        >>> window_stats([1.0, 3.0])
        (2.0, 1.0)
    """
    n = len(returns)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(returns) / n
    var = sum((r - mean) ** 2 for r in returns) / max(1, n - 1)
    return mean, var / n


def clearly_ahead(ahead: Sequence[float], behind: Sequence[float]) -> bool:
    """Whether the episodes ``ahead`` beat the episodes ``behind`` clearly: a higher mean by
    more than :data:`CLEAR_GAP_SE` standard errors of the difference (two sets of identical
    episodes, as a deterministic game's greedy play gives, have no noise: any gap counts).
    Empty sets are never ahead or behind.

    Example:
        >>> clearly_ahead([2.0, 2.0], [1.0, 1.0]), clearly_ahead([2.0, 0.0], [1.0, 1.0])
        (True, False)
    """
    if not ahead or not behind:
        return False
    return _clear_gap(*window_stats(ahead), *window_stats(behind))


def _clear_gap(mean_a: float, se2_a: float, mean_b: float, se2_b: float) -> bool:
    """Whether mean ``a`` leads mean ``b`` (squared standard errors ``se2_*``) by more than
    :data:`CLEAR_GAP_SE` standard errors of the difference, and at all."""
    gap = mean_a - mean_b
    return gap > 0 and gap > CLEAR_GAP_SE * math.sqrt(se2_a + se2_b)


def snapshot(modules: Mapping[str, torch.nn.Module]) -> dict[str, dict[str, torch.Tensor]]:
    """A CPU copy of each module's ``state_dict``, by name (what :func:`load_snapshot` loads).

    Example:
        >>> net = torch.nn.Linear(2, 1)
        >>> kept = snapshot({"net": net})
        >>> with torch.no_grad():
        ...     _ = net.weight.zero_()
        >>> load_snapshot({"net": net}, kept); bool(net.weight.abs().sum() > 0)
        True
    """
    return {name: {k: v.detach().to("cpu", copy=True) for k, v in m.state_dict().items()}
            for name, m in modules.items()}


def load_snapshot(modules: Mapping[str, torch.nn.Module],
                  state: Mapping[str, Mapping[str, torch.Tensor]]) -> None:
    """Load :func:`snapshot`'s ``state`` into ``modules`` (the same names).

    Raises:
        KeyError: a module has no weights in ``state``.
    """
    missing = sorted(set(modules) - set(state))
    if missing:
        raise KeyError(f"no kept weights for {missing}; kept: {sorted(state)}")
    for name, m in modules.items():
        m.load_state_dict(state[name])


class BestPolicy:
    """The weights of the best window of training episodes seen so far (see the module doc).

    Args:
        window: episodes a window holds; a window counts only once it is full.
    """

    def __init__(self, window: int = 32) -> None:
        self.window = int(window)
        self.mean = -math.inf
        """Mean return of the best full window so far (``-inf``: none yet)."""
        self.se2 = float("nan")
        self.episodes = 0
        """Episodes finished when the best window ended."""
        self.step = 0
        """Policy steps when the best window ended."""
        self.state: dict[str, dict[str, torch.Tensor]] = {}

    def observe(self, returns: Sequence[float], episodes: int, step: int,
                modules: Mapping[str, torch.nn.Module]) -> bool:
        """Look at the window ``returns`` (the last finished episodes, ``episodes`` finished in
        all, at ``step`` policy steps); copy ``modules``' weights (to the CPU) if it is full and
        its mean return is a new high. Returns whether it copied."""
        if len(returns) < self.window or episodes <= self.episodes:
            return False
        mean, se2 = window_stats(returns)
        if not mean > self.mean:
            return False
        self.mean, self.se2, self.episodes, self.step = mean, se2, int(episodes), int(step)
        self.state = snapshot(modules)
        return True

    def candidate(self, returns: Sequence[float], episodes: int) -> bool:
        """Whether the kept weights are worth a duel against the last ones: kept, their window
        shares no episode with the last window (``returns``, ending at ``episodes`` finished
        episodes), and its mean is higher."""
        if not self.state or len(returns) == 0 or episodes - self.episodes < len(returns):
            return False
        return self.mean > window_stats(returns)[0]

    def clearly_better(self, returns: Sequence[float], episodes: int) -> bool:
        """Whether the kept window beats the last one (``returns``, ending at ``episodes``
        finished episodes) clearly: no shared episode and a gap over :data:`CLEAR_GAP_SE`
        standard errors (what decides when the duel does not)."""
        return self.candidate(returns, episodes) and _clear_gap(self.mean, self.se2,
                                                                *window_stats(returns))

    def restore(self, modules: Mapping[str, torch.nn.Module]) -> None:
        """Load the kept weights into ``modules`` (the same names as :meth:`observe`)."""
        load_snapshot(modules, self.state)

    def summary(self) -> dict[str, float]:
        """What was kept: window mean return, its episodes and policy steps (for the log)."""
        return {"best_window_return": self.mean, "best_window_episodes": float(self.episodes),
                "best_window_step": float(self.step)}

    def state_dict(self) -> dict[str, Any]:
        """The kept weights and their window (for checkpoints: tensors and numbers only)."""
        return {"window": self.window, "mean": self.mean, "se2": self.se2,
                "episodes": self.episodes, "step": self.step, "state": self.state}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.window = int(sd["window"])
        self.mean, self.se2 = float(sd["mean"]), float(sd["se2"])
        self.episodes, self.step = int(sd["episodes"]), int(sd["step"])
        self.state = {n: dict(s) for n, s in sd["state"].items()}
