"""Generate, cache and load the emulator's Warp kernel from the ISA table.

Why generated: Warp compiles a kernel per module and a hand-written 500-opcode interpreter is long
and error-prone; emitting it from :mod:`~torchrl_dreamer.emulator.isa` keeps one source of truth
for lengths, timings and flags. The kernel is one ``while`` loop with *flat* dispatch
(``if op == k: ...; continue`` blocks, never a long if/elif chain: the C++ compiler makes one
jump table of each run of them). Regular families (``LD r,r'``, ``ALU A,r`` and the whole CB page) are decoded
structurally by register index, which keeps the kernel (and its compile time) small.

Only the opcode dispatch is generated. The rest of the module (imports, the compile-time variant
flags, ``gb_peek`` / ``gb_poke``, and ``gb_run``'s register loads and stores, frame loop,
HALT/STOP, interrupt dispatch and opcode fetch) is real Python in
:mod:`~torchrl_dreamer.emulator.kernel_template`: :func:`generate_source` copies it, sets the
variant flags, and puts the dispatch at its ``OPCODE DISPATCH`` line.

Bus accesses: the kernel calls :func:`~torchrl_dreamer.emulator.bus.tick`, ``rd``, ``rd_op``
(the opcode fetch) and ``wr``, Warp functions that take the clock locals (``clk``, ``nxt``, ``dirty``) and the
console memory ``m`` by reference (``wp.ref``, Warp >= 1.19) and are force-inlined. Reads and
writes also take the in-place range bounds by value (kernel locals ``wram_end`` / ``rom_end`` /
``rom0_lo``, empty while an OAM DMA runs); ``bus.cpu_read`` / ``cpu_write`` are the slow paths.
Why by reference: ``docs/decisions/kernel_shape.md``, "Bus accesses as wp.ref functions".
The generator writes ``tick(i, m)`` / ``rd(i, m, addr)`` / ``wr(i, m, addr, v)`` in its
opcode templates; :func:`_bind_bus_locals` appends the locals (and, for reads and writes, the in-place
range bounds) to those calls.

The source is written to ``$TORCHRL_DREAMER_CACHE`` (default ``~/.cache/torchrl_dreamer``) under
a file name keyed by a hash of the ISA table, this generator, the bus / ALU / renderer sources and
the Warp version, so edits invalidate the cache and unchanged trees reuse Warp's compiled binary.

Example:
    >>> from torchrl_dreamer.emulator.codegen import load_kernel_module
    >>> mod = load_kernel_module()          # generated (or cached) and imported; compiled on launch
    >>> callable(mod.gb_run)
    True
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import warp as wp

from torchrl_dreamer.emulator import isa

__all__ = ["generate_source", "kernel_hash", "load_kernel_module", "cache_dir"]

_R8 = {"B": "(bc >> 8)", "C": "(bc & 0xFF)", "D": "(de >> 8)", "E": "(de & 0xFF)", "H": "(hl >> 8)",
       "L": "(hl & 0xFF)", "A": "a"}
"""Read expressions of the 8-bit registers: B C D E H L live in the kernel as the pairs
``bc`` / ``de`` / ``hl``."""
_W8 = {"B": "bc = (bc & 0xFF) | ({} << 8)", "C": "bc = (bc & 0xFF00) | {}",
       "D": "de = (de & 0xFF) | ({} << 8)", "E": "de = (de & 0xFF00) | {}",
       "H": "hl = (hl & 0xFF) | ({} << 8)", "L": "hl = (hl & 0xFF00) | {}", "A": "a = {}"}
"""Assignments of an 8-bit value (0-255) to each register."""
_RP = {"BC": "bc", "DE": "de", "HL": "hl"}
_COND = {
    "NZ": "(f & 0x80) == 0",
    "Z": "(f & 0x80) != 0",
    "NC": "(f & 0x10) == 0",
    "C": "(f & 0x10) != 0",
}
_ALU = ("ADD", "ADC", "SUB", "SBC", "AND", "XOR", "OR", "CP")


def cache_dir() -> Path:
    """Directory holding generated kernel sources (``$TORCHRL_DREAMER_CACHE`` overrides)."""
    root = os.environ.get("TORCHRL_DREAMER_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "torchrl_dreamer"
    return base / "kernels"


# ------------------------------------------------------------------------------ code fragments
# Immediates are read right after the opcode (M-cycles 2 and 3), into ``n_`` / ``nn_``, by the
# first lines of each opcode's block (``_fetch_lines``), so opcode bodies only use them.
def operand_lengths() -> list[int]:
    """Bytes fetched per opcode by its block's immediate reads (CB counts its 2nd byte).

    STOP's padding byte is skipped by its own code, without a bus read.
    """
    out = []
    for code, row in enumerate(isa.OPCODES):
        if row is None or code == 0x10:
            out.append(1)
        elif code == 0xCB:
            out.append(2)
        else:
            out.append(row.length)
    return out


def _get16(name: str) -> str:
    if name == "SP":
        return "sp"
    if name == "AF":
        return "((a << 8) | f)"
    return _RP[name]


def _set16(name: str, expr: str) -> list[str]:
    if name == "SP":
        return [f"sp = ({expr}) & 0xFFFF"]
    if name == "AF":
        return [f"v16_ = ({expr}) & 0xFFFF", "a = v16_ >> 8", "f = v16_ & 0xF0"]
    return [f"{_RP[name]} = ({expr}) & 0xFFFF"]


def _push(expr: str) -> list[str]:
    return [
        f"pv_ = {expr}",
        "sp = (sp - 1) & 0xFFFF",
        "wr(i, m, sp, pv_ >> 8)",
        "sp = (sp - 1) & 0xFFFF",
        "wr(i, m, sp, pv_ & 0xFF)",
    ]


def _write8_by_index(idx: str, expr: str) -> list[str]:
    """An ``if`` / ``elif`` chain writing ``expr`` to the register whose 3-bit opcode index
    (:data:`~torchrl_dreamer.emulator.isa.REG8` order) is the kernel value ``idx``."""
    out: list[str] = []
    for k, name in enumerate(isa.REG8):
        head = "else:" if k == len(isa.REG8) - 1 else f"{'if' if k == 0 else 'elif'} {idx} == {k}:"
        out += [head, *_indent(_write8(name, expr), 4)]
    return out


def _expand_macros(template: str) -> list[str]:
    """Template lines, each ``PUSH(expr)`` line expanded into :func:`_push`'s lines, each
    ``FETCH(n)`` line into :func:`_fetch_lines`' and each ``WRITE8(idx, expr)`` line into
    :func:`_write8_by_index`'s (same indent)."""
    out: list[str] = []
    for line in template.splitlines():
        body = line.lstrip()
        pad = line[: len(line) - len(body)]
        if body.startswith("PUSH(") and body.endswith(")"):
            out += [pad + x for x in _push(body[len("PUSH("):-1])]
        elif body.startswith("FETCH(") and body.endswith(")"):
            out += [pad + x for x in _fetch_lines(int(body[len("FETCH("):-1]))]
        elif body.startswith("WRITE8(") and body.endswith(")"):
            idx, expr = (x.strip() for x in body[len("WRITE8("):-1].split(","))
            out += [pad + x for x in _write8_by_index(idx, expr)]
        else:
            out.append(line)
    return out


def _fetch_lines(length: int) -> list[str]:
    """The immediate reads of an instruction of ``length`` bytes (:func:`operand_lengths`):
    ``n_`` the first byte, ``nn_`` the 8- or 16-bit value, each read a bus M-cycle at PC.
    Emitted at the top of the opcode's own block rather than once before the dispatch: a
    shared fetch branched on a table lookup of the opcode's length, which put a load and two
    data-dependent branches between the opcode fetch and the dispatch (the hottest spot of a
    ``perf`` profile of 2048)."""
    out: list[str] = []
    if length >= 2:
        out += ["n_ = rd_pc(i, m, pc)", "pc = (pc + 1) & 0xFFFF", "nn_ = n_"]
    if length == 3:
        out += ["hi_ = rd_pc(i, m, pc)", "pc = (pc + 1) & 0xFFFF", "nn_ = (hi_ << 8) | n_"]
    return out


def _pop(var: str) -> list[str]:
    return [
        "lo_ = rd_idu(i, m, sp)",
        "sp = (sp + 1) & 0xFFFF",
        "hi_ = rd(i, m, sp)",
        "sp = (sp + 1) & 0xFFFF",
        f"{var} = (hi_ << 8) | lo_",
    ]


def _read8(name: str, var: str) -> list[str]:
    if name == "(HL)":
        return [f"{var} = rd(i, m, hl)"]
    return [f"{var} = {_R8[name]}"]


def _write8(name: str, expr: str) -> list[str]:
    if name == "(HL)":
        return [f"wr(i, m, hl, {expr})"]
    return [_W8[name].format(expr if expr.isidentifier() else f"({expr})")]


def _emit(op: isa.OpInfo) -> list[str]:
    """Kernel lines for one unprefixed opcode outside the structural groups (``LD r,r'``,
    ``ALU A,r``, the CB page) and the stack template (``_STACK``: RST, PUSH, POP, CALL, RET cc)."""
    mn, ops = op.mnemonic, op.operands
    if mn == "NOP":
        return ["pass"]
    if mn == "LD":
        dst, src = ops
        if src == "d16":
            return [*_set16(dst, "nn_")]
        if dst in ("(BC)", "(DE)"):
            return [f"wr(i, m, {_get16(dst[1:3])}, a)"]
        if src in ("(BC)", "(DE)"):
            return [f"a = rd(i, m, {_get16(src[1:3])})"]
        if dst in ("(HL+)", "(HL-)"):
            step = "+ 1" if dst == "(HL+)" else "- 1"
            return ["wr(i, m, hl, a)", *_set16("HL", f"hl {step}")]
        if src in ("(HL+)", "(HL-)"):
            step = "+ 1" if src == "(HL+)" else "- 1"
            return ["a = rd_idu(i, m, hl)", *_set16("HL", f"hl {step}")]
        if src == "d8":
            return _write8(dst, "n_")
        if dst == "(a16)" and src == "SP":
            return ["wr(i, m, nn_, sp & 0xFF)", "wr(i, m, (nn_ + 1) & 0xFFFF, sp >> 8)"]
        if dst == "(a16)":
            return ["wr(i, m, nn_, a)"]
        if src == "(a16)":
            return ["a = rd(i, m, nn_)"]
        if dst == "(C)":
            return ["wr(i, m, 0xFF00 | (bc & 0xFF), a)"]
        if src == "(C)":
            return ["a = rd(i, m, 0xFF00 | (bc & 0xFF))"]
        if dst == "HL" and src == "SP+r8":
            return ["tick(i, m)", "r_ = add_sp(sp, n_)", "f = r_ >> 16",
                    *_set16("HL", "r_ & 0xFFFF")]
        if dst == "SP" and src == "HL":
            return ["tick(i, m)", "sp = hl"]
    if mn == "LDH":
        if ops[0] == "(a8)":
            return ["wr(i, m, 0xFF00 | n_, a)"]
        return ["a = rd(i, m, 0xFF00 | n_)"]
    if mn in ("INC", "DEC") and ops[0] in ("BC", "DE", "HL", "SP"):
        step = "+ 1" if mn == "INC" else "- 1"
        return [f"tick_idu(i, m, {_get16(ops[0])})", *_set16(ops[0], f"{_get16(ops[0])} {step}")]
    if mn in ("INC", "DEC"):
        fn = "inc8" if mn == "INC" else "dec8"
        return [*_read8(ops[0], "v_"), f"r_ = {fn}(v_, f)", "f = r_ >> 8",
                *_write8(ops[0], "r_ & 0xFF")]
    if mn == "ADD" and ops[0] == "HL":
        return ["tick(i, m)", f"r_ = add_hl(hl, {_get16(ops[1])}, f)", "f = r_ >> 16",
                *_set16("HL", "r_ & 0xFFFF")]
    if mn == "ADD" and ops[0] == "SP":
        return ["tick(i, m)", "tick(i, m)", "r_ = add_sp(sp, n_)", "f = r_ >> 16",
                "sp = r_ & 0xFFFF"]
    if mn in _ALU and ops[1] == "d8":
        return [f"r_ = alu8({_ALU.index(mn)}, a, n_, f)", "a = r_ & 0xFF",
                "f = r_ >> 8"]
    if mn in ("RLCA", "RRCA", "RLA", "RRA"):
        k = ("RLCA", "RRCA", "RLA", "RRA").index(mn)
        return [f"r_ = rot8({k}, a, f)", "a = r_ & 0xFF", "f = (r_ >> 8) & 0x70"]
    if mn == "DAA":
        return ["r_ = daa(a, f)", "a = r_ & 0xFF", "f = r_ >> 8"]
    if mn == "CPL":
        return ["a = a ^ 0xFF", "f = f | 0x60"]
    if mn == "SCF":
        return ["f = (f & 0x80) | 0x10"]
    if mn == "CCF":
        return ["f = (f & 0x90) ^ 0x10"]
    if mn == "JR":
        body = ["tick(i, m)", "pc = (pc + n_ - ((n_ >> 7) << 8)) & 0xFFFF"]
        if len(ops) == 1:
            return body
        return [f"if {_COND[ops[0]]}:", *["    " + s for s in body]]
    if mn == "JP":
        if ops == ("HL",):
            return ["pc = hl"]
        if len(ops) == 1:
            return ["tick(i, m)", "pc = nn_"]
        return [f"if {_COND[ops[0]]}:", "    tick(i, m)", "    pc = nn_"]
    if mn == "RET" and not ops:
        return [*_pop("nn_"), "tick(i, m)", "pc = nn_"]
    if mn == "RETI":
        return [*_pop("nn_"), "tick(i, m)", "pc = nn_", "m.st[i, S_IME] = 1", "m.st[i, S_EI_PEND] = 0",
                "dirty = int(1)  # an IRQ still pending is taken after RETI"]
    if mn == "DI":
        return ["m.st[i, S_IME] = 0", "m.st[i, S_EI_PEND] = 0"]
    if mn == "EI":
        # IME is set after the next instruction; an EI while one is pending does not push that
        # back (EI; EI takes an interrupt after the second EI: mooneye ei_sequence)
        return ["if m.st[i, S_IME] == 0 and m.st[i, S_EI_PEND] == 0:", "    m.st[i, S_EI_PEND] = 2",
                "    dirty = int(1)  # the countdown runs in the dirty block"]
    if mn == "HALT":
        return [
            "pend_ = pending_irqs(i, m)",
            "if pend_ != 0 and m.st[i, S_IME] == 0 and m.st[i, S_EI_PEND] != 0:",
            "    pc = (pc - 1) & 0xFFFF  # EI; HALT with an IRQ pending: the handler returns to HALT",
            "elif pend_ != 0 and m.st[i, S_IME] == 0:",
            "    pc = pc + HALT_BUG_PC  # the next opcode byte is read twice",
            "elif pend_ == 0:",
            "    m.st[i, S_HALTED] = 1",
            "    dirty = int(1)  # halted time runs in the dirty block",
        ]
    if mn == "STOP":
        return [
            "pc = (pc + 1) & 0xFFFF",
            "m.st[i, S_CLK] = clk",
            "poke(i, m, 0xFF00 | R_DIV, 0)",
            "sw_ = speed_switch(i, m)  # a Color with KEY1 armed switches speed instead",
            "clk = m.st[i, S_CLK]",
            "nxt = m.st[i, S_NEXT]",
            "dirty = int(1)",
            "if m.st[i, S_JOY] == 0 and sw_ == 0:",
            "    m.st[i, S_STOPPED] = stop_kind(i, m)  # a Color in mode 3 keeps its picture",
            "    m.st[i, S_HALTED] = 1",
        ]
    raise NotImplementedError(f"codegen has no emitter for {op.text}")


# ------------------------------------------------------------------------------ structural parts
_LD_R_R = """\
# LD r,r' (0x40-0x7F except HALT): decoded by register index
src_ = op & 7
v_ = int(0)
if src_ == 6:
    v_ = rd(i, m, hl)
else:
    v_ = getr16(src_, bc, de, hl, a)
dst_ = (op >> 3) & 7
WRITE8(dst_, v_)
continue"""

_ALU_R = """\
# ALU A,r (0x80-0xBF): decoded by operation and register index
src_ = op & 7
v_ = int(0)
if src_ == 6:
    v_ = rd(i, m, hl)
else:
    v_ = getr16(src_, bc, de, hl, a)
r_ = alu8((op >> 3) & 7, a, v_, f)
a = r_ & 0xFF
f = r_ >> 8
continue"""

_CB = """\
# CB page: register index (bits 0-2), bit/operation (3-5), group (6-7)
cb_ = n_
reg_ = cb_ & 7
grp_ = cb_ >> 6
k_ = (cb_ >> 3) & 7
v_ = int(0)
if reg_ == 6:
    v_ = rd(i, m, hl)
else:
    v_ = getr16(reg_, bc, de, hl, a)
if grp_ == 1:
    f = (f & 0x10) | 0x20
    if ((v_ >> k_) & 1) == 0:
        f = f | 0x80
    continue
if grp_ == 0:
    r_ = rot8(k_, v_, f)
    v_ = r_ & 0xFF
    f = r_ >> 8
elif grp_ == 2:
    v_ = v_ & ((1 << k_) ^ 0xFF)
else:
    v_ = v_ | (1 << k_)
WRITE8(reg_, v_)
continue"""

_STACK = """\
if (op & 0xC7) == 0xC7:
    # RST n: decoded by vector bits
    tick_idu(i, m, sp)
    PUSH(pc)
    pc = op & 0x38
    continue
if (op & 0xCF) == 0xC5:
    # PUSH rr (BC DE HL AF) by register-pair index
    tick_idu(i, m, sp)
    PUSH(pair16((op >> 4) & 3, bc, de, hl, a, f))
    continue
if (op & 0xCF) == 0xC1:
    # POP rr (BC DE HL AF)
    lo_ = rd_idu(i, m, sp)
    sp = (sp + 1) & 0xFFFF
    hi_ = rd(i, m, sp)
    sp = (sp + 1) & 0xFFFF
    k_ = (op >> 4) & 3
    if k_ == 0:
        bc = (hi_ << 8) | lo_
    elif k_ == 1:
        de = (hi_ << 8) | lo_
    elif k_ == 2:
        hl = (hi_ << 8) | lo_
    else:
        a = hi_
        f = lo_ & 0xF0
    continue
if (op & 0xE7) == 0xC4 or op == 0xCD:
    # CALL cc,nn / CALL nn
    FETCH(3)
    if op == 0xCD or cond_ok((op >> 3) & 3, f):
        tick_idu(i, m, sp)
        PUSH(pc)
        pc = nn_
    continue
if (op & 0xE7) == 0xC0:
    # RET cc
    tick(i, m)
    if cond_ok((op >> 3) & 3, f):
        lo_ = rd_idu(i, m, sp)
        sp = (sp + 1) & 0xFFFF
        hi_ = rd(i, m, sp)
        sp = (sp + 1) & 0xFFFF
        tick(i, m)
        pc = (hi_ << 8) | lo_
    continue"""

_STACK_CODES = {0xC7 + 8 * k for k in range(8)} | {0xC5, 0xD5, 0xE5, 0xF5, 0xC1, 0xD1, 0xE1, 0xF1}
_STACK_CODES |= {0xC4, 0xCC, 0xD4, 0xDC, 0xCD, 0xC0, 0xC8, 0xD0, 0xD8}

TEMPLATE_PATH = Path(__file__).resolve().with_name("kernel_template.py")
"""The kernel module's fixed part as real Python (everything but the opcode dispatch)."""
_TEMPLATE_LINE = "# ----- TEMPLATE: the generated module is the text below this line -----\n"
_DISPATCH_LINE = "        # ----- OPCODE DISPATCH: generated from isa.py by codegen.generate_source -----\n"


def _template(key: str, opt_level: int | None, flags: dict[str, bool],
              cpu_flags: str) -> tuple[str, str]:
    """The text of :data:`TEMPLATE_PATH` below its ``TEMPLATE`` line with the cache key, the
    optimisation level, the CPU compiler flags and the variant flags set, split at the
    ``OPCODE DISPATCH`` line: the source before and after the generated dispatch."""
    text = TEMPLATE_PATH.read_text()
    for marker in (_TEMPLATE_LINE, _DISPATCH_LINE):
        if text.count(marker) != 1:
            raise RuntimeError(f"{TEMPLATE_PATH} must hold the line {marker.strip()!r} exactly once "
                               "(the generator splits the kernel template there); restore it")
    lines = []
    seen = set()
    flags_set = False  # the cpu_compiler_flags line was found (and set)
    for line in text.split(_TEMPLATE_LINE, 1)[1].split("\n"):
        name, _, rest = line.partition(" = ")
        if name in flags:  # a module-level variant flag: `STEP = False  # comment`
            comment = rest.partition("  #")[2]
            line = f"{name} = {flags[name]}" + (f"  #{comment}" if comment else "")
            seen.add(name)
        elif line == "# key:":
            line = f"# key: {key}"
        elif line.startswith("wp.set_module_options("):
            line = re.sub(r'("optimization_level": )[^},]+', rf"\g<1>{opt_level}", line)
        elif line.lstrip().startswith('"cpu_compiler_flags": '):
            line = re.sub(r'("cpu_compiler_flags": )"[^"]*"',
                          lambda mm: mm.group(1) + json.dumps(cpu_flags), line)
            flags_set = True
        lines.append(line)
    if not flags_set:
        raise RuntimeError(f"{TEMPLATE_PATH}'s wp.set_module_options(...) must set "
                           '"cpu_compiler_flags" on a line of its own (the generator sets the '
                           "flags there); restore it")
    if seen != set(flags):
        raise RuntimeError(f"{TEMPLATE_PATH} lacks the module-level variant flag(s) "
                           f"{sorted(set(flags) - seen)}; each must be a line `NAME = False`")
    head, tail = "\n".join(lines).split(_DISPATCH_LINE, 1)
    return head, tail


# Idle-loop fast-forward (``IDLE_SKIP``), emitted after the short backward branches that close
# loops (JR / JR cc back by at most 26 bytes, JP / JP cc back by at most 27): the loop is decoded
# and, when side-effect free, skipped by whole iterations up to the next event by
# :func:`~torchrl_dreamer.emulator.idle.idle_loop` (out of line: the common path pays one
# comparison per taken branch). It hands registers and clock back in the state row.
_IDLE_RELOAD = [
    "if sk_ < 0:",
    "    nol_ = br_  # not a known loop: do not ask again for this branch (a hint, never a skip)",
    "if sk_ > 0:",
    "    a = m.st[i, S_A]",
    "    f = m.st[i, S_F]",
    "    bc = (m.st[i, S_B] << 8) | m.st[i, S_C]",
    "    de = (m.st[i, S_D] << 8) | m.st[i, S_E]",
    "    hl = (m.st[i, S_H] << 8) | m.st[i, S_L]",
    "    clk = m.st[i, S_CLK]",
    "    pc = m.st[i, S_PC]  # the loop head, or past the loop when its last iteration ran there",
    "    dirty = int(1)  # an OAM DMA may have ended in the skipped time: re-read its bounds",
]
_IDLE_CALL = ("sk_ = idle_loop(i, m, pc, br_, op, a, f, bc >> 8, bc & 0xFF, de >> 8, de & 0xFF, "
                "hl >> 8, hl & 0xFF, clk, nxt, m.st[i, S_IME])")
_JP_LOOP = (0xC2, 0xC3, 0xCA, 0xD2, 0xDA)


def _idle_skip_lines(code: int) -> tuple[list[str], list[str]]:
    """(prefix, tail) lines around a JR / JR cc / JP / JP cc body: a taken backward branch of a
    short loop calls the fast-forward. Not when the branch itself synced (``dirty``): the frame
    may have ended or an IRQ been requested there, which the loop head must see first. Not while
    an OAM DMA runs (``wram_end`` shrunk, as of the last ``dirty``) unless the loop runs from
    HRAM: ``idle_loop`` skips only an HRAM countdown or spin then (the usual DMA wait loop) and
    would decline any other loop. Both tests only ever leave out a skip."""
    if code in _JP_LOOP:
        test = ("pc < pj_ and pj_ - pc <= 27 and dirty == 0"
                " and (wram_end == 0xE000 or pc >= 0xFF80)")  # taken, backward
        br, prefix = "pj_ - 3", ["pj_ = pc"]
    else:
        taken = "" if code == 0x18 else f" and {_COND[isa.OPCODES[code].operands[0]]}"
        test = (f"n_ >= 0xE6{taken} and dirty == 0"
                " and (wram_end == 0xE000 or pc >= 0xFF80)")
        br, prefix = "(pc + 254 - n_) & 0xFFFF", []
    # the rejected-loop hint is keyed by the closing branch, not the head: an unknown outer
    # loop back to a poll's head (`w: ldh a,(LY); cp n; jr nz,w; ...; jr w`) must not switch
    # off the poll's fast-forward
    call = ["m.st[i, S_CLK] = clk", _IDLE_CALL, *_IDLE_RELOAD]
    body = [f"if {test}:", *_indent([f"br_ = {br}", "if br_ != nol_:",
                                     *_indent(["if maybe_loop(m, heads, pc, rom0, rom1):",
                                               *_indent(call, 4)], 4)], 4)]
    return (["if wp.static(IDLE_SKIP):", *_indent(prefix, 4)] if prefix else [],
            ["if wp.static(IDLE_SKIP):", *_indent(body, 4)])


def _indent(lines: list[str], n: int) -> list[str]:
    pad = " " * n
    return [pad + s if s else s for s in lines]


_BUS_LOCALS = {
    "tick": "clk, nxt, dirty",
    "tick_idu": "clk, nxt, dirty",
    "wr": "clk, nxt, dirty, wram_end, vram_end",
    "rd": "clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end",
    "rd_op": "clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end",
    "rd_pc": "clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end",
    "rd_idu": "clk, nxt, dirty, rom0, rom1, rom0_lo, wram_end, rom_end",
}


def _bind_bus_locals(lines: list[str]) -> list[str]:
    """Complete the generator's bus shorthand in the kernel body: ``tick(i, m)``,
    ``tick_idu(i, m, addr)``, ``x = rd|rd_op|rd_idu(i, m, addr)`` and ``wr(i, m, addr, v)``
    become calls of the :mod:`~torchrl_dreamer.emulator.bus` functions with the kernel's clock
    locals appended (``_BUS_LOCALS``), taken by reference, and for reads and writes the ROM
    mapping and the in-place range bounds (``wram_end`` / ``rom_end`` / ``rom0_lo``), by value
    (see the module docstring)."""
    out: list[str] = []
    for line in lines:
        call = line.lstrip().split(" = ", 1)[-1]
        name = call.split("(", 1)[0]
        if name in _BUS_LOCALS and call.startswith(name + "(i, m") and call.endswith(")"):
            line = line[:-1] + f", {_BUS_LOCALS[name]})"
        out.append(line)
    return out


_JR_LOOP = (0x18, 0x20, 0x28, 0x30, 0x38)


CPU_OPT_LEVEL = 3
"""C++ optimisation level of the CPU kernel module (why -O3: ``docs/decisions/kernel_shape.md``)."""

CPU_COMPILER_FLAGS = "-march=native -mllvm -align-all-functions=6"
"""C++ compiler flags of the kernel module's CPU build (Warp's ``cpu_compiler_flags`` module
option): the host's instruction set, without the inlining thresholds Warp adds by default
(``-inline-threshold=9000``, ``-inline-cold-callsite-threshold=3000``), with which the games
ran 4-5 % slower, and every function on a 64-byte boundary, so that the kernel's hot loop
keeps its place in the cache lines whatever the size of the code before it (an edit elsewhere
moved the games by 2-4 % either way) (``docs/decisions/kernel_shape.md``, "CPU compiler
flags").
``TORCHRL_DREAMER_CPU_FLAGS`` overrides; the flags are part of the generated source, so of the
cache key."""

STEP_OPT_LEVEL = 1
"""C++ optimisation level of the CPU stepping variant (``step=True``): it runs a few thousand
instructions, so compile time is what counts; not -O0, whose Warp 1.19 build of this module
crashes (``docs/emulator.md``, "Kernel design")."""


def generate_source(key: str = "", opt_level: int | None = CPU_OPT_LEVEL, trace: bool = False,
                    step: bool = False, idle_skip: bool = True, count: bool = False,
                    cpu_flags: str = CPU_COMPILER_FLAGS) -> str:
    """Python source of the kernel module, generated from :mod:`~torchrl_dreamer.emulator.isa`.

    ``opt_level`` is the C++/CUDA optimisation level of the module (``None``: Warp's default),
    ``cpu_flags`` the C++ compiler flags of its CPU build (the CUDA build does not read them).
    The three variants are compile-time flags of the module (``STEP``, ``TRACE``, ``IDLE_SKIP``)
    read with ``if wp.static(...)``, so a variant's code is not even compiled into the others:

    - ``step=True``: the instruction-stepping variant used by the lockstep oracle tests: the
      kernel returns after ``max_steps`` (its last argument) instructions (an interrupt
      dispatch is one step; halted time is not).
    - ``trace=True`` (debugging only) logs ``pc, op, rom bank`` of every instruction into a
      5760-entry ring in the framebuffer (launch with ``pack=0`` so nothing overwrites it).
    - ``idle_skip`` (default on; always off in the step, trace and count variants, whose
      per-instruction counts it would change) fast-forwards side-effect-free waiting loops
      (RAM / JOYP / LY / STAT polls, countdown delay loops, ``JR @`` spins: see
      :mod:`~torchrl_dreamer.emulator.idle`) by whole iterations up to the next event or change
      of the polled value: registers, memory, timers, PPU and frames are bit-identical to
      running the loop (``S_CYCLES`` counts the skipped instructions).
    - ``count=True`` (benchmarks) adds every executed instruction to ``S_CYCLES`` (no skips):
      with the identical default run's skipped count it gives executed vs skipped per frame.

    Example:
        >>> src = generate_source()
        >>> "def gb_run(" in src and "STEP = False" in src
        True
    """
    count = count and not trace
    idle_skip = idle_skip and not step and not trace and not count
    flags = {"STEP": step, "TRACE": trace, "IDLE_SKIP": idle_skip, "COUNT": count}
    head, foot = _template(key, opt_level, flags, cpu_flags)
    body: list[str] = []
    lengths = operand_lengths()
    groups = {"ld_r_r": _LD_R_R, "alu_r": _ALU_R}
    # quarter 0 (0x00-0x3F) and 3 (0xC0-0xFF) are emitted opcode by opcode, each quarter as one
    # run of `if op == k` blocks, 1 and 2 structurally (why: docs/decisions/kernel_shape.md)
    body.append("if op < 0x40:")
    for code in range(0x40):
        body += _indent([f"if op == 0x{code:02X}:  # {isa.OPCODES[code].text}"], 4)
        pre, tail = _idle_skip_lines(code) if code in _JR_LOOP else ([], [])
        fetch = _fetch_lines(lengths[code])
        body += _indent([*fetch, *pre, *_emit(isa.OPCODES[code]), *tail, "continue"], 8)
    body.append("if op < 0xC0:")
    body += _indent(["if op == 0x76:  # HALT", *_indent([*_emit(isa.OPCODES[0x76]), "continue"], 4)], 4)
    body += _indent(["if op < 0x80:", *_indent(_expand_macros(groups["ld_r_r"]), 4)], 4)
    body += _indent(groups["alu_r"].splitlines(), 4)
    body += _expand_macros(_STACK)
    for code in range(0xC0, 0x100):
        row = isa.OPCODES[code]
        if code in _STACK_CODES:
            continue
        if code == 0xCB:
            body += [f"if op == 0x{code:02X}:  # CB prefix",
                     *_indent([*_fetch_lines(lengths[code]), *_expand_macros(_CB)], 4)]
        elif row is not None:
            pre, tail = _idle_skip_lines(code) if code in _JP_LOOP else ([], [])
            body += [f"if op == 0x{code:02X}:  # {row.text}"]
            body += _indent([*_fetch_lines(lengths[code]), *pre, *_emit(row), *tail, "continue"], 4)
    body += ["# illegal opcode: the DMG locks up", "m.st[i, S_LOCKED] = 1", "break"]
    # complete the generator's bus shorthand (the template's fixed part is written in full)
    body = _bind_bus_locals(_indent(body, 8))
    # sanity: structural groups cover exactly their rows
    for code in range(0x40, 0xC0):
        row = isa.OPCODES[code]
        assert row is not None and (row.group in groups or code == 0x76)
        assert lengths[code] == 1  # the structural families fetch no immediates
    assert all(lengths[c] == (3 if isa.OPCODES[c].mnemonic == "CALL" else 1) for c in _STACK_CODES)
    return head + "\n" + "\n".join(body) + "\n" + foot + "\n"


# Host-side modules the kernel never imports: editing them must not invalidate compiled kernels.
_HOST_ONLY = {"__init__.py", "codegen.py", "gameboy.py", "state.py", "pyboy_state.py", "reset.py",
              "cartridge.py", "packed2.py", "isa.py", "model.py", "color_obs.py",
              "kernel_template.py"}  # the template reaches the key through the generated source


def _dep_sources() -> str:
    """Sources of every emulator module a kernel may import (all but the host-side ones)."""
    here = Path(__file__).resolve().parent
    paths = sorted(here.rglob("*.py"))  # subpackages too (mappers/)
    return "\n".join(p.read_text() for p in paths if p.relative_to(here).as_posix() not in _HOST_ONLY)


def kernel_hash(opt_level: int | None = CPU_OPT_LEVEL, step: bool = False, idle_skip: bool = True,
                count: bool = False, cpu_flags: str = CPU_COMPILER_FLAGS) -> str:
    """Cache key: hash of the generated source (so of the ISA table and this generator), the
    hardware-block sources it imports, the optimisation level and the Warp version.

    Hashing the *generated* text (not this file on disk) keeps key and content consistent even
    in a long-lived process whose imported generator differs from the file on disk.
    """
    h = hashlib.sha256()
    h.update(generate_source("", opt_level, step=step, idle_skip=idle_skip, count=count,
                             cpu_flags=cpu_flags).encode())
    h.update(_dep_sources().encode())
    h.update(wp.config.version.encode())
    return h.hexdigest()[:16]


_LOADED: dict[tuple, ModuleType] = {}


def load_kernel_module(device: str = "cpu", step: bool = False,
                       idle_skip: bool = True, count: bool = False) -> ModuleType:
    """Generate (if not cached), import and return the kernel module (``.gb_run`` is the kernel).

    For the CPU device the module is built at :data:`CPU_OPT_LEVEL` (``TORCHRL_DREAMER_CPU_OPT``
    overrides the level) with :data:`CPU_COMPILER_FLAGS` (``TORCHRL_DREAMER_CPU_FLAGS``
    overrides them).
    CUDA devices get a separate module at Warp's default level.
    ``step=True`` loads the instruction-stepping debug variant (see :func:`generate_source`),
    built at :data:`STEP_OPT_LEVEL` on CPU.
    ``idle_skip=False`` loads the kernel without the idle-loop fast-forward (for comparisons);
    ``count=True`` the instruction-counting benchmark variant (no fast-forward).

    A process keeps the first module it loads for each variant, even if the package's sources
    change on disk meanwhile (a training run whose final evaluation builds a new env while the
    code it was started with is being edited): a module generated from the new sources would
    import functions the process does not have.
    """
    cpu = str(device).startswith("cpu")
    opt = int(os.environ.get("TORCHRL_DREAMER_CPU_OPT", str(CPU_OPT_LEVEL))) if cpu else None
    if step and cpu:
        opt = STEP_OPT_LEVEL
    flags = os.environ.get("TORCHRL_DREAMER_CPU_FLAGS", CPU_COMPILER_FLAGS) if cpu else CPU_COMPILER_FLAGS
    idle_skip = idle_skip and not step and not count
    options = (cpu, opt, step, idle_skip, count, flags)
    if options in _LOADED:
        return _LOADED[options]
    key = kernel_hash(opt, step, idle_skip, count, flags) + ("c" if cpu else "g") + ("s" if step else "")
    key += ("" if idle_skip else "n") + ("k" if count else "")
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"gb_kernel_{key}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(generate_source(key, opt, step=step, idle_skip=idle_skip, count=count,
                                       cpu_flags=flags))
        os.replace(tmp, path)
    name = f"torchrl_dreamer_gb_kernel_{key}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot import generated kernel {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    _LOADED[options] = mod
    return mod


GOLDEN_PATH = Path(__file__).resolve().parents[2] / "test" / "golden" / "gb_kernel.py"
"""The committed copy of the default generated kernel (``generate_source()``), checked by the
tests so that every generator change shows up in review as a change of this file."""


def main(argv: list[str] | None = None) -> int:
    """``python -m torchrl_dreamer.emulator.codegen [--write | --check] [PATH]``.

    Prints the default kernel source, or writes it to ``PATH`` (default :data:`GOLDEN_PATH`),
    or checks that ``PATH`` holds exactly the current source (exit status 1 if not).
    """
    import argparse

    ap = argparse.ArgumentParser(prog="python -m torchrl_dreamer.emulator.codegen",
                                 description=main.__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the source to PATH")
    mode.add_argument("--check", action="store_true", help="exit 1 unless PATH is up to date")
    ap.add_argument("path", nargs="?", type=Path, default=GOLDEN_PATH)
    args = ap.parse_args(argv)
    src = generate_source()
    if args.write:
        args.path.parent.mkdir(parents=True, exist_ok=True)
        args.path.write_text(src)
        print(f"wrote {args.path}")
        return 0
    if args.check:
        ok = args.path.is_file() and args.path.read_text() == src
        print(f"{args.path}: {'up to date' if ok else 'STALE: run with --write'}")
        return 0 if ok else 1
    sys.stdout.write(src)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
