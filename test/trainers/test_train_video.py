"""Periodic world-model videos during training (``TrainConfig.video_every``): MP4 files of the
open-loop report on replay windows, and the same frames to a TensorBoard-style writer."""

from __future__ import annotations

import pytest
import torch
from test_train import SMALL

from torchrl_dreamer.trainers import DreamerTrainer, TrainConfig
from torchrl_dreamer.trainers.config import ConfigError
from torchrl_dreamer.trainers.loggers import MultiLogger
from torchrl_dreamer.trainers.video import BAR_ROWS, replay_open_loop


class _Writer:
    """What TensorBoard's SummaryWriter offers for videos: ``add_video`` (recorded)."""

    def __init__(self):
        self.videos = []

    def add_video(self, tag, vid_tensor, global_step=None, fps=4):
        self.videos.append((tag, tuple(vid_tensor.shape), vid_tensor.dtype, global_step))


class _TBLike:
    """A logger whose ``experiment`` is a writer with ``add_video`` (as TorchRL's
    TensorboardLogger), for runs without the tensorboard package."""

    def __init__(self):
        self.experiment = _Writer()

    def log_scalar(self, name, value, step=None):
        pass


def test_video_every_writes_mp4_and_tensorboard_video(tmp_path):
    imageio = pytest.importorskip("imageio.v2")
    torch.set_num_threads(1)
    cfg = TrainConfig(**{**SMALL, "log_dir": str(tmp_path)}, total_steps=256, video_every=128)
    trainer = DreamerTrainer(cfg, quiet=True)
    tb = _TBLike()
    trainer.logger = MultiLogger([*trainer.logger.loggers, tb])
    trainer.train()
    videos = sorted((tmp_path / "videos").glob("wm_step_*.mp4"))
    assert videos and videos[-1].name == "wm_step_256.mp4"
    frames = [f for f in imageio.get_reader(videos[-1])]  # (list() asks len(): inf)
    assert len(frames) == 32  # a 32-step replay window, 4 of them stacked vertically
    h, w = frames[0].shape[:2]
    assert h >= 2 * 4 * (72 + BAR_ROWS) and w >= 2 * 240
    assert [v[3] for v in tb.experiment.videos] == [int(p.stem.split("_")[-1]) for p in videos]
    tag, shape, dtype, _ = tb.experiment.videos[-1]
    assert tag == "world_model/open_loop" and dtype == torch.uint8
    assert shape == (1, 32, 3, 4 * (72 + BAR_ROWS), 240)
    # videos do not add checkpoints: with checkpoint_every=0 only the final one is written
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_256"]


def test_replay_open_loop_waits_for_enough_replay(tmp_path):
    from torchrl_dreamer.trainers.builder import build_run

    parts = build_run(TrainConfig(**{**SMALL, "log_dir": str(tmp_path)}))
    assert replay_open_loop(parts.world_model, parts.storage, length=32) is None  # empty replay
    parts.collector.shutdown(close_env=True)


def test_video_every_must_not_be_negative():
    with pytest.raises(ConfigError, match="video_every=-?[0-9]+ is invalid: must be an integer >= 0"):
        TrainConfig(**SMALL, video_every=-1)
