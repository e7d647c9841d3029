"""The Color's APU as PCM12 / PCM34 and NR52 show it, M-cycle by M-cycle: micro ROMs of our own
that follow the protocols of the SameSuite APU tests (``LIJI32/SameSuite``, ``apu/``) and check
the hardware results those tests publish.

Each sub-test powers the APU off and on (NR52), sets a square channel up, triggers it, waits
``n`` NOPs (``n`` M-cycles) and reads PCM12 (``ld a,[hl]`` / ``ld a,[c]``); one ROM runs a whole
table of sub-tests and stores each result in WRAM. The rules the tables pin
(:mod:`torchrl_dreamer.emulator.apu_pcm`): a silent channel's first duty step comes
``period + 8`` dots after its trigger and a playing one's ``period + 4`` dots after a
retrigger, on the APU's 1 MHz grid counted from its power-on; the output is latched at each
step (a duty change shows from the next one); the duty position survives a retrigger and a
stop, and only power-off resets it.
"""

from __future__ import annotations

import pytest
from test_cgb import LCD_OFF

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

DOUBLE_SPEED = "ld a, 1\nldh [$4D], a\nstop\n"
POWER_CYCLE = "xor a\nldh [$26], a\ncpl\nldh [$26], a\n"
STORE = "ld [de], a\ninc de\n"


SLIDE = "slide:\n" + "nop\n" * 2048 + "slide_end: ret\n"  # `call slide_end - k`: k + 10 M-cycles


def nops(n: int) -> str:
    """``n`` M-cycles of NOPs: inline below 10, else calls into :data:`SLIDE` (call 6 + ret 4;
    a whole slide is 2058)."""
    whole = ""
    while n >= 2058 + 10:
        whole, n = whole + "call slide\n", n - 2058
    return whole + ("nop\n" * n if n < 10 else f"call slide_end - {n - 10}\n")


def run_table(subtests: list[str], prologue: str = "", frames: int = 20) -> list[int]:
    """Run the sub-tests in order on a Color (LCD off, after ``prologue``); their results."""
    body = "di\n" + LCD_OFF + prologue + "ld de, $C000\n" + "".join(subtests)
    rom = build_rom(assemble("start:\n" + body + "\n.spin: jr .spin\n" + SLIDE), title="PCM",
                    cgb_flag=0x80)
    gb = GameBoy(rom, check_header=False, model="cgb")
    gb.run_frames(frames)
    return gb.read_memory(0xC000, len(subtests))[0].tolist()


def table(text: str, ch: int = 1) -> list[int]:
    """A published table (channel 2's values, amplitude 8 in PCM12's high nibble); channel 1's
    tables are the same in the low nibble."""
    values = [int(x, 16) for x in text.split()]
    return values if ch == 1 else [v >> 4 for v in values]


def regs(ch: int) -> dict[str, str]:
    """NRx1..NRx4 of square channel ``ch`` (0 or 1) as ``ldh`` operands."""
    base = 0x11 + 5 * ch
    return {f"nrx{k + 1}": f"${base + k:02X}" for k in range(4)}


@pytest.mark.parametrize("ch", [0, 1])
def test_trigger_delay(ch):
    """channel_x_delay: 75 % duty at periods of 1 and 2 M-cycles: the first step is
    period + 2 M-cycles after the trigger (PCM12 is read in the M-cycle after the fetch)."""
    r = regs(ch)

    def sub(n: int, lo: int) -> str:
        return (POWER_CYCLE + f"ld hl, $FF76\nld a, ${lo:02X}\nldh [{r['nrx3']}], a\nld a, $C0\n"
                f"ldh [{r['nrx1']}], a\nld a, $80\nldh [{r['nrx2']}], a\nld a, $87\n"
                f"ldh [{r['nrx4']}], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    got = run_table([sub(n, lo) for lo in (0xFF, 0xFE) for n in range(16)])
    assert got == table("""00 80 80 80 80 80 80 00  00 80 80 80 80 80 80 00
                           00 00 80 80 80 80 80 80  80 80 80 80 80 80 00 00""", ch)


@pytest.mark.parametrize("ch", [0, 1])
def test_retrigger_keeps_the_phase_and_waits_one_m_cycle_less(ch):
    """channel_x_restart: a second trigger ``m`` NOPs after the first restarts the countdown
    (period + 1 M-cycle) but not the duty position (50 % duty, period 4 M-cycles)."""
    r = regs(ch)

    def sub(n: int, m: int) -> str:
        return (POWER_CYCLE + f"ld hl, $FF76\nld a, $FC\nldh [{r['nrx3']}], a\nld a, $80\n"
                f"ldh [{r['nrx1']}], a\nldh [{r['nrx2']}], a\nld a, $87\nldh [{r['nrx4']}], a\n"
                + nops(m) + f"ldh [{r['nrx4']}], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    got = run_table([sub(n, m) for m in (0, 2, 3, 6, 7, 10, 11, 14, 15) for n in range(8, 24)])
    assert got == table("""00 00 00 00 00 00 00 00  00 00 00 80 80 80 80 80
                           00 00 00 00 00 00 00 00  00 00 00 80 80 80 80 80
                           00 00 00 00 00 00 00 80  80 80 80 80 80 80 80 80
                           00 00 00 00 00 00 00 80  80 80 80 80 80 80 80 80
                           00 00 00 80 80 80 80 80  80 80 80 80 80 80 80 80
                           00 00 00 80 80 80 80 80  80 80 80 80 80 80 80 80
                           80 80 80 80 80 80 80 80  80 80 80 80 80 80 80 00
                           80 80 80 80 80 80 80 80  80 80 80 80 80 80 80 00
                           80 80 80 80 80 80 80 80  80 80 80 00 00 00 00 00""", ch)


@pytest.mark.parametrize("ch", [0, 1])
def test_stop_keeps_the_phase(ch):
    """channel_x_stop_restart: the DAC switched off and on (NRx2) between the triggers stops
    the channel, and the new trigger waits the full delay, but the duty position carries on."""
    r = regs(ch)

    def sub(n: int, m: int) -> str:
        return (f"xor a\nld c, {r['nrx2']}\nldh [$26], a\ncpl\nldh [$26], a\n"
                f"ld hl, $FF76\nld a, $FC\nldh [{r['nrx3']}], a\nld a, $80\nldh [{r['nrx1']}], a\n"
                f"ldh [{r['nrx2']}], a\nld a, $87\nldh [{r['nrx4']}], a\n" + nops(m)
                + f"xor a\nld [c], a\nld a, $80\nld [c], a\nld a, $87\nldh [{r['nrx4']}], a\n"
                + nops(n) + "ld a, [hl]\n" + STORE)

    got = run_table([sub(n, m) for m in (0, 2, 3, 6, 7, 10, 11, 14, 15) for n in range(8, 24)])
    assert got == table("""00 00 00 00 00 00 00 00  00 00 00 00 80 80 80 80
                           00 00 00 00 00 00 00 00  00 00 00 00 80 80 80 80
                           00 00 00 00 00 00 00 00  80 80 80 80 80 80 80 80
                           00 00 00 00 00 00 00 00  80 80 80 80 80 80 80 80
                           00 00 00 00 80 80 80 80  80 80 80 80 80 80 80 80
                           00 00 00 00 80 80 80 80  80 80 80 80 80 80 80 80
                           80 80 80 80 80 80 80 80  80 80 80 80 80 80 80 80
                           80 80 80 80 80 80 80 80  80 80 80 80 80 80 80 80
                           80 80 80 80 80 80 80 80  80 80 80 80 00 00 00 00""", ch)


@pytest.mark.parametrize("ch", [0, 1])
def test_duty_change_shows_from_the_next_step(ch):
    """channel_x_duty_delay: NRx1 rewritten ``n`` NOPs after the trigger (period 8 M-cycles),
    with the same 75 % duty and then with 12.5 %: the output changes at the next step only."""
    r = regs(ch)

    def sub(n: int) -> str:
        return (POWER_CYCLE + f"ld c, $76\nld a, $F8\nldh [{r['nrx3']}], a\nld a, $C0\n"
                f"ld hl, $FF{r['nrx1'][1:]}\nld [hl], a\nld a, $80\nldh [{r['nrx2']}], a\n"
                f"ld a, $87\nldh [{r['nrx4']}], a\n" + nops(n) + "ld [hl], b\nld a, [c]\n" + STORE)

    subs = [(f"ld b, ${b:02X}\n" if n == 0 else "") + sub(n) for b in (0xC0, 0x00) for n in range(64)]
    assert run_table(subs) == table("""
        00 00 00 00 00 00 80 80  80 80 80 80 80 80 80 80  80 80 80 80 80 80 80 80
        80 80 80 80 80 80 80 80  80 80 80 80 80 80 80 80  80 80 80 80 80 80 80 80
        80 80 80 80 80 80 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
        80 80 80 80 80 80 00 00  80 80 80 80 80 80 00 00  80 80 80 80 80 80 00 00
        80 80 80 80 80 80 00 00  80 80 80 80 80 80 00 00  80 80 80 80 80 80 80 80
        00 00 00 00 00 00 00 00""", ch)


@pytest.mark.parametrize("ch", [0, 1])
def test_duty_patterns_in_double_speed(ch):
    """channel_x_duty: the four duty patterns at a period of 2 M-cycles in double speed."""
    r = regs(ch)

    def sub(n: int) -> str:
        return (POWER_CYCLE + f"ld a, $FF\nldh [{r['nrx3']}], a\nld a, c\nld hl, $FF76\n"
                f"ldh [{r['nrx1']}], a\nld a, $80\nldh [{r['nrx2']}], a\nld a, $87\n"
                f"ldh [{r['nrx4']}], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    subs = [(f"ld c, ${c:02X}\n" if n == 0 else "") + sub(n) for c in (0, 0x40, 0x80, 0xC0)
            for n in range(32)]
    assert run_table(subs, DOUBLE_SPEED) == table("""
        00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  80 80 00 00 00 00 00 00
        00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
        80 80 80 80 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
        00 00 00 00 80 80 80 80  80 80 80 80 00 00 00 00  00 00 00 00 80 80 80 80
        00 00 00 00 80 80 80 80  80 80 80 80 80 80 80 80  00 00 00 00 80 80 80 80
        80 80 80 80 80 80 80 80""", ch)


@pytest.mark.parametrize("ch, move_power_on", [(0, False), (0, True), (1, False), (1, True)])
def test_steps_follow_the_apus_1mhz_clock_from_power_on(ch, move_power_on):
    """channel_x_align / channel_x_align_cpu, in double speed (an M-cycle is 2 dots): a trigger
    0, 1 or 3 NOPs later lands on or between the APU's 1 MHz ticks, which count from the NR52
    power-on; moving the power-on with the trigger (align_cpu) changes nothing."""
    r = regs(ch)

    def sub(n: int, s: int) -> str:
        if move_power_on:
            power, wait = "xor a\nldh [$26], a\ncpl\n" + nops(s) + "ldh [$26], a\n", ""
        else:
            power, wait = POWER_CYCLE, nops(s)
        return (power + f"ld hl, $FF76\nldh [{r['nrx3']}], a\nld a, $80\nldh [{r['nrx1']}], a\n"
                f"ldh [{r['nrx2']}], a\nld a, $87\n" + wait + f"ldh [{r['nrx4']}], a\n" + nops(n)
                + "ld a, [hl]\n" + STORE)

    got = run_table([sub(n, s) for s in (0, 1, 3) for n in range(16)], DOUBLE_SPEED)
    late = "00 " * 13 + "80 80 80"
    early = "00 " * 12 + "80 80 80 80"
    assert got == table(" ".join([late] * 3) if move_power_on else " ".join([late, early, early]), ch)


@pytest.mark.parametrize("ch", [0, 1])
def test_frequency_change_shows_after_the_current_step(ch):
    """channel_x_freq_change: NRx3 rewritten (period 4 -> 2 or 1 M-cycles) ``m`` NOPs after the
    trigger: the step under way keeps the old period, the next ones take the new."""
    r = regs(ch)

    def sub(n: int, m: int) -> str:
        return (POWER_CYCLE + f"ld c, $76\nld hl, $FF{r['nrx3'][1:]}\nld a, $FC\nld [hl], a\n"
                f"ld a, $80\nldh [{r['nrx1']}], a\nldh [{r['nrx2']}], a\nld a, $87\n"
                f"ldh [{r['nrx4']}], a\n" + nops(m) + "ld [hl], b\n" + nops(n) + "ld a, [c]\n"
                + STORE)

    subs = [(f"ld b, ${b:02X}\n" if n == m == 0 else "") + sub(n, m) for b in (0xFE, 0xFF)
            for m in range(4) for n in range(16)]
    assert run_table(subs) == table("""
        00 00 00 00 00 00 00 00  00 00 80 80 80 80 80 80  00 00 00 00 00 00 00 00
        00 80 80 80 80 80 80 80  00 00 00 00 00 00 00 00  80 80 80 80 80 80 80 80
        00 00 00 00 00 00 00 80  80 80 80 80 80 80 80 00  00 00 00 00 00 00 80 80
        80 80 00 00 00 00 80 80  00 00 00 00 00 80 80 80  80 00 00 00 00 80 80 80
        00 00 00 00 80 80 80 80  00 00 00 00 80 80 80 80  00 00 00 80 80 80 80 00
        00 00 00 80 80 80 80 00""", ch)


def wave_sub(n: int, nr34: int, first: int | None = None) -> str:
    """Power-cycle, fill wave RAM with 0xFF (or sample byte 0 = ``first``), play at 100 %."""
    fill = ("ld hl, $FF30\nldh [$26], a\n" + "ld [hl+], a\n" * 16 if first is None else
            "ld hl, $FF31\nldh [$26], a\n" + "ld [hl+], a\n" * 15 + f"ld a, ${first:02X}\nld [$FF30], a\n")
    return ("xor a\nldh [$26], a\ncpl\n" + fill + "ld hl, $FF77\nldh [$1A], a\n"
            f"ld a, $20\nldh [$1C], a\nld a, ${nr34:02X}\nldh [$1E], a\n" + nops(n) + "ld a, [hl]\n"
            + STORE)


def test_wave_channel_is_silent_until_its_first_fetch():
    """channel_3_delay and channel_3_first_sample (double speed): PCM34 reads 0 until a sample
    period plus 6 dots after the trigger, and then sample 1, not sample 0 (0xDE: E, not D)."""
    delay = [wave_sub(n, 0x84) for n in range(0x3FC, 0x404)]
    delay += [wave_sub(n, 0x86) for n in range(0x1FC, 0x204)]
    assert run_table(delay, DOUBLE_SPEED) == [0] * 5 + [0x0F] * 3 + [0] * 5 + [0x0F] * 3
    first = [wave_sub(n, 0x87, first=0xDE) for n in range(0xFC, 0x104)]
    assert run_table(first, DOUBLE_SPEED) == [0] * 5 + [0x0E] * 3


def test_noise_first_shift_half_a_period_after_the_trigger():
    """channel_4_delay: the LFSR's first 1 reaches bit 0 after 7 shifts (15 in 15-bit mode);
    the first shift is half a period plus 2 M-cycles after the trigger."""
    def sub(n: int, nr43: int) -> str:
        return (POWER_CYCLE + f"ld hl, $FF77\nld a, $F0\nldh [$21], a\nld a, ${nr43:02X}\n"
                "ldh [$22], a\nld a, $80\nldh [$23], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    subs = ([sub(n, 0x08) for n in range(8, 16)] + [sub(n, 0x00) for n in range(24, 32)]
            + [sub(n, 0x18) for n in range(24, 32)] + [sub(n, 0x28) for n in range(48, 56)])
    assert run_table(subs) == table("""00 00 00 00 00 F0 F0 F0  00 00 00 00 00 F0 F0 F0
                                       00 00 F0 F0 F0 F0 F0 F0  00 00 00 00 F0 F0 F0 F0""")


NOISE_SETUP = ("ld hl, $FF77\nld a, $F0\nldh [$21], a\nld a, $08\nldh [$22], a\nld a, $80\n"
               "ldh [$23], a\n")


LFSR7 = """
    7e 3f 5f 6f 77 7b 7d 3e  1f 4f 67 73 79 3c 5e 2f  57 6b 75 3a 1d 0e 07 43
    61 30 58 6c 76 3b 5d 2e  17 4b 65 32 19 0c 46 23  51 28 54 6a 35 1a 0d 06
    03 41 20 50 68 74 7a 3d  1e 0f 47 63 71 38 5c 6e  37 5b 6d 36 1b 4d 26 13
    49 24 52 29 14 4a 25 12  09 04 42 21 10 48 64 72  39 1c 4e 27 53 69 34 5a
    2d 16 0b 45 22 11 08 44  62 31 18 4c 66 33 59 2c  56 2b 55 2a 15 0a 05 02
    01 00 40 60 70 78 7c 7e"""
LFSR15 = """
    00 00 00 80 c0 e0 f0 f8  fc fe ff ff ff ff ff ff  ff 7f bf df ef f7 fb fd
    fe ff ff ff ff ff ff 7f  3f 9f cf e7 f3 f9 fc fe  ff ff ff ff ff 7f bf 5f
    af d7 eb f5 fa fd fe ff  ff ff ff 7f 3f 1f 0f 87  c3 e1 f0 f8 fc fe ff ff
    ff 7f bf df ef 77 bb dd  ee f7 fb fd fe ff ff 7f  3f 9f cf 67 33 99 cc e6
    f3 f9 fc fe ff 7f bf 5f  af 57 ab 55 aa d5 ea f5  fa fd fe 7f 3f 1f 0f 07
    03 01 00 80 c0 e0 f0 f8"""


# channel_4_lfsr_restart / _restart_fast: LFSR7 one shift later (a retrigger while playing)
LFSR7_RESTART = "7c " + LFSR7.strip()[:-3]


@pytest.mark.parametrize("nr43, store, restart, want", [
    (0x08, "or b\nsrl a\n", None, LFSR7),  # channel_4_lfsr: 7-bit mode
    (0x00, "srl a\nor b\n", None, LFSR15),  # channel_4_lfsr15
    (0x08, "or b\nsrl a\n", 0x80, LFSR7_RESTART),  # channel_4_lfsr_restart
    (0x08, "or b\nsrl a\n", 0, LFSR7_RESTART),  # channel_4_lfsr_restart_fast
])
def test_noise_lfsr_sequence(nr43, store, restart, want):
    """channel_4_lfsr / lfsr15: a shift every 2 M-cycles, read every other shift from 13
    M-cycles on; each result shifts PCM34's bit 7 into the last one (the tests' own
    reconstruction of the register), so the tables are the LFSR's sequence in 7- and 15-bit
    mode. lfsr_restart / lfsr_restart_fast: retriggered 128 M-cycles or 3 M-cycles after the
    first trigger (reads counted from the retrigger), the LFSR restarts from 0 one shift later
    than from silence."""
    again = "" if restart is None else nops(restart) + "ldh [$23], a\n"

    def sub(n: int) -> str:
        return (POWER_CYCLE + f"ld hl, $FF77\nld a, $F0\nldh [$21], a\nld a, ${nr43:02X}\n"
                "ldh [$22], a\nld a, $80\nldh [$23], a\n" + again + nops(n)
                + "ld a, [hl]\nand $80\nld b, a\nld a, [de]\n" + store + "inc de\nld [de], a\n")

    body = "di\n" + LCD_OFF + "ld de, $C000\nxor a\nld [de], a\n"
    body += "".join(sub(n) for n in range(0x0D, 0x11C, 2))
    rom = build_rom(assemble("start:\n" + body + "\n.spin: jr .spin\n" + SLIDE), title="PCM",
                    cgb_flag=0x80)
    gb = GameBoy(rom, check_header=False, model="cgb")
    gb.run_frames(30)
    assert gb.read_memory(0xC006, 128)[0].tolist() == table(want)


def test_noise_lfsr_kept_from_7_to_15_bits():
    """channel_4_lfsr_7_15: NR43 switched from 7-bit to 15-bit mode 128 M-cycles after the
    trigger: the register keeps its bits and goes on shifting in 15-bit mode."""
    def sub(n: int) -> str:
        return (POWER_CYCLE + NOISE_SETUP + nops(0x80) + "xor a\nldh [$22], a\n" + nops(n)
                + "ld a, [hl]\n" + STORE)

    ns = [*range(0, 0x40, 2), *range(0x30, 0x40, 2), *range(0x40, 0xF0, 2)]  # the 128 results compared
    assert run_table([sub(n) for n in ns]) == table("""
        f0 00 00 00 f0 f0 f0 f0  f0 00 00 00 f0 f0 f0 00  f0 f0 00 f0 f0 f0 f0 00
        f0 f0 00 f0 f0 00 00 f0  f0 f0 00 f0 f0 00 00 f0  00 00 f0 f0 f0 00 00 f0
        00 00 f0 00 f0 00 00 f0  00 f0 f0 00 f0 00 00 f0  00 00 00 00 f0 00 00 00
        f0 00 00 00 f0 00 00 f0  f0 f0 00 00 f0 f0 00 00  f0 f0 00 00 f0 00 f0 f0
        00 f0 00 f0 00 f0 00 f0  00 f0 00 00 00 f0 00 00  00 00 00 00 00 00 00 00
        00 f0 f0 00 00 f0 f0 f0""")


def test_wave_restart_holds_the_playing_sample_and_level_changes_at_once():
    """channel_3_restart_delay: retriggered mid-sample, the channel keeps playing the sample it
    was on (F) until the first fetch after the trigger, which reads sample 1 (E);
    channel_3_shift_delay: an NR32 output-level change shows in PCM34 at once (F7 at 50 %)."""
    def restart(n: int) -> str:
        return ("xor a\nldh [$26], a\ncpl\nld hl, $FF31\nldh [$26], a\n" + "ld [hl+], a\n" * 15
                + "ld hl, $FF77\nldh [$1A], a\nld a, $DE\nldh [$30], a\nld a, $20\nldh [$1C], a\n"
                "ld a, $87\nldh [$1E], a\n" + nops(0x280) + "ldh [$1E], a\n" + nops(n)
                + "ld a, [hl]\n" + STORE)

    def level(n: int) -> str:
        return (POWER_CYCLE + "ldh [$1A], a\nld hl, $FF30\nld a, $F7\n" + "ld [hl+], a\n" * 16
                + "ld hl, $FF77\nld a, $20\nldh [$1C], a\nld a, $87\nldh [$1E], a\n"
                + nops(0x180 - 4) + "cpl\nldh [$1C], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    ns = (0, 1, 0xFE, 0xFF, 0x100, 0x101, 0x102, 0x103)
    assert run_table([restart(n) for n in ns], DOUBLE_SPEED) == [0x0F] * 5 + [0x0E] * 3
    ns = (0, 1, 0x7E, 0x7F, 0x80, 0x81, 0x82, 0x83)
    assert run_table([level(n) for n in ns], DOUBLE_SPEED) == [0x01] * 5 + [0x03] * 3


def test_wave_stop_frequency_change_and_restart_in_the_delay():
    """channel_3_stop_delay: NR30 off silences PCM34 at once; channel_3_freq_change_delay: a
    new frequency written just after the trigger does not change the first sample's length;
    channel_3_restart_during_delay: a retrigger inside the start delay starts it afresh, and
    wave RAM read while the channel plays gives the byte being played (12, then 34)."""
    power_fill = "xor a\nldh [$26], a\ncpl\nld hl, $FF30\nldh [$26], a\n" + "ld [hl+], a\n" * 16

    def stop(n: int) -> str:
        return (power_fill + "ld hl, $FF77\nldh [$1A], a\n"
                "ld a, $20\nldh [$1C], a\nld a, $87\nldh [$1E], a\n" + nops(0x180 - 4)
                + "xor a\nldh [$1A], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    def freq(n: int, first: int, then: int) -> str:
        return (power_fill + "ld hl, $FF77\nldh [$1A], a\n"
                f"ld a, $20\nldh [$1C], a\nld c, $1E\nld a, ${0x80 | first:02X}\nld [c], a\n"
                f"ld a, ${then:02X}\nld [c], a\n" + nops(n - 4) + "ld a, [hl]\n" + STORE)

    def restart(n: int) -> str:  # HL: where to read, set before the group
        fill = "push hl\nld a, $12\nld c, $22\nld hl, $FF30\n" + "ld [hl+], a\nadd a, c\n" * 16
        return (POWER_CYCLE + fill + "pop hl\nld a, $80\nldh [$1A], a\nld a, $20\n"
                "ldh [$1C], a\nld a, $86\nldh [$1E], a\n" + nops(0x20 - 3) + "ldh [$1E], a\n"
                + nops(n) + "ld a, [hl]\n" + STORE)

    assert run_table([stop(n) for n in (0, 1, 2, 3, 0x7E, 0x7F, 0x80, 0x81)], DOUBLE_SPEED) == [0] * 8
    ns = (0x1FF, 0x200, 0x201, 0x202, 0x3FE, 0x3FF, 0x400, 0x401)
    got = run_table([freq(n, 4, 6) for n in ns] + [freq(n, 6, 4) for n in ns], DOUBLE_SPEED)
    assert got == [0] * 7 + [0x0F] + [0] * 2 + [0x0F] * 6
    ns = (*range(0x1DC, 0x1E4), 0x1FE, 0x1FF, 0x200, 0x201, 0x3FE, 0x3FF, 0x400, 0x401)
    subs = [("ld hl, $FF77\n" if k == 0 else "") + restart(n) for k, n in enumerate(ns)]
    subs += [("ld hl, $FF30\n" if k == 0 else "") + restart(n) for k, n in enumerate(ns)]
    got = run_table(subs, DOUBLE_SPEED)
    assert got == [0] * 11 + [0x02] * 4 + [0x03] + [0x12] * 15 + [0x34]


def volume_div_subtest(n: int, nr12: int, pre: int = 0) -> str:
    """The sub-test of SameSuite's ``channel_1_volume_div`` and ``channel_1_and_glitch``: DIV
    reset, APU power cycle, ``pre`` NOPs, channel 1 at 50 % duty (NR13 = FC: 4 M-cycles a
    step) with NR12 = ``nr12``, triggered, DIV reset again, ``n`` NOPs, then ``ld a,[hl]``."""
    return ("ld [$FF04], a\n" + POWER_CYCLE + nops(pre) + "ld a, $80\nldh [$11], a\n"
            f"ld a, $FC\nldh [$13], a\nld a, ${nr12:02X}\nldh [$12], a\nld a, $87\n"
            "ldh [$14], a\nld [$FF04], a\n" + nops(n) + "ld a, [hl]\n" + STORE)


def test_envelope_steps_with_the_frame_sequencer_from_power_on():
    """channel_1_volume_div: DIV reset after the trigger; channel 1's volume 8 (envelope down,
    period 1 or 2) drops to 7 at the frame sequencer's envelope step, the 8th (16th) DIV-driven
    step since the APU's power-on: 0x4000 (0x8000) M-cycles after the reset, or 0x800 earlier
    when 0x800 M-cycles passed between power-on and the trigger. DIV itself wraps 0x4000 M-cycles
    after its reset (FF, then 00). The DIV write after the trigger (``ld [$FF04], a``, as the
    protocol has it) also delays the duty steps by a 1 MHz tick, which the duty phase read
    here shows."""
    def sub(n: int, pre: int, env: int) -> str:
        return volume_div_subtest(n, 0x80 | env, pre)

    cases = ((0, 1, 0x3FFC), (0, 2, 0x7FFC), (0x800, 1, 0x3FFC), (0x800, 2, 0x7FFC))
    subs = []
    for read in (0xFF76, 0xFF04):
        group = [sub(n, pre, env) for pre, env, base in cases for n in range(base, base + 8)]
        subs += [f"ld hl, ${read:04X}\n" + group[0], *group[1:]]
    pcm = [0x08, 0x08, 0x07, 0x07, 0x07, 0, 0, 0] * 2 + [0x07] * 5 + [0] * 3
    assert run_table(subs, frames=120) == pcm + [0x07] * 5 + [0] * 3 + [0xFF, 0xFF] + [0] * 6 + (
        [0xFF, 0xFF] + [0] * 6) * 3


DIV_ROUTINES = ("trig:\ncall w10\nld [hl], a\nret\n"  # wait for DIV = 10, then write DIV
                "w10:\nld a, $10\n.w: cp [hl]\njr nz, .w\nret\n"  # wait for DIV = 10
                "wev:\n.on: bit 4, [hl]\njr z, .on\n.off: bit 4, [hl]\njr nz, .off\nret\n")  # bit 4 falls


@pytest.mark.parametrize("at_10", [False, True])
def test_div_write_with_bit_4_set_steps_the_frame_sequencer(at_10):
    """div_write_trigger / div_write_trigger_10: channel 1 with length ``k + 1`` (NR11 = BF -
    k) and length enabled; ``n`` times, wait for DIV = 10 and write DIV (bit 4 falls: a frame-
    sequencer step). NR52 shows the channel on for the first 2k + 1 steps: length clocks on every
    other step from power-on. Powered on with DIV = 10 (``_10``), the APU skips the first DIV
    event, and enabling length before it clocks length once (the skipped event counts as a
    step that does not clock it): on for 2k events, and length 1 is reloaded by the trigger."""
    def sub(k: int, n: int) -> str:
        return ("ld hl, $FF04\nld [hl], a\n" + ("call w10\n" if at_10 else "")
                + f"ld c, $26\nxor a\nld [c], a\ncpl\nld [c], a\nldh [$13], a\n"
                f"ld a, ${0xBF - k:02X}\nldh [$11], a\nldh [$12], a\nld a, $C1\nldh [$14], a\n"
                + "call trig\n" * n + "ld a, [c]\n" + STORE)

    body = "di\n" + LCD_OFF + "ld de, $C000\n" + "".join(sub(k, n) for k in range(8) for n in range(16))
    rom = build_rom(assemble("start:\n" + body + "\n.spin: jr .spin\n" + DIV_ROUTINES),
                    title="PCM", cgb_flag=0x80)
    gb = GameBoy(rom, check_header=False, model="cgb")
    gb.run_frames(200)
    on = [16] + [2 * k for k in range(1, 8)] if at_10 else [2 * k + 1 for k in range(8)]
    want = [v for k in range(8) for v in [0xF1] * on[k] + [0xF0] * (16 - on[k])]
    assert gb.read_memory(0xC000, 128)[0].tolist() == want


@pytest.mark.parametrize("variant, first", [("write", 8), ("write_10", 9), ("event_10", 9)])
def test_envelope_after_div_events(variant, first):
    """div_write_trigger_volume(_10) and div_trigger_volume_10: channel 1 at volume 15, envelope
    down with period 1, then ``n`` DIV events (DIV written at 10, or waited for, ``event``):
    the volume (PCM12, read where the duty is high) drops at the 8th event after power-on, and
    at the 9th when the APU was powered on with DIV = 10 (its first event skipped)."""
    def sub(n: int) -> str:
        event = "call wev\n" if variant == "event_10" else "call trig\n"
        s = ("ld hl, $FF04\nld [hl], a\n" + ("call w10\n" if variant != "write" else "")
             + "ld c, $26\nxor a\nld [c], a\ncpl\nld [c], a\nldh [$13], a\nld a, $80\n"
             "ldh [$11], a\nld a, $F1\nldh [$12], a\nld a, $83\nldh [$14], a\n" + event * n
             + "ld hl, $FF76\nxor a\n")
        for j in range(8):  # the protocol's retries until PCM12 is not 0
            s += f"or [hl]\njr nz, .d{n}_{j}\n" + nops(0x400) + f".d{n}_{j}:\n"
        return s + STORE

    body = "di\n" + LCD_OFF + "ld de, $C000\n" + "".join(sub(n) for n in range(32))
    rom = build_rom(assemble("start:\n" + body + "\n.spin: jr .spin\n" + DIV_ROUTINES + SLIDE),
                    title="PCM", cgb_flag=0x80)
    gb = GameBoy(rom, check_header=False, model="cgb")
    gb.run_frames(300)
    assert gb.read_memory(0xC000, 32)[0].tolist() == [15 - max(0, (n - first) // 8 + 1) for n in range(32)]


@pytest.mark.parametrize("ch", [0, 1])
def test_length_and_first_step_against_a_div_reset(ch):
    """channel_x_stop_div: length 1 (NRx1 = FF), length enabled, the longest period (NRx3 = 1),
    DIV reset right after the trigger; 0, 0x800 or 0x1000 M-cycles between power-on and the
    setup. The first duty step shows 0x7FC NOPs after the DIV reset; the length clock at the
    first DIV step 0x800 M-cycles after it silences the channel unless the trigger came just
    after the step that does not clock length (0x800), where enabling length clocked it once
    already and the trigger reloaded it. Read as DIV, PCM12 and NR52."""
    r = regs(ch)

    def sub(n: int, pre: int) -> str:
        return ("ld [$FF04], a\n" + POWER_CYCLE + nops(pre) + f"ldh [{r['nrx1']}], a\nld a, 1\n"
                f"ldh [{r['nrx3']}], a\nld a, $80\nldh [{r['nrx2']}], a\nld a, $C0\n"
                f"ldh [{r['nrx4']}], a\nld [$FF04], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    subs = []
    for read, pres in ((0xFF04, (0x1000,)), (0xFF76, (0, 0x800, 0x1000)), (0xFF26, (0, 0x800, 0x1000))):
        group = [sub(n, pre) for pre in pres for n in range(0x7F8, 0x800)]
        subs += [f"ld hl, ${read:04X}\n" + group[0], *group[1:]]
    hi, on = (0x80 if ch == 1 else 0x08), 0xF0 | (1 << ch)
    pcm_off, pcm_on = [0] * 4 + [hi] * 2 + [0] * 2, [0] * 4 + [hi] * 4
    nr52_off, nr52_on = [on] * 6 + [0xF0] * 2, [on] * 8
    want = [0x1F] * 6 + [0x20] * 2 + pcm_off + pcm_on + pcm_off + nr52_off + nr52_on + nr52_off
    assert run_table(subs, frames=120) == want


@pytest.mark.parametrize("ch", [1, 3])
def test_envelope_steps_with_the_frame_sequencer_channels_2_and_4(ch):
    """channel_2_volume_div and channel_4_volume_div: the same envelope timing as channel 1's
    (volume 8 -> 7 at the 8th or 16th DIV-driven step), seen in PCM12's high nibble (channel 2,
    50 % duty) and PCM34's (noise, a shift every 64 dots); channel 4's protocol also runs with
    0x800 M-cycles between power-on and the setup."""
    if ch == 1:
        setup = ("ld a, $80\nldh [$16], a\nld a, $FC\nldh [$18], a\nld a, ${env}\n"
                 "ldh [$17], a\nld a, $87\nldh [$19], a\n")
        cases, read = ((0, 1, 0x3FFC), (0, 2, 0x7FFC)), 0xFF76
        pcm = [0x80, 0x80, 0x70, 0x70, 0x70, 0, 0, 0] * 2
    else:
        setup = ("ld a, $80\nldh [$20], a\nld a, $38\nldh [$22], a\nld a, ${env}\n"
                 "ldh [$21], a\nld a, $87\nldh [$23], a\n")
        cases, read = ((0, 1, 0x3FFC), (0, 2, 0x7FFC), (0x800, 1, 0x3FFC), (0x800, 2, 0x7FFC)), 0xFF77
        pcm = [0x80, 0x80] + [0x70] * 6 + [0x80, 0x80] + [0x70] * 6 + [0x70] * 16

    def sub(n: int, pre: int, env: int) -> str:
        return ("ld [$FF04], a\n" + POWER_CYCLE + nops(pre) + setup.replace("${env}", f"${0x80 | env:02X}")
                + "ld [$FF04], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    subs = []
    for target in (read, 0xFF04):
        group = [sub(n, pre, env) for pre, env, base in cases for n in range(base, base + 8)]
        subs += [f"ld hl, ${target:04X}\n" + group[0], *group[1:]]
    assert run_table(subs, frames=120) == pcm + [0xFF, 0xFF, 0, 0, 0, 0, 0, 0] * len(cases)


def test_wave_length_against_div_in_double_speed():
    """channel_3_stop_div (double speed, where DIV bit 5 drives the frame sequencer): length 1
    or 2 (NR31 FF, FE), length enabled at the trigger, DIV reset right after it, 0 or 0x1000
    M-cycles between power-on and the setup: the channel stops at the DIV step that ends its
    length (read as DIV, PCM34 and NR52); length 1 enabled just after a step that does not
    clock length is clocked at once, reloaded to 256 by the trigger, and plays on."""
    def sub(n: int, nr31: int, pre: int) -> str:
        return ("ld [$FF04], a\nxor a\nldh [$26], a\ncpl\nldh [$26], a\n" + nops(pre) + "push hl\n"
                "ld hl, $FF30\n" + "ld [hl+], a\n" * 16 + f"pop hl\nldh [$1A], a\nld a, ${nr31:02X}\n"
                "ldh [$1B], a\nld a, $20\nldh [$1C], a\nld a, $C0\nldh [$1E], a\nld [$FF04], a\n"
                + nops(n) + "ld a, [hl]\n" + STORE + "xor a\nldh [$26], a\n")

    cases = ([(n, 0xFF, 0) for n in range(0xFFC, 0x1000)]
             + [(n, 0xFF, 0x1000) for n in range(0x2FFC, 0x3000)]
             + [(n, 0xFE, 0) for n in range(0x2FFC, 0x3000)]
             + [(n, 0xFE, 0x1000) for n in range(0x1FFC, 0x2000)])
    subs = []
    for read in (0xFF04, 0xFF77, 0xFF26):
        subs += [(f"ld hl, ${read:04X}\n" if k == 0 else "") + sub(*c) for k, c in enumerate(cases)]
    assert run_table(subs, DOUBLE_SPEED, frames=200) == table("""
        3F 3F 40 40 BF BF C0 C0  BF BF C0 C0 7F 7F 80 80  0F 0F 00 00 0F 0F 0F 0F
        0F 0F 00 00 0F 0F 00 00  F4 F4 F0 F0 F4 F4 F4 F4  F4 F4 F0 F0 F4 F4 F0 F0""")


def noise_sub(n: int, nr43: int, before: str = "") -> str:
    """Power-cycle, ``before``, then the noise channel at volume 15 with NR43 = ``nr43``."""
    return (POWER_CYCLE + before + f"ld hl, $FF77\nld a, $F0\nldh [$21], a\nld a, ${nr43:02X}\n"
            "ldh [$22], a\nld a, $80\nldh [$23], a\n" + nops(n) + "ld a, [hl]\n" + STORE)


def test_noise_start_follows_the_512khz_grid():
    """channel_4_frequency_alignment and channel_4_equivalent_frequencies: periods written with
    divisor code 0 start at half a period plus 8 dots; with codes 1-7 at half a period plus 4
    dots after the next 8-dot point from power-on (8 more with code 1 when the trigger is on a
    point), so the same period written two ways can start an M-cycle apart; one M-cycle more
    between power-on and trigger (the second half of the alignment table) evens them out."""
    groups = [(0x18, 0x09), (0x18, 0x18), (0x30, 0x0A), (0x30, 0x28), (0x48, 0x0B), (0x64, 0x1A),
              (0x64, 0x0C), (0x64, 0x29), (0x64, 0x38)]
    subs = []
    for extra in (0, 1):
        for base, code in groups:
            for k in range(8):
                wait = 0 if (extra == 1 and code == 0x1A and k == 0) else extra  # as the protocol has it
                subs.append(noise_sub(base + k, code, nops(wait + 2)))
    first = {(0, 0x09): 3, (0, 0x18): 2, (0, 0x0A): 3, (0, 0x28): 4, (0, 0x0B): 5, (0, 0x1A): 3,
             (0, 0x0C): 3, (0, 0x29): 5, (0, 0x38): 4, (1, 0x09): 2, (1, 0x18): 2, (1, 0x0A): 4,
             (1, 0x28): 4, (1, 0x0B): 6, (1, 0x1A): 4, (1, 0x0C): 4, (1, 0x29): 4, (1, 0x38): 4}
    want = [0xF0 if k >= first[extra, code] else 0 for extra in (0, 1) for _, code in groups
            for k in range(8)]
    assert run_table(subs) == want
    subs = [noise_sub(n, code) for code in (0x0C, 0x1A, 0x29, 0x38) for n in range(0xC0, 0xE0)]
    low = {0x0C: (7, 23), 0x1A: (7, 23), 0x29: (9, 25), 0x38: (8, 24)}  # 0 from .. to ..
    want = [0 if low[code][0] <= k < low[code][1] else 0xF0 for code in (0x0C, 0x1A, 0x29, 0x38)
            for k in range(32)]
    assert run_table(subs, frames=30) == want


def test_noise_start_on_the_1mhz_grid_in_double_speed():
    """channel_4_align (double speed): divisor code 0 started 0-3 M-cycles after power-on; the
    first shift follows the 1 MHz grid, so odd delays start an M-cycle later."""
    subs = [noise_sub(n, 0x08, nops(s)) for s in range(4) for n in range(0x10, 0x20)]
    want = [0xF0 if n >= 0x1C + s % 2 else 0 for s in range(4) for n in range(0x10, 0x20)]
    assert run_table(subs, DOUBLE_SPEED) == want


def test_noise_lfsr_kept_from_15_to_7_bits():
    """channel_4_lfsr_15_7: NR43 switched from 15-bit to 7-bit mode 128 M-cycles after the
    trigger: the register keeps its bits and goes on in 7-bit mode."""
    def sub(n: int) -> str:
        return (POWER_CYCLE + "ld hl, $FF77\nld a, $F0\nldh [$21], a\nxor a\nldh [$22], a\n"
                "ld a, $80\nldh [$23], a\n" + nops(0x80) + "ld a, $08\nldh [$22], a\n" + nops(n)
                + "ld a, [hl]\n" + STORE)

    ns = [*range(0, 0x40, 2), *range(0x30, 0x40, 2), *range(0x40, 0xF0, 2)]  # the 128 compared
    assert run_table([sub(n) for n in ns]) == table("""
        f0 f0 f0 f0 00 00 f0 f0  f0 f0 00 f0 00 f0 f0 f0  00 00 00 00 f0 f0 00 f0
        f0 f0 00 f0 00 00 f0 f0  f0 f0 00 f0 00 00 f0 f0  00 00 00 f0 00 f0 00 f0
        f0 00 00 00 00 00 f0 00  f0 f0 f0 f0 00 00 00 f0  f0 f0 00 f0 f0 00 f0 f0
        00 00 f0 00 00 f0 00 f0  00 00 f0 00 00 00 00 f0  00 00 f0 f0 f0 00 00 f0
        00 f0 f0 00 f0 00 00 00  f0 00 00 00 f0 f0 00 00  f0 f0 00 f0 00 f0 00 f0
        00 00 00 00 00 00 00 f0""")


def test_noise_frequency_change_while_playing():
    """channel_4_freq_change: the noise channel (7-bit mode) triggered with NR43 18 (code 0,
    shift 1) or 09 (code 1, shift 0), NR43 rewritten to 38 (code 0, shift 3) or 1A (code 2,
    shift 1) 0x70 or 0x71 M-cycles later, PCM34 ``n`` M-cycles after that: the LFSR goes on
    from the counter's state (a write that raises the counter bit it watches shifts at once)
    and with the new divisor from the counter's next reload."""
    rows = [(0x11, 0x18, 0x38, 0), (0x15, 0x18, 0x1A, 0), (0x11, 0x18, 0x38, 1),
            (0x11, 0x18, 0x1A, 1), (0x1C, 0x09, 0x38, 0), (0x11, 0x09, 0x1A, 0),
            (0x1C, 0x09, 0x38, 1), (0x0C, 0x09, 0x1A, 1)]

    def sub(n: int, before: int, after: int, d: int) -> str:
        return noise_sub(0x70 + d, before).replace(
            "ld a, [hl]\n", f"ld a, ${after:02X}\nldh [$22], a\n" + nops(n) + "ld a, [hl]\n")

    got = run_table([sub(n0 + k, *r) for n0, *r in rows for k in range(8)], frames=60)
    assert got == table("""
        f0 f0 00 00 00 00 00 00  f0 f0 f0 f0 f0 00 00 00  f0 00 00 00 00 00 00 00
        f0 f0 f0 f0 f0 f0 00 00  f0 00 00 00 00 00 00 00  f0 00 00 00 00 00 00 00
        f0 00 00 00 00 00 00 00  f0 f0 f0 00 00 00 00 00""")


def test_wave_delay_not_shortened_by_the_output_level():
    """channel_3_shift_skip_delay: triggered with NR32 = FF (the level bits 11: 25 %) and set to
    100 % right after, the channel still shows its first sample (E) only after the full start
    delay."""
    def sub(n: int) -> str:
        return ("xor a\nldh [$26], a\ncpl\nld hl, $FF31\nldh [$26], a\n" + "ld [hl+], a\n" * 15
                + "ld a, $DE\nld [$FF30], a\nld hl, $FF77\nldh [$1A], a\nldh [$1C], a\n"
                "ld a, $87\nldh [$1E], a\nld a, $20\nldh [$1C], a\n" + nops(n - 5) + "ld a, [hl]\n"
                + STORE)

    assert run_table([sub(n) for n in range(0xFC, 0x104)], DOUBLE_SPEED) == [0] * 5 + [0x0E] * 3


def test_sweep_changes_the_period_at_its_frame_sequencer_step():
    """channel_1_sweep, rounds one to three: no sweep, a sweep every step from 7FF... (NR10 1F:
    period 1, decrease, shift 7: 7FF -> 7F0 at the DIV step 0xFFE M-cycles after the DIV reset),
    and the sweep up from 7F0 to 7FF (NR10 27) at 0x2FFE. The new period applies from the step
    on (a span of NOPs crossing the step is caught up piecewise); the last three rows: the
    channel stops 8 M-cycles after the sweep whose next calculation overflows."""
    def sub(n: int, nr10: int, nr13: int) -> str:
        return ("ld [$FF04], a\n" + POWER_CYCLE + f"ld a, ${nr10:02X}\n" + nops(0x800)
                + f"ldh [$10], a\nld a, $80\nldh [$11], a\nld a, ${nr13:02X}\nldh [$13], a\n"
                "ld a, $80\nldh [$12], a\nld a, $87\nldh [$14], a\nld [$FF04], a\n" + nops(n)
                + "ld a, [hl]\n" + STORE)

    r12 = [*range(0, 8), *range(0x48, 0x50), *range(0xFEE, 0x1006), *range(0x1048, 0x1050)]
    r3 = [*range(0, 8), *range(0x48, 0x50), *range(0x2FF6, 0x3016)]
    subs = [sub(n, 0, 0xFF) for n in r12] + [sub(n, 0x1F, 0xFF) for n in r12]
    subs += [sub(n, 0x27, 0xF0) for n in r3]
    subs[0] = "ld hl, $FF76\n" + subs[0]
    assert run_table(subs, frames=300) == table("""
        00 00 08 08 08 08 00 00  00 00 08 08 08 08 00 00  00 00 00 00 08 08 08 08
        00 00 00 00 08 08 08 08  00 00 00 00 08 08 08 08  00 00 08 08 08 08 00 00
        00 00 08 08 08 08 00 00  00 00 08 08 08 08 00 00  00 00 00 00 08 08 08 08
        00 00 00 00 08 08 08 08  00 00 00 00 00 00 00 00  08 08 08 08 08 08 08 08
        00 00 00 00 00 00 00 00  00 00 00 00 00 08 08 08  08 08 08 08 08 08 08 08
        08 08 08 08 08 08 08 08  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00""".replace("08", "80"), 0)


def test_wave_ram_write_while_playing_reaches_the_byte_being_read():
    """channel_3_wave_ram_locked_write: the wave channel at its fastest (NR33/34 = 7FF, a
    sample every 2 dots: a byte every M-cycle), triggered by ``ld [hl], $87`` and followed by k
    NOPs and a write of 2A to FF36: the write lands on byte k, the one the channel reads then
    (k = 0..8), not on byte 6."""
    def sub(k: int) -> str:
        return (f"ld c, $30\nxor a\n.iw{k}: ldh [c], a\ninc c\nadd a, $11\njr nc, .iw{k}\n"
                "ld a, $80\nldh [$1A], a\nld hl, $FF1E\nld c, $36\nld a, $2A\nld [hl], $87\n"
                + "nop\n" * k + "ldh [c], a\nxor a\nldh [$1A], a\n"
                f"ld c, $30\n.cp{k}: ldh a, [c]\nld [de], a\ninc de\ninc c\nld a, c\ncp $40\n"
                f"jr nz, .cp{k}\n")

    setup = ("xor a\nldh [$26], a\ncpl\nldh [$26], a\nld a, $20\nldh [$1C], a\nld a, $FF\n"
             "ldh [$1D], a\n")
    body = "di\n" + LCD_OFF + setup + "ld de, $C000\n" + "".join(sub(k) for k in range(9))
    rom = build_rom(assemble("start:\n" + body + "\n.spin: jr .spin\n"), title="PCM", cgb_flag=0x80)
    gb = GameBoy(rom, check_header=False, model="cgb")
    gb.run_frames(10)
    got = gb.read_memory(0xC000, 16 * 9)[0].tolist()
    for k in range(9):
        assert got[16 * k:16 * k + 16] == [0x2A if j == k else 0x11 * j for j in range(16)], k


@pytest.mark.parametrize("model", ["dmg", "cgb"])
def test_wave_ram_with_the_dac_on_and_the_channel_off(model):
    """channel_3_wave_ram_dac_on_rw: with channel 3's DAC on but the channel never triggered,
    wave RAM reads and writes as plain memory (on both models)."""
    read = ("ld b, 16\nld c, $30\n.r{0}: ldh a, [c]\ninc c\nld [hl+], a\ndec b\njr nz, .r{0}\n")
    body = ("xor a\nldh [$26], a\ncpl\nldh [$26], a\nld a, $20\nldh [$1C], a\n"
            "ld c, $30\nxor a\n.iw: ldh [c], a\ninc c\nadd a, $11\njr nc, .iw\nld hl, $C000\n"
            + read.format(0) + "ld a, $80\nldh [$1A], a\n" + read.format(1)
            + "ld a, 42\nldh [$35], a\nld a, 69\nldh [$32], a\nld a, 4\nldh [$3E], a\n"
            "xor a\nldh [$1A], a\n" + read.format(2))
    rom = build_rom(assemble("start:\ndi\n" + LCD_OFF + body + "\n.spin: jr .spin\n"), title="PCM",
                    cgb_flag=0x80)
    gb = GameBoy(rom, check_header=False, model=model)
    gb.run_frames(5)
    plain = [0x11 * j for j in range(16)]
    written = [0x2A if j == 5 else 0x45 if j == 2 else 0x04 if j == 14 else v for j, v in enumerate(plain)]
    assert gb.read_memory(0xC000, 48)[0].tolist() == plain + plain + written


def test_wave_ram_read_and_pcm34_are_in_step():
    """channel_3_wave_ram_sync (double speed, a sample every 0x100 NOPs): PCM34 and a wave RAM
    read while the channel plays (here at FF32, which gives the byte being played) change at the
    same fetches: 0 then sample 1 (2) then sample 2 (3); 12 then 34."""
    def sub(n: int) -> str:  # HL: where to read, set before the group
        fill = "push hl\nld a, $12\nld c, $22\nld hl, $FF30\n" + "ld [hl+], a\nadd a, c\n" * 16
        return (POWER_CYCLE + fill + "pop hl\nld a, $80\nldh [$1A], a\nld a, $20\nldh [$1C], a\n"
                "ld a, $87\nldh [$1E], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    ns = (0xFE, 0xFF, 0x100, 0x101, 0x1FE, 0x1FF, 0x200, 0x201)
    subs = [("ld hl, $FF77\n" if k == 0 else "") + sub(n) for k, n in enumerate(ns)]
    subs += [("ld hl, $FF32\n" if k == 0 else "") + sub(n) for k, n in enumerate(ns)]
    assert run_table(subs, DOUBLE_SPEED) == [0, 0, 0, 2, 2, 2, 2, 3] + [0x12] * 7 + [0x34]


def test_nrx2_write_to_a_playing_channel_changes_its_volume():
    """channel_1_volume: trigger with NR12 = ``old`` (volume 0, 1, 4, 7, 8, A, E or F; periods
    0 and 1, both directions), write NR12 = ``new`` at once, read PCM12 (75 % duty at period 1
    M-cycle: the output is high): the volume the write leaves ("zombie mode")."""
    def sub(old: int, new: int) -> str:
        return (POWER_CYCLE + f"ldh [$04], a\nld hl, $FF76\nld a, $FF\nldh [$13], a\n"
                f"ld a, $C0\nldh [$11], a\nld a, ${old:02X}\nldh [$12], a\nld a, $87\n"
                f"ldh [$04], a\nldh [$14], a\nld a, ${new:02X}\nldh [$12], a\nld a, [hl]\n"
                + STORE)

    olds = [hi << 4 | lo for lo in (0, 1, 8, 9) for hi in (0, 1, 4, 7, 8, 0xA, 0xE, 0xF)]
    got = run_table([sub(old, new) for new in (0xF0, 0xF1, 0xF8, 0xF9) for old in olds])
    assert got == table("""00 01 04 07 08 0A 0E 0F  00 01 04 07 08 0A 0E 0F
                           00 0F 0C 09 08 06 02 01  00 0F 0C 09 08 06 02 01
                           00 00 03 06 07 09 0D 0E  00 01 04 07 08 0A 0E 0F
                           0F 0E 0B 08 07 05 01 00  00 0F 0C 09 08 06 02 01
                           00 0E 0B 08 07 05 01 00  00 0D 0A 07 06 04 00 0F
                           01 02 05 08 09 0B 0F 00  00 01 04 07 08 0A 0E 0F
                           00 0E 0B 08 07 05 01 00  00 0D 0A 07 06 04 00 0F
                           01 02 05 08 09 0B 0F 00  00 01 04 07 08 0A 0E 0F""")


def test_nrx2_write_without_the_glitch_keeps_the_volume_through_envelope_steps():
    """channel_2_volume: NR22 80 -> F0 (falling, period 0 both: no change), then 4088-4095
    M-cycles (past envelope steps of the frame sequencer): volume 8 where the duty is high."""
    def sub(n: int) -> str:
        return (POWER_CYCLE + "ld hl, $FF76\nld a, $FF\nldh [$18], a\nld a, $C0\nldh [$16], a\n"
                "ld a, $80\nldh [$17], a\nld a, $87\nldh [$04], a\nldh [$19], a\nld a, $F0\n"
                "ldh [$17], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    got = run_table([sub(n) for n in range(0xFF8, 0x1000)], frames=30)
    assert got == [0x80, 0x80, 0x00, 0x00, 0x80, 0x80, 0x80, 0x80]


def test_wave_trigger_after_a_stopped_trigger_is_a_fresh_start():
    """channel_3_restart_stop_delay (double speed): a trigger with the DAC off, 640 M-cycles,
    then the DAC on and a trigger: the channel starts as from silence (PCM34 0 until the first
    sample, E of byte DE, 257 M-cycles later)."""
    def sub(n: int) -> str:
        return ("xor a\nldh [$26], a\ncpl\nld hl, $FF31\nldh [$26], a\n"
                + "ld [hl+], a\nsub a, $11\n" * 15
                + "ld hl, $FF77\nldh [$1A], a\nld a, $DE\nldh [$30], a\nld a, $20\nldh [$1C], a\n"
                "ld a, $87\nldh [$1E], a\n" + nops(0x280) + "xor a\nldh [$1A], a\nld a, $87\n"
                "ldh [$1A], a\nldh [$1E], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    got = run_table([sub(n) for n in (0, 1, 2, 3, 0xFE, 0xFF, 0x100, 0x101)], DOUBLE_SPEED)
    assert got == [0] * 7 + [0x0E]


def test_frequency_write_soon_after_a_step_applies_to_its_countdown():
    """channel_1_freq_change_timing-cgbDE: 12.5 % duty at 4 M-cycles a step, NR14 = 0 (a period
    of 1796 M-cycles) written ``n`` M-cycles after the trigger; PCM12 right after the write
    (high digit) and 16 M-cycles later (low digit: the step the channel stays on), at normal
    speed and in double speed."""
    def sub(n: int) -> str:
        return (POWER_CYCLE + "xor a\nldh [$11], a\nld a, $F8\nldh [$12], a\nld a, $FC\n"
                "ldh [$13], a\nld a, $87\nld hl, $FF14\nld b, 0\nld c, $76\nld [hl], a\n"
                + nops(n) + "ld [hl], b\nld a, [c]\nld b, a\nswap b\n" + nops(16)
                + "ld a, [c]\nor b\n" + STORE)

    subs = [sub(n) for n in range(22, 30)] + [DOUBLE_SPEED] + [sub(n) for n in range(50, 58)]
    assert run_table(subs)[:16] == [0x00, 0x00, 0x00, 0x0F, 0xFF, 0xFF, 0xFF, 0xF0,
                                    0x00, 0x00, 0x00, 0x0F, 0x0F, 0x0F, 0x0F, 0xFF]


def sweep_restart_sub(n: int, reg: int, val: int, nr13: int, nr10: int, nr14: int = 0x87,
                      before: int = 0xFFE) -> str:
    """channel_1_sweep_restart's sub-test: channel 1 from NR13 / NR14 with sweep NR10, DIV reset,
    ``before`` M-cycles, then ``val`` written to ``reg`` (around the sweep step), ``n`` more."""
    return ("ld [$FF04], a\n" + POWER_CYCLE + f"ld a, ${nr10:02X}\n" + nops(0x800)
            + f"ldh [$10], a\nld a, $80\nldh [$11], a\nld a, ${nr13:02X}\nldh [$13], a\n"
            f"ld a, $80\nldh [$12], a\nld a, ${nr14:02X}\nldh [$14], a\nld a, ${val:02X}\n"
            "ld [$FF04], a\n" + nops(before) + f"ldh [${reg:02X}], a\n" + nops(n) + "ld a, [hl]\n"
            + STORE)


def test_sweep_overflow_check_comes_later_and_a_restart_or_nr10_changes_it():
    """channel_1_sweep_restart: around the sweep step (7FF -> 7F0 down, or 7F0 -> 7FF up, whose
    next calculation overflows): a restart (the trigger's own check comes 9 M-cycles later),
    NR10 shift 0 (no check), NR10 rewritten (the check 8 M-cycles after the step stands);
    PCM12 for five rounds, NR52 for the last four."""
    rounds = [(0x14, 0x87, 0xFF, 0x1F), (0x14, 0x87, 0xF0, 0x17), (0x10, 0, 0xF0, 0x17),
              (0x10, 0x11, 0xF0, 0x17), (0x10, 0x17, 0xF0, 0x17)]
    subs = [sweep_restart_sub(n, *r) for r in rounds for n in range(16)]
    subs += [sweep_restart_sub(n, *r) for r in rounds[1:] for n in range(16)]
    subs[0] = "ld hl, $FF76\n" + subs[0]
    subs[80] = "ld hl, $FF26\n" + subs[80]
    assert run_table(subs, frames=400) == table("""
        00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 08 08 08 00
        00 00 00 00 00 00 00 00  08 08 08 08 08 08 08 08  08 08 00 00 00 00 08 08
        08 08 08 08 08 00 00 00  00 00 00 00 00 00 00 00  08 08 08 08 08 00 00 00
        00 00 00 00 00 00 00 00  f1 f1 f1 f1 f1 f1 f1 f0  f0 f0 f0 f0 f0 f0 f0 f0
        f1 f1 f1 f1 f1 f1 f1 f1  f1 f1 f1 f1 f1 f1 f1 f1  f1 f1 f1 f1 f1 f0 f0 f0
        f0 f0 f0 f0 f0 f0 f0 f0  f1 f1 f1 f1 f1 f0 f0 f0  f0 f0 f0 f0 f0 f0 f0 f0""")


def test_restart_just_before_an_unshifted_sweep_step_holds_its_calculation():
    """channel_1_sweep_restart_2: sweep period 1, shift 0 (a step checks frequency + frequency),
    channel 1 playing 3FF, restarted at 7FF ``d`` M-cycles (0-7) before the step's neighbourhood;
    NR52 ``n`` M-cycles later. The earliest restart is seen by the step, whose check stops the
    channel an M-cycle after it; one M-cycle later the step falls inside the restart's hold and
    keeps the trigger's calculation (no check), so the channel plays on."""
    subs = [sweep_restart_sub(n, 0x14, 0x87, 0xFF, 0x10, nr14=0x83, before=0xFFA + d)
            for d in range(8) for n in range(16)]
    subs[0] = "ld hl, $FF26\n" + subs[0]
    assert run_table(subs, frames=600) == [0xF1, 0xF1] + [0xF0] * 14 + [0xF1] * 112



@pytest.mark.parametrize("ch", [0, 1])
def test_envelope_speed_change_and_the_enable_bug(ch):
    """channel_x_nrx2_speed_change: NRx2 rewritten $400 M-cycles after a DIV reset while the
    channel plays (75 % duty, period 1 M-cycle: three reads 8 M-cycles apart ORed see the
    volume). A new period applies after the next envelope tick; switching the envelope off
    (period 0) stops it at once; switching it on ticks it once more at the next frame-sequencer
    step between the length clocks (rows 6-9: every $400 M-cycles, the write $400 or $800
    M-cycles after the DIV reset)."""
    b = 0x10 + 5 * ch

    def sub(n: int, old: int, new: int, extra: int) -> str:
        return ("ld [$FF04], a\n" + POWER_CYCLE + f"ld hl, $FF76\nld a, $FF\nldh [${b + 3:02X}], a\n"
                f"ld a, $C0\nldh [${b + 1:02X}], a\nld a, ${old:02X}\nldh [${b + 2:02X}], a\n"
                f"ld a, $87\nldh [${b + 4:02X}], a\nld [$FF04], a\nld a, ${new:02X}\n"
                + nops(0x400 + extra) + f"ldh [${b + 2:02X}], a\n" + nops(n)
                + "ld a, [hl]\nld b, a\n" + nops(8) + "ld a, [hl]\nor b\nld b, a\n" + nops(8)
                + "ld a, [hl]\nor b\n" + STORE)

    subs = [sub(4 + 0x4000 * k, old, new, 0) for old, new in
            ((0x09, 0x0A), (0x0A, 0x09), (0x08, 0x09), (0x08, 0x0A), (0x09, 0x08)) for k in range(8)]
    subs += [sub(0x400 * j, 0x08, 0x09, extra) for extra in (0, 0x400) for j in range(1, 17)]
    assert run_table(subs, frames=3000) == table("""
        00 10 10 20 20 30 30 40  00 00 10 20 30 40 50 60  10 30 40 50 60 70 80 90
        10 20 30 30 40 40 50 50  00 00 00 00 00 00 00 00  10 10 20 20 20 20 20 20
        20 20 20 20 20 20 30 30  10 20 20 20 20 20 20 20  20 20 20 20 20 30 30 30""", ch)


@pytest.mark.parametrize("ch", [0, 1])
def test_nrx2_glitch_with_longer_periods(ch):
    """channel_x_nrx2_glitch: NRx2 pairs with periods 0, 2 and 7, read 4 and $8004 M-cycles
    after the write (two envelope ticks later): the volume rule, the new period and the enable
    tick together."""
    r = regs(ch)

    def sub(n: int, old: int, new: int) -> str:
        return ("ld [$FF04], a\n" + POWER_CYCLE + f"ld hl, $FF76\nld a, $8F\nldh [{r['nrx3']}], a\n"
                f"ld a, $C0\nldh [{r['nrx1']}], a\nld a, ${old:02X}\nldh [{r['nrx2']}], a\n"
                f"ld a, $87\nldh [{r['nrx4']}], a\nld [$FF04], a\nld a, ${new:02X}\n"
                + nops(0x400) + f"ldh [{r['nrx2']}], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    pairs = ((0x20, 0x20), (0x08, 0x08), (0x22, 0x22), (0x32, 0x32), (0x20, 0x08), (0x08, 0x47),
             (0x22, 0x08), (0x08, 0x32))
    got = run_table([sub(n, old, new) for n in (4, 0x8004) for old, new in pairs], frames=600)
    assert got == table("20 10 20 30 D0 F0 C0 F0  20 10 10 20 D0 E0 C0 D0", ch)


@pytest.mark.parametrize("ch", [0, 1])
def test_restart_after_the_nrx2_glitch(ch):
    """channel_x_restart_nrx2_glitch: NRx2 80 -> 28 while playing (the glitch changes the
    volume), a retrigger 12 M-cycles later reloads it from NRx2 (2)."""
    r = regs(ch)

    def sub(n: int) -> str:
        return (POWER_CYCLE + f"ld hl, $FF76\nld a, $FC\nldh [{r['nrx3']}], a\nld a, $80\n"
                f"ldh [{r['nrx1']}], a\nldh [{r['nrx2']}], a\nld a, $87\nldh [{r['nrx4']}], a\n"
                f"ld a, $28\nldh [{r['nrx2']}], a\nld a, $87\n" + nops(12)
                + f"ldh [{r['nrx4']}], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    assert run_table([sub(n) for n in range(16)]) == table(
        "20 20 20 20 20 20 20 20  20 20 20 20 20 20 20 00", ch)


def test_wave_samples_through_pcm34_at_both_speeds():
    """channel_3_and_glitch (wave RAM EE DD CC ...; NR33/34 = 700: a sample every 512 dots):
    PCM34 shows samples 1, 2, 3 (E, D, C) from the first fetch on, in double speed and then at
    normal speed (the test's title: the wave channel is not touched by the AND glitch)."""
    def sub(n: int) -> str:
        return ("xor a\nldh [$26], a\ncpl\nld hl, $FF30\nldh [$26], a\n"
                + "sub $11\nld [hl+], a\n" * 16 + "ld hl, $FF77\nldh [$1A], a\nld a, $20\n"
                "ldh [$1C], a\nld a, $87\nldh [$1E], a\n" + nops(n) + "ld a, [hl]\n" + STORE)

    double = [sub(n) for base in (0xFC, 0x1FC, 0x3FC) for n in range(base, base + 8)]
    normal = [sub(n) for base in (0x7C, 0xFC, 0x1FC) for n in range(base, base + 8)]
    got = run_table(double + [DOUBLE_SPEED] + normal, DOUBLE_SPEED)
    assert got[:48] == table("""
        00 00 00 00 00 0E 0E 0E  0E 0E 0E 0E 0E 0D 0D 0D  0D 0D 0D 0D 0D 0C 0C 0C
        00 00 00 00 0E 0E 0E 0E  0E 0E 0E 0E 0D 0D 0D 0D  0D 0D 0D 0D 0C 0C 0C 0C""")


@pytest.mark.xfail(strict=True, reason=(
    "channel_1_and_glitch: the published table falls by one at the envelope's first tick with "
    "NR12 = $x9 (an increasing envelope); we rise by one, on the same M-cycle. The rule that "
    "turns an increasing envelope down here is not known (docs/accuracy.md)."))
def test_first_envelope_tick_at_both_speeds():
    """channel_1_and_glitch: 50 % duty at a period of 4 M-cycles, NR12 = $89 .. $19 (volume
    8 .. 1, period 1), DIV reset after the trigger, PCM12 read $3FFC-$4003 M-cycles later (the
    first envelope tick, 8 frame-sequencer steps on) and $7FFC-$8003 in double speed."""
    volumes = (0x89, 0x79, 0x69, 0x59, 0x49, 0x39, 0x29, 0x19)
    normal = [volume_div_subtest(n, v) for v in volumes for n in range(0x3FFC, 0x4004)]
    double = [volume_div_subtest(n, v) for v in volumes for n in range(0x7FFC, 0x8004)]
    got = run_table(normal + [DOUBLE_SPEED] + double, "ld hl, $FF76\n", frames=300)
    # the published table; ours is the same with v + 1 for v - 1 (the same M-cycles)
    rows = [[v, v, v - 1, v - 1, v - 1, 0, 0, 0] for v in range(8, 0, -1)]
    rows += [[v, v] + [v - 1] * 6 for v in range(8, 0, -1)]
    assert got[:128] == [x for row in rows for x in row]
