"""Where the emulator's CUDA kernel touches local memory, by source line, measured without a GPU.

``benchmarks/cuda_regs.py`` says *how much* ``gb_run`` spills (ptxas's bytes). This script says
*where*: it compiles the same CUDA module with line information (Warp's ``wp.config.lineinfo``
and its ``#line`` directives, which point at the Python sources; the optimiser's output does not
change, the script checks ptxas's figures against the plain build's), assembles the PTX with
``ptxas -lineinfo``, disassembles the cubin with ``nvdisasm -gi`` (SASS with each instruction's
inlining chain), and counts the local-memory instructions of each kernel, ``STL`` (stores) and
``LDL`` (loads): register spills and the reloads of values kept live across out-of-line calls,
plus any local arrays. Each is counted once where it sits in the code (a static count, not how
often it runs) and credited to

- its **line**: the innermost Python line of its chain (Warp's headers skipped), with the
  ``wp.func`` that holds it, e.g. ``bus.py:164 tick`` (the ``sync`` call in ``tick``, whose
  callers keep their live registers in local memory around it);
- its **kernel line**: the outermost line, in the generated kernel source (one per opcode
  family of the dispatch) or in an out-of-line function's body.

Why this helps: the sixth GPU run (2026-11-30) measured one out-of-line call on the STAT read's
path costing up to 2x env steps/s through the spills around it, while the kernel's total spill
bytes moved by a quarter. Hot paths (the opcode fetch, ``tick``, the memory reads and writes)
matter; cold ones (the Color's HDMA, the MBC3 clock) do not. The line view tells them apart.

Prints one JSON line per kernel total and per top line in the benchmarks' format (``peer`` is
null: there is no peer for a location; ``--baseline REV`` is ``cuda_regs.py``'s job) and a
markdown table. Needs ``ptxas`` and ``nvdisasm`` (``pip install nvidia-cuda-nvcc==13.4.*
nvidia-cuda-nvdisasm``, or ``--ptxas`` / ``--nvdisasm``); NVRTC needs no GPU. The line build
has its own Warp cache (``--cache-dir``, default ``.warp_lineinfo/``), a cold compile takes
3-5 minutes of one core plus 3-5 for ptxas.

Usage: ``python benchmarks/cuda_spills.py [--top 30] [--kernel gb_run] [--arch 90] [--quick]``
(``--quick``, as ``python -m torchrl_dreamer.train bench`` runs it: 10 lines a view, and a
skip line instead of an error when a tool is missing).
"""

from __future__ import annotations

import argparse
import ast
import collections
import functools
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
REPO = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

_LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
_SECTION = re.compile(r"^\.text\.(\S+):")
_LOCAL = re.compile(r"\b(STL|LDL)(?:\.[\w.]+)?\s")


@functools.cache
def _cuda_regs():
    """``benchmarks/cuda_regs.py`` as a module (its compiler and tool finders), loaded once."""
    spec = importlib.util.spec_from_file_location("_cuda_regs", _HERE / "cuda_regs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------ reading SASS
def local_memory_sites(sass: Iterable[str]) -> list[dict[str, Any]]:
    """Each ``STL`` / ``LDL`` of an ``nvdisasm -gi`` listing: ``{"kernel", "op", "chain"}``,
    ``chain`` the ``(file, line)`` frames of the instruction's inlining chain, innermost first
    (the ``//## File`` lines printed above it; ``nvdisasm`` repeats them when they change)."""
    out: list[dict[str, Any]] = []
    kernel, chain, fresh = None, [], True
    for text in sass:
        sec = _SECTION.match(text)
        if sec:
            kernel, chain, fresh = sec.group(1), [], True
            continue
        loc = _LINE.search(text)
        if loc:
            if fresh:
                chain, fresh = [], False
            chain.append((loc.group(1), int(loc.group(2))))
            continue
        if "/*" in text:  # an instruction: the next //## lines start a new chain
            fresh = True
        op = _LOCAL.search(text)
        if op and kernel is not None:
            out.append({"kernel": kernel, "op": op.group(1), "chain": list(chain)})
    return out


def read_listing(path: str | Path) -> list[dict[str, Any]]:
    """:func:`local_memory_sites` of an ``nvdisasm -gi`` listing file."""
    with open(path, errors="replace") as fh:
        return local_memory_sites(fh)


def _is_header(path: str) -> bool:
    return not path.endswith(".py")  # Warp's native headers (builtin.h, array.h, ...)


@functools.cache
def _defs(path: str) -> tuple[tuple[int, int, str], ...]:
    """``(first line, last line, name)`` of every function defined in a Python file."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError):
        return ()
    return tuple((n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
                 if isinstance(n, ast.FunctionDef))


def function_at(path: str, line: int) -> str:
    """The innermost function of ``path`` that holds ``line`` ("" when none or unreadable)."""
    best = ""
    span = None
    for first, last, name in _defs(path):
        if first <= line <= last and (span is None or last - first < span):
            best, span = name, last - first
    return best


def _label(frame: tuple[str, int] | None) -> str:
    if frame is None:
        return "(no line)"
    path, line = frame
    _PATHS.setdefault(Path(path).name, path)
    name = function_at(path, line)
    return f"{Path(path).name}:{line}" + (f" {name}" if name else "")


def source_text(label: str, width: int = 70) -> str:
    """The source line a :func:`tally` location names (stripped, cut at ``width``)."""
    m = re.match(r"(\S+):(\d+)", label)
    path = _PATHS.get(m.group(1)) if m else None
    try:
        text = Path(path).read_text().splitlines()[int(m.group(2)) - 1].strip() if path else ""
    except (OSError, IndexError):
        text = ""
    return text if len(text) <= width else text[:width - 3] + "..."


_PATHS: dict[str, str] = {}  # file name -> the path a listing named it by


def tally(sites: list[dict[str, Any]], kernel: str, view: str = "line",
          ) -> list[tuple[str, int, int]]:
    """``(location, STL count, LDL count)`` of ``kernel``'s sites (a kernel name's prefix),
    most instructions first. ``view="line"``: the innermost Python frame; ``"kernel_line"``:
    the outermost."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for s in sites:
        if not s["kernel"].startswith(kernel):
            continue
        py = [f for f in s["chain"] if not _is_header(f[0])]
        frame = (py[0] if view == "line" else py[-1]) if py else None
        counts[_label(frame)][s["op"]] += 1
    rows = [(k, c["STL"], c["LDL"]) for k, c in counts.items()]
    return sorted(rows, key=lambda r: (-(r[1] + r[2]), r[0]))


# ------------------------------------------------------------------------------ building
def find_nvdisasm(explicit: str | None = None) -> str | None:
    """An ``nvdisasm`` (``cuda_regs.find_cuda_tool``; the ``nvidia-cuda-nvdisasm`` wheel holds
    one)."""
    return _cuda_regs().find_cuda_tool("nvdisasm", explicit)


def build_listing(arch: int, ptxas: str, nvdisasm: str, workdir: Path) -> tuple[Path, dict]:
    """Compile the module with line information (PTX through NVRTC into the Warp cache that
    ``WARP_CACHE_PATH`` names), assemble it with ``ptxas -v -lineinfo`` and disassemble it;
    returns the listing's path and ptxas's report (per entry, as ``cuda_regs.py`` parses it)."""
    import warp as wp

    regs = _cuda_regs()
    wp.config.lineinfo = True
    wp.config.line_directives = True
    ptx = regs.compile_kernel_module(arch, ptx=True)
    src = workdir / "module.ptx"
    src.write_bytes(ptx.read_bytes().rstrip(b"\0"))
    cubin = workdir / "module.cubin"
    res = subprocess.run([ptxas, "-v", "-lineinfo", f"-arch=sm_{arch}", str(src), "-o",
                          str(cubin)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"ptxas failed ({res.returncode}): {res.stderr[-2000:]}")
    report = regs.parse_ptxas_verbose(res.stdout + res.stderr)
    listing = workdir / "module.sass"
    with open(listing, "w") as fh:
        res = subprocess.run([nvdisasm, "-gi", "-c", str(cubin)], stdout=fh,
                             stderr=subprocess.PIPE, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"nvdisasm failed ({res.returncode}): {res.stderr[-2000:]}")
    return listing, report


def result_lines(sites: list[dict[str, Any]], kernel: str, arch: int, top: int,
                 ) -> list[dict[str, Any]]:
    """The JSON lines: the kernel's totals, then the ``top`` lines of each view."""
    def line(case: str, value: int, unit: str, **extra: Any) -> dict[str, Any]:
        return {"bench": "cuda_spills", "case": case, "ours": value, "peer": None,
                "unit": unit, "speedup": None, **extra}

    mine = [s for s in sites if s["kernel"].startswith(kernel)]
    out = [line(f"{kernel}_sm{arch}_{op}_instructions", sum(s["op"] == op for s in mine),
                f"{op} instructions in the code (static)") for op in ("STL", "LDL")]
    for view in ("line", "kernel_line"):
        for where, stl, ldl in tally(sites, kernel, view)[:top]:
            out.append(line(f"{kernel}_sm{arch}_{view}:{where}", stl + ldl,
                            "STL + LDL instructions credited here (static)", stl=stl, ldl=ldl,
                            source=source_text(where)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="CUDA architecture (90: sm_90)")
    parser.add_argument("--kernel", default="gb_run", help="kernel name prefix")
    parser.add_argument("--top", type=int, default=30, help="lines shown per view")
    parser.add_argument("--cache-dir", default=str(REPO / ".warp_lineinfo"),
                        help="Warp kernel cache of the line-information build")
    parser.add_argument("--ptxas", default=None, help="ptxas executable (default: searched)")
    parser.add_argument("--nvdisasm", default=None, help="nvdisasm executable (default: searched)")
    parser.add_argument("--quick", action="store_true",
                        help="10 lines per view; without ptxas or nvdisasm, a skip line (exit 0)")
    parser.add_argument("--listing", default=None,
                        help="read this nvdisasm -gi listing instead of building one")
    args = parser.parse_args(argv)
    if args.quick:
        args.top = min(args.top, 10)
    report: dict[str, Any] = {}
    if args.listing:
        sites = read_listing(args.listing)
    else:
        regs = _cuda_regs()
        ptxas, nvdisasm = regs.find_ptxas(args.ptxas), find_nvdisasm(args.nvdisasm)
        missing = [n for n, p in (("ptxas", ptxas), ("nvdisasm", nvdisasm)) if p is None]
        if missing:
            why = (f"no {' or '.join(missing)} found: pip install nvidia-cuda-nvcc==13.4.* "
                   "nvidia-cuda-nvdisasm, or pass --ptxas / --nvdisasm")
            print(f"cuda_spills: {why}", file=sys.stderr)
            if not args.quick:
                return 2
            print(json.dumps({"bench": "cuda_spills", "case": "skipped", "ours": None,
                              "peer": None, "unit": None, "speedup": None, "note": why}))
            return 0
        regs.set_cache_dir(args.cache_dir)
        with tempfile.TemporaryDirectory() as tmp:
            listing, report = build_listing(args.arch, ptxas, nvdisasm, Path(tmp))
            sites = read_listing(listing)
    lines = result_lines(sites, args.kernel, args.arch, args.top)
    entry = next((v for k, v in report.items() if k.startswith(args.kernel)), None)
    if entry:  # the same kernel as the plain build: cuda_regs.py's figures
        lines[0]["ptxas"] = {k: entry.get(k) for k in
                             ("registers", "frame_bytes", "spill_store_bytes", "spill_load_bytes")}
    for line in lines:
        print(json.dumps(line), flush=True)
    print(f"\n| where ({args.kernel}, sm_{args.arch}) | STL | LDL | source |\n|---|---|---|---|")
    prefix = len(f"{args.kernel}_sm{args.arch}_")  # the cases' common start (result_lines)
    for line in lines[2:]:
        src = line["source"].replace("|", "\\|")
        print(f"| {line['case'][prefix:]} | {line['stl']} | {line['ldl']} | `{src}` |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
