"""Shared pytest fixtures, for every test folder below this one.

The test folders mirror the package (``emulator/``, ``envs/``, ``data/``, ``modules/``,
``objectives/``, ``collectors/``, ``distributed/``, ``trainers/``) and hold no ``__init__.py``:
pytest imports each test file by its base name, so base names are unique across folders. Test
modules import this file (``from conftest import rom_path``), their helpers and each other by
module name (``from test_emulator_romkit import make_rom``, ``from test_train_units import
read_gif``); every test folder is put on ``sys.path`` below, since pytest's prepend import mode
adds a folder only when it collects a file there (a run of one file would miss its neighbours).

Test ROMs are found through ``TORCHRL_DREAMER_ROMS`` (default ``../shared/roms``). Outside CI a
missing ROM directory makes the ROM-based tests skip with a clear reason; in CI (``CI=true``) it is
an error, so a broken checkout can never pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

from torchrl_dreamer._roms import roms_dir

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

for _folder in sorted(Path(__file__).resolve().parent.iterdir()):
    if _folder.is_dir() and any(_folder.glob("test_*.py")) and str(_folder) not in sys.path:
        sys.path.append(str(_folder))

# Two cores: keep torch from oversubscribing when pytest runs alongside other work.
torch.set_num_threads(1)


def pytest_sessionstart(session: pytest.Session) -> None:
    if IN_CI and not roms_dir().is_dir():
        raise pytest.UsageError(
            f"CI=true but the test ROM directory {roms_dir()} is missing; set TORCHRL_DREAMER_ROMS "
            "or place the shared ROMs next to the checkout (../shared/roms)."
        )


@pytest.fixture(scope="session")
def roms() -> Path:
    """The shared test ROM directory; skips (or fails in CI) when it is absent."""
    d = roms_dir()
    if not d.is_dir():
        if IN_CI:
            pytest.fail(f"test ROM directory {d} missing in CI")
        pytest.skip(f"test ROM directory {d} not found (set TORCHRL_DREAMER_ROMS)")
    return d


def missing_roms(msg: str) -> None:
    """A suite's ROMs are absent: fail in CI, skip otherwise (the placeholder case of a ROM suite)."""
    if IN_CI:
        pytest.fail(msg)
    pytest.skip(msg)


def rom_path(roms: Path, rel: str) -> Path:
    """Path of one ROM under the shared directory, failing in CI / skipping otherwise if absent."""
    p = roms / rel
    if not p.is_file():
        if IN_CI:
            pytest.fail(f"test ROM {p} missing in CI")
        pytest.skip(f"test ROM {p} not found")
    return p


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")


def load_benchmark(name: str):
    """Import ``benchmarks/<name>.py`` as a module, undoing what such a script does at import
    (it drops its folder from ``sys.path`` and may set torch's thread count)."""
    saved, threads = list(sys.path), torch.get_num_threads()
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
        torch.set_num_threads(threads)
    return module
