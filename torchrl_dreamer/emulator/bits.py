"""Bit scans the Warp language lacks: the index of a mask's lowest set bit.

The mode-3 length (:func:`~torchrl_dreamer.emulator.ppu.obj_penalty`) collects the OAM entries
on a line as a 40-bit mask in one branch-free pass and then visits only the set bits, in index
order (the order the OAM scan selects them in). Visiting a set bit needs its index: one
instruction on both devices (``tzcnt`` on x86, ``__ffsll`` on CUDA), which Warp's builtins do not
offer.

Why our own: Warp has no count-trailing-zeros builtin; ``wp.func_native`` snippets are its
documented escape hatch (as in :mod:`.raw`) and compile for both the CPU and CUDA devices.

Example:
    >>> import warp as wp
    >>> @wp.kernel
    ... def scan(masks: wp.array(dtype=wp.int64), out: wp.array(dtype=int)):
    ...     i = wp.tid()
    ...     out[i] = lowest_bit(masks[i])
    >>> masks = wp.array([1, 8, 1 << 39, 0b1010000], dtype=wp.int64, device="cpu")
    >>> out = wp.zeros(4, dtype=int, device="cpu")
    >>> wp.launch(scan, 4, inputs=[masks, out], device="cpu")
    >>> out.numpy().tolist()
    [0, 3, 39, 4]
"""

from __future__ import annotations

import warp as wp

__all__ = ["lowest_bit"]


@wp.func_native("""
#if defined(__CUDA_ARCH__)
return (wp::int32)(__ffsll((long long)x) - 1);
#else
return (wp::int32)__builtin_ctzll((unsigned long long)x);
#endif
""")
def lowest_bit(x: wp.int64) -> int:
    """Index of the lowest set bit of ``x`` (``x != 0``; undefined for 0, as the instruction)."""
    ...
