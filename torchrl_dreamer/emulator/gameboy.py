"""``GameBoy``: N DMG consoles running one ROM, one Warp thread per console.

This is the emulator's one entry point (the contract in ``docs/emulator.md``). All per-console
state lives in torch tensors shared zero-copy with Warp (``wp.from_torch``), so observations,
registers and memory reads stay on the device with no host round trip.

On the CPU, ``workers=K`` emulates the consoles on K cores (K slices of the batch launched
together from K threads; :mod:`~torchrl_dreamer.emulator.workers`), with the same bytes as one
launch.

Example:
    >>> import torch
    >>> from torchrl_dreamer.emulator import GameBoy, BUTTON_A
    >>> from torchrl_dreamer.roms import rom_path                # the maze we ship (no logo)
    >>> gb = GameBoy(rom_path("maze"), num_envs=4, check_header=False)
    >>> gb.run_frames(60)
    >>> obs = gb.step(torch.full((4,), BUTTON_A, dtype=torch.uint8))
    >>> obs.shape
    torch.Size([4, 1, 72, 20])
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import warp as wp

from torchrl_dreamer.emulator import (  # button bits live in the light package __init__
    BUTTON_A,
    BUTTON_B,
    BUTTON_DOWN,
    BUTTON_LEFT,
    BUTTON_RIGHT,
    BUTTON_SELECT,
    BUTTON_START,
    BUTTON_UP,
    DEFAULT_PPU,
    PPU_MODES,
    PpuMode,
    layout,
)
from torchrl_dreamer.emulator.battery import RTC_TRAILER_SIZES, pack_rtc, unpack_rtc
from torchrl_dreamer.emulator.boot_vram import boot_vram
from torchrl_dreamer.emulator.cartridge import Cartridge, load_rom_bytes, parse_cartridge
from torchrl_dreamer.emulator.codegen import load_kernel_module
from torchrl_dreamer.emulator.compat_palettes import CompatBoot, compat_boot
from torchrl_dreamer.emulator.decision import step_until_change
from torchrl_dreamer.emulator.dma import DMA_PAST_T
from torchrl_dreamer.emulator.idle import loop_heads
from torchrl_dreamer.emulator.launch import (
    AUTO,
    LaunchFrames,
    launch_plan,
    resolve_launch_frames,
)
from torchrl_dreamer.emulator.mappers import mapper_for
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.model import resolve_model
from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE, SCREEN_HEIGHT, SCREEN_WIDTH
from torchrl_dreamer.emulator.workers import LaunchPool, check_workers, slice_bounds

__all__ = [
    "GameBoy",
    "BUTTON_A",
    "BUTTON_B",
    "BUTTON_SELECT",
    "BUTTON_START",
    "BUTTON_RIGHT",
    "BUTTON_LEFT",
    "BUTTON_UP",
    "BUTTON_DOWN",
]

# IO registers as left by the DMG-ABC boot ROM (FF00-FF4B), as stored in ``hram`` (reads add
# the unused bits); unlisted ones are 0. P1's select bits are both 0: FF00 reads CF.
_POST_BOOT_IO = {
    0x00: 0x00, 0x02: 0x7E, 0x0F: 0x01, 0x10: 0x80, 0x11: 0xBF, 0x12: 0xF3, 0x13: 0xFF,
    0x14: 0xBF, 0x16: 0x3F, 0x18: 0xFF, 0x19: 0xBF, 0x1A: 0x7F, 0x1B: 0xFF, 0x1C: 0x9F,
    0x1D: 0xFF, 0x1E: 0xBF, 0x20: 0xFF, 0x23: 0xBF, 0x24: 0x77, 0x25: 0xF3, 0x26: 0xF1,
    0x40: 0x91, 0x46: 0xFF, 0x47: 0xFC, 0x48: 0xFF, 0x49: 0xFF,
}
_POST_BOOT_REGS = {"A": 0x01, "F": 0xB0, "B": 0x00, "C": 0x13, "D": 0x00, "E": 0xD8, "H": 0x01,
                   "L": 0x4D, "SP": 0xFFFE, "PC": 0x0100}

_POST_BOOT_DIV16 = 0xABC8

# The Game Boy Color at PC = 0100 (Pan Docs "Power Up Sequence"; mooneye boot_regs-cgb for a
# DMG-only cartridge, which runs in the compatibility mode). The system counter: mooneye
# boot_div-cgbABCDE reads DIV 0x27 right after its increment 21 M-cycles later than
# boot_div-dmgABCmgb reads 0xAC on a DMG (0xABC8 there): 0x2700 - 0x38 - 21 * 4.
_POST_BOOT_REGS_CGB = {"A": 0x11, "F": 0x80, "B": 0x00, "C": 0x00, "D": 0xFF, "E": 0x56, "H": 0x00,
                       "L": 0x0D, "SP": 0xFFFE, "PC": 0x0100}
# In compatibility mode B, H and L are what the boot ROM's palette choice leaves
# (compat_palettes.CompatBoot: the title checksum, and HL 007C or 991A).
_POST_BOOT_REGS_COMPAT = {**_POST_BOOT_REGS_CGB, "D": 0x00, "E": 0x08}
_POST_BOOT_DIV16_CGB = 0x2674
_LOGO_MAP_ROWS = slice(0x1800 + 5 * 32, 0x1800 + 14 * 32)  # VRAM offsets of map rows 5-13
_BOOT_SIZES = {"dmg": 0x100, "cgb": 0x900}  # DMG boot ROM; Color: 0000-00FF and 0200-08FF

_STATE_ARRAYS = ("st", "vram", "oam", "wram", "hram", "cram", "ser", "cgbx")

def _wp_device(device: torch.device) -> str:
    return "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"


@dataclass
class _Slice:
    """Consoles ``lo..hi`` of a batch: ``Mem`` views of them and their recorded ``gb_run``
    launches (one slice covering the batch when ``workers == 1``)."""

    lo: int
    hi: int
    mem: Any  # Mem whose obs is packed2[lo:hi]
    out_mem: Any  # Mem whose obs is set per call to obs_out[lo:hi] (step(obs_out=...))
    obs: Any  # wp view of packed2[lo:hi], put back into out_mem after a call
    btn: Any  # wp view of the persistent button array, rows lo..hi
    cmds: dict[str, Any] = field(default_factory=dict)  # "run" / "out" -> recorded launch
    params: dict[str, list[int | None]] = field(default_factory=dict)  # last scalars written


class GameBoy:
    """``num_envs`` Game Boys (DMG or Color) running the same ROM, stepped together by one Warp
    kernel.

    Args:
        rom: ROM path or bytes. Bad images raise :class:`~.cartridge.CartridgeError` before
            anything is allocated.
        num_envs: number of consoles (N).
        device: ``"cpu"`` or a CUDA device. On CPU per-console arrays are env-major
            (``[N, size]``); on CUDA they are stored address-major (``[size, N]``) and viewed
            transposed, so consoles in lockstep coalesce their memory accesses.
        boot_rom: optional boot ROM: 256 bytes for the DMG (mapped at 0000-00FF), 2304 for the
            Color (0000-00FF and 0200-08FF), until FF50 is written; without it consoles start
            in the model's post-boot state.
        framebuffer: keep the full ``uint8 [N, 144, 160]`` shade framebuffer readable as
            :attr:`framebuffer` (the last frame of every launch is rendered, since it also
            yields :attr:`packed2`, unless ``run_frames(..., render=False)``; this flag only
            exposes it).
        check_header: warn on a missing logo / bad checksums.
        memory_layout: ``"env_major"`` (``[N, size]`` storage, the CPU default) or
            ``"address_major"`` (``[size, N]`` storage viewed transposed, the CUDA default).
        idle_skip: fast-forward side-effect-free waiting loops (polls of a WRAM/HRAM byte,
            JOYP, LY or STAT; countdown delay loops; ``JR @`` spins: see
            :mod:`~torchrl_dreamer.emulator.idle`) by whole iterations (bit-identical results;
            ``False`` only for comparisons/debugging).
        ppu: ``"fifo"`` (pixel pipeline for mid-scanline register writes) or ``"line"`` (whole
            lines); see :data:`~torchrl_dreamer.emulator.PPU_MODES`. Same timing (STAT, LY, interrupts) in both.
        workers: CPU cores to emulate on (CPU device only). The consoles are split into
            ``min(workers, num_envs)`` contiguous slices whose launches run at once, one per
            thread (a Warp CPU launch releases the GIL), for every emulating launch
            (:meth:`run_frames`, :meth:`step`, :meth:`step_instructions`); every output is the
            same as with ``workers=1``. The short per-console kernels (:meth:`read_memory`,
            :meth:`write_memory`, :class:`~.reset.ResetCache` restores) stay one launch over
            the batch on the calling thread. ``ValueError`` for < 1, more than the process's
            CPU cores, or > 1 on CUDA.
        model: ``"dmg"`` or ``"cgb"`` (Game Boy Color), or ``None``: the Color for a Color-only
            cartridge, else the DMG (see :mod:`~torchrl_dreamer.emulator.model`: a DMG-only
            cartridge on the Color runs in its compatibility mode; ``"dmg"`` refuses a
            Color-only one). ``ppu="fifo"``'s pixel pipeline serves both models (in Color mode
            with tile attributes, palette memory and OAM-index priority; a DMG-only cartridge's
            picture on the Color is coloured by :mod:`~.render_compat`); :attr:`rgb555` is the
            Color's colour frame.
        launch_frames: frames emulated per kernel launch: ``None`` runs a whole
            :meth:`run_frames` / :meth:`step` call in one launch; ``1`` makes a step of
            ``frame_skip`` frames ``frame_skip`` launches, so the consoles of a GPU warp wait for
            each other at every frame end and start the next frame together instead of drifting
            apart by instruction counts (``benchmarks/simt.py``'s "meet at frame ends" model);
            ``"auto"`` (the default) is ``1`` on CUDA and ``None`` on the CPU, the faster of the
            two on each (measured in :mod:`~torchrl_dreamer.emulator.launch`). The results are
            the same whatever the value, bit for bit. ``ValueError`` below 1.

    Attributes:
        cartridge: the parsed :class:`~.cartridge.Cartridge` header.
        model: ``"dmg"`` or ``"cgb"``.
        packed2: ``uint8 [N, 1, 72, 20]`` observation of the last frame run.
        workers: slices the consoles are emulated in (``min(workers, num_envs)``).

    Example:
        >>> from torchrl_dreamer.roms import rom_path
        >>> from torchrl_dreamer.emulator.workers import available_cores
        >>> one = GameBoy(rom_path("maze"), num_envs=5, check_header=False)
        >>> two = GameBoy(rom_path("maze"), num_envs=5, check_header=False,
        ...               workers=min(2, available_cores()))
        >>> one.run_frames(30); two.run_frames(30)
        >>> bool((one.step(BUTTON_A) == two.step(BUTTON_A)).all())
        True
    """

    def __init__(
        self,
        rom: str | os.PathLike | bytes,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        boot_rom: str | os.PathLike | bytes | None = None,
        framebuffer: bool = False,
        check_header: bool = True,
        memory_layout: str | None = None,
        idle_skip: bool = True,
        ppu: PpuMode = DEFAULT_PPU,
        workers: int = 1,
        model: str | None = None,
        launch_frames: LaunchFrames = AUTO,
    ) -> None:
        if ppu not in PPU_MODES:
            raise ValueError(f"unknown ppu mode {ppu!r}; expected one of {', '.join(PPU_MODES)}")
        self.ppu = ppu
        data = load_rom_bytes(rom)
        cart = parse_cartridge(data, check=check_header, dmg_only=False)
        self.model, self._cgb = resolve_model(model, cart.cgb_flag)
        color = self.model == "cgb"
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        boot = None
        if boot_rom is not None:
            boot = load_rom_bytes(boot_rom)
            want = _BOOT_SIZES[self.model]
            if len(boot) != want:
                raise ValueError(f"boot_rom must be {want} bytes for model={self.model!r} (the "
                                 f"{'Color' if color else 'DMG'} boot ROM), got {len(boot)}")
        dev = torch.device(device)
        workers = check_workers(workers, dev)  # before the CUDA check: its error says what to do
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"device {dev} requested but CUDA is not available")
        if dev.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, got {dev}")
        if memory_layout is None:
            memory_layout = "address_major" if dev.type == "cuda" else "env_major"
        if memory_layout not in ("env_major", "address_major"):
            raise ValueError(f"memory_layout must be 'env_major' or 'address_major', got {memory_layout!r}")
        self.memory_layout = memory_layout
        self.launch_frames = resolve_launch_frames(launch_frames, dev)  # before any kernel work
        wp.init()
        self._kmod = load_kernel_module(_wp_device(dev), idle_skip=idle_skip)
        self._step_kmod = None
        self.cartridge: Cartridge = cart
        self.num_envs = num_envs
        self.device = dev
        self._expose_fb = framebuffer
        self._rom_bytes = data
        self._boot_bytes = boot
        n = num_envs
        self._st = self._alloc(layout.STATE_WORDS, torch.int32)
        self._vram = self._alloc(layout.VRAM_SIZE, torch.uint8)
        self._oam = self._alloc(layout.OAM_SIZE, torch.uint8)
        self._wram = self._alloc(layout.WRAM_SIZE, torch.uint8)
        self._hram = self._alloc(layout.HRAM_SIZE, torch.uint8)
        self._cram = self._alloc(max(cart.ram_size, 1), torch.uint8)
        self._ser = self._alloc(layout.SERIAL_CAPACITY, torch.uint8)
        # the Color's extra memory and colour frame: a 1-byte row / 1-pixel frame on a DMG
        self._cgbx = self._alloc(layout.CGBX_SIZE if color else 1, torch.uint8)
        self._rgb = (torch.zeros(n, SCREEN_HEIGHT, SCREEN_WIDTH, dtype=torch.int16, device=dev)
                     if color else torch.zeros(n, 1, 1, dtype=torch.int16, device=dev))
        self._fb = torch.zeros(n, SCREEN_HEIGHT, SCREEN_WIDTH, dtype=torch.uint8, device=dev)
        self.packed2 = torch.zeros(n, *PACKED2_SHAPE, dtype=torch.uint8, device=dev)
        self._rom = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(dev)
        self._boot = torch.frombuffer(bytearray(boot if boot else b"\x00"), dtype=torch.uint8).to(dev)
        self._no_buttons = torch.zeros(n, dtype=torch.uint8, device=dev)
        self._heads = wp.from_torch(torch.tensor(loop_heads(), dtype=torch.uint8, device=dev))
        self._all = torch.ones(n, dtype=torch.uint8, device=dev)
        self._mem = Mem()
        for name in (*_STATE_ARRAYS, "rom", "boot", "fb", "rgb"):
            setattr(self._mem, name, wp.from_torch(getattr(self, "_" + name)))
        self._mem.obs = wp.from_torch(self.packed2)
        # gb_run launches are recorded once (per kernel) and replayed with new scalar arguments:
        # packing the Mem struct and wrapping tensors costs ~35 us a launch, more than a frame
        self._btn = torch.zeros(n, 1, dtype=torch.uint8, device=dev)
        self._peek_cmds: dict[int, tuple[torch.Tensor, object]] = {}  # read_memory, by length
        # workers > 1: one slice of consoles per core, launched together (see workers.py)
        self.workers = min(workers, n)
        self._pool = LaunchPool(self.workers) if self.workers > 1 else None
        self._slices = [self._make_slice(lo, hi) for lo, hi in slice_bounds(n, self.workers)]
        self.reset_power_on()

    # ------------------------------------------------------------------------------ internals
    def _fifo_flag(self) -> int:
        """``PPU_FIFO`` column value: the pixel pipeline (:mod:`~.fifo`) on lines with a
        mid-mode-3 LCD register write, on either model."""
        return int(self.ppu == "fifo")

    def _alloc(self, size: int, dtype: torch.dtype) -> torch.Tensor:
        if self.memory_layout == "address_major":
            return torch.zeros(size, self.num_envs, dtype=dtype, device=self.device).t()
        return torch.zeros(self.num_envs, size, dtype=dtype, device=self.device)

    def _slice_mem(self, lo: int, hi: int) -> Mem:
        """A ``Mem`` of views of consoles ``lo..hi`` (the shared ROM and boot ROM whole)."""
        m = Mem()
        for name in (*_STATE_ARRAYS, "fb", "rgb"):
            setattr(m, name, wp.from_torch(getattr(self, "_" + name)[lo:hi]))
        m.rom = self._mem.rom
        m.boot = self._mem.boot
        m.obs = wp.from_torch(self.packed2[lo:hi])
        return m

    def _make_slice(self, lo: int, hi: int) -> _Slice:
        whole = lo == 0 and hi == self.num_envs
        return _Slice(lo, hi, mem=self._mem if whole else self._slice_mem(lo, hi),
                      out_mem=self._slice_mem(lo, hi), obs=wp.from_torch(self.packed2[lo:hi]),
                      btn=wp.from_torch(self._btn[lo:hi]))

    def _run_slices(self, cmds: list) -> None:
        """Launch recorded commands, one per slice: on the pool's threads when there are several
        (CPU only), else as :meth:`_replay` does. Returns when all have finished."""
        if self._pool is None:
            for cmd in cmds:
                self._replay(cmd)
        else:
            self._pool.run([cmd.launch for cmd in cmds])

    def _launch_slices(self, kernel, inputs) -> None:
        """Launch ``kernel`` over every slice with ``inputs(slice)``; one plain launch when there
        is a single slice (the per-call recording costs about what a launch's packing does)."""
        if self._pool is None:
            self.launch(kernel, inputs(self._slices[0]))
            return
        wdev = _wp_device(self.device)
        self._run_slices([wp.launch(kernel, dim=s.hi - s.lo, inputs=inputs(s), device=wdev,
                                    record_cmd=True) for s in self._slices])

    def launch(self, kernel, inputs: list) -> None:
        """Launch a Warp ``kernel`` once over all N consoles (``dim=num_envs``) with ``inputs``,
        on the calling thread whatever ``workers`` is (each kernel thread touches only its own
        console, so this is always correct), on PyTorch's current stream on CUDA; used for the
        short kernels (:class:`~torchrl_dreamer.emulator.reset.ResetCache` restores,
        :meth:`write_memory`)."""
        wdev = _wp_device(self.device)
        if self.device.type == "cuda":
            with wp.ScopedStream(wp.stream_from_torch(torch.cuda.current_stream(self.device))):
                wp.launch(kernel, dim=self.num_envs, inputs=inputs, device=wdev)
        else:
            wp.launch(kernel, dim=self.num_envs, inputs=inputs, device=wdev)

    def _run(self, buttons: torch.Tensor | int | None, frames: int, press_frames: int,
             pack: int, out: torch.Tensor | None = None) -> None:
        """Launch ``gb_run`` with the observation in :attr:`packed2` (or in ``out``) through
        recorded launches, one per slice (rebuilt when the kernel module changes); ``buttons``
        go through a persistent array."""
        if buttons is None:
            self._btn.zero_()
        elif isinstance(buttons, int):
            # an int mask fills the persistent array in place (no temporary tensor: per-call
            # Python work is what a short launch costs)
            if not 0 <= buttons <= 255:
                raise ValueError(f"button mask must be in 0..255, got {buttons}")
            self._btn.fill_(buttons)
        else:
            self._btn.copy_(self._buttons(buttons).view(-1, 1))
        kernel = self._kmod.gb_run
        key = "run" if out is None else "out"
        cmds = []
        for s in self._slices:
            if out is not None:
                # the recorded launch holds the Mem struct by reference: it sees this at launch
                s.out_mem.obs = wp.from_torch(out[s.lo:s.hi])
            cmd = s.cmds.get(key)
            if cmd is None or cmd.kernel is not kernel:
                mem = s.mem if out is None else s.out_mem
                cmd = wp.launch(kernel, dim=s.hi - s.lo, device=_wp_device(self.device),
                                inputs=[mem, self._heads, s.btn, 0, 0, 0, 0], record_cmd=True)
                s.cmds[key] = cmd
                s.params[key] = [None, None, None]  # last frames, press, pack set
            cmds.append((cmd, s.params[key]))
        try:
            for params in launch_plan(frames, press_frames, pack, self.launch_frames):
                for cmd, last in cmds:
                    for j in range(3):
                        if params[j] != last[j]:  # a parameter write costs ~1 us: skip unchanged
                            cmd.set_param_at_index(3 + j, params[j])
                            last[j] = params[j]
                self._run_slices([cmd for cmd, _ in cmds])
        finally:
            if out is not None:
                for s in self._slices:
                    s.out_mem.obs = s.obs  # hold no reference to the caller's tensor

    def _replay(self, cmd) -> None:
        """Launch a recorded command (on PyTorch's current stream on CUDA, as :meth:`launch` does)."""
        if self.device.type == "cuda":
            cmd.launch(stream=wp.stream_from_torch(torch.cuda.current_stream(self.device)))
        else:
            cmd.launch()

    def _buttons(self, buttons: torch.Tensor | int | None) -> torch.Tensor:
        if buttons is None:
            return self._no_buttons
        if isinstance(buttons, int):
            if not 0 <= buttons <= 255:
                raise ValueError(f"button mask must be in 0..255, got {buttons}")
            return torch.full((self.num_envs,), buttons, dtype=torch.uint8, device=self.device)
        if not isinstance(buttons, torch.Tensor):
            raise TypeError(f"buttons must be a uint8 tensor [N], an int mask or None, got {type(buttons)}")
        if buttons.shape != (self.num_envs,):
            raise ValueError(f"buttons must have shape [{self.num_envs}], got {tuple(buttons.shape)}")
        if buttons.dtype != torch.uint8:
            raise ValueError(f"buttons must be uint8 (bit mask, see BUTTON_*), got {buttons.dtype}")
        return buttons.to(self.device).contiguous()

    # ------------------------------------------------------------------------------ lifecycle
    def reset_power_on(self) -> None:
        """Put every console in its power-on state (post-boot state without a boot ROM)."""
        for name in _STATE_ARRAYS:
            getattr(self, "_" + name).zero_()
        st = self._st
        f = layout.FIELDS
        cart = self.cartridge
        st[:, f["MBC"]] = cart.mbc
        st[:, f["ROM_MASK"]] = cart.rom_banks - 1
        st[:, f["RAM_SIZE"]] = cart.ram_size
        st[:, f["RTC_ON"]] = int(cart.rtc)
        for name, value in mapper_for(cart.mbc).power_on.items():
            st[:, f[name]] = value
        st[:, f["MODE"]] = 2
        st[:, f["PPU_NEXT"]] = 80
        st[:, f["DMA_END"]] = DMA_PAST_T  # no OAM DMA has run (dma.py: times of a past transfer)
        st[:, f["DMA_PREV_END"]] = DMA_PAST_T
        st[:, f["PPU_FIFO"]] = self._fifo_flag()
        st[:, f["CGB"]] = self._cgb
        if self.model == "cgb":
            st[:, f["SVBK"]] = 1
        if self._boot_bytes is None:
            regs = _POST_BOOT_REGS
            compat = None
            if self._cgb == layout.MODEL_CGB:
                regs = _POST_BOOT_REGS_CGB
            elif self._cgb == layout.MODEL_CGB_COMPAT:
                compat = compat_boot(self._rom_bytes)
                regs = {**_POST_BOOT_REGS_COMPAT, "B": compat.title_checksum,
                        "H": compat.hl >> 8, "L": compat.hl & 0xFF}
            for k, v in regs.items():
                st[:, f[k]] = v
            # system counter at PC = 0100 on DMG-ABC: DIV becomes AC 14 M-cycles later (mooneye
            # boot_div); the serial clock, a bit of it, keeps that phase (boot_sclk_align)
            st[:, f["DIV16"]] = _POST_BOOT_DIV16_CGB if self.model == "cgb" else _POST_BOOT_DIV16
            for r, v in _POST_BOOT_IO.items():
                self._hram[:, r] = v
            # the boot ROM's chime still plays on channel 1 (NR52 reads F1; NR11 was 80, length 64)
            st[:, f["APU_ACT"]] = 1
            st[:, f["APU_LEN1"]] = 64
            # VRAM as the boot ROM leaves it (logo and (R) tile; some programs draw them)
            vram = bytearray(boot_vram(self._rom_bytes))
            if self.model == "cgb":
                # the Color boot ROM's fade-out clears the map rows of its logo screen (5-13);
                # it writes the DMG logo's map back for the two titles that animate it
                if compat is None or not compat.logo_map:
                    vram[_LOGO_MAP_ROWS] = bytes(len(vram[_LOGO_MAP_ROWS]))
                # wave RAM reads 00 FF 00 FF ... after it (CGB A-E; which.gb tells CGB 0,
                # whose boot ROM leaves it as it powered on, by this)
                self._hram[:, 0x30:0x40:2] = 0x00
                self._hram[:, 0x31:0x40:2] = 0xFF
                # it leaves every BG colour white (OBJ palettes: white here too)
                self._cgbx[:, layout.CGBX_BGPAL:layout.CGBX_SIZE] = 0xFF
                self._cgbx[:, layout.CGBX_BGPAL + 1:layout.CGBX_SIZE:2] = 0x7F
                if compat is None:
                    self._hram[:, 0x55] = 0xFF  # HDMA5: no transfer
                else:
                    self._load_compat_palettes(compat)
            self._vram[:] = torch.frombuffer(vram, dtype=torch.uint8).to(self.device)
        else:
            # the boot ROM is mapped up to its end; a Color boot ROM starts in Color mode and
            # itself selects the compatibility mode (KEY0) for a DMG-only cartridge
            st[:, f["BOOT_ON"]] = len(self._boot_bytes)
            if self.model == "cgb":
                st[:, f["CGB"]] = layout.MODEL_CGB
        self._wram.zero_()

    def _load_compat_palettes(self, compat: CompatBoot) -> None:
        """The Color boot ROM's palettes for a DMG-only cartridge: BG palette 0 and OBJ palettes
        0-1 (:mod:`.compat_palettes`)."""
        for base, colours in ((layout.CGBX_BGPAL, compat.bg), (layout.CGBX_OBJPAL, compat.obj0),
                              (layout.CGBX_OBJPAL + 8, compat.obj1)):
            raw = b"".join(c.to_bytes(2, "little") for c in colours)
            self._cgbx[:, base:base + 8] = torch.tensor(list(raw), dtype=torch.uint8)

    # ------------------------------------------------------------------------------ running
    def run_frames(self, n: int = 1, buttons: torch.Tensor | int | None = None,
                   render: bool = True) -> None:
        """Advance every console ``n`` frames with ``buttons`` held throughout (one launch).

        ``render=False`` leaves :attr:`packed2` and the framebuffer as they were (no scanline is
        drawn: the equivalent of PyBoy's ``tick(n, False)``, for runs nobody looks at).
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if n == 0:
            return
        self._run(buttons, n, n, int(bool(render)))

    def step(
        self,
        buttons: torch.Tensor | int | None,
        frames: int = 24,
        press_frames: int = 8,
        obs_out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One frame-skip env step in one kernel launch; returns the packed2 of the last frame.

        ``buttons`` are held for ``press_frames`` frames then released for the rest. The
        observation is written in place into ``obs_out`` (``uint8 [N, 1, 72, 20]``, any view,
        e.g. a replay row) or into :attr:`packed2`.
        """
        if frames < 1:
            raise ValueError(f"frames must be >= 1, got {frames}")
        if obs_out is None:
            self._run(buttons, frames, press_frames, 1)
            return self.packed2
        self._run(buttons, frames, press_frames, 1, out=self._check_obs_out(obs_out))
        return obs_out

    def step_until(
        self,
        buttons: torch.Tensor | int | None,
        watch: list[int] | tuple[int, ...],
        max_frames: int = 16,
        press_frames: int = 8,
        obs_out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One env step that ends at the game's own tick: each console runs until one of the
        ``watch`` bytes changes (at most ``max_frames`` frames); returns the frames each ran
        (``int32 [N]``). The observation is that frame's packed2, in ``obs_out`` or
        :attr:`packed2`. Why and how: :mod:`~torchrl_dreamer.emulator.decision`.
        """
        if obs_out is not None:
            self._check_obs_out(obs_out)
        return step_until_change(
            lambda held: self._run(buttons if held else None, 1, int(held), 1, out=obs_out),
            self.read_memory, self._st[:, layout.FIELDS["LOCKED"]], watch, max_frames,
            press_frames)

    def _check_obs_out(self, out: torch.Tensor) -> torch.Tensor:
        if out.shape != (self.num_envs, *PACKED2_SHAPE) or out.dtype != torch.uint8:
            raise ValueError(f"obs_out must be uint8 {[self.num_envs, *PACKED2_SHAPE]}, got "
                             f"{out.dtype} {tuple(out.shape)}")
        if out.device != self.device:
            raise ValueError(f"obs_out is on {out.device}, the emulator on {self.device}")
        return out

    def step_instructions(self, n: int = 1, max_frames: int = 60) -> None:
        """Debugging / oracle tests: run exactly ``n`` instructions on every console.

        An interrupt dispatch counts as one instruction; time spent halted does not (a halted
        console runs until it wakes and executes something, or until ``max_frames`` frames have
        passed). Uses a separately compiled stepping variant of the kernel generated from the
        same source (``codegen.generate_source(step=True)``), built on first use. Nothing is
        rendered.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {max_frames}")
        if self._step_kmod is None:
            self._step_kmod = load_kernel_module(_wp_device(self.device), step=True)
        b = self._no_buttons.view(-1, 1)
        self._launch_slices(self._step_kmod.gb_run,
                            lambda s: [s.mem, self._heads, wp.from_torch(b[s.lo:s.hi]),
                                       int(max_frames), 0, 0, int(n)])

    # ------------------------------------------------------------------------------ inspection
    def registers(self) -> dict[str, torch.Tensor]:
        """CPU registers per env: ``a f b c d e h l sp pc ime`` (int32 tensors [N], on device)."""
        f = layout.FIELDS
        return {k.lower(): self._st[:, f[k]].clone()
                for k in ("A", "F", "B", "C", "D", "E", "H", "L", "SP", "PC", "IME")}

    def read_memory(self, addr: int, length: int = 1) -> torch.Tensor:
        """``uint8 [N, length]`` bytes at ``addr..`` through each console's bus view (bank aware)."""
        if not 0 <= addr <= 0xFFFF:
            raise ValueError(f"addr must be in 0..0xFFFF, got {addr:#x}")
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}")
        # a recorded gb_peek launch per length, replayed with the address (see _run); one
        # launch over the batch whatever ``workers`` is: a few bytes a console cost less than
        # handing slices to other threads
        buf, cmd = self._peek_cmds.get(length, (None, None))
        if cmd is None or cmd.kernel is not self._kmod.gb_peek:
            buf = torch.empty(self.num_envs, length, dtype=torch.uint8, device=self.device)
            cmd = wp.launch(self._kmod.gb_peek, dim=self.num_envs, device=_wp_device(self.device),
                            inputs=[self._mem, 0, wp.from_torch(buf)], record_cmd=True)
            self._peek_cmds[length] = (buf, cmd)
        cmd.set_param_at_index(1, int(addr))
        self._replay(cmd)
        return buf.clone()

    def write_memory(self, addr: int, values, mask: torch.Tensor | None = None) -> None:
        """Write bytes at ``addr..`` through the bus (RAM, cart RAM, IO) of the masked envs.

        ``values``: an int, a ``[length]`` or an ``[N, length]`` tensor; ``mask``: bool ``[N]``.
        """
        if not 0 <= addr <= 0xFFFF:
            raise ValueError(f"addr must be in 0..0xFFFF, got {addr:#x}")
        v = torch.as_tensor(values, device=self.device)
        if v.dim() == 0:
            v = v.reshape(1)
        if v.dim() == 1:
            v = v.unsqueeze(0).expand(self.num_envs, -1)
        if v.dim() != 2 or v.shape[0] != self.num_envs:
            raise ValueError(f"values must be an int, [length] or [{self.num_envs}, length]")
        v = (v.to(torch.int64) & 0xFF).to(torch.uint8).contiguous()
        if mask is None:
            mk = self._all
        else:
            if mask.shape != (self.num_envs,):
                raise ValueError(f"mask must be bool [{self.num_envs}], got {tuple(mask.shape)}")
            mk = mask.to(device=self.device, dtype=torch.uint8).contiguous()
        self.launch(self._kmod.gb_poke, [self._mem, int(addr), wp.from_torch(v), wp.from_torch(mk)])

    def serial_output(self, env: int = 0) -> bytes:
        """Bytes the console ``env`` sent over the serial port (internal clock) so far."""
        if not 0 <= env < self.num_envs:
            raise IndexError(f"env {env} out of range for {self.num_envs} envs")
        n = int(self._st[env, layout.FIELDS["SER_N"]])
        return bytes(self._ser[env, :n].cpu().tolist())

    @property
    def frame_count(self) -> torch.Tensor:
        """Frames emulated per env (int64 [N])."""
        return self._st[:, layout.FIELDS["FRAMES"]].to(torch.int64)

    @property
    def locked(self) -> torch.Tensor:
        """Whether each env hit an illegal opcode and locked up (bool [N])."""
        return self._st[:, layout.FIELDS["LOCKED"]] != 0

    @property
    def rgb555(self) -> torch.Tensor:
        """``int16 [N, 144, 160]`` RGB555 colours (``r | g << 5 | b << 10``) of the last frame
        run on a Color (``model="cgb"``; the live buffer: copy it to keep it). A DMG-only
        cartridge there shows its compatibility palettes (:mod:`.render_compat`)."""
        if self.model != "cgb":
            raise AttributeError(
                "rgb555 is the Color's frame; this console is model='dmg' (shades: framebuffer / "
                "packed2; GameBoy(rom, model='cgb') runs a DMG cartridge on the Color in colour)")
        return self._rgb

    @property
    def framebuffer(self) -> torch.Tensor:
        """``uint8 [N, 144, 160]`` shades 0..3 of the last frame run (needs framebuffer=True)."""
        if not self._expose_fb:
            raise AttributeError("create the GameBoy with framebuffer=True to read the framebuffer")
        return self._fb

    # ------------------------------------------------------------------------------ savestates
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The live per-env state tensors (``[N, ...]`` views), by name."""
        return {name: getattr(self, "_" + name) for name in _STATE_ARRAYS}

    def save_state(self):
        """Snapshot every env's whole console state (see :class:`~.state.EmulatorState`)."""
        from torchrl_dreamer.emulator.state import EmulatorState

        return EmulatorState.capture(self)

    def load_state(self, state, mask: torch.Tensor | None = None) -> None:
        """Restore ``state`` into the envs selected by ``mask`` (all if None); a 1-env state broadcasts.

        A state saved with the other ``ppu`` mode loads too: the console keeps this emulator's
        mode, and a line half-drawn by the pixel pipeline is finished by the mode in use."""
        state.restore_into(self, mask)
        f = layout.FIELDS
        fifo = self._fifo_flag()
        other = self._st[:, f["PPU_FIFO"]] != fifo
        self._st[:, f["FIFO_LINE"]] = torch.where(other, 0, self._st[:, f["FIFO_LINE"]])
        self._st[:, f["PPU_FIFO"]] = fifo

    def battery_ram(self, env: int = 0, rtc_timestamp: int = 0) -> bytes:
        """What a battery keeps for ``env``, as a ``.sav`` file: the cartridge RAM, then for an
        MBC3 clock the 48-byte BGB/VBA-M trailer (format: :mod:`~.battery`; ``rtc_timestamp``
        is written in its time stamp field)."""
        data = bytes(self._cram[env, : self.cartridge.ram_size].cpu().tolist())
        if self.cartridge.rtc:
            f = layout.FIELDS
            row = self._st[env].cpu().tolist()
            live = [row[f["RTC_S"] + k] for k in range(5)]
            latched = [row[f["RTC_LS"] + k] for k in range(5)]
            data += pack_rtc(live, latched, rtc_timestamp)
        return data

    def load_battery_ram(self, data: bytes, mask: torch.Tensor | None = None) -> None:
        """Load a ``.sav`` image into the masked envs (all if None): cartridge RAM, and for an
        MBC3 clock the optional 48/44-byte trailer (see :mod:`~.battery`; without it the clock
        is left as it is; with it the clock starts a fresh second)."""
        size = self.cartridge.ram_size
        sizes = [size] + ([size + n for n in RTC_TRAILER_SIZES] if self.cartridge.rtc else [])
        if len(data) not in sizes:
            raise ValueError(f"battery RAM must be {' or '.join(map(str, sizes))} bytes for this "
                             f"cartridge, got {len(data)}")
        rows = slice(None) if mask is None else mask.to(self.device)
        if size:
            src = torch.frombuffer(bytearray(data[:size]), dtype=torch.uint8).to(self.device)
            self._cram[rows, :size] = src
        if len(data) > size:
            live, latched, _stamp = unpack_rtc(data[size:])
            f = layout.FIELDS
            cols = [f["RTC_S"] + k for k in range(5)] + [f["RTC_LS"] + k for k in range(5)]
            vals = torch.tensor(live + latched, dtype=torch.int32, device=self.device)
            self._st[rows, cols[0]:cols[0] + 5] = vals[:5]
            self._st[rows, cols[5]:cols[5] + 5] = vals[5:]
            self._st[rows, f["RTC_SUB"]] = 0
