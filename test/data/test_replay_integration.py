"""Replay through TorchRL buffers, checkpoints, memmap backing, and RSSM-input shifting."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import ReplayBuffer, TensorDictReplayBuffer

from torchrl_dreamer.data import (
    ChronologicalSliceSampler,
    TimeMajorStorage,
    TimeMajorWriter,
    dreamer_inputs,
    dreamer_schema,
    shift_actions,
)
from torchrl_dreamer.data.synthetic import SyntheticSteps

N = 4


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _write(s: TimeMajorStorage, src: SyntheticSteps, steps: int) -> None:
    for _ in range(steps):
        s.write(src.step())


def _t_of(pixels: torch.Tensor) -> torch.Tensor:
    return pixels[..., 0, 0, 0].long()


# ---------------------------------------------------------------- TorchRL replay buffers
def test_tensordict_replay_buffer_add_extend_sample():
    src = SyntheticSteps(N, _gen(1), end_prob=0.2)
    rb = TensorDictReplayBuffer(
        storage=TimeMajorStorage(20, N, spec=dreamer_schema()),
        writer=TimeMajorWriter(),
        sampler=ChronologicalSliceSampler(slice_len=6, generator=_gen()),
        batch_size=3 * 6,
    )
    for _ in range(10):
        rb.add(TensorDict(src.step(), batch_size=[N]))
    # collector-style [N, T] batch: TorchRL transposes it (dim_extend=1) to time-major rows
    batch = torch.stack([TensorDict(src.step(), batch_size=[N]) for _ in range(15)], 1)
    rb.extend(batch)
    assert len(rb) == 20 * N and rb.storage.total_steps == 25
    data = rb.sample()
    assert data.batch_size == (6, 3)
    assert data["index"].shape == (6, 3, 2) and data["env_idx"].shape == (6, 3)
    t = _t_of(data["pixels"])
    assert bool((t == data["start"] + torch.arange(6)[:, None]).all())
    assert int(t.min()) >= 5  # only the newest 20 steps
    # storage order = time order of the extend batch
    assert torch.equal(rb.storage.fields["pixels"][24 % 20], batch["pixels"][:, -1])


@pytest.mark.filterwarnings("ignore:Using `add\\(\\)` with a TensorDict")
def test_plain_replay_buffer_with_default_writer_and_buffer_generator():
    s = TimeMajorStorage(12, N)
    rb = ReplayBuffer(
        storage=s,
        sampler=ChronologicalSliceSampler(slice_len=4),
        generator=_gen(3),
        batch_size=2 * 4,
    )
    src = SyntheticSteps(N, _gen(0))
    for _ in range(15):
        rb.add(TensorDict(src.step(), batch_size=[N]))
    data, info = rb.sample(return_info=True)
    assert data.batch_size == (4, 2) and set(info) >= {"env_idx", "start", "index"}
    # same generator state -> same sample, through the buffer as well
    rb2 = ReplayBuffer(
        storage=s, sampler=ChronologicalSliceSampler(slice_len=4), generator=_gen(3), batch_size=8
    )
    assert (rb2.sample() == data).all()
    # a direct write desynchronises RoundRobinWriter's cursor: clear error, not silent corruption
    s.write(src.step())
    with pytest.raises(IndexError, match="TimeMajorWriter"):
        rb.add(TensorDict(src.step(), batch_size=[N]))


def test_replay_buffer_without_any_generator_errors():
    rb = ReplayBuffer(
        storage=TimeMajorStorage(10, N),
        writer=TimeMajorWriter(),
        sampler=ChronologicalSliceSampler(slice_len=2),
        batch_size=4,
    )
    src = SyntheticSteps(N, _gen())
    for _ in range(5):
        rb.add(src.step())
    with pytest.raises(RuntimeError, match="explicit torch.Generator"):
        rb.sample()


# ---------------------------------------------------------------- checkpoints
def _sample(s: TimeMajorStorage, seed: int = 11):
    return ChronologicalSliceSampler(slice_len=5, generator=_gen(seed)).sample_sequences(s, 5 * 16)


def test_state_dict_round_trip_restores_the_ring_exactly():
    s = TimeMajorStorage(13, N, spec=dreamer_schema(), auto_commit=False, safety_margin=1)
    src = SyntheticSteps(N, _gen(2), end_prob=0.2)
    _write(s, src, 30)
    s.commit(27)
    sd = s.state_dict()
    r = TimeMajorStorage(13, N)  # lazily initialised from the checkpoint's schema
    r.load_state_dict(sd)
    assert (r.total_steps, r.head, r.size, r.committed_t, r.safety_margin) == (30, 4, 13, 27, 1)
    a, ia = _sample(s)
    b, ib = _sample(r)
    assert (a == b).all() and torch.equal(ia["start"], ib["start"])
    # writes continue at the same place
    row = src.step()
    s.write(row)
    r.write(row)
    assert all(torch.equal(s.fields[k], r.fields[k]) for k in s.fields)


def test_dumps_loads_round_trip(tmp_path):
    s = TimeMajorStorage(9, N, spec=dreamer_schema())
    _write(s, SyntheticSteps(N, _gen(4), end_prob=0.3), 20)
    s.dumps(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "meta.json").is_file()
    r = TimeMajorStorage(9, N, spec=dreamer_schema())
    r.loads(tmp_path / "ckpt")
    assert (r.total_steps, r.head, r.committed_t) == (20, 2, 19)
    assert all(torch.equal(s.fields[k], r.fields[k]) for k in s.fields)
    assert (_sample(s)[0] == _sample(r)[0]).all()
    with pytest.raises(ValueError, match="capacity=9 x num_envs=4"):
        TimeMajorStorage(10, N).loads(tmp_path / "ckpt")
    with pytest.raises(FileNotFoundError, match="not a TimeMajorStorage checkpoint"):
        r.loads(tmp_path)
    # a storage sized from the dump holds the same rows, head and commits
    f = TimeMajorStorage.from_dump(tmp_path / "ckpt")
    assert (f.capacity, f.num_envs, f.total_steps, f.head, f.committed_t) == (9, N, 20, 2, 19)
    assert all(torch.equal(s.fields[k], f.fields[k]) for k in s.fields)
    assert (_sample(s)[0] == _sample(f)[0]).all()
    with pytest.raises(FileNotFoundError, match="not a TimeMajorStorage checkpoint"):
        TimeMajorStorage.from_dump(tmp_path)


def test_replay_buffer_dumps_loads(tmp_path):
    def make(seed):
        return TensorDictReplayBuffer(
            storage=TimeMajorStorage(16, N, spec=dreamer_schema()),
            writer=TimeMajorWriter(),
            sampler=ChronologicalSliceSampler(slice_len=4, generator=_gen(seed)),
            batch_size=4 * 4,
        )

    rb = make(0)
    src = SyntheticSteps(N, _gen(0))
    for _ in range(20):
        rb.add(TensorDict(src.step(), batch_size=[N]))
    rb.dumps(tmp_path / "rb")
    expected = rb.sample()
    rb2 = make(123)
    rb2.loads(tmp_path / "rb")  # restores the ring and the sampler's generator state
    got = rb2.sample()
    assert (got == expected).all()


# ---------------------------------------------------------------- memmap backing
def test_memmap_backed_storage_round_trip(tmp_path):
    mm = TimeMajorStorage(11, N, spec=dreamer_schema(), memmap_dir=tmp_path / "mm")
    ram = TimeMajorStorage(11, N, spec=dreamer_schema())
    src_a = SyntheticSteps(N, _gen(6), end_prob=0.2)
    src_b = SyntheticSteps(N, _gen(6), end_prob=0.2)
    _write(mm, src_a, 25)
    _write(ram, src_b, 25)
    assert (tmp_path / "mm" / "pixels.memmap").stat().st_size == 11 * N * 1440
    assert (_sample(mm)[0] == _sample(ram)[0]).all()
    mm.dumps(tmp_path / "ckpt")
    back = TimeMajorStorage(11, N, spec=dreamer_schema(), memmap_dir=tmp_path / "mm2")
    back.loads(tmp_path / "ckpt")
    assert all(torch.equal(back.fields[k], ram.fields[k]) for k in ram.fields)
    with pytest.raises(ValueError, match="own memmap_dir"):
        mm.dumps(tmp_path / "mm")
    with pytest.raises(ValueError, match="memmap_dir needs device='cpu'"):
        TimeMajorStorage(4, N, device="cuda", memmap_dir=tmp_path / "x")


def test_memmap_1m_by_16_packed2_layout_on_disk(tmp_path):
    s = TimeMajorStorage(1_000_000, 16, spec=dreamer_schema(), memmap_dir=tmp_path)
    f = tmp_path / "pixels.memmap"
    assert f.stat().st_size == 1_000_000 * 16 * 1440  # 23 GB, sparse until written
    assert f.stat().st_blocks * 512 < 64 << 20
    src = SyntheticSteps(16, _gen())
    for _ in range(70):
        s.write(src.step())
    data, _ = ChronologicalSliceSampler(slice_len=64, generator=_gen()).sample_sequences(s, 64 * 4)
    assert data["pixels"].shape == (64, 4, 1, 72, 20)
    assert bool((_t_of(data["pixels"]) < 70).all())
    del s, data


# ---------------------------------------------------------------- RSSM inputs
def test_shift_actions_time_and_batch_major():
    # T=4, B=2, one-hot float actions of size 3
    a = torch.eye(3)[torch.tensor([[0, 1], [2, 2], [1, 0], [0, 1]])]
    first = torch.tensor([[0, 0], [0, 1], [0, 0], [1, 0]], dtype=torch.bool)
    prev = shift_actions(a, first)
    expected = torch.zeros(4, 2, 3)
    expected[1, 0] = a[0, 0]  # t=1: a_0
    expected[2] = a[1]  # t=2: a_1 (both envs)
    expected[3, 1] = a[2, 1]  # t=3 env 0 is_first -> 0
    assert torch.equal(prev, expected)
    bm = shift_actions(a.transpose(0, 1), first.transpose(0, 1), time_dim=1)
    assert torch.equal(bm, expected.transpose(0, 1))
    idx = torch.tensor([[0, 1], [2, 2], [1, 0], [0, 1]])
    assert torch.equal(shift_actions(idx, first, num_actions=3), expected)
    with pytest.raises(ValueError, match="num_actions"):
        shift_actions(idx, first)


def test_dreamer_inputs_on_a_replay_sample():
    s = TimeMajorStorage(60, N, spec=dreamer_schema())
    _write(s, SyntheticSteps(N, _gen(9), end_prob=0.3), 60)
    data, info = ChronologicalSliceSampler(slice_len=10, generator=_gen()).sample_sequences(
        s, 10 * 8
    )
    orig_first = data["is_first"].clone()
    out = dreamer_inputs(data, num_actions=8)
    assert bool(out["is_first"][0].all())
    assert torch.equal(out["is_first"][1:], orig_first[1:])
    assert torch.equal(data["is_first"], orig_first)  # sample untouched
    onehot = torch.nn.functional.one_hot(data["action"], 8).float()
    keep = ~out["is_first"][1:]
    assert torch.equal(out["prev_action"][1:][keep], onehot[:-1][keep])
    assert bool((out["prev_action"][0] == 0).all())
    assert bool((out["prev_action"][1:][~keep] == 0).all())
    assert torch.equal(out["reward"], data["reward"])  # targets stay on row t


def test_torchrl_random_sampler_respects_commits_and_dict_extend():
    from torchrl.data import RandomSampler

    s = TimeMajorStorage(10, N, spec=dreamer_schema(), auto_commit=False)
    rb = ReplayBuffer(
        storage=s,
        sampler=RandomSampler(),
        writer=TimeMajorWriter(),
        generator=_gen(),
        batch_size=200,
        dim_extend=0,
    )
    src = SyntheticSteps(N, _gen())
    rows = [src.step() for _ in range(15)]
    rb.extend({k: torch.stack([r[k] for r in rows]) for k in rows[0]})  # plain dict [T, N]
    assert s.total_steps == 15
    s.commit(12)
    t = _t_of(rb.sample()["pixels"])
    assert int(t.min()) >= 5 and int(t.max()) == 12
