"""SM83 (Game Boy CPU) instruction encoding.

Operands are first classified (:func:`parse_operand`) into registers, conditions, memory forms
and immediate expressions, then :func:`encode` builds the bytes from the regular structure of
the opcode map: ``LD r,r'`` is ``0b01_rrr_sss``, ALU ops are ``0b10_ooo_sss`` / ``0b11_ooo_110``,
CB-page ops are ``op<<3 | r`` etc., with ``r`` in the order B C D E H L (HL) A.

Both bracket ``[hl]`` and parenthesis ``(hl)`` memory syntax are accepted; an operand wholly
wrapped in parentheses is a memory operand (write ``0+(x)`` for a parenthesised immediate).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Operand", "EncodeError", "parse_operand", "encode", "MNEMONICS"]

R8 = {"b": 0, "c": 1, "d": 2, "e": 3, "h": 4, "l": 5, "a": 7}
R16 = {"bc": 0, "de": 1, "hl": 2, "sp": 3}
R16_STACK = {"bc": 0, "de": 1, "hl": 2, "af": 3}
COND = {"nz": 0, "z": 1, "nc": 2, "c": 3}
ALU = {"add": 0, "adc": 1, "sub": 2, "sbc": 3, "and": 4, "xor": 5, "or": 6, "cp": 7}
CB_ROT = {"rlc": 0, "rrc": 1, "rl": 2, "rr": 3, "sla": 4, "sra": 5, "swap": 6, "srl": 7}
CB_BIT = {"bit": 1, "res": 2, "set": 3}
NO_OPERAND = {
    "nop": b"\x00", "rlca": b"\x07", "rrca": b"\x0f", "rla": b"\x17", "rra": b"\x1f",
    "daa": b"\x27", "cpl": b"\x2f", "scf": b"\x37", "ccf": b"\x3f", "halt": b"\x76",
    "di": b"\xf3", "ei": b"\xfb", "reti": b"\xd9",
}
MNEMONICS = frozenset(
    set(NO_OPERAND) | set(ALU) | set(CB_ROT) | set(CB_BIT)
    | {"ld", "ldh", "ldi", "ldd", "ldhl", "inc", "dec", "jr", "jp", "call", "ret", "rst",
       "push", "pop", "stop"}
)


class EncodeError(ValueError):
    """A bad operand combination or an out-of-range value for one instruction."""


@dataclass(frozen=True)
class Operand:
    """One classified operand.

    kind: ``reg`` (8-bit register or ``af/bc/de/hl/sp``, ``text`` is the name), ``mem`` (memory
    through a register pair or C: ``text`` in ``hl, hl+, hl-, bc, de, c``), ``memimm`` (memory at
    an expression), ``spoff`` (``sp+e``; ``text`` is the signed expression), ``imm`` (expression).
    """

    kind: str
    text: str
    source: str


def _wrapped(s: str, open_: str, close: str) -> bool:
    if not (s.startswith(open_) and s.endswith(close)):
        return False
    depth = 0
    for i, ch in enumerate(s):
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0 and i != len(s) - 1:
                return False
    return True


_MEM_REGS = {"hl": "hl", "hl+": "hl+", "hli": "hl+", "hl-": "hl-", "hld": "hl-", "bc": "bc",
             "de": "de", "c": "c"}


def parse_operand(src: str) -> Operand:
    """Classify one operand string (already stripped of surrounding whitespace)."""
    s = src.strip()
    low = "".join(s.lower().split())
    if low in R8 or low in ("af", "bc", "de", "hl", "sp"):
        return Operand("reg", low, s)
    if low in ("nz", "nc", "z"):
        return Operand("cond", low, s)
    if low in ("hl+", "hli", "hl-", "hld"):
        return Operand("reg", _MEM_REGS[low], s)
    for o, c in (("[", "]"), ("(", ")")):
        if _wrapped(s, o, c):
            inner = s[1:-1].strip()
            il = "".join(inner.lower().split())
            if il in _MEM_REGS:
                return Operand("mem", _MEM_REGS[il], s)
            for pre in ("$ff00+", "0xff00+", "0ff00h+", "65280+"):
                if il == pre + "c":
                    return Operand("mem", "c", s)
            words = {w.lower() for w in re.findall(r"(?<![$%.\w])[A-Za-z_]\w*", inner)}
            if words & {"a", "b", "c", "d", "e", "h", "l", "af", "bc", "de", "hl", "sp"}:
                raise EncodeError(f"bad operands: memory operand {s!r} mixes a register into an "
                                  "address; use [bc], [de], [hl], [hl+], [hl-], [c] or [address]")
            return Operand("memimm", inner, s)
    if low.startswith(("sp+", "sp-")):
        return Operand("spoff", s.strip()[2:].strip(), s)
    if s.startswith("[") or s.endswith("]"):
        raise EncodeError(f"unbalanced brackets in operand {s!r}")
    return Operand("imm", s, s)


Eval = Callable[[str], int]


def _u8(v: int, what: str) -> int:
    if not -128 <= v <= 255:
        raise EncodeError(f"{what} {v} does not fit in 8 bits (-128..255)")
    return v & 0xFF


def _s8(v: int, what: str) -> int:
    if not -128 <= v <= 127:
        raise EncodeError(f"{what} {v} does not fit in a signed byte (-128..127)")
    return v & 0xFF


def _u16(v: int, what: str) -> bytes:
    if not -32768 <= v <= 0xFFFF:
        raise EncodeError(f"{what} {v} does not fit in 16 bits")
    return bytes((v & 0xFF, (v >> 8) & 0xFF))


def _r8(op: Operand) -> int | None:
    """Index 0..7 of an 8-bit operand (B C D E H L [HL] A), or None."""
    if op.kind == "reg" and op.text in R8:
        return R8[op.text]
    if op.kind == "mem" and op.text == "hl":
        return 6
    return None


def _cond(op: Operand) -> int | None:
    if op.kind == "cond":
        return COND[op.text]
    if op.kind == "reg" and op.text == "c":
        return COND["c"]
    return None


def _hram(v: int) -> int:
    if 0xFF00 <= v <= 0xFFFF:
        return v - 0xFF00
    if 0 <= v <= 0xFF:
        return v
    raise EncodeError(f"LDH address ${v:X} is outside $FF00-$FFFF")


def encode(mnem: str, ops: list[Operand], ev: Eval, pc: int, strict: bool = True) -> bytes:
    """Encode one instruction.

    Args:
        mnem: lower-case mnemonic.
        ops: classified operands.
        ev: evaluates an expression string to an int (may return a placeholder when not strict).
        pc: address of the instruction (for ``jr``).
        strict: when False (first pass) value range checks are skipped: only the size matters.
    """
    n = len(ops)

    def val(text: str) -> int:
        return ev(text)

    def chk(fn: Callable[..., object], *a: object) -> object:
        if strict:
            return fn(*a)
        try:
            return fn(*a)
        except EncodeError:
            return b"\x00\x00" if fn is _u16 else 0

    def imm8(op: Operand) -> int:
        return chk(_u8, val(op.text), "value")  # type: ignore[return-value]

    def imm16(op: Operand) -> bytes:
        return chk(_u16, val(op.text), "value")  # type: ignore[return-value]

    def bad() -> EncodeError:
        shown = ", ".join(o.source for o in ops)
        return EncodeError(f"bad operands for {mnem.upper()}: {shown or '(none)'}")

    if mnem in NO_OPERAND:
        if n:
            raise bad()
        return NO_OPERAND[mnem]
    if mnem == "stop":
        if n > 1:
            raise bad()
        return bytes((0x10, imm8(ops[0]) if n else 0))

    if mnem in ALU:
        if mnem == "add":
            wide = encode_add16(ops, ev, strict)
            if wide is not None:
                return wide
        if n == 2:
            if not (ops[0].kind == "reg" and ops[0].text == "a"):
                raise bad()
            ops = ops[1:]
            n = 1
        if n != 1:
            raise bad()
        code = ALU[mnem]
        r = _r8(ops[0])
        if r is not None:
            return bytes((0x80 | code << 3 | r,))
        if ops[0].kind == "imm":
            return bytes((0xC6 | code << 3, imm8(ops[0])))
        raise bad()

    if mnem in CB_ROT:
        r = _r8(ops[0]) if n == 1 else None
        if r is None:
            raise bad()
        return bytes((0xCB, CB_ROT[mnem] << 3 | r))
    if mnem in CB_BIT:
        if n != 2 or ops[0].kind != "imm":
            raise bad()
        r = _r8(ops[1])
        if r is None:
            raise bad()
        b = val(ops[0].text)
        if not 0 <= b <= 7:
            if strict:
                raise EncodeError(f"bit number {b} is outside 0..7")
            b = 0
        return bytes((0xCB, CB_BIT[mnem] << 6 | b << 3 | r))

    if mnem in ("inc", "dec"):
        if n != 1:
            raise bad()
        r = _r8(ops[0])
        if r is not None:
            return bytes(((0x04 if mnem == "inc" else 0x05) | r << 3,))
        if ops[0].kind == "reg" and ops[0].text in R16:
            return bytes(((0x03 if mnem == "inc" else 0x0B) | R16[ops[0].text] << 4,))
        raise bad()

    if mnem in ("push", "pop"):
        if n != 1 or ops[0].kind != "reg" or ops[0].text not in R16_STACK:
            raise bad()
        return bytes(((0xC5 if mnem == "push" else 0xC1) | R16_STACK[ops[0].text] << 4,))

    if mnem == "rst":
        if n != 1 or ops[0].kind != "imm":
            raise bad()
        v = val(ops[0].text)
        if v not in range(0, 0x40, 8):
            if strict:
                raise EncodeError(f"RST vector ${v:X} must be one of $00,$08,...,$38")
            v = 0
        return bytes((0xC7 | v,))

    if mnem == "ret":
        if n == 0:
            return b"\xc9"
        c = _cond(ops[0]) if n == 1 else None
        if c is None:
            raise bad()
        return bytes((0xC0 | c << 3,))

    if mnem in ("jp", "call"):
        if mnem == "jp" and n == 1 and (
            (ops[0].kind == "reg" and ops[0].text == "hl") or (ops[0].kind == "mem" and ops[0].text == "hl")
        ):
            return b"\xe9"
        if n == 1 and ops[0].kind == "imm":
            return bytes((0xC3 if mnem == "jp" else 0xCD,)) + imm16(ops[0])
        if n == 2 and ops[1].kind == "imm":
            c = _cond(ops[0])
            if c is None:
                raise bad()
            return bytes(((0xC2 if mnem == "jp" else 0xC4) | c << 3,)) + imm16(ops[1])
        raise bad()

    if mnem == "jr":
        if n == 1 and ops[0].kind == "imm":
            opc, target = 0x18, ops[0]
        elif n == 2 and ops[1].kind == "imm" and _cond(ops[0]) is not None:
            opc, target = 0x20 | (_cond(ops[0]) or 0) << 3, ops[1]
        else:
            raise bad()
        off = val(target.text) - (pc + 2)
        if not -128 <= off <= 127:
            if strict:
                raise EncodeError(f"JR target out of range (offset {off}, must be -128..127): use JP")
            off = 0
        return bytes((opc, off & 0xFF))

    if mnem == "ldh":
        if n != 2:
            raise bad()
        a, b = ops
        if a.kind == "reg" and a.text == "a":
            if b.kind == "mem" and b.text == "c":
                return b"\xf2"
            if b.kind == "memimm":
                return bytes((0xF0, chk(_hram, val(b.text))))
        if b.kind == "reg" and b.text == "a":
            if a.kind == "mem" and a.text == "c":
                return b"\xe2"
            if a.kind == "memimm":
                return bytes((0xE0, chk(_hram, val(a.text))))
        raise bad()

    if mnem in ("ldi", "ldd"):
        if n != 2:
            raise bad()
        a, b = ops
        if a.kind == "mem" and a.text == "hl" and b.kind == "reg" and b.text == "a":
            return bytes((0x22 if mnem == "ldi" else 0x32,))
        if b.kind == "mem" and b.text == "hl" and a.kind == "reg" and a.text == "a":
            return bytes((0x2A if mnem == "ldi" else 0x3A,))
        raise bad()

    if mnem == "ldhl":
        if n == 2 and ops[0].kind == "reg" and ops[0].text == "sp" and ops[1].kind == "imm":
            return bytes((0xF8, chk(_s8, val(ops[1].text), "SP offset")))
        raise bad()

    if mnem == "ld":
        if n != 2:
            raise bad()
        a, b = ops
        ra, rb = _r8(a), _r8(b)
        if ra is not None and rb is not None:
            if ra == 6 and rb == 6:
                raise EncodeError("LD [HL],[HL] does not exist (that opcode is HALT)")
            return bytes((0x40 | ra << 3 | rb,))
        if ra is not None and b.kind == "imm":
            return bytes((0x06 | ra << 3, imm8(b)))
        if a.kind == "reg" and a.text in R16 and b.kind == "imm":
            return bytes((0x01 | R16[a.text] << 4,)) + imm16(b)
        a_is_a = a.kind == "reg" and a.text == "a"
        b_is_a = b.kind == "reg" and b.text == "a"
        mem_codes = {"bc": 0x02, "de": 0x12, "hl+": 0x22, "hl-": 0x32}
        if b_is_a and a.kind == "mem" and a.text in mem_codes:
            return bytes((mem_codes[a.text],))
        if a_is_a and b.kind == "mem" and b.text in mem_codes:
            return bytes((mem_codes[b.text] | 0x08,))
        if b_is_a and a.kind == "mem" and a.text == "c":
            return b"\xe2"
        if a_is_a and b.kind == "mem" and b.text == "c":
            return b"\xf2"
        if b_is_a and a.kind == "memimm":
            return b"\xea" + imm16(Operand("imm", a.text, a.source))
        if a_is_a and b.kind == "memimm":
            return b"\xfa" + imm16(Operand("imm", b.text, b.source))
        if a.kind == "memimm" and b.kind == "reg" and b.text == "sp":
            return b"\x08" + imm16(Operand("imm", a.text, a.source))
        if a.kind == "reg" and a.text == "sp" and b.kind == "reg" and b.text == "hl":
            return b"\xf9"
        if a.kind == "reg" and a.text == "hl" and b.kind == "spoff":
            return bytes((0xF8, chk(_s8, val(b.text), "SP offset")))
        raise bad()

    raise EncodeError(f"unknown mnemonic {mnem!r}")


def encode_add16(ops: list[Operand], ev: Eval, strict: bool = True) -> bytes | None:
    """``ADD HL,rr`` and ``ADD SP,e`` (the 16-bit forms of ADD), or None if not one of them."""
    if len(ops) != 2 or ops[0].kind != "reg":
        return None
    if ops[0].text == "hl" and ops[1].kind == "reg" and ops[1].text in R16:
        return bytes((0x09 | R16[ops[1].text] << 4,))
    if ops[0].text == "sp" and ops[1].kind == "imm":
        v = ev(ops[1].text)
        if strict:
            v = _s8(v, "SP offset")
        return bytes((0xE8, v & 0xFF))
    return None
