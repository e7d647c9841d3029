"""TimeMajorStorage: layout, writes, obs_slot, wraparound, commits, invariants, bad input."""

from __future__ import annotations

import pytest
import torch
from torchrl.data import Composite, Unbounded

from torchrl_dreamer.data import (
    FieldSpec,
    ReplayInvariantError,
    TimeMajorStorage,
    dreamer_schema,
)
from torchrl_dreamer.data.synthetic import SyntheticSteps
from torchrl_dreamer.emulator.packed2 import PACKED2_SHAPE

N = 4


def _fill(storage: TimeMajorStorage, steps: int, seed: int = 0, **kw) -> SyntheticSteps:
    src = SyntheticSteps(storage.num_envs, torch.Generator().manual_seed(seed), **kw)
    for _ in range(steps):
        storage.write(src.step())
    return src


def _t_of(pixels: torch.Tensor) -> torch.Tensor:
    """SyntheticSteps writes ``t % 256`` into every pixel of row t."""
    return pixels[..., 0, 0, 0].long()


def test_dreamer_schema_shapes_and_dtypes():
    s = TimeMajorStorage(7, N, spec=dreamer_schema())
    f = s.fields
    assert f["pixels"].shape == (7, N, *PACKED2_SHAPE) and f["pixels"].dtype == torch.uint8
    assert f["action"].shape == (7, N) and f["action"].dtype == torch.int64
    for k, dt in [
        ("reward", torch.float32),
        ("continue_", torch.float32),
        ("is_first", torch.bool),
        ("terminated", torch.bool),
        ("truncated", torch.bool),
        ("episode_id", torch.int32),
    ]:
        assert f[k].shape == (7, N) and f[k].dtype == dt, k
    assert s.bytes_per_transition() == 1440 + 8 + 4 + 1 + 4 + 1 + 1 + 4
    assert s.max_size == 7 * N and len(s) == 0 and s.shape == (0, N)


def test_schema_from_first_write_and_from_composite():
    s = TimeMajorStorage(3, N)
    assert not s.initialized
    s.write({"obs": torch.ones(N, 5), "flag": torch.zeros(N, dtype=torch.bool)})
    assert s.schema == {"obs": FieldSpec((5,), torch.float32), "flag": FieldSpec((), torch.bool)}
    spec = Composite(obs=Unbounded(shape=(N, 3), dtype=torch.float64), shape=(N,))
    s2 = TimeMajorStorage(3, N, spec=spec)
    assert s2.fields["obs"].shape == (3, N, 3) and s2.fields["obs"].dtype == torch.float64
    s3 = TimeMajorStorage(3, N, spec={"x": ((2,), torch.int16)})
    assert s3.fields["x"].shape == (3, N, 2)


def test_write_values_and_counters():
    s = TimeMajorStorage(10, N, spec=dreamer_schema())
    src = SyntheticSteps(N, torch.Generator().manual_seed(3))
    rows = [src.step() for _ in range(3)]
    for i, r in enumerate(rows):
        assert s.write(r) == i
    assert (s.total_steps, s.head, s.size, s.committed_t, len(s)) == (3, 3, 3, 2, 3 * N)
    for i, r in enumerate(rows):
        for k, v in r.items():
            assert torch.equal(s.fields[k][i], v), k


def test_obs_slot_is_a_contiguous_view_and_write_completes_the_row():
    s = TimeMajorStorage(6, N, spec=dreamer_schema())
    src = SyntheticSteps(N, torch.Generator().manual_seed(0))
    _ = s.write(src.step())
    t = s.total_steps
    slot = s.obs_slot(t)
    assert slot.shape == (N, *PACKED2_SHAPE) and slot.is_contiguous()
    assert slot.data_ptr() == s.fields["pixels"][s.head].data_ptr()  # no copy
    slot.fill_(77)  # "render" straight into the replay
    row = src.step()
    del row["pixels"]
    assert s.write(row) == t
    assert bool((s.fields["pixels"][t % 6] == 77).all())
    # writing a row without pixels and without obs_slot is an error
    row = src.step()
    del row["pixels"]
    with pytest.raises(KeyError, match="missing \\['pixels'\\]"):
        s.write(row)
    # held rows give views too; rows not held are refused
    assert s.obs_slot(0).data_ptr() == s.fields["pixels"][0].data_ptr()
    with pytest.raises(IndexError, match="not held"):
        s.obs_slot(s.total_steps + 1)


def test_wraparound_capacity_5_keeps_newest_rows_in_chronological_order():
    s = TimeMajorStorage(5, N, spec=dreamer_schema())
    _fill(s, 8)
    assert (s.total_steps, s.head, s.size) == (8, 3, 5)
    rows = s.chronological_rows()
    assert rows.tolist() == [3, 4, 0, 1, 2]
    assert _t_of(s.fields["pixels"][rows, 0]).tolist() == [3, 4, 5, 6, 7]
    assert s.sampleable_range() == (3, 8)
    assert [s.row_of(t) for t in range(3, 9)] == [3, 4, 0, 1, 2, 3]
    with pytest.raises(IndexError):
        s.row_of(2)  # overwritten


def test_commit_markers_and_safety_margin():
    s = TimeMajorStorage(8, N, spec=dreamer_schema(), auto_commit=False)
    _fill(s, 6)
    assert s.committed_t == -1 and s.sampleable_range() == (0, 0)
    s.commit(3)
    assert s.sampleable_range() == (0, 4)
    s.commit(1)  # late/older commit: no-op
    assert s.committed_t == 3
    with pytest.raises(ValueError, match="only 6 rows have been written"):
        s.commit(6)
    s2 = TimeMajorStorage(8, N, spec=dreamer_schema(), safety_margin=2)
    _fill(s2, 11)
    assert s2.sampleable_range() == (11 - 8 + 2, 11)


def test_terminal_vs_truncation_flags():
    s = TimeMajorStorage(400, N, spec=dreamer_schema(), debug_checks=True)
    _fill(s, 400, end_prob=0.2, truncate_frac=0.5)
    f = s.fields
    term, trunc, cont = f["terminated"], f["truncated"], f["continue_"]
    assert term.any() and trunc.any()
    assert bool((cont[term] == 0.0).all())
    assert bool((cont[trunc] == 1.0).all())
    assert bool((cont[~term] == 1.0).all())
    # the row after an episode end is is_first with reward 0 and episode_id + 1
    ends = (term | trunc)[:-1]
    assert bool(f["is_first"][1:][ends].all())
    assert bool((f["reward"][1:][ends] == 0).all())
    assert bool((f["episode_id"][1:][ends] == f["episode_id"][:-1][ends] + 1).all())


def test_check_invariants_positive_with_wraparound():
    s = TimeMajorStorage(7, N, spec=dreamer_schema(), debug_checks=True)
    _fill(s, 40, end_prob=0.3)
    s.check_invariants()


def _good_storage() -> tuple[TimeMajorStorage, SyntheticSteps]:
    s = TimeMajorStorage(16, N, spec=dreamer_schema())
    src = _fill(s, 5, end_prob=0.0)
    return s, src


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda r: r["episode_id"].__setitem__(2, r["episode_id"][2] + 1), "episode_id changed"),
        (
            lambda r: (
                r["is_first"].__setitem__(2, True),
                r["episode_id"].__setitem__(2, r["episode_id"][2] + 2),
            ),
            "must increase by exactly 1",
        ),
        (lambda r: r["continue_"].__setitem__(2, 0.5), "is not 0 or 1"),
        (lambda r: r["continue_"].__setitem__(2, 0.0), "terminated=False"),
    ],
)
def test_check_invariants_negative(mutate, match):
    s, src = _good_storage()
    row = src.step()
    mutate(row)
    s.write(row)
    with pytest.raises(ReplayInvariantError, match=match) as e:
        s.check_invariants()
    assert "env 2, row t=5 (ring row 5)" in str(e.value)


def test_debug_checks_raise_on_the_bad_write_and_missing_reset():
    s = TimeMajorStorage(16, N, spec=dreamer_schema(), debug_checks=True)
    src = _fill(s, 3, end_prob=0.0)
    row = src.step()
    row["terminated"][1] = True
    row["continue_"][1] = 0.0
    s.write(row)  # a proper terminal row
    bad = src.step()  # SyntheticSteps did not see the end: no is_first on env 1
    with pytest.raises(ReplayInvariantError, match="env 1, row t=4.*deferred reset expected"):
        s.write(bad)


def test_bad_write_shape_dtype_and_keys():
    s = TimeMajorStorage(4, N, spec=dreamer_schema())
    src = SyntheticSteps(N, torch.Generator().manual_seed(0))
    row = src.step()
    row["reward"] = row["reward"].double()
    with pytest.raises(ValueError, match="step\\['reward'\\] is \\(4,\\) torch.float64"):
        s.write(row)
    row = src.step()
    row["pixels"] = torch.zeros(N, 72, 80, dtype=torch.uint8)
    with pytest.raises(ValueError, match="expects \\(4, 1, 72, 20\\) torch.uint8"):
        s.write(row)
    row = src.step()
    row["index"] = torch.zeros(N)
    with pytest.raises(KeyError, match="TimeMajorWriter"):
        s.write(row)
    assert s.total_steps == 0  # nothing half-written counted
    with pytest.raises(ValueError, match="capacity"):
        TimeMajorStorage(0, N)
    with pytest.raises(RuntimeError, match="no fields yet"):
        TimeMajorStorage(4, N).obs_slot(0)
    with pytest.raises(ValueError, match="first dim must be num_envs"):
        TimeMajorStorage(4, N).write({"x": torch.zeros(N + 1)})


def test_empty_resets_counters():
    s = TimeMajorStorage(4, N, spec=dreamer_schema())
    _fill(s, 6)
    s._empty()
    assert (s.total_steps, s.size, s.committed_t) == (0, 0, -1)


def test_rejected_write_leaves_the_oldest_row_intact_when_full():
    s = TimeMajorStorage(3, N, spec=dreamer_schema())
    src = _fill(s, 3)
    before = {k: v[0].clone() for k, v in s.fields.items()}
    row = src.step()
    row["episode_id"] = row["episode_id"].long()  # last key is wrong: nothing may be copied
    with pytest.raises(ValueError, match="episode_id"):
        s.write(row)
    for k, v in before.items():
        assert torch.equal(s.fields[k][0], v), k


def test_torchrl_cursor_and_mutation_revision_follow_the_counters():
    s = TimeMajorStorage(3, N, spec=dreamer_schema())
    assert s._last_cursor_index is None
    seen = [s._mutation_revision]
    src = _fill(s, 4)
    assert s._last_cursor_index == 0  # t=3 went to ring row 0
    seen.append(s._mutation_revision)
    s[1] = src.step()  # TorchRL __setitem__: in-place overwrite of a held row
    assert torch.equal(s.fields["pixels"][1], torch.full((N, 1, 72, 20), 4, dtype=torch.uint8))
    seen.append(s._mutation_revision)
    s._empty()
    seen.append(s._mutation_revision)
    _fill(s, 1)
    seen.append(s._mutation_revision)
    assert seen == sorted(set(seen))  # strictly increasing


def test_pickle_round_trip_keeps_field_views_shared():
    import pickle

    s = TimeMajorStorage(5, N, spec=dreamer_schema())
    src = _fill(s, 7)
    r = pickle.loads(pickle.dumps(s))
    assert (r.total_steps, r.head, r._last_cursor_index) == (7, 2, 1)
    r.write(src.step())  # t=7 -> ring row 2
    assert int(r.get((torch.tensor([2]), torch.tensor([0])))["pixels"][0, 0, 0, 0]) == 7
    assert int(r._storage["pixels"][2, 0, 0, 0, 0]) == 7
