"""Snapshot / restore of a :class:`~torchrl_dreamer.envs.GameBoyEnv` mid-run, for checkpoints.

A resumed run should continue the same episodes, not reset every console: this captures the
consoles (:meth:`GameBoy.save_state`), the env's per-env bookkeeping (pending deferred resets,
step and episode counters, last frame), the task's buffers and the env's generators, as tensors
and plain values only (loadable with ``weights_only=True``). Other envs (e.g. gymnasium through
TorchRL's ``GymEnv``) have no snapshot: :func:`capture_env_state` returns ``None`` and the resumed
run resets them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["capture_env_state", "restore_env_state"]

_BOOKKEEPING = ("_pending", "_steps", "_episode_id", "_last_pixels", "_last_done")


def capture_env_state(env: Any) -> dict[str, Any] | None:
    """Tensors describing ``env`` now, or ``None`` for envs that are not a ``GameBoyEnv``."""
    from torchrl_dreamer.envs import GameBoyEnv

    if not isinstance(env, GameBoyEnv):
        return None
    st = env.gb.save_state()
    return {
        "console": {"version": st.version, "rom_sha256": st.rom_sha256,
                    "state_words": st.state_words, "arrays": dict(st.arrays)},
        "env": {k: getattr(env, k).detach().to("cpu", copy=True) for k in _BOOKKEEPING},
        "task": {k: v.detach().to("cpu", copy=True) for k, v in env.task.buffers.items()},
        "generator": env._generator.get_state(),
        "noop_generator": env._noop_gen.get_state(),
    }


def restore_env_state(env: Any, state: dict[str, Any]) -> None:
    """Put ``env`` back into the state :func:`capture_env_state` returned."""
    from torchrl_dreamer.emulator.state import EmulatorState

    c = state["console"]
    env.gb.load_state(EmulatorState(c["version"], c["rom_sha256"], c["state_words"],
                                    dict(c["arrays"])))
    for k, v in state["env"].items():
        setattr(env, k, v.to(env.device))
    for k, v in state["task"].items():
        env.task.buffers[k].copy_(v.to(env.task.buffers[k].device))
    env._generator.set_state(state["generator"])
    env._noop_gen.set_state(state["noop_generator"])

