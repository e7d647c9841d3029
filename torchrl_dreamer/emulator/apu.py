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
"Gameboy sound hardware" (obscure behaviour), blargg's dmg_sound test sources; the wave channel's
trigger delay, the same-cycle wave RAM access, the retrigger corruption pattern and the skipped
first step at power-on as SameBoy's APU notes describe the DMG (the dmg_sound wave tests pin
the first three: they read and write wave RAM at every 2-cycle offset from a trigger).

The Game Boy Color's APU (``S_CGB`` set, either mode) differs where the tests probe: power-off
clears the length counters and NRx1 writes are ignored while powered off, a CPU access to wave
RAM while the wave channel plays reaches the byte being played at any time, and a retrigger does
not corrupt wave RAM (blargg's cgb_sound; Pan Docs "Audio details", obscure behaviour). In
Color mode, from the SameSuite hardware tables (``test/emulator/test_cgb_pcm.py``): an NRx2
write to a playing channel changes its volume (:func:`nrx2_glitch`) and switching its envelope
on ticks it once more (:func:`envelope_bug_ticks`); a sweep step's second overflow check, a shift-0
step's check and a trigger's check come later (:data:`SWEEP_CHECK_DOTS`,
:data:`UNSHIFTED_CHECK_DOTS`, :data:`TRIGGER_CHECK_DOTS`), a step just after a trigger keeps
the trigger's calculation (:data:`RESTART_HOLD_DOTS`), and the
sweep's frequency write follows :func:`~.apu_pcm.square_freq_write` as a CPU write does.

State: registers live in ``m.hram[i, 0x10..0x3F]`` as written (NR52: bit 7 only); the internal
state is in the ``S_APU_*`` columns of the state table (see :mod:`.layout`).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.apu_pcm import (
    noise_nr43_write,
    noise_trigger,
    pcm_advance,
    pcm_div_write,
    square_freq_write,
    square_period,
    square_trigger,
    wave_hold,
)
from torchrl_dreamer.emulator.layout import (
    MODEL_CGB,
    S_APU_ACT,
    S_APU_ENV1,
    S_APU_FS,
    S_APU_LEN1,
    S_APU_LEN_EN,
    S_APU_NOISE_CTR,
    S_APU_NOISE_PEND,
    S_APU_PH,
    S_APU_SKIP,
    S_APU_SQ1_POS,
    S_APU_SQ2_POS,
    S_APU_SW_FLAGS,
    S_APU_SW_FREQ,
    S_APU_SW_TIMER,
    S_APU_WAVE_CNT,
    S_APU_WAVE_OUT,
    S_APU_WAVE_PER,
    S_APU_WAVE_POS,
    S_CGB,
    S_DIV16,
    S_SPEED,
)
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import (
    R_NR10,
    R_NR11,
    R_NR12,
    R_NR13,
    R_NR14,
    R_NR21,
    R_NR22,
    R_NR24,
    R_NR30,
    R_NR32,
    R_NR33,
    R_NR34,
    R_NR42,
    R_NR43,
    R_NR44,
    R_NR50,
    R_NR51,
    R_NR52,
    R_WAVE,
)

# NR52 status bit of the wave channel (channel 3 is index 2)
CH3 = wp.constant(4)
# The wave channel's first sample fetch comes this many T-cycles after one period from a trigger.
WAVE_TRIGGER_DELAY = wp.constant(6)
# A retrigger corrupts wave RAM when the channel's next fetch is this many T-cycles away.
WAVE_CORRUPT_CNT = wp.constant(2)


@wp.func
def apu_read_mask(r: int) -> int:
    """Bits of FF10-FF2F that read as 1 (unused bits, write-only registers, unmapped addresses)."""
    if r == R_NR10:
        return 0x80
    if r == R_NR11 or r == R_NR21:
        return 0x3F
    if r == R_NR12 or r == R_NR22 or r == R_NR42 or r == R_NR43 or r == R_NR50 or r == R_NR51:
        return 0
    if r == R_NR14 or r == R_NR24 or r == R_NR34 or r == R_NR44:
        return 0xBF
    if r == R_NR30:
        return 0x7F
    if r == R_NR32:
        return 0x9F
    return 0xFF  # NR13, NR23, NR31, NR33, NR41 (write-only), FF15, FF1F, FF27-FF2F (unused)


@wp.func
def wave_period(i: int, m: wp.ref[Mem]) -> int:
    """T-cycles between two wave sample fetches: ``(2048 - frequency) * 2``."""
    i = console(i)
    f = int(m.hram[i, R_NR33]) | ((int(m.hram[i, R_NR34]) & 7) << 8)
    return (2048 - f) * 2


@wp.func
def wave_hit(i: int, m: wp.ref[Mem]) -> bool:
    """True when the playing wave channel fetched its sample in this very cycle."""
    i = console(i)
    return m.st[i, S_APU_WAVE_CNT] == m.st[i, S_APU_WAVE_PER]


@wp.func
def dac_on(i: int, m: wp.ref[Mem], ch: int) -> bool:
    """Whether channel ``ch``'s DAC is powered (NRx2 bits 3-7; NR30 bit 7 for the wave channel)."""
    i = console(i)
    if ch == 2:
        return (int(m.hram[i, R_NR30]) & 0x80) != 0
    return (int(m.hram[i, R_NR12 + 5 * ch]) & 0xF8) != 0


@wp.func
def color(i: int, m: wp.ref[Mem]) -> bool:
    """A Game Boy Color (either mode): its APU differs in the ways listed in the module docs."""
    i = console(i)
    return m.st[i, S_CGB] != 0


@wp.func
def disable(i: int, m: wp.ref[Mem], ch: int):
    """Clear channel ``ch``'s NR52 status bit."""
    i = console(i)
    m.st[i, S_APU_ACT] = m.st[i, S_APU_ACT] & (0xF ^ (1 << ch))


# ----------------------------------------------------------------------------- frame sequencer
@wp.func(inline=False)
def length_clock(i: int, m: wp.ref[Mem]):
    """Frame-sequencer length step: enabled non-zero counters count down; 0 disables the channel."""
    i = console(i)
    en = m.st[i, S_APU_LEN_EN]
    for ch in range(4):
        if (en & (1 << ch)) != 0:
            n = m.st[i, S_APU_LEN1 + ch]
            if n > 0:
                m.st[i, S_APU_LEN1 + ch] = n - 1
                if n == 1:
                    disable(i, m, ch)


SWEEP_CHECK_DOTS = wp.constant(32)
"""Dots from a sweep step to the overflow check of its second calculation in Color mode
(SameSuite ``channel_1_sweep``: "8 cycles after [the sweep], the APU checks if the NEXT
[calculation] overflows the frequency. If it does, stop the channel"); a DMG checks at once."""


TRIGGER_CHECK_DOTS = wp.constant(36)
"""Dots from a trigger of channel 1 (sweep shift not 0) to its overflow check in Color mode
(SameSuite ``channel_1_sweep_restart``: a trigger whose calculation overflows leaves the
channel on for 9 M-cycles); a DMG checks at once."""


UNSHIFTED_CHECK_DOTS = wp.constant(4)
"""Dots from a sweep step with shift 0 to its overflow check (frequency + frequency) in Color
mode (SameSuite ``channel_1_sweep_restart_2``: the channel stops in the M-cycle after the step;
1-4 fit); a DMG checks at once."""


RESTART_HOLD_DOTS = wp.constant(10)
"""Dots after a trigger of channel 1 during which a sweep step does not recalculate in Color
mode: the step keeps the trigger's calculation (SameSuite ``channel_1_sweep_restart_2``, shift
0: a restart 12 dots before the step stops the channel there, one 8 dots before leaves it on;
so 9-12 fit, 10 is taken). On a DMG a step always recalculates."""

SW_UNSHIFTED = wp.constant(4)
"""``S_APU_SW_FLAGS`` bit 2: the pending check is a shift-0 step's (frequency + frequency).
The column's other fields: bit 0 the sweep is on, bit 1 a calculation used negate mode, bits
4-7 the dots left of :data:`RESTART_HOLD_DOTS`, bits 8 and up the dots to the pending check."""


@wp.func
def sweep_calc(i: int, m: wp.ref[Mem]) -> int:
    """New sweep frequency from the shadow frequency; above 2047 disables channel 1."""
    i = console(i)
    nr10 = int(m.hram[i, R_NR10])
    f = m.st[i, S_APU_SW_FREQ]
    nf = f + (f >> (nr10 & 7))
    if (nr10 & 8) != 0:
        nf = f - (f >> (nr10 & 7))
        m.st[i, S_APU_SW_FLAGS] = m.st[i, S_APU_SW_FLAGS] | 2  # a calculation used negate mode
    if nf > 2047:
        disable(i, m, 0)
    return nf


@wp.func(inline=False)
def sweep_clock(i: int, m: wp.ref[Mem]):
    """Frame-sequencer sweep step (128 Hz)."""
    i = console(i)
    t = m.st[i, S_APU_SW_TIMER] - 1
    if t <= 0:
        nr10 = int(m.hram[i, R_NR10])
        per = (nr10 >> 4) & 7
        t = per
        if per == 0:
            t = 8
        flags = m.st[i, S_APU_SW_FLAGS]
        if (flags & 1) == 0 or per == 0:
            pass
        elif m.st[i, S_CGB] == MODEL_CGB and (flags & 0xF0) != 0:
            pass  # just after a trigger: the step keeps the trigger's calculation
        elif m.st[i, S_CGB] == MODEL_CGB and (nr10 & 7) == 0:
            if (nr10 & 8) != 0:
                flags = flags | 2  # a calculation in negate mode (its result cannot overflow)
            m.st[i, S_APU_SW_FLAGS] = (flags & 0xFF) | SW_UNSHIFTED | (UNSHIFTED_CHECK_DOTS << 8)
        else:
            nf = sweep_calc(i, m)
            if nf <= 2047 and (nr10 & 7) != 0:
                m.st[i, S_APU_SW_FREQ] = nf
                per0 = square_period(i, m, 0)
                m.hram[i, R_NR13] = wp.uint8(nf & 0xFF)
                m.hram[i, R_NR14] = wp.uint8((int(m.hram[i, R_NR14]) & 0xF8) | (nf >> 8))
                if m.st[i, S_CGB] == MODEL_CGB:
                    square_freq_write(i, m, 0, per0)
                    # Color mode: the second calculation's overflow check comes later
                    m.st[i, S_APU_SW_FLAGS] = (m.st[i, S_APU_SW_FLAGS] & 0xFF) | (
                        SWEEP_CHECK_DOTS << 8)
                else:
                    sweep_calc(i, m)
    m.st[i, S_APU_SW_TIMER] = t


@wp.func(inline=False)
def sweep_check_due(i: int, m: wp.ref[Mem]):
    """The delayed overflow check of a sweep step (Color mode, :data:`SWEEP_CHECK_DOTS`): the
    calculation with NR10 as it is now (none if its shift is 0 by then) disables channel 1 if
    the frequency overflows."""
    i = console(i)
    flags = m.st[i, S_APU_SW_FLAGS]
    m.st[i, S_APU_SW_FLAGS] = flags & (0xFF ^ SW_UNSHIFTED)
    if (m.st[i, S_APU_ACT] & 1) != 0:
        if (flags & SW_UNSHIFTED) != 0:
            if (flags & 2) == 0 and m.st[i, S_APU_SW_FREQ] * 2 > 2047:
                disable(i, m, 0)
        elif (int(m.hram[i, R_NR10]) & 7) != 0:
            sweep_calc(i, m)


@wp.func(inline=False)
def pcm_span(i: int, m: wp.ref[Mem], dots: int):
    """:func:`~.apu_pcm.pcm_advance` by ``dots``, stopping at a pending sweep check on the way."""
    i = console(i)
    hold = (m.st[i, S_APU_SW_FLAGS] >> 4) & 15
    if hold > 0:
        m.st[i, S_APU_SW_FLAGS] = m.st[i, S_APU_SW_FLAGS] - (wp.min(hold, dots) << 4)
    due = m.st[i, S_APU_SW_FLAGS] >> 8
    if due > 0 and due <= dots:
        pcm_advance(i, m, due)
        sweep_check_due(i, m)
        pcm_advance(i, m, dots - due)
    else:
        if due > 0:
            m.st[i, S_APU_SW_FLAGS] = m.st[i, S_APU_SW_FLAGS] - (dots << 8)
        pcm_advance(i, m, dots)


@wp.func
def env_slot(ch: int) -> int:
    """The ``APU_ENVx`` column of channel ``ch`` (0, 1 or 3: the channels with an envelope)."""
    if ch == 3:
        return 2
    return ch


ENV_BUG = wp.constant(0x100)
"""APU_ENVx bit: the envelope was just enabled (Color mode), so the next frame-sequencer step
that does not clock the length counters also ticks it (:func:`envelope_bug_ticks`)."""


@wp.func
def envelope_tick(i: int, m: wp.ref[Mem], k: int):
    """One envelope tick of channel 1, 2 or 4 (``k`` 0, 1, 2) if it plays with a non-zero
    period: the countdown runs out every period, moving the volume +-1 within 0..15."""
    i = console(i)
    ch = k + k // 2  # channel 0, 1 or 3 (the inverse of env_slot)
    nrx2 = int(m.hram[i, R_NR12 + 5 * ch])
    per = nrx2 & 7
    if per != 0 and (m.st[i, S_APU_ACT] & (1 << ch)) != 0:
        e = m.st[i, S_APU_ENV1 + k]
        vol = e & 15
        t = ((e >> 4) & 15) - 1
        if t <= 0:
            t = per
            if (nrx2 & 8) != 0 and vol < 15:
                vol = vol + 1
            if (nrx2 & 8) == 0 and vol > 0:
                vol = vol - 1
        m.st[i, S_APU_ENV1 + k] = vol | (t << 4) | (e & ENV_BUG)


@wp.func(inline=False)
def envelope_clock(i: int, m: wp.ref[Mem]):
    """Frame-sequencer envelope step (64 Hz) of channels 1, 2 and 4 (the playing ones; a trigger
    reloads the envelope): volume +-1 every period."""
    i = console(i)
    for k in range(3):
        envelope_tick(i, m, k)


@wp.func
def envelope_bug_pending(i: int, m: wp.ref[Mem]) -> int:
    """Non-zero while an enabled envelope waits for its extra tick (:data:`ENV_BUG`)."""
    i = console(i)
    return (m.st[i, S_APU_ENV1] | m.st[i, S_APU_ENV1 + 1] | m.st[i, S_APU_ENV1 + 2]) & ENV_BUG


@wp.func(inline=False)
def envelope_bug_ticks(i: int, m: wp.ref[Mem]):
    """The first frame-sequencer step without a length clock after an NRx2 write enabled a
    playing channel's envelope (period 0 to non-zero) in Color mode: that envelope ticks once
    more (SameSuite ``channel_1_nrx2_speed_change``: "in the next *even* DIV-APU tick, the APU
    will tick the volume envelope of that appropriate channel, even if it would not tick
    volume envelope at that tick otherwise"; its hardware table puts that tick on the steps
    between the length clocks)."""
    i = console(i)
    for k in range(3):
        e = m.st[i, S_APU_ENV1 + k]
        if (e & ENV_BUG) != 0:
            m.st[i, S_APU_ENV1 + k] = e & 0xFF
            envelope_tick(i, m, k)


@wp.func(inline=False)
def nrx2_glitch(i: int, m: wp.ref[Mem], ch: int, old: int, new: int):
    """A Color's NRx2 write to playing channel ``ch`` (0, 1 or 3) changes its volume ("zombie
    mode"): to a rising envelope, +1 if the old period was 0, else +2 if the old envelope fell;
    to a falling one, a step in the old direction if the old period was 0 and the new is not;
    then 16 - volume if the direction changed; modulo 16. Facts: SameSuite's
    ``channel_1_volume`` hardware table (old and new NRx2 with periods 0 and 1, both
    directions; ``test_cgb_pcm.py``); the rising half is Pan Docs' "Obscure Behavior" rule. Not
    modelled: an envelope that has stopped at 0 or 15, which Pan Docs says changes the rule."""
    i = console(i)
    k = env_slot(ch)
    e = m.st[i, S_APU_ENV1 + k]
    vol = e & 15
    old_add = (old & 8) != 0
    new_add = (new & 8) != 0
    old_p0 = (old & 7) == 0
    if new_add:
        if old_p0:
            vol = vol + 1
        elif not old_add:
            vol = vol + 2
    elif old_p0 and (new & 7) != 0:
        if old_add:
            vol = vol + 1
        else:
            vol = vol - 1
    if old_add != new_add:
        vol = 16 - vol
    m.st[i, S_APU_ENV1 + k] = (e & ~15) | (vol & 15)


@wp.func(inline=False)
def frame_steps(i: int, m: wp.ref[Mem], n: int):
    """Run ``n`` frame-sequencer steps (none while the APU is off).

    ``S_APU_FS`` counts steps since power-on modulo 8: after step k (0-based) it holds k + 1, so
    an odd value means the step just run clocked the length counters.
    """
    i = console(i)
    if (int(m.hram[i, R_NR52]) & 0x80) == 0:
        return
    k = n
    if m.st[i, S_APU_SKIP] != 0:
        m.st[i, S_APU_SKIP] = 0
        k = k - 1
    fs = m.st[i, S_APU_FS]
    for _k in range(k):
        fs = (fs + 1) & 7
        m.st[i, S_APU_FS] = fs
        if (fs & 1) != 0:
            length_clock(i, m)
        elif envelope_bug_pending(i, m) != 0:
            envelope_bug_ticks(i, m)
        if (fs & 3) == 3:
            sweep_clock(i, m)
        if fs == 0:
            envelope_clock(i, m)


@wp.func(inline=False)
def wave_fetches(i: int, m: wp.ref[Mem], w: int):
    """The wave channel's countdown reached ``w <= 0``: account for every fetch up to now."""
    i = console(i)
    p = wave_period(i, m)
    n = 1 + (-w) // p
    m.st[i, S_APU_WAVE_POS] = (m.st[i, S_APU_WAVE_POS] + n) & 31
    m.st[i, S_APU_WAVE_CNT] = w + n * p
    m.st[i, S_APU_WAVE_PER] = p


@wp.func(inline=True)
def fs_advance(i: int, m: wp.ref[Mem], n: int):
    """Run ``n`` frame-sequencer steps; steps with no length counter or sweep enabled and no
    envelope step of a playing channel among them only move the step count (no call out)."""
    i = console(i)
    fs = m.st[i, S_APU_FS] + n
    if ((m.st[i, S_APU_LEN_EN] | (m.st[i, S_APU_SW_FLAGS] & 1) | m.st[i, S_APU_SKIP]
         | envelope_bug_pending(i, m)) == 0
            and (fs < 8 or (m.st[i, S_APU_ACT] & 0xB) == 0)):
        m.st[i, S_APU_FS] = fs & 7  # (while powered off too: power-on resets it)
    else:
        frame_steps(i, m, n)


@wp.func(inline=False)
def color_advance(i: int, m: wp.ref[Mem], div_before: int, cycles: int, n: int):
    """Color mode: the frame-sequencer steps of the span in order with the square channels'
    duty steps (:func:`~.apu_pcm.pcm_advance`), so a sweep's new frequency or a length that
    ends at a step applies from that step's time on, not to the whole span."""
    i = console(i)
    done = int(0)  # noqa: UP018 (Warp: a dynamic variable)
    if (m.st[i, S_APU_ACT] & 3) != 0:
        for k in range(n):
            edge = (((div_before >> 13) + k + 1) << 13) - div_before
            pcm_span(i, m, edge - done)
            done = edge
            fs_advance(i, m, 1)
    elif n > 0:
        fs_advance(i, m, n)
    pcm_span(i, m, cycles - done)


@wp.func(inline=True)
def apu_advance(i: int, m: wp.ref[Mem], div_before: int, cycles: int):
    """Catch the APU up by ``cycles`` T-cycles; ``div_before`` is the 16-bit divider before them.

    Frame-sequencer steps are the falling edges of divider bit 12 in the span; the wave channel
    (while on) moves by whole sample periods. Both are O(1) unless something is due (see
    :func:`fs_advance`). In Color mode :func:`color_advance` also moves what PCM12 / PCM34 read.
    """
    i = console(i)
    n = ((div_before + cycles) >> 13) - (div_before >> 13)
    if m.st[i, S_CGB] == MODEL_CGB:
        color_advance(i, m, div_before, cycles, n)
    elif n > 0:
        fs_advance(i, m, n)
    if (m.st[i, S_APU_ACT] & CH3) != 0:
        w = m.st[i, S_APU_WAVE_CNT] - cycles
        if w <= 0:
            wave_fetches(i, m, w)
        else:
            m.st[i, S_APU_WAVE_CNT] = w


@wp.func
def apu_div_write(i: int, m: wp.ref[Mem]):
    """A DIV write resets the divider: with bit 12 set (13 in the Color's double speed) that is a
    falling edge (one step)."""
    i = console(i)
    if (m.st[i, S_DIV16] & (0x1000 << m.st[i, S_SPEED])) != 0:  # bit 13 in double speed
        frame_steps(i, m, 1)
    if m.st[i, S_CGB] == MODEL_CGB:
        pcm_div_write(i, m)  # the square channels' clock loses a tick (apu_pcm.py)


# ------------------------------------------------------------------------------- registers
@wp.func(inline=False)
def apu_read(i: int, m: wp.ref[Mem], r: int) -> int:
    """Read FF10-FF3F (the caller has caught the clock up)."""
    i = console(i)
    if r >= R_WAVE:
        if (m.st[i, S_APU_ACT] & CH3) != 0:
            if wave_hit(i, m) or color(i, m):
                return int(m.hram[i, R_WAVE + (m.st[i, S_APU_WAVE_POS] >> 1)])
            return 0xFF
        return int(m.hram[i, r])
    if r == R_NR52:
        return (int(m.hram[i, R_NR52]) & 0x80) | 0x70 | m.st[i, S_APU_ACT]
    return int(m.hram[i, r]) | apu_read_mask(r)


@wp.func(inline=False)
def power(i: int, m: wp.ref[Mem], v: int):
    """NR52 write: bit 7 powers the APU on or off."""
    i = console(i)
    was_on = (int(m.hram[i, R_NR52]) & 0x80) != 0
    if (v & 0x80) != 0 and not was_on:
        m.hram[i, R_NR52] = wp.uint8(0x80)
        m.st[i, S_APU_FS] = 0  # the next step is step 0
        m.st[i, S_APU_SKIP] = 0
        m.st[i, S_APU_PH] = 0  # the channels' 1 MHz clock starts at power-on (apu_pcm.py)
        if (m.st[i, S_DIV16] & (0x1000 << m.st[i, S_SPEED])) != 0:  # bit 13 in double speed
            m.st[i, S_APU_SKIP] = 1  # bit 12 already set: its next falling edge is not a step
    if (v & 0x80) == 0 and was_on:
        for r in range(R_NR10, R_NR52 + 1):
            m.hram[i, r] = wp.uint8(0)
        m.st[i, S_APU_ACT] = 0
        m.st[i, S_APU_LEN_EN] = 0
        m.st[i, S_APU_SW_FREQ] = 0
        m.st[i, S_APU_SW_TIMER] = 0
        m.st[i, S_APU_SW_FLAGS] = 0
        m.st[i, S_APU_NOISE_CTR] = 0  # the noise counter restarts from 0 (apu_pcm.py)
        for k in range(3):
            m.st[i, S_APU_ENV1 + k] = 0
        # the length counters (S_APU_LEN1..4) keep their values on a DMG; a Color clears them
        if color(i, m):
            for k in range(4):
                m.st[i, S_APU_LEN1 + k] = 0
            m.st[i, S_APU_SQ1_POS] = 0  # the duty steps restart
            m.st[i, S_APU_SQ2_POS] = 0
            m.st[i, S_APU_WAVE_OUT] = 0  # and the wave channel's output buffer clears
            m.st[i, S_APU_WAVE_PER] = 0  # (no fetch since power-on to hold)


@wp.func(inline=False)
def wave_trigger(i: int, m: wp.ref[Mem]):
    """Restart the wave channel's position; retriggering just before a fetch corrupts wave RAM."""
    i = console(i)
    if ((m.st[i, S_APU_ACT] & CH3) != 0 and m.st[i, S_APU_WAVE_CNT] == WAVE_CORRUPT_CNT
            and not color(i, m)):
        b = ((m.st[i, S_APU_WAVE_POS] + 1) >> 1) & 15  # the byte the fetch would have read
        if b < 4:
            m.hram[i, R_WAVE] = m.hram[i, R_WAVE + b]
        else:
            src = R_WAVE + (b & 12)
            for k in range(4):
                m.hram[i, R_WAVE + k] = m.hram[i, src + k]
    if m.st[i, S_CGB] == MODEL_CGB:
        wave_hold(i, m)  # what PCM34 reads until the first fetch (apu_pcm.py)
    m.st[i, S_APU_WAVE_POS] = 0
    m.st[i, S_APU_WAVE_CNT] = wave_period(i, m) + WAVE_TRIGGER_DELAY
    m.st[i, S_APU_WAVE_PER] = 0  # no fetch since the trigger


@wp.func
def freq_reg_write(i: int, m: wp.ref[Mem], ch: int, r: int, v: int):
    """Write register ``r`` (NRx3 or NRx4) of channel ``ch``; in Color mode a playing square
    channel's countdown may take the new period at once (:func:`~.apu_pcm.square_freq_write`)."""
    i = console(i)
    if ch < 2 and m.st[i, S_CGB] == MODEL_CGB:
        per = square_period(i, m, ch)
        m.hram[i, r] = wp.uint8(v)
        square_freq_write(i, m, ch, per)
    else:
        m.hram[i, r] = wp.uint8(v)


@wp.func(inline=False)
def nrx4_write(i: int, m: wp.ref[Mem], ch: int, v: int):
    """NR14/NR24/NR34/NR44: frequency high bits, length enable, trigger."""
    i = console(i)
    r = R_NR14 + 5 * ch
    bit = 1 << ch
    was_enabled = (m.st[i, S_APU_LEN_EN] & bit) != 0
    freq_reg_write(i, m, ch, r, v)  # (a trigger below restarts the countdown anyway)
    if (v & 0x40) != 0:
        m.st[i, S_APU_LEN_EN] = m.st[i, S_APU_LEN_EN] | bit
    else:
        m.st[i, S_APU_LEN_EN] = m.st[i, S_APU_LEN_EN] & (0xF ^ bit)
    maxlen = 64
    if ch == 2:
        maxlen = 256
    if (v & 0x80) != 0:
        if ch == 2:
            wave_trigger(i, m)
        elif m.st[i, S_CGB] == MODEL_CGB:
            if ch == 3:
                noise_trigger(i, m)
            else:
                square_trigger(i, m, ch)
        if dac_on(i, m, ch):
            m.st[i, S_APU_ACT] = m.st[i, S_APU_ACT] | bit
        if ch != 2:
            nrx2 = int(m.hram[i, R_NR12 + 5 * ch])
            m.st[i, S_APU_ENV1 + env_slot(ch)] = (nrx2 >> 4) | ((nrx2 & 7) << 4)
        if ch == 0:
            nr10 = int(m.hram[i, R_NR10])
            m.st[i, S_APU_SW_FREQ] = int(m.hram[i, R_NR13]) | ((v & 7) << 8)
            t = (nr10 >> 4) & 7
            if t == 0:
                t = 8
            m.st[i, S_APU_SW_TIMER] = t
            m.st[i, S_APU_SW_FLAGS] = 0
            if (nr10 & 0x77) != 0:
                m.st[i, S_APU_SW_FLAGS] = 1
            if m.st[i, S_CGB] == MODEL_CGB:
                m.st[i, S_APU_SW_FLAGS] = m.st[i, S_APU_SW_FLAGS] | (RESTART_HOLD_DOTS << 4)
            if (nr10 & 7) != 0:
                if m.st[i, S_CGB] == MODEL_CGB:  # overflow check on trigger, later in Color mode
                    m.st[i, S_APU_SW_FLAGS] = m.st[i, S_APU_SW_FLAGS] | (TRIGGER_CHECK_DOTS << 8)
                else:
                    sweep_calc(i, m)  # overflow check on trigger
        if m.st[i, S_APU_LEN1 + ch] == 0:
            m.st[i, S_APU_LEN1 + ch] = maxlen
            was_enabled = False  # a reloaded counter takes the extra clock below like an enable
    # enabling length when the next step will not clock it clocks it once now; the DIV event
    # skipped after a power-on with the divider bit set counts as such a step (SameSuite
    # div_write_trigger_10)
    if ((v & 0x40) != 0 and not was_enabled
            and ((m.st[i, S_APU_FS] & 1) != 0 or m.st[i, S_APU_SKIP] != 0)
            and m.st[i, S_APU_LEN1 + ch] != 0):
        n = m.st[i, S_APU_LEN1 + ch] - 1
        if n == 0:
            if (v & 0x80) != 0:
                n = maxlen - 1
            else:
                disable(i, m, ch)
        m.st[i, S_APU_LEN1 + ch] = n


@wp.func(inline=False)
def apu_write(i: int, m: wp.ref[Mem], r: int, v: int):
    """Write FF10-FF3F (the caller has caught the clock up)."""
    i = console(i)
    if r >= R_WAVE:
        if (m.st[i, S_APU_ACT] & CH3) != 0:
            if wave_hit(i, m) or color(i, m):
                m.hram[i, R_WAVE + (m.st[i, S_APU_WAVE_POS] >> 1)] = wp.uint8(v)
            return
        m.hram[i, r] = wp.uint8(v)
        return
    if r == R_NR52:
        power(i, m, v)
        return
    if r > R_NR52:
        return
    on = (int(m.hram[i, R_NR52]) & 0x80) != 0
    if r == R_NR50 or r == R_NR51:
        if on:
            m.hram[i, r] = wp.uint8(v)
        return
    ch = (r - R_NR10) // 5
    k = (r - R_NR10) - 5 * ch
    if k == 1:
        # NRx1: length load (DMG: also while powered off, without the duty bits; a Color
        # ignores it then, as every other register)
        if not on and color(i, m):
            return
        if ch == 2:
            m.st[i, S_APU_LEN1 + 2] = 256 - v
        else:
            m.st[i, S_APU_LEN1 + ch] = 64 - (v & 63)
        if not on and ch != 2:
            v = v & 0x3F
        m.hram[i, r] = wp.uint8(v)
        return
    if not on:
        return
    if k == 0:
        if ch == 0:
            if (m.st[i, S_APU_SW_FLAGS] & 2) != 0 and (v & 8) == 0:
                disable(i, m, 0)  # negate cleared after a calculation in negate mode
            m.hram[i, r] = wp.uint8(v)
        elif ch == 2:
            m.hram[i, r] = wp.uint8(v)
            if (v & 0x80) == 0:
                disable(i, m, 2)
        return
    if k == 2:
        if ch != 2 and color(i, m) and (m.st[i, S_APU_ACT] & (1 << ch)) != 0:
            nrx2_glitch(i, m, ch, int(m.hram[i, r]), v)
            if (int(m.hram[i, r]) & 7) == 0 and (v & 7) != 0:
                m.st[i, S_APU_ENV1 + env_slot(ch)] = m.st[i, S_APU_ENV1 + env_slot(ch)] | ENV_BUG
        m.hram[i, r] = wp.uint8(v)
        if ch != 2 and (v & 0xF8) == 0:
            disable(i, m, ch)
        return
    if k == 3:
        if ch == 3 and m.st[i, S_CGB] == MODEL_CGB:
            step = noise_nr43_write(i, m, v)  # the shifts so far ran with the old NR43
            m.hram[i, r] = wp.uint8(v)
            m.st[i, S_APU_NOISE_PEND] = step  # a shift at once, in the new width
            return
        freq_reg_write(i, m, ch, r, v)
        return
    nrx4_write(i, m, ch, v)


__all__ = ["apu_advance", "apu_div_write", "apu_read", "apu_write"]
