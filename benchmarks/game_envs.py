"""The games the GPU benchmarks run, and how each is built as a ``GameBoyEnv``.

Shared by ``benchmarks/gpu_suite.py`` and ``benchmarks/simt.py`` (loaded by path: the
benchmarks folder is not a package). Ours are the two games this project ships (``maze``,
``catch``: registered tasks); the shared ones are the five homebrew games of the shared ROM
folder, each trained from its task spec in ``examples/tasks/`` (the same table as
``test/envs/test_game_specs.py``). A shared game is available when its ROM is found under the ROM
folder given (``--roms``), in the shared folder's layout (``games/<dir>/<file>``).

Start states are made once per game on the CPU with one console (a game's start macro can be
600+ frames, which one GPU thread emulates slowly) and handed to the benchmark's envs as a
savestate, so building an env of any size on any device costs one state load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TASK_SPECS = REPO / "examples" / "tasks"

OUR_GAMES = ("maze", "catch")
SHARED_GAMES = {
    "snake": "games/gb_raw_snake/snake.gb",
    "2048": "games/2048-wyattferguson/2048.gb",
    "pandoras_blocks": "games/pandoras-blocks/PandorasBlocks.gbc",
    "tobutobugirl": "games/tobutobugirl/tobu.gb",
    "postbot": "games/postbot/PostBot.gb",
}
"""Shared game -> ROM path relative to the shared ROM folder (its task spec is
``examples/tasks/<game>.yaml``)."""

ALL_GAMES = (*OUR_GAMES, *SHARED_GAMES)


def available_games(roms: Path | None, only: list[str] | None = None
                    ) -> tuple[list[str], dict[str, str]]:
    """``(games to run, {game: why not})`` for ``roms`` (``None``: ours only).

    ``only`` restricts the selection (unknown names raise ``ValueError``)."""
    wanted = list(only) if only else list(ALL_GAMES)
    unknown = [g for g in wanted if g not in ALL_GAMES]
    if unknown:
        raise ValueError(f"unknown games {unknown}; known: {', '.join(ALL_GAMES)}")
    games, missing = [], {}
    for g in wanted:
        if g in OUR_GAMES:
            games.append(g)
        elif roms is None:
            missing[g] = "no ROM folder given (--roms DIR)"
        elif not (roms / SHARED_GAMES[g]).is_file():
            missing[g] = f"ROM {roms / SHARED_GAMES[g]} not found"
        else:
            games.append(g)
    return games, missing


def make_task(game: str, roms: Path | None, state: Any = None) -> Any:
    """The task of ``game`` (a fresh instance), starting from ``state`` when given."""
    if game in OUR_GAMES:
        from torchrl_dreamer.envs.registry import make_task as registered

        return registered(game, state=state) if state is not None else registered(game)
    from torchrl_dreamer.envs.spec import load_task_spec

    if roms is None:
        raise ValueError(f"{game} needs the shared ROM folder")
    return load_task_spec(TASK_SPECS / f"{game}.yaml", rom=roms / SHARED_GAMES[game],
                          state=state)


def start_state(game: str, roms: Path | None) -> Any:
    """The state episodes of ``game`` start from, made on the CPU with one console."""
    from torchrl_dreamer.envs import GameBoyEnv

    env = GameBoyEnv(make_task(game, roms), num_envs=1, device="cpu", noop_max=0, seed=0)
    return env.gb.save_state()


def make_env(game: str, roms: Path | None, num_envs: int, device: str = "cpu",
             state: Any = None, **kwargs: Any) -> Any:
    """``GameBoyEnv`` of ``game`` with ``num_envs`` consoles on ``device`` (24-frame steps,
    packed2 pixels, the task's reward; one fixed start, from ``state`` when given)."""
    from torchrl_dreamer.envs import GameBoyEnv

    return GameBoyEnv(make_task(game, roms, state), num_envs=num_envs, device=device,
                      noop_max=0, seed=0, **kwargs)
