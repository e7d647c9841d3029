"""Action sets (names → buttons masks) and the UnpackPacked2 transform."""

from __future__ import annotations

import pytest
import torch

from torchrl_dreamer.envs.actions import ACTION_SETS, BUTTON_BITS, ActionSet, make_action_set


def test_default_action_set_masks():
    acts = make_action_set("default")
    assert acts.names == ("NOOP", "A", "B", "START", "SELECT", "UP", "DOWN", "LEFT", "RIGHT")
    # contract: bit0 A, bit1 B, bit2 SELECT, bit3 START, bit4 RIGHT, bit5 LEFT, bit6 UP, bit7 DOWN
    assert acts.masks.tolist() == [0, 1, 2, 8, 4, 64, 128, 32, 16]


def test_every_builtin_set_is_distinct_and_valid():
    for name, names in ACTION_SETS.items():
        acts = make_action_set(name)
        assert acts.n == len(names)
        assert len(set(acts.masks.tolist())) == acts.n, name


def test_combos_codec():
    acts = make_action_set("combos")
    i = acts.index("up+a")
    assert acts.masks[i].item() == BUTTON_BITS["UP"] | BUTTON_BITS["A"]
    custom = ActionSet(["noop", "LEFT + B", "start"])
    assert custom.masks.tolist() == [0, BUTTON_BITS["LEFT"] | BUTTON_BITS["B"], BUTTON_BITS["START"]]


def test_encode_indices_and_one_hot():
    acts = make_action_set("dpad")
    idx = torch.tensor([[0, 1], [3, 4]])
    assert acts.encode(idx).tolist() == [[0, 64], [32, 16]]
    one_hot = torch.nn.functional.one_hot(torch.tensor([2, 4]), 5)
    assert acts.encode(one_hot.bool()).tolist() == [128, 16]
    assert acts.encode(one_hot.float()).tolist() == [128, 16]
    assert acts.encode(idx).dtype == torch.uint8


def test_bad_action_names():
    with pytest.raises(ValueError, match="unknown action set 'wasd'.*default"):
        make_action_set("wasd")
    with pytest.raises(ValueError, match="unknown button 'JUMP'"):
        ActionSet(["NOOP", "JUMP"])
    with pytest.raises(ValueError, match="UP and DOWN"):
        ActionSet(["UP+DOWN"])
    with pytest.raises(ValueError, match="duplicate"):
        ActionSet(["A", "a"])
    with pytest.raises(TypeError, match="make_action_set"):
        ActionSet("default")
    with pytest.raises(ValueError, match="not in this action set"):
        make_action_set("dpad").index("A")


def test_unpack_packed2_transform_on_tensordict():
    pytest.importorskip("torchrl_dreamer.emulator.packed2")
    from tensordict import TensorDict

    from torchrl_dreamer.emulator.packed2 import pack_packed2
    from torchrl_dreamer.envs import UnpackPacked2

    shades = torch.randint(0, 4, (3, 1, 72, 80), dtype=torch.uint8)
    td = TensorDict({"pixels": pack_packed2(shades)}, [3])
    out = UnpackPacked2()(td.clone())
    assert torch.equal(out["pixels"], shades)
    rgb = UnpackPacked2(out_keys=["rgb"], rgb=True)(td.clone())
    assert rgb["rgb"].shape == (3, 3, 72, 80)
    assert torch.equal(rgb["rgb"][:, 0] == 255, shades[:, 0] == 0)
