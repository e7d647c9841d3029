"""The Game Boy Color model, block by block, with micro ROMs built by the in-repo assembler:
model selection and bad input, post-boot state, the KEY1 / STOP speed switch, WRAM and VRAM
banks, palette memory (auto-increment, mode-3 access), HDMA (general-purpose and HBlank), the
Color renderer (tile attributes, OBJ palettes, BG-to-OBJ priority, OAM-index priority), a
user-supplied Color boot ROM, and savestates with a model."""

from __future__ import annotations

import pytest
import torch
from conftest import requires_cuda, rom_path

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy
from torchrl_dreamer.emulator.cartridge import ColorOnlyCartridgeError
from torchrl_dreamer.emulator.state import EmulatorState, SavestateError

SPIN = "\n.spin: jr .spin\n"


def color_rom(body: str, cgb_flag: int = 0xC0, data: str = "") -> bytes:
    """A Color-only (or ``cgb_flag``) cartridge running ``body`` from 0x150, then spinning."""
    return build_rom(assemble("start:\n" + body + SPIN + data), title="CGBTEST", cgb_flag=cgb_flag)


def run(body: str, frames: int = 5, data: str = "", **kw) -> GameBoy:
    gb = GameBoy(color_rom(body, data=data), check_header=False, **kw)
    gb.run_frames(frames)
    return gb


def wram(gb: GameBoy, addr: int, n: int = 1) -> list[int]:
    return gb.read_memory(addr, n)[0].tolist()


LCD_OFF = """
.vbl:   ldh a, [$44]
        cp 144
        jr nz, .vbl
        xor a
        ldh [$40], a
"""


# ------------------------------------------------------------------------------ model
def test_model_choice_and_bad_input():
    spin = assemble("start: jr start")
    color_only = build_rom(spin, cgb_flag=0xC0)
    dual = build_rom(spin, cgb_flag=0x80)
    dmg = build_rom(spin)
    assert GameBoy(color_only, check_header=False).model == "cgb"
    assert GameBoy(dual, check_header=False).model == "dmg"
    assert GameBoy(dual, check_header=False, model="cgb").model == "cgb"
    assert GameBoy(dmg, check_header=False, model="cgb").model == "cgb"  # compatibility mode
    with pytest.raises(ColorOnlyCartridgeError, match="model='cgb'"):
        GameBoy(color_only, check_header=False, model="dmg")
    with pytest.raises(ValueError, match="unknown Game Boy model 'gbc'.*dmg, cgb"):
        GameBoy(dmg, check_header=False, model="gbc")
    with pytest.raises(ValueError, match="2304 bytes for model='cgb'"):
        GameBoy(color_only, check_header=False, boot_rom=bytes(256))
    with pytest.raises(AttributeError, match="Color.s frame.*model=.dmg."):
        _ = GameBoy(dmg, check_header=False).rgb555


def test_post_boot_registers_by_mode():
    spin = assemble("start: jr start")
    regs = {}
    for name, rom, model in (("cgb", build_rom(spin, cgb_flag=0x80), "cgb"),
                             ("compat", build_rom(spin), "cgb"), ("dmg", build_rom(spin), "dmg")):
        r = GameBoy(rom, check_header=False, model=model).registers()
        regs[name] = [int(r[k][0]) for k in ("a", "f", "b", "c", "d", "e", "h", "l")]
    assert regs["cgb"] == [0x11, 0x80, 0x00, 0x00, 0xFF, 0x56, 0x00, 0x0D]
    assert regs["compat"] == [0x11, 0x80, 0x00, 0x00, 0x00, 0x08, 0x00, 0x7C]
    assert regs["dmg"][0] == 0x01


def test_color_registers_read_ff_outside_color_mode():
    body = """
        ld a, 1
        ldh [$4F], a
        ldh a, [$4F]
        ld [$C000], a
        ldh a, [$70]
        ld [$C001], a
        ldh a, [$4D]
        ld [$C002], a
    """
    rom = build_rom(assemble("start:\n" + body + SPIN))  # DMG-only
    for model in ("dmg", "cgb"):
        gb = GameBoy(rom, check_header=False, model=model)
        gb.run_frames(2)
        assert wram(gb, 0xC000, 3) == [0xFF, 0xFF, 0xFF], model
    gb = run(body, 2)
    assert wram(gb, 0xC000, 3) == [0xFF, 0xF8, 0x7E]  # VBK 1, SVBK 0, KEY1: normal speed


# ------------------------------------------------------------------------------ speed
def timer_per_frame(switch: bool) -> GameBoy:
    """TIMA at 4096 Hz counted over one frame (VBlank to VBlank), after a speed switch or not."""
    sw = """
        ld a, 1
        ldh [$4D], a
        stop
    """ if switch else ""
    return run(sw + """
        ldh a, [$4D]
        ld [$C000], a
        ld a, 1
        ldh [$FF], a
        xor a
        ldh [$0F], a
        halt
        nop
        xor a
        ldh [$0F], a
        ld a, 4
        ldh [$07], a
        xor a
        ldh [$05], a
        halt
        nop
        ldh a, [$05]
        ld [$C001], a
    """, 5)


def test_speed_switch_doubles_the_cpu_clock():
    normal, double = timer_per_frame(False), timer_per_frame(True)
    assert wram(normal, 0xC000) == [0x7E] and wram(double, 0xC000) == [0xFE]
    # 70224 dots a frame: 68.6 periods of 1024 CPU T-cycles, twice as many at double speed
    assert wram(normal, 0xC001)[0] in (68, 69)
    assert wram(double, 0xC001)[0] in (137, 138)
    assert not bool(double.locked[0])


# ------------------------------------------------------------------------------ banks
def test_wram_banks():
    body = ""
    for bank in range(1, 8):
        body += f"ld a, {bank}\nldh [$70], a\nld a, {0x10 + bank}\nld [$D000], a\n"
    for bank in range(1, 8):
        body += f"ld a, {bank}\nldh [$70], a\nld a, [$D000]\nld [${0xC000 + bank:04X}], a\n"
    body += "xor a\nldh [$70], a\nld a, [$D000]\nld [$C008], a\nldh a, [$70]\nld [$C009], a\n"
    body += "ld a, [$F000]\nld [$C00A], a\n"  # echo of D000
    gb = run(body, 3)
    assert wram(gb, 0xC001, 10) == [0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x11, 0xF8, 0x11]
    assert gb.state_tensors()["cgbx"].shape[1] == 0x9080


def test_vram_banks():
    gb = run(LCD_OFF + """
        ld a, 1
        ldh [$4F], a
        ld a, $AA
        ld [$9800], a
        xor a
        ldh [$4F], a
        ld a, $55
        ld [$9800], a
        ld a, [$9800]
        ld [$C000], a
        ld a, 1
        ldh [$4F], a
        ld a, [$9800]
        ld [$C001], a
        ldh a, [$4F]
        ld [$C002], a
    """, 3)
    assert wram(gb, 0xC000, 3) == [0x55, 0xAA, 0xFF]
    assert int(gb.state_tensors()["vram"][0, 0x1800]) == 0x55
    assert int(gb.state_tensors()["cgbx"][0, 0x1800]) == 0xAA


# ------------------------------------------------------------------------------ palettes
def test_palette_memory_auto_increment_and_mode3():
    gb = run(LCD_OFF + """
        ld a, $80
        ldh [$68], a
        ld b, 8
        ld a, $10
.w:     ldh [$69], a
        inc a
        dec b
        jr nz, .w
        ld a, $02
        ldh [$68], a
        ldh a, [$69]
        ld [$C000], a
        ldh a, [$69]
        ld [$C001], a
        ldh a, [$68]
        ld [$C002], a
        ld a, $05
        ldh [$6A], a
        ld a, $77
        ldh [$6B], a
        ldh [$6B], a
        ldh a, [$6A]
        ld [$C003], a
        ld a, $91
        ldh [$40], a
.m3:    ldh a, [$41]
        and 3
        cp 3
        jr nz, .m3
        ld a, $80
        ldh [$68], a
        ldh a, [$69]
        ld [$C004], a
        ld a, $EE
        ldh [$69], a
        ldh a, [$68]
        ld [$C005], a
    """, 4)
    # no auto-increment on reads; BCPS reads bit 6 set
    assert wram(gb, 0xC000, 6) == [0x12, 0x12, 0x42, 0x45, 0xFF, 0xC1]
    pal = gb.state_tensors()["cgbx"][0]
    assert pal[0x9000:0x9008].tolist() == list(range(0x10, 0x18))  # the mode-3 write dropped
    assert int(pal[0x9045]) == 0x77


# ------------------------------------------------------------------------------ HDMA
def test_general_purpose_hdma_to_bank1():
    data = "\nsection \"src\", $1000\nsrc: " + "db " + ", ".join(str(k) for k in range(32))
    gb = run(LCD_OFF + """
        ld a, 1
        ldh [$4F], a
        ld a, $10
        ldh [$51], a
        xor a
        ldh [$52], a
        ld a, $88
        ldh [$53], a
        ld a, $10
        ldh [$54], a
        ld a, $01
        ldh [$55], a
        ldh a, [$55]
        ld [$C000], a
    """, 3, data=data)
    assert int(gb.state_tensors()["cgbx"][0, 0x0810 + 31]) == 31
    assert gb.state_tensors()["cgbx"][0, 0x0810:0x0830].tolist() == list(range(32))
    assert gb.state_tensors()["vram"][0, 0x0810:0x0830].tolist() == [0] * 32
    assert wram(gb, 0xC000) == [0xFF]


def test_hblank_hdma_one_block_per_line():
    data = "\nsection \"src\", $1000\nsrc: " + "db " + ", ".join(str(k + 1) for k in range(48))
    gb = run("""
.v:     ldh a, [$44]
        cp 150
        jr nz, .v
        ld a, $10
        ldh [$51], a
        xor a
        ldh [$52], a
        ld a, $80
        ldh [$53], a
        xor a
        ldh [$54], a
        ld a, $82
        ldh [$55], a
        ldh a, [$55]
        ld [$C000], a
.l1:    ldh a, [$44]
        cp 1
        jr nz, .l1
        ldh a, [$55]
        ld [$C001], a
.l5:    ldh a, [$44]
        cp 5
        jr nz, .l5
        ldh a, [$55]
        ld [$C002], a
    """, 4, data=data)
    # 3 blocks: none copied before line 0's HBlank, one per line, then HDMA5 reads FF
    assert wram(gb, 0xC000, 3) == [0x02, 0x01, 0xFF]
    assert gb.state_tensors()["vram"][0, 0:48].tolist() == list(range(1, 49))


# ------------------------------------------------------------------------------ renderer
SCENE = """
        ; BG palette 3 colour 1 = red $001F; OBJ palette 2 colour 3 = blue $7C00
        ld a, $80 | (3 * 8 + 2)
        ldh [$68], a
        ld a, $1F
        ldh [$69], a
        xor a
        ldh [$69], a
        ld a, $80 | (2 * 8 + 6)
        ldh [$6A], a
        xor a
        ldh [$6B], a
        ld a, $7C
        ldh [$6B], a
        ; bank 1 tile 1: lo plane $FF (colour 1) on every row
        ld a, 1
        ldh [$4F], a
        ld hl, $8010
        ld b, 8
.t:     ld a, $FF
        ld [hl+], a
        xor a
        ld [hl+], a
        dec b
        jr nz, .t
        ; attributes: map entries 0 and 1 use bank 1, palette 3; entry 1 also BG priority
        ld a, $0B
        ld [$9800], a
        ld a, $8B
        ld [$9801], a
        xor a
        ldh [$4F], a
        ld a, 1
        ld [$9800], a
        ld [$9801], a
        ; bank 0 tile 2: colour 3 everywhere (the object)
        ld hl, $8020
        ld b, 16
        ld a, $FF
.o:     ld [hl+], a
        dec b
        jr nz, .o
        ; object 0 at screen (4, 0), tile 2, OBJ palette 2; object 1 below it in OAM order
        ld hl, $FE00
        ld a, 16
        ld [hl+], a
        ld a, 12
        ld [hl+], a
        ld a, 2
        ld [hl+], a
        ld a, 2
        ld [hl+], a
        ld a, 16
        ld [hl+], a
        ld a, 8
        ld [hl+], a
        ld a, 2
        ld [hl+], a
        ld a, 3
        ld [hl+], a
"""


def test_renderer_attributes_palettes_and_priority():
    """Tile 1 of VRAM bank 1 (all colour 1) through BG palette 3 on map entries 0 and 1; two
    overlapping objects (OAM index priority), one hidden where the map attribute asks for BG
    priority."""
    gb = run(LCD_OFF + SCENE + "ld a, $93\nldh [$40], a", 4)
    rgb = gb.rgb555[0]
    red, blue = 0x001F, 0x7C00
    white = 0x7FFF
    # x 0-3: object 1 alone (OBJ palette 3, colour 3: white as the boot left it) over the BG
    assert [int(v) for v in rgb[0, 0:4]] == [white] * 4
    # x 4-7: objects 0 and 1 overlap; the lower OAM index wins although object 1 is further left
    assert [int(v) for v in rgb[0, 4:8]] == [blue] * 4
    # x 8-11: object 0 over map entry 1, whose attribute gives the BG priority: the BG shows,
    # through BG palette 3 from tile data bank 1 (x 12-15: the BG alone)
    assert [int(v) for v in rgb[0, 8:16]] == [red] * 8
    assert int(rgb[0, 16]) == white  # map entry 2: tile 0 of bank 0 (colour 0), palette 0
    # luminance shades: red 2, blue 3, white 0
    fb = gb._fb[0]
    assert [int(fb[0, 8]), int(fb[0, 4]), int(fb[0, 16])] == [2, 3, 0]


# ------------------------------------------------------------------------------ boot ROM
def test_color_boot_rom_maps_0000_00ff_and_0200_08ff():
    boot = bytearray(0x900)
    prog = assemble("""
        org $0000
        ld a, [$0200]
        ld [$C000], a
        ld a, [$0134]
        ld [$C001], a
        jp $00F0
        org $00F0
        ld a, 1
        ldh [$50], a
        org $0200
        db $5A
    """)
    for sec in prog.sections:
        boot[sec.address:sec.address + len(sec.data)] = sec.data
    rom = color_rom("ld a, [$0200]\nld [$C002], a")
    gb = GameBoy(rom, check_header=False, boot_rom=bytes(boot))
    gb.run_frames(3)
    assert wram(gb, 0xC000, 3) == [0x5A, ord("C"), rom[0x200]]


# ------------------------------------------------------------------------------ savestates
def test_color_savestate_round_trip_and_model_checks(tmp_path):
    body = "ld a, 3\nldh [$70], a\nld a, $42\nld [$D000], a\nld a, 1\nldh [$4F], a"
    rom = color_rom(body)
    gb = GameBoy(rom, check_header=False)
    gb.run_frames(3)
    s = gb.save_state()
    assert s.model == "cgb"
    path = tmp_path / "c.trdstate"
    s.save(path)
    other = GameBoy(rom, check_header=False)
    other.load_state(EmulatorState.load(path))
    for name, t in gb.state_tensors().items():
        assert torch.equal(t, other.state_tensors()[name]), name
    assert wram(other, 0xD000) == [0x42]
    # a Color state into a DMG console (same dual-mode ROM) is refused, naming both models
    dual = build_rom(assemble("start: jr start"), cgb_flag=0x80)
    color_state = GameBoy(dual, check_header=False, model="cgb").save_state()
    with pytest.raises(SavestateError, match="Game Boy Color.*model='dmg'.*model='cgb'"):
        GameBoy(dual, check_header=False, model="dmg").load_state(color_state)


def test_version4_savestate_loads_as_dmg():
    from torchrl_dreamer.emulator import layout
    from torchrl_dreamer.emulator.state import _V4_STATE_WORDS, STATE_VERSION

    rom = build_rom(assemble("start: ld a, [$C000]\ninc a\nld [$C000], a\njr start"))
    gb = GameBoy(rom, check_header=False)
    gb.run_frames(2)
    s = gb.save_state()
    v4 = {k: v for k, v in s.arrays.items() if k != "cgbx"}
    v4["st"] = v4["st"][:, :_V4_STATE_WORDS].clone()
    blob = EmulatorState(4, s.rom_sha256, _V4_STATE_WORDS, v4).to_bytes()
    old = EmulatorState.from_bytes(blob)
    assert (old.version, old.model, old.state_words) == (STATE_VERSION, "dmg", layout.STATE_WORDS)
    fresh = GameBoy(rom, check_header=False)
    fresh.load_state(old)
    for name, t in gb.state_tensors().items():
        assert torch.equal(t, fresh.state_tensors()[name]), name


# ------------------------------------------------------------------------------ PCM12 / PCM34
def test_pcm_registers_show_the_channels_amplitudes():
    """Channel 2 (50 % duty, volume 15), channel 3 (samples 5 and A at 100 %, after its silent
    first sample period) and channel 4 (volume 15): sampled over time, each amplitude takes
    both its low and its high value and nothing else; channel 1 (the boot chime, volume 0 by
    now) stays 0."""
    wave = "".join(f"ld a, $5A\nldh [${0x30 + k:02X}], a\n" for k in range(16))
    gb = run(wave + """
        ld a, $80
        ldh [$16], a
        ld a, $F0
        ldh [$17], a
        xor a
        ldh [$18], a
        ld a, $87
        ldh [$19], a
        ld a, $80
        ldh [$1A], a
        ld a, $20
        ldh [$1C], a
        xor a
        ldh [$1D], a
        ld a, $87
        ldh [$1E], a
        ld a, $F0
        ldh [$21], a
        ld a, $10
        ldh [$22], a
        ld a, $80
        ldh [$23], a
        ld hl, $C000
        ld b, 128
.l:     ldh a, [$76]
        ld [hl+], a
        ldh a, [$77]
        ld [hl+], a
        ld c, 23
.d:     dec c
        jr nz, .d
        dec b
        jr nz, .l
    """, 8)
    got = gb.read_memory(0xC000, 256)[0].tolist()
    pcm12, pcm34 = got[0::2], got[1::2]
    assert {v & 15 for v in pcm12} == {0}
    assert {v >> 4 for v in pcm12} == {0, 15}
    assert pcm34[0] & 15 == 0  # the wave channel is silent until its first fetch (test_cgb_pcm)
    assert {v & 15 for v in pcm34[2:]} == {5, 10}
    assert {v >> 4 for v in pcm34} == {0, 15}
    # 50 % duty: about half the samples high
    assert 40 <= sum(v >> 4 == 15 for v in pcm12) <= 88


@pytest.mark.parametrize("version", [5, 6, 7])
def test_older_savestates_load_with_the_later_columns_zero(version):
    """Version 5 files (before the PCM columns), 6 (before the APU's phase) and 7 (before the
    noise counter) load, the columns added since 0."""
    from torchrl_dreamer.emulator import layout
    from torchrl_dreamer.emulator.state import _PADDED_STATE_WORDS

    words = _PADDED_STATE_WORDS[version]
    gb = run("ld a, 2\nldh [$70], a\nld a, $33\nld [$D000], a", 3)
    s = gb.save_state()
    cut = dict(s.arrays)
    cut["st"] = cut["st"][:, :words].clone()
    old = EmulatorState.from_bytes(EmulatorState(version, s.rom_sha256, words, cut,
                                                 "cgb").to_bytes())
    assert (old.model, old.state_words) == ("cgb", layout.STATE_WORDS)
    assert int(old.arrays["st"][:, words:].abs().sum()) == 0
    fresh = GameBoy(color_rom("ld a, 2\nldh [$70], a\nld a, $33\nld [$D000], a"),
                    check_header=False)
    fresh.load_state(old)
    assert wram(fresh, 0xD000) == [0x33]
    assert torch.equal(fresh.state_tensors()["st"][:, :words], gb.state_tensors()["st"][:, :words])


def test_version_7_noise_countdown_is_capped_at_one_counter_tick():
    """A version 7 state counted the dots to the noise LFSR's next shift, which can be far
    longer than the counter's tick that the column now counts: it loads capped at one tick
    (NR43 code 7: 56 dots; code 0: 4), shorter values unchanged."""
    from torchrl_dreamer.emulator import layout
    from torchrl_dreamer.emulator.state import _PADDED_STATE_WORDS

    words, cnt = _PADDED_STATE_WORDS[7], layout.FIELDS["APU_NOISE_CNT"]
    gb = GameBoy(color_rom("nop"), num_envs=3, check_header=False)
    s = gb.save_state()
    cut = dict(s.arrays)
    cut["st"] = cut["st"][:, :words].clone()
    cut["st"][:, cnt] = torch.tensor([100_000, 100_000, 3], dtype=torch.int32)
    cut["hram"] = cut["hram"].clone()
    cut["hram"][:, 0x22] = torch.tensor([0x77, 0x00, 0x77], dtype=torch.uint8)
    old = EmulatorState.from_bytes(EmulatorState(7, s.rom_sha256, words, cut, "cgb").to_bytes())
    assert old.arrays["st"][:, cnt].tolist() == [56, 4, 3]


@pytest.mark.parametrize("lcdc, opri", [(0x92, 0), (0x93, 1)])
def test_renderer_master_priority_and_opri(lcdc, opri):
    """The scene of the test above with LCDC.0 clear (objects over every BG pixel, the BG still
    drawn) or with OPRI bit 0 (objects ordered by X first, as on a DMG)."""
    gb = run(LCD_OFF + SCENE + f"ld a, {opri}\nldh [$6C], a\nld a, ${lcdc:02X}\nldh [$40], a", 4)
    rgb = [int(v) for v in gb.rgb555[0, 0, 0:17]]
    red, blue, white = 0x001F, 0x7C00, 0x7FFF
    if lcdc == 0x92:
        assert rgb[0:4] == [white] * 4 and rgb[4:8] == [blue] * 4
        assert rgb[8:12] == [blue] * 4 and rgb[12:16] == [red] * 4  # the BG priority bit ignored
    else:
        # object 1 (X 8, screen 0-7) now beats object 0 (X 12) where they overlap
        assert rgb[0:8] == [white] * 8 and rgb[8:16] == [red] * 8


def test_color_consoles_on_several_cores_match_one():
    from torchrl_dreamer.emulator.workers import available_cores

    if available_cores() < 2:
        pytest.skip("needs 2 CPU cores")
    rom = color_rom(LCD_OFF + SCENE + "ld a, $93\nldh [$40], a\nld a, 5\nldh [$70], a")
    one = GameBoy(rom, num_envs=3, check_header=False)
    two = GameBoy(rom, num_envs=3, check_header=False, workers=2)
    one.run_frames(4)
    two.run_frames(4)
    assert torch.equal(one.rgb555, two.rgb555) and int(one.rgb555[2, 0, 4]) == 0x7C00
    for name, t in one.state_tensors().items():
        assert torch.equal(t, two.state_tensors()[name]), name


@pytest.mark.parametrize("double", [False, True])
def test_general_purpose_hdma_stalls_the_cpu(double):
    """128 blocks take 8 M-cycles each at normal speed (16 in double speed: the same 4096 dots):
    DIV, clocked by the CPU, moves 16 (32) counts over the transfer."""
    switch = "ld a, 1\nldh [$4D], a\nstop\n" if double else ""
    gb = run(switch + LCD_OFF + """
        ld a, $10
        ldh [$51], a
        xor a
        ldh [$52], a
        ld a, $80
        ldh [$53], a
        xor a
        ldh [$54], a
        ldh [$04], a
        ld a, $7F
        ldh [$55], a
        ldh a, [$04]
        ld [$C000], a
    """, 4)
    div = wram(gb, 0xC000)[0]
    assert div == (32 if double else 16), div


@pytest.mark.parametrize("hdma", [False, True])
def test_hblank_hdma_stalls_the_cpu(hdma):
    """A counting loop between two VBlanks (40 dots an iteration) loses 128 blocks x 32 dots of
    CPU time to an HBlank transfer of 128 blocks running through that frame."""
    start = """
        ld a, $10
        ldh [$51], a
        xor a
        ldh [$52], a
        ld a, $80
        ldh [$53], a
        xor a
        ldh [$54], a
        ld a, $FF
        ldh [$55], a
    """ if hdma else ""
    gb = run("""
        ld a, 1
        ldh [$FF], a
        xor a
        ldh [$0F], a
        halt
        nop
        xor a
        ldh [$0F], a
""" + start + """
        ld de, 0
.l:     inc de
        ldh a, [$0F]
        bit 0, a
        jr z, .l
        ld a, d
        ld [$C000], a
        ld a, e
        ld [$C001], a
    """, 4)
    hi, lo = wram(gb, 0xC000, 2)
    n = hi << 8 | lo
    lost = 128 * 32 // 40 if hdma else 0  # iterations the stall takes away
    assert abs(n - (70224 // 40 - lost)) <= 3, n


# ------------------------------------------------------------------------------- CUDA
@requires_cuda
def test_cuda_color_matches_cpu(roms):
    """The Color model on CUDA gives the CPU twin's colour frames, memory and registers bit for
    bit, on a real Color game (Pandora's Blocks, its HDMA, banks and palettes in use), with
    consoles of a warp pressing different buttons."""
    path = rom_path(roms, "games/pandoras-blocks/PandorasBlocks.gbc")
    presses = torch.tensor([0, 0x08, 0x01, 0x80], dtype=torch.uint8)  # none, START, A, DOWN
    cpu = GameBoy(path, num_envs=4, model="cgb")
    gpu = GameBoy(path, num_envs=4, model="cgb", device="cuda")
    for k in range(12):
        b = presses if k % 2 else torch.zeros(4, dtype=torch.uint8)
        cpu.step(b, frames=24, press_frames=8)
        gpu.step(b.cuda(), frames=24, press_frames=8)
    assert torch.equal(cpu.rgb555, gpu.rgb555.cpu())
    assert len(torch.unique(cpu.rgb555)) > 4  # a colour frame, not four shades
    assert torch.equal(cpu.read_memory(0xC000, 0x2000), gpu.read_memory(0xC000, 0x2000).cpu())
    for k, v in cpu.registers().items():
        assert torch.equal(v, gpu.registers()[k].cpu()), k


def test_bcps_reads_bit_6_and_increments_on_a_blocked_write():
    """SameSuite ppu/blocking_bgpi_increase (its protocol, our ROM): BCPS written 84 reads C4
    (bit 6 always set); a BCPD write from the STAT handler in mode 0, 1, 2, and in mode 3 where
    the palette write itself is blocked, still moves the index on (C5)."""
    def sub(k: int, stat: int) -> str:
        s = (f"ld a, ${stat:02X}\nldh [$41], a\nld a, $84\nld [$ff00+c], a\nld a, [$ff00+c]\n"
             "ld [hl+], a\nxor a\n")
        if k != 3:
            s += "ei\nldh [$0F], a\n"
        else:  # wake in mode 2 with IME off, wait into mode 3, then take the interrupt
            s += f"ldh [$0F], a\nhalt\nld a, 7\n.d{k}: dec a\njr nz, .d{k}\nei\n"
        return s + f".w{k}: jr z, .w{k}\nld a, [$ff00+c]\nld [hl+], a\n"

    body = ("ld hl, $C000\nld c, $68\nxor a\nldh [$41], a\nld a, 2\nldh [$FF], a\n"
            "ldh a, [$40]\nor $80\nldh [$40], a\n")
    body += "".join(sub(k, stat) for k, stat in enumerate([0x08, 0x10, 0x20, 0x20]))
    rom = bytearray(color_rom("di\n" + LCD_OFF + body, cgb_flag=0x80))
    rom[0x48:0x4D] = bytes([0xAF, 0xE0, 0x69, 0x3C, 0xC9])  # xor a; ldh [$69], a; inc a; ret
    gb = GameBoy(bytes(rom), check_header=False, model="cgb")
    gb.run_frames(10)
    assert wram(gb, 0xC000, 8) == [0xC4, 0xC5] * 4


@pytest.mark.parametrize("model, want", [("cgb", [0xAA, 0xBB, 0xFF, 0xCC]), ("dmg", [0, 0, 0, 0])])
def test_unusable_area_reads(model, want):
    """FEA0-FEFF, written first (the writes go nowhere): a Color (revision E) reads the
    address's second hex digit twice (which.gb's test that tells CGB E from D and A-C), a DMG
    00; with the LCD on, mode 2 reads FF on both."""
    body = LCD_OFF + """
        ld a, $55
        ld [$FEA0], a
        ld a, $44
        ld [$FEB8], a
        ld a, [$FEA0]
        ld [$C000], a
        ld a, [$FEB8]
        ld [$C001], a
        ld a, [$FEF0]
        ld [$C002], a
        ld a, [$FEC3]
        ld [$C003], a
        ld a, $91
        ldh [$40], a
.l1:    ldh a, [$44]
        cp 1
        jr nz, .l1
.m2:    ldh a, [$41]
        and 3
        cp 2
        jr nz, .m2
        ld a, [$FEA0]
        ld [$C004], a
    """
    gb = GameBoy(build_rom(assemble("start:\ndi\n" + body + SPIN), title="FEA0",
                           cgb_flag=0x80), check_header=False, model=model)
    gb.run_frames(5)
    assert wram(gb, 0xC000, 5) == want + [0xFF]


def test_wave_ram_after_the_color_boot_rom():
    """The Color's boot ROM leaves wave RAM 00 FF 00 FF ... (CGB A-E: which.gb's first test);
    a DMG's stays as our power-on state has it (zeros)."""
    gb = GameBoy(color_rom("nop"), check_header=False)
    assert gb.read_memory(0xFF30, 16)[0].tolist() == [0x00, 0xFF] * 8
    dmg = GameBoy(color_rom("nop", cgb_flag=0x80), check_header=False, model="dmg")
    assert dmg.read_memory(0xFF30, 16)[0].tolist() == [0] * 16


def test_undocumented_registers_ff72_ff75():
    """FF72-FF74 read/write (0 after boot), FF75 bits 4-6 read/write with the others reading 1
    (8F after boot): BullyGB's ``undoc_regs`` checks, in Color mode."""
    body = """
        ld hl, $C000
        ld c, $72
.r:     ldh a, [c]
        ld [hl+], a
        ld a, $FF
        ldh [c], a
        ldh a, [c]
        ld [hl+], a
        inc c
        ld a, c
        cp $76
        jr nz, .r
        ld a, $70
        ldh [$75], a
        ldh a, [$75]
        ld [hl+], a
        xor a
        ldh [$75], a
        ldh a, [$75]
        ld [hl], a
    """
    gb = run(body, 2)
    assert wram(gb, 0xC000, 10) == [0, 0xFF, 0, 0xFF, 0, 0xFF, 0x8F, 0xFF, 0xFF, 0x8F]
