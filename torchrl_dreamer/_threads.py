"""Torch's thread count for a block of code (shared by :mod:`torchrl_dreamer.ramsearch` and
:mod:`torchrl_dreamer.envs.spec_check`, below both).

Example:
    >>> import torch
    >>> n = torch.get_num_threads()
    >>> with one_thread():
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == n
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["one_thread"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (and restore the count after it): the work
    between emulator launches and most of the ranking are many small tensor operations, which
    a thread pool only slows down, badly so on a busy machine (recording about 30x slower on a
    loaded 2-core one)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)
