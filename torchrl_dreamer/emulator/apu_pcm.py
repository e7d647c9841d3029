"""The Game Boy Color's PCM12 / PCM34 registers: the four channels' current amplitudes.

FF76 reads channel 1's amplitude in bits 0-3 and channel 2's in bits 4-7, FF77 channels 3 and 4
(Pan Docs "Audio Registers", "PCM12/PCM34"). An amplitude is the channel's digital output
before its DAC: 0 while the channel is off, else

- square channels 1, 2: the envelope's volume where the duty waveform (NRx1 bits 6-7: 12.5,
  25, 50, 75 %) was high at the channel's last step, 0 where it was low: the output is latched
  at each step, so a duty change shows from the next step on. The waveform advances one of
  its 8 steps every ``(2048 - frequency) * 4`` dots, counted at 1 MHz from the APU's power-on
  (every 4 dots from the NR52 write, in either CPU speed). A trigger of a silent channel makes
  its first step ``period + 8`` dots later, its output 0 until then; a trigger of a playing one
  ``period + 4`` dots later, the duty position and output carrying on; both rounded up to the
  1 MHz grid. A DIV write delays the next steps by one 1 MHz tick (4 dots). A step's countdown
  takes the frequency up to 4 dots after the step (:func:`square_freq_write`). Power-off resets
  both channels' positions;
- wave channel 3: the current 4-bit sample shifted by the output level (NR32: mute, 100, 50,
  25 %; a change shows at once). After a trigger the output buffer keeps the sample last
  fetched (0 after power-on) until the first fetch, a sample period plus 6 dots later, which
  reads sample 1 (the fetch of sample 0 is skipped);
- noise channel 4: the envelope's volume when bit 0 of the LFSR is set. A 14-bit counter
  counts every 4 dots (NR43 divisor code 0) or 8 x code dots while the channel plays, and the
  15-bit LFSR shifts at each rising edge of its bit ``NR43 >> 4`` (every ``divisor << shift``
  dots, divisor 8 for code 0, else 16 x code), its new top bit (and bit 6 in 7-bit mode) the
  XNOR of bits 0 and 1; a trigger clears the LFSR and reloads the counter's countdown
  (:func:`noise_trigger`: from silence after power-on the first shift comes half a shift
  period plus 8 dots later), power-off clears the counter, and an NR43 write while it plays
  can shift the LFSR at once (:func:`noise_nr43_write`).

Time, lazily as everywhere (:mod:`.apu`): the duty step and the dots to the next one advance
at each catch-up (:func:`pcm_advance`, called for a console in Color mode only: a DMG or the
compatibility mode pays one comparison), and the noise counter's increments and the LFSR shifts they make
are counted there (:func:`noise_advance`) but applied when PCM34 is read or NR43 changes
(:func:`noise_flush`): the LFSR's output repeats every 32767
shifts (127 in 7-bit mode), so the count is kept modulo both periods' product.
The square channels' timing rules are the hardware results published with the SameSuite APU
tests (``LIJI32/SameSuite``, ``apu/channel_1`` and ``apu/channel_2``: ``delay``, ``duty``,
``duty_delay``, ``restart``, ``stop_restart``, ``freq_change``, ``align``, ``align_cpu``,
``volume_div``, ``stop_div``), checked by micro ROMs of our own that follow their
protocols (``test/emulator/test_cgb_pcm.py``), and so are the wave channel's start
(``channel_3_delay``, ``channel_3_first_sample``, ``channel_3_restart_delay``,
``channel_3_shift_delay``) and the noise channel's first shift
(``channel_4_delay``), the LFSR's sequence (``channel_4_lfsr``, ``channel_4_lfsr_7_15``) and
its counter (``channel_4_lfsr_restart``, ``channel_4_freq_change``).
The NRx2 write's effect on the volume is :func:`~.apu.nrx2_glitch`. Not modelled: the other
SameSuite probes (length clocking and frequency-change timing of other revisions).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_APU_ACT,
    S_APU_ENV1,
    S_APU_LFSR,
    S_APU_NOISE_CNT,
    S_APU_NOISE_CTR,
    S_APU_NOISE_PEND,
    S_APU_PH,
    S_APU_SQ1_CNT,
    S_APU_SQ1_POS,
    S_APU_WAVE_OUT,
    S_APU_WAVE_PER,
    S_APU_WAVE_POS,
)
from torchrl_dreamer.emulator.memory import Mem, console
from torchrl_dreamer.emulator.registers import (
    R_NR11,
    R_NR13,
    R_NR14,
    R_NR32,
    R_NR43,
    R_WAVE,
)

__all__ = ["pcm_advance", "pcm_div_write", "square_freq_write", "square_period", "square_trigger", "noise_trigger", "noise_flush", "noise_nr43_write", "wave_hold",
           "apu_pcm"]

LFSR_CYCLE = wp.constant(32767 * 127)  # a multiple of both LFSR periods (15 and 7 bits)
TRIGGER_DELAY = wp.constant(8)  # dots a silent square channel's first step waits beyond its period
RETRIGGER_DELAY = wp.constant(4)  # the same for a trigger while it plays
NOISE_COUNTER = wp.constant(0x3FFF)  # APU_NOISE_CTR: the noise channel's 14-bit counter
NOISE_DELTA = wp.constant(1 << 14)  # its flag: the counter's next reload is 4 dots longer
NOISE_RELOADED = wp.constant(1 << 15)  # its flag: the counter was reloaded at the last catch-up
SQ_POS = wp.constant(7)  # duty position bits of APU_SQx_POS
SQ_OUT = wp.constant(8)  # its latched output bit
SQ_FRESH = wp.constant(16)  # its flag: no step since the trigger (the countdown is the delay)
FREQ_RELOAD_LAG = wp.constant(4)  # dots after a duty step in which its reload reads the frequency


@wp.func
def square_period(i: int, m: wp.ref[Mem], ch: int) -> int:
    """Dots per duty step of square channel ``ch`` (0 or 1)."""
    i = console(i)
    f = int(m.hram[i, R_NR13 + 5 * ch]) | ((int(m.hram[i, R_NR14 + 5 * ch]) & 7) << 8)
    return (2048 - f) * 4


@wp.func
def noise_tick(i: int, m: wp.ref[Mem]) -> int:
    """Dots per increment of the noise channel's counter with NR43 as it is
    (:func:`divisor_dots`); the LFSR shifts at every rising edge of the counter's bit
    ``NR43 >> 4``, so once every ``tick << (shift + 1)`` dots."""
    i = console(i)
    return divisor_dots(int(m.hram[i, R_NR43]))


@wp.func
def divisor_dots(nr43: int) -> int:
    """Dots per increment of the noise counter for NR43 value ``nr43``: its divisor code
    (bits 0-2) x 8, 4 for code 0."""
    code = nr43 & 7
    if code == 0:
        return 4
    return code * 8


@wp.func
def noise_phase_wait(ph: int) -> int:
    """Dots the noise counter's (re)load adds with divisor codes 1-7, by the APU's 2 MHz phase
    (``ph``: dots since power-on modulo 8): 4, 2, 0, 6 at phases 0, 2, 4, 6."""
    return ((2 - (ph >> 1)) & 3) * 2


@wp.func
def on_1mhz_grid(i: int, m: wp.ref[Mem], dots: int) -> int:
    """``dots`` from now rounded up to the APU's 1 MHz grid (every 4 dots from its power-on)."""
    i = console(i)
    return dots + ((-(m.st[i, S_APU_PH] + dots)) & 3)


@wp.func
def square_trigger(i: int, m: wp.ref[Mem], ch: int):
    """A trigger restarts the square channel's step countdown (see the module docstring): from
    silence its first step comes ``period + 8`` dots later with the output 0 until then, while
    playing ``period + 4`` dots later with position and output carrying on; rounded up to the
    APU's 1 MHz grid. Called before the trigger sets the channel's NR52 bit."""
    i = console(i)
    delay = TRIGGER_DELAY
    w = m.st[i, S_APU_SQ1_POS + 2 * ch] & (SQ_POS | SQ_OUT)
    if (m.st[i, S_APU_ACT] & (1 << ch)) != 0:
        delay = RETRIGGER_DELAY
    else:
        w = w & SQ_POS
    m.st[i, S_APU_SQ1_POS + 2 * ch] = w | SQ_FRESH
    m.st[i, S_APU_SQ1_CNT + 2 * ch] = on_1mhz_grid(i, m, square_period(i, m, ch) + delay)


@wp.func
def noise_trigger(i: int, m: wp.ref[Mem]):
    """A noise trigger clears the LFSR and reloads the counter's countdown; the counter keeps
    its value (it is cleared only by power-off), so the first shift comes at the next rising
    edge of its bit ``NR43 >> 4``. The countdown is one tick plus 8 dots: with divisor code 0
    (a tick of 4 dots) rounded up to the 1 MHz grid, :func:`on_1mhz_grid` (from silence after
    power-on: half a shift period plus 8 dots, SameSuite ``channel_4_delay``,
    ``channel_4_align``); with codes 1-7 plus :func:`noise_phase_wait`, 8 dots less at phases 0 and 6 where code 1 instead waits 4 dots
    less and its next tick 4 dots more (``channel_4_frequency_alignment``,
    ``channel_4_equivalent_frequencies``: the same period written two ways starts one M-cycle
    apart, depending on the trigger's phase). A retrigger while the channel plays finds the
    counter wherever it is (``channel_4_lfsr_restart`` and ``_restart_fast``: the LFSR restarts
    one shift later than from silence). Called before the trigger sets the channel's NR52 bit."""
    i = console(i)
    m.st[i, S_APU_LFSR] = 0
    m.st[i, S_APU_NOISE_PEND] = 0
    ph = m.st[i, S_APU_PH]
    code = int(m.hram[i, R_NR43]) & 7
    ctr = m.st[i, S_APU_NOISE_CTR] & NOISE_COUNTER
    first = noise_tick(i, m) + 8  # one tick plus 8 dots, then aligned by the phase
    cnt = on_1mhz_grid(i, m, first)
    if code != 0:
        cnt = first + noise_phase_wait(ph)
        if ((ph >> 1) + 1) & 3 < 2:
            if code == 1:
                cnt = cnt - 4
                ctr = ctr | NOISE_DELTA
            else:
                cnt = cnt - 8
    m.st[i, S_APU_NOISE_CNT] = cnt
    m.st[i, S_APU_NOISE_CTR] = ctr


@wp.func
def noise_nr43_write(i: int, m: wp.ref[Mem], v: int) -> int:
    """An NR43 write in Color mode, before the register changes (SameSuite
    ``channel_4_freq_change``): the shifts so far apply with the old NR43; the LFSR shifts once
    more at once (returns 1) if the counter's bit at the new shift is set and at the old one
    is not, reading the counter through a CGB-E glitch (its bit 7, bit 6 with the new NR43 in
    7-bit mode, reads as bits 0-7 all set; bit 12 also sets bit 4); and a countdown reloaded
    at this very moment reloads with the new divisor (:func:`noise_phase_wait` added with
    codes 1-7). The glitch's bit pattern is SameBoy's model of the CGB-E (read for facts),
    which the test's table confirms."""
    i = console(i)
    noise_flush(i, m)
    old = int(m.hram[i, R_NR43])
    ctr = m.st[i, S_APU_NOISE_CTR]
    counter = ctr & NOISE_COUNTER
    eff = counter
    mask = 0x80
    if (v & 8) != 0:
        mask = 0x40
    if (counter & mask) != 0:
        eff = eff | 0xFF
    if (counter & 0x1000) != 0:
        eff = eff | 0x10
    if (ctr & NOISE_RELOADED) != 0:
        cnt = divisor_dots(v)
        if (v & 7) != 0:
            cnt = cnt + noise_phase_wait(m.st[i, S_APU_PH])
        m.st[i, S_APU_NOISE_CNT] = cnt
        m.st[i, S_APU_NOISE_CTR] = ctr & (NOISE_COUNTER | NOISE_RELOADED)
    return ((eff >> (v >> 4)) & 1) & (1 - ((eff >> (old >> 4)) & 1))


@wp.func(inline=False)
def noise_flush(i: int, m: wp.ref[Mem]):
    """Apply the LFSR shifts counted so far (before a read of its output or an NR43 change)."""
    i = console(i)
    n = m.st[i, S_APU_NOISE_PEND]
    if n == 0:
        return
    m.st[i, S_APU_NOISE_PEND] = 0
    short = (int(m.hram[i, R_NR43]) & 8) != 0
    if short:
        n = n % 127
    else:
        n = n % 32767
    x = m.st[i, S_APU_LFSR]
    for _k in range(n):
        nb = ((x ^ (x >> 1)) & 1) ^ 1
        x = (x >> 1) | (nb << 14)
        if short:
            x = (x & ~(1 << 6)) | (nb << 6)
    m.st[i, S_APU_LFSR] = x


@wp.func
def square_freq_write(i: int, m: wp.ref[Mem], ch: int, old_period: int):
    """After an NRx3 / NRx4 write to playing square channel ``ch`` that changed its period from
    ``old_period``: a step's countdown takes the frequency up to :data:`FREQ_RELOAD_LAG` dots
    after the step, so a write that soon after the last step applies to the countdown already
    running (SameSuite ``channel_1_freq_change_timing-cgbDE``: the channel stays on the step
    before the write for writes one M-cycle later than without the lag at normal speed, two in
    double speed)."""
    i = console(i)
    if (m.st[i, S_APU_ACT] & (1 << ch)) == 0:
        return
    c = m.st[i, S_APU_SQ1_CNT + 2 * ch]
    if (m.st[i, S_APU_SQ1_POS + 2 * ch] & SQ_FRESH) == 0 and old_period - c < FREQ_RELOAD_LAG:
        m.st[i, S_APU_SQ1_CNT + 2 * ch] = c + square_period(i, m, ch) - old_period


@wp.func
def noise_advance(i: int, m: wp.ref[Mem], dots: int):
    """Count the noise counter's increments in ``dots`` and the LFSR shifts they make (rising
    edges of its bit ``NR43 >> 4``; none for shifts 14 and 15), to apply later
    (:func:`noise_flush`); flag whether the last increment falls exactly now."""
    i = console(i)
    c = m.st[i, S_APU_NOISE_CNT] - dots
    ctr = m.st[i, S_APU_NOISE_CTR]
    if c <= 0:
        t = noise_tick(i, m)
        per = t
        k = int(1)  # noqa: UP018 (Warp: a dynamic variable)
        if (ctr & NOISE_DELTA) != 0:
            per = t + 4
            c = c + per
            if c <= 0:
                n = 1 + (-c) // t
                c = c + n * t
                k = k + n
                per = t
        else:
            n = (-c) // t
            c = c + (n + 1) * t
            k = k + n
        old = ctr & NOISE_COUNTER
        s = int(m.hram[i, R_NR43]) >> 4
        if s < 14:
            h = 1 << s
            shifts = (old + k + h) // (2 * h) - (old + h) // (2 * h)
            m.st[i, S_APU_NOISE_PEND] = (m.st[i, S_APU_NOISE_PEND] + shifts % LFSR_CYCLE) % LFSR_CYCLE
        ctr = (old + k) & NOISE_COUNTER
        if c == per:
            ctr = ctr | NOISE_RELOADED
    elif dots > 0:
        ctr = ctr & (NOISE_COUNTER | NOISE_DELTA)
    m.st[i, S_APU_NOISE_CNT] = c
    m.st[i, S_APU_NOISE_CTR] = ctr


@wp.func(inline=False)
def pcm_advance(i: int, m: wp.ref[Mem], dots: int):
    """Advance the APU's 1 MHz phase, the square channels' duty steps (latching each one's
    output at its last step) and count the noise channel's shifts by ``dots`` (playing channels
    only)."""
    i = console(i)
    m.st[i, S_APU_PH] = (m.st[i, S_APU_PH] + dots) & 7
    act = m.st[i, S_APU_ACT]
    for ch in range(2):
        if (act & (1 << ch)) != 0:
            c = m.st[i, S_APU_SQ1_CNT + 2 * ch] - dots
            if c <= 0:
                per = square_period(i, m, ch)
                k = 1 + (-c) // per
                c = c + k * per
                pos = (m.st[i, S_APU_SQ1_POS + 2 * ch] + k) & SQ_POS
                duty = int(m.hram[i, R_NR11 + 5 * ch]) >> 6
                if duty_high(duty, pos):
                    pos = pos | SQ_OUT
                m.st[i, S_APU_SQ1_POS + 2 * ch] = pos
            m.st[i, S_APU_SQ1_CNT + 2 * ch] = c
    if (act & 8) != 0:
        noise_advance(i, m, dots)


@wp.func
def pcm_div_write(i: int, m: wp.ref[Mem]):
    """A DIV write: the playing square channels' next steps come one 1 MHz tick (4 dots) later
    (SameSuite ``channel_1_volume_div``, ``channel_2_stop_div``: their steps fall an M-cycle
    after the rule without it, when DIV is reset after the trigger)."""
    i = console(i)
    act = m.st[i, S_APU_ACT]
    for ch in range(2):
        if (act & (1 << ch)) != 0:
            m.st[i, S_APU_SQ1_CNT + 2 * ch] = m.st[i, S_APU_SQ1_CNT + 2 * ch] + 4


@wp.func
def wave_sample(i: int, m: wp.ref[Mem]) -> int:
    """The 4-bit wave sample at the wave channel's position."""
    i = console(i)
    pos = m.st[i, S_APU_WAVE_POS] & 31
    b = int(m.hram[i, R_WAVE + (pos >> 1)])
    if (pos & 1) != 0:
        return b & 15
    return b >> 4


@wp.func
def wave_hold(i: int, m: wp.ref[Mem]):
    """At a wave trigger: the output buffer keeps the sample last fetched (0 since power-on
    if none) until the first fetch after the trigger."""
    i = console(i)
    if m.st[i, S_APU_WAVE_PER] != 0:
        m.st[i, S_APU_WAVE_OUT] = wave_sample(i, m)


@wp.func
def duty_high(duty: int, pos: int) -> bool:
    """Whether step ``pos`` (0-7) of duty pattern ``duty`` is high (12.5 %: step 7; 25 %: 0 and
    7; 50 %: 0 and 5-7; 75 %: 1-6)."""
    if duty == 0:
        return pos == 7
    if duty == 1:
        return pos == 0 or pos == 7
    if duty == 2:
        return pos == 0 or pos >= 5
    return pos >= 1 and pos <= 6


@wp.func(inline=False)
def apu_pcm(i: int, m: wp.ref[Mem], which: int) -> int:
    """PCM12 (``which`` 0) or PCM34 (1): two channels' amplitudes, the lower channel in bits 0-3."""
    i = console(i)
    act = m.st[i, S_APU_ACT]
    lo = int(0)  # noqa: UP018 (Warp: a dynamic variable)
    hi = int(0)  # noqa: UP018 (Warp: a dynamic variable)
    if which == 0:
        for ch in range(2):
            a = int(0)  # noqa: UP018 (Warp: a dynamic variable)
            if (act & (1 << ch)) != 0 and (m.st[i, S_APU_SQ1_POS + 2 * ch] & SQ_OUT) != 0:
                a = m.st[i, S_APU_ENV1 + ch] & 15
            if ch == 0:
                lo = a
            else:
                hi = a
        return lo | (hi << 4)
    if (act & 4) != 0:
        s = m.st[i, S_APU_WAVE_OUT]  # the buffer, until the first fetch after a trigger
        if m.st[i, S_APU_WAVE_PER] != 0:
            s = wave_sample(i, m)
        level = (int(m.hram[i, R_NR32]) >> 5) & 3
        if level == 0:
            lo = 0
        else:
            lo = s >> (level - 1)
    if (act & 8) != 0:
        noise_flush(i, m)
        if (m.st[i, S_APU_LFSR] & 1) != 0:
            hi = m.st[i, S_APU_ENV1 + 2] & 15
    return lo | (hi << 4)
