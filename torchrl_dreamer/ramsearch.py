"""A batched RAM finder: where does a game keep its score, lives, game-over state, goals and player?

Users who bring a ROM do not know its RAM map. Like an emulator's cheat search, but on many
consoles at once: :func:`record` boots ``num_envs`` consoles, plays random buttons (each held
for one env step) and records WRAM and HRAM after every step; :func:`rank` ranks what it saw
(:func:`ram_search` does both):

- **score**: one candidate per number, with its encoding. Bytes that carry into a neighbour
  (the low byte wraps around as the next one grows by one) are one multi-byte number; the
  carry's direction gives the byte order and the values the encoding: binary (``u16le``/
  ``u16be``/``u32le``/``u32be``), packed BCD (``bcd``/``bcdle``: no nibble ever above 9) or one
  decimal digit per byte (``digits``). A decimal number that carried is widened to 6 digits
  (the common width) over neighbours that stayed 0; a binary byte whose next byte stayed 0 is
  read as ``u16le``. A number is a score when it never falls within play (it may fall back to
  its start when a game ends), grows on some consoles more than once, is not a timer that
  wraps at a fixed value, and takes many values. Numbers that start at 0 and decimal ones (a
  displayed score) rank higher; a clock ranks lower (one that grows on every console at every
  step, or ticks at a fixed interval of several steps), as does a number that grows while the
  game is over or on across a game over, stands at one value at every game over (deaths,
  misses), grows when one button is pressed (a menu cursor, an editor slot) or sits on the
  stack. Fast growth itself is not penalised: a runner's score grows at every step. Of numbers
  that always hold the same value (a binary score and its decimal copy for the screen) the
  binary one is kept.
- **game over**: a predicate ``byte == v`` (or ``byte != start value``) that turns true at a
  console's *game events* and not otherwise. Game events are the steps where the screen freezes
  (one frame, or two alternating ones, for 1.6 s: a game-over screen), turns one flat shade (a
  fade or a flash between scenes), or where most of RAM snaps back to the start state; events
  within a few seconds after a frozen screen belong to that game over, and a kind of event that
  follows one button is a screen the player called up (a pause, a menu) and is left out. In a
  game with none of these, the steps where a top position byte jumps by several times its usual
  step (the player put back at a spawn point). A predicate ranks by the share of its onsets that
  come at most 2 s before an event (or a quarter second after it) times the share of events it
  announces; ties go to the one that turns true earliest (a death before its fade), then to a
  state byte with few values. A predicate that holds at the start state is never proposed (the
  episode would end at once), nor one whose onsets follow one button.
- **lives**: only on strong evidence: a game over was found, and a byte starts at 1..9 on every
  console, only ever drops by one (at different steps on different consoles, not like a clock),
  at least twice on a console, returns only to its start value, and drops to its lowest value
  right before most game overs.
- **objective**: a count of goals left (a puzzle's deliveries, a level's targets), for games
  without a score: a byte that starts at one value 1..15 on every console, only ever falls by
  one and rarely (not like a clock), rises only from 0 or back to its start, and runs out on
  some console, unless it is lives (a lives candidate, or a count that runs out right before
  the game over). Random play seldom meets a goal; a trained agent (``--policy``) or your own
  recorded play (``--demos``, replayed on some consoles) does.
- **win**: a predicate on a state byte (at most :data:`WIN_STATE_VALUES` values) that turns
  true as the best objective runs out (a level-complete screen), ranked as game overs are
  against those steps, and lower when it stays true long after them (a level number).
- **position**: bytes whose change follows a direction button (RIGHT vs LEFT for x, DOWN vs UP
  for y; also the last direction pressed, for games where a press sets a persistent direction).

:func:`draft_spec` turns the best candidates into a task spec (see
:mod:`torchrl_dreamer.envs.spec`) to check with :mod:`torchrl_dreamer.envs.spec_check` and to
edit. Command line::

    python -m torchrl_dreamer.ramsearch ROM [--spec draft.yaml] [--out spec.yaml] [--top 5]
    python -m torchrl_dreamer.ramsearch check SPEC --rom ROM     # the spec probe

``--spec draft.yaml`` reuses a spec's start (savestate or button macro into gameplay), its
per-episode pokes and its action set (:func:`spec_start`): the usual second pass once a first
draft gets past the title screen.

``--policy RUN`` plays a trained agent (:func:`checkpoint_policy`: its sampled actions, with
the agent's spec as ``--spec`` so that the action sets agree) instead of random buttons: the
third pass, for games whose events random play never reaches (a puzzle's delivery, a later
level). The draft's exploration bonus trains that first agent. What it found on PostBot:
``docs/writing_a_task.md``, "Finding the addresses: the RAM finder".

Example:
    >>> from torchrl_dreamer.ramsearch import ram_search
    >>> from torchrl_dreamer.roms import rom_path
    >>> found = ram_search(rom_path("catch"), num_envs=8, steps=200, frame_skip=8,
    ...                    macro=[(0, 30)], pokes=[(0xC001, 1)], seed=0)  # doctest: +SKIP
    >>> hex(found.position[0].address), hex(found.game_over[0].address)  # doctest: +SKIP
    ('0xc007', '0xc000')
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer._threads import one_thread
from torchrl_dreamer.emulator.packed2 import PACKED2_FRAME_BYTES, packed2_lut
from torchrl_dreamer.envs.actions import BUTTON_BITS, default_press_frames

__all__ = ["Candidate", "Recording", "SearchResult", "RamSearchError", "record", "rank",
           "ram_search", "draft_spec", "spec_start", "SCORE_MIN", "GAME_OVER_MIN", "KINDS",
           "FREEZE_FRAMES", "WINDOW_FRAMES", "LAG_FRAMES", "AFTER_FREEZE_FRAMES", "WIN_STATE_VALUES",
           "DEFAULT_STEPS", "DEFAULT_WARMUP", "checkpoint_policy", "AgentPolicy",
           "demonstration_policy", "DemonstrationPolicy", "main"]

WRAM, WRAM_SIZE = 0xC000, 0x2000
HRAM, HRAM_SIZE = 0xFF80, 0x7F
_ACTIONS = ("NOOP", "A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")
KINDS = ("score", "lives", "game_over", "objective", "win", "position")
"""The kinds of candidates, in the order the table prints them."""

FREEZE_FRAMES = 96
"""A screen that shows at most two distinct frames for this many frames (1.6 s) is frozen."""
WINDOW_FRAMES = 128
"""A game-over predicate turns true at most this many frames (about 2 s) before its event."""
LAG_FRAMES = 16
"""A game-over predicate may also turn true up to this many frames (a quarter second) after its
event (a game may freeze the screen a moment before it sets its game-over state)."""
SCORE_MIN = 0.1
"""A score candidate ranked lower is not written into a draft spec."""
GAME_OVER_MIN = 0.35
"""A game-over candidate ranked lower is not written into a draft spec, nor used to judge the
score and lives candidates."""
WIN_STATE_VALUES = 16
"""A win predicate reads a byte of at most this many values (a state: a scene or mode byte)."""
AFTER_FREEZE_FRAMES = 512
"""Restarts within this many frames after a frozen screen belong to that game over."""
DEFAULT_STEPS = 512
"""Steps :func:`record` ranks by default (after the warm-up)."""
DEFAULT_WARMUP = 4
"""Steps :func:`record` plays before the ranked ones (a new game initialises its RAM in lockstep
on every console, which would look like score or lives changes)."""


class RamSearchError(RuntimeError):
    """The search cannot run on this ROM (it does not boot, or nothing ever changes)."""


@dataclass(frozen=True)
class Candidate:
    """One ranked finding: ``score`` orders candidates of a kind (higher is better).

    ``length``/``encoding``/``order`` say how to read a number (a spec watch; ``order`` is
    the digit order of encoding ``digits``); a game-over candidate's predicate is ``op`` with
    ``value``; a score's ``step`` is its most common increase and ``resets`` whether it fell
    back to its start value during play (a new life or level).
    """

    address: int
    kind: str
    score: float
    detail: str
    length: int = 1
    encoding: str = "u8"
    order: str | None = None
    op: str | None = None
    value: int | None = None
    step: int = 1
    resets: bool = False
    even: bool = False

    def watch(self) -> dict[str, Any]:
        """The spec keys of the watch this candidate reads (``address``, ``encoding``...)."""
        w: dict[str, Any] = {"address": self.address}
        if self.encoding != "u8":
            w["encoding"] = self.encoding
        if self.length != _ENC_LENGTH.get(self.encoding, 1):
            w["length"] = self.length
        if self.order is not None:
            w["order"] = self.order
        return w


_ENC_LENGTH = {"u8": 1, "u16le": 2, "u16be": 2, "u32le": 4, "u32be": 4}


@dataclass
class Recording:
    """What :func:`record` saw: ``ram`` ``uint8 [T+1, N, 8192 + 127]`` (WRAM then HRAM of every
    console, row 0 the start state), ``actions`` ``int64 [T, N]`` (indices into the base actions
    NOOP, A, B, START, UP, DOWN, LEFT, RIGHT: the direction of a combo), ``frames`` ``int64
    [T+1, N]`` (a hash of each frame); the first ``warmup`` steps are not ranked."""

    ram: torch.Tensor
    actions: torch.Tensor
    frames: torch.Tensor
    frame_skip: int = 8
    warmup: int = 0
    stack: tuple[int, int] | None = None
    """Lowest and highest stack pointer seen: the stack's bytes (return addresses, saved
    registers) rank lower as scores."""
    blank: torch.Tensor | None = None
    """``bool [T+1, N]``: the frame is one flat shade (a fade or a flash between scenes)."""
    buttons: torch.Tensor | None = None
    """``uint8 [T, N]``: the buttons mask held at each step (SELECT included)."""


@dataclass
class SearchResult:
    """Ranked candidates per kind (best first)."""

    score: list[Candidate] = field(default_factory=list)
    lives: list[Candidate] = field(default_factory=list)
    position: list[Candidate] = field(default_factory=list)
    game_over: list[Candidate] = field(default_factory=list)
    objective: list[Candidate] = field(default_factory=list)
    """Counts of goals left (a puzzle's deliveries, a level's targets): see :func:`_rank_objectives`."""
    win: list[Candidate] = field(default_factory=list)
    """Predicates that turn true as the best objective runs out (a level-complete screen)."""
    start_values: dict[int, int] = field(default_factory=dict)
    events: int = 0
    """Game events (frozen screens, restarts, respawn jumps) seen over all consoles."""

    def table(self, top: int = 5) -> str:
        """The best ``top`` candidates of every kind as a plain-text table."""
        rows = ["kind       watch                     score   detail"]
        for kind in KINDS:
            cands = getattr(self, kind)[:top]
            if not cands:
                rows.append(f"{kind:<10} (none found)")
            for c in cands:
                rows.append(f"{kind:<10} {_describe(c):<25} {c.score:6.3f}  {c.detail}")
        rows.append(f"({self.events} game events: frozen screens, restarts or respawn jumps)")
        return "\n".join(rows)


def _describe(c: Candidate) -> str:
    text = f"${c.address:04X}"
    if c.encoding != "u8" or c.length != 1:
        text += f" {c.encoding}" + (f"x{c.length}" if c.length != _ENC_LENGTH.get(c.encoding) else "")
        if c.order is not None:
            text += f" {c.order}"
    if c.op is not None:
        text += f" {c.op} {c.value}"
    return text


def _addresses() -> torch.Tensor:
    return torch.cat([torch.arange(WRAM, WRAM + WRAM_SIZE), torch.arange(HRAM, HRAM + HRAM_SIZE)])


def _snapshot(gb) -> torch.Tensor:
    """``uint8 [N, 8192 + 127]``: WRAM then HRAM of every console."""
    return torch.cat([gb.read_memory(WRAM, WRAM_SIZE), gb.read_memory(HRAM, HRAM_SIZE)], 1)


# ------------------------------------------------------------------------------ recording
def record(rom, num_envs: int = 32, steps: int = DEFAULT_STEPS, frame_skip: int = 8,
           macro: list[tuple[int, int]] | None = None, state=None,
           pokes: list[tuple[int, ...]] = (), seed: int = 0, warmup: int = DEFAULT_WARMUP,
           actions: list[str] | None = None, progress: bool = False,
           policy: Policy | None = None) -> Recording:
    """Play random buttons (or ``policy``'s choices) on ``num_envs`` consoles and record their
    RAM after every step.

    Args:
        rom: ROM path or bytes.
        num_envs: consoles run together (each plays its own random buttons).
        steps: env steps recorded after ``warmup``; each holds one random action for
            ``frame_skip`` frames.
        macro: ``[(buttons_mask, frames), ...]`` run from power-on first (default: wait 120
            frames, START for 8, wait 60: gets most games past their title screen).
        state: a savestate (path or ``EmulatorState``) to start from instead of the macro.
        pokes: ``[(address, byte), ...]`` or ``[(address, lo, hi), ...]`` (a byte drawn per
            console) written after the start (a new-game request, a seed).
        seed: seed of the random buttons and poked bytes.
        warmup: steps played before the ranked ones (a new game initialises its RAM in
            lockstep on every console, which would look like score or lives changes).
        actions: the action names played at random (default: NOOP, A, B, START and the four
            directions), e.g. a task spec's action set that leaves out a pause button.
        progress: show a progress bar on stderr.
        policy: chooses each step's actions instead of the random buttons: called with the
            consoles' packed2 frames ``uint8 [N, 1, 72, 20]`` and ``is_first`` ``bool [N]``
            (true at the first step), it returns indices into ``actions``. A trained agent
            (:func:`checkpoint_policy`) reaches events random play never does (a puzzle's
            first delivery, a later level), so the search can rank what they change.

    Raises:
        RamSearchError: the ROM does not boot (the CPU locks up or the LCD never turns on) or
            no RAM byte changes while playing.
    """
    from torchrl_dreamer.emulator import GameBoy
    from torchrl_dreamer.envs.task import load_state_arg

    gb = GameBoy(rom, num_envs=num_envs, check_header=False)
    lcd_seen = False
    if state is not None:
        gb.load_state(load_state_arg(state))
        lcd_seen = True
    else:
        for buttons, frames in macro or [(0, 120), (BUTTON_BITS["START"], 8), (0, 60)]:
            for _ in range(frames):
                gb.run_frames(1, buttons=buttons or None)
                lcd_seen |= bool((gb.read_memory(0xFF40)[:, 0] & 0x80).any())
    if bool(gb.locked.any()):
        raise RamSearchError(f"{rom}: the CPU locked up while booting (illegal opcode): not a "
                             "working Game Boy ROM, or it needs hardware we do not emulate")
    if not lcd_seen:
        raise RamSearchError(f"{rom}: the LCD never turned on while booting; the ROM does not "
                             "boot (or give --state / a longer --macro)")
    g = torch.Generator().manual_seed(seed)
    for p in pokes:
        addr, lo, hi = (p[0], p[1], p[1]) if len(p) == 2 else p
        gb.write_memory(addr, torch.randint(lo, hi + 1, (num_envs, 1), generator=g))
    names = [a.upper() for a in (actions or _ACTIONS)]
    masks = torch.tensor([sum(BUTTON_BITS.get(p.strip(), 0) for p in a.split("+")) for a in names],
                         dtype=torch.uint8)
    weights = torch.randint(1, 2**31 - 1, (PACKED2_FRAME_BYTES,), generator=torch.Generator().manual_seed(7))
    snaps, frames, played, held = [_snapshot(gb)], [_frame_hash(gb.packed2, weights)], [], []
    blank = [_is_blank(gb.packed2)]
    sp = [gb.registers()["sp"].to(torch.int64)]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps + warmup, unit="step", desc="ramsearch", dynamic_ncols=True,
                   file=sys.stderr)
    obs = gb.packed2
    with one_thread():
        for k in range(steps + warmup):
            if policy is None:
                a = torch.randint(0, len(names), (num_envs,), generator=g)
            else:
                a = _policy_actions(policy, obs, k == 0, num_envs, len(names))
            obs = gb.step(masks[a], frames=frame_skip, press_frames=default_press_frames(frame_skip))
            played.append(_as_base_action(names, a))
            held.append(masks[a])
            snaps.append(_snapshot(gb))
            frames.append(_frame_hash(obs, weights))
            blank.append(_is_blank(obs))
            sp.append(gb.registers()["sp"].to(torch.int64))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    ram = torch.stack(snaps)
    if bool((ram == ram[:1]).all()):
        raise RamSearchError(f"{rom}: no RAM byte changed in {steps} steps of random play; "
                             "the game may wait for an input we do not press (try --macro)")
    sp_all = torch.stack(sp)
    return Recording(ram, torch.stack(played), torch.stack(frames), frame_skip, warmup,
                     (int(sp_all.min()), int(sp_all.max())), torch.stack(blank), torch.stack(held))


def ram_search(rom, num_envs: int = 32, steps: int = DEFAULT_STEPS, frame_skip: int = 8,
               macro: list[tuple[int, int]] | None = None, state=None,
               pokes: list[tuple[int, ...]] = (), seed: int = 0, warmup: int = DEFAULT_WARMUP,
               actions: list[str] | None = None, progress: bool = False,
               policy: Policy | None = None) -> SearchResult:
    """:func:`record` then :func:`rank` (the arguments are :func:`record`'s)."""
    return rank(record(rom, num_envs, steps, frame_skip, macro=macro, state=state, pokes=pokes,
                       seed=seed, warmup=warmup, actions=actions, progress=progress,
                       policy=policy))


Policy = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``policy(packed2 uint8 [N, 1, 72, 20], is_first bool [N]) -> action indices int [N]``."""


def _policy_actions(policy: Policy, obs: torch.Tensor, first: bool, n: int,
                    n_actions: int) -> torch.Tensor:
    a = torch.as_tensor(policy(obs, torch.full((n,), first, dtype=torch.bool))).reshape(-1)
    a = a.to("cpu", torch.int64)
    if a.shape != (n,) or bool(((a < 0) | (a >= n_actions)).any()):
        raise RamSearchError(f"the policy must return {n} action indices in 0..{n_actions - 1} "
                             f"(the search's action set), got {a.tolist()[:8]}...")
    return a


def checkpoint_policy(checkpoint: str | Path, num_envs: int, actions: list[str] | None = None,
                      greedy: bool = False, seed: int = 0) -> AgentPolicy:
    """A :data:`Policy` that plays a trained agent (a checkpoint or a run directory's latest):
    its world model filters each console's frames and its actor samples (``greedy``: takes
    the mode of) the next action, as in training.

    ``actions`` (the search's action set) must be the agent's, name for name: the indices are
    passed through unchanged. The search's frame skip must be the agent's (its config's
    ``frame_skip``); a different one plays the agent out of its element.

    Raises:
        RamSearchError: the agent's action set differs from ``actions``.
    """
    from torchrl_dreamer.modules import DreamerPlayer  # the model packages, on demand
    from torchrl_dreamer.trainers.builder import make_env
    from torchrl_dreamer.trainers.checkpoint import load_checkpoint, resolve_checkpoint
    from torchrl_dreamer.trainers.config import TrainConfig
    from torchrl_dreamer.trainers.evaluate import modules_from_checkpoint

    state = load_checkpoint(resolve_checkpoint(checkpoint))
    cfg = TrainConfig.from_dict({**state["config"], "progress": False, "device": "cpu"})
    env = make_env(cfg, num_envs=1)
    theirs = [str(n).upper() for n in env.action_set.names]
    mine = [a.upper() for a in (actions or _ACTIONS)]
    if theirs and theirs != mine:
        raise RamSearchError(f"the agent in {checkpoint} plays the actions {theirs}, the search "
                             f"{mine}: pass the agent's task spec (--spec) so both agree")
    wm, actor = modules_from_checkpoint(state, env, "cpu")
    env.close()
    player = DreamerPlayer(wm, actor, num_envs=num_envs, greedy=greedy,
                           generator=torch.Generator().manual_seed(seed))
    return AgentPolicy(player, list(wm.obs_keys)[0], int(cfg.env.frame_skip))


class AgentPolicy:
    """A :data:`Policy` around a :class:`~torchrl_dreamer.modules.DreamerPlayer` (what
    :func:`checkpoint_policy` returns): the frames go to the player's observation ``key``;
    ``frame_skip`` is the one the agent was trained at."""

    def __init__(self, player: Any, key: str, frame_skip: int) -> None:
        self.player, self.key, self.frame_skip = player, key, frame_skip

    def __call__(self, obs: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.player.act({self.key: obs}, first)


class DemonstrationPolicy:
    """A :data:`Policy` that replays recorded play: console ``i`` plays demonstration ``i``'s
    first episode action for action, then random buttons; the other consoles play random
    buttons throughout (what :func:`demonstration_policy` returns).

    A demonstration replays only from the state it was recorded at, so every replayed frame is
    compared with the recorded one, and the first that differs raises: a recording made from
    another start (random no-op frames, another spec) or with other random pokes would
    otherwise play its buttons blind. An env whose spec pokes bytes at each reset observes its
    first frame one no-button step after the start (``reset_runs_frames``): when the search's
    first frame differs from the recording's, its console steps once with ``noop`` and compares
    again.

    Args:
        demos: :class:`~torchrl_dreamer.data.Demonstration` s with the search's action set.
        num_envs: consoles of the search (at least ``len(demos)``).
        n_actions: size of the search's action set.
        seed: seed of the other consoles' random buttons.
        names: what messages call each demonstration (default ``demonstration i``).
        noop: index of the no-button action (``None``: the set has none).

    Raises:
        RamSearchError: more demonstrations than consoles, or (when called) a replayed frame that
            differs from the recording.

    Example:
        >>> from torchrl_dreamer.data.demonstrations import Demonstration
        >>> T, blank = 3, torch.zeros(3, 1, 72, 20, dtype=torch.uint8)
        >>> demo = Demonstration("ab" * 32, "t", ("NOOP", "UP"), 8, 8, pixels=blank,
        ...     action=torch.tensor([1, 1, 0]), reward=torch.zeros(T),
        ...     terminated=torch.tensor([False, False, True]), truncated=torch.zeros(T, dtype=bool),
        ...     is_first=torch.arange(T) == 0, episode_id=torch.zeros(T, dtype=torch.int32))
        >>> policy = DemonstrationPolicy([demo], num_envs=2, n_actions=2)
        >>> [int(policy(blank[:2], torch.ones(2, dtype=bool))[0]) for _ in range(2)], policy.longest
        ([1, 1], 3)
    """

    def __init__(self, demos: list[Any], num_envs: int, n_actions: int, seed: int = 0,
                 names: list[str] | None = None, noop: int | None = 0) -> None:
        if len(demos) > num_envs:
            raise RamSearchError(f"{len(demos)} demonstrations need at least as many consoles; "
                                 f"the search runs {num_envs} (give --envs {len(demos)} or more)")
        self.actions, self.pixels = [], []
        self.names = list(names or [f"demonstration {i}" for i in range(len(demos))])
        for d in demos:
            first = d.episode_id == d.episode_id[0]
            ends = (d.terminated | d.truncated) & first
            n = int(ends.nonzero()[0]) + 1 if bool(ends.any()) else int(first.sum())
            self.actions.append(d.action[:n - 1].to(torch.int64))  # the last row acts no more
            self.pixels.append(d.pixels[:n])
        self.lead = [0] * len(demos)
        """Per demonstration, the search's steps before its first recorded frame (0 or 1)."""
        self.num_envs, self.n_actions, self.noop, self.steps = num_envs, n_actions, noop, 0
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def longest(self) -> int:
        """Search steps that replay the longest episode (a shorter search cuts it)."""
        return max((len(a) + 1 for a in self.actions), default=0)

    def __call__(self, obs: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        k, self.steps = self.steps, self.steps + 1
        a = torch.randint(0, self.n_actions, (self.num_envs,), generator=self.generator)
        for i, (acts, pix) in enumerate(zip(self.actions, self.pixels)):
            row = k - self.lead[i]
            if row >= len(pix):
                continue
            if not torch.equal(obs[i].cpu(), pix[row]):
                if k == 0 and self.noop is not None:  # the env's reset step (on_reset bytes)
                    self.lead[i], a[i] = 1, self.noop
                    continue
                raise RamSearchError(
                    f"{self.names[i]}: the search's frame differs from the recording at row "
                    f"{row}, so its buttons would play another game. Record it from the search's "
                    "start: the spec the search uses (--spec), with no random no-op frames nor "
                    "random on_reset bytes "
                    "(python -m torchrl_dreamer.play ROM --spec SPEC --record FILE)")
            if row < len(acts):
                a[i] = acts[row]
        return a


def demonstration_policy(paths: Any, rom: Any, num_envs: int, actions: list[str] | None = None,
                         frame_skip: int = 8, seed: int = 0) -> DemonstrationPolicy:
    """A :class:`DemonstrationPolicy` of the demonstration files ``paths`` (files, folders of
    ``*.pt`` or glob patterns), checked against the search: the same ROM, action set
    (``actions``, default the search's random buttons) and frame skip (a button held
    :func:`~torchrl_dreamer.envs.actions.default_press_frames`), for games where random play never reaches what to find
    and no trained agent exists yet: play it yourself (``python -m torchrl_dreamer.play ROM
    --spec SPEC --record FILE``), then search your play.

    Raises:
        DemonstrationMismatchError: a file recorded on another ROM, with other actions or
            another frame skip (the message says which).
        RamSearchError: more files than consoles.
    """
    from torchrl_dreamer.data.demonstrations import (
        Demonstration,
        RunSignature,
        demonstration_paths,
    )
    from torchrl_dreamer.emulator.cartridge import load_rom_bytes, parse_cartridge

    names = tuple(a.upper() for a in (actions or _ACTIONS))
    cart = parse_cartridge(load_rom_bytes(rom), check=False, dmg_only=False)
    run = RunSignature(cart.sha256, "", names, frame_skip, default_press_frames(frame_skip),
                       cart.title)
    files = demonstration_paths(paths)
    demos = [Demonstration.load(p) for p in files]
    for p, d in zip(files, demos):
        d.check_compatible(run, check_task=False, where=f"demonstration {p}")
    noop = names.index("NOOP") if "NOOP" in names else None
    return DemonstrationPolicy(demos, num_envs, len(names), seed, [str(p) for p in files], noop)


def _frame_hash(packed2: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``int64 [N]``: a hash of each console's packed2 frame (equal frames, equal hashes)."""
    return (packed2.reshape(packed2.shape[0], -1).to(torch.int64) * weights).sum(1)


def _pressed(rec: Recording) -> torch.Tensor:
    """``bool [T, N, 8]``: each button held at a step or the step before (what a screen the
    player calls up follows)."""
    if rec.buttons is not None:
        bits = ((rec.buttons.unsqueeze(-1).long() >> torch.arange(8)) & 1).bool()
    else:  # an older recording: the base actions (no SELECT)
        from torchrl_dreamer.data.one_hot import one_hot

        bits = one_hot(rec.actions, len(_ACTIONS), torch.bool)
    out = bits.clone()
    out[1:] |= bits[:-1]
    return out


def _by_button(onsets: torch.Tensor, pressed: torch.Tensor) -> torch.Tensor:
    """``bool [P]`` for onsets ``[P, T, N]``: most onsets (80 %, at least 8) follow one button
    held far more often than usual (2.5 x): a screen the player calls up (a pause, a menu),
    not the end of a game."""
    flat = pressed.reshape(-1, pressed.shape[-1]).float()
    base = flat.mean(0)
    n = onsets.reshape(onsets.shape[0], -1).float()
    share = (n @ flat) / n.sum(1, keepdim=True).clamp(min=1)
    return ((share >= 0.8) & (share >= 2.5 * base)).any(1) & (n.sum(1) >= 8)


def _is_blank(packed2: torch.Tensor) -> torch.Tensor:
    """``bool [N]``: each console's frame is a single shade."""
    p = packed2.reshape(packed2.shape[0], -1)
    first = packed2_lut(p.device)[p[:, 0].long()]  # [N, 4] shades of each frame's first byte
    return (p == p[:, :1]).all(1) & (first == first[:, :1]).all(1)


def _as_base_action(names: list[str], a: torch.Tensor) -> torch.Tensor:
    """Indices into ``_ACTIONS`` of the played actions: the direction of a combo such as
    ``LEFT+B`` (what the position ranking compares), else the button, else NOOP."""
    table = []
    for n in names:
        parts = [p.strip() for p in n.split("+")]
        pick = next((p for p in parts if p in ("UP", "DOWN", "LEFT", "RIGHT")), None)
        pick = pick or next((p for p in parts if p in _ACTIONS), "NOOP")
        table.append(_ACTIONS.index(pick))
    return torch.tensor(table)[a]


# ------------------------------------------------------------------------------ ranking
def rank(rec: Recording) -> SearchResult:
    """Rank the addresses of a :class:`Recording` (see the module docstring)."""
    with one_thread():  # many small tensor operations: faster on one thread
        return _rank(rec)


def _rank(rec: Recording) -> SearchResult:
    whole, w = rec.ram, rec.warmup
    full = whole[w:]
    actions = rec.actions[w:]
    addrs = _addresses()
    T, N = actions.shape
    steps_of = lambda frames_: max(1, math.ceil(frames_ / rec.frame_skip))  # noqa: E731
    res = SearchResult()
    start = full[0]
    steady = (start == start[:1]).all(0) & (full[: min(8, T + 1)] == start).all(0).all(0)
    res.start_values = {int(addrs[b]): int(start[0, b]) for b in torch.nonzero(steady).flatten()[:64]}
    cols = torch.nonzero((whole != whole[:1]).any(0).any(0)).flatten()  # bytes that ever change
    if len(cols) == 0:
        return res
    ram = full[:, :, cols].to(torch.int16)  # [T+1, N, C]
    res.position = _rank_position(ram, actions, addrs[cols])
    scored = _rank_score(full, cols, addrs, whole[:1])
    # the game over is ranked over the warm-up steps too (a game may end within them)
    top_pos = tuple(int((addrs[cols] == c.address).nonzero()) for c in res.position[:4])
    pressed = _pressed(rec)
    events = _game_events(whole[:, :, cols], rec.frames, rec.blank, pressed,
                          steps_of(FREEZE_FRAMES), steps_of(AFTER_FREEZE_FRAMES), top_pos)
    res.events = int(events.sum())
    if res.events:
        res.game_over = _rank_game_over(whole, cols, addrs, events, pressed,
                                        steps_of(WINDOW_FRAMES), steps_of(LAG_FRAMES), rec.stack)
    sure = [g for g in res.game_over[:1] if g.score >= GAME_OVER_MIN]  # what else relies on
    scored = _rerank_score(scored, full, addrs, sure, rec.stack, steps_of(WINDOW_FRAMES),
                           pressed[w:])
    res.score = [_as_candidate(f, addrs) for f in scored[:16]]
    falls = _falls(ram)
    over = None  # onsets of the sure game over [T, N]
    if sure:
        held = _holds(full, addrs, sure[0])
        over = held[1:] & ~held[:-1]
    res.lives = _rank_lives(ram, addrs[cols], falls, over, steps_of(WINDOW_FRAMES))
    res.objective = _rank_objectives(ram, addrs[cols], falls, res.lives, over,
                                     steps_of(WINDOW_FRAMES))
    if res.objective:
        res.win = _rank_win(whole, cols, addrs, res.objective, pressed, steps_of(WINDOW_FRAMES),
                            steps_of(LAG_FRAMES), rec.stack)
    return res


def _rerank_score(scored: list[_Scored], full: torch.Tensor, addrs: torch.Tensor,
                  game_over: list[Candidate], stack: tuple[int, int] | None, after: int,
                  pressed: torch.Tensor | None = None) -> list[_Scored]:
    """The score candidates re-ranked with what the game over tells: a number that grows while
    the game is over (a results screen, a retry counter, a clock), that grows on across a game
    over, or that stands at one value at every game over (deaths or misses), is not the score;
    falling back to the start while the game is over or within ``after`` steps after is a
    restart, not a fault (other falls rank a number lower: a flag that toggles). A number that
    grows when one button is pressed (``pressed [T, N, 8]``, see :func:`_by_button`) is a
    setting the player makes (a menu cursor, an editor slot). Stack bytes (return addresses,
    saved registers) rank lower."""
    over = None
    if game_over:
        p = _holds(full, addrs, game_over[0])  # [T+1, N]
        onsets = p[1:] & ~p[:-1]
        c = torch.cat([torch.zeros_like(p[:1], dtype=torch.int32), p.int().cumsum(0)])
        T = p.shape[0] - 1
        t = torch.arange(T)
        recent = (c[t + 2] - c[torch.clamp(t + 1 - after, min=0)]) > 0  # over in [t+1-after, t+1]
        over = (p[:-1] | p[1:], recent, onsets)
    out = []
    for f in scored:
        s, note = f.base, ""
        if pressed is not None:
            v = _decode(f.num, full, addrs)
            if bool(_by_button((v[1:] > v[:-1]).unsqueeze(0), pressed)[0]):
                s, note = s * 0.1, ", grows when one button is pressed (a setting?)"
        if over is not None:
            during, recent, onsets = over
            v = _decode(f.num, full, addrs)
            grow = v[1:] > v[:-1]
            n_during = int(during.sum())
            if int(grow.sum()) and (float((grow & during).sum() / grow.sum()) > 0.5 or (
                    n_during >= 8 and float((grow & during).sum()) >= 0.5 * n_during)):
                s, note = s * 0.1, ", grows while the game is over"
            if int(onsets.sum()) >= 4:
                at = v[1:][onsets]
                top = torch.mode(at).values
                if float((at == top).float().mean()) >= 0.9 and int(top) != 0:
                    s, note = s * 0.25, note + f", {int(top)} at every game over (deaths?)"
            # a game's score starts again after a game over; one that grows on across a game
            # over (a total, a level timer) is not this game's score
            t = torch.arange(grow.shape[0]).unsqueeze(1)
            last_over = torch.where(onsets, t, -1).cummax(0).values
            last_reset = torch.where(f.resets, t, -1).cummax(0).values
            at_over = v[1:].gather(0, last_over.clamp(min=0))  # the value at that game over
            carried = (grow & ~during & (last_over >= 0) & (last_over > last_reset)
                       & (at_over > v[0].unsqueeze(0)))
            after_over = grow & ~during & (last_over >= 0)
            if int(after_over.sum()) >= 4 and float(carried.sum() / after_over.sum()) > 0.5:
                s, note = s * 0.3, note + ", grows on across game overs"
        # a score falls back to its start only when a game ends (a restart)
        falls = f.resets if over is None else f.resets & ~over[1]
        if bool(falls.any()):
            grows = _decode(f.num, full, addrs)
            n_falls = int(falls.sum())
            share = n_falls / max(1, int((grows[1:] > grows[:-1]).sum()))
            per_console = n_falls / falls.shape[1]
            s, note = s / (1 + 4 * share + 2 * per_console), note + f", {n_falls} falls in play"
        a = int(addrs[min(f.num.cols)])
        if stack is not None and stack[0] - 32 <= a < stack[1] + 8:
            s, note = s * 0.5, note + ", on the stack"
        out.append(_Scored(f.num, s, f.step, f.resets, f.detail, f.base, note, f.even))
    out.sort(key=lambda f: (-f.score, int(addrs[min(f.num.cols)])))
    return _merge_copies(out, full, addrs)


def _merge_copies(scored: list[_Scored], full: torch.Tensor, addrs: torch.Tensor,
                  top: int = 16) -> list[_Scored]:
    """Keep one of the numbers (among the best ``top``) that always hold the same value: a game
    often keeps its score in binary and again as decimal digits for the screen. The binary
    one (what the game counts with) takes the place of the best of them."""
    kept: list[tuple[_Scored, torch.Tensor]] = []
    for f in scored[:top]:
        v = _decode(f.num, full, addrs)
        same = next((k for k, (_, w) in enumerate(kept) if bool((w == v).all())), None)
        if same is None:
            kept.append((f, v))
        elif kept[same][0].num.encoding in _DECIMAL and f.num.encoding not in _DECIMAL:
            g = kept[same][0]
            kept[same] = (_Scored(f.num, g.score, f.step, f.resets, f.detail, g.base,
                                  g.note + f", also kept as {g.num.encoding} at "
                                  f"${int(addrs[min(g.num.cols)]):04X}", f.even), v)
    return [f for f, _ in kept] + scored[top:]


_DECIMAL = ("bcd", "bcdle", "digits")


def _as_candidate(f: _Scored, addrs: torch.Tensor) -> Candidate:
    n = f.num
    return Candidate(int(addrs[min(n.cols)]), "score", f.score, f"{n.note}; {f.detail}{f.note}",
                     len(n.cols), n.encoding, n.order, step=f.step, resets=bool(f.resets.any()),
                     even=f.even)


def _holds(full: torch.Tensor, addrs: torch.Tensor, c: Candidate) -> torch.Tensor:
    """``bool [T+1, N]``: where the game-over predicate ``c`` holds."""
    b = int((addrs == c.address).nonzero())
    return (full[:, :, b] == c.value) ^ (c.op == "!=")


# ---- position
def _rank_position(ram: torch.Tensor, actions: torch.Tensor, addrs: torch.Tensor) -> list[Candidate]:
    """Bytes whose change follows direction buttons (signs are robust to wrap-arounds and
    respawns); bytes whose *value* is a function of the button held (joypad mirrors) are left
    out."""
    d = torch.sign(ram[1:] - ram[:-1]).to(torch.int8)
    mirror = _explained_by_action(ram[1:], actions) > 0.8
    moved = (d != 0).float().mean((0, 1))
    held = _last_direction(actions)  # games where a press sets a direction that persists
    best: dict[int, Candidate] = {}
    for pos, neg, axis in (("RIGHT", "LEFT", "x"), ("DOWN", "UP", "y")):
        for acts, how in ((actions, "held"), (held, "last pressed")):
            dp = d[acts == _ACTIONS.index(pos)].float()  # [k, C]
            dn = d[acts == _ACTIONS.index(neg)].float()
            if len(dp) < 4 or len(dn) < 4:
                continue
            diff = dp.mean(0) - dn.mean(0)
            z = diff / torch.sqrt((dp.var(0) + dn.var(0)) / 2 + 1e-6)
            z = torch.where((moved > 0) & ~mirror, z, torch.zeros_like(z))
            for c in _top(addrs, z.abs(), "position", lambda b, diff=diff, axis=axis, pos=pos, z=z, how=how: (
                    f"{axis}: moves {'with' if diff[b] > 0 else 'against'} {pos} {how} "
                    f"(sign z {z[b]:+.2f})")):
                if c.address not in best or c.score > best[c.address].score:
                    best[c.address] = c  # one row per address: its strongest axis and reading
    return sorted(best.values(), key=lambda c: -c.score)


def _last_direction(actions: torch.Tensor) -> torch.Tensor:
    """``[T, N]``: the last direction button pressed up to each step (NOOP before any)."""
    dirs = torch.tensor([a in ("UP", "DOWN", "LEFT", "RIGHT") for a in _ACTIONS])
    out = torch.empty_like(actions)
    last = torch.zeros_like(actions[0])
    for t in range(len(actions)):
        last = torch.where(dirs[actions[t]], actions[t], last)
        out[t] = last
    return out


def _explained_by_action(values: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Share of each byte's variance explained by the button held in that step (R^2 of a
    one-way analysis of variance), ``[C]``."""
    v = values.float().reshape(-1, values.shape[-1])
    a = actions.reshape(-1)
    total = v.var(0, unbiased=False) * len(v)
    within = torch.zeros_like(total)
    for k in range(len(_ACTIONS)):
        g = v[a == k]
        if len(g):
            within += g.var(0, unbiased=False) * len(g)
    return torch.where(total > 0, 1 - within / total.clamp(min=1e-9), torch.zeros_like(total))


# ---- score
@dataclass
class _Number:
    """A candidate number: its bytes (columns of the full RAM, least significant first), how
    to read it and why."""

    cols: list[int]
    encoding: str
    order: str | None
    note: str


def _same_region(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a < WRAM_SIZE) == (b < WRAM_SIZE)


def _carries(full: torch.Tensor, cols: torch.Tensor, pos: torch.Tensor) -> dict[int, int]:
    """``{byte: more significant neighbour}`` for bytes that carry into a neighbour: most of
    their falls wrap around (by 0x60 or more, or from 5-9 to 0-4 for a digit byte) while the
    neighbour grows by one (+1, or +7 for a BCD digit pair going from x9 to (x+1)0)."""
    B = full.shape[-1]
    x = full[:, :, cols].to(torch.int16)
    dec = x[1:] < x[:-1]
    digit = full[:, :, cols].amax((0, 1)) <= 9
    # a wrap: from near the top of the byte's range to near its bottom
    high = torch.where(digit, (x[:-1] >= 5) & (x[1:] <= 4), x[:-1] - x[1:] >= 0x60)
    falls = dec.sum((0, 1))
    best: dict[int, tuple[int, int]] = {}
    for step in (1, -1):
        nb = cols + step
        ok = (nb >= 0) & (nb < B)
        nb = nb.clamp(0, B - 1)
        ok &= (pos[nb] >= 0) & _same_region(cols, nb)
        if not bool(ok.any()):
            continue
        j = torch.nonzero(ok).flatten()
        y = full[:, :, nb[j]].to(torch.int16)
        dy = y[1:] - y[:-1]
        k = (dec[..., j] & high[..., j] & ((dy == 1) | (dy == 7))).sum((0, 1))
        for jj, kk, f in zip(j.tolist(), k.tolist(), falls[j].tolist(), strict=True):
            if kk and 2 * kk >= f and kk > best.get(int(cols[jj]), (0, 0))[1]:
                best[int(cols[jj])] = (int(nb[jj]), kk)
    for b, (n, k) in list(best.items()):  # two bytes carrying into each other: keep one
        if n in best and best[n][0] == b and (best[n][1], b) > (k, n):
            del best[b]
    return {b: n for b, (n, _) in best.items()}


def _read_as(chain: list[int], full: torch.Tensor, zero: torch.Tensor, nib_ok: torch.Tensor,
             vmax: torch.Tensor) -> _Number:
    """How to read the bytes ``chain`` (least significant first)."""
    B = full.shape[-1]
    lsb = chain[0]
    if len(chain) == 1:
        if int(vmax[lsb]) >= 0x10 and bool(nib_ok[lsb]):
            return _Number(chain, "bcd", None, "BCD (no carry seen: maybe wider)")
        nb = lsb + 1
        if nb < B and (nb < WRAM_SIZE) == (lsb < WRAM_SIZE) and bool(zero[nb]):
            return _Number([lsb, nb], "u16le", None, "u16le (next byte stayed 0)")
        return _Number(chain, "u8", None, "u8")
    up = chain[1] > chain[0]  # the more significant byte at the higher address: little-endian
    step = 1 if up else -1
    decimal = int(vmax[lsb]) <= 9 or all(bool(nib_ok[c]) for c in chain)
    if decimal:
        digits = int(vmax[lsb]) <= 9
        enc = "digits" if digits else ("bcdle" if up else "bcd")
        note = "a decimal digit per byte" if digits else "BCD"
        found = len(chain)
        while len(chain) < (6 if digits else 3):  # scores of 6 digits are the common width
            nb = chain[-1] + step
            if not (0 <= nb < B and (nb < WRAM_SIZE) == (lsb < WRAM_SIZE) and bool(zero[nb])):
                break
            chain = [*chain, nb]
        if len(chain) > found:
            note += ", widened to 6 digits over bytes that stayed 0"
    else:
        enc, note = ("u16le" if up else "u16be"), "binary"
        if len(chain) > 2:
            enc = "u32le" if up else "u32be"
            while len(chain) < 4:
                chain = [*chain, chain[-1] + step]
    order = ("lsb" if up else "msb") if enc == "digits" else None
    return _Number(chain, enc, order, f"{note}, {len(chain)} bytes, carries "
                   f"{'up' if up else 'down'}")


def _decode(num: _Number, full: torch.Tensor, addrs: torch.Tensor) -> torch.Tensor:
    """``int64 [T+1, N]``: the number's values, decoded by the spec's own watch."""
    from torchrl_dreamer.envs.spec import RamWatch

    w = RamWatch.parse(_watch_keys(num, addrs), "ramsearch")
    first = min(num.cols)
    raw = full[:, :, first:first + len(num.cols)]
    return w.decode(raw.reshape(-1, len(num.cols))).reshape(raw.shape[:2])


def _watch_keys(num: _Number, addrs: torch.Tensor) -> dict[str, Any]:
    keys: dict[str, Any] = {"address": int(addrs[min(num.cols)]), "encoding": num.encoding,
                            "length": len(num.cols)}
    if num.order is not None:
        keys["order"] = num.order
    return keys


@dataclass
class _Scored:
    """A number that looks like a score, with what :func:`_counter_scores` measured."""

    num: _Number
    score: float
    step: int
    resets: torch.Tensor  # bool [T, N]
    detail: str
    base: float = 0.0  # the score before what the game over tells (:func:`_rerank_score`)
    note: str = ""
    even: bool = False  # every increase is ``step``


def _rank_score(full: torch.Tensor, cols: torch.Tensor, addrs: torch.Tensor,
                start: torch.Tensor) -> list[_Scored]:
    """Numbers that look like a score, best first (see the module docstring); ``start`` is
    the RAM at the start state ``[1, N, B]`` (before any warm-up step)."""
    B = full.shape[-1]
    pos = torch.full((B,), -1, dtype=torch.long)
    pos[cols] = torch.arange(len(cols))
    zero = (full == 0).all(0).all(0)  # bytes that stayed 0 everywhere
    nib_ok = (((full & 0x0F) <= 9) & ((full >> 4) <= 9)).all(0).all(0)
    vmax = full.amax((0, 1))
    carry = _carries(full, cols, pos)
    receives = set(carry.values())
    chains, singles = [], []
    for b in cols.tolist():
        if b in receives:
            continue  # not the least significant byte of its number
        if b not in carry:
            singles.append(b)
            continue
        chain = [b]
        while chain[-1] in carry and len(chain) < 4:
            nxt = carry[chain[-1]]
            if nxt in chain or (len(chain) > 1 and nxt - chain[-1] != chain[1] - chain[0]):
                break
            chain.append(nxt)
        chains.append(chain)
    found: list[_Scored] = []
    for chain in chains:  # a chain's own reading, else its low byte alone
        num = _read_as(chain, full, zero, nib_ok, vmax)
        v = _decode(num, full, addrs).unsqueeze(-1)
        shown = 1.25 if num.encoding in _DECIMAL else 1.0  # a displayed score
        s, step, resets, detail, even = _counter_scores(
            v, _decode(num, start, addrs).reshape(-1, 1), torch.tensor([shown]))
        if float(s[0]) > 0:
            found.append(_Scored(num, float(s[0]), int(step[0]), resets[..., 0], detail(0),
                                 float(s[0]), even=bool(even[0])))
        else:
            singles.append(chain[0])
    singles = torch.tensor(sorted(singles), dtype=torch.long)
    for k in range(0, len(singles), 256):  # single bytes, scored together
        part = singles[k:k + 256]
        s, step, resets, detail, even = _counter_scores(full[:, :, part].to(torch.int16),
                                                        start[0][:, part])
        for i in torch.nonzero(s > 0).flatten().tolist():
            num = _read_as([int(part[i])], full, zero, nib_ok, vmax)
            st = int(step[i])
            if num.encoding == "bcd":  # the usual increase in decimal
                v = _decode(num, full, addrs)
                st = int(torch.mode((v[1:] - v[:-1])[v[1:] > v[:-1]]).values)
            found.append(_Scored(num, float(s[i]), st, resets[..., i], detail(i), float(s[i]),
                                 even=bool(even[i]) and st == int(step[i])))
    found.sort(key=lambda f: (-f.score, int(addrs[min(f.num.cols)])))
    return found


def _counter_scores(v: torch.Tensor, v0: torch.Tensor, bonus: torch.Tensor | None = None):
    """How much each series of ``v [T+1, N, C]`` looks like a game score: ``(score [C], usual
    increase [C], resets [T, N, C], detail(i) -> str, every increase the usual one [C])``,
    score 0 for a series that is not one:
    one that falls other than back to its start value or its lowest value (a restart), never
    grows twice on a console, or wraps at a fixed value (a timer). ``v0 [N, C]``: the values
    at the start state (before any warm-up step; a score starts at 0); ``bonus [C]``: factors
    for what else speaks for a series (a decimal number that carried: a displayed score)."""
    if bonus is None:
        bonus = torch.ones(v.shape[-1])
    d = v[1:] - v[:-1]
    inc, dec = d > 0, d < 0
    start, floor = v[0], v.amin((0, 1))
    resets = dec & ((v[1:] == start.unsqueeze(0)) | (v[1:] == floor))
    C = v.shape[-1]
    ok = ~(dec & ~resets).any(0).any(0) & (inc.sum(0).amax(0) >= 2)
    step = torch.ones(C, dtype=torch.long)
    s = torch.zeros(C)
    stats = torch.zeros(5, C)  # grew on, changes/step, restarts, clock, every increase alike
    for i in torch.nonzero(ok).flatten().tolist():
        x, di, ii, ri = v[..., i], d[..., i], inc[..., i], resets[..., i]
        step[i] = int(torch.mode(di[ii]).values)
        n_res = int(ri.sum())
        if n_res >= 4:  # a timer that wraps at a fixed value
            before = x[:-1][ri]
            top = torch.mode(before).values
            if float((before == top).float().mean()) >= 0.8 and int(top - floor[i]) >= 3:
                continue
        env_inc = float((ii.sum(0) > 0).float().mean())
        lo_ = int(x.min())
        distinct = (int(torch.bincount((x - lo_).flatten().long()).gt(0).sum())
                    if int(x.max()) - lo_ < 1 << 16 else len(torch.unique(x)))
        rate = float((ii | dec[..., i]).float().mean())
        # growth steps where (nearly) every console grows at once: a clock, or all consoles
        # still playing the same opening (a runner's distance); weighs half
        grows = ii.any(1)
        lockstep = float(((ii.float().mean(1) > 0.9) & grows).sum() / grows.sum().clamp(min=1))
        # a clock ticks at a fixed interval of several steps (a score of points does not; a
        # runner's distance grows at nearly every step)
        tt, nn = torch.nonzero(ii, as_tuple=True)
        order = torch.argsort(nn * (v.shape[0] + 1) + tt)
        tt, nn = tt[order], nn[order]
        gaps = (tt[1:] - tt[:-1])[nn[1:] == nn[:-1]]
        clock = False
        if len(gaps) >= 8:
            med = float(gaps.float().median())
            clock = med >= 3 and float(((gaps - med).abs() <= 1).float().mean()) >= 0.9
        # many values (log scale: a score of 40 values is not 5 times one of 8), not a clock
        together = 0.05 if lockstep >= 0.95 else 1 - 0.5 * lockstep  # always together: a clock
        s[i] = (env_inc * min(math.log2(distinct) / 6, 1.0) * together * bonus[i]
                * (1.5 if bool((v0[:, i] == 0).all()) else 1.0)
                * (0.5 if clock else 1.0))
        even = bool((di[ii] == step[i]).all())
        stats[:, i] = torch.tensor([env_inc, rate, n_res, float(clock), float(even)])

    def detail(i: int) -> str:
        env_inc, rate, n_res = float(stats[0, i]), float(stats[1, i]), int(stats[2, i])
        return (f"grew on {env_inc:.0%} of consoles, {rate:.3f} changes/step, usually "
                f"+{int(step[i])}" + (f", {n_res} restarts" if n_res else "")
                + (", ticks like a clock" if stats[3, i] else ""))

    return s, step, resets, detail, stats[4].bool()


# ---- game events and game over
def _game_events(ram: torch.Tensor, frames: torch.Tensor | None, blank: torch.Tensor | None,
                 pressed: torch.Tensor | None = None, still: int = 12, after: int = 64,
                 positions: tuple[int, ...] = ()) -> torch.Tensor:
    """``bool [T, N]``: steps where a console's game (or life) ends: its screen freezes for
    ``still`` steps, or - not within ``after`` steps of a frozen screen, which already ended that
    game - the screen turns one flat shade (``blank [T+1, N]``: a fade or flash between scenes)
    or most of RAM returns to the start state. A kind of event that follows one button
    (``pressed [T, N, 8]``, see :func:`_by_button`) opens a menu or a screen: it is left out.
    In a game with none of these (one that respawns the player by itself), the steps where a
    byte of ``positions`` (columns of ``ram``: the top position candidates) jumps back
    (:func:`_teleports`)."""
    T = ram.shape[0] - 1
    frozen = torch.zeros(T, ram.shape[1], dtype=torch.bool)
    kinds = []
    if frames is not None and T >= still:
        win = frames[1:].unfold(0, still, 1)  # [T - still + 1, N, still]
        srt = torch.sort(win, -1).values
        few = (srt[..., 1:] != srt[..., :-1]).sum(-1) <= 1  # one frame, or two alternating
        frozen[: len(few)] = few
        for t in range(1, T):  # a frozen run lasts until its window no longer is
            frozen[t] |= frozen[t - 1] & (frames[t + 1] == frames[t])
        kinds.append(frozen & torch.cat([torch.ones_like(frozen[:1]), ~frozen[:-1]]))
    recent = frozen.clone()  # within `after` steps of a frozen screen
    for k in range(1, after + 1):
        recent[k:] |= frozen[:-k]
    dist = (ram != ram[:1]).sum(2)  # bytes away from the start state
    kinds.append((dist[1:] * 3 <= dist[:-1]) & (dist[:-1] >= 16) & ~recent)
    if blank is not None:
        kinds.append(blank[1:] & ~blank[:-1] & ~recent)
    events = torch.zeros_like(frozen)
    for k in kinds:  # a kind of event that follows one button opens a menu or a screen
        if pressed is None or not bool(_by_button(k.unsqueeze(0), pressed)[0]):
            events |= k
    return events if bool(events.any()) else _teleports(ram, list(positions))


def _teleports(ram: torch.Tensor, columns: list[int], jump: float = 3.0,
               max_rate: float = 0.1) -> torch.Tensor:
    """``bool [T, N]``: steps where a position byte (``ram[..., columns]``) changes by more
    than ``jump`` times its usual step (the median of its non-zero changes, at least 2): the
    player put back at a spawn point. Empty when such jumps are not rare (more than
    ``max_rate`` of the steps: a byte that jumps as a matter of course, e.g. each new piece of a
    falling-block game)."""
    d = (ram[1:].to(torch.int32) - ram[:-1].to(torch.int32)).abs()
    out = torch.zeros(d.shape[:2], dtype=torch.bool)
    for col in columns:
        moves = d[..., col][d[..., col] > 0]
        if len(moves) == 0:
            continue
        usual = float(moves.float().median())
        if usual >= 2:
            out |= d[..., col] > jump * usual
    return out if float(out.float().mean()) <= max_rate else torch.zeros_like(out)


def _rank_game_over(full: torch.Tensor, cols: torch.Tensor, addrs: torch.Tensor,
                    events: torch.Tensor, pressed: torch.Tensor, window: int, lag: int,
                    stack: tuple[int, int] | None = None, chunk: int = 128,
                    min_recall: float = 0.2, max_values: int = 256) -> list[Candidate]:
    """Rank predicates ``byte == v`` / ``byte != start`` by how they announce ``events``: an
    onset at most ``window`` steps before an event, or ``lag`` steps after it (a game may
    freeze the screen a moment before it sets its game-over state).

    Candidate values of a byte are its most common values one step before, at and ``lag``
    steps after the events; ``!=`` its start value when every console starts alike. Only bytes
    that change near at least ``min_recall`` of the events are tried. A predicate true at the
    start state (``full[0]``) on any console is never proposed, nor one whose onsets mostly
    follow one button (a pause, a menu the button opens: a screen the player calls up, not the
    end of the game). Ties go to the predicate that turns true earliest before its events (a
    death before the fade that follows it), then to a byte with few values (a state). Bytes
    that take more than ``max_values`` values are left out.
    """
    T, N = events.shape
    n_ev = int(events.sum())
    ev_t, ev_n = torch.nonzero(events, as_tuple=True)
    # an event within [t - lag, t + window]: near[t, n]
    ev_c = torch.cat([torch.zeros(1, N, dtype=torch.int32), events.int().cumsum(0)])
    steps = torch.arange(T)
    near = (ev_c[torch.clamp(steps + window + 1, max=T)] - ev_c[torch.clamp(steps - lag, min=0)]) > 0
    censored = (steps + window >= T).unsqueeze(1).expand(T, N)  # too late to tell
    counted = ~(censored & ~near)  # onsets whose outcome is known
    # bytes that change near enough events to announce them
    sub = full[:, :, cols].permute(2, 0, 1).contiguous()  # [C, T+1, N]
    busy = torch.zeros(len(cols), dtype=torch.long)
    for k in range(0, len(cols), chunk):
        busy[k:k + chunk] = ((sub[k:k + chunk, 1:] != sub[k:k + chunk, :-1]) & near).sum((1, 2))
    keep = torch.nonzero(busy >= max(1, min_recall * n_ev)).flatten()
    if len(keep) == 0:
        return []
    sub = sub[keep]
    first = sub[:, 0]  # [K, N] the start state
    vals = [torch.mode(sub[:, torch.clamp(ev_t + k, max=T), ev_n].to(torch.int64), 1).values.tolist()
            for k in (0, 1, 1 + lag)]
    alike = (first == first[:, :1]).all(1).tolist()
    preds: list[tuple[int, str, int]] = []  # (row of sub, op, value)
    for j in range(len(keep)):
        preds += [(j, "==", v) for v in dict.fromkeys(x[j] for x in vals)]
        if alike[j]:
            preds.append((j, "!=", int(first[j, 0])))
    flat = sub.reshape(len(keep), -1).to(torch.int64) + 256 * torch.arange(len(keep)).unsqueeze(1)
    distinct = torch.bincount(flat.flatten(), minlength=256 * len(keep)).reshape(-1, 256).gt(0).sum(1)
    offs = torch.arange(-lag, window + 1)
    rows = ev_t.unsqueeze(1) - offs.unsqueeze(0)  # [E, K]: steps an announcing onset may take
    inside = (rows >= 0) & (rows < T)
    rows = rows.clamp(0, T - 1)
    out = []
    for k in range(0, len(preds), chunk):
        part = preds[k:k + chunk]
        j = torch.tensor([q[0] for q in part])
        val = torch.tensor([q[2] for q in part], dtype=torch.uint8).reshape(-1, 1, 1)
        neq = torch.tensor([q[1] == "!=" for q in part])
        p = (sub[j] == val) ^ neq.reshape(-1, 1, 1)  # [P, T+1, N]
        at_start = p[:, 0].any(1)
        on = p[:, 1:] & ~p[:, :-1]  # onsets [P, T, N]
        hit = (on & near).sum((1, 2)).float()
        n_on = (on & counted).sum((1, 2)).float()
        precision = hit / n_on.clamp(min=1)
        hit_k = on[:, rows, ev_n.unsqueeze(1)] & inside  # [P, E, K]
        recall = hit_k.any(2).float().mean(1)
        score = torch.where(at_start | (n_on == 0), torch.zeros_like(recall), precision * recall)
        by_button = _by_button(on, pressed)
        # how many steps before its events the predicate turns true (earliest announcing onset)
        lead_k = torch.where(hit_k, offs.reshape(1, 1, -1), -10**6).amax(2)  # [P, E]
        found = lead_k > -10**6
        lead = torch.where(found, lead_k, 0).sum(1).float() / found.sum(1).clamp(min=1)
        for i in torch.nonzero((score > 0.05) & ~by_button).flatten().tolist():
            r, op, v = part[i]
            sc = float(score[i]) * (0.95 if op == "!=" else 1.0)  # `==` names the value
            a = int(addrs[cols[keep[r]]])
            if stack is not None and stack[0] - 32 <= a < stack[1] + 8:
                sc *= 0.9  # a stack byte: rather a game variable of the same worth
            dv, ld = int(distinct[r]), float(lead[i])
            if dv > max_values:
                continue
            out.append((round(sc, 2), -int(ld // (lag + 1)), op == "!=", dv, Candidate(
                a, "game_over", sc,
                f"turns true before {recall[i]:.0%} of {n_ev} events (about {ld:.0f} steps "
                f"before), {precision[i]:.0%} of its onsets come before one; {dv} values",
                op=op, value=v)))
    out.sort(key=lambda x: (-x[0], x[1], x[2], x[3], x[4].address))
    return [x[4] for x in out[:16]]


# ---- counts that fall by one: lives and goals left
@dataclass(frozen=True)
class _Falls:
    """How the changing bytes ``ram [T+1, N, C]`` fall, read by both the lives and the
    objective rankings: ``start [N, C]``, ``inc`` / ``dec [T, N, C]``, whether every fall is by
    one (``by_one [C]``) and whether the falls come on (nearly) every console at once, like a
    timer (``clock [C]``)."""

    start: torch.Tensor
    inc: torch.Tensor
    dec: torch.Tensor
    by_one: torch.Tensor
    clock: torch.Tensor

    def starts_alike(self, top: int) -> torch.Tensor:
        """``[C]``: the byte starts at one value 1..``top`` on every console."""
        s = self.start
        return (s == s[:1]).all(0) & (s[0] >= 1) & (s[0] <= top)


def _falls(ram: torch.Tensor) -> _Falls:
    d = ram[1:] - ram[:-1]
    inc, dec = d > 0, d < 0
    steps = dec.any(1)  # [T, C]: steps where some console drops
    together = (dec.float().mean(1) >= 0.95) & steps
    return _Falls(ram[0], inc, dec, (dec & (d != -1)).sum((0, 1)) == 0,
                  together.sum(0) >= 0.8 * steps.sum(0))


def _rank_lives(ram: torch.Tensor, addrs: torch.Tensor, falls: _Falls,
                over: torch.Tensor | None, window: int) -> list[Candidate]:
    """Lives counters, only on strong evidence: a game over was found (its onsets ``over
    [T, N]``), and the byte starts at 1..9 on every console, only ever drops by one (at
    different steps on different consoles, not like a clock), at least twice on a console,
    returns only to its start value, and drops to its lowest value right before (within
    ``window`` steps) most game overs."""
    if over is None:
        return []
    start, dec = falls.start, falls.dec
    ups_ok = (falls.inc & (ram[1:] != start.unsqueeze(0))).sum((0, 1)) == 0  # back to the start
    n_dec = dec.sum(0)  # [N, C]
    twice = (n_dec >= 2).any(0)
    rate = dec.float().mean((0, 1))
    ok = falls.starts_alike(9) & falls.by_one & ups_ok & twice & ~falls.clock & (rate < 0.05)
    n_over = int(over.sum())
    if n_over == 0:
        return []
    ev_t, ev_n = torch.nonzero(over, as_tuple=True)
    out = []
    for j in torch.nonzero(ok).flatten().tolist():
        low = ram[..., j].amin()
        at_min = float((ram[1:, :, j][over] == low).float().mean())
        dc = torch.cat([torch.zeros(1, ram.shape[1], dtype=torch.long), dec[..., j].long().cumsum(0)])
        lo = torch.clamp(ev_t - window, min=0)
        just_before = float(((dc[ev_t + 1, ev_n] - dc[lo, ev_n]) > 0).float().mean())
        if at_min < 0.8 or just_before < 0.8:
            continue  # the game does not end when this runs out: not lives
        env_dec = float((n_dec[:, j] > 0).float().mean())
        out.append(Candidate(int(addrs[j]), "lives", env_dec * at_min * just_before, (
            f"start {int(start[0, j])}, fell by one on {env_dec:.0%} of consoles, the last "
            f"fall just before {just_before:.0%} of game overs")))
    out.sort(key=lambda c: (-c.score, c.address))
    return out[:16]


# ---- goals left and the win
def _rank_objectives(ram: torch.Tensor, addrs: torch.Tensor, falls: _Falls,
                     lives: list[Candidate], over: torch.Tensor | None,
                     window: int) -> list[Candidate]:
    """Counts of goals left (``ram`` ``[T+1, N, C]`` of the bytes that change): a byte that
    starts at one value 1..15 on every console, only ever falls by one, rarely (at most twice
    its start value of falls on a console over the recording, not on every console at once like
    a clock), rises only from 0 or back to its start (the next level's count, a new game), and
    runs out (reaches 0) on some console. A puzzle's deliveries or a level's targets count down
    this way; random play seldom meets one, a trained agent's play (``--policy``) does. A lives
    candidate is not one, nor a count whose running out comes right before (within ``window``
    steps) a game over (its onsets ``over [T, N]``): that is lives the finder could not
    confirm. Ranked by the share
    of consoles where it ran out, then by the values it took (a new level's count), then by
    address."""
    start, dec = falls.start, falls.dec
    ups_ok = (falls.inc & (ram[:-1] != 0) & (ram[1:] != start.unsqueeze(0))).sum((0, 1)) == 0
    few = dec.sum(0).amax(0) <= 2 * start[0].clamp(min=1)  # a few falls a console, not a clock
    out_on = (ram == 0).any(0)  # [N, C]
    ok = falls.starts_alike(15) & falls.by_one & ups_ok & few & ~falls.clock & out_on.any(0)
    taken = {c.address for c in lives}
    ends = None
    if over is not None:
        ends = torch.cat([torch.zeros(1, over.shape[1], dtype=torch.int32),
                          over.int().cumsum(0)])
    out = []
    for j in torch.nonzero(ok).flatten().tolist():
        a = int(addrs[j])
        if a in taken:
            continue
        zero = ram[..., j] == 0
        ran_out = zero[1:] & ~zero[:-1]  # [T, N]
        if ends is not None and bool(ran_out.any()):
            t, n = torch.nonzero(ran_out, as_tuple=True)
            t_end = torch.clamp(t + 1 + window, max=ends.shape[0] - 1)
            if float(((ends[t_end, n] - ends[t, n]) > 0).float().mean()) >= 0.5:
                continue  # runs out just before a game over: lives
        share = float(out_on[:, j].float().mean())
        values = len(torch.unique(ram[..., j]))
        out.append((share, values, Candidate(a, "objective", share, (
            f"start {int(start[0, j])}, counts down by one, ran out on {share:.0%} of consoles, "
            f"{values} values"))))
    out.sort(key=lambda x: (-x[0], -x[1], x[2].address))
    return [x[2] for x in out[:16]]


def _rank_win(whole: torch.Tensor, cols: torch.Tensor, addrs: torch.Tensor,
              objectives: list[Candidate], pressed: torch.Tensor, window: int, lag: int,
              stack: tuple[int, int] | None) -> list[Candidate]:
    """Predicates that announce the best objective running out (the steps where it reaches 0):
    ranked as game-over predicates are (:func:`_rank_game_over`) over the bytes that take at
    most :data:`WIN_STATE_VALUES` values (states, not counters or coordinates), times the
    share of the steps where the predicate holds that lie within ``window`` steps after a run
    out (a win scene lasts a moment; a level number that stays set into the next level is not
    the win). The objective bytes themselves are left out (their ``== 0`` is the event)."""
    held = _holds(whole, addrs, dataclasses.replace(objectives[0], op="==", value=0))
    events = held[1:] & ~held[:-1]  # [T, N]: run out between rows t and t + 1
    if not bool(events.any()):
        return []
    mine = {c.address for c in objectives}
    keep = torch.tensor([int(addrs[c]) not in mine for c in cols.tolist()])
    found = _rank_game_over(whole, cols[keep], addrs, events, pressed, window, lag, stack,
                            max_values=WIN_STATE_VALUES)
    c = torch.cat([torch.zeros(1, events.shape[1], dtype=torch.int32), events.int().cumsum(0)])
    rows = torch.arange(whole.shape[0])
    after = (c[rows] - c[torch.clamp(rows - window, min=0)]) > 0  # [T+1, N]: within the window
    out = []
    for k, cand in enumerate(found):
        h = _holds(whole, addrs, cand)
        share = float((h & after).sum()) / max(int(h.sum()), 1)
        out.append((-round(cand.score * share, 2), k, dataclasses.replace(
            cand, kind="win", score=cand.score * share,
            detail=cand.detail.replace("events", "objectives run out")
            + f"; {share:.0%} of the steps it holds follow a run out")))
    out.sort(key=lambda x: x[:2])
    return [x[2] for x in out]


def _top(addrs: torch.Tensor, score: torch.Tensor, kind: str, detail, k: int = 16) -> list[Candidate]:
    vals, idx = torch.sort(score, descending=True)
    out = []
    for v, b in zip(vals[:k].tolist(), idx[:k].tolist(), strict=True):
        if v <= 0:
            break
        out.append(Candidate(int(addrs[b]), kind, float(v), detail(b)))
    return out


# ------------------------------------------------------------------------------ the draft
def draft_spec(result: SearchResult, rom_path: str | Path | None = None,
               start: str | None = None, actions: str = "minimal",
               on_reset: str | None = None, rom: str | None = None) -> str:
    """A draft task spec (YAML text) from the best candidates, to be checked and edited.

    ``start`` / ``actions`` / ``on_reset`` / ``rom``: YAML text of the ``start`` mapping, the
    ``actions`` value, the ``on_reset`` list and the ``rom`` check to write (default: the
    search's own boot macro, the ``minimal`` set, no pokes, no check); :func:`spec_start` gives
    them for a spec.

    The reward is the best score when it ranks at least :data:`SCORE_MIN` (its ``delta``,
    scaled so that its usual increase pays 1, never negative: a score falls back when a game
    ends), minus one per life lost when lives were found; the episode ends on the best
    game-over predicate when it ranks at least :data:`GAME_OVER_MIN` (else on a lost life).
    Without a score, the best objective (a count of goals left) pays 1 per goal met and its
    win predicate 10, and the win ends the episode and is its ``success``. Without a score, a
    screen-novelty bonus stands in or comes along.
    """
    start = start or "{macro: [{wait: 120}, {press: START, frames: 8}, {wait: 60}]}"
    lines = ["# Draft task spec written by torchrl_dreamer.ramsearch: CHECK every address",
             "# (python -m torchrl_dreamer.envs.spec_check THIS.yaml --rom GAME.gb).",
             f"name: {json.dumps(Path(rom_path).stem if rom_path else 'my_game')}",
             f"actions: {actions}",
             "max_episode_steps: 2000", f"start: {start}"]
    if rom:
        lines.append(f"rom: {rom}")
    if on_reset:
        lines.append(f"on_reset: {on_reset}")
    lines.append("reward:")
    score = next((c for c in result.score[:1] if c.score >= SCORE_MIN), None)
    over = next((c for c in result.game_over[:1] if c.score >= GAME_OVER_MIN), None)
    lives = result.lives[0] if result.lives else None
    if score is not None:  # never negative: a score falls back when a game ends
        scale = f", scale: {1 / score.step:.6g}" if score.step > 1 else ""
        lines.append(f"  - {{kind: delta, {_flow(score.watch())}{scale}, clamp: [0, null]}}"
                     f"   # score? {score.detail}")
    if lives is not None:
        lines.append(f"  - {{kind: event, address: 0x{lives.address:04X}, op: decreased, "
                     f"scale: -1}}   # life lost? {lives.detail}")
    goal = result.objective[0] if score is None and result.objective else None
    win = result.win[0] if goal is not None and result.win else None
    if goal is not None:  # a puzzle: pay each goal met, and the win
        lines.append(f"  - {{kind: event, address: 0x{goal.address:04X}, op: decreased}}   "
                     f"# goal met? {goal.detail}")
        if win is not None:
            lines.append(f"  - {{kind: event, {_predicate(win)}, scale: 10}}   # win? {win.detail}")
    if score is None and lives is None and goal is None:
        lines.append("  - {kind: level, address: 0xC000, scale: 0.0}   # no score found: "
                     "edit me (the screen bonus below rewards new screens meanwhile)")
    if over is not None:
        lines += ["terminate:", f"  - {{{_predicate(over)}}}   # game over? {over.detail}"]
    elif lives is not None:
        lines += ["terminate:", f"  - {{address: 0x{lives.address:04X}, op: decreased}}   "
                  "# end on a lost life"]
    if win is not None:
        if over is None and lives is None:
            lines.append("terminate:")
        lines += [f"  - {{{_predicate(win)}}}   # the win ends the episode",
                  f"success: {{{_predicate(win)}}}"]
    xy = list(dict.fromkeys(c.address for c in result.position))[:2]
    explore = []
    if xy:
        addrs = ", ".join(f"0x{a:04X}" for a in xy)
        explore.append(f"  ram: {{addresses: [{addrs}], scale: 0.01}}   # player x/y?")
    if score is None:
        explore.append("  screen: {scale: 0.02}")
    if explore:
        lines += ["exploration:", *explore]
    return "\n".join(lines) + "\n"


def _predicate(c: Candidate) -> str:
    """``address: 0xC0B9, op: "==", value: 5``: a predicate candidate as YAML flow text."""
    return f"address: 0x{c.address:04X}, op: \"{c.op}\", value: {c.value}"


def _flow(keys: dict[str, Any]) -> str:
    """``address: 0xC0A0, encoding: bcd, length: 3``: watch keys as YAML flow text."""
    return ", ".join(f"{k}: 0x{v:04X}" if k == "address" else f"{k}: {v}" for k, v in keys.items())


def _mask_name(mask: int) -> str:
    """``"START"`` / ``"UP+A"``: the button names of a buttons mask."""
    return "+".join(n for n, bit in BUTTON_BITS.items() if mask & bit)


def spec_start(spec: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a search started from a task spec needs: ``(search, draft)``, the keyword
    arguments of :func:`record` / :func:`ram_search` (the spec's start macro or savestate, its
    ``on_reset`` pokes and its action set) and of :func:`draft_spec` (the same, as YAML text,
    and the spec's ``rom`` check), so that the draft starts where the spec starts.

    Raises:
        TaskSpecError: the spec does not validate.
    """
    from torchrl_dreamer.envs.actions import make_action_set
    from torchrl_dreamer.envs.spec import load_task_spec

    s = load_task_spec(spec).spec
    actions = list(make_action_set(s.actions).names)
    search = {"macro": s.macro, "state": s.state, "pokes": list(s.pokes), "actions": actions}
    draft: dict[str, Any] = {"actions": "[" + ", ".join(actions) + "]"}
    if s.state is None:
        draft["start"] = "{macro: [" + ", ".join(
            f"{{press: {_mask_name(b)}, frames: {f}}}" if b else f"{{wait: {f}}}"
            for b, f in s.macro) + "]}"
    else:
        draft["start"] = f"{{state: {Path(s.state).resolve()}}}"
    if s.pokes:
        draft["on_reset"] = "[" + ", ".join(
            f"{{address: 0x{a:04X}, value: {lo}}}" if lo == hi else
            f"{{address: 0x{a:04X}, random: [{lo}, {hi}]}}" for a, lo, hi in s.pokes) + "]"
    rom = [f"sha256: {h}" for h in s.rom_sha256[:1]] + [f"title: {t!r}" for t in s.rom_titles[:1]]
    if not s.rom_has_logo:
        rom.append("logo: false")
    if rom:
        draft["rom"] = "{" + ", ".join(rom) + "}"
    return search, draft


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m torchrl_dreamer.ramsearch ROM [options]``, or
    ``python -m torchrl_dreamer.ramsearch check SPEC --rom ROM`` (the spec probe,
    :mod:`torchrl_dreamer.envs.spec_check`)."""
    from torchrl_dreamer.data.demonstrations import DemonstrationError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "check":
        from torchrl_dreamer.envs import spec_check

        return spec_check.main(argv[1:], prog="python -m torchrl_dreamer.ramsearch check")
    ap = argparse.ArgumentParser(prog="python -m torchrl_dreamer.ramsearch", description=(
        "Rank RAM addresses of a Game Boy ROM as score, lives, game-over, objective (goals "
        "left), win and player-position candidates by playing random buttons (or a trained "
        "agent, --policy, or recorded play, --demos) on many consoles at once; writes a draft task "
        "spec. 'python -m torchrl_dreamer.ramsearch check SPEC --rom ROM' probes a spec."))
    ap.add_argument("rom", type=Path, help="the game's ROM file")
    ap.add_argument("--state", type=Path, default=None, help="savestate to start from")
    ap.add_argument("--spec", type=Path, default=None, help=(
        "a task spec whose start (savestate or macro), on_reset pokes and action set the "
        "search uses"))
    ap.add_argument("--envs", type=int, default=32, help="consoles run together (default 32)")
    ap.add_argument("--steps", type=int, default=None, help=(
        "random steps recorded (default 512, or the longest --demos episode)"))
    ap.add_argument("--frame-skip", type=int, default=8, help="frames per step (default 8)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random buttons")
    ap.add_argument("--policy", type=Path, default=None, help=(
        "a trained agent's checkpoint (or run directory) to play instead of random buttons, "
        "for games where random play never reaches the events to find (give its --spec)"))
    ap.add_argument("--demos", type=Path, nargs="+", default=None, help=(
        "demonstration files (or folders of them) recorded with 'python -m torchrl_dreamer.play "
        "ROM --spec SPEC --record FILE' from the spec's start: console i replays file i, the "
        "rest play random buttons (give the same --spec)"))
    ap.add_argument("--top", type=int, default=5, help="candidates shown per kind (default 5)")
    ap.add_argument("--out", type=Path, default=None, help="write the draft spec here")
    args = ap.parse_args(argv)
    if not args.rom.is_file():
        ap.error(f"ROM {args.rom} not found")
    if args.policy is not None and args.demos is not None:
        ap.error("give --policy or --demos, not both")
    for name in ("envs", "steps", "frame_skip", "top"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    search: dict[str, Any] = {"state": args.state}
    draft: dict[str, Any] = {}
    if args.spec is not None:
        from torchrl_dreamer.envs.spec import TaskSpecError

        try:
            search, draft = spec_start(args.spec)
        except TaskSpecError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        search["state"] = args.state or search["state"]
    try:
        if args.policy is not None:
            search["policy"] = checkpoint_policy(args.policy, args.envs, search.get("actions"),
                                                 seed=args.seed)
            agent_skip = search["policy"].frame_skip
            if agent_skip != args.frame_skip:
                print(f"note: the agent was trained at {agent_skip} frames a step; the search "
                      f"plays it at --frame-skip {args.frame_skip}", file=sys.stderr)
        if args.demos is not None:
            search["policy"] = demonstration_policy(args.demos, args.rom, args.envs,
                                                    search.get("actions"), args.frame_skip,
                                                    seed=args.seed)
        steps = args.steps or DEFAULT_STEPS
        longest = getattr(search.get("policy"), "longest", 0) - DEFAULT_WARMUP
        if args.steps is None:
            steps = max(steps, longest)
        elif longest > steps:
            print(f"note: the longest demonstration is {longest} steps past the warm-up; "
                  f"--steps {steps} replays only its first {steps}", file=sys.stderr)
        res = ram_search(args.rom, args.envs, steps, args.frame_skip, seed=args.seed,
                         progress=True, **search)
    except (RamSearchError, DemonstrationError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(res.table(args.top))
    spec = draft_spec(res, args.rom, **draft)
    if args.out:
        args.out.write_text(spec)
        print(f"draft spec written to {args.out}")
    else:
        print("\n" + spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
