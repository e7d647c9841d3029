"""``EpisodeTracker``: episode returns, lengths and successes read back from committed replay rows.

The collector writes every env step into the replay (row ``t`` holds ``r_t``, ``is_first_t``,
``terminated_t``, ``truncated_t``; ``docs/row_alignment.md``) and commits rows in order, so the
training loop can compute episode statistics from the rows it has not read yet, on its own
thread, without hooking the actor's hot loop. An episode ends on a row with ``terminated`` or
``truncated``; it is a *success* when it ends ``terminated`` with a positive last reward (maze:
the exit is reached; catch never "succeeds" as it ends on the last life lost). Envs whose
episodes succeed by lasting (gymnasium CartPole) set ``success_rule = "truncated"``.
"""

from __future__ import annotations

import warnings
from collections import deque
from typing import Any

import torch

__all__ = ["EpisodeTracker", "SUCCESS_RULES", "is_success"]

SUCCESS_RULES = ("terminal_reward", "truncated", "flag", "none")
"""How an ended episode counts as a success: ``terminal_reward`` (ends ``terminated`` with a
positive last reward), ``truncated`` (lasts to the time limit), ``flag`` (the task's ``success``
flag was set at one of its steps: a replay field) or ``none`` (no notion of success: returns
only, success rates are NaN)."""


def is_success(rule: str, terminated: bool, truncated: bool, last_reward: float,
               flagged: bool = False) -> bool:
    """Whether an episode that just ended counts as a success under ``rule`` (``flagged``: the
    ``flag`` rule's flag was set during the episode)."""
    if rule == "truncated":
        return truncated and not terminated
    if rule == "flag":
        return flagged
    if rule == "none":
        return False
    return terminated and last_reward > 0


class EpisodeTracker:
    """Accumulates per-env returns from replay rows and keeps the last finished episodes.

    Args:
        num_envs: envs per replay row.
        window: how many recent episodes :meth:`recent` averages over.
        success_rule: ``"terminal_reward"`` (ends ``terminated`` with a positive reward) or
            ``"truncated"`` (reaches the time limit).

    Example:
        >>> import torch
        >>> from torchrl_dreamer.data import TimeMajorStorage, dreamer_schema
        >>> from torchrl_dreamer.data.synthetic import SyntheticSteps
        >>> storage = TimeMajorStorage(256, 16, spec=dreamer_schema())
        >>> steps = SyntheticSteps(16, torch.Generator().manual_seed(0), end_prob=0.2)
        >>> for _ in range(50):
        ...     _ = storage.write(steps.step())
        >>> tracker = EpisodeTracker(num_envs=16)
        >>> new = tracker.update(storage)  # (return, length, success) of the episodes ended since
        >>> len(new) > 0, tracker.recent()["episodes"] == len(new)
        (True, True)
    """

    def __init__(self, num_envs: int, window: int = 32,
                 success_rule: str = "terminal_reward") -> None:
        if success_rule not in SUCCESS_RULES:
            raise ValueError(f"success_rule must be one of {SUCCESS_RULES}, got {success_rule!r}")
        self.success_rule = success_rule
        self.num_envs = int(num_envs)
        self.window = int(window)
        self.next_t = 0
        self.returns = torch.zeros(self.num_envs, dtype=torch.float64)
        self.lengths = torch.zeros(self.num_envs, dtype=torch.int64)
        self.flagged = torch.zeros(self.num_envs, dtype=torch.bool)
        self.recent_eps: deque[tuple[float, int, bool]] = deque(maxlen=self.window)
        self.scores = torch.zeros(self.num_envs, dtype=torch.float64)
        #: the score of each episode the last :meth:`update` returned (empty without a
        #: ``score`` field in the replay)
        self.last_scores: list[float] = []
        self.recent_scores: deque[float] = deque(maxlen=self.window)
        self.episodes = 0
        self.successes = 0
        self.rows_lost = 0

    def update(self, storage: Any, upto: int | None = None) -> list[tuple[float, int, bool]]:
        """Read committed rows not seen yet; return the episodes they finished.

        Each episode is ``(return, length, success)``. Rows already overwritten by the ring
        (more than ``capacity`` rows since the last call) are skipped with a warning. ``upto``
        bounds the rows read (default: the storage's ``committed_t``); a collector whose actor
        writes on another CUDA stream gives it with
        :meth:`~torchrl_dreamer.collectors.AsyncDreamerCollector.readable_committed_t`, which
        also orders this thread's reads after those rows.
        """
        last = int(storage.committed_t) if upto is None else min(int(upto),
                                                                 int(storage.committed_t))
        if last < self.next_t:
            return []
        oldest = int(storage.total_steps) - int(storage.capacity)
        if self.next_t < oldest:
            self.rows_lost += oldest - self.next_t
            warnings.warn(f"EpisodeTracker skipped {oldest - self.next_t} overwritten rows; call "
                          "update() more often.", stacklevel=2)
            self.next_t = oldest
        ts = torch.arange(self.next_t, last + 1)
        rows = ts % storage.capacity
        f = storage.fields
        reward = f["reward"][rows].to("cpu", torch.float64).reshape(len(ts), self.num_envs)
        first = f["is_first"][rows].to("cpu").reshape(len(ts), self.num_envs).bool()
        term = f["terminated"][rows].to("cpu").reshape(len(ts), self.num_envs).bool()
        trunc = f["truncated"][rows].to("cpu").reshape(len(ts), self.num_envs).bool()
        flag = (f["success"][rows].to("cpu").reshape(len(ts), self.num_envs).bool()
                if self.success_rule == "flag" else torch.zeros_like(term))
        score = (f["score"][rows].to("cpu", torch.float64).reshape(len(ts), self.num_envs)
                 if "score" in f else None)
        finished = []
        self.last_scores = []
        for i in range(len(ts)):
            fi = first[i]
            self.returns = torch.where(fi, torch.zeros_like(self.returns), self.returns) + reward[i]
            if score is not None:
                self.scores = torch.where(fi, torch.zeros_like(self.scores), self.scores) + score[i]
            self.lengths = torch.where(fi, torch.zeros_like(self.lengths), self.lengths + 1)
            self.flagged = (self.flagged & ~fi) | flag[i]
            end = term[i] | trunc[i]
            for e in end.nonzero().flatten().tolist():
                ok = is_success(self.success_rule, bool(term[i, e]), bool(trunc[i, e]),
                                float(reward[i, e]), bool(self.flagged[e]))
                ep = (float(self.returns[e]), int(self.lengths[e]), ok)
                finished.append(ep)
                self.recent_eps.append(ep)
                if score is not None:
                    self.last_scores.append(float(self.scores[e]))
                    self.recent_scores.append(float(self.scores[e]))
                self.episodes += 1
                self.successes += int(ok)
        self.next_t = last + 1
        return finished

    def recent(self) -> dict[str, float]:
        """Mean return / length / success rate of the last ``window`` episodes (NaN if none),
        and their mean ``score`` once episodes with a score (a ``score`` field) have ended."""
        nan = float("nan")
        if not self.recent_eps:
            return {"return": nan, "length": nan, "success": nan, "episodes": 0.0}
        r, n, s = zip(*self.recent_eps, strict=True)
        k = len(r)
        success = float("nan") if self.success_rule == "none" else sum(s) / k
        out = {"return": sum(r) / k, "length": sum(n) / k, "success": success,
               "episodes": float(self.episodes)}
        if self.recent_scores:
            out["score"] = sum(self.recent_scores) / len(self.recent_scores)
        return out

    def state_dict(self) -> dict[str, Any]:
        """Counters and running sums (tensors and ints only: loads with ``weights_only=True``)."""
        eps = list(self.recent_eps)
        return {
            "next_t": self.next_t,
            "returns": self.returns.clone(),
            "lengths": self.lengths.clone(),
            "flagged": self.flagged.clone(),
            "recent": torch.tensor([[r, n, float(s)] for r, n, s in eps], dtype=torch.float64)
            if eps else torch.zeros(0, 3, dtype=torch.float64),
            "episodes": self.episodes,
            "successes": self.successes,
            "scores": self.scores.clone(),
            "recent_scores": torch.tensor(list(self.recent_scores), dtype=torch.float64),
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self.next_t = int(sd["next_t"])
        self.returns = sd["returns"].clone()
        self.lengths = sd["lengths"].clone()
        self.flagged = sd.get("flagged", torch.zeros_like(self.flagged)).clone()
        self.recent_eps.clear()
        for r, n, s in sd["recent"].tolist():
            self.recent_eps.append((float(r), int(n), bool(s)))
        self.episodes = int(sd["episodes"])
        self.successes = int(sd["successes"])
        self.scores = sd.get("scores", torch.zeros_like(self.scores)).clone()
        self.recent_scores.clear()
        self.recent_scores.extend(sd.get("recent_scores", torch.zeros(0)).tolist())
