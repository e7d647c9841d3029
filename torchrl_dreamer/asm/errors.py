"""Errors raised by the in-repo SM83 assembler."""

from __future__ import annotations


class AsmError(ValueError):
    """An assembly error, located by file name and line number.

    Raised for unknown mnemonics, bad operands, out-of-range values or jumps, undefined or
    duplicate symbols and overlapping sections. ``str(err)`` reads ``file:line: message``, so
    the error points at the source line to fix.
    """

    def __init__(self, message: str, filename: str = "<asm>", line: int | None = None,
                 text: str | None = None) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        self.text = text
        where = filename if line is None else f"{filename}:{line}"
        full = f"{where}: {message}"
        if text:
            full += f"\n    {text.strip()}"
        super().__init__(full)
