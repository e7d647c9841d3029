"""benchmarks/gpu_suite.py runs on a CPU-only machine in --dry-run and refuses clearly otherwise;
the pieces it and the GPU-free measurements rely on (the staged Warp parts, the CUDA-test
selection, the SIMT model, the cubin and ptxas readers) do what they say."""

from __future__ import annotations

import importlib.util
import json
import lzma
import shutil
import struct
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "benchmarks" / "gpu_suite.py"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_test_bench_{name}", REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _run(*args: str, timeout: float = 300) -> tuple[int, list[dict], str, str]:
    res = subprocess.run([sys.executable, str(SUITE), *args], capture_output=True, text=True,
                         timeout=timeout, cwd=REPO)
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    return res.returncode, lines, res.stdout, res.stderr


# ------------------------------------------------------------------------------ the suite
@pytest.mark.slow
def test_dry_run_reports_every_part():
    """The CPU twin: each part reports (results with their fields, or a skip that says why),
    the CUDA tests are found, and the table closes the output."""
    rc, lines, stdout, stderr = _run("--dry-run", "--budget", "240", "--games", "maze")
    assert rc == 0, stderr[-3000:]
    assert all(ln["bench"] == "gpu_suite" and "part" in ln for ln in lines)
    system = next(ln for ln in lines if ln.get("case") == "machine")
    for key in ("python", "torch", "warp", "torchrl", "cpu_cores", "commit"):
        assert key in system
    results = [ln for ln in lines if "unit" in ln]
    for ln in results:
        assert set(ln) >= {"case", "ours", "peer", "unit", "speedup"}
    by_case = {ln["case"]: ln for ln in results}
    env = by_case["maze_N8_cpu_launch_per_frame"]  # every case: a launch per frame
    assert env["part"] == "env" and env["ours"] > 0 and "env steps/s" in env["unit"]
    one = by_case["maze_N8_cpu_launch_per_frame_vs_one_launch"]  # the peer: one launch a step
    assert one["ours"] == pytest.approx(env["ours"], rel=1e-2) and one["peer"] > 0
    assert one["speedup"] == pytest.approx(one["ours"] / one["peer"], rel=1e-2)
    cpu = next(ln for ln in results if ln["part"] == "cpu" and ln["case"].startswith("maze_N"))
    assert cpu["ours"] > 0 and cpu["mode"]
    ratio = by_case["maze_cpu_vs_cpu_all_cores"]
    assert ratio["speedup"] == pytest.approx(ratio["ours"] / ratio["peer"], rel=1e-2)
    learner = by_case["tiny_B2xT8_cpu_capture_vs_torchrl"]
    assert learner["ours"] > 0 and learner["peer"] > 0
    launches = by_case["tiny_B2xT8_cpu_eager_launches_vs_torchrl"]
    assert launches["ours"] < launches["peer"]
    assert by_case["cuda_tests_selected"]["ours"] >= 5
    parts = {ln["part"]: ln for ln in lines if "status" in ln and "case" not in ln}
    assert {p: parts[p]["status"] for p in ("system", "env", "cpu", "learner", "tests")} == dict.fromkeys(
        ("system", "env", "cpu", "learner", "tests"), "ok")
    assert parts["e2e"]["status"] == "skipped" and "CUDA" in parts["e2e"]["reason"]
    assert parts["suite"]["status"] == "ok" and parts["suite"]["wall_s"] < 240
    assert "| part | case | ours | peer | unit | speedup |" in stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA refusal")
def test_without_cuda_it_refuses_outside_the_dry_run():
    rc, lines, _, stderr = _run("--budget", "300", "--parts", "env")
    assert rc != 0
    assert "CUDA is not available" in stderr and "--dry-run" in stderr
    assert lines[-1]["status"] == "error" and "CUDA" in lines[-1]["reason"]


def test_a_budget_too_small_for_any_part_says_so():
    rc, lines, _, stderr = _run("--dry-run", "--budget", "1")
    assert rc == 2
    assert "too small for any part" in stderr
    assert "too small" in lines[-1]["reason"] and lines[-1]["status"] == "error"


# ------------------------------------------------------------------------------ its pieces
def _stage(tmp: Path, payload: dict[str, bytes], parts: int) -> Path:
    """A tar.xz of ``payload`` cut into ``parts`` parts, laid out like --prepare's."""
    src = tmp / "src"
    for name, data in payload.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    archive = tmp / "a.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        for name in payload:
            tar.add(src / name, arcname=name)
    blob = archive.read_bytes()
    step = -(-len(blob) // parts)
    staged = tmp / "staged"
    man = {"sha256": __import__("hashlib").sha256(blob).hexdigest(), "parts": []}
    for k in range(parts):
        d = staged / str(k + 1)
        d.mkdir(parents=True)
        chunk = blob[k * step:(k + 1) * step]
        (d / f"w.{k:03d}").write_bytes(chunk)
        man["parts"].append({"dir": str(k + 1), "name": f"w.{k:03d}", "bytes": len(chunk)})
    for k in range(parts):
        (staged / str(k + 1) / "manifest.json").write_text(json.dumps(man))
    return staged


def test_staged_warp_parts_unpack_only_when_all_are_there(tmp_path):
    suite = _load("gpu_suite")
    payload = {"warp/__init__.py": b"version = 'x'\n",
               "warp/bin/warp.so": lzma.compress(bytes(range(256)) * 4000)}
    staged = _stage(tmp_path, payload, parts=3)
    site = tmp_path / "site"
    missing = staged / "2" / "w.001"
    saved = missing.read_bytes()
    missing.unlink()
    why = suite.assemble_warp(staged, site)
    assert why is not None and "2/w.001" in why and not (site / "warp").exists()
    missing.write_bytes(saved[:-1])  # a truncated part is as good as missing
    assert "2/w.001" in suite.assemble_warp(staged, site)
    missing.write_bytes(saved)
    assert suite.assemble_warp(staged, site) is None
    for name, data in payload.items():
        assert (site / name).read_bytes() == data
    assert "no Warp parts" in suite.assemble_warp(tmp_path / "nothing", site)


def test_cuda_test_selection_keeps_the_cuda_tests_only():
    suite = _load("gpu_suite")
    cuda = pytest.mark.skipif(True, reason="CUDA not available").mark
    other = pytest.mark.skipif(False, reason="checks the no-CUDA message").mark

    def item(*marks):
        return SimpleNamespace(iter_markers=lambda: iter(marks))

    assert suite.needs_cuda(item(cuda))
    assert suite.needs_cuda(item(pytest.mark.gpu.mark))
    assert not suite.needs_cuda(item(other))
    assert not suite.needs_cuda(item(pytest.mark.slow.mark))
    files = suite.cuda_test_files()
    assert {"test/emulator/test_emulator.py", "test/objectives/test_objectives.py"} <= set(files)
    assert "test/emulator/test_asm.py" not in files


def test_cuda_tests_status_names_the_tests_not_reached(tmp_path):
    """A tests part cut by its time limit says which CUDA tests never ran, by node id."""
    suite = _load("gpu_suite")
    cuda = pytest.mark.skipif(True, reason="CUDA not available").mark
    status = tmp_path / "status.json"
    plugin = suite._CudaTestsPlugin(status)

    def item(nodeid, *marks):
        return SimpleNamespace(nodeid=nodeid, iter_markers=lambda: iter(marks))

    items = [item("t.py::a", cuda), item("t.py::cpu_only"), item("t.py::b", cuda),
             item("t.py::c", cuda)]
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: None))
    plugin.pytest_collection_modifyitems(config, items)
    assert [it.nodeid for it in items] == ["t.py::a", "t.py::b", "t.py::c"]

    def report(nodeid, when, outcome):
        return SimpleNamespace(nodeid=nodeid, when=when, passed=outcome == "passed",
                               failed=outcome == "failed", skipped=outcome == "skipped")

    for when in ("setup", "call", "teardown"):
        plugin.pytest_runtest_logreport(report("t.py::a", when, "passed"))
    plugin.pytest_runtest_logreport(report("t.py::b", "setup", "passed"))
    plugin.pytest_runtest_logreport(report("t.py::b", "call", "failed"))
    plugin.pytest_runtest_logreport(report("t.py::b", "teardown", "passed"))
    got = json.loads(status.read_text())
    assert got["selected"] == 3 and got["passed"] == 1 and got["failed"] == 1
    assert got["failures"] == ["t.py::b"] and got["not_reached"] == ["t.py::c"]


# ------------------------------------------------------------------------------ SIMT model
def test_simt_model_on_known_traces():
    simt = _load("simt")
    same = [np.array([1, 2, 3, 4])] * 32
    pcs = [np.array([10, 11, 12, 13])] * 32
    fig = simt.summarize([simt.simt_metrics(same, pcs)])
    assert fig["simt_efficiency"] == 1.0 and fig["same_pc_share"] == 1.0
    assert fig["tail_idle_share"] == 0.0
    # every lane its own handler: 32 issues a slot
    fig = simt.summarize([simt.simt_metrics([np.array([k]) for k in range(32)],
                                            [np.array([k]) for k in range(32)])])
    assert fig["simt_efficiency"] == pytest.approx(1 / 32)
    assert fig["same_handler_share"] == pytest.approx(1 / 32)
    # half the lanes stop after one slot of two: a quarter of the slots idle, one issue a slot
    lanes = [np.array([5, 5]) if k < 16 else np.array([5]) for k in range(32)]
    fig = simt.summarize([simt.simt_metrics(lanes, lanes)])
    assert fig["tail_idle_share"] == pytest.approx(0.25)
    assert fig["simt_efficiency"] == pytest.approx(48 / 64)
    # same handler, different instructions: the handler share stays, the PC share drops
    fig = simt.summarize([simt.simt_metrics([np.array([7])] * 32,
                                            [np.array([k % 4]) for k in range(32)])])
    assert fig["same_handler_share"] == 1.0 and fig["same_pc_share"] == pytest.approx(8 / 32)


def test_regrouping_model_on_known_traces():
    simt = _load("simt")
    # the same 4-handler loop, lane k started k % 4 handlers into it: in lockstep every slot
    # issues all four handlers; regrouped, the lanes fall into step after a few issues
    loop = [1, 2, 3, 4] * 50
    lanes = [np.array(loop[k % 4:k % 4 + 160]) for k in range(32)]
    lock = simt.summarize([simt.simt_metrics(lanes, lanes)])["simt_efficiency"]
    assert lock == pytest.approx(1 / 4)
    fig = simt.regroup_metrics(lanes)
    assert fig["lane_slots"] == 32 * 160
    eff = simt.regroup_efficiency([fig])
    assert 0.9 < eff < 1.0  # a few issues to fall into step, then one issue a slot
    # lanes that share no handler cannot be regrouped: one lane an issue, as in lockstep
    solo = [np.array([k, k]) for k in range(32)]
    assert simt.regroup_efficiency([simt.regroup_metrics(solo)]) == pytest.approx(1 / 32)
    # the vote goes to the largest group: 24 lanes on handler 5 advance first, then the 8
    lanes = [np.array([5]) if k < 24 else np.array([6]) for k in range(32)]
    fig = simt.regroup_metrics(lanes)
    assert fig["issues"] == 2 and simt.regroup_efficiency([fig]) == pytest.approx(32 / 64)
    assert np.isnan(simt.regroup_efficiency([simt.regroup_metrics([])]))


def test_handlers_follow_the_generated_dispatch():
    simt = _load("simt")
    h = simt.handler_of(np.array([0x41, 0x7F, 0x76, 0x80, 0xBF, 0xC7, 0xFF, 0xC5, 0xF5, 0xC1,
                                  0xCD, 0xC4, 0xC0, 0xC9, 0xCB, 0x00, -1]))
    ld, ld2, halt, alu, alu2, rst, rst2, push, push2, pop, call, callc, retc, ret, cb, nop, unk = h
    assert ld == ld2 and alu == alu2 and rst == rst2 and push == push2 and call == callc
    assert len({ld, halt, alu, rst, push, pop, call, retc, ret, cb, nop}) == 11
    assert ret == 0xC9 and cb == 0xCB and nop == 0 and unk == simt.UNKNOWN


# ------------------------------------------------------------------------------ cubin and ptxas
def _cubin(regs: int, frame: int) -> bytes:
    """A minimal ELF64 with one global kernel ``k`` and its .nv.info attributes."""
    shstr = b"\0.shstrtab\0.strtab\0.symtab\0.nv.info\0.text.k\0"
    strtab = b"\0k\0"
    sym = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0) + struct.pack("<IBBHQQ", 1, 0x12, 0, 5, 0, 64)
    info = b"".join(struct.pack("<BBHII", 4, attr, 8, 1, val)
                    for attr, val in ((0x2F, regs), (0x11, frame), (0x12, frame)))
    text = b"\0" * 64
    blobs = [shstr, strtab, sym, info, text]
    offs, at = [], 64
    for b in blobs:
        offs.append(at)
        at += len(b)
    shoff = at
    names = [shstr.index(n) for n in (b".shstrtab", b".strtab", b".symtab", b".nv.info", b".text.k")]
    types = [3, 3, 2, 0x70000000, 1]
    links = [0, 0, 2, 3, 0]
    hdr = bytearray(64)
    hdr[:5] = b"\x7fELF\x02"
    struct.pack_into("<Q", hdr, 0x28, shoff)
    struct.pack_into("<HHH", hdr, 0x3A, 64, 6, 1)
    shdrs = bytes(64) + b"".join(
        struct.pack("<IIQQQQIIQQ", names[k], types[k], 0, 0, offs[k], len(blobs[k]), links[k], 0,
                    1, 24 if types[k] == 2 else 0) for k in range(5))
    return bytes(hdr) + b"".join(blobs) + shdrs


def test_cubin_reader_finds_registers_and_frame(tmp_path):
    regs = _load("cuda_regs")
    path = tmp_path / "k.cubin"
    path.write_bytes(_cubin(96, 40))
    assert regs.cubin_kernel_info(path) == {
        "k": {"registers": 96, "frame_bytes": 40, "min_stack_bytes": 40, "sass_bytes": 64}}
    path.write_bytes(b"not an elf")
    with pytest.raises(ValueError, match="ELF"):
        regs.cubin_kernel_info(path)


def test_ptxas_report_is_split_per_entry():
    regs = _load("cuda_regs")
    log = """ptxas info    : 154 bytes gmem
ptxas info    : Compiling entry function 'gb_run_x' for 'sm_90'
ptxas info    : Function properties for gb_run_x
    5664 bytes stack frame, 11404 bytes spill stores, 17624 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 5664 bytes cumulative stack size
ptxas info    : Function properties for helper_a
    0 bytes stack frame, 236 bytes spill stores, 236 bytes spill loads
ptxas info    : Function properties for helper_b
    0 bytes stack frame, 4 bytes spill stores, 20 bytes spill loads
ptxas info    : Compiling entry function 'gb_peek_y' for 'sm_90'
ptxas info    : Function properties for gb_peek_y
    856 bytes stack frame, 108 bytes spill stores, 164 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 856 bytes cumulative stack size
"""
    rep = regs.parse_ptxas_verbose(log)
    assert rep["gb_run_x"] == {"registers": 255, "frame_bytes": 5664, "spill_store_bytes": 11404,
                               "spill_load_bytes": 17624, "callee_spill_store_bytes": 240,
                               "callee_spill_load_bytes": 256,
                               "functions": {"helper_a": (236, 236), "helper_b": (4, 20)}}
    assert rep["gb_peek_y"]["spill_store_bytes"] == 108
    assert rep["gb_peek_y"]["callee_spill_store_bytes"] == 0


def test_warp_parts_fill_calls_then_fit_beside_the_other_folders():
    suite = _load("gpu_suite")
    assert suite.split_sizes(100, 60, 45) == [60, 40]
    assert suite.split_sizes(130, 60, 5) == [60, 60, 10]
    assert suite.split_sizes(30, 60, 45) == [30]
    assert sum(suite.split_sizes(12345, 100, 7)) == 12345
    with pytest.raises(ValueError, match="no room"):
        suite.split_sizes(10, 60, 0)


def test_missing_warp_is_installed_from_its_parts(tmp_path, capsys):
    suite = _load("gpu_suite")
    staged = _stage(tmp_path, {"warp/__init__.py": b"x = 1\n"}, parts=2)
    site = tmp_path / "site"
    args = SimpleNamespace(site=str(site), wheels=str(tmp_path / "no_wheels"),
                           warp_parts=str(staged))
    out = suite.Output(None)
    assert suite.install_missing(args, ["warp"], out)
    assert (site / "warp" / "__init__.py").read_text() == "x = 1\n"
    assert out.lines[-1]["case"] == "warp" and out.lines[-1]["status"] == "ok"
    (staged / "2" / "w.001").unlink()  # the machine went back between the calls
    assert not suite.install_missing(args, ["warp"], out)
    assert out.lines[-1]["status"] == "error" and "2/w.001" in out.lines[-1]["reason"]
    capsys.readouterr()


def test_a_skipped_case_names_the_reserve_only_when_later_parts_keep_one():
    suite = _load("gpu_suite")
    ctx = SimpleNamespace(budget=suite.Budget(100.0, __import__("time").time()))
    alone = suite._left_phrase(ctx, 0.0)
    assert "of the budget" in alone and "kept" not in alone
    kept = suite._left_phrase(ctx, 40.0)
    assert "kept for the later parts" in kept and kept.startswith(("59 s", "60 s"))


def test_out_of_line_functions_are_named_and_their_spill_changes_listed():
    regs = _load("cuda_regs")
    mangled = "_ZN88_INTERNAL_00000000_57_wp_x_cu_f23cfb9511idle_loop_0EiP12Mem_be861c04"
    assert regs.wp_func_name(mangled) == "idle_loop_0"
    assert regs.wp_func_name("helper_a") == "helper_a"
    log = """ptxas info    : Compiling entry function 'gb_run_x' for 'sm_90'
ptxas info    : Function properties for gb_run_x
    64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 64 bytes cumulative stack size
ptxas info    : Function properties for _ZN88_INTERNAL_0_wp_x_cu_0123abcd9io_read_0EiP3Mem
    0 bytes stack frame, 408 bytes spill stores, 564 bytes spill loads
ptxas info    : Function properties for _ZN88_INTERNAL_0_wp_x_cu_0123abcd6sync_0EiP3Mem
    0 bytes stack frame, 20 bytes spill stores, 128 bytes spill loads
"""
    ours = {"kernels": {"gb_run": regs.parse_ptxas_verbose(log)["gb_run_x"]}}
    assert ours["kernels"]["gb_run"]["functions"] == {"io_read_0": (408, 564), "sync_0": (20, 128)}
    peer = {"kernels": {"gb_run": {"functions": {"io_read_0": [216, 252], "sync_0": [20, 128],
                                                 "gone_0": [4, 4]}}}}
    assert regs.function_changes(ours, peer) == [("io_read_0", (408, 564), (216, 252)),
                                                 ("gone_0", None, (4, 4))]


def test_ab_part_measures_the_env_cases_again_on_a_baseline_tree(tmp_path):
    suite = _load("gpu_suite")
    base = suite.prepare_baseline("HEAD", tmp_path / "base")
    assert (base / "torchrl_dreamer" / "emulator").is_dir()
    assert suite.baseline_label(base) == subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
        text=True).stdout.strip()
    with pytest.raises(ValueError, match="not a revision"):
        suite.prepare_baseline("no-such-rev", tmp_path / "bad")
    code, lines, out, err = _run("--dry-run", "--parts", "env,ab", "--games", "maze",
                                 "--per-frame-only", "--baseline-tree", str(base),
                                 "--budget", "200")
    assert code == 0, err[-2000:]
    env = [ln["case"] for ln in lines if ln.get("part") == "env" and "ours" in ln]
    assert env == ["maze_N8_cpu_launch_per_frame"]  # no one-launch peer with --per-frame-only
    ab = {ln["case"]: ln for ln in lines if ln.get("part") == "ab" and "case" in ln}
    assert "maze_N8_cpu_launch_per_frame_vs_baseline" in ab, out[-2000:]
    line = ab["maze_N8_cpu_launch_per_frame_vs_baseline"]
    assert line["ours"] > 0 and line["peer"] > 0 and line["baseline"] == suite.baseline_label(base)
    parts = {ln["part"]: ln for ln in lines if "status" in ln and "case" not in ln}
    assert parts["ab"]["status"] == "ok"
    # several baselines (candidates) in one lease: each measured in turn, named by its REV
    other = tmp_path / "other"
    shutil.copytree(base, other)
    (other / "REV").write_text("cand\n")
    code, lines, out, err = _run("--dry-run", "--parts", "env,ab", "--games", "maze",
                                 "--per-frame-only", "--baseline-tree", str(base), str(other),
                                 "--budget", "200")
    assert code == 0, err[-2000:]
    ab = {ln["case"]: ln for ln in lines if ln.get("part") == "ab" and "ours" in ln}
    label = suite.baseline_label(base)
    assert set(ab) == {f"maze_N8_cpu_launch_per_frame_vs_baseline_{label}",
                       "maze_N8_cpu_launch_per_frame_vs_baseline_cand"}, out[-2000:]
    assert all(ln["peer"] > 0 for ln in ab.values())


def test_prepare_places_baselines_and_refuses_more_than_a_call_carries():
    suite = _load("gpu_suite")
    assert suite.baseline_dir(0) == suite.DEFAULT_BASELINE
    assert suite.baseline_dir(2).name == ".gpu_baseline_3"
    revs = ["HEAD"] * (suite.MAX_BASELINES + 1)
    code, _, _, err = _run("--prepare", "baseline", "--baseline-rev", *revs)
    assert code == 2 and f"at most {suite.MAX_BASELINES} baselines" in err


def test_ab_part_without_a_baseline_says_how_to_make_one():
    code, lines, _, _ = _run("--dry-run", "--parts", "env,ab", "--games", "maze", "--budget", "60")
    part = next(ln for ln in lines if ln.get("part") == "ab" and "case" not in ln)
    assert part["status"] == "skipped" and "--prepare baseline" in part["reason"]


def test_spill_map_credits_local_memory_instructions_to_their_lines(tmp_path):
    spills = _load("cuda_spills")
    src = tmp_path / "bus.py"
    src.write_text("def tick(x):\n    y = x + 1\n    return y\n\n\ndef wr(v):\n    return v\n")
    kern = tmp_path / "kern.py"
    kern.write_text("def gb_run(m):\n    pass\n")
    hdr = "/warp/native/array.h"
    sass = f"""//--------------------- .text.gb_run_ab12_cuda_kernel_forward ----
.text.gb_run_ab12_cuda_kernel_forward:
\t//## File "{kern}", line 1
        /*0000*/                   STL.64 [R1], R2 ;
\t//## File "{hdr}", line 1225 inlined at "{src}", line 2
\t//## File "{src}", line 2 inlined at "{kern}", line 2
\t//## File "{kern}", line 2
        /*0010*/                   LDL R4, [R1+0xed4] ;
        /*0020*/                   ISETP.GE.AND P0, PT, R4, R5, PT ;
        /*0030*/                   LDL.LU R6, [R1+0x8] ;
\t//## File "{src}", line 7 inlined at "{kern}", line 2
\t//## File "{kern}", line 2
        /*0040*/                   STL [R1+0x10], R6 ;
//--------------------- .text.gb_peek_cd34_cuda_kernel_forward ----
.text.gb_peek_cd34_cuda_kernel_forward:
\t//## File "{src}", line 2
        /*0000*/                   LDL R1, [R1] ;
"""
    sites = spills.local_memory_sites(sass.splitlines())
    assert [(s["kernel"][:6], s["op"]) for s in sites] == [
        ("gb_run", "STL"), ("gb_run", "LDL"), ("gb_run", "LDL"), ("gb_run", "STL"),
        ("gb_pee", "LDL")]
    # the header frame is skipped: the two loads belong to bus.py line 2, inside tick
    assert spills.tally(sites, "gb_run") == [
        ("bus.py:2 tick", 0, 2), ("bus.py:7 wr", 1, 0), ("kern.py:1 gb_run", 1, 0)]
    assert spills.tally(sites, "gb_run", "kernel_line") == [
        ("kern.py:2 gb_run", 1, 2), ("kern.py:1 gb_run", 1, 0)]
    assert spills.source_text("bus.py:2 tick") == "y = x + 1"
    lines = spills.result_lines(sites, "gb_run", 90, top=1)
    assert [(x["case"], x["ours"]) for x in lines] == [
        ("gb_run_sm90_STL_instructions", 2), ("gb_run_sm90_LDL_instructions", 2),
        ("gb_run_sm90_line:bus.py:2 tick", 2), ("gb_run_sm90_kernel_line:kern.py:2 gb_run", 3)]
    assert all(x["peer"] is None and x["speedup"] is None for x in lines)


def test_spill_map_without_its_tools_says_what_to_install(monkeypatch, capsys):
    spills = _load("cuda_spills")
    monkeypatch.setattr(spills, "find_nvdisasm", lambda explicit=None: None)
    assert spills.main([]) == 2
    assert "nvidia-cuda-nvdisasm" in capsys.readouterr().err


def test_env_part_leaves_the_cpu_part_its_time():
    """The env part keeps the cpu part's seconds (a GPU run of 2026-11-30 spent them all on env
    cases and never compared the GPU with the cores): a case a game, at least the part's
    minimum, nothing when the part does not run."""
    suite = _load("gpu_suite")
    plan = suite.Plan.make(SimpleNamespace(dry_run=False, sizes=None, presets=None, e2e_envs=None))
    ctx = SimpleNamespace(plan=plan, args=SimpleNamespace(parts=list(suite.PARTS)))
    per_game = plan.cpu_seconds + suite.CPU_CASE_SETUP_S
    assert suite._cpu_part_cost(ctx, 7) == pytest.approx(max(plan.min_cost["cpu"], 7 * per_game))
    assert suite._cpu_part_cost(ctx, 30) == pytest.approx(30 * per_game)
    assert suite._cpu_part_cost(ctx, 1) == plan.min_cost["cpu"]
    ctx.args.parts = ["system", "env"]
    assert suite._cpu_part_cost(ctx, 7) == 0.0
