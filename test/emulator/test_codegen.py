"""The generated kernel: pinned by a committed golden copy, variants as compile-time flags, and
the CUDA module compiles ahead of time (through NVRTC, no GPU needed)."""

from __future__ import annotations

import ast
import time

import pytest

from torchrl_dreamer.emulator import codegen


def test_generated_kernel_matches_golden_copy():
    """A generator change must show up as a change of test/golden/gb_kernel.py (reviewable)."""
    assert codegen.GOLDEN_PATH.is_file()
    assert codegen.GOLDEN_PATH.read_text() == codegen.generate_source(), (
        "the generated kernel changed: review it and run "
        "`python -m torchrl_dreamer.emulator.codegen --write`")
    assert codegen.main(["--check"]) == 0


def test_check_cli_reports_stale_file(tmp_path, capsys):
    stale = tmp_path / "k.py"
    stale.write_text("old")
    assert codegen.main(["--check", str(stale)]) == 1
    assert "STALE" in capsys.readouterr().out
    assert codegen.main(["--write", str(stale)]) == 0
    assert codegen.main(["--check", str(stale)]) == 0


def test_cpu_compiler_flags_reach_warp_and_the_cache_key(tmp_path, monkeypatch):
    """The CPU build gets CPU_COMPILER_FLAGS as Warp's module option (not Warp's default, whose
    inlining thresholds made the kernel slower); TORCHRL_DREAMER_CPU_FLAGS overrides them and
    is part of the cache key, so two flag sets never share a compiled module."""
    src = codegen.generate_source()
    assert f'"cpu_compiler_flags": "{codegen.CPU_COMPILER_FLAGS}"' in src
    assert "inline-threshold" not in codegen.CPU_COMPILER_FLAGS
    assert codegen.kernel_hash() != codegen.kernel_hash(cpu_flags="-march=native -O1")
    monkeypatch.setenv("TORCHRL_DREAMER_CACHE", str(tmp_path))
    monkeypatch.setattr(codegen, "_LOADED", {})
    mod = codegen.load_kernel_module("cpu")  # imported, not compiled (that waits for a launch)
    assert mod.gb_run.module.options["cpu_compiler_flags"] == codegen.CPU_COMPILER_FLAGS
    monkeypatch.setenv("TORCHRL_DREAMER_CPU_FLAGS", "-march=native -mllvm=-inline-threshold=300")
    other = codegen.load_kernel_module("cpu")
    assert other is not mod and other.__name__ != mod.__name__
    assert other.gb_run.module.options["cpu_compiler_flags"].endswith("-inline-threshold=300")


@pytest.mark.parametrize("flag", ["step", "trace", "idle_skip"])
def test_variants_differ_only_in_their_compile_time_flag(flag):
    """Variants are ``wp.static`` flags of one source, not text edits of it."""
    base = codegen.generate_source(idle_skip=False)
    kw = {flag: True}
    var = codegen.generate_source(**kw)
    diff = [(a, b) for a, b in zip(base.splitlines(), var.splitlines(), strict=True) if a != b]
    assert [(a.split("#")[0].strip(), b.split("#")[0].strip()) for a, b in diff] == [
        (f"{flag.upper()} = False", f"{flag.upper()} = True")], diff
    assert f"if wp.static({flag.upper()}):" in var


def test_step_and_trace_disable_idle_skip():
    src = codegen.generate_source(step=True, idle_skip=True)
    assert "IDLE_SKIP = False" in src and "STEP = True" in src


def test_no_dead_bus_helpers_or_text_markers():
    src = codegen.generate_source()
    tree = ast.parse(src)
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "gb_run")
    body = ast.unparse(kernel)
    assert "# TRACE" not in src
    # every bus call has the clock locals bound (no generator shorthand left)
    assert "rd(i, m" in body and "wr(i, m" in body and "tick(i, m)" not in body
    assert "rd_op(i, m" in body
    for call in ("tick(i, m", "tick_idu(i, m", "rd(i, m", "rd_op(i, m", "rd_pc(i, m", "rd_idu(i, m", "wr(i, m"):
        for part in body.split(call)[1:]:
            assert part.split(")\n")[0].count("clk, nxt, dirty") == 1, (call, part[:80])


@pytest.mark.slow
def test_cuda_module_compiles_ahead_of_time(tmp_path):
    """Compile the CUDA kernel for sm_90 through NVRTC (no GPU needed): a CUDA-only
    code-generation error fails here. Takes about two minutes on 2 cores."""
    import warp as wp

    wp.init()
    mod = codegen.load_kernel_module("cuda:0")
    t = time.perf_counter()
    paths = wp.compile_aot_module(mod, arch=90, module_dir=tmp_path)
    elapsed = time.perf_counter() - t
    assert paths and all(p.is_file() and p.stat().st_size > 100_000 for p in paths), paths
    print(f"CUDA AOT compile: {elapsed:.0f} s, {[p.stat().st_size for p in paths]} bytes")


def test_fixed_body_is_real_python_and_only_the_dispatch_is_generated():
    """The template (imports, variant flags, gb_peek / gb_poke, gb_run's fixed body) parses as
    Python and holds no opcode block; the generated module is its text with the dispatch put in."""
    template = codegen.TEMPLATE_PATH.read_text()
    tree = ast.parse(template)
    kernels = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"gb_run", "gb_peek", "gb_poke"} <= kernels
    assert "if op == 0x" not in template
    src = codegen.generate_source()
    assert src.count("if op == 0x") > 64  # quarters 0 and 3 opcode by opcode
    fixed = template.split(codegen._TEMPLATE_LINE, 1)[1].replace(codegen._DISPATCH_LINE, "")
    kept = [line for line in fixed.splitlines() if line not in ("# key:", "")]
    lines = iter(src.splitlines())
    assert all(any(line == out for out in lines) for line in kept), "template line lost or moved"


def test_broken_template_is_refused_with_the_line_to_restore(tmp_path, monkeypatch):
    template = codegen.TEMPLATE_PATH.read_text()
    broken = tmp_path / "kernel_template.py"
    broken.write_text(template.replace(codegen._DISPATCH_LINE, ""))
    monkeypatch.setattr(codegen, "TEMPLATE_PATH", broken)
    with pytest.raises(RuntimeError, match="OPCODE DISPATCH.*exactly once"):
        codegen.generate_source()
    broken.write_text(template.replace("\nCOUNT = False", "\nCOUNTS = False"))
    with pytest.raises(RuntimeError, match=r"lacks the module-level variant flag\(s\) \['COUNT'\]"):
        codegen.generate_source()
    flags_line = f'\n                       "cpu_compiler_flags": "{codegen.CPU_COMPILER_FLAGS}"'
    assert flags_line in template
    broken.write_text(template.replace(flags_line, ""))
    with pytest.raises(RuntimeError, match='must set "cpu_compiler_flags"'):
        codegen.generate_source()


def test_a_process_keeps_its_kernel_when_the_sources_change(tmp_path, monkeypatch):
    """A long run's later envs (its final evaluation) reuse the kernel the run started with,
    even if the package is edited meanwhile: a kernel generated from the new sources would
    import functions the running process does not have."""
    first = codegen.load_kernel_module("cpu")
    edited = tmp_path / "kernel_template.py"
    edited.write_text(codegen.TEMPLATE_PATH.read_text() + "\n# edited\n")
    monkeypatch.setattr(codegen, "TEMPLATE_PATH", edited)
    assert codegen.generate_source() != codegen.GOLDEN_PATH.read_text()  # the edit is seen
    assert codegen.load_kernel_module("cpu") is first
