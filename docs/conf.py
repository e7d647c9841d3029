"""Sphinx configuration for torchrl_dreamer's documentation.

Build (warnings are errors, as in CI)::

    pip install -e ".[docs]"
    sphinx-build -W -b html docs docs/_build/html

The API reference (``docs/api/*.rst``) is generated from each sub-package's ``__all__`` by the
``public-api`` directive defined at the bottom of this file, so a name added to ``__all__`` shows
up in the reference without editing any page. The helpers above the directive
(:func:`public_modules`, :func:`public_names`, :func:`name_doc`) import nothing from Sphinx:
``test/trainers/test_docs.py`` uses them to check that every public name has a docstring.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torchrl_dreamer  # noqa: E402
from torchrl_dreamer.version import __version__  # noqa: E402

# -- project -------------------------------------------------------------------------------------

project = "torchrl_dreamer"
author = "torchrl_dreamer developers"
copyright = "2026, torchrl_dreamer developers"
release = __version__
version = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
html_theme = "alabaster"

# -- autodoc / autosummary / napoleon ---------------------------------------------------------------

# Pages are written by the ``public-api`` directive; autosummary only renders summary tables.
autosummary_generate = False
autodoc_default_options = {"show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_inherit_docstrings = False  # torch/torchrl docstrings are not ours to render (or lint)
# Optional dependencies: the docs build must not need them (``ray`` is the ``[ray]`` extra).
autodoc_mock_imports = [
    name for name in ("ray", "tensorboard", "imageio") if importlib.util.find_spec(name) is None
]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# -- MyST (concept pages are Markdown) -------------------------------------------------------------

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Nothing is suppressed: every warning is ours to fix (the build runs with -W).
suppress_warnings: list[str] = []
nitpicky = False


# -- public API discovery (no Sphinx import: used by test/trainers/test_docs.py too) -----------------------

PACKAGE = "torchrl_dreamer"


def public_modules() -> list[str]:
    """Every public sub-package of torchrl_dreamer, plus public top-level modules with ``__all__``.

    A module is public when no component of its dotted name starts with ``_``. These are the
    modules the API reference must cover, one page each (``docs/api/<dotted name>.rst``).
    """
    found: list[str] = []

    def walk(path: list[str], prefix: str) -> None:
        for info in pkgutil.iter_modules(path, prefix):
            leaf = info.name.rsplit(".", 1)[-1]
            if leaf.startswith("_"):
                continue
            if info.ispkg:
                found.append(info.name)
                walk([os.path.join(p, leaf) for p in path], info.name + ".")
            elif prefix == PACKAGE + "." and _defines_all(info.name):
                found.append(info.name)

    walk(list(torchrl_dreamer.__path__), PACKAGE + ".")
    return sorted(found)


def _defines_all(module_name: str) -> bool:
    """Whether the module's source assigns ``__all__`` at top level (checked without importing)."""
    tree = _module_ast(module_name)
    return tree is not None and any(
        isinstance(node, ast.Assign | ast.AnnAssign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in _targets(node))
        for node in tree.body
    )


def public_names(module_name: str) -> list[str]:
    """The module's ``__all__`` (imports it); raises if a listed name does not resolve."""
    module = importlib.import_module(module_name)
    names = list(getattr(module, "__all__", []))
    for name in names:
        getattr(module, name)  # lazy packages resolve here; a typo in __all__ fails loudly
    return names


def is_data(obj: Any) -> bool:
    """Whether autodoc documents ``obj`` as data (a constant), not as a class/function/module."""
    return not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj))


def name_doc(module_name: str, name: str) -> str:
    """The documentation of public name ``module_name.name`` ('' when it has none).

    Classes and functions: their own docstring. Constants: the attribute docstring (a string
    literal right after the assignment, or ``#:`` comment lines right above it) in the module
    that assigns it, following ``from .x import NAME`` re-exports and lazy ``__getattr__``
    packages. A constant's type docstring (``int.__doc__``) does not count.
    """
    obj = getattr(importlib.import_module(module_name), name)
    if not is_data(obj):
        return (inspect.getdoc(obj) or "").strip()
    found = attribute_doc(module_name, name)
    return found[1] if found else ""


def attribute_doc(module_name: str, name: str, _depth: int = 0) -> tuple[str, str] | None:
    """``(defining module, attribute doc)`` of a module-level constant, or ``None`` if not found."""
    if _depth > 8:
        return None
    tree = _module_ast(module_name)
    if tree is None:
        return None
    lines = _module_source(module_name).splitlines()
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.Assign | ast.AnnAssign) and any(
            isinstance(t, ast.Name) and t.id == name for t in _targets(node)
        ):
            return module_name, _assignment_doc(tree.body, index, lines)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _resolve_from(module_name, node)
                    if source is not None:
                        return attribute_doc(source, alias.name, _depth + 1)
    # Lazily exported (module-level ``__getattr__``): find the sub-module that assigns it.
    module = importlib.import_module(module_name)
    if hasattr(module, "__path__"):
        target = getattr(module, name, None)
        for info in pkgutil.iter_modules(module.__path__, module_name + "."):
            if _assigns(info.name, name):
                sub = importlib.import_module(info.name)
                if getattr(sub, name, None) is target:
                    return attribute_doc(info.name, name, _depth + 1)
    return None


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _assigns(module_name: str, name: str) -> bool:
    tree = _module_ast(module_name)
    return tree is not None and any(
        isinstance(node, ast.Assign | ast.AnnAssign)
        and any(isinstance(t, ast.Name) and t.id == name for t in _targets(node))
        for node in tree.body
    )


def _assignment_doc(body: list[ast.stmt], index: int, lines: list[str]) -> str:
    node = body[index]
    following = body[index + 1] if index + 1 < len(body) else None
    if (
        isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
        and isinstance(following.value.value, str)
    ):
        return inspect.cleandoc(following.value.value)
    comments: list[str] = []
    row = node.lineno - 2  # 0-based index of the line above the assignment
    while row >= 0 and lines[row].lstrip().startswith("#:"):
        comments.insert(0, lines[row].lstrip()[2:].strip())
        row -= 1
    if not comments and "#:" in lines[node.lineno - 1]:
        comments.append(lines[node.lineno - 1].split("#:", 1)[1].strip())
    return "\n".join(comments).strip()


def _resolve_from(module_name: str, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    spec = importlib.util.find_spec(module_name)
    is_pkg = spec is not None and spec.submodule_search_locations is not None
    parts = module_name.split(".")
    base = parts if is_pkg else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _module_source(module_name: str) -> str:
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return ""
    with open(spec.origin, encoding="utf-8") as handle:
        return handle.read()


def _module_ast(module_name: str) -> ast.Module | None:
    try:
        source = _module_source(module_name)
    except (ImportError, ValueError):
        return None
    return ast.parse(source) if source else None


# -- the ``public-api`` directive -------------------------------------------------------------------


def _public_api_lines(module_name: str) -> list[str]:
    """reST for one API page: module docstring, summary table, then every ``__all__`` entry."""
    names = public_names(module_name)
    module = importlib.import_module(module_name)
    lines = [f".. automodule:: {module_name}", "", ".. rubric:: Summary", ""]
    if names:
        lines += [".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in names]
        lines.append("")
    lines += [".. rubric:: Reference", ""]
    for name in names:
        obj = getattr(module, name)
        full = f"{module_name}.{name}"
        if inspect.isclass(obj):
            directive = "autoexception" if issubclass(obj, BaseException) else "autoclass"
            lines += [f".. {directive}:: {full}", "   :members:", "   :show-inheritance:", ""]
        elif inspect.isroutine(obj):
            lines += [f".. autofunction:: {full}", ""]
        elif inspect.ismodule(obj):
            lines += [f".. py:data:: {full}", "", f"   The module :mod:`{obj.__name__}`.", ""]
        else:
            lines += [f".. autodata:: {full}"]
            if len(repr(obj)) > 80:
                lines.append("   :no-value:")
            lines.append("")
    return lines


def _constant_doc(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """``autodoc-process-docstring`` hook for constants.

    autodoc reads a constant's attribute doc only in the module being documented, and falls back to
    the docstring of the value's type (``dict.__doc__``). For a name re-exported by a package, use
    the attribute doc where it is assigned; never show the type's docstring.
    """
    if what not in ("data", "attribute") or not is_data(obj):
        return
    type_doc = inspect.getdoc(type(obj)) or ""
    if lines and "\n".join(lines).strip() != type_doc.strip():
        return  # the documented module had its own attribute doc
    lines[:] = []
    module_name, _, attr = name.rpartition(".")
    if what == "data" and module_name in sys.modules:
        found = attribute_doc(module_name, attr)
        if found and found[1]:
            lines.extend(found[1].splitlines() + [""])


def _class_signature(
    app: Any, what: str, name: str, obj: Any, options: Any, signature: str | None, ret: str | None
) -> tuple[str, str | None] | None:
    """``autodoc-process-signature`` hook: show ``__init__``'s parameters, not a metaclass's.

    TorchRL's ``EnvBase``/``LossModule``/``Sampler`` metaclasses define ``__call__(*args,
    **kwargs)``, which autodoc prefers over the class's own ``__init__``.
    """
    if what not in ("class", "exception") or signature != "(*args, **kwargs)":
        return None
    from sphinx.util.inspect import signature as sphinx_signature
    from sphinx.util.inspect import stringify_signature

    init = getattr(obj, "__init__", None)
    if init is None or init is object.__init__:
        return None
    try:
        sig = sphinx_signature(init, bound_method=True)
    except (TypeError, ValueError):
        return None
    return stringify_signature(sig, show_return_annotation=False), ret


def _drop_empty_globs(app: Any, docname: str, source: list[str]) -> None:
    """``source-read`` hook: drop a toctree glob entry that matches no page not listed already.

    The index pages end their toctrees with a catch-all glob (``*``) so that a page added later is
    never left out of the site; while every page is listed explicitly that glob matches nothing,
    which Sphinx reports as a warning that ``suppress_warnings`` cannot silence (it has no type).
    """
    text = source[0]
    if ".. toctree::" not in text:
        return
    folder = os.path.dirname(docname)
    taken = {docname}  # pages an earlier entry of this document already claims, in order
    kept = []
    in_toctree = False
    for line in text.splitlines(keepends=True):
        entry = line.strip()
        if entry and not line.startswith(" "):
            in_toctree = entry.startswith(".. toctree::")
        elif in_toctree and entry and not entry.startswith(":"):
            if "*" not in entry:
                taken.add(os.path.normpath(os.path.join(folder, entry)))
            else:
                matches = {
                    os.path.splitext(os.path.relpath(path, app.srcdir))[0]
                    for suffix in (".md", ".rst")
                    for path in _glob(os.path.join(app.srcdir, folder, entry + suffix))
                }
                if not matches - taken:
                    continue
                taken |= matches
        kept.append(line)
    source[0] = "".join(kept)


def _glob(pattern: str) -> list[str]:
    import glob

    return [p for p in glob.glob(pattern) if "_build" not in p.split(os.sep)]


def setup(app: Any) -> dict[str, Any]:
    """Register the ``public-api`` directive (Sphinx imports only happen here)."""
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.ext.autodoc.mock import mock
    from sphinx.util.docutils import SphinxDirective

    class PublicAPI(SphinxDirective):
        """``.. public-api:: torchrl_dreamer.data``: document every name of the module's __all__."""

        required_arguments = 1

        def run(self) -> list[nodes.Node]:
            module_name = self.arguments[0]
            container = nodes.container()
            source = self.get_source_info()[0]
            with mock(self.config.autodoc_mock_imports):  # as autodoc imports modules
                lines = _public_api_lines(module_name)
            content = StringList(lines, source=f"{source}:<public-api {module_name}>")
            self.state.nested_parse(content, self.content_offset, container)
            return container.children

    app.add_directive("public-api", PublicAPI)
    app.connect("autodoc-process-docstring", _constant_doc)
    app.connect("source-read", _drop_empty_globs)
    app.connect("autodoc-process-signature", _class_signature)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
