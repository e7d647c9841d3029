"""ChronologicalSliceSampler: layout, seam, commits, determinism, is_first, bad input."""

from __future__ import annotations

import pickle

import pytest
import torch
from conftest import requires_cuda

from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema
from torchrl_dreamer.data.synthetic import SyntheticSteps

N = 4


def _storage(capacity: int, steps: int, seed: int = 0, **kw) -> TimeMajorStorage:
    s = TimeMajorStorage(capacity, N, spec=dreamer_schema(), **kw)
    src = SyntheticSteps(N, torch.Generator().manual_seed(seed), end_prob=0.2)
    for _ in range(steps):
        s.write(src.step())
    return s


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _t_of(pixels: torch.Tensor) -> torch.Tensor:
    return pixels[..., 0, 0, 0].long()


def test_time_major_shapes_info_and_data_match_storage():
    s = _storage(50, 30)
    sampler = ChronologicalSliceSampler(slice_len=8, generator=_gen())
    data, info = sampler.sample_sequences(s, 3 * 8)
    assert data.batch_size == (8, 3)
    assert data["pixels"].shape == (8, 3, 1, 72, 20)
    env, start = info["env_idx"], info["start"]
    assert env.shape == start.shape == (8, 3)
    assert bool((env == env[0]).all()) and bool((start == start[0]).all())  # one env per sequence
    for b in range(3):
        ts = torch.arange(start[0, b], start[0, b] + 8)
        for k, v in s.fields.items():
            assert torch.equal(data[k][:, b], v[ts % 50, env[0, b]]), k
    assert torch.equal(_t_of(data["pixels"]), start + torch.arange(8)[:, None])


def test_batch_major_and_n_samples_and_num_slices():
    s = _storage(50, 30)
    bm = ChronologicalSliceSampler(slice_len=8, generator=_gen(), time_major=False)
    data, info = bm.sample_sequences(s, 5 * 8)
    assert data.batch_size == (5, 8)
    assert torch.equal(_t_of(data["pixels"]), info["start"] + torch.arange(8))
    ns = ChronologicalSliceSampler(num_slices=2, n_samples=3, generator=_gen())
    data, info = ns.sample_sequences(s, 3 * 2 * 6)
    assert data.batch_size == (3, 6, 2)
    assert torch.equal(_t_of(data["pixels"]), info["start"] + torch.arange(6)[:, None])
    with pytest.raises(ValueError, match="not a multiple"):
        ns.sample(s, 13)


def test_wraparound_never_crosses_the_seam_and_only_newest_rows():
    s = _storage(5, 8)  # holds t = 3..7 in ring rows [3, 4, 0, 1, 2]
    sampler = ChronologicalSliceSampler(slice_len=2, generator=_gen())
    data, info = sampler.sample_sequences(s, 2 * 400)
    t = _t_of(data["pixels"])
    assert int(t.min()) == 3 and int(t.max()) == 7
    assert bool((t[1] == t[0] + 1).all())  # consecutive, never 7 -> 3
    assert set(info["start"][0].tolist()) == {3, 4, 5, 6}
    full = ChronologicalSliceSampler(slice_len=5, generator=_gen())
    data, _ = full.sample_sequences(s, 5 * 3)
    assert bool((_t_of(data["pixels"]) == torch.arange(3, 8)[:, None]).all())


def test_starts_and_envs_are_uniform():
    s = _storage(40, 100)  # holds t = 60..99; slice 11 -> 30 valid starts
    sampler = ChronologicalSliceSampler(slice_len=11, generator=_gen(5))
    _, info = sampler.sample(s, 11 * 30000)
    starts = info["start"][0] - 60
    counts = torch.bincount(starts, minlength=30).float()
    assert counts.numel() == 30 and int(starts.min()) == 0 and int(starts.max()) == 29
    assert float(counts.min()) > 0.85 * 1000 and float(counts.max()) < 1.15 * 1000
    env_counts = torch.bincount(info["env_idx"][0], minlength=N).float()
    assert float(env_counts.min()) > 0.95 * 7500


def test_is_first_inside_a_window_is_returned_unchanged():
    s = _storage(200, 200)
    first = s.fields["is_first"]
    sampler = ChronologicalSliceSampler(slice_len=16, generator=_gen(1))
    data, info = sampler.sample_sequences(s, 16 * 64)
    inside = data["is_first"][1:]
    assert bool(inside.any())  # sequences run through resets, none rejected or split
    rows = (info["start"] + torch.arange(16)[:, None]) % 200
    assert torch.equal(data["is_first"], first[rows, info["env_idx"]])
    assert torch.equal(data["episode_id"], s.fields["episode_id"][rows, info["env_idx"]])


def test_commit_markers_respected():
    s = _storage(30, 20, auto_commit=False)
    sampler = ChronologicalSliceSampler(slice_len=4, generator=_gen())
    with pytest.raises(ValueError, match="larger than the 0 committed rows"):
        sampler.sample(s, 4)
    s.commit(9)
    data, _ = sampler.sample_sequences(s, 4 * 500)
    assert int(_t_of(data["pixels"]).max()) == 9
    with pytest.raises(ValueError, match="slice_len=12 is larger than the 10 committed rows"):
        ChronologicalSliceSampler(slice_len=12, generator=_gen()).sample(s, 12)


def test_safety_margin_keeps_samples_away_from_the_overwrite_end():
    s = _storage(10, 25, safety_margin=3)  # holds t = 15..24, samples only 18..24
    data, _ = ChronologicalSliceSampler(slice_len=2, generator=_gen()).sample_sequences(s, 2 * 500)
    t = _t_of(data["pixels"])
    assert int(t.min()) == 18 and int(t.max()) == 24


def test_determinism_same_generator_state_same_data():
    s = _storage(64, 100)
    a = ChronologicalSliceSampler(slice_len=8, generator=_gen(7)).sample_sequences(s, 64)
    b = ChronologicalSliceSampler(slice_len=8, generator=_gen(7)).sample_sequences(s, 64)
    c = ChronologicalSliceSampler(slice_len=8, generator=_gen(8)).sample_sequences(s, 64)
    assert (a[0] == b[0]).all() and torch.equal(a[1]["start"], b[1]["start"])
    assert not torch.equal(a[1]["start"], c[1]["start"])
    # state_dict and pickling carry the generator state
    sm = ChronologicalSliceSampler(slice_len=8, generator=_gen(7))
    sd = sm.state_dict()
    x = sm.sample(s, 64)[1]["start"]
    sm.load_state_dict(sd)
    assert torch.equal(sm.sample(s, 64)[1]["start"], x)
    clone = pickle.loads(pickle.dumps(sm))
    assert torch.equal(clone.sample(s, 64)[1]["start"], sm.sample(s, 64)[1]["start"])


def test_requires_generator_and_valid_arguments():
    s = _storage(20, 20)
    with pytest.raises(RuntimeError, match="explicit torch.Generator"):
        ChronologicalSliceSampler(slice_len=4).sample(s, 8)
    with pytest.raises(TypeError, match="exactly one of slice_len and num_slices"):
        ChronologicalSliceSampler(slice_len=4, num_slices=2)
    with pytest.raises(ValueError, match="strict_length=False"):
        ChronologicalSliceSampler(slice_len=4, strict_length=False)
    with pytest.raises(TypeError, match="torch.Generator"):
        ChronologicalSliceSampler(slice_len=4, generator=0)
    from torchrl.data import LazyTensorStorage

    with pytest.raises(TypeError, match="needs a TimeMajorStorage"):
        ChronologicalSliceSampler(slice_len=4, generator=_gen()).sample(LazyTensorStorage(10), 4)


def test_window_follows_counters_on_a_large_ring():
    """Starts come from the counters alone (no scan): after many laps of a 1M-row ring every
    sequence starts inside the newest ``capacity`` steps."""
    s = TimeMajorStorage(1_000_000, 2, spec={"x": ((), torch.int32)})
    src_row = {"x": torch.zeros(2, dtype=torch.int32)}
    for _ in range(70):
        s.write(src_row)
    s._total = 10_000_000 + 70  # pretend many laps happened; counters alone define the window
    s._committed = s._total - 1
    idx, info = ChronologicalSliceSampler(slice_len=64, generator=_gen()).sample(s, 64 * 4)
    rows, env = idx
    assert rows.shape == (64, 4)
    assert bool((info["start"] >= s._total - 1_000_000).all())


@requires_cuda
def test_cuda_storage_matches_cpu():
    cpu = _storage(40, 60)
    cuda = TimeMajorStorage(40, N, spec=dreamer_schema(), device="cuda")
    src = SyntheticSteps(N, torch.Generator().manual_seed(0), end_prob=0.2, device="cuda")
    for _ in range(60):
        cuda.write(src.step())
    a, ia = ChronologicalSliceSampler(slice_len=8, generator=_gen(3)).sample_sequences(cpu, 64)
    b, ib = ChronologicalSliceSampler(slice_len=8, generator=_gen(3)).sample_sequences(cuda, 64)
    assert b.device.type == "cuda" and b["pixels"].is_cuda
    assert (a == b.cpu()).all()
    assert torch.equal(ia["start"], ib["start"].cpu())
    gc = torch.Generator(device="cuda").manual_seed(0)
    data, _ = ChronologicalSliceSampler(slice_len=8, generator=gc).sample_sequences(cuda, 64)
    assert data.batch_size == (8, 8)


def test_pending_obs_slot_excludes_the_oldest_row_when_full():
    s = _storage(6, 10)  # holds t = 4..9
    assert s.sampleable_range() == (4, 10)
    s.obs_slot(s.total_steps).fill_(0)  # overwrites ring row of t=4 before the write
    assert s.sampleable_range() == (5, 10)
    data, _ = ChronologicalSliceSampler(slice_len=1, generator=_gen()).sample_sequences(s, 300)
    assert int(_t_of(data["pixels"]).min()) == 5


def _with_events(s: TimeMajorStorage, events: list[tuple[int, int]]) -> None:
    """Clear ``terminated`` and flag the given (absolute step, env) rows."""
    col = s.fields["terminated"]
    col.zero_()
    for t, e in events:
        col[t % s.capacity, e] = True


@pytest.mark.parametrize("time_major", [True, False])
def test_event_fraction_sequences_cover_an_event_across_the_seam(time_major):
    s = _storage(50, 80)  # ring wrapped: steps 30..79 live, the seam at row 0
    lo, hi = s.sampleable_range()
    events = [(lo + 1, 2), (48, 0), (50, 3), (hi - 1, 1)]  # both ends and both sides of the seam
    _with_events(s, events)
    sampler = ChronologicalSliceSampler(slice_len=8, generator=_gen(3), time_major=time_major,
                                        event_key="terminated", event_fraction=0.5)
    hits = set()
    for _ in range(40):
        data, info = sampler.sample_sequences(s, 8 * 8)
        start = info["start"][0] if time_major else info["start"][:, 0]
        env = info["env_idx"][0] if time_major else info["env_idx"][:, 0]
        assert bool((start >= lo).all()) and bool((start + 8 <= hi).all())
        term = data["terminated"].reshape(data.batch_size)
        per_seq = term.any(0) if time_major else term.any(1)
        assert bool(per_seq[:4].all())  # the first round(0.5 * 8) sequences hold an event
        for b in range(4):
            ts = range(int(start[b]), int(start[b]) + 8)
            hits.update((t, int(env[b])) for t in ts if (t, int(env[b])) in events)
    assert hits == set(events)  # every event gets drawn, at the ring's ends and its seam


def test_event_key_reward_draws_sequences_around_paid_rows():
    """event_key="reward": every row with a nonzero float reward is an event (a food's +1 and a
    death's -1 alike), rows paying 0 are not."""
    s = _storage(50, 80)
    lo, hi = s.sampleable_range()
    rew = s.fields["reward"]
    rew.zero_()
    paid = [(lo + 10, 1, 1.0), (lo + 30, 3, -1.0), (hi - 2, 0, 0.25)]
    for t, e, r in paid:
        rew[t % s.capacity, e] = r
    cells = {(t, e) for t, e, _ in paid}
    sampler = ChronologicalSliceSampler(slice_len=8, generator=_gen(5), event_key="reward",
                                        event_fraction=1.0)
    hits = set()
    for _ in range(30):
        data, info = sampler.sample_sequences(s, 8 * 8)
        r = data["reward"].reshape(data.batch_size)
        assert bool((r != 0).any(0).all())  # every sequence holds a paid row
        for b in range(8):
            t0, e = int(info["start"][0, b]), int(info["env_idx"][0, b])
            hits.update((t, e) for t in range(t0, t0 + 8) if (t, e) in cells)
    assert hits == cells


def test_event_fraction_falls_back_to_uniform_and_rejects_bad_input():
    s = _storage(50, 30)
    _with_events(s, [])
    a = ChronologicalSliceSampler(slice_len=8, generator=_gen(1), event_key="terminated",
                                  event_fraction=1.0)
    b = ChronologicalSliceSampler(slice_len=8, generator=_gen(1))
    assert torch.equal(a.sample(s, 32)[1]["start"], b.sample(s, 32)[1]["start"])  # no event yet
    with pytest.raises(ValueError, match=r"event_fraction must lie in \[0, 1\]"):
        ChronologicalSliceSampler(slice_len=8, event_key="terminated", event_fraction=1.5)
    with pytest.raises(ValueError, match="needs event_key"):
        ChronologicalSliceSampler(slice_len=8, event_fraction=0.5)
    bad = ChronologicalSliceSampler(slice_len=8, generator=_gen(), event_key="won",
                                    event_fraction=0.5)
    with pytest.raises(KeyError, match="event_key 'won' is not a field"):
        bad.sample(s, 16)
    sd = a.state_dict()
    c = ChronologicalSliceSampler(slice_len=4, generator=_gen())
    c.load_state_dict(sd)
    assert (c.event_key, c.event_fraction) == ("terminated", 1.0)
    assert "event_fraction=1.0" in repr(c)
