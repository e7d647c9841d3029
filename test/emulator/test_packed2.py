"""Tests of the packed2 torch helpers: bit order, decimation, round trips, RGB, errors."""

from __future__ import annotations

import pytest
import torch
from conftest import requires_cuda
from hypothesis import given, settings
from hypothesis import strategies as st

from torchrl_dreamer.emulator.packed2 import (
    DMG_SHADES_RGB,
    PACKED2_FRAME_BYTES,
    PACKED2_SHAPE,
    normalize_shades,
    pack_packed2,
    packed2_lut,
    shades_to_rgb,
    unpack_packed2,
)


def test_shape_constants():
    assert PACKED2_SHAPE == (1, 72, 20)
    assert PACKED2_FRAME_BYTES == 1440


def test_bit_order_leftmost_pixel_in_low_bits():
    shades = torch.zeros(1, 1, 72, 80, dtype=torch.uint8)
    shades[0, 0, 0, 0:4] = torch.tensor([1, 2, 3, 0])
    shades[0, 0, 5, 76:80] = torch.tensor([0, 0, 0, 3])
    out = pack_packed2(shades)
    assert out[0, 0, 0, 0].item() == 1 | (2 << 2) | (3 << 4)
    assert out[0, 0, 5, 19].item() == 3 << 6
    # every other byte untouched
    assert out.sum().item() == out[0, 0, 0, 0].item() + out[0, 0, 5, 19].item()


def test_decimation_takes_top_left_pixel():
    fb = torch.zeros(1, 144, 160, dtype=torch.uint8)
    # Only odd rows / odd columns are dark: decimation must ignore them entirely.
    fb[:, 1::2, :] = 3
    fb[:, :, 1::2] = 3
    assert pack_packed2(fb).eq(0).all()
    fb[0, 2, 4] = 2  # source (x=4, y=2) -> output (ox=2, oy=1): byte 0, pixel 2
    out = pack_packed2(fb)
    assert out[0, 0, 1, 0].item() == 2 << 4


def test_lut_matches_bit_formula():
    lut = packed2_lut()
    assert lut.shape == (256, 4) and lut.dtype == torch.uint8
    for byte in (0, 1, 0b11100100, 0xFF, 0x1B):
        assert lut[byte].tolist() == [(byte >> (2 * k)) & 3 for k in range(4)]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 3))
def test_round_trip_bytes_and_shades(seed, n):
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (n, *PACKED2_SHAPE), generator=g, dtype=torch.uint8)
    shades = unpack_packed2(raw)
    assert shades.shape == (n, 1, 72, 80)
    assert int(shades.max()) <= 3
    assert torch.equal(pack_packed2(shades), raw)
    fb = torch.randint(0, 4, (n, 144, 160), generator=g, dtype=torch.uint8)
    assert torch.equal(unpack_packed2(pack_packed2(fb)), fb[:, None, ::2, ::2])


def test_extra_batch_dims_and_int_dtypes():
    fb = torch.randint(0, 4, (2, 3, 144, 160), dtype=torch.int64)
    out = pack_packed2(fb)
    assert out.shape == (2, 3, 1, 72, 20) and out.dtype == torch.uint8
    assert torch.equal(unpack_packed2(out), fb[..., None, ::2, ::2].to(torch.uint8))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="expects frames"):
        pack_packed2(torch.zeros(2, 144, 161, dtype=torch.uint8))
    with pytest.raises(ValueError, match="0..3"):
        pack_packed2(torch.full((1, 144, 160), 4, dtype=torch.uint8))
    with pytest.raises(TypeError, match="integer"):
        pack_packed2(torch.zeros(1, 144, 160))
    with pytest.raises(TypeError, match="uint8"):
        unpack_packed2(torch.zeros(1, 1, 72, 20, dtype=torch.int32))
    with pytest.raises(ValueError, match="expects"):
        unpack_packed2(torch.zeros(2, 1, 72, 21, dtype=torch.uint8))
    with pytest.raises(ValueError, match="palette"):
        shades_to_rgb(torch.zeros(2, 2, dtype=torch.uint8), palette=((0, 0, 0),))


def test_shades_to_rgb_layouts():
    shades = torch.tensor([[[0, 1], [2, 3]]], dtype=torch.uint8)  # [1, 2, 2]
    rgb = shades_to_rgb(shades)
    assert rgb.shape == (1, 3, 2, 2) and rgb.dtype == torch.uint8
    assert rgb[0, :, 1, 0].tolist() == list(DMG_SHADES_RGB[2])
    last = shades_to_rgb(shades, channels_last=True)
    assert last.shape == (1, 2, 2, 3)
    assert torch.equal(last.movedim(-1, -3), rgb)
    green = ((224, 248, 208), (136, 192, 112), (52, 104, 86), (8, 24, 32))
    assert shades_to_rgb(shades, palette=green, channels_last=True)[0, 0, 1].tolist() == [
        136,
        192,
        112,
    ]


def test_normalize_shades_range():
    x = normalize_shades(torch.arange(4, dtype=torch.uint8))
    assert torch.allclose(x, torch.tensor([-0.5, -1 / 6, 1 / 6, 0.5]))


@requires_cuda
def test_cuda_matches_cpu():
    fb = torch.randint(0, 4, (4, 144, 160), dtype=torch.uint8)
    out = pack_packed2(fb.cuda(), validate=False)
    assert out.is_cuda and torch.equal(out.cpu(), pack_packed2(fb))
    assert torch.equal(unpack_packed2(out).cpu(), unpack_packed2(pack_packed2(fb)))
    assert packed2_lut("cuda").is_cuda
