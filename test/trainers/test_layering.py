"""The package's layering: no import circles among torchrl_dreamer's modules (module-level and
function-level imports both: an import moved into a function to dodge a circle is still one),
and no module reading another object's ``_private`` attribute.

Layers import downward only: emulator <- envs <- data <- modules <- objectives <- collectors
<- trainers; ``distributed`` sits beside the trainers on the collectors: neither imports the
other (the trainers compose a Ray run through the collectors' remote-collection registry, and
its factories reach ``distributed`` as arguments).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import torchrl_dreamer

PACKAGE = Path(torchrl_dreamer.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(mod: str, path: Path, node: ast.Import | ast.ImportFrom, mods) -> set[str]:
    """The package's modules ``node`` imports (``from pkg import name`` imports ``pkg`` and,
    where ``name`` is a module, ``pkg.name``); an import of a package's submodule counts as an
    import of that submodule, not of the parents Python also initialises."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            full = ".".join(base + ([node.module] if node.module else []))
        else:
            full = node.module or ""
        names = [full] + [f"{full}.{a.name}" for a in node.names]
    out = set()
    for name in names:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        if name and name != mod:
            out.add(name)
    return out


def _import_time_nodes(body: list[ast.stmt]):
    """The statements of ``body`` that run when the module is imported: into ``if`` / ``try`` /
    ``with`` blocks and class bodies, not into functions nor ``if TYPE_CHECKING:`` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _import_time_nodes(node.orelse)
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _import_time_nodes(getattr(node, field, []) or [])


def import_graph(module_level: bool = False) -> dict[str, set[str]]:
    """``module -> modules of the package it imports``: every import statement, wherever it is
    (the default), or with ``module_level`` only those run at import time (not in functions
    nor ``if TYPE_CHECKING:`` blocks)."""
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        graph[mod]
        tree = ast.parse(path.read_text(), str(path))
        nodes = _import_time_nodes(tree.body) if module_level else ast.walk(tree)
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[mod] |= _targets(mod, path, node, mods)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_module_level_imports_leave_out_functions_and_type_checking():
    code = """
import a
if TYPE_CHECKING:
    import b
else:
    import c
try:
    import d
except ImportError:
    import e
class K:
    import f
def g():
    import h
"""
    seen = [n.names[0].name for n in _import_time_nodes(ast.parse(code).body)
            if isinstance(n, ast.Import)]
    assert seen == ["a", "c", "d", "e", "f"]
    full, level = import_graph(), import_graph(module_level=True)
    assert all(level[m] <= full[m] for m in full)
    assert "torchrl_dreamer.modules.latent" in level["torchrl_dreamer.modules.rssm"]


def test_no_import_cycles_among_the_package_modules():
    graph = import_graph()
    assert "torchrl_dreamer.modules.rssm_imagine" in graph["torchrl_dreamer.modules.rssm"]
    found = cycles(graph)
    detail = [
        " | ".join(f"{a} -> {b}" for a in comp for b in sorted(graph[a] & set(comp)))
        for comp in found
    ]
    assert not found, "import cycles:\n" + "\n".join(detail)


LAYERS = ("emulator", "envs", "data", "modules", "objectives", "collectors", "trainers")
"""The layers, lowest first; ``distributed`` ranks with the trainers (the two checks below keep
them apart). The package's other parts (asm, play, roms, ramsearch, train) are not ranked."""


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for each import of a higher layer's module by a lower layer's."""
    rank = {name: i for i, name in enumerate(LAYERS)} | {"distributed": LAYERS.index("trainers")}

    def layer(mod: str) -> int | None:
        parts = mod.split(".")
        return rank.get(parts[1]) if len(parts) > 1 else None

    return [f"{m} -> {d}" for m, deps in sorted(graph.items()) for d in sorted(deps)
            if layer(m) is not None and layer(d) is not None and layer(d) > layer(m)]


def test_layers_import_downward_only():
    assert upward_imports({"torchrl_dreamer.data.x": {"torchrl_dreamer.modules.y"}}) == [
        "torchrl_dreamer.data.x -> torchrl_dreamer.modules.y"]
    up = upward_imports(import_graph())
    assert not up, "imports of a higher layer (move what both need down):\n" + "\n".join(up)


def test_the_trainers_never_import_distributed():
    graph = import_graph()
    up = {m: sorted(d for d in deps if d.startswith("torchrl_dreamer.distributed"))
          for m, deps in graph.items() if m.startswith("torchrl_dreamer.trainers")}
    assert not any(up.values()), up
    # nor at run time (nothing imports it for them)
    code = ("import sys, torchrl_dreamer.trainers; "
            "print(any(m.startswith('torchrl_dreamer.distributed') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == "False"


def test_distributed_never_imports_the_trainers():
    graph = import_graph()
    up = {m: sorted(d for d in deps if d.startswith("torchrl_dreamer.trainers"))
          for m, deps in graph.items() if m.startswith("torchrl_dreamer.distributed")}
    assert not any(up.values()), up
    code = ("import sys, torchrl_dreamer.distributed; "
            "print(any(m.startswith('torchrl_dreamer.trainers') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == "False"


# objects of other libraries whose private names we use on purpose
FOREIGN_PRIVATE = {"func._schema", "sys._getframe"}


def private_reads() -> list[str]:
    """``path:line: expr`` for each ``x._name`` where ``x`` is not ``self``, ``cls``,
    ``super()``, an imported module or a module-level alias of a module's attribute."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {a.asname or a.name.split(".")[0] for a in node.names}
        for node in tree.body:  # module-level aliases of a module's parts: _aten = torch.ops.aten
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
                root = node.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in modules:
                    modules |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                continue
            v = node.value
            if isinstance(v, ast.Name) and v.id in {"self", "cls"} | modules:
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                continue
            root = v
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules and root is not v:
                continue  # e.g. torch.ops.aten._softmax_backward_data
            expr = ast.unparse(node)
            if expr not in FOREIGN_PRIVATE:
                out.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {expr}")
    return out


def test_no_module_reads_another_objects_private_fields():
    found = private_reads()
    assert not found, "private reads (give the owner a public name):\n" + "\n".join(found)


#: ``path: module.name`` of private names imported from another module of the package, each
#: waiting for its owner to give it a public name (the list only shrinks)
KNOWN_PRIVATE_IMPORTS: set[str] = set()


def private_imports() -> list[str]:
    """``path: module.name`` for each ``from <package module> import _name`` in another module
    of the package (a reach-in by import rather than by attribute)."""
    mods = _modules()
    out = []
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not _targets(mod, path, node, mods):
                continue
            source = sorted(_targets(mod, path, node, mods), key=len)[-1]
            for alias in node.names:
                if f"{source}.{alias.name}" in mods:
                    continue  # a module of the package (``from pkg import _threads``)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{path.relative_to(PACKAGE.parent).as_posix()}: "
                               f"{source}.{alias.name}")
    return sorted(out)


def test_no_module_imports_another_modules_private_names():
    found = set(private_imports())
    new = sorted(found - KNOWN_PRIVATE_IMPORTS)
    assert not new, "private names imported across modules (give the owner a public name):\n" \
        + "\n".join(new)
    assert found == KNOWN_PRIVATE_IMPORTS, f"fixed, drop from KNOWN_PRIVATE_IMPORTS: " \
        f"{sorted(KNOWN_PRIVATE_IMPORTS - found)}"


if __name__ == "__main__":
    full, level = import_graph(), import_graph(module_level=True)
    print(f"import circles (module-level imports): {len(cycles(level))}")
    for comp in cycles(level):
        print("   ", " <-> ".join(comp))
    print(f"import circles (every import, functions too): {len(cycles(full))}")
    for comp in cycles(full):
        print("   ", " <-> ".join(comp))
    print(f"imports of a higher layer: {len(upward_imports(full))}")
    for line in upward_imports(full):
        print("   ", line)
    print(f"private reads of another object's fields: {len(private_reads())}")
    for line in private_reads():
        print("   ", line)
    print(f"private names imported across modules: {len(private_imports())}")
    for line in private_imports():
        print("   ", line)
