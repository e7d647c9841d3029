"""Expression parsing and evaluation for the SM83 assembler.

Why our own: the assembler is pure Python with no dependency, and assembly expressions need a
few things Python's ``eval`` must not see (``$1F`` hex, ``%1010`` binary, ``'A'`` characters,
``low()``/``high()``, local ``.labels``, ``@``/``$`` for the current address).

Grammar (C precedence, lowest first)::

    expr := lor ; lor := land ('||' land)* ; land := or ('&&' or)* ; or := xor ('|' xor)*
    xor := and ('^' and)* ; and := eq ('&' eq)* ; eq := rel (('=='|'!=') rel)*
    rel := shift (('<'|'<='|'>'|'>=') shift)* ; shift := add (('<<'|'>>') add)* ; add := mul (('+'|'-') mul)* ; mul := unary (('*'|'/'|'%') unary)*
    unary := ('-'|'+'|'~'|'!') unary | atom ; atom := number | char | symbol | func '(' expr ')' | '(' expr ')'

Example::

    >>> evaluate("high($C0DE) + low(%1_0000_0001)", lambda name: 0)
    193
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["ExprError", "UndefinedSymbol", "evaluate", "tokenize"]


class ExprError(ValueError):
    """A malformed expression (bad token, unbalanced parenthesis, division by zero...)."""


class UndefinedSymbol(ExprError):
    """An expression refers to a symbol that is not (yet) defined."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"undefined symbol {name!r}")


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>\$[0-9A-Fa-f_]+|0[xX][0-9A-Fa-f_]+|%[01_]+|0[bB][01_]+|[0-9][0-9A-Fa-f_]*[hH]\b|[0-9][0-9_]*)
      | (?P<chr>'(?:\\.|[^'\\])')
      | (?P<name>\.?[A-Za-z_][A-Za-z0-9_.]*)
      | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!()<>])
      | (?P<here>[@$])
    )""",
    re.VERBOSE,
)

_ESCAPES = {"n": 10, "r": 13, "t": 9, "0": 0, "\\": 92, "'": 39, '"': 34}


def _number(text: str) -> int:
    t = text.replace("_", "")
    if t[0] == "$":
        return int(t[1:], 16)
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[0] == "%":
        return int(t[1:], 2)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if t[-1] in "hH":
        return int(t[:-1], 16)
    return int(t, 10)


def _char(text: str) -> int:
    body = text[1:-1]
    if body.startswith("\\"):
        if body[1] not in _ESCAPES:
            raise ExprError(f"unknown escape {body!r} in character literal")
        return _ESCAPES[body[1]]
    return ord(body)


def tokenize(text: str) -> list[tuple[str, str]]:
    """Split an expression into ``(kind, text)`` tokens; kinds: num, chr, name, op, here."""
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"unexpected character {text[pos:].strip()[:1]!r} in {text.strip()!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


_BINARY = [
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="),
    ("<<", ">>"), ("+", "-"), ("*", "/", "%"),
]

_FUNCS: dict[str, Callable[[int], int]] = {
    "low": lambda v: v & 0xFF,
    "high": lambda v: (v >> 8) & 0xFF,
}


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], lookup: Callable[[str], int], here: int | None):
        self.toks = tokens
        self.i = 0
        self.lookup = lookup
        self.here = here

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ExprError("expression ends too early")
        self.i += 1
        return tok

    def binary(self, level: int) -> int:
        if level == len(_BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while True:
            tok = self.peek()
            if tok is None or tok[0] != "op" or tok[1] not in _BINARY[level]:
                return left
            self.i += 1
            right = self.binary(level + 1)
            left = _apply(tok[1], left, right)

    def unary(self) -> int:
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] in "-+~!":
            self.i += 1
            v = self.unary()
            return {"-": -v, "+": v, "~": ~v, "!": int(not v)}[tok[1]]
        return self.atom()

    def atom(self) -> int:
        kind, text = self.take()
        if kind == "num":
            return _number(text)
        if kind == "chr":
            return _char(text)
        if kind == "here":
            if self.here is None:
                raise ExprError(f"{text!r} (current address) is not available here")
            return self.here
        if kind == "op" and text == "(":
            v = self.binary(0)
            self.expect(")")
            return v
        if kind == "name":
            nxt = self.peek()
            if text.lower() in _FUNCS and nxt == ("op", "("):
                self.i += 1
                v = self.binary(0)
                self.expect(")")
                return _FUNCS[text.lower()](v)
            return self.lookup(text)
        raise ExprError(f"unexpected {text!r}")

    def expect(self, op: str) -> None:
        tok = self.peek()
        if tok != ("op", op):
            raise ExprError(f"expected {op!r}" + ("" if tok is None else f", got {tok[1]!r}"))
        self.i += 1


def _apply(op: str, a: int, b: int) -> int:
    if op in ("/", "%") and b == 0:
        raise ExprError("division by zero")
    if op in ("<<", ">>") and b < 0:
        raise ExprError("negative shift count")
    return {
        "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
        "<<": lambda: a << b, ">>": lambda: a >> b, "+": lambda: a + b, "-": lambda: a - b,
        "*": lambda: a * b, "/": lambda: int(a / b), "%": lambda: a - int(a / b) * b,
        "||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
        "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
        "<=": lambda: int(a <= b), ">": lambda: int(a > b), ">=": lambda: int(a >= b),
    }[op]()


def evaluate(text: str, lookup: Callable[[str], int], here: int | None = None) -> int:
    """Evaluate an assembly expression.

    Args:
        text: the expression, e.g. ``"high(table) + 1"``.
        lookup: resolves a symbol name to its value; raises :class:`UndefinedSymbol` if unknown.
        here: value of ``@``/``$`` (the address of the current instruction), if any.
    """
    tokens = tokenize(text)
    if not tokens:
        raise ExprError("empty expression")
    p = _Parser(tokens, lookup, here)
    v = p.binary(0)
    if p.peek() is not None:
        raise ExprError(f"unexpected {p.peek()[1]!r} after expression {text.strip()!r}")
    return v
