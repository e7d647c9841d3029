"""World-model open-loop videos and the MP4/GIF writer."""

from __future__ import annotations

import builtins

import pytest
import torch

from torchrl_dreamer.emulator.packed2 import unpack_packed2
from torchrl_dreamer.modules import make_dreamer
from torchrl_dreamer.trainers.video import BAR_ROWS, open_loop_frames, write_video


@pytest.fixture(scope="module")
def batch():
    torch.manual_seed(0)
    wm, _, _ = make_dreamer("tiny", {"pixels": "packed2"}, action_dim=5)
    T, B = 7, 2
    pixels = torch.randint(0, 256, (T, B, 1, 72, 20), dtype=torch.uint8)
    actions = torch.nn.functional.one_hot(torch.randint(0, 5, (T, B)), 5).float()
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0] = True
    return wm, pixels, actions, is_first


def test_panels(batch):
    wm, pixels, actions, is_first = batch
    wm.train()
    frames = open_loop_frames(wm, pixels, actions, is_first, context=3)
    assert frames.shape == (2, 7, 72 + BAR_ROWS, 240) and int(frames.max()) <= 3
    assert wm.training  # mode restored
    real = frames[:, :, :72, :80]
    want = unpack_packed2(pixels)[:, :, 0].to(torch.uint8)  # shades 0..3
    assert torch.equal(real, want.transpose(0, 1))
    recon, dream = frames[:, :, :72, 80:160], frames[:, :, :72, 160:]
    assert torch.equal(recon[:, :3], dream[:, :3])  # same posterior latents in the context
    bar = frames[:, :, -1, 160:]
    assert (bar[:, :3] == 0).all() and (bar[:, 3:] == 3).all()  # imagination marked


def test_bad_requests(batch):
    wm, pixels, actions, is_first = batch
    with pytest.raises(ValueError, match="context must lie in 1..7"):
        open_loop_frames(wm, pixels, actions, is_first, context=0)
    with pytest.raises(ValueError, match="no decoder for 'obs'"):
        open_loop_frames(wm, pixels, actions, is_first, context=2, key="obs")
    with pytest.raises(ValueError, match="frames must be uint8"):
        write_video("/tmp/x.mp4", torch.zeros(3, 4))


def test_mp4_round_trip(tmp_path):
    imageio = pytest.importorskip("imageio.v2")
    frames = torch.zeros(6, 16, 32, dtype=torch.uint8)
    frames[:, :, 16:] = 3  # right half black
    path = write_video(tmp_path / "v.mp4", frames, scale=2)
    assert path.suffix == ".mp4"
    got = [f for f in imageio.get_reader(path)]
    assert len(got) == 6 and got[0].shape[:2] == (32, 64)
    assert got[0][:, :28].mean() > 230 and got[0][:, 36:].mean() < 25


def test_gif_fallback_without_imageio(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_imageio(name, *a, **kw):
        if name.startswith("imageio"):
            raise ImportError("No module named 'imageio'")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_imageio)
    with pytest.warns(RuntimeWarning, match="writing a GIF instead"):
        path = write_video(tmp_path / "v.mp4", torch.zeros(2, 8, 8, dtype=torch.uint8))
    assert path.suffix == ".gif" and path.read_bytes()[:6] == b"GIF89a"
