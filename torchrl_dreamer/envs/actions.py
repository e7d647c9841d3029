"""Action sets: how a discrete action index becomes a Game Boy buttons mask.

An agent picks one of ``n`` discrete actions; the console wants an 8-bit mask of held buttons
(bit0 A, bit1 B, bit2 SELECT, bit3 START, bit4 RIGHT, bit5 LEFT, bit6 UP, bit7 DOWN: the emulator's
``BUTTON_*`` constants). An :class:`ActionSet` is the codec between the two: an ordered list of
named actions, each a combination of buttons, stored as a ``uint8[n]`` lookup table that is gathered
on the env's device (no host sync, no Python per env).

TorchRL has no Game Boy notion of buttons, so this small codec is ours. Built-in sets, by name:

- ``"default"``: NOOP, A, B, START, SELECT, UP, DOWN, LEFT, RIGHT (9 actions).
- ``"minimal"``: NOOP, A, B, START, UP, DOWN, LEFT, RIGHT (8; the upstream convention).
- ``"dpad"``: NOOP, UP, DOWN, LEFT, RIGHT (5; enough for the maze).
- ``"combos"``: ``"default"`` plus A and B with each direction (17).

Custom sets: ``ActionSet(["NOOP", "A", "UP+A"])`` (``+`` joins buttons).

Example:
    >>> import torch
    >>> from torchrl_dreamer.envs.actions import make_action_set
    >>> acts = make_action_set("dpad")
    >>> acts.names
    ('NOOP', 'UP', 'DOWN', 'LEFT', 'RIGHT')
    >>> acts.encode(torch.tensor([0, 1, 4])).tolist()
    [0, 64, 16]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "BUTTON_BITS",
    "ActionSet",
    "ACTION_SETS",
    "GAME_FRAME_SKIP",
    "PRESS_FRAMES",
    "default_press_frames",
    "make_action_set",
]

GAME_FRAME_SKIP = 8
"""Frames per env step that a Game Boy task trains with unless the task, its spec or the run
says otherwise (a decision every 0.13 s; ``docs/decisions/training_defaults.md``). Defined
here, below the trainers, so that the env-level tools (the spec probe) step as training does."""

PRESS_FRAMES = 8
"""Frames a chosen action's buttons are held at the start of a longer env step, by default; the
step's other frames run with no button held."""


def default_press_frames(frame_skip: int) -> int:
    """Frames an action is held in a step of ``frame_skip`` frames unless told otherwise:
    :data:`PRESS_FRAMES`, or the whole step when it is shorter.

    Example:
        >>> default_press_frames(24), default_press_frames(4)
        (8, 4)
    """
    return min(PRESS_FRAMES, frame_skip)

BUTTON_BITS: dict[str, int] = {
    "A": 1 << 0,
    "B": 1 << 1,
    "SELECT": 1 << 2,
    "START": 1 << 3,
    "RIGHT": 1 << 4,
    "LEFT": 1 << 5,
    "UP": 1 << 6,
    "DOWN": 1 << 7,
}
"""Buttons mask bit of each button name (1 = pressed), as in the emulator contract."""

_DIRECTIONS = ("UP", "DOWN", "LEFT", "RIGHT")

ACTION_SETS: dict[str, tuple[str, ...]] = {
    "default": ("NOOP", "A", "B", "START", "SELECT", *_DIRECTIONS),
    "minimal": ("NOOP", "A", "B", "START", *_DIRECTIONS),
    "dpad": ("NOOP", *_DIRECTIONS),
    "combos": (
        "NOOP",
        "A",
        "B",
        "START",
        "SELECT",
        *_DIRECTIONS,
        *(f"{d}+A" for d in _DIRECTIONS),
        *(f"{d}+B" for d in _DIRECTIONS),
    ),
}
"""Built-in action sets by name (see the module docstring)."""


def _parse_action(name: str) -> int:
    """Buttons mask of one action name such as ``"NOOP"``, ``"A"`` or ``"UP+A"``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"an action name must be a non-empty string, got {name!r}")
    if name.strip().upper() == "NOOP":
        return 0
    mask = 0
    for part in name.split("+"):
        button = part.strip().upper()
        if button not in BUTTON_BITS:
            raise ValueError(
                f"unknown button {part!r} in action {name!r}; known buttons: "
                f"{', '.join(BUTTON_BITS)} (join several with '+', or use 'NOOP')"
            )
        mask |= BUTTON_BITS[button]
    if mask & BUTTON_BITS["UP"] and mask & BUTTON_BITS["DOWN"]:
        raise ValueError(f"action {name!r} presses UP and DOWN together, which a DMG cannot do")
    if mask & BUTTON_BITS["LEFT"] and mask & BUTTON_BITS["RIGHT"]:
        raise ValueError(f"action {name!r} presses LEFT and RIGHT together, which a DMG cannot do")
    return mask


class ActionSet:
    """An ordered set of named discrete actions, each a buttons mask.

    Args:
        names: action names, e.g. ``["NOOP", "A", "UP+B"]``. Names are upper-cased; duplicates
            (same name) are rejected so that every index means something distinct.

    Attributes:
        names: the normalised action names, in index order.
        masks: ``uint8[n]`` CPU table of buttons masks (index ``i`` → mask of action ``i``).
    """

    def __init__(self, names: Sequence[str]):
        if isinstance(names, str):
            raise TypeError(
                f"ActionSet takes a list of action names; to use a built-in set by name call "
                f"make_action_set({names!r})"
            )
        names = tuple(str(n).strip().upper() for n in names)
        if not names:
            raise ValueError("an ActionSet needs at least one action (e.g. ['NOOP'])")
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"duplicate action names {dup} in action set")
        self.names: tuple[str, ...] = names
        self.masks: torch.Tensor = torch.tensor([_parse_action(n) for n in names], dtype=torch.uint8)
        self._device_masks: dict[torch.device, torch.Tensor] = {}

    @property
    def n(self) -> int:
        """Number of actions."""
        return len(self.names)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"ActionSet({list(self.names)})"

    def index(self, name: str) -> int:
        """Index of the action called ``name`` (case-insensitive); raises if absent."""
        key = name.strip().upper()
        if key not in self.names:
            raise ValueError(f"action {name!r} is not in this action set {list(self.names)}")
        return self.names.index(key)

    def masks_on(self, device: torch.device | str) -> torch.Tensor:
        """The ``uint8[n]`` mask table on ``device`` (cached, uploaded once)."""
        device = torch.device(device)
        table = self._device_masks.get(device)
        if table is None:
            table = self.masks.to(device)
            self._device_masks[device] = table
        return table

    def encode(self, action: torch.Tensor) -> torch.Tensor:
        """Map action indices ``[*B]`` (or one-hot ``[*B, n]``) to buttons masks ``uint8[*B]``.

        Runs on ``action``'s device as one gather; indices are not range-checked (that would
        need a host sync): the env's action spec is where bad actions are caught.
        """
        if action.dtype == torch.bool or (action.dim() and action.shape[-1] == self.n and
                                          action.dtype.is_floating_point):
            action = action.float().argmax(-1)
        elif action.dtype.is_floating_point:
            raise TypeError(
                f"actions must be integer indices or one-hot [..., {self.n}] tensors, got "
                f"dtype {action.dtype} with shape {tuple(action.shape)}"
            )
        return self.masks_on(action.device)[action.long()]


def make_action_set(spec: str | Sequence[str] | ActionSet) -> ActionSet:
    """Build an :class:`ActionSet` from a built-in name, a list of action names or an ActionSet.

    Raises:
        ValueError: for an unknown built-in name (the message lists the known ones).
    """
    if isinstance(spec, ActionSet):
        return spec
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key not in ACTION_SETS:
            raise ValueError(
                f"unknown action set {spec!r}; known action sets: {', '.join(ACTION_SETS)} "
                "(or pass a list of action names such as ['NOOP', 'A', 'UP+A'])"
            )
        return ActionSet(ACTION_SETS[key])
    return ActionSet(spec)
