"""The Game Boy Color's PCM12 / PCM34 registers: the four channels' current amplitudes.

FF76 reads channel 1's amplitude in bits 0-3 and channel 2's in bits 4-7, FF77 channels 3 and 4
(Pan Docs "Audio Registers", "PCM12/PCM34"). An amplitude is the channel's digital output
before its DAC: 0 while the channel is off, else

- square channels 1, 2: the envelope's volume where the duty waveform (NRx1 bits 6-7: 12.5,
  25, 50, 75 %) is high, 0 where it is low; the waveform advances one of its 8 steps every
  ``(2048 - frequency) * 4`` dots;
- wave channel 3: the current 4-bit sample shifted by the output level (NR32: mute, 100, 50,
  25 %);
- noise channel 4: the envelope's volume when bit 0 of the LFSR is set. The 15-bit LFSR shifts
  every ``divisor << shift`` dots (NR43; divisor 8 for code 0, else 16 x code), its new top bit
  (and bit 6 in 7-bit mode) the XNOR of bits 0 and 1; a trigger clears it.

Time, lazily as everywhere (:mod:`.apu`): the duty step and the dots to the next one advance
at each catch-up (:func:`pcm_advance`, called for a console in Color mode only: a DMG or the
compatibility mode pays one comparison), and the noise shifts are counted there but applied
when PCM34 is read or NR43 changes (:func:`noise_flush`): the LFSR's output repeats every 32767
shifts (127 in 7-bit mode), so the count is kept modulo both periods' product.
Not modelled: the exact reload of a frequency change mid-step and the Color-specific phase
details the SameSuite APU tests probe (they are not in the shared test data).
"""

from __future__ import annotations

import warp as wp

from torchrl_dreamer.emulator.layout import (
    S_APU_ACT,
    S_APU_ENV1,
    S_APU_LFSR,
    S_APU_NOISE_CNT,
    S_APU_NOISE_PEND,
    S_APU_SQ1_CNT,
    S_APU_SQ1_POS,
    S_APU_WAVE_POS,
)
from torchrl_dreamer.emulator.memory import Mem
from torchrl_dreamer.emulator.registers import (
    R_NR11,
    R_NR13,
    R_NR14,
    R_NR32,
    R_NR43,
    R_WAVE,
)

__all__ = ["pcm_advance", "square_trigger", "noise_trigger", "noise_flush", "apu_pcm"]

LFSR_CYCLE = wp.constant(32767 * 127)  # a multiple of both LFSR periods (15 and 7 bits)


@wp.func
def square_period(i: int, m: wp.ref[Mem], ch: int) -> int:
    """Dots per duty step of square channel ``ch`` (0 or 1)."""
    f = int(m.hram[i, R_NR13 + 5 * ch]) | ((int(m.hram[i, R_NR14 + 5 * ch]) & 7) << 8)
    return (2048 - f) * 4


@wp.func
def noise_period(i: int, m: wp.ref[Mem]) -> int:
    """Dots per LFSR shift (NR43)."""
    nr43 = int(m.hram[i, R_NR43])
    d = (nr43 & 7) * 16
    if d == 0:
        d = 8
    return d << (nr43 >> 4)


@wp.func
def square_trigger(i: int, m: wp.ref[Mem], ch: int):
    """A trigger reloads the square channel's step timer (its duty position carries on)."""
    m.st[i, S_APU_SQ1_CNT + 2 * ch] = square_period(i, m, ch)


@wp.func
def noise_trigger(i: int, m: wp.ref[Mem]):
    """A noise trigger clears the LFSR and reloads its shift timer."""
    m.st[i, S_APU_LFSR] = 0
    m.st[i, S_APU_NOISE_PEND] = 0
    m.st[i, S_APU_NOISE_CNT] = noise_period(i, m)


@wp.func(inline=False)
def noise_flush(i: int, m: wp.ref[Mem]):
    """Apply the LFSR shifts counted so far (before a read of its output or an NR43 change)."""
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


@wp.func(inline=False)
def pcm_advance(i: int, m: wp.ref[Mem], dots: int):
    """Advance the square channels' duty steps and count the noise channel's shifts by
    ``dots`` (playing channels only)."""
    act = m.st[i, S_APU_ACT]
    for ch in range(2):
        if (act & (1 << ch)) != 0:
            c = m.st[i, S_APU_SQ1_CNT + 2 * ch] - dots
            if c <= 0:
                per = square_period(i, m, ch)
                k = 1 + (-c) // per
                c = c + k * per
                m.st[i, S_APU_SQ1_POS + 2 * ch] = (m.st[i, S_APU_SQ1_POS + 2 * ch] + k) & 7
            m.st[i, S_APU_SQ1_CNT + 2 * ch] = c
    if (act & 8) != 0:
        c = m.st[i, S_APU_NOISE_CNT] - dots
        if c <= 0:
            per = noise_period(i, m)
            k = 1 + (-c) // per
            c = c + k * per
            m.st[i, S_APU_NOISE_PEND] = (m.st[i, S_APU_NOISE_PEND] + k) % LFSR_CYCLE
        m.st[i, S_APU_NOISE_CNT] = c


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
    act = m.st[i, S_APU_ACT]
    lo = int(0)  # noqa: UP018 (Warp: a dynamic variable)
    hi = int(0)  # noqa: UP018 (Warp: a dynamic variable)
    if which == 0:
        for ch in range(2):
            a = int(0)  # noqa: UP018 (Warp: a dynamic variable)
            if (act & (1 << ch)) != 0:
                duty = int(m.hram[i, R_NR11 + 5 * ch]) >> 6
                if duty_high(duty, m.st[i, S_APU_SQ1_POS + 2 * ch]):
                    a = m.st[i, S_APU_ENV1 + ch] & 15
            if ch == 0:
                lo = a
            else:
                hi = a
        return lo | (hi << 4)
    if (act & 4) != 0:
        pos = m.st[i, S_APU_WAVE_POS] & 31
        b = int(m.hram[i, R_WAVE + (pos >> 1)])
        s = b >> 4
        if (pos & 1) != 0:
            s = b & 15
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
