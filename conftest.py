"""Repository-wide pytest setup: the package's docstring examples run as doctests
(``python -m pytest -q test --doctest-modules torchrl_dreamer``, the README's test command)."""

from __future__ import annotations

import re

_USES_RAY = re.compile(r"(?<![A-Za-z])ray(?![A-Za-z])")  # ray.get, init_ray(...); not "array"


def pytest_configure(config) -> None:
    # Warp prints its start-up banner and kernel-cache notes to stdout, which a doctest would
    # read as the example's output.
    try:
        import warp
    except ImportError:
        return
    warp.config.log_level = warp.LOG_WARNING


def pytest_collection_modifyitems(config, items) -> None:
    # Examples that use Ray need the optional 'ray' extra; without it they skip, like the
    # Ray test files (pytest.importorskip), instead of failing on the ImportError that tells a
    # user to install it.
    import importlib.util

    import pytest

    if importlib.util.find_spec("ray") is not None:
        return
    skip = pytest.mark.skip(reason="needs the 'ray' extra: pip install 'torchrl_dreamer[ray]'")
    for item in items:
        dtest = getattr(item, "dtest", None)  # a doctest item's examples
        if dtest is not None and any(_USES_RAY.search(ex.source) for ex in dtest.examples):
            item.add_marker(skip)
