"""Experiment history lives in ``docs/`` (``docs/decisions/``, ``docs/learning_results.md``), not
in the package's docstrings: a docstring says what a name does and why in a line, and links the
measurements. The test lists docstrings (of modules, classes, functions and attributes) that
date an experiment (``2026-11-26``) or cite its runs by commit (``runs at b4ac2a7``).

Run as a script, it prints the places (the count of the "one house" issue)::

    .venv/bin/python test/trainers/test_code_narrations.py
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import torchrl_dreamer

PACKAGE = Path(torchrl_dreamer.__file__).parent

NARRATION = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bruns at [0-9a-f]{7}\b|[ (][0-9a-f]{7}\)")
"""A date, or runs or figures named by a 7-hex-digit commit."""

#: the modules whose docstrings still narrate, each being edited elsewhere at
#: present (the list only shrinks)
KNOWN: set[str] = set()


def docstrings(tree: ast.AST):
    """``(line, text)`` of each string statement: module, class, function and attribute
    docstrings."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            yield node.lineno, node.value.value


def narrations(package: Path = PACKAGE) -> list[str]:
    """``path:line`` of each docstring of ``package`` that :data:`NARRATION` matches."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        for line, text in docstrings(ast.parse(path.read_text(), str(path))):
            if NARRATION.search(text):
                out.append(f"{rel}:{line}")
    return out


def test_the_pattern_finds_dates_and_commits():
    tree = ast.parse('"""measured 2026-11-26."""\ndef f():\n    """runs at b4ac2a7."""\n'
                     'X = 1\n"""ok: 0.95 s at stride 4."""\n')
    assert [line for line, text in docstrings(tree) if NARRATION.search(text)] == [1, 3]


def test_no_experiment_narrations_in_docstrings():
    found = narrations()
    new = [p for p in found if p.rsplit(":", 1)[0] not in KNOWN]
    assert not new, "docstrings narrating experiments (move them to docs/decisions/, leave a " \
        "line and a link):\n" + "\n".join(new)
    left = {p.rsplit(":", 1)[0] for p in found}
    assert left == KNOWN, f"fixed, drop from KNOWN: {sorted(KNOWN - left)}"


if __name__ == "__main__":
    import sys

    places = narrations(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else PACKAGE)
    print(f"docstrings narrating experiments: {len(places)}")
    for p in places:
        print("   ", p)
