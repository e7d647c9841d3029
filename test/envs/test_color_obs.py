"""``GameBoyEnv(pixels="color")``: a Game Boy Color game's colours as ``uint8 [N, 3, 72, 80]``
(the opt-in colour observation), and ``model=`` passed to the emulator."""

from __future__ import annotations

import pytest
import torch
from torchrl.envs.utils import check_env_specs

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.task import Task

# Every VBlank: count frames in C000 (A holds the count after FRAME_COUNT) ...
FRAME_COUNT = """
start:  ld a, 1
        ldh [$FF], a
.frame: xor a
        ldh [$0F], a
        halt
        nop
        ld a, [$C000]
        inc a
        ld [$C000], a
"""
# ... and write the count's low 5 bits as the red channel of BG palette 0 colour 0 (the colour
# of most of the screen).
RED_RAMP = FRAME_COUNT + """
        and 31
        ld b, a
        ld a, $80
        ldh [$68], a
        ld a, b
        ldh [$69], a
        xor a
        ldh [$69], a
        jr .frame
"""


class Ramp(Task):
    """Toy task over the red ramp ROM: no reward, never done."""

    name = "color_ramp_test"
    default_action_set = "dpad"
    default_max_episode_steps = 0
    rom_has_logo = False

    def __init__(self, rom_file, **kw):
        super().__init__(**kw)
        self._file = rom_file

    def rom_path(self):
        return self._file

    def compute(self, gb, pixels, is_first):
        z = torch.zeros(gb.num_envs, dtype=torch.bool, device=pixels.device)
        return z.float(), z


@pytest.fixture
def ramp_rom(tmp_path):
    path = tmp_path / "ramp.gbc"
    path.write_bytes(build_rom(assemble(RED_RAMP), title="RAMP", cgb_flag=0xC0))
    return path


def test_color_observation_follows_the_palette(ramp_rom):
    env = GameBoyEnv(Ramp(ramp_rom), num_envs=2, pixels="color", frame_skip=4)
    assert env.gb.model == "cgb"
    assert env.observation_spec["pixels"].shape == (2, 3, 72, 80)
    check_env_specs(env)
    td = env.reset()
    for _ in range(3):
        td = env.fast_step(torch.zeros(2, dtype=torch.long))
        count = int(env.gb.read_memory(0xC000)[0, 0])
        r5 = (count & 31)
        # the observation is the last frame: drawn with the palette written at the VBlank before
        assert td["pixels"].dtype == torch.uint8
        red = td["pixels"][0, 0, 40, 40].item()
        assert red in ((r5 << 3) | (r5 >> 2), (((r5 - 1) & 31) << 3) | (((r5 - 1) & 31) >> 2))
        assert td["pixels"][0, 1:, 40, 40].tolist() == [0, 0]
    assert env.render().shape == (2, 72, 80, 3)
    # a checkpoint keeps the colour bookkeeping
    state = env.state_dict()
    assert "_last_color" in state["env"]


def test_packed2_of_a_color_game_is_its_luminance(ramp_rom):
    env = GameBoyEnv(Ramp(ramp_rom), num_envs=1, frame_skip=4)
    env.reset()
    td = env.fast_step(torch.zeros(1, dtype=torch.long))
    assert td["pixels"].shape == (1, 1, 72, 20)
    # red alone is at most Y = 9 of 31: shade 2 or 3, never the white of a DMG's post-boot BG
    assert int(td["pixels"][0, 0, 20, 10]) & 3 in (2, 3)


def test_color_needs_a_color_console(tmp_path):
    dual = tmp_path / "dual.gbc"
    dual.write_bytes(build_rom(assemble(RED_RAMP), title="RAMP", cgb_flag=0x80))
    with pytest.raises(ValueError, match="pixels='color'.*model='cgb'"):
        GameBoyEnv(Ramp(dual), num_envs=1, pixels="color")
    env = GameBoyEnv(Ramp(dual), num_envs=1, pixels="color", model="cgb")
    assert env.gb.model == "cgb"


def test_color_observation_of_a_dmg_only_game_uses_the_compatibility_palettes(tmp_path):
    """A DMG-only cartridge on the Color: the colour observation shows the boot ROM's palette
    for its header (a homebrew title: palette ID 0, BG colour 0 white, colour 3 black); the
    packed2 observation stays the DMG's shades."""
    from torchrl_dreamer.emulator.compat_palettes import compat_boot

    # BGP 0xE4 then 0xFF (every BG pixel shade 3) at the VBlank of every odd frame
    prog = FRAME_COUNT + """
        ld b, $E4
        bit 0, a
        jr z, .set
        ld b, $FF
.set:   ld a, b
        ldh [$47], a
        jr .frame
"""
    rom = tmp_path / "dmg.gb"
    rom.write_bytes(build_rom(assemble(prog), title="DMGRAMP"))
    boot = compat_boot(rom.read_bytes())
    env = GameBoyEnv(Ramp(rom), num_envs=1, pixels="color", model="cgb", frame_skip=1)
    plain = GameBoyEnv(Ramp(rom), num_envs=1, model="cgb", frame_skip=1)
    env.reset()
    plain.reset()
    seen = set()
    for _ in range(4):
        td = env.fast_step(torch.zeros(1, dtype=torch.long))
        shade = int(plain.fast_step(torch.zeros(1, dtype=torch.long))["pixels"][0, 0, 20, 10]) & 3
        rgb = td["pixels"][0, :, 20, 20].tolist()
        c = boot.bg[shade]
        assert rgb == [((c >> s & 31) << 3) | ((c >> s & 31) >> 2) for s in (0, 5, 10)]
        seen.add(shade)
    assert seen == {0, 3}


def test_the_world_model_encodes_the_color_observation(ramp_rom):
    from torchrl_dreamer.modules.world_model import make_dreamer
    from torchrl_dreamer.trainers.builder import obs_spec_of

    env = GameBoyEnv(Ramp(ramp_rom), num_envs=2, pixels="color", frame_skip=4)
    kinds = obs_spec_of(env)
    assert kinds == {"pixels": ("image", (3, 72, 80))}
    wm, _, _ = make_dreamer("tiny", kinds, action_dim=env.action_set.n)
    td = env.reset()
    enc = wm.encoders["pixels"]
    embed = enc(enc.preprocess(td["pixels"]))
    assert embed.shape == (2, enc.out_features)
    assert bool(torch.isfinite(embed).all())


def test_play_runs_a_color_game_and_refuses_a_dmg_for_it(ramp_rom, capsys):
    from torchrl_dreamer.play import play
    from torchrl_dreamer.play.__main__ import main

    played = play(str(ramp_rom), inputs=["NOOP x2"], headless=True, log=lambda line: None)
    assert played.env.gb.model == "cgb" and len(played.history) == 3
    # the CLI's --model dmg asks for a DMG, which refuses a Color-only ROM with a clear error
    script = ramp_rom.parent / "moves.txt"
    script.write_text("NOOP\n")
    assert main([str(ramp_rom), "--headless", "--script", str(script), "--model", "dmg"]) == 2
    assert "model='cgb'" in capsys.readouterr().err
