"""SIMT-efficiency estimate of the emulator kernel per game, measured on the CPU.

On a GPU one warp runs 32 consoles in lockstep. When its lanes need different code (another
opcode's block of the dispatch loop, an interrupt dispatch) the warp runs each distinct block in
turn with the other lanes masked off, and a lane that has finished its launch idles until the
last one has. This benchmark traces 32 consoles of a game with different random inputs,
instruction by instruction, and replays the traces under a stated model of that lockstep.

What is traced. The consoles play ``--warmup`` env steps of random actions through
``GameBoyEnv`` (24 frames a step, buttons held 8, episodes restarting), so that they are in
different game states; then ``--steps`` more env steps with new random actions are traced.
The tracer is the kernel's instruction-stepping variant (``codegen.generate_source(step=True)``)
with its idle-loop fast-forward switched back on (the variant switches it off only to keep the
oracle tests' instruction counts; the source differs from the production kernel in the ``STEP``
flag alone), launched for one instruction at a time and one frame at most, buttons set from the
host at the same frame boundaries as ``gb.step`` sets them. After each launch the host reads
each console's PC, IME and HALTED and the opcode at the PC it started from. So a trace holds the
instructions the production kernel executes: a waiting loop the fast-forward skips is one
instruction (its closing branch), and halted time is none.

The model (``simt_metrics``). Every lane starts the launch (an env step) together; lane ``i``'s
``k``-th executed instruction issues in the warp's ``k``-th slot (the dispatch loop's
iterations line up, and lanes reconverge at its head every iteration, the post-dominator of the
dispatch). In slot ``k`` the warp issues once per distinct *handler* among the lanes still
running: each opcode's own block of the generated dispatch, except that the structural
families share one block (``LD r,r'``, ``ALU A,r``, the CB page, RST, PUSH, POP, CALL, RET cc),
and an interrupt dispatch is one more handler. Reported per game:

- ``simt_efficiency``: sum over slots of running lanes / (32 x distinct handlers): the share of
  lane slots doing useful work. Divergence inside a handler (bus regions, taken branches, events
  and out-of-line hardware calls) and memory divergence are not modelled, so this is an upper
  bound for the dispatch loop.
- ``same_handler_share`` / ``same_pc_share``: mean over slots of the largest group of lanes at
  the same handler / the same instruction (PC and ROM bank) over 32: how many lanes execute the
  same instruction in a step.
- ``tail_idle_share``: lane slots lost to lanes that finished their env step early (fewer
  instructions) over 32 x the longest lane.
- ``instructions_per_frame``: mean executed instructions per console and frame.
- ``frame_aligned_simt_efficiency`` / ``frame_aligned_tail_idle_share``: a what-if, the same
  model if the lanes of a warp waited for each other at every frame boundary (each frame a
  launch of its own): what a kernel that regroups consoles at frame ends could reach.

- ``regroup_simt_efficiency`` / ``frame_aligned_regroup_simt_efficiency``: a second what-if
  (``regroup_metrics``), a warp that regroups its lanes by vote: each slot issues the one
  handler that most running lanes need next, only those lanes advance and the rest wait, so
  lanes running the same code out of step fall into step. It counts handler issues alone
  (not the loop head and the vote, which each issue would add), so it bounds from above what
  scheduling the lanes differently could buy.

Not modelled: loop iterations that only advance a halted CPU or end a frame (a few per frame)
take no slot, lanes regroup only within their warp and only in the second what-if (no
dynamic warp formation across warps), and the consoles of one warp play the same game (one
ROM a launch, as in ``GameBoyEnv``).

Prints one JSON line per figure in the benchmarks' format; ``peer`` is null (there is no peer:
the last recorded figures are in ``docs/concepts/running_on_gpu.md``).

Usage: ``python benchmarks/simt.py [--roms DIR] [--games maze catch ...] [--warmup 8]
[--steps 2]``; the shared games need the shared ROM folder (``--roms``, default
``$TORCHRL_DREAMER_ROMS`` or ``../shared/roms``). Takes 10-60 s a game on one core, plus one
compile of the stepping kernel (about a minute, cached).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


def _load_sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", _HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


WARP = 32
IRQ = 0x200  # handler id of an interrupt dispatch
UNKNOWN = 0x201  # handler id of an instruction fetched outside ROM, WRAM and HRAM
_VECTORS = (0x40, 0x48, 0x50, 0x58, 0x60)


def handler_of(op: np.ndarray) -> np.ndarray:
    """Handler id of each opcode: the block of the generated dispatch loop that runs it
    (``codegen.generate_source``: one block per opcode in quarters 0 and 3, one for ``HALT``,
    one per structural family). Negative opcodes (unknown) map to :data:`UNKNOWN`."""
    op = np.asarray(op, dtype=np.int64)
    h = op.copy()
    h[(op >= 0x40) & (op < 0x80) & (op != 0x76)] = 0x100  # LD r,r'
    h[(op >= 0x80) & (op < 0xC0)] = 0x101  # ALU A,r
    hi = op >= 0xC0
    h[hi & ((op & 0xC7) == 0xC7)] = 0x102  # RST n
    h[hi & ((op & 0xCF) == 0xC5)] = 0x103  # PUSH rr
    h[hi & ((op & 0xCF) == 0xC1)] = 0x104  # POP rr
    h[hi & (((op & 0xE7) == 0xC4) | (op == 0xCD))] = 0x105  # CALL cc,nn / CALL nn
    h[hi & ((op & 0xE7) == 0xC0)] = 0x106  # RET cc
    h[op < 0] = UNKNOWN
    return h


def _distinct_and_largest(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``cols`` (``[lanes, slots]``, -1 = lane not running): the number of
    distinct values and the size of the largest group of equal values among running lanes."""
    s = np.sort(cols, axis=0)
    running = s >= 0
    new = np.ones_like(s, dtype=bool)
    new[1:] = s[1:] != s[:-1]
    starts = new & running
    distinct = starts.sum(axis=0)
    # run lengths: positions of run starts, including -1 runs, give each run's length
    lanes, slots = s.shape
    idx = np.arange(lanes)[:, None].repeat(slots, axis=1)
    start_idx = np.where(new, idx, 0)
    run_start = np.maximum.accumulate(start_idx, axis=0)  # index of each element's run start
    run_len = idx - run_start + 1  # length of the run so far at each element
    run_len = np.where(running, run_len, 0)
    largest = run_len.max(axis=0)
    return distinct, largest


def simt_metrics(handlers: list[np.ndarray], pcs: list[np.ndarray],
                 width: int = WARP) -> dict[str, float]:
    """The model's figures for one launch: lane ``i`` executed ``handlers[i]`` (handler ids)
    at ``pcs[i]`` (instruction identities), in order. Lanes beyond ``len(handlers)`` (up to
    ``width``) count as idle. Returns sums (so launches add up) and the shares they give."""
    n = np.array([len(h) for h in handlers], dtype=np.int64)
    slots = int(n.max()) if len(n) else 0
    if slots == 0:
        return {"slots": 0, "lane_slots": 0, "issues": 0, "same_handler": 0, "same_pc": 0,
                "width": width}
    hmat = np.full((len(handlers), slots), -1, dtype=np.int64)
    pmat = np.full((len(handlers), slots), -1, dtype=np.int64)
    for i, (h, p) in enumerate(zip(handlers, pcs)):
        hmat[i, :len(h)] = h
        pmat[i, :len(p)] = p
    distinct, largest_h = _distinct_and_largest(hmat)
    _, largest_p = _distinct_and_largest(pmat)
    return {"slots": slots, "lane_slots": int(n.sum()), "issues": int(distinct.sum()),
            "same_handler": int(largest_h.sum()), "same_pc": int(largest_p.sum()),
            "width": width}


def regroup_metrics(handlers: list[np.ndarray], width: int = WARP) -> dict[str, int]:
    """The regrouping what-if for one launch: the warp issues one handler a slot, the one that
    most running lanes' next instructions need (ties: the lowest handler id), and only those
    lanes advance; the others wait, so lanes that run the same code out of step fall into step.
    This is what a kernel that votes on the opcode before its dispatch (``__match_any_sync``)
    and lets the losing lanes wait an iteration could reach, counting handler issues only (the
    loop head and the vote itself, which every iteration pays, are not counted). Returns sums
    like :func:`simt_metrics` (``slots``: issues, as every issue is a slot here)."""
    n = np.array([len(h) for h in handlers], dtype=np.int64)
    if len(n) == 0 or int(n.max()) == 0:
        return {"lane_slots": 0, "issues": 0, "width": width}
    hmat = np.full((len(handlers), int(n.max()) + 1), -1, dtype=np.int64)
    for i, h in enumerate(handlers):
        hmat[i, :len(h)] = h
    lanes = np.arange(len(handlers))
    pos = np.zeros(len(handlers), dtype=np.int64)
    issues = 0
    while True:
        cur = hmat[lanes, pos]
        running = cur[cur >= 0]
        if running.size == 0:
            break
        pick = np.bincount(running).argmax()
        pos += cur == pick
        issues += 1
    return {"lane_slots": int(n.sum()), "issues": issues, "width": width}


def regroup_efficiency(parts: list[dict[str, int]]) -> float:
    """Lane slots doing work over ``width`` x issues, over several launches of
    :func:`regroup_metrics` (nan when nothing ran)."""
    issues = sum(p["issues"] for p in parts)
    if issues == 0:
        return float("nan")
    return sum(p["lane_slots"] for p in parts) / (parts[0]["width"] * issues)


def summarize(parts: list[dict[str, float]]) -> dict[str, float]:
    """Shares over several launches (their sums added first)."""
    tot = {k: sum(p[k] for p in parts) for k in ("slots", "lane_slots", "issues",
                                                   "same_handler", "same_pc")}
    width = parts[0]["width"] if parts else WARP
    if tot["slots"] == 0:
        return {"simt_efficiency": float("nan"), "same_handler_share": float("nan"),
                "same_pc_share": float("nan"), "tail_idle_share": float("nan")}
    return {
        "simt_efficiency": tot["lane_slots"] / (width * tot["issues"]),
        "same_handler_share": tot["same_handler"] / (width * tot["slots"]),
        "same_pc_share": tot["same_pc"] / (width * tot["slots"]),
        "tail_idle_share": 1.0 - tot["lane_slots"] / (width * tot["slots"]),
    }


# ------------------------------------------------------------------------------ tracing
def load_tracer() -> Any:
    """The stepping kernel module with the idle-loop fast-forward on (CPU, -O3, cached)."""
    import warp as wp

    from torchrl_dreamer.emulator import codegen

    wp.init()
    opt = codegen.CPU_OPT_LEVEL
    key = codegen.kernel_hash(opt, step=True, idle_skip=False) + "cst"
    path = codegen.cache_dir() / f"gb_kernel_{key}.py"
    if not path.exists():
        src = codegen.generate_source(key, opt, step=True)
        flag = "IDLE_SKIP = False"
        if src.count(flag) != 1:
            raise RuntimeError("the generated kernel's IDLE_SKIP flag line changed")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(src.replace(flag, "IDLE_SKIP = True"))
        tmp.replace(path)
    name = f"torchrl_dreamer_gb_kernel_{key}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class Tracer:
    """Steps the consoles of ``gb`` (a CPU :class:`~torchrl_dreamer.emulator.GameBoy`) one
    instruction at a time and records what each executed."""

    def __init__(self, gb: Any, rom: bytes) -> None:
        import torch
        import warp as wp

        from torchrl_dreamer.emulator import layout

        if gb.device.type != "cpu" or gb.memory_layout != "env_major":
            raise ValueError("the tracer reads state in place: a CPU, env-major GameBoy")
        self.gb = gb
        self.f = layout.FIELDS
        arrays = gb.state_tensors()
        self.st = arrays["st"].numpy()
        self.wram = arrays["wram"].numpy()
        self.hram = arrays["hram"].numpy()
        self.rom = np.frombuffer(rom, dtype=np.uint8)
        self.btn = torch.zeros(gb.num_envs, 1, dtype=torch.uint8)
        self.btn_np = self.btn.numpy()
        mod = load_tracer()
        # one instruction (max_steps 1) and at most one frame (n_frames 1) a launch; the
        # buttons are held for all of it (press_frames beyond n_frames), set from the host
        self.cmd = wp.launch(mod.gb_run, dim=gb.num_envs, device="cpu", record_cmd=True,
                             inputs=[gb._mem, gb._heads, wp.from_torch(self.btn), 1, 1 << 30,
                                     0, 1])

    def opcode_at(self, pc: np.ndarray) -> np.ndarray:
        """The byte at each console's ``pc`` (ROM banks, WRAM and its echo, HRAM; -1 elsewhere)."""
        st, f = self.st, self.f
        n = len(self.rom)
        out = np.full(pc.shape, -1, dtype=np.int64)
        rom0 = pc < 0x4000
        out[rom0] = self.rom[(st[rom0, f["ROM_OFF0"]] + pc[rom0]) % n]
        romx = (pc >= 0x4000) & (pc < 0x8000)
        out[romx] = self.rom[(st[romx, f["ROM_OFF1"]] + pc[romx] - 0x4000) % n]
        wram = (pc >= 0xC000) & (pc < 0xFE00)
        rows = np.nonzero(wram)[0]
        out[rows] = self.wram[rows, (pc[rows] - 0xC000) & 0x1FFF]
        hram = (pc >= 0xFF80) & (pc < 0xFFFF)
        rows = np.nonzero(hram)[0]
        out[rows] = self.hram[rows, pc[rows] - 0xFF00]
        return out

    def identity(self, pc: np.ndarray) -> np.ndarray:
        """An instruction's identity: its ROM offset for switchable banks, else the PC."""
        romx = (pc >= 0x4000) & (pc < 0x8000)
        return np.where(romx, 0x10000 + self.st[:, self.f["ROM_OFF1"]] + pc - 0x4000, pc)

    def env_step(self, masks: np.ndarray, frames: int = 24, press: int = 8
                 ) -> tuple[list[np.ndarray], ...]:
        """Run every console ``frames`` frames with ``masks`` held for the first ``press``,
        one instruction a launch; returns per console its handlers, identities, opcodes and the
        frame of the env step (0..frames-1) each instruction started in."""
        st, f = self.st, self.f
        frames0 = st[:, f["FRAMES"]].copy()
        locked0 = st[:, f["LOCKED"]].copy()
        hs, ids, ops, fis = [], [], [], []
        try:
            while True:
                into = st[:, f["FRAMES"]] - frames0
                done = (into >= frames) | (locked0 != 0)
                if done.all():
                    break
                st[:, f["LOCKED"]] = np.where(done, 1, locked0)  # finished lanes wait
                self.btn_np[:, 0] = np.where(into < press, masks, 0)
                pc0 = st[:, f["PC"]].astype(np.int64)
                sp0 = st[:, f["SP"]].astype(np.int64)
                op = self.opcode_at(pc0)
                ident = self.identity(pc0)
                self.cmd.launch()
                pc1 = st[:, f["PC"]]
                ran = ~done & ((st[:, f["HALTED"]] == 0) | (pc1 != pc0))
                h = handler_of(op)
                # an interrupt dispatch: PC at a vector, IME cleared, the PC pushed (a CALL
                # to a vector, the one instruction that looks alike, is told by its opcode)
                irq = (ran & np.isin(pc1, _VECTORS) & (st[:, f["IME"]] == 0)
                       & (st[:, f["SP"]] == ((sp0 - 2) & 0xFFFF)) & (h != 0x105))
                h[irq] = IRQ
                ident = np.where(irq, 0x100000 + pc1, ident)  # a dispatch is its own instruction
                hs.append(np.where(ran, h, -1))
                ids.append(np.where(ran, ident, -1))
                ops.append(np.where(ran & ~irq, op, -1))
                fis.append(np.where(ran, into, -1))
        finally:
            st[:, f["LOCKED"]] = locked0
        mats = [np.stack(x, axis=1) if x else np.zeros((len(st), 0), np.int64)
                for x in (hs, ids, ops, fis)]
        keep = [mats[0][i] >= 0 for i in range(len(st))]
        return tuple([m[i][k] for i, k in enumerate(keep)] for m in mats)


def trace_game(game: str, roms: Path | None, consoles: int = WARP, warmup: int = 8,
               steps: int = 2, seed: int = 0) -> dict[str, Any]:
    """Trace ``steps`` env steps of ``consoles`` consoles after ``warmup`` random steps and
    return the model's figures (see the module docstring)."""
    import torch

    games = _load_sibling("game_envs")
    torch.set_num_threads(1)
    env = games.make_env(game, roms, consoles)
    env.reset()
    gen = torch.Generator().manual_seed(seed)
    for _ in range(warmup):
        env.fast_step(torch.randint(0, env.action_set.n, (consoles,), generator=gen))
    tracer = Tracer(env.gb, Path(env.task.rom_path()).read_bytes())
    parts, framed, executed, unknown = [], [], 0, 0
    regrouped, regrouped_framed = [], []
    t0 = time.perf_counter()
    for _ in range(steps):
        acts = torch.randint(0, env.action_set.n, (consoles,), generator=gen)
        masks = env.action_set.masks[acts].numpy().astype(np.uint8)
        hs, ids, _ops, fis = tracer.env_step(masks, env.frame_skip, env.press_frames)
        parts.append(simt_metrics(hs, ids))
        regrouped.append(regroup_metrics(hs))
        for k in range(env.frame_skip):  # the what-if: lanes meet at every frame boundary
            sel = [f == k for f in fis]
            frame_hs = [h[m] for h, m in zip(hs, sel)]
            framed.append(simt_metrics(frame_hs, [i[m] for i, m in zip(ids, sel)]))
            regrouped_framed.append(regroup_metrics(frame_hs))
        executed += sum(len(h) for h in hs)
        unknown += sum(int((h == UNKNOWN).sum()) for h in hs)
    out = summarize(parts)
    aligned = summarize(framed)
    out.update({f"frame_aligned_{k}": v for k, v in aligned.items()})
    out.update(regroup_simt_efficiency=regroup_efficiency(regrouped),
               frame_aligned_regroup_simt_efficiency=regroup_efficiency(regrouped_framed))
    out.update(instructions_per_frame=executed / (consoles * steps * env.frame_skip),
               unknown_share=unknown / max(1, executed), trace_s=time.perf_counter() - t0,
               consoles=consoles, steps=steps, warmup=warmup)
    return out


_UNITS = {
    "simt_efficiency": "share of lane slots doing work (lockstep by instruction count, one issue per distinct handler)",
    "same_handler_share": "mean share of 32 lanes at the largest same-handler group per slot",
    "same_pc_share": "mean share of 32 lanes at the largest same-instruction group per slot",
    "tail_idle_share": "share of lane slots idle after a lane finished its env step",
    "frame_aligned_simt_efficiency": "the same if the lanes met again at every frame boundary (what-if)",
    "frame_aligned_tail_idle_share": "lane slots idle waiting at frame boundaries (what-if)",
    "regroup_simt_efficiency": "the same if the warp issued one handler a slot, the most-wanted one, and the other lanes waited (what-if: regrouping by vote)",
    "frame_aligned_regroup_simt_efficiency": "regrouping by vote with the lanes meeting at every frame boundary (what-if)",
    "instructions_per_frame": "executed instructions per console and frame (idle skip on)",
}


def result_lines(game: str, figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One JSON line per figure of ``trace_game``'s result."""
    note = ("no peer: an estimate from CPU traces (benchmarks/simt.py docstring); the last "
            "recorded figures are in docs/concepts/running_on_gpu.md")
    return [{"bench": "simt", "case": f"{game}_{figures['consoles']}lanes_{key}",
             "ours": round(float(figures[key]), 4), "peer": None, "unit": unit, "speedup": None,
             "note": note} for key, unit in _UNITS.items()]


def main(argv: list[str] | None = None) -> int:
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # no banner or module notes among the JSON lines
    games_mod = _load_sibling("game_envs")
    from torchrl_dreamer._roms import roms_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roms", type=Path, default=None,
                        help="shared ROM folder (default: $TORCHRL_DREAMER_ROMS or ../shared/roms)")
    parser.add_argument("--games", nargs="*", default=None,
                        help=f"games to trace (default: all found; {', '.join(games_mod.ALL_GAMES)})")
    parser.add_argument("--consoles", type=int, default=WARP)
    parser.add_argument("--warmup", type=int, default=8, help="random env steps before tracing")
    parser.add_argument("--steps", type=int, default=2, help="env steps traced")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="our two games only (maze, catch), one env step traced")
    args = parser.parse_args(argv)
    if args.quick:
        args.games, args.steps = args.games or ["maze", "catch"], 1
    roms = args.roms or roms_dir()
    games, missing = games_mod.available_games(roms if roms.is_dir() else None, args.games)
    for game, why in missing.items():
        print(f"# {game}: skipped ({why})", file=sys.stderr)
    for game in games:
        figures = trace_game(game, roms, args.consoles, args.warmup, args.steps, args.seed)
        for line in result_lines(game, figures):
            print(json.dumps(line), flush=True)
        print(f"# {game}: traced {args.steps} env steps in {figures['trace_s']:.1f} s, "
              f"{figures['unknown_share']:.2%} of instructions outside ROM/WRAM/HRAM",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
