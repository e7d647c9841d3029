"""Snapshot / restore of a run's env mid-run, for checkpoints.

A resumed run should continue the same episodes, not reset every console:
:class:`~torchrl_dreamer.envs.GameBoyEnv` snapshots itself (:meth:`GameBoyEnv.state_dict`).
Other envs (e.g. gymnasium through TorchRL's ``GymEnv``) have no snapshot:
:func:`capture_env_state` returns ``None`` and the resumed run resets them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["capture_env_state", "restore_env_state"]


def capture_env_state(env: Any) -> dict[str, Any] | None:
    """``env.state_dict()`` of a ``GameBoyEnv``, ``None`` for other envs (or no env)."""
    from torchrl_dreamer.envs import GameBoyEnv

    return env.state_dict() if isinstance(env, GameBoyEnv) else None


def restore_env_state(env: Any, state: dict[str, Any]) -> None:
    """Put ``env`` back into the state :func:`capture_env_state` returned."""
    env.load_state_dict(state)
