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


def import_graph() -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` (every import statement, wherever it is)."""
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        graph[mod]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


def test_no_import_cycles_among_the_package_modules():
    graph = import_graph()
    assert "torchrl_dreamer.modules.rssm_imagine" in graph["torchrl_dreamer.modules.rssm"]
    found = cycles(graph)
    detail = [
        " | ".join(f"{a} -> {b}" for a in comp for b in sorted(graph[a] & set(comp)))
        for comp in found
    ]
    assert not found, "import cycles:\n" + "\n".join(detail)


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
