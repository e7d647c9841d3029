"""The SM83 (DMG Game Boy CPU) instruction set as a table: one row per opcode.

The table drives :mod:`torchrl_dreamer.emulator.codegen`, which writes the emulator kernel from it,
and the tests, which check the kernel's measured cycle counts against it. Each :class:`OpInfo`
holds the mnemonic, operands, length in bytes, M-cycles (taken / not taken for conditional
branches), the flag effects (``"Z N H C"``, each ``-`` unchanged, ``0``/``1`` forced, or the flag
name when computed) and ``group``, the structural decoder that implements regular families
(``ld_r_r``, ``alu_r``, ``cb``) so the kernel stays small.

Example:
    >>> from torchrl_dreamer.emulator.isa import OPCODES, CB_OPCODES
    >>> OPCODES[0xC4].mnemonic, OPCODES[0xC4].operands, OPCODES[0xC4].cycles
    ('CALL', ('NZ', 'a16'), (6, 3))
    >>> len([o for o in OPCODES if o is not None]), len(CB_OPCODES)
    (245, 256)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OpInfo", "OPCODES", "CB_OPCODES", "ILLEGAL_OPCODES", "REG8", "table_text"]

REG8 = ("B", "C", "D", "E", "H", "L", "(HL)", "A")
"""8-bit operand names by the 3-bit register index used in opcodes."""

ILLEGAL_OPCODES = (0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB, 0xEC, 0xED, 0xF4, 0xFC, 0xFD)
"""Unprefixed opcodes that lock up the DMG CPU (0xCB is the prefix, not an instruction)."""


@dataclass(frozen=True)
class OpInfo:
    """One opcode of the SM83.

    Attributes:
        code: the opcode byte (after the 0xCB prefix for ``cb=True`` rows).
        cb: whether this is a CB-prefixed instruction.
        mnemonic: e.g. ``"LD"``.
        operands: e.g. ``("A", "(HL)")``.
        length: bytes including the prefix and immediates.
        cycles: ``(taken, not_taken)`` M-cycles (equal for non-branches).
        flags: 4 characters for Z, N, H, C.
        group: ``""`` or the structural decoder implementing the row.
    """

    code: int
    cb: bool
    mnemonic: str
    operands: tuple[str, ...]
    length: int
    cycles: tuple[int, int]
    flags: str = "----"
    group: str = ""

    @property
    def text(self) -> str:
        """Assembly text, e.g. ``"LD A,(HL)"``."""
        return self.mnemonic + (" " + ",".join(self.operands) if self.operands else "")


def _row(code, mn, ops=(), length=1, cyc=1, cyc_nt=None, flags="----", group=""):
    return OpInfo(code, False, mn, tuple(ops), length, (cyc, cyc if cyc_nt is None else cyc_nt), flags, group)


def _build_unprefixed() -> list[OpInfo | None]:
    t: list[OpInfo | None] = [None] * 256
    rp = ("BC", "DE", "HL", "SP")
    rp2 = ("BC", "DE", "HL", "AF")
    cc = ("NZ", "Z", "NC", "C")
    # 0x00-0x3F: columns
    for k in range(4):
        t[0x01 + 16 * k] = _row(0x01 + 16 * k, "LD", (rp[k], "d16"), 3, 3)
        t[0x03 + 16 * k] = _row(0x03 + 16 * k, "INC", (rp[k],), 1, 2)
        t[0x0B + 16 * k] = _row(0x0B + 16 * k, "DEC", (rp[k],), 1, 2)
        t[0x09 + 16 * k] = _row(0x09 + 16 * k, "ADD", ("HL", rp[k]), 1, 2, flags="-0HC")
    ind = ("(BC)", "(DE)", "(HL+)", "(HL-)")
    for k in range(4):
        t[0x02 + 16 * k] = _row(0x02 + 16 * k, "LD", (ind[k], "A"), 1, 2)
        t[0x0A + 16 * k] = _row(0x0A + 16 * k, "LD", ("A", ind[k]), 1, 2)
    for r in range(8):
        name = REG8[r]
        mem = name == "(HL)"
        t[0x04 + 8 * r] = _row(0x04 + 8 * r, "INC", (name,), 1, 3 if mem else 1, flags="Z0H-")
        t[0x05 + 8 * r] = _row(0x05 + 8 * r, "DEC", (name,), 1, 3 if mem else 1, flags="Z1H-")
        t[0x06 + 8 * r] = _row(0x06 + 8 * r, "LD", (name, "d8"), 2, 3 if mem else 2)
    for code, mn, flags in ((0x07, "RLCA", "000C"), (0x0F, "RRCA", "000C"), (0x17, "RLA", "000C"),
                            (0x1F, "RRA", "000C"), (0x27, "DAA", "Z-0C"), (0x2F, "CPL", "-11-"),
                            (0x37, "SCF", "-001"), (0x3F, "CCF", "-00C")):
        t[code] = _row(code, mn, (), 1, 1, flags=flags)
    t[0x00] = _row(0x00, "NOP")
    t[0x08] = _row(0x08, "LD", ("(a16)", "SP"), 3, 5)
    t[0x10] = _row(0x10, "STOP", ("d8",), 2, 1)
    t[0x18] = _row(0x18, "JR", ("r8",), 2, 3)
    for k in range(4):
        t[0x20 + 8 * k] = _row(0x20 + 8 * k, "JR", (cc[k], "r8"), 2, 3, 2)
    # 0x40-0x7F: LD r,r' and HALT
    for code in range(0x40, 0x80):
        if code == 0x76:
            t[code] = _row(code, "HALT")
            continue
        d, s = REG8[(code >> 3) & 7], REG8[code & 7]
        t[code] = _row(code, "LD", (d, s), 1, 2 if "(HL)" in (d, s) else 1, group="ld_r_r")
    # 0x80-0xBF: ALU A,r
    alu = ("ADD", "ADC", "SUB", "SBC", "AND", "XOR", "OR", "CP")
    alu_flags = ("Z0HC", "Z0HC", "Z1HC", "Z1HC", "Z010", "Z000", "Z000", "Z1HC")
    for code in range(0x80, 0xC0):
        k, s = (code >> 3) & 7, REG8[code & 7]
        t[code] = _row(code, alu[k], ("A", s), 1, 2 if s == "(HL)" else 1, flags=alu_flags[k],
                       group="alu_r")
    # 0xC0-0xFF
    for k in range(4):
        base = 0xC0 + 8 * k
        t[base] = _row(base, "RET", (cc[k],), 1, 5, 2)
        t[base + 2] = _row(base + 2, "JP", (cc[k], "a16"), 3, 4, 3)
        t[base + 4] = _row(base + 4, "CALL", (cc[k], "a16"), 3, 6, 3)
        t[0xC1 + 16 * k] = _row(0xC1 + 16 * k, "POP", (rp2[k],), 1, 3,
                                flags="ZNHC" if k == 3 else "----")
        t[0xC5 + 16 * k] = _row(0xC5 + 16 * k, "PUSH", (rp2[k],), 1, 4)
    for k in range(8):
        t[0xC6 + 8 * k] = _row(0xC6 + 8 * k, alu[k], ("A", "d8"), 2, 2, flags=alu_flags[k])
        t[0xC7 + 8 * k] = _row(0xC7 + 8 * k, "RST", (f"{8 * k:02X}H",), 1, 4)
    t[0xC3] = _row(0xC3, "JP", ("a16",), 3, 4)
    t[0xC9] = _row(0xC9, "RET", (), 1, 4)
    t[0xD9] = _row(0xD9, "RETI", (), 1, 4)
    t[0xCD] = _row(0xCD, "CALL", ("a16",), 3, 6)
    t[0xE0] = _row(0xE0, "LDH", ("(a8)", "A"), 2, 3)
    t[0xF0] = _row(0xF0, "LDH", ("A", "(a8)"), 2, 3)
    t[0xE2] = _row(0xE2, "LD", ("(C)", "A"), 1, 2)
    t[0xF2] = _row(0xF2, "LD", ("A", "(C)"), 1, 2)
    t[0xE8] = _row(0xE8, "ADD", ("SP", "r8"), 2, 4, flags="00HC")
    t[0xF8] = _row(0xF8, "LD", ("HL", "SP+r8"), 2, 3, flags="00HC")
    t[0xE9] = _row(0xE9, "JP", ("HL",), 1, 1)
    t[0xF9] = _row(0xF9, "LD", ("SP", "HL"), 1, 2)
    t[0xEA] = _row(0xEA, "LD", ("(a16)", "A"), 3, 4)
    t[0xFA] = _row(0xFA, "LD", ("A", "(a16)"), 3, 4)
    t[0xCB] = _row(0xCB, "PREFIX", ("CB",), 1, 1, group="cb_prefix")
    t[0xF3] = _row(0xF3, "DI")
    t[0xFB] = _row(0xFB, "EI")
    return t


def _build_cb() -> list[OpInfo]:
    rows = []
    rot = ("RLC", "RRC", "RL", "RR", "SLA", "SRA", "SWAP", "SRL")
    for code in range(256):
        r = REG8[code & 7]
        mem = r == "(HL)"
        k = (code >> 3) & 7
        grp = code >> 6
        if grp == 0:
            mn, ops, cyc = rot[k], (r,), 4 if mem else 2
            flags = "Z000" if k == 6 else "Z00C"
        elif grp == 1:
            mn, ops, cyc, flags = "BIT", (str(k), r), 3 if mem else 2, "Z01-"
        else:
            mn, ops, cyc, flags = ("RES", "SET")[grp - 2], (str(k), r), 4 if mem else 2, "----"
        rows.append(OpInfo(code, True, mn, ops, 2, (cyc, cyc), flags, "cb"))
    return rows


OPCODES: list[OpInfo | None] = _build_unprefixed()
"""Unprefixed opcodes by byte (0xCB is the prefix row); ``None`` for the 11 illegal bytes."""

CB_OPCODES: list[OpInfo] = _build_cb()
"""CB-prefixed opcodes by second byte (all 256 are legal)."""


def table_text() -> str:
    """The whole table as stable text (hashed into the kernel cache key)."""
    lines = []
    for row in [*OPCODES, *CB_OPCODES]:
        if row is not None:
            lines.append(f"{row.cb:d} {row.code:02X} {row.text} {row.length} {row.cycles} "
                         f"{row.flags} {row.group}")
    return "\n".join(lines)
