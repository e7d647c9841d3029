"""A batched RAM finder: where does a game keep its score, lives and player position?

Users who bring a ROM do not know its RAM map. Like an emulator's cheat search, but on many
consoles at once: :func:`ram_search` boots ``num_envs`` consoles, plays random buttons (each
held for one env step), records WRAM and HRAM after every step and ranks addresses by how they
behave:

- **score**: bytes that only grow (never decrease within an episode), change rarely (not a
  frame counter) and grow on some consoles but not all at the same steps;
- **lives / game over**: small bytes equal on every console at the start that only decrease, by
  one, rarely;
- **position**: bytes whose change follows a direction button (RIGHT vs LEFT for x, DOWN vs UP
  for y), measured as a standardised difference of mean changes;
- **start values**: bytes equal on every console at the start and constant for a while.

It prints a table and writes a draft task spec (see :mod:`torchrl_dreamer.envs.spec`) that a
user then edits. Run it as ``python -m torchrl_dreamer.ramsearch ROM [--state S] [--out spec.yaml]``.

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
    start_values: dict[int, int] = field(default_factory=dict)

    def table(self, top: int = 5) -> str:
        """The candidates as a plain-text table."""
        rows = ["kind      address  score   detail"]
        for kind in ("score", "lives", "position"):
            for c in getattr(self, kind)[:top]:
                rows.append(f"{kind:<9} ${c.address:04X}    {c.score:6.3f}  {c.detail}")
        return "\n".join(rows)


def _addresses() -> torch.Tensor:
    return torch.cat([torch.arange(WRAM, WRAM + WRAM_SIZE), torch.arange(HRAM, HRAM + HRAM_SIZE)])


def _snapshot(gb) -> torch.Tensor:
    """``uint8 [N, 8192 + 127]``: WRAM then HRAM of every console."""
    return torch.cat([gb.read_memory(WRAM, WRAM_SIZE), gb.read_memory(HRAM, HRAM_SIZE)], 1)


def ram_search(rom, num_envs: int = 32, steps: int = 256, frame_skip: int = 8,
               macro: list[tuple[int, int]] | None = None, state=None,
               pokes: list[tuple[int, int]] = (), seed: int = 0, warmup: int = 4,
               progress: bool = False) -> SearchResult:
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
    masks = torch.tensor([sum(BUTTON_BITS.get(p, 0) for p in a.split("+")) for a in _ACTIONS],
                         dtype=torch.uint8)
    snaps = [_snapshot(gb)]
    actions = []
    for t in range(steps + warmup):
        a = torch.randint(0, len(_ACTIONS), (num_envs,), generator=g)
        gb.step(masks[a], frames=frame_skip, press_frames=frame_skip)
        actions.append(a)
        snaps.append(_snapshot(gb))
        if progress and (t + 1) % 32 == 0:
            print(f"ramsearch: {t + 1}/{steps} steps", file=sys.stderr, flush=True)
    ram = torch.stack(snaps).to(torch.int64)  # [T+1, N, B]
    if bool((ram == ram[:1]).all()):
        raise RamSearchError(f"{rom}: no RAM byte changed in {steps} steps of random play; "
                             "the game may wait for an input we do not press (try --macro)")
    return _rank(ram[warmup:], torch.stack(actions)[warmup:])


def _rank(ram: torch.Tensor, actions: torch.Tensor) -> SearchResult:
    """Rank addresses from ``ram [T+1, N, B]`` and ``actions [T, N]``."""
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
    # rarely changes (not a timer), not in lockstep on every console
    back_to_start = dec & (ram[1:] == start.unsqueeze(0))
    bad_dec = (dec & ~back_to_start).sum((0, 1))
    env_inc = (n_inc > 0).float().mean(0)  # share of consoles where it grew
    rate = changes.mean(0) / T
    lockstep = (inc.float().mean(1) > 0.9).float().mean(0)  # steps where all consoles grow
    s = env_inc * (1 - rate) * (1 - lockstep) * same_start.float()
    counter = n_inc.amax(0) >= 2  # a score grows more than once somewhere (not a state flag)
    s = torch.where((bad_dec == 0) & counter & (rate < 0.25), s, torch.zeros_like(s))
    bcd = ((ram & 0x0F) <= 9).all(0).all(0) & ((ram >> 4) <= 9).all(0).all(0)
    res.score = _top(addrs, s, "score", lambda b: (
        f"grew on {env_inc[b]:.0%} of consoles, {rate[b]:.3f} changes/step"
        + (", BCD digits" if bcd[b] else "")))

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
    return res


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


def draft_spec(result: SearchResult, rom_path: str | Path | None = None) -> str:
    """A draft task spec (YAML text) from the best candidates, to be checked and edited."""
    lines = ["# Draft task spec written by torchrl_dreamer.ramsearch: CHECK every address.",
             f"name: {Path(rom_path).stem if rom_path else 'my_game'}", "actions: minimal",
             "max_episode_steps: 2000", "start:", "  macro: [{wait: 120}, {press: START, frames: 8}, {wait: 60}]",
             "reward:"]
    if result.score:
        c = result.score[0]
        enc = "bcd" if "BCD" in c.detail else "u8"
        lines.append(f"  - {{kind: delta, address: 0x{c.address:04X}, encoding: {enc}}}   # score? {c.detail}")
    if result.lives:
        c = result.lives[0]
        lines.append(f"  - {{kind: event, address: 0x{c.address:04X}, op: decreased, scale: -1}}   # life lost? {c.detail}")
    if not result.score and not result.lives:
        lines.append("  - {kind: level, address: 0xC000, scale: 0.0}   # no score found: edit me")
    if result.lives:
        c = result.lives[0]
        lines += ["terminate:", f"  - {{address: 0x{c.address:04X}, op: decreased}}   # end the episode on a lost life"]
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


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m torchrl_dreamer.ramsearch ROM [options]``."""
    ap = argparse.ArgumentParser(prog="python -m torchrl_dreamer.ramsearch", description=(
        "Rank RAM addresses of a Game Boy ROM as score, lives and player-position candidates "
        "by playing random buttons on many consoles at once; writes a draft task spec."))
    ap.add_argument("rom", type=Path, help="the game's ROM file")
    ap.add_argument("--state", type=Path, default=None, help="savestate to start from")
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
    try:
        res = ram_search(args.rom, args.envs, args.steps, args.frame_skip, state=args.state,
                         seed=args.seed, progress=True)
    except RamSearchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(res.table(args.top))
    spec = draft_spec(res, args.rom)
    if args.out:
        args.out.write_text(spec)
        print(f"draft spec written to {args.out}")
    else:
        print("\n" + spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
