"""AsyncDreamerCollector with the real GameBoyEnv (maze, packed2 pixels, zero-copy rows).

Kept apart from ``test_collector.py``: the first GameBoyEnv in a process compiles the Warp
kernel (cached afterwards), which dominates this file's time on a cold cache.
"""

from __future__ import annotations

import pytest
import torch

from torchrl_dreamer.collectors import AsyncCollectorConfig, AsyncDreamerCollector


def _gameboy_collector(zero_copy: bool, backend: str = "reference"):
    try:
        from torchrl_dreamer.envs import GameBoyEnv
    except ImportError as err:  # pragma: no cover - the env package is another issue's
        pytest.skip(f"GameBoyEnv unavailable: {err}")
    from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema
    from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
    from torchrl_dreamer.objectives import DreamerV3Learner

    torch.manual_seed(0)
    env = GameBoyEnv("maze", num_envs=2, max_episode_steps=10)
    cfg = AsyncCollectorConfig(steps_per_rollout=4, commit_stride=2, seq_len=4, batch_size=2,
                               replay_ratio=0.0625, learning_starts=16, min_ready_steps=4,
                               safety_margin=4, log_every=1, backend=backend, timeout_s=120.0)
    storage = TimeMajorStorage(64, 2, spec=dreamer_schema(), auto_commit=False, safety_margin=4,
                               debug_checks=True)
    sampler = ChronologicalSliceSampler(slice_len=4, generator=torch.Generator())
    wm, actor, critic = make_dreamer("tiny", {"pixels": "packed2"},
                                     action_dim=int(env.action_spec.space.n))
    learner = DreamerV3Learner(wm, actor, critic)
    player = DreamerPlayer(wm, actor, num_envs=2)
    return AsyncDreamerCollector(env, storage, sampler, player, learner, cfg, total_frames=72,
                                 zero_copy=zero_copy)


def test_gameboy_env_zero_copy_rows():
    """GameBoyEnv renders frames straight into replay rows; rows equal the copying path's."""
    fast = _gameboy_collector(zero_copy=True)
    assert fast.driver._zero_copy_key == "pixels"
    fast.run()
    slow = _gameboy_collector(zero_copy=False)
    slow.run()
    assert fast.env_steps == slow.env_steps == 36
    n = fast.storage.total_steps  # (zero copy has also rendered row n, not yet written)
    for key, val in fast.storage.fields.items():
        assert torch.equal(val[:n], slow.storage.fields[key][:n]), key
    st = fast.storage
    st.check_invariants()  # episode ids / is_first / continue_ consistent across resets
    rows = torch.arange(st.total_steps - st.size, st.total_steps) % st.capacity
    is_first = st.fields["is_first"][rows]
    truncated = st.fields["truncated"][rows]
    assert bool(is_first[0].all())  # the first row starts every episode
    # deferred reset: the row after a truncated one is a reset row with reward 0
    nxt = is_first[1:][truncated[:-1]]
    assert nxt.numel() > 0 and bool(nxt.all())
    assert bool((st.fields["reward"][rows][is_first] == 0).all())
    assert fast.updates == fast.limiter.inserts > 0


def test_gameboy_env_threaded():
    """Threaded backend on the real env: replay invariants hold, every granted step taken."""
    c = _gameboy_collector(zero_copy=True, backend="threaded")
    c.run()
    c.storage.check_invariants()
    assert c.env_steps == 36 and c.updates == c.limiter.inserts > 0
    assert c.versions["lag"] == 0


def test_gameboy_env_cuda_twin():
    """The maze on the cuda backend's CPU twin: the emulator renders each next frame straight
    into a replay row (reported to the twin as a write of the actor stream), the learner
    gathers rows on its stream; the twin checks every such pair is ordered by the commit
    events. (Host syncs are not checked: on a CPU device GameBoyEnv tests for resets on the
    host, which its CUDA path never does.)"""
    c = _gameboy_collector(zero_copy=True, backend="cuda-twin")
    c.stream_sync.twin.host_syncs = False
    notes = []
    external_write = c.stream_sync.external_write
    c.stream_sync.external_write = lambda t: (notes.append(t.data_ptr()), external_write(t))
    c.run()
    c.storage.check_invariants()
    assert c.stream_sync.errors == [] and len(notes) == c.env_steps
    assert c.env_steps == 36 and c.updates == c.limiter.inserts > 0
    assert c.versions["lag"] == 0
