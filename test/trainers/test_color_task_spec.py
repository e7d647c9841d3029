"""A task spec over a Game Boy Color-only ROM passes the training config's checks (the env runs
such a ROM on the Color by default) and its env runs on the Color."""

from __future__ import annotations

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.trainers.config import TrainConfig


def test_color_only_rom_with_a_task_spec(tmp_path):
    rom = tmp_path / "spin.gbc"
    rom.write_bytes(build_rom(assemble("start: ld hl, $C000\n.l: inc [hl]\njr .l"),
                              title="SPIN", cgb_flag=0xC0))
    spec = tmp_path / "s.yaml"
    spec.write_text("reward: [{kind: delta, address: 0xC000}]\n")
    cfg = TrainConfig(task_spec=str(spec), rom=str(rom))  # no ColorOnlyCartridgeError
    from torchrl_dreamer.trainers.builder import make_env

    env = make_env(cfg, num_envs=1)
    assert env.gb.model == "cgb"
