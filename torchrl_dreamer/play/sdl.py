"""The play tool's window: SDL2 through ``pysdl2`` (``pip install 'torchrl_dreamer[play]'``).

Only this module touches SDL; the game itself runs in :class:`~torchrl_dreamer.play.core.PlaySession`.
The window shows every frame at the console's 59.73 fps (``speed`` scales it), reads the keyboard
(:data:`KEYMAP`) and keeps the live readout (step, action, reward, return, watches) in its title.
Buttons are sampled at each env step boundary: the buttons held then, plus any pressed (and maybe
released) since the previous boundary, so a tap shorter than a step is not lost.

Where no display exists (Linux without ``DISPLAY``/``WAYLAND_DISPLAY``, or SDL failing to open
one) :class:`NoDisplayError` says to play headless with a script instead. Setting
``SDL_VIDEODRIVER`` (e.g. ``dummy``) skips the environment check: SDL decides.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer.envs.actions import BUTTON_BITS
from torchrl_dreamer.play.core import GB_FPS, Command, PlaySession, Readout

__all__ = ["KEYMAP", "NoDisplayError", "SdlWindow", "check_display", "run_window"]

KEYMAP: dict[str, str] = {
    "UP": "UP", "DOWN": "DOWN", "LEFT": "LEFT", "RIGHT": "RIGHT",
    "Z": "A", "X": "B", "RETURN": "START", "KP_ENTER": "START", "BACKSPACE": "SELECT",
    "F2": "save state", "R": "end episode", "V": "toggle agent view", "ESCAPE": "quit",
}
"""SDL key name -> Game Boy button, or the tool command the key runs."""

_COMMANDS = {"F2": "save", "R": "reset", "V": "view", "ESCAPE": "quit"}

_NO_DISPLAY_HINT = (
    "play headless instead: python -m torchrl_dreamer.play ROM --headless --script moves.txt "
    "(or play(rom, inputs=[...], headless=True) from Python)"
)


class NoDisplayError(RuntimeError):
    """No window can be opened here; the message says how to play headless."""


def check_display(environ: Mapping[str, str] | None = None, platform: str | None = None) -> None:
    """Raise :class:`NoDisplayError` on Linux without ``DISPLAY``/``WAYLAND_DISPLAY`` (unless
    ``SDL_VIDEODRIVER`` names a driver).

    Example:
        >>> check_display({"DISPLAY": ":0"}, "linux")
        >>> try:
        ...     check_display({}, "linux")
        ... except NoDisplayError as err:
        ...     print(str(err)[:52])
        no display: neither DISPLAY nor WAYLAND_DISPLAY is s
    """
    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux") or env.get("SDL_VIDEODRIVER"):
        return
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        raise NoDisplayError(
            f"no display: neither DISPLAY nor WAYLAND_DISPLAY is set; {_NO_DISPLAY_HINT}")


def _import_sdl() -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pysdl2-dll announces which binaries it uses
            import sdl2
    except ImportError as err:
        raise ImportError(
            f"the play window needs pysdl2: pip install 'torchrl_dreamer[play]' ({err}); or "
            f"{_NO_DISPLAY_HINT}") from None
    return sdl2


def _keycode(sdl2: Any, name: str) -> int:
    # SDL names letter keys in lower case (SDLK_z), the others in upper case (SDLK_RETURN)
    code = getattr(sdl2, f"SDLK_{name}", None)
    return code if code is not None else getattr(sdl2, f"SDLK_{name.lower()}")


class SdlWindow:
    """A window showing RGB frames, with the keyboard state the play loop reads.

    Attributes:
        held: buttons mask held now.
        pressed: buttons pressed since :meth:`take_buttons` last ran.
        recent: the button pressed last (a mask with one bit).
        commands: tool commands (``"save"``, ``"reset"``, ``"view"``) not yet handled.
        quit: the window was closed or Escape pressed.
    """

    def __init__(self, title: str, scale: int = 4) -> None:
        check_display()
        sdl2 = _import_sdl()
        self._sdl = sdl2
        if sdl2.SDL_Init(sdl2.SDL_INIT_VIDEO) != 0:
            err = sdl2.SDL_GetError().decode(errors="replace")
            raise NoDisplayError(f"SDL could not open a display ({err}); {_NO_DISPLAY_HINT}")
        scale = max(1, int(scale))
        self._window = sdl2.SDL_CreateWindow(
            title.encode(), sdl2.SDL_WINDOWPOS_CENTERED, sdl2.SDL_WINDOWPOS_CENTERED,
            160 * scale, 144 * scale, sdl2.SDL_WINDOW_SHOWN)
        if not self._window:
            err = sdl2.SDL_GetError().decode(errors="replace")
            sdl2.SDL_Quit()
            raise NoDisplayError(f"SDL could not create a window ({err}); {_NO_DISPLAY_HINT}")
        self._renderer = sdl2.SDL_CreateRenderer(self._window, -1, 0)
        if not self._renderer:
            self._renderer = sdl2.SDL_CreateRenderer(self._window, -1, sdl2.SDL_RENDERER_SOFTWARE)
        self._textures: dict[tuple[int, int], Any] = {}
        self._keys = {_keycode(sdl2, name): name for name in KEYMAP}
        self.held = 0
        self.pressed = 0
        self.recent = 0
        self.commands: list[str] = []
        self.quit = False
        self.frames_shown = 0

    def poll(self) -> None:
        """Read pending events into :attr:`held`, :attr:`pressed`, :attr:`commands`, :attr:`quit`."""
        sdl2 = self._sdl
        event = sdl2.SDL_Event()
        while sdl2.SDL_PollEvent(ctypes.byref(event)):
            if event.type == sdl2.SDL_QUIT:
                self.quit = True
            elif event.type in (sdl2.SDL_KEYDOWN, sdl2.SDL_KEYUP):
                name = self._keys.get(event.key.keysym.sym)
                if name is None:
                    continue
                down = event.type == sdl2.SDL_KEYDOWN
                if name in _COMMANDS:
                    if down and not event.key.repeat:
                        if _COMMANDS[name] == "quit":
                            self.quit = True
                        else:
                            self.commands.append(_COMMANDS[name])
                    continue
                bit = BUTTON_BITS[KEYMAP[name]]
                if down:
                    self.held |= bit
                    self.pressed |= bit
                    self.recent = bit
                else:
                    self.held &= ~bit

    def take_buttons(self) -> tuple[int, int]:
        """``(buttons, recent)`` for the next env step: held now or pressed since the last call."""
        buttons = self.held | self.pressed
        self.pressed = 0
        return buttons, self.recent

    def show(self, rgb: torch.Tensor) -> None:
        """Draw a ``uint8[H, W, 3]`` frame scaled to the window."""
        sdl2 = self._sdl
        h, w = int(rgb.shape[0]), int(rgb.shape[1])
        tex = self._textures.get((h, w))
        if tex is None:
            tex = sdl2.SDL_CreateTexture(self._renderer, sdl2.SDL_PIXELFORMAT_RGB24,
                                         sdl2.SDL_TEXTUREACCESS_STREAMING, w, h)
            self._textures[(h, w)] = tex
        data = rgb.to(torch.uint8).contiguous()
        sdl2.SDL_UpdateTexture(tex, None, ctypes.c_void_p(data.data_ptr()), w * 3)
        sdl2.SDL_RenderClear(self._renderer)
        sdl2.SDL_RenderCopy(self._renderer, tex, None, None)
        sdl2.SDL_RenderPresent(self._renderer)
        self.frames_shown += 1

    def set_title(self, text: str) -> None:
        """Set the window title."""
        self._sdl.SDL_SetWindowTitle(self._window, text.encode())

    def close(self) -> None:
        """Destroy the window and shut SDL down."""
        sdl2 = self._sdl
        for tex in self._textures.values():
            sdl2.SDL_DestroyTexture(tex)
        self._textures.clear()
        if self._renderer:
            sdl2.SDL_DestroyRenderer(self._renderer)
            self._renderer = None
        if self._window:
            sdl2.SDL_DestroyWindow(self._window)
            self._window = None
        sdl2.SDL_Quit()


def run_window(
    session: PlaySession,
    *,
    scale: int = 4,
    speed: float = 1.0,
    view: str = "full",
    save_state_path: str | os.PathLike | None = None,
    commands: Iterable[Command] | None = None,
    max_steps: int | None = None,
    title: str = "torchrl_dreamer play",
    log: Callable[[str], None] = print,
    verbose: bool = False,
    on_step: Callable[[SdlWindow, Readout], None] | None = None,
) -> list[Readout]:
    """Play ``session`` in a window until Escape, the window closes, ``max_steps`` env steps or
    the end of ``commands`` (a script played in the window instead of the keyboard).

    Every frame is drawn, at ``speed`` x 59.73 fps. F2 saves a state to ``save_state_path``, R
    ends the episode (recorded as truncated), V switches between the console's screen and the
    72x80 frame the agent sees. The title shows the last :class:`Readout`; ``log`` gets a line
    when a reward arrives or an episode ends (every step with ``verbose``). ``on_step(window,
    readout)`` runs after each step (tests use it to press keys). Returns the readouts.
    """
    if speed <= 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    win = SdlWindow(title, scale)
    period = 1.0 / (GB_FPS * float(speed))
    views = ["full", "agent"]
    current = {"view": view, "deadline": time.perf_counter()}
    readouts: list[Readout] = []

    def draw() -> None:
        win.show(session.frame_rgb(current["view"]))

    def on_frame(k: int, gb: Any) -> None:
        win.poll()
        draw()
        current["deadline"] += period
        delay = current["deadline"] - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        elif delay < -0.25:  # far behind (a slow frame): do not race to catch up
            current["deadline"] = time.perf_counter()

    def report(r: Readout) -> None:
        readouts.append(r)
        if r.is_first and not session.env.task.reset_runs_frames:
            # the episode starts from its start state's own picture, not from emulated frames:
            # the console's screen is stale until the next step, so show what the agent sees
            win.show(session.frame_rgb("agent"))
        win.set_title(f"{title} | {r.line()}")
        if verbose or r.reward != 0 or r.terminated or r.truncated:
            log(r.line())
        if on_step is not None:
            on_step(win, r)

    def handle(cmd: str) -> None:
        if cmd == "save":
            if save_state_path is None:
                log("no save-state path: F2 ignored")
                return
            log(f"saved state {session.save_state(save_state_path)}")
        elif cmd == "reset":
            report(session.end_episode())
        elif cmd == "view":
            current["view"] = views[(views.index(current["view"]) + 1) % len(views)]

    script = None
    if commands is not None:
        script = iter([c for c in commands for _ in range(c.repeat if c.kind == "buttons" else 1)])
    session.on_frame = on_frame
    try:
        draw()
        win.set_title(f"{title} | {session.readout.line()}")
        while not win.quit and (max_steps is None or len(readouts) < max_steps):
            win.poll()
            while win.commands:
                handle(win.commands.pop(0))
            if win.quit:
                break
            if script is not None:
                cmd = next(script, None)
                if cmd is None or cmd.kind == "quit":
                    break
                if cmd.kind == "buttons":
                    report(session.step(cmd.buttons))
                elif cmd.kind == "reset":
                    report(session.end_episode())
                elif cmd.kind == "save":
                    target = cmd.path if cmd.path is not None else save_state_path
                    if target is not None:
                        log(f"saved state {session.save_state(Path(target))}")
                continue
            buttons, recent = win.take_buttons()
            report(session.step(buttons, recent))
    finally:
        session.on_frame = None
        win.close()
    return readouts
