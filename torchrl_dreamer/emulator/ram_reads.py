"""Reading scattered RAM bytes of every console in few launches.

Each :meth:`~torchrl_dreamer.emulator.gameboy.GameBoy.read_memory` call is one emulator launch,
so a set of addresses (a task's RAM observation, the bytes a decision step watches) is read as
blocks of nearby addresses, one launch each, and the bytes are picked out in the order asked.

Example:
    >>> import torch
    >>> reader = RamReader([0xC009, 0xC007, 0xD000])
    >>> reader.blocks
    ((49159, 3), (53248, 1))
    >>> ram = {0xC007: 7, 0xC008: 8, 0xC009: 9, 0xD000: 1}
    >>> fake = lambda addr, n: torch.tensor([[ram[a] for a in range(addr, addr + n)]])
    >>> reader.read(fake).tolist()
    [[9, 7, 1]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

__all__ = ["READ_GAP", "RamReader"]

READ_GAP = 32
"""Addresses at most this far apart are read in one block (a few bytes more to read cost less
than another emulator launch)."""


class RamReader:
    """Reads ``addresses`` (0x0000-0xFFFF, any order, validated by the caller) of every console
    as ``uint8 [N, len(addresses)]``, in the order given, with one ``read_memory`` per block.

    Attributes:
        blocks: the ``(start, length)`` reads, by address.
    """

    def __init__(self, addresses: Sequence[int]) -> None:
        self.addresses = tuple(int(a) for a in addresses)
        blocks: list[list[int]] = []
        for a in sorted(set(self.addresses)):
            if blocks and a - blocks[-1][1] <= READ_GAP:
                blocks[-1][1] = a
            else:
                blocks.append([a, a])
        self.blocks = tuple((lo, hi - lo + 1) for lo, hi in blocks)
        offsets, at = {}, 0
        for lo, length in self.blocks:
            for a in range(lo, lo + length):
                offsets[a] = at + a - lo
            at += length
        index = tuple(offsets[a] for a in self.addresses)
        # None: the blocks already hold exactly the addresses, in order
        self._index = None if index == tuple(range(at)) else index
        self._index_on: dict[torch.device, torch.Tensor] = {}

    def read(self, read_memory: Callable[[int, int], torch.Tensor]) -> torch.Tensor:
        """``uint8 [N, D]``: the bytes of every console, through ``read_memory(addr, length)``
        (``GameBoy.read_memory``, which returns a fresh tensor)."""
        parts = [read_memory(lo, length) for lo, length in self.blocks]
        raw = parts[0] if len(parts) == 1 else torch.cat(parts, 1)
        if self._index is None:
            return raw
        index = self._index_on.get(raw.device)
        if index is None:
            index = self._index_on[raw.device] = torch.tensor(self._index, device=raw.device)
        return raw.index_select(1, index)
