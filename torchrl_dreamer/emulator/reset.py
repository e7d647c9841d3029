"""``ResetCache``: snapshot a console state once, restore masked envs on the device.

RL envs reset a few consoles at a time. Reloading a savestate from the host every time would sync
and copy; instead the snapshot lives on the emulator's device and one Warp kernel per state array
copies it into only the envs whose mask entry is set: envs with a clear mask return at once, so
an all-false mask costs a launch and no copying, with no host round trip (the mask is read on the
device). Why our own: TorchRL's reset path works on TensorDicts, not on emulator memory.

Example:
    >>> import torch
    >>> from torchrl_dreamer.emulator import GameBoy
    >>> from torchrl_dreamer.roms import rom_path
    >>> gb = GameBoy(rom_path("maze"), num_envs=3, check_header=False)
    >>> cache = ResetCache(gb)                 # snapshot of the power-on state
    >>> gb.run_frames(30)
    >>> cache.restore(torch.tensor([True, False, True]))
    >>> gb.frame_count.tolist()                # envs 0 and 2 are back at frame 0
    [0, 30, 0]
"""

from __future__ import annotations

from typing import Any

import torch
import warp as wp

__all__ = ["ResetCache"]


@wp.kernel
def _restore(src: wp.array2d(dtype=Any), dst: wp.array2d(dtype=Any),
             mask: wp.array(dtype=wp.bool), broadcast: int):
    """Copy row ``i`` (or row 0 when ``broadcast``) of ``src`` into ``dst`` where ``mask[i]``;
    one generic kernel, overloaded for the state arrays' dtypes (int32 and uint8)."""
    i = wp.tid()
    if not mask[i]:
        return
    s = i
    if broadcast != 0:
        s = 0
    for k in range(dst.shape[1]):
        dst[i, k] = src[s, k]


@wp.kernel
def _restore_rows(src: wp.array2d(dtype=Any), dst: wp.array2d(dtype=Any),
                  mask: wp.array(dtype=wp.bool), rows: wp.array(dtype=wp.int32)):
    """Copy row ``rows[i]`` of a snapshot pool ``src`` into ``dst`` row ``i`` where ``mask[i]``."""
    i = wp.tid()
    if not mask[i]:
        return
    s = rows[i]
    for k in range(dst.shape[1]):
        dst[i, k] = src[s, k]


for _dtype in (wp.int32, wp.uint8):
    wp.overload(_restore, {"src": wp.array2d(dtype=_dtype), "dst": wp.array2d(dtype=_dtype)})
    wp.overload(_restore_rows, {"src": wp.array2d(dtype=_dtype), "dst": wp.array2d(dtype=_dtype)})


class ResetCache:
    """A device-resident snapshot of a :class:`~.gameboy.GameBoy`'s state.

    Args:
        gb: the emulator.
        state: an :class:`~.state.EmulatorState` (all envs, or 1 env to broadcast) or None to
            snapshot ``gb``'s current state. With ``pool=True`` it may hold any number ``P`` of
            envs: a pool of start states that :meth:`restore` picks from per env (``rows``).
        pool: accept a ``P``-env state (varied starts: ``GameBoyEnv(noop_max=...)``).
    """

    def __init__(self, gb, state=None, pool: bool = False) -> None:
        self.gb = gb
        if state is None:
            state = gb.save_state()
        state.check_compatible(gb, any_envs=pool)
        self.pool_size = state.num_envs
        self.broadcast = state.num_envs == 1 and gb.num_envs != 1
        self._snap = {k: v.to(gb.device).contiguous() for k, v in state.arrays.items()}
        self._wsnap = {k: wp.from_torch(v) for k, v in self._snap.items()}

    def restore(self, mask: torch.Tensor, rows: torch.Tensor | None = None) -> None:
        """Restore the snapshot into the envs where ``mask`` (bool ``[N]``, on device) is True.

        ``rows`` (int ``[N]`` on the device, values in ``0..P-1``) picks each env's row of a
        ``P``-env snapshot pool (a varied start per env and episode); without it, env ``i`` gets
        row ``i`` (or row 0 of a broadcast 1-env snapshot). Nothing is read back to the host.
        """
        gb = self.gb
        if mask.shape != (gb.num_envs,) or mask.dtype != torch.bool:
            raise ValueError(f"mask must be bool [{gb.num_envs}], got {mask.dtype} {tuple(mask.shape)}")
        mask = mask.to(gb.device).contiguous()
        wmask = wp.from_torch(mask, dtype=wp.bool)
        if rows is not None:
            if rows.shape != (gb.num_envs,):
                raise ValueError(f"rows must have shape [{gb.num_envs}], got {tuple(rows.shape)}")
            wrows = wp.from_torch(rows.to(gb.device, torch.int32).contiguous(), dtype=wp.int32)
            for name, dst in gb.state_tensors().items():
                gb.launch(_restore_rows, [self._wsnap[name], wp.from_torch(dst), wmask, wrows])
            return
        if not (self.broadcast or self.pool_size == gb.num_envs):
            raise ValueError(f"a {self.pool_size}-state pool needs rows= to pick each env's start")
        for name, dst in gb.state_tensors().items():
            gb.launch(_restore, [self._wsnap[name], wp.from_torch(dst), wmask, int(self.broadcast)])
