"""Which actions of an action set do something: dead and duplicate actions, found by play.

An action set written for a game can be wrong in ways that no error shows: a button mapping
written the other way round, a button that does nothing alone (a dash that needs a direction),
two combinations that the game treats alike. The agent then trains with actions that waste
its exploration and without the move the game needs; its curve flattens at the first
obstacle that needs that move, and nothing says why.

:func:`probe_actions` finds such sets by play. It copies each of ``S`` console states (the
consoles of a running env) onto ``A + 1`` consoles, presses one action on each (the extra one
presses nothing), lets all of them run ``after`` more steps with no button, and compares the
frames every console showed. An action whose frames equal the no-button console's in every
state is **dead** there; two actions whose frames equal each other's in every state are
**duplicates**. The verdict holds for the probed states only (an action can matter only in a
menu), so :func:`~torchrl_dreamer.envs.spec_check.check_spec` reports it as a warning.

Example:
    >>> from torchrl_dreamer.envs import GameBoyEnv
    >>> env = GameBoyEnv("catch", num_envs=4, action_set=["NOOP", "LEFT", "RIGHT", "A"])
    >>> _ = env.reset()
    >>> probe = probe_actions(env)
    >>> probe.dead, probe.duplicates
    (['A'], [])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torchrl_dreamer.envs.gameboy import GameBoyEnv

__all__ = ["ActionProbe", "probe_actions", "probe_press_only"]


@dataclass
class ActionProbe:
    """What :func:`probe_actions` saw; :meth:`text` prints it."""

    names: list[str]
    """The action set's names, in index order."""
    states: int
    """Console states probed."""
    after: int
    """Steps with no button after the pressed one, whose frames were compared too."""
    differs: list[int]
    """Per action: in how many states its frames differed from those of pressing nothing."""
    same: list[list[bool]]
    """``same[a][b]``: actions ``a`` and ``b`` showed the same frames in every state."""
    press_only: list[int] = field(default_factory=list)
    """Per action: in how many states choosing it acted, choosing it a second step in a row
    did nothing, and a fresh press (one frame released first) did something: the game acts on
    presses, not holds. Probed only when a step holds its buttons to its end (``press_frames ==
    frame_skip``, so two steps that choose an action never release it); empty otherwise."""

    @property
    def held_in_vain(self) -> list[str]:
        """Actions whose repeat did nothing while held but acted when pressed afresh, in at
        least a quarter of the probed states: with ``press_frames == frame_skip`` a policy
        that chooses one twice in a row (a greedy one, on an unchanged screen) presses it once
        and then waits on a screen that does not change (PostBot's editor: every action)."""
        return [n for n, k in zip(self.names, self.press_only, strict=False)
                if k > 0 and 4 * k >= self.states]

    @property
    def dead(self) -> list[str]:
        """Actions (other than ``NOOP``) whose frames equalled pressing nothing in every state."""
        return [n for n, d in zip(self.names, self.differs, strict=True) if d == 0 and n != "NOOP"]

    @property
    def duplicates(self) -> list[tuple[str, str]]:
        """Pairs of live actions that showed the same frames as each other in every state."""
        live = [i for i, d in enumerate(self.differs) if d > 0]
        return [(self.names[a], self.names[b]) for k, a in enumerate(live) for b in live[k + 1:]
                if self.same[a][b]]

    def text(self) -> str:
        """One line per action: the states in which it changed the frames."""
        lines = [f"actions, each pressed once in {self.states} states (+{self.after} steps with "
                 "no button), against pressing nothing:"]
        for name, d in zip(self.names, self.differs, strict=True):
            twin = [b for a, b in self.duplicates if a == name] + \
                   [a for a, b in self.duplicates if b == name]
            note = " (dead)" if name in self.dead else (f" (same as {', '.join(twin)})"
                                                        if twin else "")
            if name in self.held_in_vain:
                k = self.press_only[self.names.index(name)]
                note += f" (acts on a press: held a second step in vain in {k})"
            lines.append(f"  {name:<12} changed the frames in {d:>3} of {self.states}{note}")
        return "\n".join(lines) + "\n"


def probe_actions(env: GameBoyEnv, states: int = 16, after: int = 3) -> ActionProbe:
    """Press every action of ``env``'s action set once in each of the first ``states`` consoles'
    current states (see the module docstring) and compare the frames they lead to.

    Args:
        env: a :class:`~torchrl_dreamer.envs.GameBoyEnv` whose consoles are where the probe
            should look (after some random play, for varied states); it is not stepped.
        states: console states to probe (at most ``env.num_envs``).
        after: steps with no button after the pressed one, so a delayed effect shows too.

    Returns:
        An :class:`ActionProbe`. Its probe consoles run ``states * (len(actions) + 1) * (after
        + 1)`` console-steps at the env's frame skip and press length.
    """
    if states < 1 or after < 0:
        raise ValueError(f"states must be >= 1 and after >= 0, got {states} and {after}")
    s = min(int(states), env.num_envs)
    masks = env.action_set.masks.to(env.device)
    a = len(masks)
    probe = _copies(env, s, a + 1)
    pressed = torch.cat([masks, masks.new_zeros(1)]).repeat(s)  # the last column: no button
    shown = []
    for k in range(after + 1):
        frame = probe.gb.step(pressed if k == 0 else torch.zeros_like(pressed),
                              frames=probe.frame_skip, press_frames=probe.press_frames)
        shown.append(frame.reshape(s, a + 1, -1).clone())
    frames = torch.cat(shown, dim=-1)  # [S, A + 1, all frames' bytes]
    eq = (frames.unsqueeze(2) == frames.unsqueeze(1)).all(-1)  # [S, A + 1, A + 1]
    differs = (~eq[:, :a, a]).sum(0).tolist()
    same = eq[:, :a, :a].all(0).tolist()
    press_only = probe_press_only(env, s) if env.press_frames >= env.frame_skip else []
    return ActionProbe(list(env.action_set.names), s, int(after), differs, same, press_only)


def probe_press_only(env: GameBoyEnv, states: int = 16) -> list[int]:
    """Per action of ``env``'s action set, in how many of the first ``states`` consoles' states
    one step holding it changed the frames, a second step holding it showed the same frames as
    a step with no button, and a second step that released it for one frame and then pressed it
    showed other frames: the game acts on the press, so two steps that hold it do what one does.

    The first step holds the action for the whole step, whatever ``env.press_frames`` is; the
    frames compared are those at the end of the second step and of two more with no button.
    ``env`` is not stepped. It runs ``states * len(actions) * 4`` consoles for four steps.

    Example:
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> env = GameBoyEnv("catch", num_envs=2, frame_skip=8, action_set=["NOOP", "LEFT"])
        >>> _ = env.reset()
        >>> probe_press_only(env, states=2)  # catch moves its paddle while a button is held
        [0, 0]
    """
    if states < 1:
        raise ValueError(f"states must be >= 1, got {states}")
    s = min(int(states), env.num_envs)
    masks = env.action_set.masks.to(env.device)
    a, fs = len(masks), env.frame_skip
    if fs < 2:  # no frame to release in
        return [0] * a
    k = 4  # per state and action: held twice, held once, held then pressed afresh, never
    probe = _copies(env, s, a * k)
    pressed = masks.repeat_interleave(k, dim=0).repeat(s)  # [S * A * k]
    kind = torch.arange(k, device=env.device).repeat(s * a)
    zero = torch.zeros_like(pressed)
    probe.gb.step(torch.where(kind == 3, zero, pressed), frames=fs, press_frames=fs)
    probe.gb.step(torch.where(kind == 0, pressed, zero), frames=1, press_frames=1)
    shown = [probe.gb.step(torch.where((kind == 0) | (kind == 2), pressed, zero), frames=fs - 1,
                           press_frames=fs - 1).reshape(s, a, k, -1).clone()]
    for _ in range(2):  # and two steps with no button, for a delayed effect
        shown.append(probe.gb.step(zero, frames=fs, press_frames=0).reshape(s, a, k, -1).clone())
    frames = torch.cat(shown, dim=-1)  # [S, A, k, all frames' bytes]
    first_acts = (frames[:, :, 1] != frames[:, :, 3]).any(-1)
    held_same = (frames[:, :, 0] == frames[:, :, 1]).all(-1)
    fresh_differs = (frames[:, :, 2] != frames[:, :, 1]).any(-1)
    return (first_acts & held_same & fresh_differs).sum(0).tolist()


def _copies(env: GameBoyEnv, states: int, each: int) -> GameBoyEnv:
    """A :meth:`~torchrl_dreamer.envs.GameBoyEnv.replica` of ``states * each`` consoles, console
    ``i * each + j`` in the state of ``env``'s console ``i``: the probes' batch."""
    from torchrl_dreamer.emulator.reset import ResetCache

    probe = env.replica(states * each)
    rows = torch.arange(states, device=env.device).repeat_interleave(each)
    ResetCache(probe.gb, env.gb.save_state(), pool=True).restore(
        torch.ones(probe.num_envs, dtype=torch.bool, device=env.device), rows)
    return probe
