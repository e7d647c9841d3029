"""In-repo SM83 (Game Boy CPU) assembler and cartridge builder.

Used to build the games shipped in :mod:`torchrl_dreamer.roms` reproducibly (CI rebuilds them
and checks the bytes) and micro test ROMs in the tests. Pure Python, no dependency.

Example::

    >>> from torchrl_dreamer.asm import assemble, build_rom
    >>> prog = assemble('''
    ... start:  ld a, 42
    ...         ld [$C000], a
    ... .spin:  jr .spin
    ... ''')
    >>> rom = build_rom(prog, title="DEMO")   # 32 KiB image, header + checksums
    >>> rom[0x150:0x152].hex()
    '3e2a'
"""

from torchrl_dreamer.asm.assembler import Program, Section, assemble, split_operands
from torchrl_dreamer.asm.encoder import EncodeError, parse_operand
from torchrl_dreamer.asm.errors import AsmError
from torchrl_dreamer.asm.expr import ExprError, evaluate
from torchrl_dreamer.asm.rom import build_rom, global_checksum, header_checksum

__all__ = [
    "AsmError",
    "EncodeError",
    "ExprError",
    "Program",
    "Section",
    "assemble",
    "build_rom",
    "evaluate",
    "global_checksum",
    "header_checksum",
    "parse_operand",
    "split_operands",
]
