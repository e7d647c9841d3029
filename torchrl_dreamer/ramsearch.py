"""A batched RAM finder: where does a game keep its score, lives and player position?

Users who bring a ROM do not know its RAM map. Like an emulator's cheat search, but on many
consoles at once: :func:`ram_search` boots ``num_envs`` consoles, plays random buttons (each
held for one env step), records WRAM and HRAM after every step and ranks addresses by how they
behave:

- **score**: counters that only grow (never decrease within an episode, except a reset to the
  start value), change rarely (not a frame counter) and grow on some consoles but not all at the
  same steps; single bytes and 16-bit little-endian pairs (a score that carries past 255);
- **lives**: small bytes equal on every console at the start that only decrease, by one, rarely;
- **game over / death**: bytes that change just before a *game event* and rarely otherwise. A
  console's game events are the steps where its screen goes static for a while (a game-over
  screen) or where many bytes snap back to their start values at once (the game restarts a
  life or a level) or, in a game with neither (one that respawns the player by itself), where
  a top position byte jumps by several times its usual step (the player put back at a spawn
  point); a byte is ranked by how many events it announces (recall) times the share of its
  changes that announce one (precision);
- **position**: bytes whose change follows a direction button (RIGHT vs LEFT for x, DOWN vs UP
  for y), measured as a standardised difference of mean changes;
- **start values**: bytes equal on every console at the start and constant for a while.

It prints a table and writes a draft task spec (see :mod:`torchrl_dreamer.envs.spec`) that a
user then edits. Run it as ``python -m torchrl_dreamer.ramsearch ROM [--state S] [--out spec.yaml]``;
``--spec draft.yaml`` reuses a spec's start (savestate or button macro into gameplay) and its
action set, the usual second pass once a first draft gets past the title screen.

Example:
    >>> from torchrl_dreamer.ramsearch import ram_search
    >>> from torchrl_dreamer.roms import rom_path
    >>> found = ram_search(rom_path("catch"), num_envs=8, steps=120, frame_skip=8,
    ...                    macro=[(0, 30)], pokes=[(0xC001, 1)], seed=0)  # doctest: +SKIP
    >>> hex(found.position[0].address)                                      # doctest: +SKIP
    '0xc007'
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from torchrl_dreamer.envs.actions import BUTTON_BITS

__all__ = ["Candidate", "SearchResult", "RamSearchError", "ram_search", "draft_spec", "main"]

WRAM, WRAM_SIZE = 0xC000, 0x2000
HRAM, HRAM_SIZE = 0xFF80, 0x7F
_ACTIONS = ("NOOP", "A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")


class RamSearchError(RuntimeError):
    """The search cannot run on this ROM (it does not boot, or nothing ever changes)."""


@dataclass(frozen=True)
class Candidate:
    """One ranked address: ``score`` orders candidates of a kind (higher is better)."""

    address: int
    kind: str
    score: float
    detail: str


@dataclass
class SearchResult:
    """Ranked candidates per kind (best first)."""

    score: list[Candidate] = field(default_factory=list)
    lives: list[Candidate] = field(default_factory=list)
    position: list[Candidate] = field(default_factory=list)
    game_over: list[Candidate] = field(default_factory=list)
    start_values: dict[int, int] = field(default_factory=dict)
    events: int = 0
    """Game events (static screens, restarts, respawn jumps) seen over all consoles."""

    def table(self, top: int = 5) -> str:
        """The candidates as a plain-text table."""
        rows = ["kind      address  score   detail"]
        for kind in ("score", "lives", "game_over", "position"):
            for c in getattr(self, kind)[:top]:
                rows.append(f"{kind:<9} ${c.address:04X}    {c.score:6.3f}  {c.detail}")
        rows.append(f"({self.events} game events: static screens, restarts or respawn jumps)")
        return "\n".join(rows)


def _addresses() -> torch.Tensor:
    return torch.cat([torch.arange(WRAM, WRAM + WRAM_SIZE), torch.arange(HRAM, HRAM + HRAM_SIZE)])


def _snapshot(gb) -> torch.Tensor:
    """``uint8 [N, 8192 + 127]``: WRAM then HRAM of every console."""
    return torch.cat([gb.read_memory(WRAM, WRAM_SIZE), gb.read_memory(HRAM, HRAM_SIZE)], 1)


def ram_search(rom, num_envs: int = 32, steps: int = 256, frame_skip: int = 8,
               macro: list[tuple[int, int]] | None = None, state=None,
               pokes: list[tuple[int, int]] = (), seed: int = 0, warmup: int = 4,
               actions: list[str] | None = None, progress: bool = False) -> SearchResult:
    """Play random buttons on ``num_envs`` consoles and rank RAM addresses (see the module doc).

    Args:
        rom: ROM path or bytes.
        num_envs: consoles run together (each plays its own random buttons).
        steps: env steps recorded; each holds one random button for ``frame_skip`` frames.
        macro: ``[(buttons_mask, frames), ...]`` run from power-on first (default: wait 120
            frames, START for 8, wait 60: gets most games past their title screen).
        state: a savestate (path or ``EmulatorState``) to start from instead of the macro.
        pokes: ``[(address, byte), ...]`` written after the start (e.g. a new-game request).
        seed: seed of the random buttons.
        warmup: steps played but not analysed (a new game initialises its RAM in lockstep on
            every console, which would look like score or lives changes).
        actions: the action names played at random (default: NOOP, A, B, START and the four
            directions), e.g. a task spec's action set that leaves out a pause button.
        progress: print a progress line every 32 steps to stderr.

    Raises:
        RamSearchError: the ROM does not boot (the CPU locks up or the LCD never turns on) or
            no RAM byte changes while playing.
    """
    from torchrl_dreamer.emulator import GameBoy
    from torchrl_dreamer.envs.task import _load_state_arg

    gb = GameBoy(rom, num_envs=num_envs, check_header=False)
    lcd_seen = False
    if state is not None:
        gb.load_state(_load_state_arg(state))
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
    for addr, v in pokes:
        gb.write_memory(addr, v)
    g = torch.Generator().manual_seed(seed)
    names = [a.upper() for a in (actions or _ACTIONS)]
    masks = torch.tensor([sum(BUTTON_BITS.get(p.strip(), 0) for p in a.split("+")) for a in names],
                         dtype=torch.uint8)
    weights = torch.randint(1, 2**31 - 1, (72 * 20,), generator=torch.Generator().manual_seed(7))
    snaps, frames = [_snapshot(gb)], [_frame_hash(gb.packed2, weights)]
    played = []
    for t in range(steps + warmup):
        a = torch.randint(0, len(names), (num_envs,), generator=g)
        obs = gb.step(masks[a], frames=frame_skip, press_frames=frame_skip)
        played.append(_as_base_action(names, a))
        snaps.append(_snapshot(gb))
        frames.append(_frame_hash(obs, weights))
        if progress and (t + 1) % 32 == 0:
            print(f"ramsearch: {t + 1}/{steps} steps", file=sys.stderr, flush=True)
    ram = torch.stack(snaps).to(torch.int64)  # [T+1, N, B]
    if bool((ram == ram[:1]).all()):
        raise RamSearchError(f"{rom}: no RAM byte changed in {steps} steps of random play; "
                             "the game may wait for an input we do not press (try --macro)")
    return _rank(ram[warmup:], torch.stack(played)[warmup:], torch.stack(frames)[warmup:])


def _frame_hash(packed2: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``int64 [N]``: a hash of each console's packed2 frame (equal frames, equal hashes)."""
    return (packed2.reshape(packed2.shape[0], -1).to(torch.int64) * weights).sum(1)


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


def _game_events(ram: torch.Tensor, frames: torch.Tensor | None, still: int = 12,
                 positions: tuple[int, ...] = ()) -> torch.Tensor:
    """``bool [T, N]``: steps where a console's game ends a life or a game: its screen starts a
    run of ``still`` unchanged frames, or many bytes return to their start values at once. In a
    game with neither (one that respawns the player by itself, like snake), the steps where a
    byte of ``positions`` (columns of ``ram``: the top position candidates) jumps back
    (:func:`_teleports`)."""
    start = ram[0]
    away = ram != start.unsqueeze(0)  # [T+1, N, B]
    back = (away[:-1] & ~away[1:]).sum(2)  # bytes returning to their start value per step
    moving = away.any(0).sum(1).clamp(min=1)  # bytes that ever left their start value
    events = back >= torch.maximum(torch.full_like(moving, 8), moving // 5).unsqueeze(0)
    if frames is not None:
        same = frames[1:] == frames[:-1]  # [T, N]: step t left the screen unchanged
        T = same.shape[0]
        run = torch.zeros_like(same)
        for t in range(T - still + 1):
            run[t] = same[t:t + still].all(0)
        events = events | (run & torch.cat([torch.ones_like(run[:1]), ~run[:-1]]))
    return events if bool(events.any()) else _teleports(ram, list(positions))


def _rank(ram: torch.Tensor, actions: torch.Tensor, frames: torch.Tensor | None = None) -> SearchResult:
    """Rank addresses from ``ram [T+1, N, B]``, ``actions [T, N]`` and frame hashes ``[T+1, N]``."""
    addrs = _addresses()
    T, N = actions.shape
    d = ram[1:] - ram[:-1]  # [T, N, B]
    inc, dec = (d > 0), (d < 0)
    n_inc, n_dec = inc.sum(0), dec.sum(0)  # [N, B]
    changes = (n_inc + n_dec).float()
    start = ram[0]
    same_start = (start == start[:1]).all(0)  # [B]
    res = SearchResult()
    res.start_values = {int(addrs[b]): int(start[0, b]) for b in torch.nonzero(
        same_start & (ram[: min(8, T)] == start).all(0).all(0)).flatten()[:64]}

    # score: increases on some consoles, never decreases (except a reset to the start value),
    # rarely changes (not a timer), not in lockstep on every console; bytes and u16le pairs
    bcd = ((ram & 0x0F) <= 9).all(0).all(0) & ((ram >> 4) <= 9).all(0).all(0)
    s8 = _counter_score(ram, same_start)
    wide = ram[..., :-1] + 256 * ram[..., 1:]  # u16le of (b, b+1); WRAM/HRAM seam is harmless
    s16 = _counter_score(wide, same_start[:-1] & same_start[1:])
    wraps = (dec[..., :-1] & inc[..., 1:]).any(0).any(0)  # low byte falls as the high one grows
    is16 = torch.zeros_like(same_start)
    is16[:-1] = wraps & (s16 > 0)  # a counter that carries: report the pair, not its bytes
    best = torch.where(is16, torch.cat([s16, s16[-1:]]), s8)
    best[1:] = torch.where(is16[:-1], torch.zeros_like(best[1:]), best[1:])
    rate = changes.mean(0) / T
    env_inc = (n_inc > 0).float().mean(0)
    res.score = _top(addrs, best, "score", lambda b: (
        ("u16le, " if is16[b] else "") + f"grew on {env_inc[b]:.0%} of consoles, "
        f"{rate[b]:.3f} changes/step" + (", BCD digits" if bcd[b] and not is16[b] else "")))

    # lives: small equal start value, only decreases (by 1), rarely, on some consoles
    by_one = (dec & (d == -1)).sum((0, 1)) == n_dec.sum(0)
    any_inc_not_reset = (inc & (ram[1:] != start.unsqueeze(0))).sum((0, 1))
    env_dec = (n_dec > 0).float().mean(0)
    small = (start[0] >= 1) & (start[0] <= 9)
    s = env_dec * (1 - rate) * (same_start & small & by_one).float()
    s = torch.where((any_inc_not_reset == 0) & (n_dec.sum(0) > 0), s, torch.zeros_like(s))
    res.lives = _top(addrs, s, "lives", lambda b: (
        f"start {int(start[0, b])}, fell on {env_dec[b]:.0%} of consoles"))

    # position: the sign of the change follows direction buttons (signs are robust to wrap-
    # arounds and respawns); bytes whose *value* is a function of the button held (joypad
    # mirrors) are left out
    mirror = _explained_by_action(ram[1:], actions) > 0.8
    d = torch.sign(d)
    cand = []
    held = _last_direction(actions)  # games where a press sets a direction that persists
    for (pos, neg, axis), acts, how in [(p, a, h) for p in (("RIGHT", "LEFT", "x"), ("DOWN", "UP", "y"))
                                         for a, h in ((actions, "held"), (held, "last pressed"))]:
        ip, ineg = _ACTIONS.index(pos), _ACTIONS.index(neg)
        dp = d[acts == ip].float()  # [k, B]
        dn = d[acts == ineg].float()
        if len(dp) < 4 or len(dn) < 4:
            continue
        diff = dp.mean(0) - dn.mean(0)
        spread = torch.sqrt((dp.var(0) + dn.var(0)) / 2 + 1e-6)
        z = diff / spread
        moved = (d != 0).float().mean((0, 1))
        z = torch.where((moved > 0) & ~mirror, z, torch.zeros_like(z))
        for c in _top(addrs, z.abs(), "position", lambda b, diff=diff, axis=axis, pos=pos, z=z, how=how: (
                f"{axis}: moves {'with' if diff[b] > 0 else 'against'} {pos} {how} (sign z {z[b]:+.2f})")):
            cand.append(c)
    best: dict[int, Candidate] = {}
    for c in cand:  # one row per address: its strongest axis and reading
        if c.address not in best or c.score > best[c.address].score:
            best[c.address] = c
    res.position = sorted(best.values(), key=lambda c: -c.score)

    # game over / death: bytes whose changes announce game events (which, for a game that
    # respawns its player by itself, come from the top position bytes: ranked first, above)
    top_positions = tuple(int((addrs == c.address).nonzero()) for c in res.position[:4])
    events = _game_events(ram, frames, positions=top_positions)
    res.events = int(events.sum())
    if res.events:
        res.game_over = _event_bytes(ram, events, addrs)
    return res


def _teleports(ram: torch.Tensor, columns: list[int], jump: float = 3.0,
               max_rate: float = 0.1) -> torch.Tensor:
    """``bool [T, N]``: steps where a position byte (``ram[..., columns]``) changes by more
    than ``jump`` times its usual step (the median of its non-zero changes, at least 2): the
    player put back at a spawn point. Empty when such jumps are not rare (more than
    ``max_rate`` of the steps: a byte that jumps as a matter of course, e.g. each new piece of a
    falling-block game)."""
    d = (ram[1:] - ram[:-1]).abs()
    out = torch.zeros(d.shape[:2], dtype=torch.bool)
    for col in columns:
        moves = d[..., col][d[..., col] > 0]
        if len(moves) == 0:
            continue
        usual = float(moves.float().median())
        if usual >= 2:
            out |= d[..., col] > jump * usual
    return out if float(out.float().mean()) <= max_rate else torch.zeros_like(out)


def _counter_score(ram: torch.Tensor, same_start: torch.Tensor) -> torch.Tensor:
    """``[B]`` score of each series of ``ram [T+1, N, B]`` as a game score (see the module doc)."""
    d = ram[1:] - ram[:-1]
    inc, dec = d > 0, d < 0
    start, floor = ram[0], ram.amin((0, 1))  # a new life or game resets to one of these
    reset = dec & ((ram[1:] == start.unsqueeze(0)) | (ram[1:] == floor))
    bad_dec = (dec & ~reset).sum((0, 1))
    n_inc = inc.sum(0)
    env_inc = (n_inc > 0).float().mean(0)
    rate = (inc | dec).float().mean((0, 1))
    lockstep = (inc.float().mean(1) > 0.9).float().mean(0)  # steps where all consoles grow
    s = env_inc * (1 - rate) * (1 - lockstep) * (1 + same_start.float()) / 2  # equal starts: likelier
    # a score takes many values over the consoles (a flag or a pointer a few)
    srt = torch.sort(ram.reshape(-1, ram.shape[-1]), 0).values
    distinct = 1 + (srt[1:] != srt[:-1]).sum(0)
    s = s * (distinct - 1).clamp(max=8).float() / 8
    counter = n_inc.amax(0) >= 2  # a score grows more than once somewhere (not a state flag)
    return torch.where((bad_dec == 0) & counter & (rate < 0.5), s, torch.zeros_like(s))


def _event_bytes(ram: torch.Tensor, events: torch.Tensor, addrs: torch.Tensor,
                 window: int = 2) -> list[Candidate]:
    """Rank bytes whose changes announce ``events [T, N]`` (a change at most ``window`` steps
    before an event): recall (events announced) x precision (changes that announce one)."""
    T = events.shape[0]
    ch = ram[1:] != ram[:-1]  # [T, N, B]
    soon = torch.zeros_like(events)  # an event at t..t+window
    for k in range(window + 1):
        soon[: T - k] |= events[k:]
    recent = torch.zeros_like(ch)  # a change at t-window..t
    for k in range(window + 1):
        recent[k:] |= ch[: T - k]
    n_ev = events.sum()
    recall = (recent & events.unsqueeze(2)).sum((0, 1)).float() / n_ev.clamp(min=1)
    n_ch = ch.sum((0, 1)).float()
    precision = (ch & soon.unsqueeze(2)).sum((0, 1)).float() / n_ch.clamp(min=1)
    score = torch.where(n_ch > 0, recall * precision, torch.zeros_like(recall))
    at_event = ram[1:][events]  # [E, B]: values right at the events

    def detail(b: int) -> str:
        v = int(torch.mode(at_event[:, b]).values) if len(at_event) else 0
        return (f"value {v} at events; announces {recall[b]:.0%} of {int(n_ev)} events, "
                f"{precision[b]:.0%} of its changes do")

    return _top(addrs, score, "game_over", detail)


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
    one-way analysis of variance), ``[B]``."""
    v = values.float().reshape(-1, values.shape[-1])
    a = actions.reshape(-1)
    total = v.var(0, unbiased=False) * len(v)
    within = torch.zeros_like(total)
    for k in range(len(_ACTIONS)):
        g = v[a == k]
        if len(g):
            within += g.var(0, unbiased=False) * len(g)
    return torch.where(total > 0, 1 - within / total.clamp(min=1e-9), torch.zeros_like(total))


def _top(addrs: torch.Tensor, score: torch.Tensor, kind: str, detail, k: int = 16) -> list[Candidate]:
    vals, idx = torch.sort(score, descending=True)
    out = []
    for v, b in zip(vals[:k].tolist(), idx[:k].tolist(), strict=True):
        if v <= 0:
            break
        out.append(Candidate(int(addrs[b]), kind, float(v), detail(b)))
    return out


def draft_spec(result: SearchResult, rom_path: str | Path | None = None,
               start: str | None = None, actions: str = "minimal") -> str:
    """A draft task spec (YAML text) from the best candidates, to be checked and edited.

    ``start`` / ``actions``: YAML text of the ``start`` mapping and the ``actions`` value to
    write (default: the search's own boot macro and the ``minimal`` set)."""
    start = start or "{macro: [{wait: 120}, {press: START, frames: 8}, {wait: 60}]}"
    lines = ["# Draft task spec written by torchrl_dreamer.ramsearch: CHECK every address.",
             f"name: {Path(rom_path).stem if rom_path else 'my_game'}", f"actions: {actions}",
             "max_episode_steps: 2000", f"start: {start}", "reward:"]
    if result.score:
        c = result.score[0]
        enc = "u16le, length: 2" if c.detail.startswith("u16le") else "bcd" if "BCD" in c.detail else "u8"
        lines.append(f"  - {{kind: delta, address: 0x{c.address:04X}, encoding: {enc}}}   # score? {c.detail}")
    if result.lives:
        c = result.lives[0]
        lines.append(f"  - {{kind: event, address: 0x{c.address:04X}, op: decreased, scale: -1}}   # life lost? {c.detail}")
    if not result.score and not result.lives:
        lines.append("  - {kind: level, address: 0xC000, scale: 0.0}   # no score found: edit me")
    ends = []
    if result.lives:
        c = result.lives[0]
        ends.append(f"  - {{address: 0x{c.address:04X}, op: decreased}}   # end the episode on a lost life")
    if result.game_over:
        c = result.game_over[0]
        v = int(c.detail.split()[1])
        ends.append(f"  - {{address: 0x{c.address:04X}, op: \"==\", value: {v}}}   # game over? {c.detail}")
    if ends:
        lines += ["terminate:", *ends]
    xy = []
    for c in result.position:
        if c.address not in xy:
            xy.append(c.address)
        if len(xy) == 2:
            break
    if xy:
        addrs = ", ".join(f"0x{a:04X}" for a in xy)
        lines += ["exploration:", f"  ram: {{addresses: [{addrs}], scale: 0.01}}   # player x/y?"]
    return "\n".join(lines) + "\n"


def _mask_name(mask: int) -> str:
    """``"START"`` / ``"UP+A"``: the button names of a buttons mask."""
    return "+".join(n for n, bit in BUTTON_BITS.items() if mask & bit)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m torchrl_dreamer.ramsearch ROM [options]``."""
    ap = argparse.ArgumentParser(prog="python -m torchrl_dreamer.ramsearch", description=(
        "Rank RAM addresses of a Game Boy ROM as score, lives and player-position candidates "
        "by playing random buttons on many consoles at once; writes a draft task spec."))
    ap.add_argument("rom", type=Path, help="the game's ROM file")
    ap.add_argument("--state", type=Path, default=None, help="savestate to start from")
    ap.add_argument("--spec", type=Path, default=None, help=(
        "a task spec whose start (savestate or macro) and action set the search uses"))
    ap.add_argument("--envs", type=int, default=32, help="consoles run together (default 32)")
    ap.add_argument("--steps", type=int, default=256, help="random steps recorded (default 256)")
    ap.add_argument("--frame-skip", type=int, default=8, help="frames per step (default 8)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random buttons")
    ap.add_argument("--top", type=int, default=5, help="candidates shown per kind")
    ap.add_argument("--out", type=Path, default=None, help="write the draft spec here")
    args = ap.parse_args(argv)
    if not args.rom.is_file():
        ap.error(f"ROM {args.rom} not found")
    for name in ("envs", "steps", "frame_skip"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    macro, state, actions, start_yaml, actions_yaml = None, args.state, None, None, "minimal"
    if args.spec is not None:
        from torchrl_dreamer.envs.actions import make_action_set
        from torchrl_dreamer.envs.spec import TaskSpecError, load_task_spec

        try:
            spec = load_task_spec(args.spec).spec
        except TaskSpecError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        state = state or spec.state
        macro = spec.macro
        actions = list(make_action_set(spec.actions).names)
        actions_yaml = "[" + ", ".join(actions) + "]"
        if spec.state is None:
            start_yaml = "{macro: [" + ", ".join(
                f"{{press: {_mask_name(b)}, frames: {f}}}" if b else f"{{wait: {f}}}"
                for b, f in spec.macro) + "]}"
        else:
            start_yaml = f"{{state: {spec.state}}}"
    try:
        res = ram_search(args.rom, args.envs, args.steps, args.frame_skip, macro=macro,
                         state=state, seed=args.seed, actions=actions, progress=True)
    except RamSearchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(res.table(args.top))
    spec = draft_spec(res, args.rom, start=start_yaml, actions=actions_yaml)
    if args.out:
        args.out.write_text(spec)
        print(f"draft spec written to {args.out}")
    else:
        print("\n" + spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
