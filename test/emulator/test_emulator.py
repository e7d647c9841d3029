"""Emulator core behaviour: API, ISA table/codegen, interrupts, timer, joypad, serial, PPU timing."""

from __future__ import annotations

import ast

import pytest
import torch
from conftest import requires_cuda, rom_path
from test_emulator_romkit import COUNT_IRQ, DI, LOOP, STOP_FOREVER, make_rom

from torchrl_dreamer.emulator import (
    BUTTON_A,
    BUTTON_B,
    BUTTON_DOWN,
    BUTTON_LEFT,
    BUTTON_RIGHT,
    BUTTON_START,
    GameBoy,
    ResetCache,
    codegen,
    isa,
)

IRQ_SETUP = b"\xaf\xe0\x0f\xfb\x76\x18\xfd"  # xor a; ldh (IF),a; ei; loop: halt; jr loop


def ie(mask: int) -> bytes:
    return bytes([0x3E, mask, 0xE0, 0xFF])  # ld a,mask; ldh (IE),a


# ------------------------------------------------------------------------------------ ISA table
def test_isa_table_complete():
    legal = [o for o in isa.OPCODES if o is not None]
    assert len(legal) == 245 and len(isa.CB_OPCODES) == 256
    assert {k for k, o in enumerate(isa.OPCODES) if o is None} == set(isa.ILLEGAL_OPCODES)
    assert isa.OPCODES[0xCB].group == "cb_prefix"
    for o in (o for o in legal if o.code != 0xCB):
        imm = sum(op.count("d16") + op.count("a16") for op in o.operands) * 2
        imm += sum(op in ("d8", "r8", "(a8)", "SP+r8") for op in o.operands)
        assert o.length == 1 + imm, o.text
        assert 1 <= o.cycles[1] <= o.cycles[0] <= 6, o.text
    assert isa.OPCODES[0x20].cycles == (3, 2) and isa.OPCODES[0xC0].cycles == (5, 2)
    assert isa.OPCODES[0x08].cycles == (5, 5) and isa.OPCODES[0xE8].flags == "00HC"
    assert isa.CB_OPCODES[0x46].cycles == (3, 3) and isa.CB_OPCODES[0x86].cycles == (4, 4)


def test_codegen_source_is_flat_and_keyed():
    src = codegen.generate_source("k")
    tree = ast.parse(src)
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "gb_run")
    assert kernel is not None
    for code in range(256):
        row = isa.OPCODES[code]
        if row is not None and row.group == "" and code != 0x76 and code not in codegen._STACK_CODES:
            assert f"if op == 0x{code:02X}:" in src, row.text
    assert "elif op ==" not in src  # flat dispatch, never an if/elif chain on the opcode
    assert "(op & 0xC7) == 0xC7" in src  # RST decoded structurally
    assert len(codegen.kernel_hash()) == 16
    assert codegen.operand_lengths()[0xCB] == 2 and codegen.operand_lengths()[0x10] == 1


# ------------------------------------------------------------------------------------ basics
def test_post_boot_state_and_api():
    gb = GameBoy(make_rom(), num_envs=2, check_header=False)
    regs = gb.registers()
    assert set(regs) == {"a", "f", "b", "c", "d", "e", "h", "l", "sp", "pc", "ime"}
    assert regs["a"].tolist() == [1, 1] and regs["f"].tolist() == [0xB0, 0xB0]
    assert regs["sp"].tolist() == [0xFFFE] * 2 and regs["pc"].tolist() == [0x100] * 2
    assert gb.read_memory(0xFF40, 1).tolist() == [[0x91], [0x91]]
    gb.run_frames(3)
    assert gb.frame_count.tolist() == [3, 3] and gb.frame_count.dtype == torch.int64
    assert gb.read_memory(0xFF44, 1)[:, 0].tolist() == [144, 144]  # frames end at VBlank


def test_write_read_memory_masked():
    gb = GameBoy(make_rom(), num_envs=3, check_header=False)
    gb.write_memory(0xC123, torch.tensor([7, 8], dtype=torch.uint8), mask=torch.tensor([True, False, True]))
    assert gb.read_memory(0xC123, 2).tolist() == [[7, 8], [0, 0], [7, 8]]
    assert gb.read_memory(0xE123, 2).tolist() == [[7, 8], [0, 0], [7, 8]]  # echo RAM
    with pytest.raises(ValueError, match="addr"):
        gb.read_memory(0x10000)


def test_read_memory_results_are_independent_of_later_reads():
    """read_memory replays one recorded launch per length into a shared buffer: each result is
    its own tensor (a later read or write must not change an earlier result)."""
    gb = GameBoy(make_rom(), num_envs=2, check_header=False)
    gb.write_memory(0xC000, torch.tensor([1, 2], dtype=torch.uint8))
    first = gb.read_memory(0xC000, 2)
    gb.write_memory(0xC000, torch.tensor([5, 6], dtype=torch.uint8))
    second = gb.read_memory(0xC000, 2)
    other = gb.read_memory(0xC001, 1)
    assert first.tolist() == [[1, 2], [1, 2]]
    assert second.tolist() == [[5, 6], [5, 6]] and other.tolist() == [[6], [6]]


def test_bad_arguments():
    gb = GameBoy(make_rom(), num_envs=2, check_header=False)
    with pytest.raises(ValueError, match="shape"):
        gb.run_frames(1, buttons=torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="uint8"):
        gb.run_frames(1, buttons=torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="obs_out"):
        gb.step(None, obs_out=torch.zeros(2, 72, 20, dtype=torch.uint8))
    with pytest.raises(ValueError, match="num_envs"):
        GameBoy(make_rom(), num_envs=0, check_header=False)
    with pytest.raises(ValueError, match="boot_rom must be 256"):
        GameBoy(make_rom(), boot_rom=b"\x00" * 10, check_header=False)


def test_illegal_opcode_locks_only_that_env():
    gb = GameBoy(make_rom(b"\xc3\x00\xc0"), num_envs=2, check_header=False)  # jp C000
    gb.write_memory(0xC000, torch.tensor([[0xD3, 0x00], [0x18, 0xFE]], dtype=torch.uint8))
    gb.run_frames(5)
    assert gb.locked.tolist() == [True, False]
    assert gb.frame_count.tolist()[1] == 5
    gb.run_frames(5)  # a locked env stays locked, the other keeps running
    assert gb.locked.tolist() == [True, False] and gb.frame_count.tolist()[1] == 10


def test_serial_output_per_env():
    code = b"\xfa\x00\xc1\xe0\x01\x3e\x81\xe0\x02" + STOP_FOREVER  # SB=(C100); SC=81
    gb = GameBoy(make_rom(code), num_envs=3, check_header=False)
    gb.write_memory(0xC100, torch.tensor([[ord("x")], [ord("y")], [ord("z")]], dtype=torch.uint8))
    gb.run_frames(2)
    assert [gb.serial_output(k) for k in range(3)] == [b"x", b"y", b"z"]
    assert gb.read_memory(0xFF0F, 1)[:, 0].tolist() == [0xE9] * 3  # serial + vblank IRQ flags
    with pytest.raises(IndexError):
        gb.serial_output(3)


# ------------------------------------------------------------------------------------ inputs
def test_joypad_register_per_env():
    code = b"\x3e\x10\xe0\x00\xf0\x00\xea\x00\xc0\x18\xf9"  # select buttons; loop: C000 = JOYP
    gb = GameBoy(make_rom(code), num_envs=3, check_header=False)
    gb.run_frames(2, buttons=torch.tensor([0, BUTTON_A, BUTTON_B | BUTTON_START | BUTTON_DOWN],
                                          dtype=torch.uint8))
    assert gb.read_memory(0xC000, 1)[:, 0].tolist() == [0xDF, 0xDE, 0xD5]


def test_run_frames_int_buttons_and_changing_lengths_match_single_frames():
    """An int button mask held for 8 frames then nothing for 32, alternated (the launch's
    frame count and mask change every call, its other parameters do not), gives the same
    console as the same inputs one frame per call; a mask outside 0..255 is refused."""
    code = b"\x3e\x10\xe0\x00\xf0\x00\xea\x00\xc0\x18\xf9"  # loop: C000 = JOYP (buttons)
    a = GameBoy(make_rom(code), check_header=False)
    b = GameBoy(make_rom(code), check_header=False)
    seen = []
    for mask in (BUTTON_A, BUTTON_START, 0, BUTTON_B):
        a.run_frames(8, mask, render=False)
        a.run_frames(32, render=False)
        for _ in range(8):
            b.run_frames(1, torch.tensor([mask], dtype=torch.uint8), render=False)
        seen.append(int(b.read_memory(0xC000, 1)[0, 0]))
        for _ in range(32):
            b.run_frames(1, render=False)
    assert seen == [0xDE, 0xD7, 0xDF, 0xDD]  # A, START, none, B held while they ran
    for name, t in a.state_tensors().items():
        assert torch.equal(t, b.state_tensors()[name]), name
    with pytest.raises(ValueError, match="0..255"):
        a.run_frames(1, 256)


def test_joypad_interrupt_on_press():
    code = b"\x3e\x10\xe0\x00" + ie(0x10) + IRQ_SETUP
    gb = GameBoy(make_rom(code, vectors={0x60: COUNT_IRQ}), num_envs=2, check_header=False)
    gb.run_frames(2)
    for _ in range(3):
        gb.step(torch.tensor([0, BUTTON_A], dtype=torch.uint8), frames=4, press_frames=2)
    assert gb.read_memory(0xC001, 1)[:, 0].tolist() == [0, 3]


# ------------------------------------------------------------------------------------ timing
def test_timer_interrupt_rate_while_halted():
    # TAC=4: 4096 Hz; TIMA overflows every 256 ticks = 262144 T-cycles
    code = b"\x3e\x04\xe0\x07" + ie(0x04) + IRQ_SETUP
    gb = GameBoy(make_rom(code, vectors={0x50: COUNT_IRQ}), check_header=False)
    gb.run_frames(60)  # 60 * 70224 = 4213440 T-cycles -> 16.07 overflows
    assert gb.read_memory(0xC001, 1)[0, 0] == 16
    assert gb.registers()["pc"][0] == 0x15D  # parked just after the HALT


def test_vblank_interrupt_once_per_frame():
    gb = GameBoy(make_rom(ie(0x01) + IRQ_SETUP, vectors={0x40: COUNT_IRQ}), check_header=False)
    gb.run_frames(10)
    first = int(gb.read_memory(0xC001, 1)[0, 0])
    gb.run_frames(50)
    assert int(gb.read_memory(0xC001, 1)[0, 0]) - first == 50


def test_lyc_stat_interrupt():
    handler = b"\xf0\x44\xea\x00\xc0" + COUNT_IRQ  # C000 = LY; count
    code = b"\x3e\x40\xe0\x45\x3e\x40\xe0\x41" + ie(0x02) + IRQ_SETUP  # LYC=64, STAT LYC enable
    gb = GameBoy(make_rom(code, vectors={0x48: handler}), check_header=False)
    gb.run_frames(10)
    assert gb.read_memory(0xC000, 1)[0, 0] == 0x40
    count = int(gb.read_memory(0xC001, 1)[0, 0])
    assert 9 <= count <= 10


def test_lcd_off_blank_and_ly_zero(roms):
    code = b"\xaf\xe0\x40" + STOP_FOREVER  # LCDC = 0
    gb = GameBoy(make_rom(code), check_header=False)
    gb.packed2.fill_(0xFF)
    gb.run_frames(3)
    assert gb.read_memory(0xFF44, 1)[0, 0] == 0
    assert not gb.packed2.any()
    assert gb.frame_count[0] == 3  # frames still end every 70224 cycles with the LCD off


def test_lcd_off_blanks_framebuffer_and_first_frame_after_lcd_on():
    gb = GameBoy(make_rom(LOOP), framebuffer=True, check_header=False)
    gb.write_memory(0x9800, torch.zeros(0x800, dtype=torch.uint8))  # no boot logo on the maps
    gb.write_memory(0xFF47, 0x03)  # BGP: colour 0 -> shade 3, so a drawn frame is all black
    gb.run_frames(2)
    assert (gb.framebuffer == 3).all() and (gb.packed2 == 0xFF).all()
    gb.write_memory(0xFF40, 0x11)  # LCD off
    gb.run_frames(1)
    assert not gb.framebuffer.any() and not gb.packed2.any()
    gb.write_memory(0xFF40, 0x91)  # LCD on: the first frame is blank, as on hardware
    gb.run_frames(1)
    assert not gb.framebuffer.any() and not gb.packed2.any()
    gb.run_frames(1)
    assert (gb.framebuffer == 3).all() and (gb.packed2 == 0xFF).all()


# ------------------------------------------------------------------------------------ many envs
def test_envs_diverge_independently_and_match_single_runs(roms):
    path = rom_path(roms, "games/2048-wyattferguson/2048.gb")
    start = torch.tensor([0, BUTTON_START, BUTTON_START, BUTTON_START], dtype=torch.uint8)
    moves = torch.tensor([0, BUTTON_LEFT, BUTTON_RIGHT, BUTTON_DOWN], dtype=torch.uint8)
    schedule = [start] * 4 + [moves] * 16
    many = GameBoy(path, num_envs=4)
    for presses in schedule:
        many.step(presses, frames=12, press_frames=4)
    wram = many.read_memory(0xC000, 0x2000)
    assert len({bytes(w.tolist()) for w in wram}) >= 3, "different inputs must give different states"
    for env in (1, 3):
        one = GameBoy(path, num_envs=1)
        for presses in schedule:
            one.step(presses[env:env + 1], frames=12, press_frames=4)
        assert torch.equal(one.read_memory(0xC000, 0x2000)[0], wram[env])
        assert torch.equal(one.packed2[0], many.packed2[env])
        for k, v in one.registers().items():
            assert v[0] == many.registers()[k][env], k


def test_step_writes_obs_out_in_place(roms):
    path = rom_path(roms, "games/2048-wyattferguson/2048.gb")
    gb = GameBoy(path, num_envs=2)
    ref = GameBoy(path, num_envs=2)
    replay = torch.zeros(2, 4, 1, 72, 20, dtype=torch.uint8)
    row = replay[:, 2]
    for _ in range(8):
        out = gb.step(torch.tensor([BUTTON_START, 0], dtype=torch.uint8), obs_out=row)
        ref_out = ref.step(torch.tensor([BUTTON_START, 0], dtype=torch.uint8))
    assert out.data_ptr() == row.data_ptr()
    assert torch.equal(replay[:, 2], ref_out) and replay[:, 2].any()
    assert not replay[:, 0].any() and not replay[:, 3].any()


def test_run_frames_replayed_launch_takes_each_calls_arguments(roms):
    """run_frames replays one recorded launch: every call's frame count and buttons (int mask,
    tensor, None) must reach the kernel, as they do through step()'s direct launch (obs_out)."""
    path = rom_path(roms, "games/2048-wyattferguson/2048.gb")
    gb = GameBoy(path, num_envs=2)
    ref = GameBoy(path, num_envs=2)
    buf = torch.zeros(2, 1, 72, 20, dtype=torch.uint8)
    calls = [(30, None), (6, BUTTON_START), (20, None), (5, torch.tensor([BUTTON_START, 0],
             dtype=torch.uint8)), (9, BUTTON_LEFT), (3, None), (7, torch.tensor(
             [BUTTON_DOWN, BUTTON_RIGHT], dtype=torch.uint8)), (11, 0)]
    for n, b in calls:
        gb.run_frames(n, b)
        ref.step(b, frames=n, press_frames=n, obs_out=buf)
    assert torch.equal(gb.read_memory(0xC000, 0x2000), ref.read_memory(0xC000, 0x2000))
    assert not torch.equal(gb.read_memory(0xC000, 0x2000)[0], gb.read_memory(0xC000, 0x2000)[1])
    assert torch.equal(gb.packed2, buf)
    for k, v in gb.registers().items():
        assert torch.equal(torch.as_tensor(v), torch.as_tensor(ref.registers()[k])), k


# ------------------------------------------------------------------------------------ CUDA
@requires_cuda
def test_cuda_matches_cpu(roms):
    """The same kernel source on CUDA (address-major storage) gives the CPU results bit for bit."""
    path = rom_path(roms, "games/2048-wyattferguson/2048.gb")
    presses = torch.tensor([0, BUTTON_START, BUTTON_A, BUTTON_DOWN], dtype=torch.uint8)
    cpu = GameBoy(path, num_envs=4)
    gpu = GameBoy(path, num_envs=4, device="cuda")
    for k in range(10):
        b = presses if k % 2 else torch.zeros(4, dtype=torch.uint8)
        cpu.step(b, frames=24, press_frames=8)
        gpu.step(b.cuda(), frames=24, press_frames=8)
    assert torch.equal(cpu.packed2, gpu.packed2.cpu())
    assert torch.equal(cpu.read_memory(0xC000, 0x2000), gpu.read_memory(0xC000, 0x2000).cpu())
    for k, v in cpu.registers().items():
        assert torch.equal(v, gpu.registers()[k].cpu()), k
    gpu_state = gpu.save_state()
    cpu.load_state(gpu_state)  # savestates move between devices
    assert torch.equal(cpu.registers()["pc"], gpu.registers()["pc"].cpu())


@requires_cuda
def test_cuda_blargg_cpu_instrs(roms):
    gb = GameBoy(rom_path(roms, "blargg/cpu_instrs/cpu_instrs.gb"), num_envs=8, device="cuda",
                 check_header=False)
    gb.run_frames(4000)
    for env in range(8):
        assert b"Passed all tests" in gb.serial_output(env)


def test_user_boot_rom_runs_then_unmaps():
    boot = bytearray(256)
    boot[0:5] = b"\x3e\x42\xea\x00\xc0"  # ld a,42h; ld (C000),a; then NOPs up to FC
    boot[0xFC:0x100] = b"\x3e\x01\xe0\x50"  # ld a,1; ldh (50),a -> falls through to 0100
    rom = make_rom(b"\x3e\x99\xea\x01\xc0" + STOP_FOREVER)  # ld a,99h; ld (C001),a
    gb = GameBoy(rom, boot_rom=bytes(boot), check_header=False)
    assert gb.registers()["pc"][0] == 0 and gb.read_memory(0x0000, 1)[0, 0] == 0x3E
    gb.run_frames(2)
    assert gb.read_memory(0xC000, 2)[0].tolist() == [0x42, 0x99]
    assert gb.read_memory(0x0000, 1)[0, 0] == rom[0]  # boot ROM unmapped by the FF50 write


def test_ei_halt_with_pending_irq_returns_to_halt():
    # di; IE=timer; IF=timer (pending); ei; halt; [C002 = 55h; spin]
    code = b"\xf3\x3e\x04\xe0\xff\x3e\x04\xe0\x0f\xfb\x76\x3e\x55\xea\x02\xc0\x18\xfe"
    gb = GameBoy(make_rom(code, vectors={0x50: COUNT_IRQ}), check_header=False)
    gb.run_frames(3)
    # the IRQ is served once, its handler runs normally (no doubled byte), and it returns to the
    # HALT, which then halts for good (timer off): the code after HALT never runs
    assert gb.read_memory(0xC001, 2)[0].tolist() == [1, 0]
    assert gb.registers()["pc"][0] == 0x15B


def test_halt_bug_repeats_next_byte():
    # di; IE=timer; IF=timer; halt (IME=0, pending: no halt, PC fails to advance); inc a; ...
    code = b"\xf3\x3e\x04\xe0\xff\x3e\x04\xe0\x0f\xaf\x76\x3c\xea\x00\xc0" + STOP_FOREVER
    gb = GameBoy(make_rom(code), check_header=False)
    gb.run_frames(2)
    assert gb.read_memory(0xC000, 1)[0, 0] == 2  # INC A executed twice


def test_halt_bug_survives_a_stop_between_the_halt_and_the_repeated_fetch():
    """A launch that ends right after a HALT hitting the bug (the kernel carries it as a mark on
    its PC) leaves the plain PC and ``HALT_BUG`` in the state; the same console, and a savestate
    of it loaded elsewhere, then read the byte after HALT twice."""
    from torchrl_dreamer.emulator.layout import FIELDS

    code = b"\xf3\x3e\x04\xe0\xff\x3e\x04\xe0\x0f\xaf\x76\x3c\xea\x00\xc0" + STOP_FOREVER
    gb = GameBoy(make_rom(code), check_header=False)
    gb.step_instructions(9)  # nop; jp 0150; di; ld a,4; ldh (IE),a; ld a,4; ldh (IF),a; xor a; halt
    assert gb.registers()["pc"][0] == 0x15B  # INC A, after the HALT at 015A
    assert gb.state_tensors()["st"][0, FIELDS["HALT_BUG"]] == 1
    other = GameBoy(make_rom(code), check_header=False)
    other.load_state(gb.save_state())
    for g in (gb, other):
        g.step_instructions(1)
        assert (g.registers()["a"][0], g.registers()["pc"][0]) == (1, 0x15B)  # PC not stepped
        assert g.state_tensors()["st"][0, FIELDS["HALT_BUG"]] == 0
        g.step_instructions(1)
        assert (g.registers()["a"][0], g.registers()["pc"][0]) == (2, 0x15C)


def timer_irq_div_rom(halt: bool, handler_nops: int) -> bytes:
    """Timer IRQ latency probe (the protocol of gbmicrotest's int_timer_{nops,halt}_div tests).

    DIV = 0; IE = timer; TIMA = E0; TAC = 05 (16 T-cycles a tick); IF = 0; ei; xor a; then a
    long NOP run or HALT. The handler runs ``handler_nops`` NOPs, then ``ldh a,(DIV)``; ld b,a.
    """
    code = b"\x3e\x00\xe0\x04" + ie(0x04) + b"\x3e\xe0\xe0\x05\x3e\x05\xe0\x07"
    code += b"\xaf\xe0\x0f\xfb\xaf" + (b"\x76" if halt else b"\x00" * 2000) + DI + LOOP
    handler = b"\x00" * handler_nops + b"\xf0\x04\x47" + DI + LOOP  # (no HALT: mGBA runs it too)
    return make_rom(code, vectors={0x50: handler})


@pytest.mark.parametrize(("halt", "nops", "div"), [(False, 43, 2), (False, 44, 3),
                                                   (True, 42, 2), (True, 43, 3)])
def test_timer_irq_timing_matches_hardware(halt, nops, div):
    """DMG facts (gbmicrotest int_timer_nops_div_a/b, int_timer_halt_div_a/b, on hardware).

    The interrupt check samples IF at the end of the next opcode's fetch M-cycle, so a timer IRQ
    raised during that fetch is taken before the instruction (NOP loop: 43 NOPs read DIV 2, 44
    read 3); a timer IRQ that wakes HALT reaches its handler one M-cycle later than that (42 NOPs
    read 2, 43 read 3). A one-M-cycle error either way flips one of the four readings.
    """
    gb = GameBoy(timer_irq_div_rom(halt, nops), check_header=False)
    gb.run_frames(2)
    assert gb.registers()["b"][0] == div


GAMES = ["2048-wyattferguson/2048.gb", "gb_raw_snake/snake.gb", "postbot/PostBot.gb",
         "tobutobugirl/tobu.gb", "pandoras-blocks/PandorasBlocks.gbc"]


@pytest.mark.parametrize("game", GAMES)
def test_games_run_with_inputs(roms, game):
    """Smoke test on the homebrew games: no lock-up, stack in RAM, a picture, inputs matter."""
    gb = GameBoy(rom_path(roms, "games/" + game), num_envs=3, check_header=False)
    moves = [BUTTON_START, BUTTON_A, BUTTON_RIGHT, BUTTON_DOWN, BUTTON_LEFT]
    for k in range(60):
        b = torch.tensor([0, BUTTON_START if k < 10 else moves[k % 5], moves[(3 * k) % 5]],
                         dtype=torch.uint8)
        gb.step(b, frames=24, press_frames=8)
    assert not gb.locked.any()
    assert bool((gb.registers()["sp"] >= 0xC000).all()), "stack left RAM: the game crashed"
    assert gb.packed2.flatten(1).any(1).all(), "every env shows a picture"
    assert gb.frame_count.tolist() == [1440] * 3


@pytest.mark.parametrize("stat_bits", [0x08, 0x20])
def test_hblank_and_oam_stat_interrupts_once_per_visible_line(stat_bits):
    # the OAM source also fires once as VBlank starts (line 144, mooneye vblank_stat_intr)
    code = bytes([0x3E, stat_bits, 0xE0, 0x41]) + ie(0x02) + IRQ_SETUP  # STAT mode 0 / mode 2
    gb = GameBoy(make_rom(code, vectors={0x48: COUNT_IRQ}), check_header=False)
    gb.run_frames(2)
    c1 = int(gb.read_memory(0xC001, 1)[0, 0])
    gb.run_frames(1)
    c2 = int(gb.read_memory(0xC001, 1)[0, 0])
    assert (c2 - c1) % 256 == (145 if stat_bits == 0x20 else 144)


@pytest.mark.parametrize("frames", [1, 2])  # 1: rendered frame (per-mode events); 2: coarse frame
def test_ly_and_stat_mode_reads_follow_the_beam(frames):
    # loop: C000[k] = LY, C100[k] = STAT & 3 for k = 0..255 (each iteration is 10 M-cycles)
    code = (b"\x21\x00\xc0"          # ld hl,C000
            b"\xf0\x44\x77"          # loop: ldh a,(44); ld (hl),a
            b"\x24\xf0\x41\xe6\x03\x77\x25"  # inc h; ldh a,(41); and 3; ld (hl),a; dec h
            b"\x2c\x20\xf3"          # inc l; jr nz loop
            ) + STOP_FOREVER
    gb = GameBoy(make_rom(code), check_header=False)
    gb.run_frames(frames)
    ly = gb.read_memory(0xC000, 256)[0].tolist()
    mode = gb.read_memory(0xC100, 256)[0].tolist()
    assert all(b - a in (0, 1) for a, b in zip(ly, ly[1:]))  # LY counts up one line at a time
    assert all(m in (0, 2, 3) for y, m in zip(ly, mode) if y < 144)
    assert {0, 2, 3} <= set(mode)  # all three visible-line modes are seen
    # samples are 40 dots apart and every mode lasts longer: modes only step 2 -> 3 -> 0 -> 2
    allowed = {2: {2, 3}, 3: {3, 0}, 0: {0, 2, 1}, 1: {1, 2}}
    for k, (m0, m1) in enumerate(zip(mode, mode[1:])):
        assert m1 in allowed[m0], (k, ly[k], m0, m1)


def test_address_major_layout_matches(roms):
    """The CUDA storage layout ([size, N] viewed transposed), exercised on CPU: same results."""
    path = rom_path(roms, "games/postbot/PostBot.gb")
    a = GameBoy(path, num_envs=3)
    b = GameBoy(path, num_envs=3, memory_layout="address_major")
    assert b.state_tensors()["wram"].stride() == (1, 3)
    presses = torch.tensor([0, BUTTON_START, BUTTON_A], dtype=torch.uint8)
    for _ in range(15):
        a.step(presses)
        b.step(presses)
    assert torch.equal(a.packed2, b.packed2) and a.packed2.any()
    for name, t in a.state_tensors().items():
        assert torch.equal(t, b.state_tensors()[name]), name
    cache = ResetCache(b, a.save_state().select(0))  # broadcast restore into a strided layout
    cache.restore(torch.tensor([False, True, True]))
    assert torch.equal(b.registers()["pc"], a.registers()["pc"][0].expand(3))


@pytest.mark.parametrize("game", ["2048-wyattferguson/2048.gb", "gb_raw_snake/snake.gb",
                                  "postbot/PostBot.gb"])
def test_title_screens_match_pyboy(roms, game):
    """Whole pipeline (CPU, PPU timing, renderer) against PyBoy on the games' static title screens.

    PyBoy starts through its own boot ROM, so frame phases differ: only screens that stay still
    are compared (shade indices, PyBoy's palette set to the 4 DMG greys)."""
    pyboy = pytest.importorskip("pyboy")
    path = rom_path(roms, "games/" + game)
    pb = pyboy.PyBoy(str(path), window="null", sound_emulated=False,
                     color_palette=(0xFFFFFF, 0xAAAAAA, 0x555555, 0x000000))
    pb.set_emulation_speed(0)
    gb = GameBoy(path, framebuffer=True, check_header=False)
    try:
        for frames in (120, 240):
            pb.tick(frames - pb.frame_count, False)
            pb.tick(1, True)
            pb.tick(1, True)  # the first rendered frame after render=False ticks can be stale
            red = torch.from_numpy(pb.screen.ndarray[:, :, 0].copy())
            theirs = 3 - torch.bucketize(red.to(torch.int64), torch.tensor([0x2A, 0x7F, 0xD4]))
            gb.run_frames(frames - int(gb.frame_count[0]))
            ours = gb.framebuffer[0].to(torch.int64)
            assert ours.any()
            assert torch.equal(ours, theirs), f"{int((ours != theirs).sum())} pixels differ at {frames}"
    finally:
        pb.stop(save=False)
