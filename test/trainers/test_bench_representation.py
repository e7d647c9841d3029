"""benchmarks/representation.py: it builds both learners as a run does and prints its JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "representation.py"


def test_the_benchmark_prints_one_result_line_per_thread_count():
    out = subprocess.run([sys.executable, str(_PATH), "--quick"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert len(lines) == 1
    line = lines[0]
    assert line["bench"] == "representation" and line["case"] == "update/1t"
    assert line["unit"] == "s/update" and line["ours"] > 0 and line["peer"] > 0
    assert abs(line["speedup"] - line["peer"] / line["ours"]) < 1e-9
