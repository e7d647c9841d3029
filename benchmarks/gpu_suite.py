"""One command that measures the GPU engine on a lent GPU machine within a time budget.

``python benchmarks/gpu_suite.py [--budget 480] [--roms .gpu_roms]`` runs these parts, in this
order (by value, so that a short lease still returns the env and learner figures), and prints
one JSON line per result and per part, then a markdown table of them all:

1. ``system``: GPU, driver, Python / torch / CUDA / Warp / TorchRL versions, CPU cores, the
   commit, and whether the ahead-of-time compiled CUDA modules match this tree (a miss means
   minutes of NVRTC at the first launch).
2. ``env``: env steps/s of ``GameBoyEnv`` (24 frames a step, packed2 rendered, the task's
   reward, random actions, one device sync a step) for ours (``maze``, ``catch``) and every
   shared game found under ``--roms``, at N = 1,024 / 4,096 / 16,384 / 65,536 consoles, with
   a launch per frame (``launch_frames=1``, the CUDA default); then each game at the last size
   it reached with one launch a step (``launch_frames=None``), the per-frame rate against it
   (skipped with ``--per-frame-only``). The part leaves the ``cpu`` part its time.
   ``ab`` (with ``--baseline-tree DIR [DIR ...]``): the same cases on other checkouts'
   emulators (built by ``--prepare baseline --baseline-rev REV [REV ...]`` into
   ``.gpu_baseline/``, ``.gpu_baseline_2/``, ..., their CUDA modules compiled beside this
   tree's), each run as a child of this script on the same machine, and each case's rate
   against each; the env part then leaves k/(k+1) of its time for k baselines.
3. ``cpu``: the same games on our CPU kernel over all the machine's cores: one env with
   ``workers=K`` when ``GameBoyEnv`` takes that keyword, else one worker process per core
   (each with its share of the consoles, all timed over the same window, rates summed); then,
   per game, the ratio of the best GPU rate to it.
4. ``learner``: our ``DreamerV3Learner`` eager and with ``capture=True`` against TorchRL's
   ``DreamerV3Loss`` (eager, its only mode here) at equal sizes (presets ``tiny``, ``S``,
   ``M``, B16xT64, 64x64 images), seconds per update and CUDA launches per update, with the
   functions of ``benchmarks/learner.py``.
5. ``collector``: ``benchmarks/collector.py`` on the maze (``GameBoyEnv``, the ``tiny`` model,
   the captured learner), the ``reference``, ``threaded`` and ``cuda`` (two-stream) backends at
   equal gradient steps: env steps/s, updates, overlap (busy intervals timed by stream events).
   Two cases: the maze's training settings (N = 256, B8xT32, replay ratio 0.18: the learner
   dominates) and a balanced one (N = 1,024, B16xT64, replay ratio 0.002: acting and learning
   take about as long, where overlap can pay most).
6. ``tests``: the CUDA tests (marked ``gpu`` or ``requires_cuda``), passed / failed / skipped.
7. ``e2e``: the maze trained end to end with ``--backend cuda --capture`` and many envs,
   stopped when the last 100 episodes first reach 95 % success: the time and env steps it took.

Every part is timed (``wall_s``). A part (or a case of one) whose estimate does not fit what is
left of the budget is skipped with a line that says so, never silently; the ``env`` and ``cpu``
parts keep the minimums of the learner and the tests in reserve. Without CUDA the suite stops with a message and a
non-zero exit, unless ``--dry-run``: the CPU twin with tiny sizes (device ``cpu``, N = 8, the
``tiny`` learner at B2xT8, the CUDA tests only collected, the CUDA-only end-to-end run skipped
with a line), which CI runs to keep this script working.

On the GPU machine only the repository travels (no ``../shared``, no network, Python 3.12 and
torch 2.11, no Warp or TorchRL). ``--prepare`` (here) fills the git-ignored folders the device
calls carry: ``.gpu_roms/`` (the shared games, ``cpu_instrs`` for the CUDA tests and each
game's start state), ``.warp_aot/`` (a Warp kernel cache holding the CUDA modules compiled for
``sm_90`` through NVRTC, which needs no GPU; the suite points ``WARP_CACHE_PATH`` at it),
``.whl/`` (the wheels of TorchRL and its dependencies for cp312) and ``.gpu_warp/1..k`` (the
Warp wheel, 149 MB, too big for one call's 64 MiB, slimmed of its tests and examples,
xz-compressed and cut into parts carried by successive calls to the same warm machine). On the
GPU machine the suite installs whatever is missing from those into ``/tmp/gpu_suite_site`` and
restarts itself, or says exactly what is missing. The device commands are in
``docs/concepts/running_on_gpu.md``.

Result lines use the benchmarks' format (``bench``, ``case``, ``ours``, ``peer``, ``unit``,
``speedup``) plus ``part``; part lines carry ``part``, ``status`` (``ok``, ``skipped``,
``failed``), ``wall_s`` and a ``reason`` when not ok.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

_HERE = Path(__file__).resolve().parent
REPO = _HERE.parent
# benchmarks/ holds scripts named like packages (ray.py); the tree measured is this checkout,
# importable without an install (the GPU machine has none), or the checkout GPU_SUITE_TREE names
# (the ``ab`` part's baseline, measured by a child run of this script)
TREE = Path(os.environ.get("GPU_SUITE_TREE") or REPO).resolve()
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() not in (_HERE, TREE)]
sys.path.insert(0, str(TREE))

DEFAULT_ROMS = REPO / ".gpu_roms"
DEFAULT_AOT = REPO / ".warp_aot"
DEFAULT_WHEELS = REPO / ".whl"
DEFAULT_WARP_PARTS = REPO / ".gpu_warp"
DEFAULT_BASELINE = REPO / ".gpu_baseline"
DEFAULT_SITE = Path(tempfile.gettempdir()) / "gpu_suite_site"
CPU_CASE_SETUP_S = 3.0
"""Seconds a ``cpu`` case spends besides its timing (building the 16-worker env from a start
state: 0.7 s a game on the H200 machine, 2026-11-30)."""
PARTS = ("system", "env", "ab", "cpu", "learner", "collector", "tests", "e2e")
AOT_ARCH = 90

# import name -> distribution, for what the suite needs on the GPU machine
NEEDED = {"torch": "torch", "numpy": "numpy", "warp": "warp-lang", "tensordict": "tensordict",
          "torchrl": "torchrl", "yaml": "pyyaml", "pytest": "pytest", "tqdm": "tqdm"}
# distributions carried as wheels (.whl/): TorchRL and what it and tensordict need beyond the
# GPU image (torch, numpy, cloudpickle, packaging and zipp are there)
WHEELS = ("torchrl", "tensordict", "pyvers", "hoptorch", "orjson", "importlib_metadata")
WHEEL_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                   "manylinux2014_x86_64", "manylinux1_x86_64")
CPU_INSTRS = "blargg/cpu_instrs/cpu_instrs.gb"  # what the CUDA tests read besides the games


def _load_sibling(name: str) -> Any:
    """A module of benchmarks/ by path (the folder is not a package)."""
    key = f"_bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, _HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


# ============================================================================== output
class Output:
    """Prints JSON lines (and keeps them for the table); ``path`` gets a copy of each."""

    def __init__(self, path: str | None) -> None:
        self.lines: list[dict[str, Any]] = []
        self.file: IO[str] | None = open(path, "a") if path else None  # noqa: SIM115

    def emit(self, **line: Any) -> dict[str, Any]:
        line = {"bench": "gpu_suite", **line}
        self.lines.append(line)
        text = json.dumps(line, default=str)
        print(text, flush=True)
        if self.file:
            self.file.write(text + "\n")
            self.file.flush()
        return line

    def result(self, part: str, case: str, ours: float | None, peer: float | None, unit: str,
               higher_is_better: bool = True, **extra: Any) -> dict[str, Any]:
        """A result line; ``speedup`` is ours/peer (or peer/ours where lower is better)."""
        speedup = None
        if ours is not None and peer is not None and ours > 0 and peer > 0:
            speedup = round(ours / peer if higher_is_better else peer / ours, 3)
        return self.emit(part=part, case=case, ours=_round(ours), peer=_round(peer), unit=unit,
                         speedup=speedup, **extra)

    def table(self) -> str:
        """The markdown table of every result and every part that did not run in full."""
        rows = ["| part | case | ours | peer | unit | speedup |", "|---|---|---|---|---|---|"]
        for ln in self.lines:
            if "case" in ln and "unit" in ln:
                rows.append(f"| {ln['part']} | {ln['case']} | {_fmt(ln['ours'])} | "
                            f"{_fmt(ln['peer'])} | {ln['unit']} | {_fmt(ln['speedup'])} |")
            elif ln.get("status") in ("skipped", "failed", "error"):
                rows.append(f"| {ln.get('part', '')} | {ln.get('case', '')} **{ln['status']}** "
                            f"| | | {ln.get('reason', '')} | |")
            elif ln.get("status") == "ok" and "wall_s" in ln:
                rows.append(f"| {ln['part']} | part ok | | | {ln['wall_s']} s | |")
        return "\n".join(rows)


def _round(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(x, 4) if isinstance(x, float) and abs(x) < 100 else round(x, 1)


def _fmt(x: Any) -> str:
    return "" if x is None else (f"{x:,}" if isinstance(x, (int, float)) else str(x))


class Budget:
    """Seconds left of ``total`` counted from ``t0`` (epoch seconds, so that a restart after
    installing packages keeps counting from the first start)."""

    def __init__(self, total: float, t0: float) -> None:
        self.total, self.t0 = float(total), t0

    def left(self) -> float:
        return self.total - (time.time() - self.t0)

    def fits(self, cost: float, reserve: float = 0.0) -> bool:
        return self.left() - reserve >= cost


# ============================================================================== plan
@dataclass
class Plan:
    """Sizes and minimum costs (seconds) of the parts, for a GPU run or the dry run."""

    device: str
    sizes: list[int]
    env_seconds: float
    cpu_per_core: int
    cpu_seconds: float
    presets: list[str]
    batch: int
    seq: int
    repeats: int
    e2e_envs: int
    min_cost: dict[str, float] = field(default_factory=dict)

    @classmethod
    def make(cls, args: argparse.Namespace) -> Plan:
        if args.dry_run:
            plan = cls("cpu", [8], 0.3, 4, 0.3, ["tiny"], 2, 8, 1, 16,
                       {"env": 5, "ab": 5, "cpu": 5, "learner": 10, "collector": 20,
                        "tests": 10, "e2e": 0})
        else:
            plan = cls("cuda", [1024, 4096, 16384, 65536], 2.0, 64, 3.0, ["tiny", "S", "M"],
                       16, 64, 5, 256,
                       {"env": 20, "ab": 30, "cpu": 40, "learner": 40, "collector": 60,
                        "tests": 90, "e2e": 150})
        if args.sizes:
            plan.sizes = sorted(args.sizes)
        if args.presets:
            plan.presets = args.presets.split(",")
        if args.e2e_envs:
            plan.e2e_envs = args.e2e_envs
        return plan


@dataclass
class Context:
    args: argparse.Namespace
    plan: Plan
    budget: Budget
    out: Output
    roms: Path | None
    gpu_rates: dict[str, float] = field(default_factory=dict)  # best env steps/s per game
    env_rates: dict[str, float] = field(default_factory=dict)  # env steps/s per env case
    states: dict[str, Any] = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.plan.device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()


# ============================================================================== packages
def missing_modules() -> list[str]:
    """Import names of :data:`NEEDED` that this interpreter cannot find."""
    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


class _Chain:
    """A read-only file object over several files one after the other, hashing as it reads."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths, self.k, self.f = list(paths), 0, None
        self.sha = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        out = bytearray()
        while n < 0 or len(out) < n:
            if self.f is None:
                if self.k >= len(self.paths):
                    break
                self.f = open(self.paths[self.k], "rb")  # noqa: SIM115
                self.k += 1
            chunk = self.f.read(-1 if n < 0 else n - len(out))
            if not chunk:
                self.f.close()
                self.f = None
                continue
            out += chunk
        self.sha.update(out)
        return bytes(out)


def assemble_warp(parts_dir: Path, site: Path) -> str | None:
    """Unpack the Warp parts staged under ``parts_dir`` (``--prepare warp``) into ``site``.

    Returns ``None`` on success, else why not (which parts this machine lacks)."""
    manifests = sorted(parts_dir.glob("*/manifest.json"))
    if not manifests:
        return (f"no Warp parts under {parts_dir}: run `python benchmarks/gpu_suite.py --prepare"
                "` where pip works and carry .gpu_warp/1, .gpu_warp/2, ... (see "
                "docs/concepts/running_on_gpu.md)")
    man = json.loads(manifests[0].read_text())
    paths, absent = [], []
    for part in man["parts"]:
        p = parts_dir / part["dir"] / part["name"]
        if not p.is_file() or p.stat().st_size != part["bytes"]:
            absent.append(f"{part['dir']}/{part['name']}")
        paths.append(p)
    if absent:
        return (f"Warp parts missing here: {', '.join(absent)} (each is carried by its own call "
                "to the same warm machine before the suite's call: docs/concepts/running_on_gpu.md)")
    chain = _Chain(paths)
    with tarfile.open(fileobj=chain, mode="r|xz") as tar:
        tar.extractall(site, filter="data")
    while chain.read(1 << 20):  # hash whatever the tar reader left unread
        pass
    if chain.sha.hexdigest() != man["sha256"]:
        shutil.rmtree(site / "warp", ignore_errors=True)
        return "the Warp parts do not add up to the prepared archive (sha256 differs)"
    return None


def install_missing(args: argparse.Namespace, missing: list[str], out: Output) -> bool:
    """Install what is missing from the carried wheels and Warp parts into ``args.site``.
    Returns whether anything was installed (the caller then restarts the interpreter)."""
    site = Path(args.site)
    site.mkdir(parents=True, exist_ok=True)
    done = False
    wheels = sorted(Path(args.wheels).glob("*.whl")) if Path(args.wheels).is_dir() else []
    if wheels and set(missing) - {"warp"}:
        t = time.time()
        res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                              "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade",
                              "--target", str(site), *map(str, wheels)],
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            out.emit(part="setup", case="wheels", status="error",
                     reason=f"pip install of {args.wheels} failed: {res.stderr[-800:]}")
        else:
            out.emit(part="setup", case="wheels", status="ok", wall_s=round(time.time() - t, 1),
                     installed=[w.name for w in wheels])
            done = True
    if "warp" in missing:
        t = time.time()
        why = assemble_warp(Path(args.warp_parts), site)
        if why:
            out.emit(part="setup", case="warp", status="error", reason=why)
        else:
            out.emit(part="setup", case="warp", status="ok", wall_s=round(time.time() - t, 1))
            done = True
    return done


# ============================================================================== parts
def part_system(ctx: Context) -> None:
    """What ran where: versions, the GPU, the commit and the ahead-of-time modules."""
    import numpy
    import torch
    import warp as wp

    info: dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__,
        "torch_cuda": torch.version.cuda, "warp": wp.config.version, "numpy": numpy.__version__,
        "cpu_cores": os.cpu_count(), "platform": platform.platform(),
        "commit": _commit(), "dry_run": ctx.args.dry_run, "budget_s": ctx.budget.total,
        "roms": str(ctx.roms) if ctx.roms else None,
        "warp_cache": os.environ.get("WARP_CACHE_PATH") or "(Warp's default)",
    }
    for name in ("torchrl", "tensordict"):
        info[name] = getattr(importlib.import_module(name), "__version__", None)
    if ctx.cuda:
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, capability=f"{props.major}.{props.minor}",
                    gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    multiprocessors=props.multi_processor_count, driver=_driver())
        info["aot"] = aot_status("cuda:0", AOT_ARCH)
    ctx.out.emit(part="system", case="machine", status="ok", **info)


def _commit() -> str | None:
    try:
        res = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
        if res.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                    "--untracked-files=no"], capture_output=True, text=True,
                                   timeout=10, check=False).stdout.strip()
            return res.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    manifest = _aot_dir() / "prepared.json"  # the checkout on the GPU machine has no .git
    if manifest.is_file():
        return json.loads(manifest.read_text()).get("commit")
    return None


def _driver() -> str | None:
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        return res.stdout.strip().splitlines()[0] if res.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def _aot_dir() -> Path:
    return Path(os.environ.get("WARP_CACHE_PATH") or DEFAULT_AOT)


def cuda_modules() -> dict[str, Any]:
    """The Python modules holding the emulator's CUDA kernels, by a short name."""
    from torchrl_dreamer.emulator import codegen, render, reset

    return {"gb_kernel": codegen.load_kernel_module("cuda:0"), "reset": reset, "render": render}


def aot_status(device: str | None, arch: int) -> dict[str, Any]:
    """Per CUDA module: whether Warp's kernel cache holds its binary for this tree (``hit``),
    which format Warp will load on ``device`` and the file it looks for."""
    import warp as wp

    dev = wp.get_device(device) if device else None
    fmt = dev.get_cuda_output_format() if dev is not None else "cubin"
    status: dict[str, Any] = {"format": fmt}
    for name, pymod in cuda_modules().items():
        module = wp.get_module(pymod.__name__)
        out_arch = dev.get_cuda_compile_arch() if dev is not None else arch
        fname = module._get_compile_output_name(dev, out_arch, use_ptx=fmt == "ptx")
        path = Path(wp.config.kernel_cache_dir) / module.get_module_identifier() / fname
        status[name] = {"hit": path.is_file(), "file": path.name}
    return status


# ------------------------------------------------------------------------------ env
def _start_state(ctx: Context, game: str) -> Any:
    """The prepared start state of ``game`` (``<roms>/states/<game>.state``), else one made now
    on the CPU."""
    if game in ctx.states:
        return ctx.states[game]
    games = _load_sibling("game_envs")
    state = None
    path = ctx.roms / "states" / f"{game}.state" if ctx.roms else None
    if path is not None and path.is_file():
        from torchrl_dreamer.emulator.state import EmulatorState, SavestateError

        try:
            state = EmulatorState.load(path)
        except SavestateError:
            state = None  # prepared by another emulator version: make it again
    if state is None:
        state = games.start_state(game, ctx.roms)
    ctx.states[game] = state
    return state


def env_rate(ctx: Context, game: str, n: int, device: str, seconds: float,
             **env_kwargs: Any) -> dict[str, float]:
    """Env steps/s of ``game`` with ``n`` consoles on ``device``: one warm-up step, then steps
    until ``seconds`` have passed (at least one), each ended by a device sync."""
    import torch

    games = _load_sibling("game_envs")
    t = time.perf_counter()
    env = games.make_env(game, ctx.roms, n, device, state=_start_state(ctx, game), **env_kwargs)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = torch.randint(0, env.action_set.n, (8, n), generator=gen).to(device)
    ctx.sync()
    setup = time.perf_counter() - t
    t = time.perf_counter()
    env.fast_step(actions[0])
    ctx.sync()
    first = time.perf_counter() - t
    steps, t0 = 0, time.perf_counter()
    while True:
        env.fast_step(actions[(steps + 1) % 8])
        ctx.sync()
        steps += 1
        dt = time.perf_counter() - t0
        if dt >= seconds or (steps >= 1 and dt + dt / steps > 4 * seconds):
            break
    del env
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"rate": steps * n / dt, "step_s": dt / steps, "first_step_s": first,
            "setup_s": setup, "steps": steps}


def _reserve(ctx: Context, *parts: str) -> float:
    """Seconds kept for the minimum of each of ``parts`` that this run will still do."""
    return sum(ctx.plan.min_cost[p] for p in parts if p in ctx.args.parts)


def _env_case_fits(ctx: Context, case: str, est: float, reserve: float) -> bool:
    """Whether an env case estimated at ``est`` seconds fits before ``reserve``; if not, a
    line that says it was skipped and why."""
    if ctx.budget.fits(est, reserve):
        return True
    ctx.out.emit(part="env", case=case, status="skipped",
                 reason=f"estimated {est:.0f} s, {_left_phrase(ctx, reserve)}")
    return False


def _left_phrase(ctx: Context, reserve: float) -> str:
    """What is left of the budget for a case, naming the reserve only when there is one."""
    left = ctx.budget.left() - reserve
    if reserve > 0:
        return f"{left:.0f} s left before the {reserve:.0f} s kept for the later parts"
    return f"{left:.0f} s left of the budget"


def part_env(ctx: Context) -> None:
    games_mod = _load_sibling("game_envs")
    games, missing = games_mod.available_games(ctx.roms, ctx.args.games)
    for game, why in missing.items():
        ctx.out.emit(part="env", case=game, status="skipped", reason=why)
    reserve = _reserve(ctx, "learner", "collector", "tests") + _cpu_part_cost(ctx, len(games))
    k = len(ctx.args.baseline_tree) if _ab_planned(ctx) else 0
    if k:  # each baseline measures the same cases after this part: k / (k + 1) is theirs
        reserve += max(0.0, ctx.budget.left() - reserve) * k / (k + 1)
    step_s: dict[str, tuple[int, float]] = {}  # last measured (N, seconds a step) per game
    unit = "env steps/s (24 frames, packed2 rendered, task reward, random actions)"
    # every case with a launch per frame (GameBoyEnv(launch_frames=1), the default on CUDA since
    # 2026-11-28: the consoles of a warp meet at every frame end); the one-launch-a-step peer
    # follows at each game's largest size, unless --per-frame-only
    suffix = "_launch_per_frame"
    for n in ctx.plan.sizes:
        for game in games:
            if game in step_s:
                n0, s0 = step_s[game]
                est = 2 * s0 * n / n0 + ctx.plan.env_seconds + 2  # linear in N: an upper bound
            else:
                est = ctx.plan.min_cost["env"]
            case = f"{game}_N{n}_{ctx.plan.device}{suffix}"
            if not _env_case_fits(ctx, case, est, reserve):
                continue
            try:
                r = env_rate(ctx, game, n, ctx.plan.device, ctx.plan.env_seconds, launch_frames=1)
            except Exception as err:  # noqa: BLE001 - one case failing must not end the part
                ctx.out.emit(part="env", case=case, status="failed", reason=_why(err))
                continue
            step_s[game] = (n, r["step_s"])
            ctx.env_rates[case] = r["rate"]
            ctx.gpu_rates[game] = max(ctx.gpu_rates.get(game, 0.0), r["rate"])
            ctx.out.result("env", case, r["rate"], None, unit, frames_per_s=round(r["rate"] * 24),
                           step_s=round(r["step_s"], 4), first_step_s=round(r["first_step_s"], 3),
                           setup_s=round(r["setup_s"], 2), timed_steps=r["steps"])
    # the peer: each game at its largest size measured with one launch a step (the CPU
    # default), a launch per frame's rate above against it
    for game, (n, s0) in ({} if ctx.args.per_frame_only else step_s).items():
        case = f"{game}_N{n}_{ctx.plan.device}{suffix}_vs_one_launch"
        # one launch a step has run up to 5x slower than a launch per frame
        if not _env_case_fits(ctx, case, 6 * s0 + ctx.plan.env_seconds + 2, reserve):
            continue
        try:
            r = env_rate(ctx, game, n, ctx.plan.device, ctx.plan.env_seconds, launch_frames=None)
        except Exception as err:  # noqa: BLE001 - one case failing must not end the part
            ctx.out.emit(part="env", case=case, status="failed", reason=_why(err))
            continue
        ctx.gpu_rates[game] = max(ctx.gpu_rates.get(game, 0.0), r["rate"])
        ctx.out.result("env", case, n / s0, r["rate"], unit + "; peer: one launch a step",
                       step_s=round(r["step_s"], 4), timed_steps=r["steps"])


def _cpu_part_cost(ctx: Context, games: int) -> float:
    """Seconds the ``cpu`` part needs for ``games`` games (0 when it does not run): the earlier
    parts keep it, as it answers whether the GPU beats the machine's cores."""
    if "cpu" not in ctx.args.parts:
        return 0.0
    return max(ctx.plan.min_cost["cpu"], games * (ctx.plan.cpu_seconds + CPU_CASE_SETUP_S))


# ------------------------------------------------------------------------------ ab
def _ab_planned(ctx: Context) -> bool:
    return "ab" in ctx.args.parts and bool(ctx.args.baseline_tree)


def baseline_label(tree: Path) -> str:
    """What ``tree`` is: the revision ``--prepare baseline`` wrote into its ``REV`` file."""
    rev = tree / "REV"
    return rev.read_text().strip() if rev.is_file() else str(tree)


def baseline_dir(index: int) -> Path:
    """Where ``--prepare baseline`` puts its ``index``-th revision (0: ``.gpu_baseline/``,
    then ``.gpu_baseline_2/``, ``.gpu_baseline_3/``, ...)."""
    return DEFAULT_BASELINE if index == 0 else REPO / f"{DEFAULT_BASELINE.name}_{index + 1}"


def baseline_dirs() -> list[Path]:
    """The baseline trees ``--prepare baseline`` built in this checkout, in its order."""
    found = [d for d in REPO.glob(f"{DEFAULT_BASELINE.name}*") if d.is_dir()
             and (d == DEFAULT_BASELINE or d.name[len(DEFAULT_BASELINE.name) + 1:].isdigit())]
    return sorted(found, key=lambda d: 1 if d == DEFAULT_BASELINE
                  else int(d.name.rsplit("_", 1)[1]))


NO_BASELINE = (f"no --baseline-tree: --prepare baseline --baseline-rev REV builds "
               f"{DEFAULT_BASELINE.name}/ to carry")


def part_ab(ctx: Context) -> str | None:
    """The env part's cases again on other checkouts' emulators (``--baseline-tree``, built by
    ``--prepare baseline --baseline-rev REV [REV ...]``), each in a child run of this script on
    the same machine, and each case's rate against each: the one comparison of two kernels that
    rates measured on different leases cannot give (the same code has moved by a third between
    leases). With several baselines, one lease measures several candidates."""
    if not ctx.args.baseline_tree:
        return NO_BASELINE
    trees = [Path(t).resolve() for t in ctx.args.baseline_tree]
    for base in trees:
        if not (base / "torchrl_dreamer").is_dir():
            raise ValueError(f"--baseline-tree {base} holds no torchrl_dreamer/ package; build "
                             "it with --prepare baseline --baseline-rev REV")
    if "env" not in ctx.args.parts or not ctx.env_rates:
        return "the env part measured no case to compare (run it with --parts env,ab)"
    measured, short = 0, []
    for k, base in enumerate(trees):
        limit = (ctx.budget.left() - _reserve(ctx, "cpu", "learner", "collector", "tests")
                 - 5) / (len(trees) - k)
        label = baseline_label(base)
        if limit < ctx.plan.min_cost["ab"]:
            short.append(f"{limit:.0f} s left for baseline {label}, it needs about "
                         f"{ctx.plan.min_cost['ab']} s")
            ctx.out.emit(part="ab", case=f"baseline_{label}", status="skipped", reason=short[-1])
            continue
        try:
            theirs = _baseline_rates(ctx, base, label, limit)
        except (RuntimeError, subprocess.TimeoutExpired) as err:  # the next baseline may run
            ctx.out.emit(part="ab", case=f"baseline_{label}", status="failed", reason=_why(err))
            continue
        measured += 1
        unit = "env steps/s, this tree against the baseline's on the same machine"
        suffix = "_vs_baseline" if len(trees) == 1 else f"_vs_baseline_{label}"
        for case, rate in ctx.env_rates.items():
            if case in theirs:
                ctx.out.result("ab", f"{case}{suffix}", rate, theirs[case], unit, baseline=label)
    if not measured and len(short) == len(trees):
        return "; ".join(short)  # the budget left none of them room: a skip, not a failure
    if not measured:
        raise RuntimeError(f"no baseline of {len(trees)} measured anything (lines above)")
    return None


def _baseline_rates(ctx: Context, base: Path, label: str, limit: float) -> dict[str, float]:
    """The env part's rates of the emulator in ``base``: a child run of this script with
    ``GPU_SUITE_TREE`` pointing at it, within ``limit`` seconds."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--parts", "system,env", "--no-install",
           "--budget", f"{limit:.0f}"]
    if ctx.args.dry_run:
        cmd.append("--dry-run")
    if ctx.args.games:
        cmd += ["--games", *ctx.args.games]
    if ctx.args.sizes:
        cmd += ["--sizes", *map(str, ctx.args.sizes)]
    if ctx.args.per_frame_only:
        cmd.append("--per-frame-only")
    if ctx.roms:
        cmd += ["--roms", str(ctx.roms)]
    if ctx.args.aot:
        cmd += ["--aot", ctx.args.aot]
    env = {k: v for k, v in os.environ.items() if k != "GPU_SUITE_T0"}  # its own budget clock
    env["GPU_SUITE_TREE"] = str(base)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=limit + 30, check=False)
    theirs: dict[str, float] = {}
    for text in res.stdout.splitlines():
        if not text.startswith("{"):
            continue
        line = json.loads(text)
        if line.get("part") == "system" and "aot" in line:
            ctx.out.emit(part="ab", case="baseline_aot", status="ok", baseline=label,
                         aot=line["aot"])
        if line.get("part") == "env" and line.get("ours") is not None:
            theirs[line["case"]] = float(line["ours"])
        elif line.get("part") == "env" and line.get("status") in ("skipped", "failed") \
                and "case" in line:
            ctx.out.emit(part="ab", case=f"{line['case']}_baseline", status=line["status"],
                         reason=line.get("reason"), baseline=label)
    if res.returncode not in (0, 1) or not theirs:
        raise RuntimeError(f"the baseline run ({label}) measured nothing (exit "
                           f"{res.returncode}): {(res.stderr or res.stdout)[-1500:]}")
    return theirs


# ------------------------------------------------------------------------------ cpu
def _has_workers_keyword() -> bool:
    import inspect

    from torchrl_dreamer.envs import GameBoyEnv

    return "workers" in inspect.signature(GameBoyEnv.__init__).parameters


def _cpu_kernel_ready() -> None:
    """Compile (or load from the cache) the CPU kernel once, before any worker needs it: one
    frame of the maze on one console, so that exactly the launched variant is built."""
    import warnings

    from torchrl_dreamer.emulator import GameBoy
    from torchrl_dreamer.roms import rom_path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # our maze has no Nintendo logo, on purpose
        GameBoy(rom_path("maze"), num_envs=1, check_header=False).run_frames(1)


class _CpuWorker:
    """A process running our CPU envs for the all-cores measurement (JSON over stdin/stdout)."""

    def __init__(self, roms: Path | None) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--cpu-worker"]
        if roms:
            cmd += ["--roms", str(roms)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)

    def send(self, **cmd: Any) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def recv(self) -> Any:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("a CPU worker process died")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _cpu_worker_main(roms: Path | None) -> int:
    """``--cpu-worker``: build an env on command, then time it when told (all workers at once)."""
    import torch

    torch.set_num_threads(1)
    games = _load_sibling("game_envs")
    env = None
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "build":
            state = cmd.get("state")
            env = games.make_env(cmd["game"], roms, cmd["n"], "cpu", state=state)
            env.reset()
            gen = torch.Generator().manual_seed(cmd.get("seed", 0))
            actions = torch.randint(0, env.action_set.n, (8, cmd["n"]), generator=gen)
            env.fast_step(actions[0])
            ans: Any = "ready"
        elif cmd["op"] == "time":
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < cmd["seconds"] or steps < 1:
                env.fast_step(actions[steps % 8])
                steps += 1
            ans = steps * env.num_envs / (time.perf_counter() - t0)
        else:
            raise ValueError(cmd)
        print(json.dumps(ans), flush=True)
    return 0


def part_cpu(ctx: Context) -> None:
    games_mod = _load_sibling("game_envs")
    games, _missing = games_mod.available_games(ctx.roms, ctx.args.games)  # env said why not
    cores = os.cpu_count() or 1
    reserve = _reserve(ctx, "learner", "collector", "tests")
    t = time.time()
    _cpu_kernel_ready()
    ctx.out.emit(part="cpu", case="cpu_kernel", status="ok", wall_s=round(time.time() - t, 1),
                 note="compile or cache load of the CPU kernel")
    if _has_workers_keyword():
        mode, procs = f"GameBoyEnv(workers={cores})", 0
    elif ctx.args.dry_run or cores == 1:
        mode, procs = "one core (dry run)" if ctx.args.dry_run else "one core", 0
    else:
        mode, procs = f"{cores} processes", cores
    n = ctx.plan.cpu_per_core * max(1, cores if procs or "workers" in mode else 1)
    unit = f"env steps/s on the CPU kernel, {mode}"
    workers: list[_CpuWorker] = []
    try:
        if procs:
            workers = [_CpuWorker(ctx.roms) for _ in range(procs)]
        for game in games:
            est = ctx.plan.cpu_seconds + CPU_CASE_SETUP_S
            case = f"{game}_N{n}_cpu_all_cores"
            if not ctx.budget.fits(est, reserve):
                ctx.out.emit(part="cpu", case=case, status="skipped",
                             reason=f"estimated {est:.0f} s, {_left_phrase(ctx, reserve)}")
                continue
            try:
                if procs:
                    state_path = _state_file(ctx, game)
                    for w in workers:
                        w.send(op="build", game=game, n=n // procs, state=state_path)
                    for w in workers:
                        w.recv()
                    for w in workers:
                        w.send(op="time", seconds=ctx.plan.cpu_seconds)
                    rate = float(sum(w.recv() for w in workers))
                else:
                    kw = {"workers": cores} if "workers" in mode else {}
                    rate = env_rate(ctx, game, n, "cpu", ctx.plan.cpu_seconds, **kw)["rate"]
            except Exception as err:  # noqa: BLE001
                ctx.out.emit(part="cpu", case=case, status="failed", reason=_why(err))
                continue
            ctx.out.result("cpu", case, rate, None, unit, mode=mode)
            gpu = ctx.gpu_rates.get(game)
            ctx.out.result("cpu", f"{game}_{ctx.plan.device}_vs_cpu_all_cores", gpu, rate,
                           f"env steps/s, best of the env part vs {mode}",
                           note=None if gpu else "no env-part figure for this game")
    finally:
        for w in workers:
            w.close()


def _state_file(ctx: Context, game: str) -> str | None:
    """A start-state file the worker processes can load (prepared, else written now)."""
    if ctx.roms and (ctx.roms / "states" / f"{game}.state").is_file():
        return str(ctx.roms / "states" / f"{game}.state")
    path = Path(tempfile.gettempdir()) / f"gpu_suite_{os.getpid()}_{game}.state"
    _start_state(ctx, game).save(path)
    return str(path)


# ------------------------------------------------------------------------------ learner
def part_learner(ctx: Context) -> None:
    import warnings

    import torch

    lm = _load_sibling("learner")
    dev = torch.device(ctx.plan.device)
    B, T = ctx.plan.batch, ctx.plan.seq
    reserve = 0.0
    per_preset = {"tiny": 15.0, "S": 20.0, "M": 30.0}
    for preset in ctx.plan.presets:
        est = per_preset.get(preset, 40.0) * (0.3 if ctx.args.dry_run else 1.0)
        case = f"{preset}_B{B}xT{T}_{dev.type}"
        if not ctx.budget.fits(est, reserve):
            ctx.out.emit(part="learner", case=case, status="skipped",
                         reason=f"estimated {est:.0f} s, {ctx.budget.left():.0f} s left")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # capture's CPU fallback warns once
                torch.manual_seed(0)
                eager, eager_batch = lm._ours(preset, dev)
                torch.manual_seed(0)
                captured, cap_batch = lm._ours(preset, dev, capture=True)
                torch.manual_seed(0)
                peer, peer_batch = lm._peer(preset, dev, 3)
                cases = [(eager, eager_batch(T, B)), (captured, cap_batch(T, B)),
                         (peer, peer_batch(T, B))]
                t_eager, t_cap, t_peer = lm._time_interleaved(cases, ctx.plan.repeats, dev)
                clock = "wall after a device sync" if ctx.cuda else "process CPU"
                unit = f"s/update ({clock}, median of {ctx.plan.repeats})"
                ctx.out.result("learner", f"{case}_eager_vs_torchrl", t_eager, t_peer, unit,
                               higher_is_better=False)
                ctx.out.result("learner", f"{case}_capture_vs_torchrl", t_cap, t_peer, unit,
                               higher_is_better=False)
                ctx.out.result("learner", f"{case}_capture_vs_eager", t_cap, t_eager, unit,
                               higher_is_better=False)
                launch_unit = lm._CUDA_LAUNCH_UNIT if ctx.cuda else lm._LAUNCH_UNIT
                counts = [lm.count_launches(u, b, str(dev)) for u, b in cases]
                ctx.out.result("learner", f"{case}_eager_launches_vs_torchrl", counts[0],
                               counts[2], launch_unit, higher_is_better=False)
                ctx.out.result("learner", f"{case}_capture_launches_vs_torchrl", counts[1],
                               counts[2], launch_unit, higher_is_better=False)
        except Exception as err:  # noqa: BLE001
            ctx.out.emit(part="learner", case=case, status="failed", reason=_why(err))
        finally:
            cases = eager = captured = peer = None
            if ctx.cuda:
                torch.cuda.empty_cache()


# ------------------------------------------------------------------------------ tests
def cuda_test_files() -> list[str]:
    """Test files that hold CUDA tests (marked ``gpu`` or decorated ``requires_cuda``)."""
    files = []
    for p in sorted((REPO / "test").rglob("test_*.py")):
        text = p.read_text(errors="replace")
        if "requires_cuda" in text or "mark.gpu" in text:
            files.append(str(p.relative_to(REPO)))
    return files


def needs_cuda(item: Any) -> bool:
    """Whether a collected test is a CUDA test: marked ``gpu``, or skipped without CUDA
    (``conftest.requires_cuda``: ``skipif(..., reason="CUDA not available")``)."""
    for mark in item.iter_markers():
        if mark.name == "gpu":
            return True
        if mark.name == "skipif" and "CUDA not available" in str(mark.kwargs.get("reason", "")):
            return True
    return False


class _CudaTestsPlugin:
    """Keeps only the CUDA tests and writes running counts to ``path`` after each test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts = {"selected": 0, "passed": 0, "failed": 0, "skipped": 0, "errors": 0}
        self.failures: list[str] = []
        self.pending: list[str] = []  # selected, not yet reported: "not reached" if cut short

    def _write(self) -> None:
        self.path.write_text(json.dumps({**self.counts, "failures": self.failures[:20],
                                         "not_reached": self.pending}))

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        keep = [it for it in items if needs_cuda(it)]
        drop = [it for it in items if not needs_cuda(it)]
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
        self.counts["selected"] = len(keep)
        self.pending = [it.nodeid for it in keep]
        self._write()

    def pytest_runtest_logreport(self, report: Any) -> None:
        c = self.counts
        if report.when == "teardown" and report.nodeid in self.pending:
            self.pending.remove(report.nodeid)
        if report.when in ("setup", "call") and report.skipped:
            c["skipped"] += 1
        elif report.when == "call" and report.passed:
            c["passed"] += 1
        elif report.when == "call" and report.failed:
            c["failed"] += 1
            self.failures.append(report.nodeid)
        elif report.failed:  # setup or teardown error
            c["errors"] += 1
            self.failures.append(f"{report.nodeid} ({report.when})")
        self._write()


def _cuda_tests_main(status: Path, files: list[str], collect_only: bool) -> int:
    """``--cuda-tests``: pytest over ``files``, CUDA tests only, counts in ``status``."""
    import pytest

    plugin = _CudaTestsPlugin(status)
    argv = ["-q", "-p", "no:cacheprovider", "-rfE", *files]
    if collect_only:
        argv.insert(0, "--collect-only")
    return int(pytest.main(argv, plugins=[plugin]))


# ------------------------------------------------------------------------------ collector
# (case name, collector.py arguments) on a GPU; the dry run's one case is the CPU twin
COLLECTOR_CASES = (
    ("maze_settings", ["--num-envs", "256", "--batch-size", "8", "--seq-len", "32",
                       "--replay-ratio", "0.18", "--steps-per-rollout", "16",
                       "--commit-stride", "8", "--max-tick", "1024", "--learning-starts", "512",
                       "--capacity", "2048", "--frames", "4096"]),
    ("balanced", ["--num-envs", "1024", "--batch-size", "16", "--seq-len", "64",
                  "--replay-ratio", "0.002", "--steps-per-rollout", "16", "--commit-stride", "8",
                  "--max-tick", "1024", "--learning-starts", "2048", "--capacity", "1024",
                  "--frames", "131072"]),
)
COLLECTOR_DRY = (("twin", ["--num-envs", "4", "--quick"]),)


def part_collector(ctx: Context) -> str | None:
    """The backends of ``AsyncDreamerCollector`` against each other on the maze, each case in a
    subprocess of ``benchmarks/collector.py`` whose JSON lines come back as this part's."""
    cases = COLLECTOR_DRY if ctx.args.dry_run else COLLECTOR_CASES
    reserve = _reserve(ctx, "tests", "e2e")
    for k, (name, extra) in enumerate(cases):
        # each remaining case gets an equal share of what is left beyond the reserve
        limit = (ctx.budget.left() - reserve - 5) / (len(cases) - k)
        if limit < 20:
            ctx.out.emit(part="collector", case=name, status="skipped",
                         reason=f"{ctx.budget.left():.0f} s left, {reserve:.0f} s reserved")
            continue
        cmd = [sys.executable, str(_HERE / "collector.py"), "--env", "gameboy", "--device",
               ctx.plan.device, *(["--capture"] if ctx.cuda else []), *extra]
        try:
            res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=limit,
                                 check=False)
        except subprocess.TimeoutExpired as err:
            ctx.out.emit(part="collector", case=name, status="failed",
                         reason=f"did not finish within {limit:.0f} s: "
                                f"{str(err.stderr or '')[-800:]}")
            continue
        lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        if res.returncode != 0 or not lines:
            ctx.out.emit(part="collector", case=name, status="failed",
                         reason=f"exit {res.returncode}: {res.stderr[-1200:]}")
            continue
        for ln in lines:
            ctx.out.emit(part="collector", case=f"{name}: {ln['case']}", ours=ln["ours"],
                         peer=ln["peer"], unit=ln["unit"], speedup=ln["speedup"])
    return None


# ------------------------------------------------------------------------------ tests
def part_tests(ctx: Context) -> str | None:
    files = cuda_test_files()
    collect_only = not ctx.cuda
    # the tests may use what the end-to-end run would not get anyway, but leave it its minimum
    reserve = ctx.plan.min_cost["e2e"] if ("e2e" in ctx.args.parts and ctx.cuda) else 0.0
    limit = max(ctx.plan.min_cost["tests"], ctx.budget.left() - reserve - 5)
    limit = min(limit, ctx.budget.left() - 2)
    with tempfile.TemporaryDirectory() as tmp:
        status = Path(tmp) / "status.json"
        log = Path(tmp) / "pytest.log"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--cuda-tests", str(status),
               *(["--collect-only-tests"] if collect_only else []), "--", *files]
        env = dict(os.environ)
        if ctx.roms:
            env["TORCHRL_DREAMER_ROMS"] = str(ctx.roms)
        with open(log, "w") as fh:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
            try:
                rc: int | None = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
        counts = json.loads(status.read_text()) if status.is_file() else {}
        tail = log.read_text(errors="replace")[-1500:]
    if collect_only:
        ctx.out.result("tests", "cuda_tests_selected", counts.get("selected"), None,
                       "CUDA tests collected (no CUDA: not run)", files=len(files),
                       note="collect-only without CUDA")
        if not counts.get("selected"):
            raise RuntimeError(f"no CUDA test was collected: {tail}")
        return None
    ctx.out.result("tests", "cuda_tests_passed", counts.get("passed"), None, "tests passed",
                   selected=counts.get("selected"), failed=counts.get("failed"),
                   skipped=counts.get("skipped"), errors=counts.get("errors"),
                   failures=counts.get("failures"), pytest_exit=rc,
                   not_reached=counts.get("not_reached") if rc is None else None,
                   timed_out=rc is None, log_tail=tail if rc not in (0,) else None)
    return None


# ------------------------------------------------------------------------------ e2e
def part_e2e(ctx: Context) -> str | None:
    if not ctx.cuda:
        return "CUDA-only part (--backend cuda --capture): not run without CUDA"
    cap = ctx.budget.left() - 10
    if cap < ctx.plan.min_cost["e2e"]:
        return f"needs {ctx.plan.min_cost['e2e']:.0f} s, {ctx.budget.left():.0f} s left"
    window, target = 100, 0.95
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "torchrl_dreamer.train", "--task", "maze", "--device",
               "cuda", "--backend", "cuda", "--capture", "--num-envs", str(ctx.plan.e2e_envs),
               "--total-steps", "2000000", "--time-limit", str(int(cap)), "--log-dir", tmp,
               "--eval-episodes", "0", "--checkpoint-every", "0", "--no-checkpoint-replay",
               "--no-progress", "--logger", "csv", "--seed", "0"]
        success_csv = Path(tmp) / "logs" / "scalars" / "episode" / "success.csv"
        log = Path(tmp) / "train.log"
        t0 = time.time()
        found: tuple[float, int] | None = None
        values: list[float] = []
        with open(log, "w") as fh:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
            try:
                while proc.poll() is None and time.time() - t0 < cap + 5:
                    time.sleep(1.0)
                    rows = _read_csv(success_csv)
                    values = [v for _, v in rows]
                    for k in range(window, len(rows) + 1):
                        if sum(values[k - window:k]) / window >= target:
                            found = (time.time() - t0, int(rows[k - 1][0]))
                            break
                    if found:
                        break
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
        tail = log.read_text(errors="replace")[-1500:]
    best = max((sum(values[k - window:k]) / window for k in range(window, len(values) + 1)),
               default=None)
    extra = {"episodes": len(values), "best_success_last_100": _round(best),
             "num_envs": ctx.plan.e2e_envs, "time_cap_s": int(cap)}
    if found is None:
        ctx.out.result("e2e", "maze_to_95pct_s", None, None,
                       "s from launch to 95 % success over the last 100 episodes", **extra,
                       note=f"not reached within {cap:.0f} s", log_tail=tail)
        return None
    ctx.out.result("e2e", "maze_to_95pct_s", found[0], None,
                   "s from launch to 95 % success over the last 100 episodes",
                   env_steps=found[1], **extra)
    return None


def _read_csv(path: Path) -> list[tuple[float, float]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) == 2:
            try:
                rows.append((float(parts[0]), float(parts[1])))
            except ValueError:
                continue
    return rows


def _why(err: BaseException) -> str:
    tb = traceback.format_exception(type(err), err, err.__traceback__)
    return f"{type(err).__name__}: {err} | {''.join(tb[-3:])[-1200:]}"


PART_FUNCS = {"system": part_system, "env": part_env, "ab": part_ab, "cpu": part_cpu,
              "learner": part_learner,
              "collector": part_collector, "tests": part_tests, "e2e": part_e2e}


# ============================================================================== prepare
def _pip_download(names: list[str], dest: Path, binary_312: bool = True) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d",
           str(dest)]
    if binary_312:
        cmd += ["--python-version", "3.12", "--implementation", "cp"]
        for plat in WHEEL_PLATFORMS:
            cmd += ["--platform", plat]
    subprocess.run(cmd + names, check=True)


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def prepare_roms(src: Path, dest: Path) -> list[str]:
    """Copy the shared games and ``cpu_instrs`` from ``src`` into ``dest`` (same layout)."""
    games = _load_sibling("game_envs")
    copied = []
    for rel in (*games.SHARED_GAMES.values(), CPU_INSTRS):
        if (src / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
            copied.append(rel)
    return copied


def prepare_states(roms: Path) -> list[str]:
    """Each available game's start state, made on the CPU, as ``<roms>/states/<game>.state``."""
    games = _load_sibling("game_envs")
    names, _ = games.available_games(roms)
    (roms / "states").mkdir(parents=True, exist_ok=True)
    for g in names:
        games.start_state(g, roms).save(roms / "states" / f"{g}.state")
    return names


def prepare_aot(aot: Path, arch: int, tree: Path = REPO) -> dict[str, Any]:
    """Compile the CUDA modules of ``tree``'s emulator for ``sm_<arch>`` into the Warp kernel
    cache ``aot`` (in a subprocess pointed at it). For this checkout, write the manifest; for a
    baseline tree, add its modules to the manifest's ``baselines`` (keyed by the tree's folder
    name). Either way, drop the cache's module folders that neither this checkout nor a
    baseline folder still present names."""
    script = (
        "import importlib.util, json, sys, warp as wp\n"
        "wp.config.log_level = wp.LOG_WARNING\nwp.init()\n"
        f"spec = importlib.util.spec_from_file_location('gs', {str(Path(__file__).resolve())!r})\n"
        "gs = importlib.util.module_from_spec(spec); sys.modules['gs'] = gs\n"
        "spec.loader.exec_module(gs)\n"
        "out = {}\n"
        "for name, m in gs.cuda_modules().items():\n"
        f"    paths = wp.compile_aot_module(m, arch={arch}, use_ptx=False)\n"
        "    out[name] = {'module': wp.get_module(m.__name__).get_module_identifier(),\n"
        "                 'files': [str(p) for p in paths]}\n"
        "out['status'] = gs.aot_status(None, " + str(arch) + ")\n"
        "out['cache'] = wp.config.kernel_cache_dir\n"
        "print(json.dumps(out))\n")
    env = dict(os.environ, WARP_CACHE_PATH=str(aot.resolve()), GPU_SUITE_TREE=str(tree))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=REPO, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"AOT compile failed: {res.stderr[-3000:]}")
    info = json.loads(res.stdout.strip().splitlines()[-1])
    mods = {v["module"] for k, v in info.items() if isinstance(v, dict) and "module" in v}
    path = aot / "prepared.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    baselines = dict(old.get("baselines") or {})
    if "baseline" in old:  # a manifest of one baseline (before 2026-11-30)
        baselines.setdefault(DEFAULT_BASELINE.name, old["baseline"])
    if Path(tree).resolve() != REPO.resolve():
        entry = {"rev": baseline_label(Path(tree)), "modules": sorted(mods)}
        baselines[Path(tree).name] = entry
        ours = set(old.get("modules", []))
        manifest = {k: v for k, v in old.items() if k != "baseline"}
    else:
        entry = None
        ours = mods
        manifest = {"commit": _commit(), "date": time.strftime("%Y-%m-%d"), "arch": arch,
                    "warp": _version("warp-lang"), "modules": sorted(mods)}
    baselines = {k: v for k, v in baselines.items() if (REPO / k).is_dir()}
    keep = ours | {m for b in baselines.values() for m in b["modules"]}
    for d in Path(info["cache"]).glob("wp_*"):
        if d.is_dir() and d.name not in keep:
            shutil.rmtree(d, ignore_errors=True)  # an older tree's modules
    if baselines:
        manifest["baselines"] = baselines
    else:
        manifest.pop("baselines", None)
    path.write_text(json.dumps(manifest, indent=1))
    return entry if entry is not None else manifest


def prepare_wheels(dest: Path) -> list[str]:
    """The wheels of :data:`WHEELS` at the versions installed here, for CPython 3.12."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = [f"{d}=={_version(d)}" for d in WHEELS]
    have = {w.name.split("-")[0].lower().replace("_", "-") + "==" + w.name.split("-")[1]
            for w in dest.glob("*.whl")}
    todo = [w for w in wanted if w.lower().replace("_", "-") not in have]
    for pin in todo:
        try:
            _pip_download([pin], dest)
        except subprocess.CalledProcessError:
            # the version installed here has no CPython 3.12 wheel (orjson 3.8.3 on the
            # 2-core image): take the newest that has one; these are leaf dependencies
            _pip_download([pin.split("==")[0]], dest)
    return sorted(w.name for w in dest.glob("*.whl"))


def warp_archive(parts_dir: Path) -> tuple[Path, str]:
    """``parts_dir/warp.tar.xz``: the Warp wheel installed here (downloaded for cp312 into
    ``parts_dir/wheel``) without its tests and examples, xz-compressed (about 8 minutes on one
    core, then kept: it is not carried, only its parts are). Returns it and the wheel's name."""
    version = _version("warp-lang")
    wheel_dir = parts_dir / "wheel"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    wheels = sorted(wheel_dir.glob(f"warp_lang-{version}-*.whl"))
    if not wheels:
        _pip_download([f"warp-lang=={version}"], wheel_dir)
        wheels = sorted(wheel_dir.glob(f"warp_lang-{version}-*.whl"))
    wheel = wheels[0]
    archive, stamp = parts_dir / "warp.tar.xz", parts_dir / "warp.tar.xz.source"
    if archive.is_file() and stamp.is_file() and stamp.read_text() == wheel.name:
        return archive, wheel.name
    import zipfile

    tmp = archive.with_suffix(".partial")
    with zipfile.ZipFile(wheel) as zf, tarfile.open(tmp, "w:xz", preset=9) as tar:
        for info in zf.infolist():
            name = info.filename
            if info.is_dir() or name.startswith(("warp/tests/", "warp/examples/")):
                continue
            ti = tarfile.TarInfo(name)
            ti.size = info.file_size
            ti.mode = 0o755 if name.endswith(".so") else 0o644
            with zf.open(info) as fh:
                tar.addfile(ti, fh)
    tmp.replace(archive)
    stamp.write_text(wheel.name)
    return archive, wheel.name


def split_sizes(total: int, stage: int, last: int) -> list[int]:
    """Part sizes for ``total`` bytes: parts of ``stage`` bytes (each carried alone by a call
    of its own) until what remains fits ``last`` (carried by the suite's call with the other
    folders)."""
    if stage <= 0 or last <= 0:
        raise ValueError("no room left in a call for a Warp part")
    sizes = []
    while total > last:
        take = min(stage, total)
        sizes.append(take)
        total -= take
    if total:
        sizes.append(total)
    return sizes


def prepare_warp(parts_dir: Path, stage_mib: float, last_mib: float) -> dict[str, Any]:
    """Cut :func:`warp_archive` into ``parts_dir/1``, ``/2``, ...: each part but the last
    fills a call (``stage_mib``), the last fits beside the suite's other folders (``last_mib``);
    each part folder holds the manifest (sizes, the archive's sha256)."""
    archive, wheel = warp_archive(parts_dir)
    sizes = split_sizes(archive.stat().st_size, int(stage_mib * 2**20), int(last_mib * 2**20))
    for d in parts_dir.iterdir():
        if d.is_dir() and d.name.isdigit():
            shutil.rmtree(d)
    sha, parts = hashlib.sha256(), []
    with open(archive, "rb") as fh:
        for k, size in enumerate(sizes, start=1):
            chunk = fh.read(size)
            sha.update(chunk)
            (parts_dir / str(k)).mkdir()
            name = f"warp.tar.xz.{k:03d}"
            (parts_dir / str(k) / name).write_bytes(chunk)
            parts.append({"dir": str(k), "name": name, "bytes": len(chunk)})
    manifest = {"warp": _version("warp-lang"), "wheel": wheel, "sha256": sha.hexdigest(),
                "parts": parts}
    for part in parts:
        (parts_dir / part["dir"] / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def travelling_mib() -> float:
    """MiB of the working tree that every device call sends: tracked files and untracked ones
    git does not ignore."""
    res = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, check=True)
    names = [n for n in res.stdout.decode().split("\0") if n]
    return sum((REPO / n).stat().st_size for n in names if (REPO / n).is_file()) / 2**20


def _size_mib(paths: list[Path]) -> float:
    total = 0
    for p in paths:
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total / 2**20


def prepare_baseline(rev: str | None, dest: Path) -> Path:
    """Extract ``rev``'s ``torchrl_dreamer`` package into ``dest`` (replacing what was there),
    with a ``REV`` file naming it: the tree the ``ab`` part measures as the baseline."""
    if not rev:
        raise ValueError("--prepare baseline needs --baseline-rev REV (a git revision)")
    short = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", f"{rev}^{{commit}}"],
                           capture_output=True, text=True, check=False)
    if short.returncode != 0:
        raise ValueError(f"--baseline-rev {rev!r} is not a revision of this repository: "
                         f"{short.stderr.strip()}")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    _load_sibling("cuda_regs").extract_package(rev, dest)
    (dest / "REV").write_text(short.stdout.strip() + "\n")
    return dest


def prepare(args: argparse.Namespace) -> int:
    """``--prepare``: build the carried folders here (see the module docstring)."""
    steps = set(PREPARE_STEPS if args.prepare == "all" else args.prepare.split(","))
    unknown = steps - set(PREPARE_STEPS) - {"baseline"}
    if unknown:
        print(f"unknown --prepare steps {sorted(unknown)}; choose from "
              f"{', '.join(PREPARE_STEPS)}, baseline", file=sys.stderr)
        return 2
    if "baseline" in steps and not args.baseline_rev:
        print("--prepare baseline needs --baseline-rev REV", file=sys.stderr)
        return 2
    if "baseline" in steps and len(args.baseline_rev) > MAX_BASELINES:
        print(f"--baseline-rev names {len(args.baseline_rev)} revisions; a device call carries "
              f"at most {MAX_BASELINES} baselines beside the other folders (8 paths)",
              file=sys.stderr)
        return 2
    roms_dest = Path(args.roms or DEFAULT_ROMS)
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    if "roms" in steps:
        from torchrl_dreamer._roms import roms_dir

        src = Path(args.roms_from) if args.roms_from else roms_dir()
        copied = prepare_roms(src, roms_dest)
        print(f"roms: {len(copied)} files from {src} into {roms_dest}")
    if "states" in steps:
        print(f"states: {', '.join(prepare_states(roms_dest))} into {roms_dest / 'states'}")
    if "aot" in steps:
        t = time.time()
        man = prepare_aot(Path(args.aot or DEFAULT_AOT), args.arch)
        print(f"aot: sm_{args.arch} {man['modules']} at {man['commit']} in "
              f"{time.time() - t:.0f} s")
    if "baseline" in steps:
        for old in baseline_dirs():  # the new set replaces the old one
            shutil.rmtree(old, ignore_errors=True)
        for k, rev in enumerate(args.baseline_rev):
            t = time.time()
            tree = prepare_baseline(rev, baseline_dir(k))
            man = prepare_aot(Path(args.aot or DEFAULT_AOT), args.arch, tree)
            print(f"baseline: {man['rev']} into {tree}, sm_{args.arch} {man['modules']} in "
                  f"{time.time() - t:.0f} s")
    if "wheels" in steps:
        print(f"wheels: {', '.join(prepare_wheels(Path(args.wheels)))}")
    carried = [Path(args.wheels).resolve(), roms_dest.resolve(),
               Path(args.aot or DEFAULT_AOT).resolve()]
    carried += [d.resolve() for d in baseline_dirs()]
    tree = travelling_mib()
    if "warp" in steps:
        t = time.time()
        room = CALL_MIB - args.margin_mib - tree
        man = prepare_warp(Path(args.warp_parts), room, room - _size_mib(carried))
        print(f"warp: {man['wheel']} as {len(man['parts'])} parts "
              f"({sum(p['bytes'] for p in man['parts']) / 2**20:.1f} MiB) in {time.time() - t:.0f} s")
    parts_dir = Path(args.warp_parts)
    dirs = sorted((d for d in parts_dir.glob("*") if d.is_dir() and d.name.isdigit()),
                  key=lambda d: int(d.name)) if parts_dir.is_dir() else []
    rel = [str(d.relative_to(REPO)) for d in dirs]
    last = [*(rel[-1:]), *(str(p.relative_to(REPO)) for p in carried)]
    print("\nDevice calls, one after the other on the same warm machine (see "
          "docs/concepts/running_on_gpu.md):")
    for r in rel[:-1]:
        print(f"  run(carry=[{r!r}], command='ls -l {r}', timeout_s=120)   "
              f"# {tree + _size_mib([REPO / r]):.1f} MiB with the tree")
    bases = baseline_dirs()
    ab = (" --baseline-tree " + " ".join(d.name for d in bases)) if bases else ""
    print(f"  run(carry={last!r}, timeout_s=560,\n"
          f"      command='PYTHONUNBUFFERED=1 python3 benchmarks/gpu_suite.py --budget 480{ab} "
          "--json-out $OUT/gpu_suite.jsonl 2>&1 | tee $OUT/gpu_suite.log')   "
          f"# {tree + _size_mib([REPO / p for p in last]):.1f} MiB with the tree")
    return 0


PREPARE_STEPS = ("roms", "states", "aot", "wheels", "warp")
MAX_BASELINES = 4  # a call carries 8 paths: a Warp part, wheels, ROMs, the kernel cache, these
CALL_MIB = 64.0  # what one device call may carry, the working tree included


# ============================================================================== main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run")
    p.add_argument("--dry-run", action="store_true",
                   help="the CPU twin with tiny sizes (no CUDA needed): what CI runs")
    p.add_argument("--parts", default=",".join(PARTS),
                   help=f"comma list of parts to run, in this order: {', '.join(PARTS)}")
    p.add_argument("--roms", default=None,
                   help="folder with the shared games in the shared layout (default: .gpu_roms "
                        "if present, else none: ours only)")
    p.add_argument("--games", nargs="*", default=None, help="restrict the games")
    p.add_argument("--sizes", type=int, nargs="*", default=None, help="env sizes N")
    p.add_argument("--presets", default=None, help="learner presets, e.g. tiny,S,M")
    p.add_argument("--e2e-envs", type=int, default=None, help="envs of the end-to-end maze run")
    p.add_argument("--aot", default=None,
                   help="Warp kernel cache with the precompiled CUDA modules (default: .warp_aot "
                        "when present on a GPU run; the dry run keeps Warp's default cache)")
    p.add_argument("--json-out", default=None, help="also append the JSON lines to this file")
    p.add_argument("--per-frame-only", action="store_true",
                   help="the env part measures every case with a launch per frame (the CUDA "
                        "default) and skips the one-launch peer: half the env part's time")
    p.add_argument("--baseline-tree", nargs="+", default=None,
                   help="the ab part: checkouts whose emulators the env cases are measured on "
                        "again, each in turn on the same machine (--prepare baseline builds "
                        ".gpu_baseline/, .gpu_baseline_2/, ...)")
    p.add_argument("--baseline-rev", nargs="+", default=None,
                   help="--prepare baseline: git revisions (at most "
                        f"{MAX_BASELINES}) to extract into .gpu_baseline/, .gpu_baseline_2/, "
                        "... and compile ahead of time beside this tree's modules")
    p.add_argument("--wheels", default=str(DEFAULT_WHEELS), help="carried wheels folder")
    p.add_argument("--warp-parts", default=str(DEFAULT_WARP_PARTS), help="carried Warp parts")
    p.add_argument("--site", default=str(DEFAULT_SITE), help="where missing packages go")
    p.add_argument("--no-install", action="store_true", help="report missing packages only")
    p.add_argument("--prepare", nargs="?", const="all", default=None,
                   help=f"build the carried folders here: all or a comma list of "
                        f"{', '.join(PREPARE_STEPS)}, baseline (with --baseline-rev)")
    p.add_argument("--roms-from", default=None,
                   help="--prepare: the shared ROM folder (default: $TORCHRL_DREAMER_ROMS or "
                        "../shared/roms)")
    p.add_argument("--arch", type=int, default=AOT_ARCH, help="--prepare: CUDA architecture")
    p.add_argument("--margin-mib", type=float, default=2.0,
                   help="--prepare: MiB of each call's 64 left free (the tree may grow)")
    p.add_argument("--cpu-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cuda-tests", default=None, help=argparse.SUPPRESS)
    p.add_argument("--collect-only-tests", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("test_files", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.parts = [x for x in args.parts.split(",") if x]
    bad = [x for x in args.parts if x not in PARTS]
    if bad:
        p.error(f"unknown parts {bad}; choose from {', '.join(PARTS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.cpu_worker:
        return _cpu_worker_main(Path(args.roms) if args.roms else None)
    if args.cuda_tests:
        return _cuda_tests_main(Path(args.cuda_tests), args.test_files, args.collect_only_tests)
    if args.prepare is not None:
        return prepare(args)

    t0 = float(os.environ.get("GPU_SUITE_T0") or time.time())
    os.environ["GPU_SUITE_T0"] = str(t0)
    out = Output(args.json_out)
    budget = Budget(args.budget, t0)

    missing = missing_modules()
    if missing and not args.no_install and not os.environ.get("GPU_SUITE_INSTALLED"):
        if install_missing(args, missing, out):
            env = dict(os.environ, GPU_SUITE_INSTALLED="1")
            env["PYTHONPATH"] = os.pathsep.join(
                x for x in (str(Path(args.site)), str(REPO), env.get("PYTHONPATH")) if x)
            sys.stdout.flush()
            os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], env)
    missing = missing_modules()
    if missing:
        dists = ", ".join(NEEDED[m] for m in missing)
        out.emit(part="setup", status="error", missing=[NEEDED[m] for m in missing],
                 reason=f"missing packages: {dists}; carry their wheels in .whl/ and Warp's "
                        "parts in .gpu_warp/ (--prepare), see docs/concepts/running_on_gpu.md")
        print(f"gpu_suite: cannot run: {dists} not installed here", file=sys.stderr)
        return 3

    plan = Plan.make(args)
    runnable = [p for p in args.parts if p != "system" and plan.min_cost.get(p, 0) > 0]
    if runnable:
        cheapest = min(runnable, key=lambda p: plan.min_cost[p])
        if budget.left() < plan.min_cost[cheapest]:
            out.emit(part="setup", status="error",
                     reason=f"--budget {args.budget:g} s is too small for any part: the cheapest "
                            f"({cheapest}) needs about {plan.min_cost[cheapest]:g} s")
            print(f"gpu_suite: --budget {args.budget:g} s is too small for any part",
                  file=sys.stderr)
            return 2

    # the kernel cache is chosen before Warp is imported
    if args.aot:
        os.environ["WARP_CACHE_PATH"] = str(Path(args.aot).resolve())
    elif not args.dry_run and DEFAULT_AOT.is_dir():
        os.environ["WARP_CACHE_PATH"] = str(DEFAULT_AOT.resolve())
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        out.emit(part="setup", status="error",
                 reason="CUDA is not available here: run on a GPU machine, or --dry-run for the "
                        "CPU twin")
        print("gpu_suite: CUDA is not available; use --dry-run for the CPU twin", file=sys.stderr)
        return 2
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # no banner or module notes on stdout
    if not args.dry_run:
        wp.config.cuda_output = "cubin"  # what --prepare compiled (sm_90 cubins)
    torch.set_num_threads(1)
    roms = Path(args.roms) if args.roms else (DEFAULT_ROMS if DEFAULT_ROMS.is_dir() else None)
    ctx = Context(args, plan, budget, out, roms)
    failed = False
    for part in PARTS:
        if part not in args.parts:
            continue
        t = time.time()
        if part == "ab" and not args.baseline_tree:  # what it lacks first, whatever the budget
            out.emit(part=part, status="skipped", wall_s=0.0, reason=NO_BASELINE)
            continue
        if part != "system" and budget.left() < plan.min_cost.get(part, 0):
            out.emit(part=part, status="skipped", wall_s=0.0,
                     reason=f"needs about {plan.min_cost[part]:g} s, {budget.left():.0f} s left")
            continue
        try:
            skipped = PART_FUNCS[part](ctx)
            if skipped:
                out.emit(part=part, status="skipped", wall_s=round(time.time() - t, 1),
                         reason=skipped)
            else:
                out.emit(part=part, status="ok", wall_s=round(time.time() - t, 1))
        except Exception as err:  # noqa: BLE001 - report the part and go on with the next
            failed = True
            out.emit(part=part, status="failed", wall_s=round(time.time() - t, 1),
                     reason=_why(err))
    out.emit(part="suite", status="ok" if not failed else "failed",
             wall_s=round(time.time() - t0, 1), budget_s=args.budget)
    print("\n" + out.table(), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
