"""Game Boy games written for torchrl_dreamer, shipped as source and as built ROMs.

Each game lives in ``roms/<game>/<game>.asm`` (our own SM83 assembly, see
:mod:`torchrl_dreamer.asm`) next to its committed build ``<game>.gb``; shared runtime code is in
``roms/common/gb.asm`` (with ``digits.asm``, ``score.asm`` and ``rng.asm`` beside it).
``python -m torchrl_dreamer.roms.build`` rebuilds them and ``--check`` verifies the committed
binaries are byte-identical to a fresh build (CI runs the check).

Games (RAM maps, controls and rewards: ``docs/roms.md`` and the top of each ``.asm``):

- ``maze``: reach the exit of one of 16 9x9 block mazes (layout = ``LAYOUT & 15``).
- ``catch``: move a paddle to catch falling blocks; 3 lives, score on screen.
- ``runner``: jump over blocks scrolling towards the runner; one hit ends the game.

Example::

    >>> from torchrl_dreamer.roms import rom_path, ram_map
    >>> rom_path("maze").name
    'maze.gb'
    >>> hex(ram_map("maze")["GAME_STATE"])
    '0xc000'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchrl_dreamer.asm import Program

__all__ = ["GAMES", "GameSpec", "assemble_game", "build_game", "ram_map", "rom_path", "source_path"]

ROMS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class GameSpec:
    """How one shipped game is built (cartridge title, header fields) and started.

    ``start_frames``: frames to run after setting ``NEW_GAME`` before the screen shows the new
    game (the request is handled at the next VBlank; maze switches the LCD off to redraw and the
    first frame after the LCD comes back on is blank). An env taking its reset observation right
    after the request should run at least this many frames first.
    """

    name: str
    title: str
    start_frames: int
    cart_type: int = 0x00  # ROM only, 32 KiB
    version: int = 0


#: The games shipped with the package, by name (``maze``, ``catch``), with their metadata.
GAMES: dict[str, GameSpec] = {
    "maze": GameSpec("maze", title="TRLD MAZE", start_frames=4),
    "catch": GameSpec("catch", title="TRLD CATCH", start_frames=3),
    "runner": GameSpec("runner", title="TRLD RUNNER", start_frames=3),
}


def _spec(game: str) -> GameSpec:
    if game not in GAMES:
        raise ValueError(f"unknown shipped game {game!r}; available: {sorted(GAMES)}")
    return GAMES[game]


def source_path(game: str) -> Path:
    """Path of the game's assembly source ``roms/<game>/<game>.asm``."""
    _spec(game)
    return ROMS_DIR / game / f"{game}.asm"


def rom_path(game: str) -> Path:
    """Path of the committed, built ROM ``roms/<game>/<game>.gb``."""
    _spec(game)
    return ROMS_DIR / game / f"{game}.gb"


def assemble_game(game: str) -> Program:
    """Assemble the game's source; returns the :class:`~torchrl_dreamer.asm.Program`."""
    from torchrl_dreamer.asm import assemble

    src = source_path(game)
    return assemble(src.read_text(), filename=str(src))


def build_game(game: str) -> bytes:
    """Build the game's ROM image from source (deterministic: same bytes every time)."""
    from torchrl_dreamer.asm import build_rom

    spec = _spec(game)
    return build_rom(assemble_game(game), title=spec.title, cart_type=spec.cart_type,
                     version=spec.version)


@cache
def _ram_map(game: str) -> tuple[tuple[str, int], ...]:
    prog = assemble_game(game)
    return tuple(sorted((k, v) for k, v in prog.symbols.items()
                        if k.isupper() and 0xC000 <= v < 0xE000 and "." not in k))


def ram_map(game: str) -> dict[str, int]:
    """WRAM interface of a shipped game: ``{"GAME_STATE": 0xC000, "NEW_GAME": 0xC001, ...}``.

    Read from the assembled source itself, so tasks and the ROM can never disagree.
    """
    return dict(_ram_map(game))
