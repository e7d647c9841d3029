"""Repository-wide pytest setup: the package's docstring examples run as doctests
(``python -m pytest -q test --doctest-modules torchrl_dreamer``, the README's test command)."""

from __future__ import annotations


def pytest_configure(config) -> None:
    # Warp prints its start-up banner and kernel-cache notes to stdout, which a doctest would
    # read as the example's output.
    try:
        import warp
    except ImportError:
        return
    warp.config.log_level = warp.LOG_WARNING
