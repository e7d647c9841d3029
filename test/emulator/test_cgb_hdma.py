"""The Color's VRAM DMA rules that the SameSuite DMA tests measure (``LIJI32/SameSuite``
``dma/``), with micro ROMs of our own that follow their protocols and check their hardware
results: the transfer pointers are the HDMA1-4 registers and move on with each block
(``gbc_dma_cont``), their low 4 bits and the destination's top 3 are ignored
(``gdma_addr_mask``), and an HBlank transfer started with the LCD off or in mode 0 copies its
first block at once; stopping it leaves HDMA5 reading bit 7 and the written length bits
(``hdma_lcd_off``, ``hdma_mode0``)."""

from __future__ import annotations

import pytest

from torchrl_dreamer.asm import assemble, build_rom
from torchrl_dreamer.emulator import GameBoy

SRC, DST = 0xC100, 0x8800


def lcd_off(label: str) -> str:
    return f"{label}: ldh a, [$44]\ncp 144\njr nz, {label}\nxor a\nldh [$40], a\n"


def setup(dst_hi: int, dst_lo: int, src_lo_bits: int = 0) -> str:
    """Clear 2 KiB of VRAM from DST, fill 2 KiB of WRAM from SRC with each word's own address
    (the tests' pattern), and write the four pointer registers."""
    return f"""
        ld hl, ${DST:04X}
        ld a, ${dst_hi:02X}
        ldh [$53], a
        ld a, ${dst_lo:02X}
        ldh [$54], a
        ld bc, 2048
        xor a
    .clear: ld [hl+], a
        dec c
        jr nz, .clear
        dec b
        jr nz, .clear
        ld hl, ${SRC:04X}
        ld a, ${SRC >> 8:02X}
        ldh [$51], a
        ld a, ${(SRC & 0xFF) | src_lo_bits:02X}
        ldh [$52], a
        ld bc, 1024
    .fill: ld a, l
        ld [hl+], a
        ld a, h
        ld [hl+], a
        dec c
        jr nz, .fill
        dec b
        jr nz, .fill
    """


def run(body: str) -> GameBoy:
    """Run ``body`` on a Color with the LCD off first (a RETI at the STAT vector)."""
    src = "start:\ndi\n" + lcd_off(".off") + body + "\n.spin: jr .spin\n"
    rom = bytearray(build_rom(assemble(src), title="HDMA", cgb_flag=0x80))
    rom[0x48] = 0xD9  # RETI
    gb = GameBoy(bytes(rom), check_header=False, model="cgb")
    gb.run_frames(10)
    return gb


def pattern(tiles: int) -> list[int]:
    out: list[int] = []
    for k in range(0, 16 * tiles, 2):
        out += [(SRC + k) & 0xFF, (SRC + k) >> 8]
    return out


def test_a_new_transfer_continues_after_the_last():
    """gbc_dma_cont: two one-block general-purpose transfers, HDMA1-4 written once."""
    gb = run(setup(DST >> 8, DST & 0xFF) + "xor a\nldh [$55], a\nldh [$55], a\n")
    assert gb.read_memory(DST, 48)[0].tolist() == pattern(2) + [0] * 16


def test_pointer_bits_are_masked():
    """gdma_addr_mask: HDMA2 and HDMA4 with their low 4 bits set and HDMA3 with bits 5-6 set
    still copy to and from the aligned addresses (an HBlank transfer, LCD off: one block)."""
    gb = run(setup((DST >> 8) & 0x1F | 0x60, (DST & 0xFF) | 0x0F, 0x0F) + "ld c, $55\nld a, $83\nldh [c], a\n")
    assert gb.read_memory(DST, 32)[0].tolist() == pattern(1) + [0] * 16


@pytest.mark.parametrize("lcd", ["off", "mode0"])
def test_hblank_transfer_starts_with_a_block_in_hblank(lcd):
    """hdma_lcd_off / hdma_mode0: started with the LCD off, or in mode 0 (woken by the mode 0
    STAT interrupt), an HBlank transfer of 4 blocks copies one at once and HDMA5 reads 2;
    stopped with a write of 0, HDMA5 reads 80."""
    start = "ld c, $55\nld a, $83\nldh [c], a\n"
    if lcd == "mode0":  # LCD on, wait for the first frame's mode 1, then for mode 0
        start = ("ld a, 2\nldh [$FF], a\nld a, $10\nldh [$41], a\nxor a\nei\nldh [$0F], a\n"
                 "ldh a, [$40]\nor $80\nldh [$40], a\nhalt\nld a, $08\nldh [$41], a\n"
                 "ld c, $55\nld a, $83\nhalt\nldh [c], a\n")
    read = (f"ld hl, ${DST + 32:04X}\nldh a, [c]\nld [hl+], a\nxor a\nldh [c], a\nldh a, [c]\n"
            "ld [hl+], a\ndi\n" + lcd_off(".end"))
    gb = run(setup(DST >> 8, DST & 0xFF) + start + read)
    assert gb.read_memory(DST, 40)[0].tolist() == pattern(1) + [0] * 16 + [0x02, 0x80] + [0] * 6


def test_general_purpose_hdma_reads_each_source_region():
    """Two blocks each from ROM bank 0, the switchable ROM bank (MBC5 bank 2), cartridge RAM and
    VRAM (which reads FF as a source) land in VRAM as the source holds them."""
    copies = [("rom0data", 0x8800), ("$4000", 0x8820), ("$A000", 0x8840), ("$9000", 0x8860)]
    body = """
        ld a, $0A
        ld [$0000], a
        ld hl, $A000
        ld b, 32
    .cram: ld a, b
        xor $5A
        ld [hl+], a
        dec b
        jr nz, .cram
        ld a, 2
        ld [$2000], a
    """
    for src, dst in copies:
        body += f"""
        ld a, high({src})
        ldh [$51], a
        ld a, low({src})
        ldh [$52], a
        ld a, ${dst >> 8:02X}
        ldh [$53], a
        ld a, ${dst & 0xFF:02X}
        ldh [$54], a
        ld a, 1
        ldh [$55], a
        """
    rom0 = [(3 * k + 1) & 0xFF for k in range(32)]
    bank2 = [(7 * k + 2) & 0xFF for k in range(32)]
    src = ("start:\ndi\n" + lcd_off(".off") + body + "\n.spin: jr .spin\n"
           + "org $0800\nrom0data: db " + ", ".join(map(str, rom0))
           + "\nbank 2\nbank2data: db " + ", ".join(map(str, bank2)) + "\n")
    rom = bytearray(build_rom(assemble(src), title="HDMASRC", cgb_flag=0x80, cart_type=0x1B,
                              ram_size=3))
    rom[0x48] = 0xD9  # RETI
    gb = GameBoy(bytes(rom), check_header=False, model="cgb")
    gb.run_frames(10)
    vram = gb.read_memory(0x8800, 0x80)[0].tolist()
    assert vram[0x00:0x20] == rom0
    assert vram[0x20:0x40] == bank2
    assert vram[0x40:0x60] == [(32 - k) ^ 0x5A for k in range(32)]
    assert vram[0x60:0x80] == [0xFF] * 32
