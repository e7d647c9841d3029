"""Registers, local memory and code size of the emulator's CUDA kernels, measured without a GPU.

The CUDA module of the emulator (``gb_run``, ``gb_peek``, ``gb_poke``) is compiled ahead of time
for one architecture (default ``sm_90``, the H100/H200) through Warp's NVRTC, which needs no GPU,
into a Warp kernel cache folder (default ``.warp_aot/``, the same folder
``benchmarks/gpu_suite.py --prepare`` builds for a lent GPU machine, so the two share the
compile). Two readings of the result:

- **the cubin** (always): the ELF's ``.nv.info`` attributes that the CUDA driver reads, per
  kernel: ``EIATTR_REGCOUNT`` (registers per thread), ``EIATTR_FRAME_SIZE`` (the stack frame in
  local memory, bytes per thread: local arrays *and* register spills), ``EIATTR_MIN_STACK_SIZE``
  (the frame plus what its calls need), the kernel's SASS size and the cubin's file size. Warp
  does not expose ptxas's report, and NVRTC only prints it when asked with ``-Xptxas -v``, an
  option Warp's compile call does not pass; the ELF holds the same numbers.
- **ptxas -v** (when a ``ptxas`` is found: ``--ptxas``, ``$PTXAS``, ``PATH`` or the
  ``nvidia-cuda-nvcc`` wheel, ``pip install nvidia-cuda-nvcc==13.4.*`` to match Warp 1.19's
  NVRTC 13.4): the PTX of the same module assembled again with ``-v``, which also splits the
  frame into spill stores and spill loads (bytes of ``STL``/``LDL`` a thread executes at most
  once each, as ptxas counts them). Its register count and frame must equal the cubin's (the
  run checks it), which shows that the PTX route measures the kernel that runs.

Prints one JSON line per figure in the benchmarks' format (``bench``, ``case``, ``ours``,
``peer``, ``unit``, ``speedup``). ``--baseline REV`` compiles the kernels of another git
revision (``git archive``) the same way and reports them as the peer; without it ``peer`` is
null and ``note`` says so (the figures recorded last are in
``docs/concepts/running_on_gpu.md``). For counts, ``speedup`` is ``peer / ours`` (above 1:
fewer registers or bytes than the peer). With a baseline and ``ptxas``, one more line per
out-of-line function of ``gb_run`` whose spills changed (``gb_run_sm90_fn:<name>_...``, largest
change first), which says where a change of the kernel's spills came from.

Usage: ``python benchmarks/cuda_regs.py [--arch 90] [--cache-dir .warp_aot] [--ptxas PATH]
[--baseline REV] [--quick]`` (``--quick``: the cubin only, as ``--no-ptxas``). A cold compile
takes 1-5 minutes on 2 cores; a cached one is read at once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
REPO = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

# EIATTR codes of the .nv.info sections (the attribute list ptxas and cuobjdump use)
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_SHT_SYMTAB = 2
_STT_FUNC = 2
_STB_GLOBAL = 1

KERNELS = ("gb_run", "gb_peek", "gb_poke")


# ------------------------------------------------------------------------------ the cubin
def _sections(data: bytes) -> list[dict[str, Any]]:
    """The ELF64 section headers of ``data`` with their names."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file (a cubin)")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for k in range(shnum):
        name, typ, flags, _addr, off, size, link, info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + k * shentsize)
        secs.append({"name_off": name, "type": typ, "flags": flags, "offset": off,
                     "size": size, "link": link, "info": info, "entsize": entsize})
    strtab = secs[shstrndx]
    for s in secs:
        s["name"] = _cstr(data, strtab["offset"] + s["name_off"])
    return secs


def _cstr(data: bytes, at: int) -> str:
    return data[at:data.index(b"\0", at)].decode()


def nv_info_attributes(data: bytes, section: dict[str, Any]) -> list[tuple[int, bytes]]:
    """``(attribute, value bytes)`` of every entry of one ``.nv.info*`` section.

    Each entry is ``format (u8), attribute (u8)`` then, by format: nothing (NVAL), one byte and
    a pad (BVAL), a u16 (HVAL) or a u16 size and that many bytes (SVAL).
    """
    out = []
    p, end = section["offset"], section["offset"] + section["size"]
    while p + 2 <= end:
        fmt, attr = data[p], data[p + 1]
        if fmt == _EIFMT_SVAL:
            size = struct.unpack_from("<H", data, p + 2)[0]
            out.append((attr, data[p + 4:p + 4 + size]))
            p += 4 + size
        elif fmt in (_EIFMT_HVAL, _EIFMT_BVAL):
            out.append((attr, data[p + 2:p + 4]))
            p += 4
        elif fmt == _EIFMT_NVAL:
            out.append((attr, b""))
            p += 2
        else:
            raise ValueError(f"unknown .nv.info entry format {fmt} at offset {p}")
    return out


def cubin_kernel_info(path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """Per kernel entry of a cubin: ``registers``, ``frame_bytes``, ``min_stack_bytes`` (and
    ``max_stack_bytes`` when present) from the global ``.nv.info`` section, and ``sass_bytes``
    (the size of its ``.text.<kernel>`` section, the kernel and the functions it calls).

    Kernels are the global function symbols that have a register count.
    """
    data = Path(path).read_bytes()
    secs = _sections(data)
    symtab = next(s for s in secs if s["type"] == _SHT_SYMTAB)
    strtab = secs[symtab["link"]]
    syms = []
    for k in range(symtab["size"] // 24):
        st_name, st_info, _other, shndx, _value, size = struct.unpack_from(
            "<IBBHQQ", data, symtab["offset"] + 24 * k)
        syms.append((_cstr(data, strtab["offset"] + st_name), st_info, shndx, size))
    per_symbol: dict[int, dict[int, int]] = {}
    for sec in secs:
        if sec["name"] != ".nv.info":
            continue
        for attr, value in nv_info_attributes(data, sec):
            if len(value) == 8:  # (symbol index, value) pairs
                sym, val = struct.unpack("<II", value)
                per_symbol.setdefault(sym, {})[attr] = val
    kernels: dict[str, dict[str, int]] = {}
    for sym, attrs in per_symbol.items():
        name, info, shndx, _size = syms[sym]
        if EIATTR_REGCOUNT not in attrs or info >> 4 != _STB_GLOBAL or info & 0xF != _STT_FUNC:
            continue
        entry = {"registers": attrs[EIATTR_REGCOUNT],
                 "frame_bytes": attrs.get(EIATTR_FRAME_SIZE, 0),
                 "min_stack_bytes": attrs.get(EIATTR_MIN_STACK_SIZE, 0),
                 "sass_bytes": secs[shndx]["size"]}
        if EIATTR_MAX_STACK_SIZE in attrs:
            entry["max_stack_bytes"] = attrs[EIATTR_MAX_STACK_SIZE]
        kernels[name] = entry
    return kernels


# ------------------------------------------------------------------------------ ptxas -v
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)\s*\n\s*(\d+) bytes stack frame, (\d+) bytes "
                    r"spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")


_WP_FUNC = re.compile(r"_cu_[0-9a-f]{8}(\d+)")  # Warp's mangling: ..._cu_<hash8><len><name>


def wp_func_name(mangled: str) -> str:
    """The ``wp.func`` name inside a device function's mangled name (``idle_loop_0`` for
    ``_ZN88_INTERNAL_..._cu_f23cfb9511idle_loop_0EiP12Mem_...``); the mangled name itself when
    it is not Warp's."""
    m = _WP_FUNC.search(mangled)
    return mangled[m.end():m.end() + int(m.group(1))] if m else mangled


def parse_ptxas_verbose(log: str) -> dict[str, dict[str, Any]]:
    """Per entry function of a ``ptxas -v`` log: ``registers``, ``frame_bytes``,
    ``spill_store_bytes``, ``spill_load_bytes``; ``callee_spill_*`` summed over the device
    functions compiled with that entry (Warp's out-of-line ``wp.func``), and ``functions``:
    each of those by its ``wp.func`` name, ``(spill store bytes, spill load bytes)``."""
    out: dict[str, dict[str, Any]] = {}
    blocks = _ENTRY.split(log)
    for name, body in zip(blocks[1::2], blocks[2::2]):
        entry: dict[str, Any] = {"callee_spill_store_bytes": 0, "callee_spill_load_bytes": 0,
                                 "functions": {}}
        used = _USED.search(body)
        if used:
            entry["registers"] = int(used.group(1))
        for fn, frame, stores, loads in _PROPS.findall(body):
            if fn == name:
                entry.update(frame_bytes=int(frame), spill_store_bytes=int(stores),
                             spill_load_bytes=int(loads))
            else:
                entry["callee_spill_store_bytes"] += int(stores)
                entry["callee_spill_load_bytes"] += int(loads)
                entry["functions"][wp_func_name(fn)] = (int(stores), int(loads))
        out[name] = entry
    return out


def function_changes(ours: dict[str, Any], peer: dict[str, Any], kernel: str = "gb_run",
                     ) -> list[tuple[str, tuple[int, int] | None, tuple[int, int] | None]]:
    """The out-of-line functions of ``kernel`` whose spill bytes differ between two
    measurements, largest change of stored bytes first: ``(name, ours, peer)``, ``None`` where
    a side does not have the function (new, inlined or gone)."""
    a = ours["kernels"].get(kernel, {}).get("functions", {})
    b = peer["kernels"].get(kernel, {}).get("functions", {})
    rows = [(f, tuple(a[f]) if f in a else None, tuple(b[f]) if f in b else None)
            for f in sorted(set(a) | set(b))]
    rows = [r for r in rows if r[1] != r[2]]
    return sorted(rows, key=lambda r: -abs((r[1] or (0, 0))[0] - (r[2] or (0, 0))[0]))


def find_cuda_tool(name: str, explicit: str | None = None) -> str | None:
    """A CUDA command-line tool (``ptxas``, ``nvdisasm``): ``explicit``, ``$<NAME>``, ``PATH``,
    or an NVIDIA CUDA wheel's (``nvidia/cu*/bin/<name>``). ``None`` when there is none."""
    for cand in (explicit, os.environ.get(name.upper()), shutil.which(name)):
        if cand and Path(cand).is_file():
            return cand
    try:
        import nvidia  # the namespace package of NVIDIA's CUDA wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for p in sorted(Path(root).glob(f"cu*/bin/{name}")):
            if os.access(p, os.X_OK):
                return str(p)
    return None


def find_ptxas(explicit: str | None = None) -> str | None:
    """A ``ptxas`` (:func:`find_cuda_tool`; the ``nvidia-cuda-nvcc`` wheel holds one)."""
    return find_cuda_tool("ptxas", explicit)


def ptxas_report(ptx: Path, arch: int, ptxas: str) -> dict[str, dict[str, int]]:
    """Assemble ``ptx`` with ``ptxas -v -arch=sm_<arch>`` and parse its report."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "module.ptx"
        src.write_bytes(ptx.read_bytes().rstrip(b"\0"))  # Warp's PTX ends with a NUL
        res = subprocess.run([ptxas, "-v", f"-arch=sm_{arch}", str(src), "-o",
                              str(Path(tmp) / "module.cubin")],
                             capture_output=True, text=True, check=False)
    if res.returncode != 0:
        if "Unsupported .version" in res.stderr:
            raise RuntimeError(f"{ptxas} is older than the PTX that Warp's NVRTC writes "
                               f"({res.stderr.strip().splitlines()[0]}): pip install "
                               "nvidia-cuda-nvcc==13.4.* and pass its ptxas with --ptxas, or run "
                               "with --no-ptxas (the cubin's registers and frame only)")
        raise RuntimeError(f"ptxas failed ({res.returncode}): {res.stderr[-2000:]}")
    return parse_ptxas_verbose(res.stdout + res.stderr)


# ------------------------------------------------------------------------------ compiling
def set_cache_dir(cache_dir: str | os.PathLike) -> None:
    """Point Warp's kernel cache at ``cache_dir`` (before ``wp.init``; Warp adds its version)."""
    os.environ["WARP_CACHE_PATH"] = str(Path(cache_dir).resolve())


def compile_kernel_module(arch: int, ptx: bool) -> Path:
    """Compile the emulator's default CUDA kernel module for ``sm_<arch>`` (a cubin, or PTX
    with ``ptx=True``) into Warp's kernel cache and return the artifact's path (cached: a
    second call returns at once)."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # no banner or module notes on stdout
    wp.init()
    from torchrl_dreamer.emulator import codegen

    mod = codegen.load_kernel_module("cuda:0")
    (path,) = wp.compile_aot_module(mod, arch=arch, use_ptx=ptx)
    return Path(path)


def measure(arch: int, ptxas: str | None) -> dict[str, Any]:
    """Cubin figures and (with ``ptxas``) the ptxas report of the current tree's kernels."""
    cubin = compile_kernel_module(arch, ptx=False)
    out: dict[str, Any] = {"cubin": str(cubin), "cubin_bytes": cubin.stat().st_size,
                           "kernels": {}}
    elf = cubin_kernel_info(cubin)
    report = ptxas_report(compile_kernel_module(arch, ptx=True), arch, ptxas) if ptxas else {}
    for mangled, info in elf.items():
        short = next((k for k in KERNELS if mangled.startswith(k + "_")), mangled)
        entry = dict(info)
        if mangled in report:
            rep = report[mangled]
            if rep.get("registers") != info["registers"] or rep.get("frame_bytes") != info["frame_bytes"]:
                entry["ptxas_mismatch"] = rep  # the PTX route compiled something else
            entry.update({k: v for k, v in rep.items() if k not in ("registers", "frame_bytes")})
        out["kernels"][short] = entry
    return out


def extract_package(rev: str, dest: Path) -> Path:
    """``git archive rev torchrl_dreamer`` of this repository unpacked into ``dest`` (which
    must exist): a tree whose emulator another process can import. Returns ``dest``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "torchrl_dreamer"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _worker(tree: str, arch: int, ptxas: str | None) -> None:
    sys.path.insert(0, tree)
    print(json.dumps(measure(arch, ptxas)))


def _measure_tree(tree: Path, arch: int, ptxas: str | None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(tree), "--arch",
           str(arch)] + (["--ptxas", ptxas] if ptxas else ["--no-ptxas"])
    res = subprocess.run(cmd, capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONPATH": str(tree)})
    if res.returncode != 0:
        raise RuntimeError(f"measuring {tree} failed: {res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ output
_FIGURES = (
    ("registers", "registers/thread"),
    ("frame_bytes", "bytes of stack frame (local memory)/thread"),
    ("spill_store_bytes", "bytes of spill stores (ptxas -v)"),
    ("spill_load_bytes", "bytes of spill loads (ptxas -v)"),
    ("callee_spill_store_bytes", "bytes of spill stores in out-of-line functions (ptxas -v)"),
    ("sass_bytes", "bytes of SASS (.text)"),
)


def result_lines(ours: dict[str, Any], peer: dict[str, Any] | None, arch: int,
                 peer_name: str | None) -> list[dict[str, Any]]:
    """The benchmark's JSON lines: one per kernel and figure, plus the cubin's size."""
    lines = []
    note = None if peer is not None else (
        "no peer in this run (--baseline REV compiles another revision); the last recorded "
        "figures are in docs/concepts/running_on_gpu.md")
    suffix = f"_vs_{peer_name}" if peer_name else ""

    def add(case: str, mine: float | None, theirs: float | None, unit: str) -> None:
        line = {"bench": "cuda_regs", "case": case + suffix, "ours": mine, "peer": theirs,
                "unit": unit,
                "speedup": (round(theirs / mine, 3) if mine and theirs is not None else None)}
        if note:
            line["note"] = note
        lines.append(line)

    for kernel in KERNELS:
        mine = ours["kernels"].get(kernel)
        if mine is None:
            continue
        theirs = (peer or {}).get("kernels", {}).get(kernel, {})
        for key, unit in _FIGURES:
            if key in mine:
                add(f"{kernel}_sm{arch}_{key}", mine[key], theirs.get(key) if peer else None,
                    unit)
    add(f"module_sm{arch}_cubin_bytes", ours["cubin_bytes"],
        peer["cubin_bytes"] if peer else None, "bytes (cubin file)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="CUDA architecture (90: sm_90)")
    parser.add_argument("--cache-dir", default=str(REPO / ".warp_aot"),
                        help="Warp kernel cache holding the compiled modules")
    parser.add_argument("--ptxas", default=None, help="ptxas executable (default: searched)")
    parser.add_argument("--no-ptxas", action="store_true", help="read the cubin only")
    parser.add_argument("--quick", action="store_true", help="the same as --no-ptxas")
    parser.add_argument("--baseline", default=None, help="git revision to compare with")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.no_ptxas = args.no_ptxas or args.quick
    set_cache_dir(args.cache_dir)
    ptxas = None if args.no_ptxas else find_ptxas(args.ptxas)
    if args.worker:
        _worker(args.worker, args.arch, ptxas)
        return 0
    if ptxas is None and not args.no_ptxas:
        print("# no ptxas found (pip install nvidia-cuda-nvcc==13.4.*, or --ptxas PATH): "
              "spill stores/loads are not reported, the cubin's figures are", file=sys.stderr)
    ours = _measure_tree(REPO, args.arch, ptxas)
    peer = None
    if args.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            peer = _measure_tree(extract_package(args.baseline, Path(tmp)), args.arch, ptxas)
    for line in result_lines(ours, peer, args.arch, f"baseline:{args.baseline}" if peer else None):
        print(json.dumps(line), flush=True)
    if peer is not None:  # where the spills moved: gb_run's out-of-line functions that changed
        for fn, mine, theirs in function_changes(ours, peer):
            print(json.dumps({
                "bench": "cuda_regs", "case": f"gb_run_sm{args.arch}_fn:{fn}_spill_store_bytes"
                f"_vs_baseline:{args.baseline}", "ours": mine[0] if mine else None,
                "peer": theirs[0] if theirs else None,
                "unit": "bytes of spill stores in this out-of-line function (ptxas -v; null: "
                        "not an out-of-line function on that side)",
                "speedup": round(theirs[0] / mine[0], 3) if mine and theirs and mine[0] else None,
                "spill_load_bytes": [mine[1] if mine else None, theirs[1] if theirs else None]}),
                flush=True)
    for kernel, info in ours["kernels"].items():
        if "ptxas_mismatch" in info:
            print(f"# {kernel}: ptxas on the PTX gave {info['ptxas_mismatch']}, the cubin "
                  f"{info['registers']} registers / {info['frame_bytes']} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
