"""Exact fast-forward of side-effect-free loops (the kernel's ``IDLE_SKIP`` variant).

Games spend most of a frame in loops that only wait (and in one that copies, below): for a
RAM flag that an interrupt handler sets, for LY/STAT to reach a value, for a countdown register
to reach zero (OAM-DMA waits in HRAM, delay loops), or spinning on ``JR @`` until an interrupt.
Such a loop writes nothing and touches no IO register with a side effect, so between two
scheduled events (the lazy clock's ``NEXT``: PPU mode/line changes that matter, timer overflows,
frame ends) every iteration is a known function of what it reads. After a taken backward branch the kernel calls
:func:`idle_loop`, which decodes the loop body from the bus (ROM, WRAM or HRAM: code the loop
cannot change), recognises one of the families below and skips ``k`` whole iterations by adding
``k`` periods to the clock and setting the registers to what the ``k``-th iteration leaves,
where ``k`` ends strictly before the next event and before anything the loop reads can change:

- **poll**: ``LOAD; [TEST...]; Jcc back`` where LOAD is ``LDH A,(a8)``, ``LDH A,(C)``,
  ``LD A,(a16)``, ``LD A,(HL)|(DE)|(BC)`` or ``BIT b,(HL)`` and TEST is one to three of: an ALU
  op (not ADC/SBC) with a register or an immediate, ``BIT b,A`` (e.g. ``and 3; cp 1``). The byte read is a WRAM/HRAM byte (only the CPU writes those),
  JOYP (changes only at frame boundaries, which are events) or LY/STAT (a function of the dot
  counter: :func:`~torchrl_dreamer.emulator.ppu.ppu_poll`). Jcc is ``JR cc`` or ``JP cc``.
  An LY/STAT poll is skipped on through each following value that still keeps the branch
  taken (a wait for LY 144 across lines, for mode 0 through modes 2 and 3), up to the next
  event, instead of stopping at every change of the value; when the value that leaves the loop
  is read before the next event, that last iteration runs here too and the kernel continues
  after the branch (one load / test / branch and an IO read fewer per wait; 2048 executes 1,430
  -> 1,381 instructions a frame).
- **countdown**: NOP / ``JR +0`` fillers around ``DEC r`` and a ``JR NZ|JP NZ`` back, or around
  ``DEC rr; LD A,hi; OR lo`` (either order) closed by ``JR NZ|JP NZ`` back or by an exit
  ``RET Z|JR Z|JP Z`` and an unconditional ``JR|JP`` back.
- **spin**: fillers only and an unconditional ``JR|JP`` back (``JR @``).
- **copy**: the tutorials' memory copy idiom (``LD A,(DE); LD (HL+),A; INC DE; DEC BC;
  LD A,B; OR C; JR NZ|JP NZ``) from ROM or RAM into WRAM, HRAM or VRAM (while no write can be
  blocked): its iterations are done in one go (:mod:`~torchrl_dreamer.emulator.idle_copy`). The
  one family that writes memory.

Not skipped: an interrupt pending with IME=1 or an ``EI`` in flight (the loop is about to be
left), and an OAM DMA in progress (:func:`~torchrl_dreamer.emulator.dma.dma_busy`) unless
the loop is a countdown or spin running from HRAM (the usual DMA wait). Registers,
memory, timers, APU, PPU and frames are bit-identical to running the loop (``test/emulator/test_emulator_idle.py``); skipped
*instructions* are added to ``S_CYCLES``.
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.alu import alu8, cond_ok, dec8
from torchrl_dreamer.emulator.bus import peek, rom_byte
from torchrl_dreamer.emulator.dma import dma_busy
from torchrl_dreamer.emulator.idle_copy import copy_loop, plain_ram
from torchrl_dreamer.emulator.idle_state import store_regs
from torchrl_dreamer.emulator.interrupts import pending_irqs
from torchrl_dreamer.emulator.joypad import joyp_value
from torchrl_dreamer.emulator.layout import (
    S_BOOT_ON,
    S_SPEED,
)
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.ppu import ppu_poll, vram_open_seen
from torchrl_dreamer.emulator.raw import rom_at
from torchrl_dreamer.emulator.registers import (
    R_JOYP,
    R_LY,
    R_STAT,
)

__all__ = ["idle_loop", "loop_heads", "maybe_loop"]


def loop_heads() -> list[int]:
    """Per opcode 1 if a loop :func:`idle_loop` knows can start with it (the kernel's ``heads``
    argument): the kernel asks :func:`idle_loop` only about loops whose first opcode is
    one of these, so other loops (fills, other copies) cost one table read per taken branch."""
    heads = {0xF0, 0xF2, 0xFA, 0x7E, 0x1A, 0x0A, 0xCB, 0x00, 0x18, 0xC3, 0x0B, 0x1B, 0x2B}
    heads |= {0x05 + 8 * r for r in range(8) if r != 6}  # DEC r
    return [int(op in heads) for op in range(256)]  # "does not change before the next event" (T-cycles)


@wp.func
def code_ok(i: int, m: wp.ref[Mem], addr: int) -> bool:
    """Loop code the loop itself cannot change and the fast-forward may read with ``peek``:
    cartridge ROM (boot ROM unmapped), WRAM or HRAM."""
    i = console(i)
    if addr < 0x8000:
        bo = m.st[i, S_BOOT_ON]  # the boot ROM's end while it is mapped (Color: 0000-00FF, 0200-08FF)
        return bo == 0 or (addr >= 0x100 and (addr < 0x200 or addr >= bo))
    return plain_ram(addr, 1)


@wp.func
def maybe_loop(m: wp.ref[Mem], heads: wp.array(dtype=wp.uint8), head: int, rom0: int, rom1: int) -> bool:
    """Cheap pre-filter: can the ROM code at ``head`` start a loop :func:`idle_loop` knows?
    (Code outside ROM is always handed to :func:`idle_loop`, which checks it.)"""
    if head < 0x8000:
        return rom_at(heads, rom_byte(m, rom0, rom1, head)) != 0
    return True


@wp.func
def reg8(k: int, b: int, c: int, d: int, e: int, h: int, l: int, a: int) -> int:  # noqa: E741
    """Register by 3-bit index (B C D E H L - A; 6 is not a register here)."""
    if k == 0:
        return b
    if k == 1:
        return c
    if k == 2:
        return d
    if k == 3:
        return e
    if k == 4:
        return h
    if k == 5:
        return l
    return a


@wp.func
def taken_cycles(op: int) -> int:
    """T-cycles of the loop's closing branch, taken: JR (cc) 12, JP (cc) 16; 0 if not one."""
    if op == 0x18 or op == 0x20 or op == 0x28 or op == 0x30 or op == 0x38:
        return 12
    if op == 0xC3 or op == 0xC2 or op == 0xCA or op == 0xD2 or op == 0xDA:
        return 16
    return 0


@wp.func
def branch_cond(op: int, f: int) -> bool:
    """Whether the branch ``op`` (JR/JP, conditional or not) is taken with flags ``f``."""
    if op == 0x18 or op == 0xC3:
        return True
    return cond_ok((op >> 3) & 3, f)


@wp.func
def poll_test(t: int, w: int, r: int) -> int:
    """One TEST of a poll loop on ``r = A | F << 8``: ``t`` 0-7 the ALU op (not ADC / SBC) with
    operand ``w`` (-1: A itself), 8-15 ``BIT t-8,A``, -1 none."""
    if t < 0:
        return r
    x = r & 0xFF
    f = r >> 8
    if t >= 8:
        nf = (f & 0x10) | 0x20
        if ((x >> (t - 8)) & 1) == 0:
            nf = nf | 0x80
        return x | (nf << 8)
    ww = w
    if ww < 0:
        ww = x
    return alu8(t, x, ww, f)


@wp.func
def poll_iteration(v: int, bit: int, ts: wp.vec3i, ws: wp.vec3i, a: int, f: int) -> int:
    """``A | F << 8`` after one iteration of a poll loop that reads ``v``: ``BIT bit,(HL)``
    (``bit >= 0``: A unchanged), else ``LD A,v`` then the TESTs ``ts`` / ``ws`` in order
    (:func:`poll_test`; -1 past the last). (ADC / SBC are not poll tests, so F's carry-in
    matters only where BIT keeps it.)"""
    if bit >= 0:
        nf = (f & 0x10) | 0x20
        if ((v >> bit) & 1) == 0:
            nf = nf | 0x80
        return a | (nf << 8)
    r = v | (f << 8)
    for k in range(3):
        r = poll_test(ts[k], ws[k], r)
    return r


@wp.func(inline=False)
def idle_loop(i: int, m: wp.ref[Mem], head: int, br: int, op: int, a: int, f: int, b: int, c: int,
              d: int, e: int, h: int, l: int, clk: int, nxt: int, ime: int) -> int:  # noqa: E741
    """Fast-forward the loop ``head .. br`` (``br``: address of its closing branch ``op``, just
    taken back to ``head``; the clock is ``clk`` of ``nxt``, in CPU T-cycles: LY / STAT are
    asked at half as many dots in the Color's double speed). Returns the instructions skipped
    (then the registers, PC and clock are in the state row, :func:`store_regs`), 0 when nothing
    can be skipped now, or -1 when the code at ``head`` is not a loop this fast-forward knows (the
    kernel then stops asking for this closing branch until another loop is rejected).
    """
    i = console(i)
    tb = taken_cycles(op)
    if tb == 0 or br < head or br - head > 24 or br + 3 > 0xFFFF:
        return -1
    if not code_ok(i, m, head) or not code_ok(i, m, br + tb // 4 - 1):
        return -1  # (the branch is 2 bytes for JR, 3 for JP)
    # not now (0, not -1): an interrupt is taken at the next opcode fetch, or an OAM DMA is in
    # progress (its bus conflicts and OAM copies are cycle-exact: no poll is skipped meanwhile)
    irq = ime != 0 and pending_irqs(i, m) != 0
    dma = dma_busy(i, m, clk)
    blocked = irq or dma
    kev = nxt - clk - 1  # T-cycles the skipped iterations may use (they end before NEXT)
    o0 = peek(i, m, head)
    if o0 == 0x1A and br == head + 6:
        cp = copy_loop(i, m, head, br, op, b, c, d, e, h, l, clk, kev, blocked)
        if cp >= 0:
            return cp  # the memory copy idiom (idle_copy.py)
    # ---------------------------------------------------------------- poll: LOAD; TEST; Jcc
    src = -1
    ll = 0  # LOAD bytes
    lm = 0  # LOAD M-cycles (the read is the last one)
    bit = -1  # BIT b,(HL): load and test in one
    if o0 == 0xF0:
        src = 0xFF00 | peek(i, m, head + 1)
        ll = 2
        lm = 3
    elif o0 == 0xFA:
        src = peek(i, m, head + 1) | (peek(i, m, head + 2) << 8)
        ll = 3
        lm = 4
    elif o0 == 0x7E:
        src = (h << 8) | l
        ll = 1
        lm = 2
    elif o0 == 0x1A:
        src = (d << 8) | e
        ll = 1
        lm = 2
    elif o0 == 0x0A:
        src = (b << 8) | c
        ll = 1
        lm = 2
    elif o0 == 0xF2:
        src = 0xFF00 | c
        ll = 1
        lm = 2
    elif o0 == 0xCB:
        o1 = peek(i, m, head + 1)
        if (o1 & 0xC7) == 0x46:
            src = (h << 8) | l
            ll = 2
            lm = 3
            bit = (o1 >> 3) & 7
    if src >= 0:
        if op == 0x18 or op == 0xC3:
            return -1
        ram = plain_ram(src, 1)
        ppu = src == 0xFF00 + R_LY or src == 0xFF00 + R_STAT
        if not (ram or ppu or src == 0xFF00 + R_JOYP):
            return -1
        p = int(head + ll)
        # up to three TESTs (poll_test codes: ALU op 0-7 or 8 + b for BIT b,A; operand -1: A)
        ts = wp.vec3i(-1, -1, -1)
        ws = wp.vec3i(0, 0, 0)
        nt = int(0)  # noqa: UP018 (a dynamic Warp variable)
        tm = int(0)  # noqa: UP018  (their M-cycles)
        if bit < 0:
            while p < br and nt < 3:
                t0 = peek(i, m, p)
                tk = int(-1)  # noqa: UP018
                tw = int(0)  # noqa: UP018
                if t0 >= 0x80 and t0 < 0xC0 and (t0 & 7) != 6:
                    tk = (t0 >> 3) & 7
                    tw = reg8(t0 & 7, b, c, d, e, h, l, -1)
                    p = p + 1
                    tm = tm + 1
                elif (t0 & 0xC7) == 0xC6:
                    tk = (t0 >> 3) & 7
                    tw = peek(i, m, p + 1)
                    p = p + 2
                    tm = tm + 2
                elif t0 == 0xCB and (peek(i, m, p + 1) & 0xC7) == 0x47:
                    tk = 8 + ((peek(i, m, p + 1) >> 3) & 7)
                    p = p + 2
                    tm = tm + 2
                else:
                    return -1
                if tk == 1 or tk == 3:
                    return -1  # ADC / SBC: the result depends on the previous iteration's carry
                ts[nt] = tk
                ws[nt] = tw
                nt = nt + 1
            if nt == 0:
                return -1
        ins = 2 + nt
        if p != br:
            return -1
        if blocked:
            return 0
        # the clock counts CPU T-cycles, the PPU dots: half as many in the Color's double speed
        sp = m.st[i, S_SPEED]
        per = 4 * (lm + tm) + tb
        k = kev // per
        v = 0
        if k <= 0:
            return 0
        kmax = k
        if ppu:
            vl = ppu_poll(i, m, src - 0xFF00, (clk + 4 * lm) >> sp)  # (ends before NEXT)
            v = vl & 0xFF
            kl = (((vl >> 8) << sp) - 1) // per + 1  # iterations that still read this value
            if kl < k:
                k = kl
        elif src == 0xFF00 + R_JOYP:
            v = joyp_value(i, m)
        else:
            v = peek(i, m, src)
        r = poll_iteration(v, bit, ts, ws, a, f)
        if k <= 0 or not branch_cond(op, r >> 8):
            return 0
        # LY / STAT: go on through the following values the loop reads as long as each one
        # keeps the branch taken (e.g. a wait for LY 144 across lines), still before NEXT
        # (``ppu_poll`` is exact there: ``kmax`` iterations end before the next event)
        while ppu and k < kmax:
            vl = ppu_poll(i, m, src - 0xFF00, (clk + per * k + 4 * lm) >> sp)
            r2 = poll_iteration(vl & 0xFF, bit, ts, ws, a, f)
            if not branch_cond(op, r2 >> 8):
                # the loop's last iteration (it reads the value that leaves the loop): run it
                # here too when it also ends before NEXT, and continue after the branch (not
                # taken: 4 T-cycles less than taken)
                last = per * k + 4 * (lm + tm) + tb - 4
                if last <= kev:
                    if src == 0xFF00 + R_STAT:
                        vram_open_seen(i, m, clk + per * k + 4 * lm, vl & 0xFF)
                    store_regs(i, m, r2 & 0xFF, r2 >> 8, b, c, d, e, h, l, br + tb // 4 - 1,
                               clk + last, ins * (k + 1))
                    return ins * (k + 1)
                break
            r = r2
            k = wp.min(k + (((vl >> 8) << sp) - 1) // per + 1, kmax)
        store_regs(i, m, r & 0xFF, r >> 8, b, c, d, e, h, l, head, clk + per * k, ins * k)
        return ins * k
    # ---------------------------------------------------------------- countdown / spin
    # (int(...): Warp variables assigned in the loop below must not start as constants)
    q = int(head)
    cyc = int(0)  # noqa: UP018
    nin = int(1)  # noqa: UP018  (the closing branch)
    cnt = int(-1)  # noqa: UP018  (counter: 0-7 an 8-bit register, 8-10 BC DE HL)
    stage = int(0)  # noqa: UP018  (16-bit: 1 after DEC rr, 2 after LD A,x, 3 after OR y, 4 exit)
    ldx = int(-1)  # noqa: UP018
    ory = int(-1)  # noqa: UP018
    while q < br:
        o = peek(i, m, q)
        if o == 0x00:
            cyc = cyc + 4
            q = q + 1
        elif o == 0x18 and peek(i, m, q + 1) == 0:
            cyc = cyc + 12
            q = q + 2
        elif cnt < 0 and (o & 0xC7) == 0x05 and o != 0x35:
            cnt = (o >> 3) & 7
            cyc = cyc + 4
            q = q + 1
        elif cnt < 0 and (o == 0x0B or o == 0x1B or o == 0x2B):
            cnt = 8 + (o >> 4)
            stage = 1
            cyc = cyc + 8
            q = q + 1
        elif stage == 1 and o >= 0x78 and o < 0x7E:
            ldx = o & 7
            stage = 2
            cyc = cyc + 4
            q = q + 1
        elif stage == 2 and o >= 0xB0 and o < 0xB6:
            ory = o & 7
            stage = 3
            cyc = cyc + 4
            q = q + 1
        elif stage == 3 and o == 0xC8:
            stage = 4  # RET Z, not taken
            cyc = cyc + 8
            q = q + 1
        elif stage == 3 and o == 0x28:
            stage = 4  # JR Z, not taken
            cyc = cyc + 8
            q = q + 2
        elif stage == 3 and o == 0xCA:
            stage = 4  # JP Z, not taken
            cyc = cyc + 12
            q = q + 3
        else:
            return -1
        nin = nin + 1
    if q != br:
        return -1
    per = cyc + tb
    k = kev // per
    uncond = op == 0x18 or op == 0xC3
    nz = op == 0x20 or op == 0xC2
    if cnt < 0 and not uncond:
        return -1
    if cnt < 8 and cnt >= 0 and not nz:
        return -1
    if cnt >= 8:
        hi = 2 * (cnt - 8)
        if stage < 3 or not ((ldx == hi and ory == hi + 1) or (ldx == hi + 1 and ory == hi)):
            return -1
        if (stage == 4 and not uncond) or (stage == 3 and not nz):
            return -1
    # A countdown or spin reads nothing but registers: run from HRAM (the usual OAM-DMA wait,
    # `LD A,40; DEC A; JR NZ`) its only bus accesses are HRAM opcode fetches, which no DMA
    # conflicts with, and the transfer's OAM copy is lazy (done by whatever next reads OAM or
    # the DMA's bus, at its own time), so it is skipped during a DMA too.
    if irq or (dma and head < 0xFF80):
        return 0
    if cnt < 0:
        if k <= 0:
            return 0
        store_regs(i, m, a, f, b, c, d, e, h, l, head, clk + per * k, nin * k)  # spin
        return nin * k
    if cnt < 8:
        v = reg8(cnt, b, c, d, e, h, l, a)
        rem = v - 1
        if v == 0:
            rem = 255  # DEC from 0 wraps: 255 more decrements before zero
        if rem < k:
            k = rem
        if k <= 0:
            return 0
        nv = (v - k) & 0xFF
        nf = dec8((nv + 1) & 0xFF, f) >> 8
        if cnt == 0:
            b = nv
        elif cnt == 1:
            c = nv
        elif cnt == 2:
            d = nv
        elif cnt == 3:
            e = nv
        elif cnt == 4:
            h = nv
        elif cnt == 5:
            l = nv  # noqa: E741
        else:
            a = nv
        store_regs(i, m, a, nf, b, c, d, e, h, l, head, clk + per * k, nin * k)
        return nin * k
    # 16-bit: LD A,x; OR y over the pair's two halves; closed by JR/JP NZ, or exit + JR/JP back
    hi = 2 * (cnt - 8)
    rr = reg8(hi, b, c, d, e, h, l, a) << 8 | reg8(hi + 1, b, c, d, e, h, l, a)
    rem = rr - 1
    if rr == 0:
        rem = 0xFFFF
    if rem < k:
        k = rem
    if k <= 0:
        return 0
    nr = (rr - k) & 0xFFFF
    if cnt == 8:
        b = nr >> 8
        c = nr & 0xFF
    elif cnt == 9:
        d = nr >> 8
        e = nr & 0xFF
    else:
        h = nr >> 8
        l = nr & 0xFF  # noqa: E741
    na = reg8(ldx, b, c, d, e, h, l, a) | reg8(ory, b, c, d, e, h, l, a)  # LD A,x; OR y
    store_regs(i, m, na, 0, b, c, d, e, h, l, head, clk + per * k, nin * k)  # nonzero: Z, N, H, C clear
    return nin * k
