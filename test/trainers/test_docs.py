"""The documentation: every public name is documented, and the Sphinx site builds with -W.

The public-name helpers live in ``docs/conf.py`` (they import nothing from Sphinx), so the API
reference and these checks agree on what "public" means: each public sub-package's ``__all__``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _load_conf():
    spec = importlib.util.spec_from_file_location("torchrl_dreamer_docs_conf", DOCS / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conf = _load_conf()
MODULES = conf.public_modules()

# The sub-packages the issue names; discovery must find at least these.
EXPECTED = {
    "torchrl_dreamer.emulator",
    "torchrl_dreamer.envs",
    "torchrl_dreamer.data",
    "torchrl_dreamer.modules",
    "torchrl_dreamer.objectives",
    "torchrl_dreamer.collectors",
    "torchrl_dreamer.distributed",
    "torchrl_dreamer.asm",
    "torchrl_dreamer.roms",
    "torchrl_dreamer.train",
    "torchrl_dreamer.trainers",
}


def test_public_modules_are_discovered():
    missing = EXPECTED - set(MODULES)
    assert not missing, f"public module discovery missed {sorted(missing)}"
    assert all(not part.startswith("_") for m in MODULES for part in m.split("."))


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_has_a_docstring(module_name):
    module = importlib.import_module(module_name)
    assert (module.__doc__ or "").strip(), f"{module_name} has no module docstring"
    names = conf.public_names(module_name)
    assert names, f"{module_name} defines no __all__ (the API reference is built from it)"
    offenders = [name for name in names if not conf.name_doc(module_name, name)]
    assert not offenders, (
        f"{module_name}: public names without a docstring: {offenders} (constants: add a string "
        "literal right after the assignment, or '#:' comment lines right above it)"
    )


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_module_has_an_api_page(module_name):
    page = DOCS / "api" / f"{module_name}.rst"
    assert page.is_file(), f"missing API page {page.relative_to(ROOT)}"
    assert f".. public-api:: {module_name}" in page.read_text(encoding="utf-8")


def test_name_doc_reads_attribute_docs_through_reexports(tmp_path, monkeypatch):
    pkg = tmp_path / "docpkg_probe"
    (pkg / "inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            '''
            """Probe package."""
            from docpkg_probe.consts import COMMENTED, PLAIN, STRING_DOC
            from .inner import DEEP as RENAMED, Thing, undocumented

            __all__ = ["COMMENTED", "PLAIN", "STRING_DOC", "RENAMED", "Thing", "LOCAL",
                       "undocumented"]

            LOCAL = {"a": 1}
            """Documented right here."""
            '''
        )
    )
    (pkg / "consts.py").write_text(
        textwrap.dedent(
            '''
            #: First line of a comment doc,
            #: and its second line.
            COMMENTED = 3
            # a plain comment is not documentation
            PLAIN: dict[str, int] = {"x": 1}
            STRING_DOC = (1, 2)
            """Docstring after the assignment."""
            '''
        )
    )
    (pkg / "inner" / "__init__.py").write_text(
        textwrap.dedent(
            '''
            """Inner."""
            from docpkg_probe.inner.deep import DEEP


            class Thing:
                """A class docstring."""


            def undocumented():
                return None
            '''
        )
    )
    (pkg / "inner" / "deep.py").write_text("DEEP = 7  #: Trailing comment doc.\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        docs = {
            name: conf.name_doc("docpkg_probe", name) for name in conf.public_names("docpkg_probe")
        }
    finally:
        for name in [m for m in sys.modules if m.startswith("docpkg_probe")]:
            del sys.modules[name]
    assert docs == {
        "COMMENTED": "First line of a comment doc,\nand its second line.",
        "PLAIN": "",
        "STRING_DOC": "Docstring after the assignment.",
        "RENAMED": "Trailing comment doc.",
        "Thing": "A class docstring.",
        "LOCAL": "Documented right here.",
        "undocumented": "",
    }


def test_public_names_rejects_a_dangling_all_entry(tmp_path, monkeypatch):
    pkg = tmp_path / "docpkg_dangling"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""Dangling."""\n__all__ = ["missing_name"]\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(AttributeError, match="missing_name"):
            conf.public_names("docpkg_dangling")
    finally:
        sys.modules.pop("docpkg_dangling", None)


def test_index_globs_that_match_no_new_page_are_dropped(tmp_path):
    for name in ("intro.md", "extra.md", "api/index.rst", "api/mod.rst"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# page\n")
    index = textwrap.dedent(
        """
        Title
        =====

        .. toctree::
           :glob:

           intro
           missing_page*
           ext*
           *

        .. toctree::

           api/index

        .. note::

           * not a toctree entry
        """
    )
    source = [index]
    conf._drop_empty_globs(SimpleNamespace(srcdir=str(tmp_path)), "index", source)
    lines = source[0].splitlines()
    # ``ext*`` claims extra.md, so the catch-all ``*`` has nothing left; the note is untouched.
    assert "   ext*" in lines and "   intro" in lines
    assert "   missing_page*" not in lines and "   *" not in lines
    assert "   * not a toctree entry" in lines
    (tmp_path / "new_page.md").write_text("# new\n")
    source = [index]
    conf._drop_empty_globs(SimpleNamespace(srcdir=str(tmp_path)), "index", source)
    assert "   *" in source[0].splitlines(), "a new page must be picked up by the catch-all glob"


def _sphinx_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("sphinx", "myst_parser"))


@pytest.mark.slow
def test_docs_build_with_warnings_as_errors(tmp_path):
    if not _sphinx_available():
        if IN_CI:
            pytest.fail("CI must build the docs: install the docs extra (pip install -e '.[docs]')")
        pytest.skip("sphinx / myst-parser not installed (pip install -e '.[docs]')")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html"]
    result = subprocess.run(
        [*cmd, str(DOCS), str(tmp_path / "html")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"docs build failed:\n{result.stderr[-6000:]}"
    html = tmp_path / "html"
    assert (html / "index.html").is_file()
    for module_name in MODULES:
        page = html / "api" / f"{module_name}.html"
        assert page.is_file(), f"no API page rendered for {module_name}"
        text = page.read_text(encoding="utf-8")
        missing = [
            n for n in conf.public_names(module_name) if f'id="{module_name}.{n}"' not in text
        ]
        assert not missing, f"{module_name}: names missing from the rendered reference: {missing}"
    index = (html / "index.html").read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("concepts/*.md")):
        href = page.relative_to(DOCS).with_suffix(".html").as_posix()
        assert f'href="{href}' in index, f"index does not link the concept page {href}"
