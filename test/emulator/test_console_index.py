"""``memory.console``: every kernel function over ``(i, m)`` takes the console index in a form the
C++ compiler can see is not negative, and the value itself is unchanged.

Why it matters (``docs/decisions/kernel_shape.md``, "The console index the compiler can see"):
without it each ``m.<array>[i, ...]`` of an out-of-line function keeps Warp's negative-index
wrap. A function added without the line still works, only slower, so this test is what keeps
the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import torchrl_dreamer.emulator as emulator_pkg
from torchrl_dreamer.emulator import codegen
from torchrl_dreamer.emulator.memory import console

EMULATOR = Path(emulator_pkg.__file__).parent


def _decorators(node: ast.FunctionDef) -> list[str]:
    return [ast.unparse(d) for d in node.decorator_list]


def _first_statement(node: ast.FunctionDef) -> str:
    body = node.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return ast.unparse(body[0]) if body else ""


def _functions(source: str):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            yield node


def test_every_function_over_a_console_starts_with_console():
    checked, missing = 0, []
    for path in sorted(EMULATOR.rglob("*.py")):
        for node in _functions(path.read_text()):
            names = [a.arg for a in node.args.args]
            decs = _decorators(node)
            if names[:2] != ["i", "m"] or not any(d.startswith("wp.func") for d in decs):
                continue
            if any("func_native" in d for d in decs):
                continue
            checked += 1
            if _first_statement(node) != "i = console(i)":
                missing.append(f"{path.relative_to(EMULATOR)}:{node.lineno} {node.name}")
    assert checked > 150  # the rule reaches the bus, the PPU, the APU, the mappers...
    assert not missing, ("these functions over (i, m) do not start with `i = console(i)` "
                         f"(memory.console says why): {missing}")


def test_every_kernel_over_mem_takes_its_index_through_console():
    kernels = [n for n in _functions(codegen.generate_source())
               if "wp.kernel" in _decorators(n) and n.args.args[0].arg == "m"]
    assert {k.name for k in kernels} >= {"gb_run", "gb_peek", "gb_poke"}
    for k in kernels:
        assert _first_statement(k) == "i = console(wp.tid())", k.name


@wp.kernel
def _through_console(values: wp.array(dtype=int), out: wp.array(dtype=int)):
    k = wp.tid()
    out[k] = console(values[k])


@pytest.mark.parametrize("n", [0, 1, 255, 65_535, 65_536, 1_000_000, 2**31 - 1])
def test_console_keeps_every_index(n):
    """Any console index (0 .. 2**31 - 1) comes back unchanged."""
    values = wp.array(np.array([n], dtype=np.int32), dtype=int, device="cpu")
    out = wp.zeros(1, dtype=int, device="cpu")
    wp.launch(_through_console, 1, inputs=[values, out], device="cpu")
    assert out.numpy()[0] == n
