"""``--backend ray`` through the one trainer, on a real local Ray cluster (2 CPUs, loopback):
checkpoints every ``--checkpoint-every`` policy steps, ``--resume``, the final evaluation and
its GIF, and the ``eval`` command on a Ray run's checkpoint. Small: 4 consoles in 2 runners,
about a hundred policy steps."""

from __future__ import annotations

import json

import pytest
import torch
from test_train_units import read_gif

ray = pytest.importorskip(
    "ray", reason="ray is not installed: pip install 'ray[default]' (the [ray] extra)"
)

from torchrl_dreamer.distributed import init_ray  # noqa: E402
from torchrl_dreamer.train import main  # noqa: E402
from torchrl_dreamer.trainers.checkpoint import load_checkpoint  # noqa: E402

ARGS = ["--backend", "ray", "--task", "maze", "--num-envs", "4", "--batch-size", "2",
        "--seq-len", "8", "--steps-per-rollout", "8", "--replay-capacity", "512",
        "--learning-starts", "32", "--replay-ratio", "0.1", "--frame-skip", "6",
        "--log-every", "2", "--no-progress", "--seed", "3", "--threads", "1"]


def _steps(run):
    return sorted(int(p.name[5:]) for p in (run / "checkpoints").iterdir())


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module (the runs join it instead of starting their own)."""
    if ray.is_initialized():
        ray.shutdown()
    init_ray(num_cpus=2)
    yield ray
    ray.shutdown()



def _summary(out: str) -> dict:
    """The run's JSON summary: the last JSON line of stdout (Ray forwards its workers' output,
    such as Warp's module-load lines, to the driver's stdout)."""
    return json.loads([ln for ln in out.strip().splitlines() if ln.startswith("{")][-1])

def test_ray_backend_checkpoints_resumes_and_evaluates(cluster, tmp_path, capsys):
    torch.set_num_threads(1)
    run = tmp_path / "run"
    assert main([*ARGS, "--total-steps", "64", "--checkpoint-every", "32",
                 "--eval-episodes", "2", "--log-dir", str(run)]) == 0
    summary = _summary(capsys.readouterr().out)
    assert summary["policy_steps"] >= 64 and summary["updates"] > 0
    steps = _steps(run)
    # a checkpoint at the pause after 32 policy steps (the runners may run past it) and at the end
    assert 32 <= steps[0] and steps[-1] >= 64 and steps[-1] == summary["policy_steps"]
    last = run / "checkpoints" / f"step_{steps[-1]}"
    state = load_checkpoint(last)
    assert state["config"]["backend"] == "ray" and state["has_replay"]
    assert (last / "replay" / "replay_agent").is_dir()  # the replay service's snapshot
    assert state["collector"]["updates"] == summary["updates"] == state["num_updates"]
    # the final evaluation and its GIF, as on the local backends
    ev = json.loads((run / "eval.json").read_text())
    assert ev["episodes"] == 2
    _, frames, _ = read_gif(run / "eval.gif")
    assert len(frames) == ev["lengths"][ev["gif_episode"]] + 1  # the episode the GIF shows
    # a progress row per pause; the runners may pass both pauses before the first one (one row)
    first_rows = json.loads((run / "progress.json").read_text())
    assert first_rows and first_rows[-1]["policy_steps"] == steps[-1]

    # --resume continues the run: counters and weights from the checkpoint, replay restored
    # runners keep stepping while a checkpoint is written, so the first run may overshoot its
    # 64 steps: resume to a target beyond where it ended
    target = steps[-1] + 32
    assert main(["--log-dir", str(run), "--resume", "--total-steps", str(target),
                 "--eval-episodes", "0", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert f"resumed from {last} at {steps[-1]} policy steps" in captured.err
    resumed = _summary(captured.out)
    assert resumed["policy_steps"] >= target and resumed["updates"] > summary["updates"]
    assert _steps(run)[-1] >= target
    # the first run's rows kept, the resumed run's after them; the replay service continued
    # from its snapshot: the step count never went back
    rows = json.loads((run / "progress.json").read_text())
    assert rows[:len(first_rows)] == first_rows and len(rows) > len(first_rows)
    counts = [row["policy_steps"] for row in rows]
    assert counts == sorted(counts) and counts[-1] > steps[-1]

    # the eval command reads a Ray run's checkpoint like any other
    gif = tmp_path / "play.gif"
    assert main(["eval", "--checkpoint", str(run), "--episodes", "2", "--gif", str(gif)]) == 0
    out = _summary(capsys.readouterr().out)
    assert out["episodes"] == 2 and gif.is_file()
