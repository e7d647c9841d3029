"""A small two-pass SM83 assembler (Game Boy CPU), pure Python.

Why our own: no SM83 assembler is on PyPI and rgbds is not packaged in Debian 12; the games
we ship must rebuild byte-for-byte from source in CI with nothing but Python.

Syntax (rgbds-like, case-insensitive mnemonics, case-sensitive symbols, ``;`` comments)::

    TILE_COUNT equ 4            ; constants (also ``NAME = expr`` and ``def NAME equ expr``)
    section "vars", $C000       ; RAM section: only labels and ``ds`` (no bytes emitted)
    counter:  ds 1
    org $0150                   ; ROM code at a fixed address (default origin: $0150)
    start:
        ld hl, counter
    .loop:                      ; local label, full name ``start.loop``
        inc [hl]
        jr nz, .loop
        ldh a, [$FF44]          ; LDH with a full or a $00-$FF address
        ld [c], a               ; also [$FF00+c]
        ld hl, sp+4
    table: db 1, 2, "text", low(start), high(start)
           dw start, table + 2
           ds 4, $FF             ; 4 bytes of $FF
    bank 1                      ; ROMX bank 1 at $4000 (needs an MBC cart type)

Memory operands may use brackets ``[hl]`` or parentheses ``(hl)``; ``[hli]``/``[hl+]`` and
``[hld]``/``[hl-]`` are both accepted. Other directives: ``dw``, ``ds n[, fill]``, ``include
"file"``, ``macro NAME`` ... ``endm`` (arguments ``\\1``..``\\9``, unique suffix ``\\@``),
``assert expr[, "message"]``. ``@`` (or a lone ``$``) is the current instruction's address.

Example::

    >>> bytes(assemble("ld b, c\\nld a, [hl+]"))
    b'A*'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from torchrl_dreamer.asm.encoder import MNEMONICS, EncodeError, encode, parse_operand
from torchrl_dreamer.asm.errors import AsmError
from torchrl_dreamer.asm.expr import ExprError, UndefinedSymbol, evaluate
from torchrl_dreamer.asm.source import (
    DIRECTIVES,
    LABEL_RE,
    RESERVED,
    STRING_RE,
    WORD_RE,
    SourceLine,
    SourceLoader,
    split_operands,
    unescape,
)

__all__ = ["Section", "Program", "assemble", "split_operands"]

DEFAULT_ORIGIN = 0x0150
ROM_END = 0x8000
BANK_SIZE = 0x4000


@dataclass
class Section:
    """A contiguous block of code/data (ROM) or reserved space (RAM) at a fixed address.

    ``bank`` is 0 for the fixed area ($0000-$7FFF of a 32 KiB ROM-only cart) or n >= 1 for a
    switchable ROMX bank mapped at $4000-$7FFF. RAM sections (address >= $8000) hold no bytes.
    """

    name: str
    bank: int
    address: int
    filename: str = "<asm>"
    line: int = 0
    data: bytearray = field(default_factory=bytearray)
    reserved: int = 0

    @property
    def is_rom(self) -> bool:
        """True when the section lives in cartridge ROM (address < $8000)."""
        return self.address < ROM_END

    @property
    def size(self) -> int:
        """Size in bytes (emitted bytes for ROM, reserved bytes for RAM)."""
        return len(self.data) if self.is_rom else self.reserved

    @property
    def offset(self) -> int:
        """Offset of the section's first byte in the ROM file."""
        if not self.is_rom:
            raise ValueError(f"section {self.name!r} is in RAM and has no ROM offset")
        if self.bank == 0:
            return self.address
        return self.bank * BANK_SIZE + (self.address - BANK_SIZE)


class Program(bytes):
    """Result of :func:`assemble`: the flat ROM bytes, plus sections and symbols.

    As ``bytes`` it holds the ROM image from the lowest ROM offset used (``base``) to the
    highest, gaps filled with 0. For a source without ``org`` that is just the code, assembled
    to run at $0150: exactly what ``build_rom(code)`` expects. Pass the ``Program`` itself to
    :func:`~torchrl_dreamer.asm.build_rom` to place every section at its own address.
    """

    sections: list[Section]
    symbols: dict[str, int]
    base: int

    def __new__(cls, sections: list[Section], symbols: dict[str, int]) -> Program:
        rom = [s for s in sections if s.is_rom and s.data]
        if rom:
            base = min(s.offset for s in rom)
            end = max(s.offset + len(s.data) for s in rom)
            buf = bytearray(end - base)
            for s in rom:
                buf[s.offset - base: s.offset - base + len(s.data)] = s.data
        else:
            base, buf = DEFAULT_ORIGIN, bytearray()
        obj = super().__new__(cls, bytes(buf))
        obj.sections = sections
        obj.symbols = symbols
        obj.base = base
        return obj

    def __reduce__(self):  # pickle (e.g. into worker processes) with sections and symbols
        return (Program, (self.sections, self.symbols))

    def image(self, size: int | None = None, fill: int = 0x00) -> bytearray:
        """The ROM file image from offset 0 (``size`` bytes, default: rounded up to 32 KiB)."""
        end = max((s.offset + len(s.data) for s in self.sections if s.is_rom), default=0)
        if size is None:
            size = max(0x8000, 1 << max(end - 1, 1).bit_length())
        if end > size:
            raise ValueError(f"program needs {end} bytes of ROM, more than size={size}")
        buf = bytearray([fill]) * size
        for s in self.sections:
            if s.is_rom and s.data:
                buf[s.offset: s.offset + len(s.data)] = s.data
        return buf


_LOCAL_NOCOLON = re.compile(r"^\s*(\.[A-Za-z_][\w]*)(?=\s|$)")
_EQU = re.compile(r"^\s*(?:def\s+)?([A-Za-z_][\w]*)\s*(?::\s*)?(?:\s(?i:equ)\s|=)\s*(.+)$")


class _Assembler:
    """The two passes: pass 1 sizes everything and collects symbols, pass 2 emits bytes."""

    def __init__(self, origin: int, defines: dict[str, int] | None) -> None:
        self.origin = origin
        self.symbols: dict[str, int] = dict(defines or {})
        self.constants: set[str] = set(self.symbols)
        self.label_lines: dict[str, tuple[str, int]] = {}

    def run(self, lines: list[SourceLine]) -> Program:
        self.final = False
        self._pass(lines)
        first = {k: self.symbols[k] for k in self.label_lines if k in self.symbols}
        self.final = True
        self._pass(lines)
        moved = [k for k, v in first.items() if self.symbols.get(k) != v]
        if moved:  # sizes are fixed by the syntax, so this means an assembler bug
            f, n = self.label_lines[moved[0]]
            raise AsmError(f"internal phase error: {moved[0]!r} moved between passes", f, n)
        self._check_overlaps()
        return Program(self.sections, dict(self.symbols))

    def _pass(self, lines: list[SourceLine]) -> None:
        self.sections: list[Section] = []
        self.cur: Section | None = None
        self.bank = 0
        self.scope: str | None = None
        for ln in lines:
            self.line = ln
            try:
                self._statement(ln.text)
            except AsmError:
                raise
            except (EncodeError, ExprError) as e:
                raise AsmError(str(e), ln.filename, ln.number, ln.text) from None

    def _err(self, msg: str) -> AsmError:
        return AsmError(msg, self.line.filename, self.line.number, self.line.text)

    # symbols
    def _full(self, name: str) -> str:
        if name.startswith("."):
            if self.scope is None:
                raise self._err(f"local label {name!r} used before any global label")
            return self.scope + name
        return name

    def _lookup(self, name: str) -> int:
        full = self._full(name)
        if full in self.symbols:
            return self.symbols[full]
        raise UndefinedSymbol(full)

    def _eval(self, text: str, *, strict: bool | None = None, here: int | None = None) -> int:
        strict = self.final if strict is None else strict
        h = self.pc if here is None and self.cur is not None else here
        try:
            return evaluate(text, self._lookup, h)
        except UndefinedSymbol as e:
            if strict:
                raise self._err(f"undefined symbol {e.name!r}") from None
            return 0

    @property
    def pc(self) -> int:
        assert self.cur is not None
        return self.cur.address + self.cur.size

    def _define_label(self, name: str) -> None:
        if name.lower() in RESERVED or name.lower() in MNEMONICS:
            raise self._err(f"{name!r} is a register, condition or mnemonic name: pick another")
        if not name.startswith("."):
            self.scope = name.split(".")[0]
        full = self._full(name)
        sec = self._section()
        addr = sec.address + sec.size
        if not self.final:
            if full in self.symbols:
                f, n = self.label_lines.get(full, ("<define>", 0))
                raise self._err(f"symbol {full!r} already defined at {f}:{n}")
            self.label_lines[full] = (self.line.filename, self.line.number)
        self.symbols[full] = addr

    def _section(self) -> Section:
        if self.cur is None:
            self._new_section(f"org ${self.origin:04X}", self.origin)
        assert self.cur is not None
        return self.cur

    def _new_section(self, name: str, address: int) -> None:
        if not 0 <= address <= 0xFFFF:
            raise self._err(f"address ${address:X} is outside $0000-$FFFF")
        if address < ROM_END and self.bank > 0 and not BANK_SIZE <= address < ROM_END:
            raise self._err(f"bank {self.bank} code must be at $4000-$7FFF, not ${address:04X}")
        self.cur = Section(name, self.bank if address < ROM_END else 0, address,
                           self.line.filename, self.line.number)
        self.sections.append(self.cur)

    def _emit(self, data: bytes) -> None:
        sec = self._section()
        if not sec.is_rom:
            raise self._err(f"cannot emit bytes in RAM (section at ${sec.address:04X}): "
                            "use ds to reserve space, or org a ROM address")
        end = sec.address + len(sec.data) + len(data)
        if end > ROM_END:
            raise self._err(f"section {sec.name!r} runs past $7FFF")
        sec.data.extend(data)

    def _statement(self, text: str) -> None:
        if not text.strip():
            return
        em = _EQU.match(text)
        if em and em.group(1).lower() not in MNEMONICS:
            name = em.group(1)
            if name.lower() in RESERVED:
                raise self._err(f"{name!r} is a register or condition name: pick another")
            try:
                v = evaluate(em.group(2), self._lookup, None if self.cur is None else self.pc)
            except UndefinedSymbol as e:
                if self.final:
                    raise self._err(f"undefined symbol {e.name!r}") from None
                return
            if not self.final and name in self.symbols and name not in self.constants:
                raise self._err(f"symbol {name!r} already defined as a label")
            if not self.final and name in self.constants and self.symbols[name] != v \
                    and name in self.label_lines:
                f, n = self.label_lines[name]
                raise self._err(f"constant {name!r} redefined (first defined at {f}:{n})")
            self.symbols[name] = v
            self.constants.add(name)
            self.label_lines.setdefault(name, (self.line.filename, self.line.number))
            return
        lm = LABEL_RE.match(text)
        if lm:
            self._define_label(lm.group(1))
            text = text[lm.end():]
        else:
            lm2 = _LOCAL_NOCOLON.match(text)
            if lm2 and lm2.group(1).lower() not in {"." + d for d in DIRECTIVES}:
                self._define_label(lm2.group(1))
                text = text[lm2.end():]
        if not text.strip():
            return
        m = WORD_RE.match(text)
        if not m:
            raise self._err(f"cannot parse {text.strip()!r}")
        word, rest = m.group(1).lower().lstrip("."), m.group(2).strip()
        if word in DIRECTIVES:
            self._directive(word, rest)
            return
        if word not in MNEMONICS:
            raise self._err(f"unknown mnemonic or directive {m.group(1)!r}")
        ops = [parse_operand(o) for o in split_operands(rest)] if rest else []
        sec = self._section()
        pc = sec.address + sec.size
        code = encode(word, ops, lambda t: self._eval(t, here=pc), pc, strict=self.final)
        self._emit(code)

    def _directive(self, word: str, rest: str) -> None:
        if word in ("db", "defb", "byte"):
            out = bytearray()
            for item in split_operands(rest):
                sm = STRING_RE.match(item)
                if sm:
                    out += unescape(sm.group(1))
                    continue
                v = self._eval(item)
                if self.final and not -128 <= v <= 255:
                    raise self._err(f"db value {v} does not fit in a byte")
                out.append(v & 0xFF)
            self._emit(bytes(out))
        elif word in ("dw", "defw", "word"):
            out = bytearray()
            for item in split_operands(rest):
                v = self._eval(item)
                if self.final and not -32768 <= v <= 0xFFFF:
                    raise self._err(f"dw value {v} does not fit in 16 bits")
                out += bytes((v & 0xFF, (v >> 8) & 0xFF))
            self._emit(bytes(out))
        elif word in ("ds", "defs"):
            args = split_operands(rest)
            if not 1 <= len(args) <= 2:
                raise self._err("ds takes a count and an optional fill byte: ds 16, $FF")
            n = self._eval(args[0], strict=True)
            if n < 0:
                raise self._err(f"ds count {n} is negative")
            fill = self._eval(args[1]) & 0xFF if len(args) == 2 else 0
            sec = self._section()
            if sec.is_rom:
                self._emit(bytes([fill]) * n)
            else:
                if sec.address + sec.reserved + n > 0x10000:
                    raise self._err("ds runs past $FFFF")
                sec.reserved += n
        elif word == "org":
            self._new_section(f"org {rest}", self._eval(rest, strict=True))
        elif word == "section":
            args = split_operands(rest)
            sm = STRING_RE.match(args[0]) if args else None
            name = sm.group(1) if sm else (args[0] if args else "")
            if not name:
                raise self._err('section needs a name: section "name", $ADDR')
            if len(args) > 2:
                raise self._err('section takes a name and an address: section "name", $ADDR')
            addr = self._eval(args[1], strict=True) if len(args) == 2 else (
                self.pc if self.cur is not None else self.origin)
            self._new_section(name, addr)
        elif word == "bank":
            n = self._eval(rest, strict=True)
            if not 0 <= n <= 511:
                raise self._err(f"bank {n} is outside 0..511")
            self.bank = n
            self._new_section(f"bank {n}", BANK_SIZE if n else 0)
        elif word == "assert":
            args = split_operands(rest)
            if self.final and not self._eval(args[0]):
                msg = STRING_RE.match(args[1]).group(1) if len(args) > 1 and STRING_RE.match(args[1]) else args[0]
                raise self._err(f"assertion failed: {msg}")
        elif word == "endm":
            raise self._err("ENDM without MACRO")
        else:  # include / macro are handled while loading
            raise self._err(f"misplaced {word!r}")

    def _check_overlaps(self) -> None:
        rom = sorted((s for s in self.sections if s.is_rom and s.data), key=lambda s: s.offset)
        for a, b in zip(rom, rom[1:]):
            if a.offset + len(a.data) > b.offset:
                raise AsmError(
                    f"section {b.name!r} (bank {b.bank}, ${b.address:04X}) overlaps section "
                    f"{a.name!r} (bank {a.bank}, ${a.address:04X}-${a.address + len(a.data) - 1:04X}, "
                    f"from {a.filename}:{a.line})", b.filename, b.line)


def assemble(source: str, filename: str = "<asm>", *, origin: int = DEFAULT_ORIGIN,
             defines: dict[str, int] | None = None,
             include_paths: list[str | Path] | None = None) -> Program:
    """Assemble SM83 source text into a :class:`Program` (``bytes`` plus sections/symbols).

    Args:
        source: the assembly text.
        filename: name used in error messages and to resolve relative ``include`` files.
        origin: address of code that comes before any ``org``/``section`` (default $0150, right
            after the cartridge header, where :func:`build_rom` places plain code).
        defines: extra constants, as if defined with ``equ`` before the first line.
        include_paths: extra folders searched by ``include``.

    Raises:
        AsmError: with ``file:line`` for any error (unknown mnemonic, bad operand, out-of-range
            value or JR, undefined or duplicate symbol, overlapping sections).

    Example::

        >>> prog = assemble("start: ld a, 1\\n jr start")
        >>> bytes(prog).hex(), prog.symbols["start"]
        ('3e0118fc', 336)
    """
    loader = SourceLoader([Path(p) for p in include_paths or []])
    lines = loader.load(source, filename)
    return _Assembler(origin, defines).run(lines)
