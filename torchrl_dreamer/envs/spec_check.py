"""Probe a task spec on its ROM before training on it: does it pay, and do episodes end?

A spec that looks right can still be useless: its start state may already be a game over
(every episode ends at once), a reward term may read the wrong byte and never pay, or no
episode may ever end. :func:`check_spec` finds out in a minute: it plays random actions on many
consoles (a :class:`~torchrl_dreamer.envs.GameBoyEnv` running the spec's task) and reports, per
reward term, how often it paid and how much, how episodes ended (terminated, truncated or still
running) and after how many steps, and saves the start frame and a few end frames as PNG files
to look at. It warns when the start state already ends the episode, when no episode ends,
when a term never pays, and when an action changes nothing on screen or does what another
does (:mod:`~torchrl_dreamer.envs.action_probe`: each action pressed once in the last states).

Each term's contribution is computed by the term itself (:meth:`RewardTerm.compute` on the
values of its watches, read from the consoles after every step), so the probe follows whatever
the spec language says a term means.

:func:`check_start` is the cheap part on its own (one console, one step): training calls it to
refuse a start state that is already terminal before it builds the run.

Command line::

    python -m torchrl_dreamer.envs.spec_check SPEC --rom ROM [--envs 64] [--steps 300]
        [--seconds 60] [--out DIR] [--frame-skip F] [--press-frames P] [--noop-max N]
    python -m torchrl_dreamer.ramsearch check SPEC --rom ROM      # the same

The command line steps as a training run on the spec would
(:func:`~torchrl_dreamer.envs.gameboy.training_steps`: the spec's ``train:`` frame skip and
press length, else the Game Boy defaults) unless told otherwise.

Example:
    >>> from torchrl_dreamer.envs.spec_check import check_spec
    >>> from torchrl_dreamer.roms import rom_path
    >>> report = check_spec("examples/tasks/catch.yaml", rom=rom_path("catch"), num_envs=8,
    ...                     steps=100, progress=False)  # doctest: +SKIP
    >>> report.ok, report.terms[0].fired > 0                  # doctest: +SKIP
    (True, True)
"""

from __future__ import annotations

import argparse
import copy
import struct
import sys
import time
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchrl_dreamer._threads import one_thread
from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE, shades_to_grey, unpack_packed2
from torchrl_dreamer.envs.action_probe import ActionProbe, probe_actions
from torchrl_dreamer.envs.task import Task

__all__ = ["StartStateError", "TermStats", "CheckReport", "check_start", "check_spec",
           "write_png", "main"]

class StartStateError(ValueError):
    """The task's start state already ends the episode (its termination holds before any
    action), so every episode would last one step."""


# ------------------------------------------------------------------------------ PNG files
def write_png(path: str | Path, shades: torch.Tensor, scale: int = 2) -> Path:
    """Write Game Boy shades ``[H, W]`` (0 white .. 3 black) as an 8-bit grey PNG, each pixel
    ``scale`` x ``scale``. Our own few lines (zlib and CRC-32 from the standard library), so
    no image package is needed."""
    grey = shades_to_grey(shades.cpu())
    if scale > 1:
        grey = grey.repeat_interleave(scale, 0).repeat_interleave(scale, 1)
    h, w = grey.shape
    rows = torch.cat([torch.zeros(h, 1, dtype=torch.uint8), grey], 1)  # filter byte 0 per row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows.numpy().tobytes(), 9)) + chunk(b"IEND", b""))
    path = Path(path)
    path.write_bytes(png)
    return path


def _shades(packed: torch.Tensor) -> torch.Tensor:
    return unpack_packed2(packed.reshape(1, *PACKED2_SHAPE).cpu())[0, 0]


# ------------------------------------------------------------------------------ the start
def check_start(task: Task, frame_skip: int = 8, press_frames: int = 8,
                device: str | torch.device = "cpu") -> None:
    """Raise :class:`StartStateError` if ``task``'s start state already ends an episode.

    Builds one console per start variant (:attr:`Task.num_start_variants`), brings it to the
    start as the env does (``prepare_start``, ``on_reset``, one step of ``frame_skip`` frames
    with no button), then asks the task twice about that same state: first as a new episode
    (its baselines), then as the step after it. A termination (or truncation) that holds then
    holds before any action is taken: every episode would end after one step. A copy of
    ``task`` is probed; ``task`` itself is left as it was.

    Raises:
        StartStateError: names the variant and, for a spec task, the ``terminate`` /
            ``truncate`` entry that holds.
    """
    from torchrl_dreamer.emulator import GameBoy

    probe = copy.deepcopy(task)
    rom = probe.rom_path()
    device = torch.device(device)
    for variant in range(probe.num_start_variants):
        with warnings.catch_warnings():
            if not probe.rom_has_logo:
                warnings.filterwarnings("ignore", message=".*Nintendo logo.*")
            gb = GameBoy(rom, num_envs=1, device=device)
        probe.check_cartridge(gb.cartridge)
        gen = torch.Generator().manual_seed(variant)
        probe.prepare_start(gb, variant, gen)
        probe.setup(1, device)
        first = torch.ones(1, dtype=torch.bool, device=device)
        probe.on_reset(gb, first, torch.Generator(device=device).manual_seed(variant))
        pixels = gb.step(None, frames=frame_skip, press_frames=press_frames).clone()
        probe.compute(gb, pixels, first)
        out = probe.compute(gb, pixels, ~first)
        ended = [("terminate", out[1])] + ([("truncate", out[2])] if len(out) > 2 else [])
        for what, flag in ended:
            if bool(flag.any()):
                where = f" (start variant {variant})" if probe.num_start_variants > 1 else ""
                raise StartStateError(
                    f"task {probe.name!r}: its {what} condition already holds at the start "
                    f"state{where}{_which(probe, gb, what)}, so every episode would end after "
                    "one step; start later in the game (start macro or savestate) or fix the "
                    f"{what} condition")


def _which(task: Task, gb: Any, what: str) -> str:
    """``": terminate[0] (...)"``: the spec entries of ``what`` that hold on ``gb`` now."""
    spec = getattr(task, "spec", None)
    conds = getattr(spec, what, None)
    if not conds:
        return ""
    hits = []
    for k, cond in enumerate(conds):
        now = {w: w.read(gb) for w in cond.watches()}
        if bool(cond.test(now, now).any()):
            hits.append(f"{what}[{k}] ({_describe(cond)})")
    return ": " + ", ".join(hits) if hits else ""


def _describe(cond: Any) -> str:
    """``$C0A5 == 1``: a one-watch predicate in a few characters."""
    watch, op = getattr(cond, "watch", None), getattr(cond, "op", None)
    if watch is None or op is None:
        return f"{getattr(cond, 'kind', 'a')} group"
    values = getattr(cond, "values", ())
    rhs = f" {list(values)}" if op == "in" else "" if op in ("increased", "decreased", "changed") \
        else f" {cond.value}"
    return f"{_watch_text(watch)} {op}{rhs}"


def _watch_text(watch: Any) -> str:
    """``$C0E9 u16le`` / ``count $C100-$C1FF``: a watch in a few characters."""
    if hasattr(watch, "address"):
        enc, length = watch.encoding, watch.length
        return f"${watch.address:04X}" + ("" if enc == "u8" else f" {enc}") + (
            f"x{length}" if length > 1 and enc in ("bcd", "bcdle", "digits") else "")
    if hasattr(watch, "lo"):
        return f"count ${watch.lo:04X}-${watch.hi:04X}"
    return watch.describe()


# ------------------------------------------------------------------------------ the probe
@dataclass
class TermStats:
    """What one reward term paid over the probe (steps that start an episode excluded)."""

    label: str
    fired: int = 0
    """Console-steps where the term paid something (non-zero)."""
    total: float = 0.0
    low: float = 0.0
    """Smallest non-zero payment."""
    high: float = 0.0
    """Largest non-zero payment."""
    episodes: int = 0
    """Episodes (ended or still running) in which it paid at least once."""

    @property
    def mean(self) -> float:
        """Mean non-zero payment."""
        return self.total / self.fired if self.fired else 0.0


@dataclass
class CheckReport:
    """The result of :func:`check_spec`; :meth:`text` prints it."""

    name: str
    num_envs: int
    steps: int
    seconds: float
    terms: list[TermStats]
    terminated: list[int] = field(default_factory=list)
    """Lengths (steps) of the episodes that ended by termination."""
    truncated: list[int] = field(default_factory=list)
    """Lengths of the episodes that ended by truncation (``max_episode_steps`` or the spec's
    ``truncate``)."""
    running: list[int] = field(default_factory=list)
    """Lengths so far of the episodes still running when the probe stopped."""
    bonus: TermStats | None = None
    """The exploration bonus (the env's reward minus the terms), when the spec has one."""
    reward_total: float = 0.0
    """Sum of the env's rewards over the probe (the terms' sums plus the bonus's)."""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    frames: list[Path] = field(default_factory=list)
    """PNG files written (the start frame first)."""
    actions: ActionProbe | None = None
    """Which actions changed the frames, pressed once in the probe's last states
    (:func:`~torchrl_dreamer.envs.action_probe.probe_actions`); ``None`` when not probed."""

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return not self.errors

    def text(self) -> str:
        """The report as plain text."""
        lines = [f"spec {self.name!r}: {self.num_envs} consoles x {self.steps} steps of random "
                 f"actions ({self.seconds:.0f} s)", "",
                 "reward term                                  paid on  episodes       sum"
                 "      mean       min       max"]
        for t in self.terms + ([self.bonus] if self.bonus is not None else []):
            lines.append(f"{t.label[:44]:<44} {t.fired:>7} {t.episodes:>9} {t.total:>9.3g} "
                         f"{t.mean:>9.3g} {t.low:>9.3g} {t.high:>9.3g}")
        lines.append("")
        for what, lengths in (("terminated", self.terminated), ("truncated", self.truncated),
                              ("still running", self.running)):
            lines.append(f"{what:<14} {len(lengths):>6} episodes" + (
                f", {_lengths(lengths)}" if lengths else ""))
        if self.actions is not None:
            lines += ["", self.actions.text().rstrip()]
        if self.frames:
            lines += ["", "frames: " + ", ".join(str(p) for p in self.frames)]
        lines += [""] + [f"ERROR: {e}" for e in self.errors] + [f"warning: {w}" for w in self.warnings]
        if self.ok and not self.warnings:
            lines.append("no problems found")
        return "\n".join(lines).rstrip() + "\n"


def _lengths(lengths: list[int]) -> str:
    t = torch.tensor(lengths, dtype=torch.float32)
    return (f"steps min {int(t.min())}, median {int(t.median())}, mean {float(t.mean()):.1f}, "
            f"max {int(t.max())}")


def _label(k: int, term: Any) -> str:
    watch = getattr(term, "watch", None)
    what = _describe(term.predicate) if term.predicate is not None else (
        _watch_text(watch) if watch is not None else "")
    return f"reward[{k}] {term.kind} {what}"


def check_spec(spec: Any, rom: str | Path | None = None, num_envs: int = 64, steps: int = 300,
               seconds: float | None = 120.0, frame_skip: int = 8, press_frames: int = 8,
               noop_max: int = 30, seed: int = 0, out_dir: str | Path | None = None,
               end_frames: int = 4, progress: bool = True,
               device: str | torch.device = "cpu", action_states: int = 16) -> CheckReport:
    """Play random actions on ``num_envs`` consoles running ``spec`` and report what it does.

    Args:
        spec: a spec file, a spec mapping or a built :class:`~torchrl_dreamer.envs.SpecTask`.
        rom: the game's ROM (not needed for a built task).
        num_envs: consoles run together.
        steps: env steps per console at most.
        seconds: wall-clock limit (``None``: none); the probe stops at whichever comes first.
        frame_skip, press_frames: frames per env step and frames the buttons are held (the
            game defaults of training).
        noop_max: random no-op frames before each episode (varied starts, as in training).
        seed: seed of the actions and the env's draws.
        out_dir: folder for the PNG files (``start.png``, ``end_<k>_<how>.png``); ``None``
            writes none.
        end_frames: how many episode-end frames to save.
        progress: show a progress bar on stderr.
        device: the env's device.
        action_states: console states in which, after the random play, every action is
            pressed once to find dead and duplicate actions (:attr:`CheckReport.actions`;
            0: skip).
    """
    from torchrl_dreamer.envs.gameboy import GameBoyEnv
    from torchrl_dreamer.envs.spec import SpecTask, load_task_spec

    task = spec if isinstance(spec, SpecTask) else load_task_spec(spec, rom=rom)
    report = CheckReport(task.name, num_envs, 0, 0.0,
                         [TermStats(_label(k, t)) for k, t in enumerate(task.spec.reward)])
    try:
        check_start(task, frame_skip=frame_skip, press_frames=press_frames, device=device)
    except StartStateError as err:
        report.errors.append(str(err))
    env = GameBoyEnv(task, num_envs=num_envs, device=device, frame_skip=frame_skip,
                     press_frames=press_frames, noop_max=noop_max, seed=seed)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    td = env.reset()
    if out is not None:
        report.frames.append(write_png(out / "start.png", _shades(td["pixels"][0])))
    if task.spec.explore_ram is not None or task.spec.explore_screen is not None:
        report.bonus = TermStats("exploration bonus")
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, unit="step", desc=f"check {task.name}", dynamic_ncols=True,
                   file=sys.stderr)
    with one_thread():
        _probe(report, env, task, steps, seconds, seed, out, end_frames, bar)
        if action_states > 0:
            report.actions = probe_actions(env, states=action_states)
    if bar is not None:
        bar.close()
    _warn(report, task)
    return report


def _probe(report: CheckReport, env: Any, task: Any, steps: int, seconds: float | None,
           seed: int, out: Path | None, end_frames: int, bar: Any) -> None:
    """The stepping loop of :func:`check_spec`: fills ``report`` in place."""
    terms = task.spec.reward
    watches = sorted(set().union(*(t.watches() for t in terms)), key=repr)
    dev, n = env.device, env.num_envs
    prev = {w: w.read(env.gb) for w in watches}
    paid_ep = torch.zeros(len(terms) + 1, n, dtype=torch.bool, device=dev)  # + the bonus
    ep_len = torch.zeros(n, dtype=torch.long, device=dev)
    g = torch.Generator().manual_seed(seed)
    t0 = time.monotonic()
    saved = 0
    done_now = torch.zeros(n, dtype=torch.bool, device=dev)
    for step in range(steps):
        if seconds is not None and time.monotonic() - t0 > seconds:
            break
        action = torch.randint(0, env.action_set.n, (n,), generator=g).to(dev)
        o = env.fast_step(action)
        first = o["is_first"].reshape(-1)
        now = {w: w.read(env.gb) for w in watches}
        before = {w: torch.where(first, now[w], prev[w]) for w in watches}
        prev = now
        live = ~first
        report.reward_total += float(o["reward"].reshape(-1)[live].sum())
        total = torch.zeros(n, device=dev)
        for k, term in enumerate(terms):
            r = term.compute(now, before)
            total += r
            _add(report.terms[k], r, live)
            paid_ep[k] |= live & (r != 0)
        if report.bonus is not None:
            r = o["reward"].reshape(-1) - total
            _add(report.bonus, r, live)
            paid_ep[-1] |= live & (r != 0)
        ep_len = torch.where(first, torch.zeros_like(ep_len), ep_len + 1)
        term_, trunc = o["terminated"].reshape(-1), o["truncated"].reshape(-1)
        done_now = term_ | trunc
        for k, stats in enumerate(report.terms + [report.bonus]):
            if stats is not None:
                stats.episodes += int((paid_ep[k] & done_now).sum())
        paid_ep &= ~(term_ | trunc).unsqueeze(0)
        report.terminated += ep_len[term_].tolist()
        report.truncated += ep_len[trunc].tolist()
        if out is not None and saved < end_frames:
            for i in torch.nonzero(term_ | trunc).flatten().tolist()[: end_frames - saved]:
                how = "terminated" if bool(term_[i]) else "truncated"
                report.frames.append(write_png(out / f"end_{saved}_{how}.png",
                                               _shades(o["pixels"][i])))
                saved += 1
        report.steps = step + 1
        if bar is not None:
            bar.update(1)
    report.seconds = time.monotonic() - t0
    report.running = ep_len[~done_now].tolist()
    for k, stats in enumerate(report.terms + [report.bonus]):
        if stats is not None:
            stats.episodes += int((paid_ep[k] & ~done_now).sum())


def _add(stats: TermStats, r: torch.Tensor, live: torch.Tensor) -> None:
    paid = r[live & (r != 0)]
    if len(paid) == 0:
        return
    lo, hi = float(paid.min()), float(paid.max())
    stats.low = lo if stats.fired == 0 else min(stats.low, lo)
    stats.high = hi if stats.fired == 0 else max(stats.high, hi)
    stats.fired += len(paid)
    stats.total += float(paid.sum())


def _warn(report: CheckReport, task: Any) -> None:
    ended = len(report.terminated) + len(report.truncated)
    if not ended:
        report.warnings.append(f"no episode ended in {report.steps} steps of {report.num_envs} "
                               "consoles: check 'terminate' (and set max_episode_steps)")
    elif task.spec.terminate and not report.terminated:
        report.warnings.append("'terminate' never held: episodes only ended by truncation; "
                               "check its address and value")
    elif ended and max(report.terminated + report.truncated) <= 2:
        report.warnings.append("every episode ended within 2 steps: the start is (nearly) "
                               "over already")
    for t in report.terms:
        if t.fired == 0:
            report.warnings.append(f"{t.label} never paid: wrong address, encoding or value, "
                                   "or random play never gets there")
    probe = report.actions
    if probe is not None:
        for name in probe.dead:
            report.warnings.append(
                f"action {name} changed nothing on screen in any of {probe.states} states: the "
                "game ignores it there (a button that needs another, or buttons swapped); "
                "check the action set against the game's controls")
        for a, b in probe.duplicates:
            report.warnings.append(
                f"actions {a} and {b} showed the same frames in all {probe.states} states: one "
                "of them is probably not the move you meant")
        if probe.held_in_vain:
            report.warnings.append(
                f"actions {', '.join(probe.held_in_vain)} did nothing when held a second step "
                "but acted when pressed afresh: the game reacts to presses, not holds, and at "
                "press_frames = frame_skip two steps that choose one "
                "press it once (a greedy policy can wait on an unchanged screen forever); "
                "release between steps with the spec's train: {press_frames: P}, P < frame_skip")


def main(argv: list[str] | None = None, prog: str = "python -m torchrl_dreamer.envs.spec_check"
         ) -> int:
    """Command line (see the module docstring); returns 1 when the report has errors."""
    ap = argparse.ArgumentParser(prog=prog, description=(
        "Play random actions on many consoles running a task spec and report how often each "
        "reward term pays, how episodes end, and save start and end frames as PNG."))
    ap.add_argument("spec", type=Path, help="the task spec (YAML or JSON)")
    ap.add_argument("--rom", type=Path, required=True, help="the game's ROM file")
    ap.add_argument("--envs", type=int, default=64, help="consoles (default 64)")
    ap.add_argument("--steps", type=int, default=300, help="steps per console at most (300)")
    ap.add_argument("--seconds", type=float, default=120.0, help="time limit (default 120)")
    ap.add_argument("--frame-skip", type=int, default=None,
                    help="frames per step (default: the training run's: the spec's train: "
                         "section, else the Game Boy default 8)")
    ap.add_argument("--press-frames", type=int, default=None,
                    help="frames a step holds its buttons (default: the training run's)")
    ap.add_argument("--noop-max", type=int, default=None,
                    help="random no-op frames before each episode (default: the training "
                         "run's)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random actions")
    ap.add_argument("--out", type=Path, default=Path("spec_check"),
                    help="folder for the PNG frames (default ./spec_check)")
    ap.add_argument("--frames", type=int, default=4, help="episode-end frames to save (4)")
    ap.add_argument("--action-states", type=int, default=16,
                    help="states in which every action is pressed once to find dead and "
                         "duplicate actions (default 16; 0: skip)")
    args = ap.parse_args(argv)
    if not args.rom.is_file():
        ap.error(f"ROM {args.rom} not found")
    if args.envs < 1 or args.steps < 1:
        ap.error("--envs and --steps must be >= 1")
    if args.action_states < 0:
        ap.error("--action-states must be >= 0")
    from torchrl_dreamer.envs.gameboy import training_steps
    from torchrl_dreamer.envs.spec import TaskSpecError, load_task_spec
    from torchrl_dreamer.envs.task import TaskMismatchError

    try:
        task = load_task_spec(args.spec, rom=args.rom)
        frame_skip, press_frames, noop_max = training_steps(
            task, args.frame_skip, args.press_frames, args.noop_max)
        print(f"steps of {frame_skip} frames, buttons held {press_frames}, up to {noop_max} "
              "no-op frames before an episode (a training run's settings)")
        report = check_spec(task, num_envs=args.envs, steps=args.steps,
                            seconds=args.seconds, frame_skip=frame_skip,
                            press_frames=press_frames, noop_max=noop_max,
                            seed=args.seed,
                            out_dir=args.out, end_frames=args.frames,
                            action_states=args.action_states)
    except (TaskSpecError, TaskMismatchError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report.text(), end="")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
