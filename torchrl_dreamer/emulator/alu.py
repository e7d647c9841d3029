"""SM83 arithmetic as small Warp functions returning packed ``value | flags << 8`` ints.

Warp functions cannot assign the caller's locals, so each helper returns the new value and the
new F register packed in one int (``flags << 8`` for 8-bit results, ``<< 16`` for 16-bit ones).
Flag bits: Z 0x80, N 0x40, H 0x20, C 0x10.
"""

from __future__ import annotations

import warp as wp

__all__ = ["add_hl", "add_sp", "alu8", "cond_ok", "daa", "dec8", "inc8", "rot8"]


@wp.func
def alu8(k: int, a: int, v: int, f: int) -> int:
    """ALU op ``k`` (ADD ADC SUB SBC AND XOR OR CP) of A and ``v``; returns ``a | f << 8``."""
    cy = (f >> 4) & 1
    r = 0
    nf = 0
    if k == 0 or k == 1:
        cin = 0
        if k == 1:
            cin = cy
        r = a + v + cin
        if ((a & 0xF) + (v & 0xF) + cin) > 0xF:
            nf = nf | 0x20
        if r > 0xFF:
            nf = nf | 0x10
        r = r & 0xFF
        a = r
    elif k == 2 or k == 3 or k == 7:
        cin = 0
        if k == 3:
            cin = cy
        r = a - v - cin
        nf = 0x40
        if ((a & 0xF) - (v & 0xF) - cin) < 0:
            nf = nf | 0x20
        if r < 0:
            nf = nf | 0x10
        r = r & 0xFF
        if k != 7:
            a = r
    elif k == 4:
        a = a & v
        r = a
        nf = 0x20
    elif k == 5:
        a = a ^ v
        r = a
    else:
        a = a | v
        r = a
    if r == 0:
        nf = nf | 0x80
    return a | (nf << 8)


@wp.func
def inc8(v: int, f: int) -> int:
    """INC r: returns ``v+1 | f << 8`` (C unchanged)."""
    r = (v + 1) & 0xFF
    nf = f & 0x10
    if r == 0:
        nf = nf | 0x80
    if (v & 0xF) == 0xF:
        nf = nf | 0x20
    return r | (nf << 8)


@wp.func
def dec8(v: int, f: int) -> int:
    """DEC r: returns ``v-1 | f << 8`` (C unchanged)."""
    r = (v - 1) & 0xFF
    nf = (f & 0x10) | 0x40
    if r == 0:
        nf = nf | 0x80
    if (v & 0xF) == 0:
        nf = nf | 0x20
    return r | (nf << 8)


@wp.func
def rot8(k: int, v: int, f: int) -> int:
    """CB rotate/shift ``k`` (RLC RRC RL RR SLA SRA SWAP SRL) of ``v``; returns ``r | f << 8``."""
    cy = (f >> 4) & 1
    r = 0
    co = 0
    if k == 0:
        co = v >> 7
        r = ((v << 1) | co) & 0xFF
    elif k == 1:
        co = v & 1
        r = (v >> 1) | (co << 7)
    elif k == 2:
        co = v >> 7
        r = ((v << 1) | cy) & 0xFF
    elif k == 3:
        co = v & 1
        r = (v >> 1) | (cy << 7)
    elif k == 4:
        co = v >> 7
        r = (v << 1) & 0xFF
    elif k == 5:
        co = v & 1
        r = (v >> 1) | (v & 0x80)
    elif k == 6:
        r = ((v << 4) | (v >> 4)) & 0xFF
    else:
        co = v & 1
        r = v >> 1
    nf = co << 4
    if r == 0:
        nf = nf | 0x80
    return r | (nf << 8)


@wp.func
def daa(a: int, f: int) -> int:
    """DAA: decimal-adjust A after a BCD add/subtract; returns ``a | f << 8``."""
    n = (f & 0x40) != 0
    h = (f & 0x20) != 0
    c = (f & 0x10) != 0
    nc = f & 0x10
    if not n:
        if c or a > 0x99:
            a = a + 0x60
            nc = 0x10
        if h or (a & 0x0F) > 0x09:
            a = a + 0x06
    else:
        if c:
            a = a - 0x60
        if h:
            a = a - 0x06
    a = a & 0xFF
    nf = (f & 0x40) | nc
    if a == 0:
        nf = nf | 0x80
    return a | (nf << 8)


@wp.func
def add_hl(hl: int, v: int, f: int) -> int:
    """ADD HL,rr: returns ``hl | f << 16`` (Z unchanged)."""
    r = hl + v
    nf = f & 0x80
    if ((hl & 0xFFF) + (v & 0xFFF)) > 0xFFF:
        nf = nf | 0x20
    if r > 0xFFFF:
        nf = nf | 0x10
    return (r & 0xFFFF) | (nf << 16)


@wp.func
def add_sp(sp: int, e: int) -> int:
    """SP + signed 8-bit ``e`` (ADD SP,e / LD HL,SP+e): returns ``r | f << 16``."""
    s = e
    if e > 127:
        s = e - 256
    nf = 0
    if ((sp & 0xF) + (e & 0xF)) > 0xF:
        nf = nf | 0x20
    if ((sp & 0xFF) + e) > 0xFF:
        nf = nf | 0x10
    return ((sp + s) & 0xFFFF) | (nf << 16)


@wp.func
def cond_ok(k: int, f: int) -> bool:
    """Branch condition NZ, Z, NC, C by its 2-bit index ``k`` (opcode bits 3-4) over flags ``f``:
    the conditional jumps, calls and returns of the kernel and the idle-loop detector."""
    if k == 0:
        return (f & 0x80) == 0
    if k == 1:
        return (f & 0x80) != 0
    if k == 2:
        return (f & 0x10) == 0
    return (f & 0x10) != 0
