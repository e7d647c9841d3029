"""Each concept the package shares is written in one place, and every other module calls it.

The scan reads the package's code (not docstrings or comments: the AST) for the forms each
concept takes when written out again, and names the one module allowed to hold it:

- ``packed2 shape``: the frame's geometry as literals (a shape ending ``(72, 20)`` or
  ``(72, 80)``, ``72 * 20``, ``1440``) instead of ``emulator.packed2``'s constants;
- ``palette``: an RGB grey triple of the shade ramp (``(0xAA, 0xAA, 0xAA)``) or ``0xAAAAAA``;
- ``packed2 table``: a 256-entry byte table (``arange(256)``) or a gather through one;
- ``rssm inputs``: the replay's action shift (``torch.roll``) that makes ``prev_action``;
- ``latent layout``: ``cat([z, h])``, the RSSM state's order;
- ``one-hot``: a scatter of ones, ``F.one_hot`` or ``eye(n)[index]``.

Run as a script, it prints each concept's places (the counts of the "one house" issue)::

    .venv/bin/python test/trainers/test_one_definition.py
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import torchrl_dreamer

PACKAGE = Path(torchrl_dreamer.__file__).parent

#: concept -> the one module (relative to the package's parent) that may write it out
HOMES = {
    "packed2 shape": "torchrl_dreamer/emulator/packed2.py",
    "palette": "torchrl_dreamer/emulator/packed2.py",
    "packed2 table": "torchrl_dreamer/emulator/packed2.py",
    "rssm inputs": "torchrl_dreamer/data/dreamer_inputs.py",
    "latent layout": "torchrl_dreamer/modules/latent.py",
    "one-hot": "torchrl_dreamer/data/one_hot.py",
}

_GREYS = {0x55, 0xAA}


def _value(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) else None


def _name(node: ast.AST) -> str:
    return ast.unparse(node)


def concepts_in(tree: ast.AST) -> list[tuple[str, int, str]]:
    """``(concept, line, code)`` for each place in ``tree`` that writes out a shared concept."""
    found = []

    def add(concept: str, node: ast.AST) -> None:
        found.append((concept, node.lineno, ast.unparse(node)[:70]))

    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List):
            vals = [_value(e) for e in node.elts]
            if vals[-2:] in ([72, 20], [72, 80]):
                add("packed2 shape", node)
            if len(vals) == 3 and vals[0] in _GREYS and vals.count(vals[0]) == 3:
                add("palette", node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            if {_value(node.left), _value(node.right)} in ({72, 20}, {72, 80}):
                add("packed2 shape", node)
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            if node.value == 1440:
                add("packed2 shape", node)
            if node.value in (0xAAAAAA, 0x555555):
                add("palette", node)
        elif isinstance(node, ast.Call):
            func = _name(node.func)
            first = node.args[0] if node.args else None
            if func.endswith("arange") and _value(first) == 256:
                add("packed2 table", node)
            elif func.endswith("index_select") and "lut" in _name(node.func.value).lower():
                add("packed2 table", node)
            elif func.endswith(".roll"):
                add("rssm inputs", node)
            elif func.endswith("cat") and isinstance(first, ast.List | ast.Tuple) \
                    and len(first.elts) == 2 and "z" in _name(first.elts[0]) \
                    and _name(first.elts[1]).split(".")[-1].split("[")[0] in ("h", "hc", "deter"):
                add("latent layout", node)
            elif func.endswith("scatter_") and len(node.args) == 3 and _value(node.args[2]) in (1, 1.0, True):
                add("one-hot", node)
            elif func.split(".")[-1] == "one_hot" and func != "one_hot" and "functional" in func \
                    or func == "F.one_hot":
                add("one-hot", node)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
                and _name(node.value.func).endswith("eye"):
            add("one-hot", node)
    return found


def places(package: Path = PACKAGE) -> dict[str, list[str]]:
    """concept -> ``path:line: code`` of every place in ``package`` that writes it out."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        for concept, line, code in concepts_in(ast.parse(path.read_text(), str(path))):
            out[concept].append(f"{rel}:{line}: {code}")
    return out


def strays(package: Path = PACKAGE) -> dict[str, list[str]]:
    """The places of :func:`places` outside each concept's home (what the tests want empty)."""
    return {c: [p for p in ps if not p.startswith(HOMES[c] + ":")]
            for c, ps in places(package).items()}


def test_the_scan_finds_each_form():
    code = """
shape = (1, 72, 20); n = 72 * 20; m = 1440
grey = (0xAA, 0xAA, 0xAA); rgb = 0x555555
table = torch.arange(256); out = lut.index_select(0, idx)
prev = torch.roll(action, 1, dims=0)
latent = torch.cat([z, h], -1); latent2 = torch.cat([post["z"], out.h], -1)
a = x.scatter_(-1, i, 1.0); b = F.one_hot(i, 3); c = torch.eye(3)[i]
fine = torch.cat([x, h], -1); ok = count.scatter_(1, slot, c)
"""
    got = defaultdict(int)
    for concept, _, _ in concepts_in(ast.parse(code)):
        got[concept] += 1
    assert dict(got) == {"packed2 shape": 3, "palette": 2, "packed2 table": 2,
                         "rssm inputs": 1, "latent layout": 2, "one-hot": 3}


def test_each_concept_lives_in_its_home():
    found = places()
    for home in HOMES.values():
        assert (PACKAGE.parent / home).is_file(), home
    # the homes do hold them (the scan still sees the forms the package writes)
    for concept in ("packed2 table", "rssm inputs", "latent layout", "one-hot", "palette"):
        assert any(p.startswith(HOMES[concept] + ":") for p in found[concept]), concept
    left = {c: ps for c, ps in strays().items() if ps}
    assert not left, "written out again outside their home (call the home instead):\n" + "\n".join(
        f"{c}: {p}" for c, ps in left.items() for p in ps)


if __name__ == "__main__":
    import sys

    # an optional argument: another checkout's package folder (e.g. an older commit's export)
    package = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else PACKAGE
    found, away = places(package), strays(package)
    for concept, home in HOMES.items():
        print(f"{concept}: {len(found[concept])} places, {len(away.get(concept, []))} outside "
              f"{home}")
        for p in away.get(concept, []):
            print("   ", p)
