"""The DMG APU's registers and their timing, as Warp functions (no audio samples are produced).

What is modelled is what a program can observe through the sound registers:

- NR10-NR52 with their read masks (unused bits and write-only registers read 1), NR52's channel
  status bits, power off/on with NR52 bit 7 (off clears NR10-NR51 and ignores their writes; on a
  DMG the length counters survive power-off and NR11/NR21/NR31/NR41 stay writable, length part
  only; wave RAM is always accessible).
- The frame sequencer ("DIV-APU"): one step on every falling edge of bit 12 of the 16-bit divider
  (every 8192 T-cycles, and on a DIV write while that bit is set); length counters on steps
  0, 2, 4, 6, sweep on 2 and 6, envelopes on 7. Powering on restarts it so the next step is 0; if
  DIV bit 12 is set at that moment the first falling edge is skipped.
- Length counters (64 steps, 256 for the wave channel), including the extra clock when length is
  enabled in the first half of a length period (when the next step does not clock length), and a
  trigger with length 0 loading the maximum (maximum - 1 when that extra clock applies).
- Channel 1's sweep: shadow frequency, sweep timer (period 0 counts as 8), the overflow check on
  trigger when the shift is non-zero, the write-back and second overflow check, and the quirk that
  clearing the negate bit after a calculation in negate mode disables the channel.
- Volume envelopes (internal only: volume is not readable on a DMG).
- DAC power (NRx2 bits 3-7, NR30 bit 7): a DAC off disables its channel, a trigger does not enable
  a channel whose DAC is off.
- The wave channel's sample position: the first sample fetch comes ``period + 6`` T-cycles after
  a trigger (the period is ``(2048 - frequency) * 2``), then every period. While the channel is
  on, a CPU access to wave RAM reaches the byte the channel fetched in the same cycle and misses
  otherwise (reads give FF, writes are dropped), and retriggering the channel in the cycle before
  it fetches a sample corrupts the first bytes of wave RAM (DMG only).

Time is lazy, as for the rest of the console: nothing here runs per M-cycle. :func:`apu_advance`
is called by the clock catch-up with the divider value and the T-cycles elapsed since the last
catch-up; it counts the frame-sequencer steps in that span from the divider arithmetically and,
while the wave channel plays, moves its sample position by whole periods. IO reads and writes
catch up first, so registers read as if every cycle had been simulated.

Sources of the facts (no code taken): Pan Docs "Audio" / "Audio details", the gbdev wiki
"Gameboy sound hardware" (obscure behaviour), blargg's dmg_sound test descriptions.

State: registers live in ``hram[i, 0x10..0x3F]`` as written (NR52: bit 7 only); the internal
state is in the ``S_APU_*`` columns of the state table (see :mod:`.layout`).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_APU_ACT,
    S_APU_ENV1,
    S_APU_FS,
    S_APU_LEN1,
    S_APU_LEN_EN,
    S_APU_SKIP,
    S_APU_SW_FLAGS,
    S_APU_SW_FREQ,
    S_APU_SW_TIMER,
    S_APU_WAVE_CNT,
    S_APU_WAVE_PER,
    S_APU_WAVE_POS,
    S_DIV16,
)

# IO register offsets (from FF00)
NR10 = wp.constant(0x10)
NR11 = wp.constant(0x11)
NR12 = wp.constant(0x12)
NR13 = wp.constant(0x13)
NR14 = wp.constant(0x14)
NR21 = wp.constant(0x16)
NR30 = wp.constant(0x1A)
NR31 = wp.constant(0x1B)
NR33 = wp.constant(0x1D)
NR34 = wp.constant(0x1E)
NR41 = wp.constant(0x20)
NR50 = wp.constant(0x24)
NR51 = wp.constant(0x25)
NR52 = wp.constant(0x26)
WAVE_RAM = wp.constant(0x30)

# NR52 status bit of the wave channel (channel 3 is index 2)
CH3 = wp.constant(4)
# The wave channel's first sample fetch comes this many T-cycles after one period from a trigger.
WAVE_TRIGGER_DELAY = wp.constant(6)
# A retrigger corrupts wave RAM when the channel's next fetch is this many T-cycles away.
WAVE_CORRUPT_CNT = wp.constant(2)


@wp.func
def apu_read_mask(r: int) -> int:
    """Bits of FF10-FF2F that read as 1 (unused bits, write-only registers, unmapped addresses)."""
    if r == 0x10:
        return 0x80
    if r == 0x11 or r == 0x16:
        return 0x3F
    if r == 0x12 or r == 0x17 or r == 0x21 or r == 0x22 or r == 0x24 or r == 0x25:
        return 0
    if r == 0x14 or r == 0x19 or r == 0x1E or r == 0x23:
        return 0xBF
    if r == 0x1A:
        return 0x7F
    if r == 0x1C:
        return 0x9F
    return 0xFF


@wp.func
def wave_period(hram: wp.array2d(dtype=wp.uint8), i: int) -> int:
    """T-cycles between two wave sample fetches: ``(2048 - frequency) * 2``."""
    f = int(hram[i, NR33]) | ((int(hram[i, NR34]) & 7) << 8)
    return (2048 - f) * 2


@wp.func
def wave_hit(st: wp.array2d(dtype=wp.int32), i: int) -> bool:
    """True when the playing wave channel fetched its sample in this very cycle."""
    return st[i, S_APU_WAVE_CNT] == st[i, S_APU_WAVE_PER]


@wp.func
def dac_on(hram: wp.array2d(dtype=wp.uint8), i: int, ch: int) -> bool:
    """Whether channel ``ch``'s DAC is powered (NRx2 bits 3-7; NR30 bit 7 for the wave channel)."""
    if ch == 2:
        return (int(hram[i, NR30]) & 0x80) != 0
    return (int(hram[i, NR12 + 5 * ch]) & 0xF8) != 0


@wp.func
def disable(st: wp.array2d(dtype=wp.int32), i: int, ch: int):
    """Clear channel ``ch``'s NR52 status bit."""
    st[i, S_APU_ACT] = st[i, S_APU_ACT] & (0xF ^ (1 << ch))


# ----------------------------------------------------------------------------- frame sequencer
@wp.func(inline=False)
def length_clock(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int):
    """Frame-sequencer length step: enabled non-zero counters count down; 0 disables the channel."""
    en = st[i, S_APU_LEN_EN]
    for ch in range(4):
        if (en & (1 << ch)) != 0:
            n = st[i, S_APU_LEN1 + ch]
            if n > 0:
                st[i, S_APU_LEN1 + ch] = n - 1
                if n == 1:
                    disable(st, i, ch)


@wp.func
def sweep_calc(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int) -> int:
    """New sweep frequency from the shadow frequency; above 2047 disables channel 1."""
    nr10 = int(hram[i, NR10])
    f = st[i, S_APU_SW_FREQ]
    nf = f + (f >> (nr10 & 7))
    if (nr10 & 8) != 0:
        nf = f - (f >> (nr10 & 7))
        st[i, S_APU_SW_FLAGS] = st[i, S_APU_SW_FLAGS] | 2  # a calculation used negate mode
    if nf > 2047:
        disable(st, i, 0)
    return nf


@wp.func(inline=False)
def sweep_clock(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int):
    """Frame-sequencer sweep step (128 Hz)."""
    t = st[i, S_APU_SW_TIMER] - 1
    if t <= 0:
        nr10 = int(hram[i, NR10])
        per = (nr10 >> 4) & 7
        t = per
        if per == 0:
            t = 8
        if (st[i, S_APU_SW_FLAGS] & 1) != 0 and per != 0:
            nf = sweep_calc(st, hram, i)
            if nf <= 2047 and (nr10 & 7) != 0:
                st[i, S_APU_SW_FREQ] = nf
                hram[i, NR13] = wp.uint8(nf & 0xFF)
                hram[i, NR14] = wp.uint8((int(hram[i, NR14]) & 0xF8) | (nf >> 8))
                sweep_calc(st, hram, i)
    st[i, S_APU_SW_TIMER] = t


@wp.func(inline=False)
def envelope_clock(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int):
    """Frame-sequencer envelope step (64 Hz) of channels 1, 2 and 4 (the playing ones; a trigger
    reloads the envelope): volume +-1 every period."""
    act = st[i, S_APU_ACT]
    for k in range(3):
        ch = k
        if k == 2:
            ch = 3
        nrx2 = int(hram[i, NR12 + 5 * ch])
        per = nrx2 & 7
        if per != 0 and (act & (1 << ch)) != 0:
            e = st[i, S_APU_ENV1 + k]
            vol = e & 15
            t = (e >> 4) - 1
            if t <= 0:
                t = per
                if (nrx2 & 8) != 0 and vol < 15:
                    vol = vol + 1
                if (nrx2 & 8) == 0 and vol > 0:
                    vol = vol - 1
            st[i, S_APU_ENV1 + k] = vol | (t << 4)


@wp.func(inline=False)
def frame_steps(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int, n: int):
    """Run ``n`` frame-sequencer steps (none while the APU is off).

    ``S_APU_FS`` counts steps since power-on modulo 8: after step k (0-based) it holds k + 1, so
    an odd value means the step just run clocked the length counters.
    """
    if (int(hram[i, NR52]) & 0x80) == 0:
        return
    k = n
    if st[i, S_APU_SKIP] != 0:
        st[i, S_APU_SKIP] = 0
        k = k - 1
    fs = st[i, S_APU_FS]
    for _k in range(k):
        fs = (fs + 1) & 7
        st[i, S_APU_FS] = fs
        if (fs & 1) != 0:
            length_clock(st, hram, i)
        if (fs & 3) == 3:
            sweep_clock(st, hram, i)
        if fs == 0:
            envelope_clock(st, hram, i)


@wp.func(inline=False)
def wave_fetches(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int, w: int):
    """The wave channel's countdown reached ``w <= 0``: account for every fetch up to now."""
    p = wave_period(hram, i)
    n = 1 + (-w) // p
    st[i, S_APU_WAVE_POS] = (st[i, S_APU_WAVE_POS] + n) & 31
    st[i, S_APU_WAVE_CNT] = w + n * p
    st[i, S_APU_WAVE_PER] = p


@wp.func(inline=True)
def apu_advance(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int,
                div_before: int, cycles: int):
    """Catch the APU up by ``cycles`` T-cycles; ``div_before`` is the 16-bit divider before them.

    Frame-sequencer steps are the falling edges of divider bit 12 in the span; the wave channel
    (while on) moves by whole sample periods. Both are O(1) unless something is due. Steps with
    no length counter or sweep enabled and no envelope step of a playing channel among them only
    move the step count (games spend most of their time so: no call out).
    """
    n = ((div_before + cycles) >> 13) - (div_before >> 13)
    if n > 0:
        fs = st[i, S_APU_FS] + n
        if ((st[i, S_APU_LEN_EN] | (st[i, S_APU_SW_FLAGS] & 1) | st[i, S_APU_SKIP]) == 0
                and (fs < 8 or (st[i, S_APU_ACT] & 0xB) == 0)):
            st[i, S_APU_FS] = fs & 7  # (while powered off too: power-on resets it)
        else:
            frame_steps(st, hram, i, n)
    if (st[i, S_APU_ACT] & CH3) != 0:
        w = st[i, S_APU_WAVE_CNT] - cycles
        if w <= 0:
            wave_fetches(st, hram, i, w)
        else:
            st[i, S_APU_WAVE_CNT] = w


@wp.func
def apu_div_write(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int):
    """A DIV write resets the divider: with bit 12 set that is a falling edge (one step)."""
    if (st[i, S_DIV16] & 0x1000) != 0:
        frame_steps(st, hram, i, 1)


# ------------------------------------------------------------------------------- registers
@wp.func(inline=False)
def apu_read(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int, r: int) -> int:
    """Read FF10-FF3F (the caller has caught the clock up)."""
    if r >= WAVE_RAM:
        if (st[i, S_APU_ACT] & CH3) != 0:
            if wave_hit(st, i):
                return int(hram[i, WAVE_RAM + (st[i, S_APU_WAVE_POS] >> 1)])
            return 0xFF
        return int(hram[i, r])
    if r == NR52:
        return (int(hram[i, NR52]) & 0x80) | 0x70 | st[i, S_APU_ACT]
    return int(hram[i, r]) | apu_read_mask(r)


@wp.func(inline=False)
def power(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int, v: int):
    """NR52 write: bit 7 powers the APU on or off."""
    was_on = (int(hram[i, NR52]) & 0x80) != 0
    if (v & 0x80) != 0 and not was_on:
        hram[i, NR52] = wp.uint8(0x80)
        st[i, S_APU_FS] = 0  # the next step is step 0
        st[i, S_APU_SKIP] = 0
        if (st[i, S_DIV16] & 0x1000) != 0:
            st[i, S_APU_SKIP] = 1  # bit 12 already set: its next falling edge is not a step
    if (v & 0x80) == 0 and was_on:
        for r in range(NR10, NR52 + 1):
            hram[i, r] = wp.uint8(0)
        st[i, S_APU_ACT] = 0
        st[i, S_APU_LEN_EN] = 0
        st[i, S_APU_SW_FREQ] = 0
        st[i, S_APU_SW_TIMER] = 0
        st[i, S_APU_SW_FLAGS] = 0
        for k in range(3):
            st[i, S_APU_ENV1 + k] = 0
        # the length counters (S_APU_LEN1..4) keep their values on a DMG


@wp.func(inline=False)
def wave_trigger(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int):
    """Restart the wave channel's position; retriggering just before a fetch corrupts wave RAM."""
    if (st[i, S_APU_ACT] & CH3) != 0 and st[i, S_APU_WAVE_CNT] == WAVE_CORRUPT_CNT:
        b = ((st[i, S_APU_WAVE_POS] + 1) >> 1) & 15  # the byte the fetch would have read
        if b < 4:
            hram[i, WAVE_RAM] = hram[i, WAVE_RAM + b]
        else:
            src = WAVE_RAM + (b & 12)
            for k in range(4):
                hram[i, WAVE_RAM + k] = hram[i, src + k]
    st[i, S_APU_WAVE_POS] = 0
    st[i, S_APU_WAVE_CNT] = wave_period(hram, i) + WAVE_TRIGGER_DELAY
    st[i, S_APU_WAVE_PER] = 0  # no fetch since the trigger


@wp.func(inline=False)
def nrx4_write(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int, ch: int,
               v: int):
    """NR14/NR24/NR34/NR44: frequency high bits, length enable, trigger."""
    r = NR14 + 5 * ch
    bit = 1 << ch
    was_enabled = (st[i, S_APU_LEN_EN] & bit) != 0
    hram[i, r] = wp.uint8(v)
    if (v & 0x40) != 0:
        st[i, S_APU_LEN_EN] = st[i, S_APU_LEN_EN] | bit
    else:
        st[i, S_APU_LEN_EN] = st[i, S_APU_LEN_EN] & (0xF ^ bit)
    maxlen = 64
    if ch == 2:
        maxlen = 256
    if (v & 0x80) != 0:
        if ch == 2:
            wave_trigger(st, hram, i)
        if dac_on(hram, i, ch):
            st[i, S_APU_ACT] = st[i, S_APU_ACT] | bit
        if ch != 2:
            k = ch
            if ch == 3:
                k = 2
            nrx2 = int(hram[i, NR12 + 5 * ch])
            st[i, S_APU_ENV1 + k] = (nrx2 >> 4) | ((nrx2 & 7) << 4)
        if ch == 0:
            nr10 = int(hram[i, NR10])
            st[i, S_APU_SW_FREQ] = int(hram[i, NR13]) | ((v & 7) << 8)
            t = (nr10 >> 4) & 7
            if t == 0:
                t = 8
            st[i, S_APU_SW_TIMER] = t
            st[i, S_APU_SW_FLAGS] = 0
            if (nr10 & 0x77) != 0:
                st[i, S_APU_SW_FLAGS] = 1
            if (nr10 & 7) != 0:
                sweep_calc(st, hram, i)  # overflow check on trigger
        if st[i, S_APU_LEN1 + ch] == 0:
            st[i, S_APU_LEN1 + ch] = maxlen
            was_enabled = False  # a reloaded counter takes the extra clock below like an enable
    # enabling length when the next step will not clock it clocks it once now
    if ((v & 0x40) != 0 and not was_enabled and (st[i, S_APU_FS] & 1) != 0
            and st[i, S_APU_LEN1 + ch] != 0):
        n = st[i, S_APU_LEN1 + ch] - 1
        if n == 0:
            if (v & 0x80) != 0:
                n = maxlen - 1
            else:
                disable(st, i, ch)
        st[i, S_APU_LEN1 + ch] = n


@wp.func(inline=False)
def apu_write(st: wp.array2d(dtype=wp.int32), hram: wp.array2d(dtype=wp.uint8), i: int, r: int,
              v: int):
    """Write FF10-FF3F (the caller has caught the clock up)."""
    if r >= WAVE_RAM:
        if (st[i, S_APU_ACT] & CH3) != 0:
            if wave_hit(st, i):
                hram[i, WAVE_RAM + (st[i, S_APU_WAVE_POS] >> 1)] = wp.uint8(v)
            return
        hram[i, r] = wp.uint8(v)
        return
    if r == NR52:
        power(st, hram, i, v)
        return
    if r > NR52:
        return
    on = (int(hram[i, NR52]) & 0x80) != 0
    if r == NR50 or r == NR51:
        if on:
            hram[i, r] = wp.uint8(v)
        return
    ch = (r - NR10) // 5
    k = (r - NR10) - 5 * ch
    if k == 1:
        # NRx1: length load (DMG: also while powered off, without the duty bits)
        if ch == 2:
            st[i, S_APU_LEN1 + 2] = 256 - v
        else:
            st[i, S_APU_LEN1 + ch] = 64 - (v & 63)
        if not on and ch != 2:
            v = v & 0x3F
        hram[i, r] = wp.uint8(v)
        return
    if not on:
        return
    if k == 0:
        if ch == 0:
            if (st[i, S_APU_SW_FLAGS] & 2) != 0 and (v & 8) == 0:
                disable(st, i, 0)  # negate cleared after a calculation in negate mode
            hram[i, r] = wp.uint8(v)
        elif ch == 2:
            hram[i, r] = wp.uint8(v)
            if (v & 0x80) == 0:
                disable(st, i, 2)
        return
    if k == 2:
        hram[i, r] = wp.uint8(v)
        if ch != 2 and (v & 0xF8) == 0:
            disable(st, i, ch)
        return
    if k == 3:
        hram[i, r] = wp.uint8(v)
        return
    nrx4_write(st, hram, i, ch, v)


__all__ = ["apu_advance", "apu_div_write", "apu_read", "apu_write"]
