"""Replay-ratio scheduler: golden call sequences of dreamer-v3.md §5 and whole schedules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torchrl.trainers.algorithms import DreamerV3UpdateRatio

from torchrl_dreamer.collectors import Ratio, UpdateSchedule


def _calls(r, steps):
    return [r(s) for s in steps]


class TestRatioGolden:
    def test_sheeprl_half(self):
        assert _calls(Ratio(0.5), [4, 8, 12, 13, 14, 16]) == [2, 2, 2, 0, 1, 1]

    def test_sheeprl_quarter(self):
        assert _calls(Ratio(0.25), [1, 2, 3, 4, 5, 8, 9]) == [0, 0, 0, 0, 1, 0, 1]

    def test_pretrain_replace(self):
        assert _calls(Ratio(2, pretrain_steps=4), [8, 9, 10]) == [8, 2, 2]

    def test_pretrain_capped_warns(self):
        r = Ratio(1, pretrain_steps=100)
        with pytest.warns(UserWarning, match="capping"):
            first = r(1)
        assert [first, r(2), r(3)] == [1, 1, 1]
        assert r.pretrain_steps == 1

    def test_danijar_first_call_one(self):
        assert _calls(Ratio(0.25, first_call="one"), [4, 6, 8]) == [1, 0, 1]

    def test_pretrain_add(self):
        # sheeprl 0.8.4: pretrain on top of the first ratio count.
        assert _calls(Ratio(1, pretrain_steps=10, pretrain_mode="add"), [1, 2]) == [11, 1]

    def test_zero_ratio(self):
        assert _calls(Ratio(0), [4, 100, 1000]) == [0, 0, 0]


@settings(max_examples=60, deadline=None)
@given(
    ratio=st.sampled_from([0.0625, 0.25, 0.5, 1.0, 2.0, 0.3]),
    increments=st.lists(st.integers(0, 50), min_size=1, max_size=40),
)
def test_first_call_one_matches_torchrl(ratio, increments):
    """first_call='one' is TorchRL's DreamerV3UpdateRatio, call for call."""
    ours, theirs = Ratio(ratio, first_call="one"), DreamerV3UpdateRatio(ratio)
    step = 0
    for inc in increments:
        step += inc
        assert ours(step) == theirs(step)


def test_torchrl_differs_on_first_call():
    """The documented difference: TorchRL returns 1 where sheeprl returns int(step*ratio)."""
    assert DreamerV3UpdateRatio(0.5)(16) == 1
    assert Ratio(0.5)(16) == 8


@settings(max_examples=60, deadline=None)
@given(
    ratio=st.sampled_from([0.0625, 0.25, 0.5, 1.0, 2.0, 4.0]),
    increments=st.lists(st.integers(1, 64), min_size=2, max_size=50),
)
def test_total_tracks_ratio(ratio, increments):
    """Carried remainders: total = int(first*r) + floor((last-first)*r) (within float rounding)."""
    r = Ratio(ratio)
    steps, s = [], 0
    for inc in increments:
        s += inc
        steps.append(s)
    total = sum(r(x) for x in steps)
    expected = int(steps[0] * ratio) + int((steps[-1] - steps[0]) * ratio)
    assert expected - 1 <= total <= expected


def test_state_dict_roundtrip_and_resume():
    r = Ratio(0.3)
    for s in (10, 13, 17):
        r(s)
    saved = r.state_dict()
    a = [r(s) for s in (20, 29, 31, 50)]
    r2 = Ratio(1.0)
    r2.load_state_dict(saved)
    assert [r2(s) for s in (20, 29, 31, 50)] == a


def test_reset():
    r = Ratio(0.5)
    assert r(4) == 2
    r.reset()
    assert r(8) == 4  # a first call again
    r.reset(100)
    assert r(104) == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"ratio": -1}, "ratio"),
        ({"ratio": float("nan")}, "ratio"),
        ({"ratio": 1, "pretrain_steps": -2}, "pretrain_steps"),
        ({"ratio": 1, "first_call": "two"}, "first_call"),
        ({"ratio": 1, "pretrain_mode": "x"}, "pretrain_mode"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Ratio(**kwargs)


def test_step_backwards_raises():
    r = Ratio(1)
    r(10)
    with pytest.raises(ValueError, match="backwards"):
        r(5)


class TestUpdateSchedule:
    def test_worked_example_4_envs(self):
        # 4 envs, learning_starts=1024, rr=0.5: iterations 1..256 random; 2 updates at 256 and on.
        s = UpdateSchedule(0.5, learning_starts=1024, policy_steps_per_iter=4, version="0.5")
        got = [s(4 * i) for i in range(1, 260)]
        assert sum(got[:255]) == 0
        assert got[255:] == [2, 2, 2, 2]
        assert s.first_train_step == 1024

    def test_atari100k_sheeprl(self):
        # 1 env, learning_starts 1024, rr 1: first update at policy step 1024, 98,977 in 100K.
        for version in ("0.5", "0.8"):
            s = UpdateSchedule(1.0, learning_starts=1024, policy_steps_per_iter=1, seq_len=64,
                               version=version)
            first, total = None, 0
            for step in range(1, 100_001):
                g = s(step)
                if g and first is None:
                    first = step
                total += g
            assert first == 1024 and total == 98_977

    def test_danijar_2023_prefill(self):
        # 1,100 random prefill steps then one update per step: 98,900 updates in 100K.
        r = Ratio(1.0, first_call="one")
        assert sum(r(step) for step in range(1101, 100_001)) == 98_900

    def test_v084_pretrain(self):
        # learning_starts=0, T=64, pretrain 10, rr 1, 1 env: iteration 64 does 11 updates.
        s = UpdateSchedule(1.0, learning_starts=0, policy_steps_per_iter=1, seq_len=64,
                           pretrain_steps=10, version="0.8")
        got = [s(i) for i in range(1, 67)]
        assert got[:63] == [0] * 63
        assert got[63:] == [11, 1, 1]

    def test_coarse_calls_same_total(self):
        """Calling once per rollout window owes the same total as calling every iteration."""
        fine = UpdateSchedule(0.5, learning_starts=64, policy_steps_per_iter=4, seq_len=8)
        coarse = UpdateSchedule(0.5, learning_starts=64, policy_steps_per_iter=4, seq_len=8)
        tf = sum(fine(4 * i) for i in range(1, 505))
        tc = sum(coarse(4 * i) for i in range(8, 505, 8))
        assert tf == int(0.5 * (4 * 504 - 60))
        assert tf == tc

    def test_state_dict(self):
        s = UpdateSchedule(0.25, learning_starts=16, policy_steps_per_iter=2, seq_len=4)
        for i in range(1, 30):
            s(2 * i)
        saved = s.state_dict()
        a = [s(2 * i) for i in range(30, 60)]
        s2 = UpdateSchedule(0.25, learning_starts=16, policy_steps_per_iter=2, seq_len=4)
        s2.load_state_dict(saved)
        assert [s2(2 * i) for i in range(30, 60)] == a

    def test_bad_args(self):
        with pytest.raises(ValueError, match="policy_steps_per_iter"):
            UpdateSchedule(1, learning_starts=0, policy_steps_per_iter=0)
        with pytest.raises(ValueError, match="learning_starts"):
            UpdateSchedule(1, learning_starts=-1, policy_steps_per_iter=1)
