"""Source loading for the SM83 assembler: comments, operand splitting, ``include`` and macros.

The loader turns source text into a flat list of :class:`SourceLine` (file, line number,
comment-stripped text) with every ``include "file"`` inlined and every macro call expanded, so
the two assembly passes see one plain statement per line and errors still point at the right
file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from torchrl_dreamer.asm.encoder import MNEMONICS, EncodeError
from torchrl_dreamer.asm.errors import AsmError

__all__ = ["SourceLine", "SourceLoader", "split_operands", "strip_comment", "unescape",
           "DIRECTIVES", "RESERVED"]

LABEL_RE = re.compile(r"^\s*(\.?[A-Za-z_][\w.]*)\s*(::?)")
WORD_RE = re.compile(r"^\s*(\.?[A-Za-z_][\w]*)\s*(.*)$")
STRING_RE = re.compile(r'^"((?:\\.|[^"\\])*)"$')

RESERVED = {"a", "b", "c", "d", "e", "h", "l", "af", "bc", "de", "hl", "sp", "nz", "z", "nc",
            "hli", "hld"}
DIRECTIVES = {
    "db", "defb", "byte", "dw", "defw", "word", "ds", "defs", "org", "section", "bank",
    "include", "macro", "endm", "assert",
}


def split_operands(text: str) -> list[str]:
    """Split an operand list on top-level commas (not inside quotes, () or [])."""
    out, cur, depth, quote = [], [], 0, None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur.append(ch)
        elif ch in "([":
            depth += 1
            cur.append(ch)
        elif ch in ")]":
            depth -= 1
            cur.append(ch)
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    last = "".join(cur).strip()
    if last or out:
        out.append(last)
    if any(not o for o in out):
        raise EncodeError(f"empty operand in {text.strip()!r}")
    return out


def strip_comment(line: str) -> str:
    """The line without its ``;`` comment (a ``;`` inside a string or 'c' literal is kept)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = None
        elif ch in "\"'":
            # an apostrophe not opening a 'c' literal (e.g. af') is just a character
            if ch == "'" and not re.match(r"'(\\.|[^'\\])'", line[i:]):
                continue
            quote = ch
        elif ch == ";":
            return line[:i]
    return line


@dataclass
class SourceLine:
    """One statement to assemble: where it comes from and its comment-free text."""

    filename: str
    number: int
    text: str  # comment-stripped


def unescape(body: str) -> bytes:
    """Bytes of a string literal's body (``\\n \\r \\t \\0 \\\\ \\" \\'`` escapes, Latin-1)."""
    out = bytearray()
    i = 0
    esc = {"n": 10, "r": 13, "t": 9, "0": 0, "\\": 92, '"': 34, "'": 39}
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            if i + 1 >= len(body) or body[i + 1] not in esc:
                raise EncodeError(f"unknown escape in string {body!r}")
            out.append(esc[body[i + 1]])
            i += 2
        else:
            if ord(ch) > 255:
                raise EncodeError(f"non-Latin-1 character {ch!r} in string")
            out.append(ord(ch))
            i += 1
    return bytes(out)


class SourceLoader:
    """Reads source text into :class:`SourceLine` s, inlining includes and expanding macros.

    Args:
        include_paths: extra folders searched by ``include`` (after the including file's folder).
    """

    def __init__(self, include_paths: list[Path] | None = None) -> None:
        self.include_paths = list(include_paths or [])
        self.macros: dict[str, list[SourceLine]] = {}
        self.macro_count = 0

    def load(self, source: str, filename: str, depth: int = 0) -> list[SourceLine]:
        """Statements of ``source`` (named ``filename`` in errors) with includes and macros done."""
        if depth > 16:
            raise AsmError("include/macro nesting deeper than 16 (recursive include?)", filename)
        out: list[SourceLine] = []
        raw = source.splitlines()
        i = 0
        while i < len(raw):
            text = strip_comment(raw[i]).rstrip()
            num = i + 1
            i += 1
            m = WORD_RE.match(text)
            word = m.group(1).lower() if m else ""
            # macro definition: "macro NAME" or "NAME: macro" / "NAME macro"
            mdef = re.match(r"^\s*(?:macro\s+([A-Za-z_]\w*)|([A-Za-z_]\w*):?\s+macro)\s*$", text,
                            re.IGNORECASE)
            if mdef:
                name = mdef.group(1) or mdef.group(2)
                body: list[SourceLine] = []
                while True:
                    if i >= len(raw):
                        raise AsmError(f"macro {name!r} has no ENDM", filename, num)
                    t = strip_comment(raw[i]).rstrip()
                    i += 1
                    if re.match(r"^\s*endm\s*$", t, re.IGNORECASE):
                        break
                    body.append(SourceLine(filename, i, t))
                if name.lower() in MNEMONICS or name.lower() in DIRECTIVES:
                    raise AsmError(f"macro name {name!r} is reserved", filename, num)
                self.macros[name] = body
                continue
            if word == "include":
                arg = m.group(2).strip() if m else ""
                sm = STRING_RE.match(arg)
                if not sm:
                    raise AsmError('include needs a quoted file name: include "file.inc"', filename, num, text)
                path = self._find(sm.group(1), filename)
                if path is None:
                    raise AsmError(f"include file {sm.group(1)!r} not found", filename, num, text)
                out.extend(self.load(path.read_text(), str(path), depth + 1))
                continue
            out.extend(self._expand(SourceLine(filename, num, text), depth))
        return out

    def _find(self, name: str, including: str) -> Path | None:
        cands = []
        if including and not including.startswith("<"):
            cands.append(Path(including).parent / name)
        cands += [Path(p) / name for p in self.include_paths]
        cands.append(Path(name))
        return next((c for c in cands if c.is_file()), None)

    def _expand(self, line: SourceLine, depth: int) -> list[SourceLine]:
        text = line.text
        label_part = ""
        lm = LABEL_RE.match(text)
        if lm:
            label_part, text = text[: lm.end()], text[lm.end():]
        m = WORD_RE.match(text)
        if not m or m.group(1) not in self.macros:
            return [line]
        if depth > 16:
            raise AsmError("macro nesting deeper than 16 (recursive macro?)", line.filename, line.number)
        args = split_operands(m.group(2)) if m.group(2).strip() else []
        self.macro_count += 1
        out = [SourceLine(line.filename, line.number, label_part)] if label_part else []
        for b in self.macros[m.group(1)]:
            t = b.text.replace("\\@", f"_{self.macro_count}")
            for k in range(9, 0, -1):
                if f"\\{k}" in t:
                    if k > len(args):
                        raise AsmError(f"macro {m.group(1)!r} uses \\{k} but got {len(args)} argument(s)",
                                       line.filename, line.number, line.text)
                    t = t.replace(f"\\{k}", args[k - 1])
            out.extend(self._expand(SourceLine(line.filename, line.number, t), depth + 1))
        return out
