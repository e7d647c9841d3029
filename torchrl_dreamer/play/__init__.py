"""Play a game yourself: a window (or a script), the task's reward and RAM watches live,
start savestates, and demonstrations recorded as the agent would see them.

``python -m torchrl_dreamer.play ROM [--spec S] [--record demo.pt]`` opens an SDL2 window
(``pip install 'torchrl_dreamer[play]'``). Keys: arrows = D-pad, Z = A, X = B, Enter = START,
Backspace = SELECT, F2 = save a start state, R = end the episode, V = show the agent's 72x80
view, Escape = quit. ``--headless --script moves.txt`` plays a script with no window (tests,
CI, machines without a display). ``docs/playing.md`` is the guide.

The game advances at the agent's granularity: one env step of ``GameBoyEnv`` (``frame_skip``
frames, the buttons held for the first ``press_frames``) per decision, with the player's buttons
mapped to the nearest action of the task's action set. So a recording is exactly an episode
the agent could have played: ``torchrl_dreamer.data.demonstrations`` loads it into training.

Parts: :mod:`torchrl_dreamer.play.core` (console, task, readout, savestates, recording; no
window) and :mod:`torchrl_dreamer.play.sdl` (the window).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from torchrl_dreamer.envs.task import Task
from torchrl_dreamer.play.core import (
    GB_FPS,
    Command,
    FreePlayTask,
    PlaySession,
    Readout,
    ScriptError,
    Watch,
    buttons_of,
    default_frame_skip,
    nearest_action,
    parse_script,
    parse_watch,
    resolve_task,
    task_watches,
)
from torchrl_dreamer.play.sdl import KEYMAP, NoDisplayError, SdlWindow, check_display, run_window

__all__ = [
    "GB_FPS",
    "KEYMAP",
    "Command",
    "FreePlayTask",
    "NoDisplayError",
    "PlaySession",
    "Readout",
    "ScriptError",
    "SdlWindow",
    "Watch",
    "buttons_of",
    "check_display",
    "default_frame_skip",
    "nearest_action",
    "parse_script",
    "parse_watch",
    "play",
    "resolve_task",
    "run_window",
    "task_watches",
]


def play(
    rom: str | os.PathLike | None = None,
    *,
    spec: str | os.PathLike | dict | None = None,
    task: str | Task | None = None,
    state: str | os.PathLike | None = None,
    inputs: str | os.PathLike | Iterable[str] | None = None,
    headless: bool = False,
    record: str | os.PathLike | None = None,
    save_state: str | os.PathLike | None = None,
    action_set: str | list[str] | None = None,
    frame_skip: int | None = None,
    press_frames: int | None = None,
    max_episode_steps: int | None | str = "task",
    seed: int = 0,
    noop_max: int = 0,
    watches: Iterable[str | Watch] = (),
    scale: int = 4,
    speed: float = 1.0,
    view: str = "full",
    max_steps: int | None = None,
    verbose: bool | None = None,
    log: Callable[[str], None] = print,
    model: str | None = None,
) -> PlaySession:
    """Play ``rom`` (or a task / spec) in a window, or headless through a script.

    Args:
        rom: a ROM file or a registered task name (``"maze"``); see :func:`resolve_task`.

    Keyword Args:
        spec: a task spec (file or dict) giving reward, episode end, start and actions.
        task: a registered task name or a :class:`~torchrl_dreamer.envs.task.Task`.
        state: a savestate to start from (overrides the task's start).
        inputs: a script (:func:`parse_script`: its text, its lines, or a file path). Headless
            it is the whole game; in a window it replaces the keyboard.
        headless: no window (needs ``inputs``).
        record: write the demonstration here when play stops (also after Ctrl-C).
        save_state: where F2 / a bare ``save`` line writes a state (default
            ``<ROM or task>.trdstate`` in the working directory).
        action_set, frame_skip, press_frames, max_episode_steps, seed, noop_max: the env's
            settings (:class:`PlaySession`; ``frame_skip`` defaults to what training uses for
            the task, :func:`default_frame_skip`, and with it ``press_frames`` to the task's
            own); record with the ones you train with.
        watches: extra RAM watches (``"score=0xC0A0:2:bcd"``) shown with the task's own.
        scale, speed, view: window size (x160x144), speed (1 = 59.73 fps) and ``"full"`` or
            ``"agent"`` view.
        max_steps: stop after this many env steps.
        verbose: log every step (default: headless yes, window only rewards and episode ends).
        log: where readout lines and messages go.
        model: the console, ``"dmg"`` or ``"cgb"`` (Game Boy Color); default: the Color for a
            Color-only cartridge, else the DMG. The window shows a Color game's luminance shades.

    Returns:
        the :class:`PlaySession` (its ``history`` holds every readout, ``env`` the console).

    Example:
        >>> s = play("maze", inputs=["RIGHT x2", "DOWN"], headless=True, log=lambda line: None)
        >>> [r.action_name for r in s.history]
        ['NOOP', 'RIGHT', 'RIGHT', 'DOWN']
    """
    commands = None
    if inputs is not None:
        if isinstance(inputs, os.PathLike):
            inputs = Path(inputs).read_text()
        commands = parse_script(inputs)
    if headless and commands is None:
        raise ValueError("headless play needs a script: inputs=[...] (CLI: --script moves.txt)")
    if not headless:
        check_display()
    the_task = resolve_task(rom, spec=spec, task=task, state=state)
    extra = [parse_watch(w) if isinstance(w, str) else w for w in watches]
    meta: dict[str, Any] = {}
    if spec is not None and not isinstance(spec, dict):
        meta["spec"] = str(spec)
    if state is not None:
        meta["state"] = str(state)
    session = PlaySession(the_task, action_set=action_set, frame_skip=frame_skip,
                          press_frames=press_frames, max_episode_steps=max_episode_steps,
                          seed=seed, noop_max=noop_max, watches=task_watches(the_task) + extra,
                          record=record is not None, meta=meta, model=model)
    if save_state is None:
        stem = Path(rom).stem if rom is not None and Path(rom).is_file() else the_task.name
        save_state = Path(f"{stem}.trdstate")
    name = the_task.name
    env = session.env
    log(f"playing {name!r}: actions {list(session.action_set.names)}, frame_skip "
        f"{env.frame_skip}, press_frames {env.press_frames}, max_episode_steps "
        f"{env.max_episode_steps or None}, seed {seed}")
    log(session.readout.line())
    try:
        if headless:
            chatty = True if verbose is None else verbose

            def show(r: Readout) -> None:
                if chatty or r.reward != 0 or r.terminated or r.truncated:
                    log(r.line())

            cmds = commands if max_steps is None else _truncate(commands, max_steps)
            session.run_script(cmds, save_state_path=save_state, on_readout=show, on_message=log)
        else:
            run_window(session, scale=scale, speed=speed, view=view, save_state_path=save_state,
                       commands=commands, max_steps=max_steps, title=f"play {name}", log=log,
                       verbose=bool(verbose))
    finally:
        if record is not None and session.recorder is not None:
            demo = session.demonstration()
            path = demo.save(record)
            log(f"recorded {len(demo)} steps, {demo.num_episodes} episode(s), returns "
                f"{[round(x, 3) for x in demo.episode_returns()]} -> {path}")
    return session


def _truncate(commands: list[Command], max_steps: int) -> list[Command]:
    """The script cut after ``max_steps`` env steps."""
    out: list[Command] = []
    left = int(max_steps)
    for c in commands:
        if left <= 0:
            break
        if c.kind == "buttons":
            n = min(c.repeat, left)
            out.append(Command("buttons", c.buttons, n))
            left -= n
        else:
            out.append(c)
            left -= c.kind == "reset"
    return out
