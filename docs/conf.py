"""Sphinx configuration for torchrl_dreamer's documentation (``sphinx-build -W docs docs/_build``)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

from torchrl_dreamer.version import __version__  # noqa: E402

project = "torchrl_dreamer"
author = "torchrl_dreamer developers"
release = __version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
autosummary_generate = True
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_mock_imports: list[str] = []
napoleon_google_docstring = True
exclude_patterns = ["_build"]
html_theme = "alabaster"
suppress_warnings = ["myst.header"]
nitpicky = False
