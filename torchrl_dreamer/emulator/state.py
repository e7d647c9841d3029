"""Savestates: the whole console state of every env, in a versioned format of our own.

An :class:`EmulatorState` holds copies of the per-env state tensors (CPU registers, timer, PPU,
mapper state, VRAM, WRAM, OAM, IO/HRAM, cartridge RAM, serial log) plus the SHA-256 of the ROM it
belongs to. It can be loaded back into all envs, a mask of envs, or broadcast from one env, and
serialised with :meth:`EmulatorState.to_bytes` / :meth:`EmulatorState.save`.

File format (version :data:`STATE_VERSION`): magic ``b"TRDGBST\\0"``, a little-endian uint32
version, a uint32 JSON header length, the UTF-8 JSON header (ROM hash, env count, array names,
dtypes and shapes), then the raw arrays in header order.

Example:
    >>> import tempfile, torch
    >>> from torchrl_dreamer.emulator import GameBoy
    >>> from torchrl_dreamer.roms import rom_path
    >>> gb = GameBoy(rom_path("maze"), num_envs=2, check_header=False)
    >>> s = gb.save_state()
    >>> gb.run_frames(10); gb.load_state(s)
    >>> gb.frame_count.tolist()
    [0, 0]
    >>> path = tempfile.mkdtemp() + "/maze.trdstate"
    >>> s.save(path)
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from torchrl_dreamer.emulator import layout
from torchrl_dreamer.emulator.dma import DMA_PAST_T
from torchrl_dreamer.emulator.registers import R_NR43

__all__ = ["EmulatorState", "SavestateError", "STATE_VERSION", "STATE_MAGIC"]

STATE_VERSION = 9
"""Current savestate format version (bump when the layout changes; 3: SER_CNT counts serial
clock edges, MBC3 RTC columns, APU columns, OAM DMA columns, PPU_M0; 4: PPU mode and pixel
pipeline columns; 5: the console model (header ``model``), the Color's columns and its extra
memory array ``cgbx``; 6: the Color's PCM columns ``APU_SQ1_POS`` .. ``APU_NOISE_PEND``;
7: ``APU_PH`` and ``APU_WAVE_OUT``, the APU's phase and the wave channel's output buffer;
8: ``APU_NOISE_CTR``, the noise channel's counter, with ``APU_NOISE_CNT`` now the dots to its
next increment; 9: ``VRAM_OPEN``, the bus's VRAM fast-path bound). Version 4 files still load,
as DMG states (:func:`_upgrade_v4`), and version 5-8 files with the later columns 0
(:func:`_upgrade_padded`)."""
_V4_STATE_WORDS = layout.FIELDS["CGB"]  # version 4 ended where the Color's columns begin
_PADDED_STATE_WORDS = {5: layout.FIELDS["APU_SQ1_POS"],  # version 5 ended before the PCM columns
                       6: layout.FIELDS["APU_PH"],  # version 6 before the APU's phase
                       7: layout.FIELDS["APU_NOISE_CTR"],  # version 7 before the noise counter
                       8: layout.FIELDS["VRAM_OPEN"]}  # version 8 before the VRAM bound
STATE_MAGIC = b"TRDGBST\x00"
"""First 8 bytes of a serialised savestate."""

_DTYPES = {"int32": torch.int32, "uint8": torch.uint8}
_MODEL_NAMES = {"dmg": "DMG (original Game Boy)", "cgb": "Game Boy Color"}


class SavestateError(ValueError):
    """A savestate cannot be used here (wrong version, truncated, other ROM or env count)."""


@dataclass
class EmulatorState:
    """Whole console state of ``num_envs`` envs of one ROM.

    Attributes:
        version: format version (:data:`STATE_VERSION`).
        model: the console model it was taken on (``"dmg"`` or ``"cgb"``).
        rom_sha256: hash of the ROM the state was taken on.
        state_words: columns of the state table (guards against layout changes).
        arrays: name -> CPU tensor ``[num_envs, ...]``.
    """

    version: int
    rom_sha256: str
    state_words: int
    arrays: dict[str, torch.Tensor]
    model: str = "dmg"

    @property
    def num_envs(self) -> int:
        """Number of envs in the state."""
        return int(self.arrays["st"].shape[0])

    @classmethod
    def capture(cls, gb) -> EmulatorState:
        """Copy the current state of every env of ``gb`` to host memory."""
        arrays = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in gb.state_tensors().items()}
        return cls(STATE_VERSION, gb.cartridge.sha256, layout.STATE_WORDS, arrays, gb.model)

    def select(self, env: int) -> EmulatorState:
        """A 1-env state holding env ``env`` (to broadcast it to other envs)."""
        if not 0 <= env < self.num_envs:
            raise IndexError(f"env {env} out of range for a {self.num_envs}-env state")
        return EmulatorState(self.version, self.rom_sha256, self.state_words,
                             {k: v[env:env + 1].clone() for k, v in self.arrays.items()}, self.model)

    def check_compatible(self, gb, any_envs: bool = False) -> None:
        """Raise :class:`SavestateError` unless this state fits ``gb`` (version, ROM, shapes);
        ``any_envs``: any env count is fine (a pool of start states)."""
        if self.version != STATE_VERSION or self.state_words != layout.STATE_WORDS:
            raise SavestateError(
                f"savestate format version {self.version} ({self.state_words} state words) is not "
                f"supported; this build reads version {STATE_VERSION} ({layout.STATE_WORDS} words)"
            )
        if self.model != gb.model:
            raise SavestateError(
                f"savestate was taken on a {_MODEL_NAMES.get(self.model, self.model)} "
                f"(model={self.model!r}); this emulator is a {_MODEL_NAMES[gb.model]} "
                f"(model={gb.model!r}): create the GameBoy with model={self.model!r} to load it")
        if self.rom_sha256 != gb.cartridge.sha256:
            raise SavestateError(
                f"savestate was taken on another ROM (sha256 {self.rom_sha256[:12]}..., this "
                f"emulator runs {gb.cartridge.sha256[:12]}...)"
            )
        if not any_envs and self.num_envs not in (1, gb.num_envs):
            raise SavestateError(
                f"savestate holds {self.num_envs} envs; load it into {gb.num_envs} envs only by "
                "broadcasting a 1-env state (state.select(k))"
            )
        live = gb.state_tensors()
        for name, t in live.items():
            if name not in self.arrays or tuple(self.arrays[name].shape[1:]) != tuple(t.shape[1:]):
                raise SavestateError(f"savestate array {name!r} is missing or has the wrong shape")

    def restore_into(self, gb, mask: torch.Tensor | None = None) -> None:
        """Write this state into ``gb`` for the envs where ``mask`` is True (all if None)."""
        self.check_compatible(gb)
        if mask is not None:
            if mask.shape != (gb.num_envs,) or mask.dtype != torch.bool:
                raise ValueError(f"mask must be bool [{gb.num_envs}], got {mask.dtype} {tuple(mask.shape)}")
            mask = mask.to(gb.device)
        for name, dst in gb.state_tensors().items():
            src = self.arrays[name].to(gb.device)
            if src.shape[0] == 1 and gb.num_envs != 1:
                src = src.expand_as(dst)
            if mask is None:
                dst.copy_(src)
            else:
                dst.copy_(torch.where(mask.view(-1, *([1] * (dst.dim() - 1))), src, dst))

    # ------------------------------------------------------------------------------ files
    def to_bytes(self) -> bytes:
        """Serialise (see the module docstring for the format)."""
        names = sorted(self.arrays)
        header = {
            "rom_sha256": self.rom_sha256,
            "state_words": self.state_words,
            "model": self.model,
            "arrays": [[n, str(self.arrays[n].dtype).replace("torch.", ""), list(self.arrays[n].shape)]
                       for n in names],
        }
        hb = json.dumps(header).encode()
        parts = [STATE_MAGIC, struct.pack("<II", self.version, len(hb)), hb]
        parts += [self.arrays[n].contiguous().numpy().tobytes() for n in names]
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> EmulatorState:
        """Parse :meth:`to_bytes` output; raises :class:`SavestateError` on bad input."""
        if len(data) < 16 or data[:8] != STATE_MAGIC:
            raise SavestateError("not a torchrl_dreamer savestate (bad magic bytes)")
        version, hlen = struct.unpack("<II", data[8:16])
        if version not in (4, *_PADDED_STATE_WORDS, STATE_VERSION):
            raise SavestateError(f"savestate format version {version} is not supported (expected {STATE_VERSION})")
        if len(data) < 16 + hlen:
            raise SavestateError("savestate is truncated (header incomplete)")
        try:
            header = json.loads(data[16:16 + hlen])
        except ValueError as exc:
            raise SavestateError(f"savestate header is corrupt: {exc}") from None
        off = 16 + hlen
        arrays = {}
        for name, dt, shape in header["arrays"]:
            dtype = _DTYPES[dt]
            nbytes = int(torch.tensor(shape).prod()) * torch.empty((), dtype=dtype).element_size()
            if off + nbytes > len(data):
                raise SavestateError(f"savestate is truncated (array {name!r} incomplete)")
            buf = bytearray(data[off:off + nbytes])
            arrays[name] = torch.frombuffer(buf, dtype=dtype).reshape(shape).clone()
            off += nbytes
        if off != len(data):
            raise SavestateError(f"savestate has {len(data) - off} unexpected trailing bytes")
        state = cls(version, header["rom_sha256"], header["state_words"], arrays,
                    header.get("model", "dmg"))
        if version == 4:
            state = _upgrade_v4(state)
        elif version in _PADDED_STATE_WORDS:
            state = _upgrade_padded(state)
        _idle_dma_in_the_past(state.arrays["st"])
        return state

    def save(self, path: str | os.PathLike) -> None:
        """Write the state to ``path``."""
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike) -> EmulatorState:
        """Read a state written by :meth:`save`."""
        return cls.from_bytes(Path(path).read_bytes())


def _upgrade_v4(state: EmulatorState) -> EmulatorState:
    """A version 4 (DMG-only) state in the current format: the Color's state columns, appended
    after version 4's, are 0 (a DMG), and its ``cgbx`` row is the DMG's single byte."""
    st = state.arrays["st"]
    if state.state_words != _V4_STATE_WORDS or st.shape[1] != _V4_STATE_WORDS:
        raise SavestateError(f"version 4 savestate has {state.state_words} state words, expected "
                             f"{_V4_STATE_WORDS}")
    n = st.shape[0]
    arrays = dict(state.arrays)
    arrays["st"] = _pad_columns(st)
    arrays["cgbx"] = torch.zeros(n, 1, dtype=torch.uint8)
    return EmulatorState(STATE_VERSION, state.rom_sha256, layout.STATE_WORDS, arrays, "dmg")


def _upgrade_padded(state: EmulatorState) -> EmulatorState:
    """A version 5-8 state in the current format: the columns appended since are 0 (duty
    steps, LFSR, the APU's phase, the wave output buffer and the noise counter at their reset
    values; no VRAM fast-path bound, which the next unblocked VRAM write sets). A version 7
    noise countdown (the dots to the LFSR's next shift) is capped at one counter tick (8 x
    NR43's divisor code, 4 for code 0), so a playing noise channel goes on at its period; its
    phase within the period may move."""
    st = state.arrays["st"]
    words = _PADDED_STATE_WORDS[state.version]
    if state.state_words != words or st.shape[1] != words:
        raise SavestateError(f"version {state.version} savestate has {state.state_words} state "
                             f"words, expected {words}")
    arrays = dict(state.arrays)
    arrays["st"] = _pad_columns(st)
    if state.version == 7:
        code = (state.arrays["hram"][:, R_NR43].to(torch.int32) & 7)
        tick = torch.where(code == 0, torch.full_like(code, 4), code * 8)
        cnt = layout.FIELDS["APU_NOISE_CNT"]
        arrays["st"][:, cnt] = torch.minimum(arrays["st"][:, cnt], tick)
    return EmulatorState(STATE_VERSION, state.rom_sha256, layout.STATE_WORDS, arrays, state.model)


def _idle_dma_in_the_past(st: torch.Tensor) -> None:
    """Consoles whose OAM DMA times are both 0 (files of earlier builds, where 0 meant "no
    transfer"): put them at :data:`~.dma.DMA_PAST_T`, the current "no transfer", so the PPU
    does not see a transfer just before the state was saved."""
    end, prev = layout.FIELDS["DMA_END"], layout.FIELDS["DMA_PREV_END"]
    idle = (st[:, end] == 0) & (st[:, prev] == 0)
    st[idle, end] = DMA_PAST_T
    st[idle, prev] = DMA_PAST_T


def _pad_columns(st: torch.Tensor) -> torch.Tensor:
    """``st`` with zero columns appended up to the current :data:`~.layout.STATE_WORDS`."""
    extra = torch.zeros(st.shape[0], layout.STATE_WORDS - st.shape[1], dtype=st.dtype)
    return torch.cat([st, extra], dim=1)
