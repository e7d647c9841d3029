"""A task's RAM observations (``observe:`` in a spec) reach the replay and the world model with no
other change: the run's specs give the storage a field and the world model a vector encoder and
decoder for each, training runs, and the videos and evaluation that feed the world model feed
them too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from torchrl_dreamer.data.schema import FieldSpec
from torchrl_dreamer.modules.encoders import VectorDecoder, VectorEncoder
from torchrl_dreamer.roms import rom_path
from torchrl_dreamer.trainers import (
    DreamerTrainer,
    RunFactories,
    TrainConfig,
    make_env,
    obs_spec_of,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
# The tiny run of test_train.py's SMALL, on catch from its spec.
SMALL = dict(preset="tiny", num_envs=4, batch_size=4, seq_len=8, steps_per_rollout=8,
             commit_stride=4, replay_capacity=512, learning_starts=32, replay_ratio=0.1,
             frame_skip=6, log_every=2, eval_episodes=0, progress=False, backend="reference",
             seed=3, threads=1)
# catch (docs/roms.md): PADDLE_X 0xC007, OBJ_X 0xC008, OBJ_Y 0xC009, LIVES 0xC003
OBSERVE = {"objects": [0xC007, 0xC008, 0xC009], "lives": [0xC003]}


@pytest.fixture
def spec_file(tmp_path) -> Path:
    obj = yaml.safe_load((EXAMPLES / "catch.yaml").read_text())
    path = tmp_path / "catch_ram.yaml"
    path.write_text(yaml.safe_dump({**obj, "observe": OBSERVE}, sort_keys=False))
    return path


def _config(spec_file: Path, log_dir: Path, **kw) -> TrainConfig:
    return TrainConfig(**{**SMALL, "task_spec": str(spec_file), "rom": str(rom_path("catch")),
                          "log_dir": str(log_dir), **kw})


def test_specs_give_the_world_model_and_the_replay_each_observation(spec_file, tmp_path):
    cfg = _config(spec_file, tmp_path / "run")
    env = make_env(cfg, num_envs=2)
    assert obs_spec_of(env) == {"pixels": "packed2", "objects": ("vector", 3),
                                "lives": ("vector", 1)}
    storage, _ = RunFactories(cfg).replay(env)
    assert storage.schema["objects"] == FieldSpec((3,), torch.float32)
    assert storage.schema["lives"] == FieldSpec((1,), torch.float32)


def test_a_run_stores_models_and_draws_ram_observations(spec_file, tmp_path):
    from torchrl_dreamer.trainers.evaluate import evaluate_checkpoint, world_model_video_checkpoint

    torch.set_num_threads(1)
    run = tmp_path / "run"
    # the decoder draws the videos below (a spec's Game Boy defaults train without one)
    trainer = DreamerTrainer(_config(spec_file, run, total_steps=160, video_every=0,
                                     representation="decoder"), quiet=True)
    try:
        row = trainer.train()
        p = trainer.parts
        assert row["updates"] > 0
        wm = p.world_model
        assert wm.obs_keys == ["pixels", "objects", "lives"]
        assert isinstance(wm.encoders["objects"], VectorEncoder)
        assert isinstance(wm.decoders["objects"], VectorDecoder)
        assert isinstance(wm.encoders["lives"], VectorEncoder)
        # the replay holds what the env emitted: bytes / 255 of the declared addresses
        lo, hi = p.storage.sampleable_range()
        assert hi - lo >= 32
        rows = slice(p.storage.row_of(lo), p.storage.row_of(hi - 1) + 1)
        objects = p.storage.fields["objects"][rows]
        lives = p.storage.fields["lives"][rows]
        first = p.storage.fields["is_first"][rows]
        assert objects.dtype == lives.dtype == torch.float32
        assert tuple(objects.shape[1:]) == (4, 3) and tuple(lives.shape[1:]) == (4, 1)
        assert torch.equal(objects * 255, (objects * 255).round())
        assert first.any() and bool((lives[first] * 255).round().eq(3).all())  # new game: 3
        assert objects[:, :, 0].unique().numel() > 1  # the paddle moved: live bytes, not zeros
        # the open-loop video feeds the world model every observation, not the pixels alone
        video = trainer.write_video()
        assert video is not None and video.is_file()
    finally:
        trainer.close()
    gif = world_model_video_checkpoint(run, tmp_path / "wm.gif", sequences=2, length=8,
                                       context=4)
    assert gif.is_file()
    result = evaluate_checkpoint(run, episodes=2, max_steps=5)  # the player reads them too
    assert len(result.lengths) + result.unfinished == 2
