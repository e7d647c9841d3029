"""The ``cuda`` backend's choreography, proven on a CPU through its twin (``cuda-twin``).

``StreamTwin`` runs the ``cuda`` backend's code path (``StreamSync``: two streams, the commit /
window_done / policy_ready events) over host streams whose vector clocks order ops the way CUDA
does, and checks every op of the collector's threads: a race between the two streams, memory
reused across streams, or a host sync in a hot loop raises ``StreamOrderError``. Here:

- the twin itself: what it accepts and what it refuses;
- the collector under the twin: each of its waits removed is caught; the same run as
  ``threaded`` (real tiny learner, plain and ``capture=True``); episode statistics read from
  another thread; the writer margin that keeps the actor off rows a sampled batch still reads;
  busy time and overlap reported by every backend;
- an async fuzz over ``reference`` / ``threaded`` / ``cuda-twin`` (random N, T, commit
  stride, ratio, window, ...; a fixed seed per case), each run under a watchdog that fails with
  the collector's counters instead of hanging: no deadlock, the asked replay ratio, equal
  updates on every backend, no sequence read across the write pointer, policy versions monotone;
- on a GPU (skipped without CUDA): the same fuzz on the real ``cuda`` backend, and the maze
  trained with ``--backend cuda --capture`` (overlap > 0, ratio kept).
"""

from __future__ import annotations

import random
import sys
import threading
import traceback
import warnings

import pytest
import torch
from conftest import requires_cuda
from test_collector_toys import CounterEnv, make_collector, make_stub_collector

from torchrl_dreamer.collectors import AsyncDreamerCollector
from torchrl_dreamer.collectors.metrics import OverlapMeter
from torchrl_dreamer.collectors.stream_twin import StreamTwin
from torchrl_dreamer.collectors.streams import StreamOrderError

BACKENDS = ["reference", "threaded", "cuda-twin"]


# ---------------------------------------------------------------------------------- watchdog
def collector_dump(c: AsyncDreamerCollector) -> str:
    """The collector's counters, events, versions, trace tail and its threads' stacks."""
    lines = [repr(c), c._diagnostic()]
    lines.append(
        f"windows={c.windows} publications={c.publications} granted={c.limiter.inserts} "
        f"samples={c.limiter.samples} max_backlog={c.max_backlog} total_frames={c.total_frames} "
        f"policy_steps={c.policy_steps} actor_done={c._actor_done} stop={c._stop}"
    )
    if c.trace:
        lines.append(f"last events: {c.trace[-12:]}")
    frames = sys._current_frames()
    for th in threading.enumerate():
        if th.name.startswith(("dreamer", "guarded")) and th.ident in frames:
            stack = "".join(traceback.format_stack(frames[th.ident])[-6:])
            lines.append(f"--- thread {th.name}:\n{stack}")
    return "\n".join(lines)


def run_guarded(c: AsyncDreamerCollector, seconds: float = 120.0) -> dict:
    """``c.run()`` in a daemon thread; past ``seconds`` the test fails with
    :func:`collector_dump` (a deadlock never hangs CI). Errors of the run are re-raised."""
    result: dict = {}
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.update(c.run())
        except BaseException as err:  # noqa: BLE001 - re-raised below
            error.append(err)

    th = threading.Thread(target=target, name="guarded-run", daemon=True)
    th.start()
    th.join(seconds)
    if th.is_alive():
        dump = collector_dump(c)
        c.shutdown(timeout=5, close_env=False)
        pytest.fail(f"collector did not finish within {seconds}s (deadlock?):\n{dump}")
    if error:
        raise error[0]
    return result


# ---------------------------------------------------------------------------------- the twin
def _twin() -> StreamTwin:
    twin = StreamTwin()
    twin.begin()
    return twin


def test_twin_orders_reads_and_writes_like_cuda_events():
    """A read after the writer's event is fine; a write over rows another stream read, before
    that stream's event was waited, is a race (both directions are checked)."""
    twin = _twin()
    rows = torch.zeros(8, 4)
    with twin.thread_scope():
        with twin.actor_context():
            rows[2].fill_(1.0)
            twin.record_commit()
        with twin.learner_context():
            twin.learner_wait_commit()
            total = rows[2].sum()
            twin.record_policy_ready()
        with twin.actor_context():
            twin.actor_wait_policy_ready()
            rows[2].fill_(2.0)  # after policy_ready: the learner's read is ordered before
        with twin.learner_context():
            rows[5].sum()  # a row the actor never wrote: nothing to order
        with twin.actor_context(), pytest.raises(StreamOrderError, match="race on the actor"):
            rows[5].fill_(3.0)  # write-after-read, no wait on the learner
    assert float(total) == 4.0


def test_twin_tracks_gathered_rows_one_by_one():
    """index_select reads only the rows it gathers: the actor may write others meanwhile."""
    twin = _twin()
    ring = torch.zeros(16, 3, 2)
    flat = ring.view(48, 2)
    with twin.thread_scope():
        with twin.learner_context():
            flat.index_select(0, torch.tensor([0, 4, 7]))  # cells of rows 0, 1 and 2
        with twin.actor_context():
            ring[9].fill_(1.0)  # not gathered: fine
            with pytest.raises(StreamOrderError, match="index_select"):
                ring[1].fill_(1.0)


def test_twin_refuses_event_recorded_on_the_wrong_stream():
    twin = _twin()
    with twin.learner_context(), pytest.raises(StreamOrderError, match="actor stream"):
        twin.record_commit()
    with twin.actor_context(), pytest.raises(StreamOrderError, match="learner stream"):
        twin.learner_wait_commit()


def test_twin_refuses_host_syncs_in_hot_loops_but_not_in_host_read():
    twin = _twin()
    x = torch.ones(3)
    with twin.thread_scope():
        with twin.learner_context():
            with pytest.raises(StreamOrderError, match="host sync in the learner"):
                x.sum().item()
            with pytest.raises(StreamOrderError, match="nonzero"):
                x.nonzero()
            with twin.host_read():
                assert x.sum().item() == 3.0
        assert bool(x.all())  # on the default stream, outside the hot loops


def test_twin_reader_must_wait_for_the_commit():
    """Rows committed by the actor stream, read from another thread's stream: only after
    ``reader_wait_commit`` (what ``readable_committed_t`` does)."""
    twin = _twin()
    rows = torch.zeros(8, 4)
    with twin.thread_scope():
        with twin.actor_context():
            rows[1].fill_(1.0)
            twin.record_commit()
        with pytest.raises(StreamOrderError, match="race on the default"):
            rows[1].sum()
        twin.reader_wait_commit()
        rows[1].sum()


def test_twin_flags_memory_reused_while_another_stream_uses_it():
    """CUDA's caching allocator hands a freed block back to its stream at once: a tensor made
    on the actor stream and read by the learner must outlive the learner's read. (Which block
    the CPU allocator returns varies, so the reuse is handed to the twin directly: a fresh
    tensor at the same address.)"""
    twin = _twin()
    with twin.thread_scope():
        with twin.actor_context():
            a = torch.full((4096,), 1.0)
            twin.record_commit()
        with twin.learner_context():
            twin.learner_wait_commit()
            a.sum()
        device, stream = twin.twin, twin.actor_stream
        with twin.learner_context():  # another stream's allocation there is not a hazard
            device._fresh(a, twin.learner_stream, "empty", "test")
        device._history.clear()
        with twin.actor_context():
            a = torch.full((4096,), 1.0)
            twin.record_commit()
        with twin.learner_context():
            twin.learner_wait_commit()
            a.sum()
        with pytest.raises(StreamOrderError, match="memory reuse hazard on the actor"):
            device._fresh(a, stream, "empty", "test")


def test_twin_check_false_keeps_the_discipline_checks_only():
    twin = StreamTwin(check=False)
    twin.begin()
    rows = torch.zeros(4)
    with twin.thread_scope():
        with twin.actor_context():
            rows.fill_(1.0)
        with twin.learner_context():
            rows.sum()  # unordered, but not watched
    assert twin.errors == [] and twin.twin.ops == 0
    with twin.learner_context(), pytest.raises(StreamOrderError):
        twin.record_window_done()


def test_overlap_meter_counts_only_time_both_sides_were_busy():
    m = OverlapMeter()
    m.add("learner", 0.0, 1.0)
    m.add("actor", 0.5, 3.0)
    m.add("learner", 2.0, 2.5)
    m.add("learner", 4.0, 5.0)  # the actor is idle
    m.add("actor", 5.0, 6.0)  # touches, does not overlap
    assert m.busy == {"actor": 3.5, "learner": 2.5}
    assert m.overlap == pytest.approx(1.0)
    assert m.efficiency() == pytest.approx(1.0 / 2.5)
    assert m.intervals == {"actor": 2, "learner": 3}
    m.restart()  # a new run whose clock starts over
    m.add("actor", 0.0, 1.0)
    m.add("learner", 0.0, 1.0)
    assert m.overlap == pytest.approx(2.0)


# ------------------------------------------------------------------------- the collector
@pytest.mark.parametrize("wait", ["learner_wait_commit", "actor_wait_policy_ready",
                                  "learner_wait_window_done", "begin"])
def test_cuda_twin_catches_each_missing_wait(wait):
    """Remove one wait of the cuda choreography: the twin names the race."""
    c = make_stub_collector("cuda-twin", total_frames=256, capacity=48)
    setattr(c.stream_sync, wait, lambda: None)
    with pytest.raises(StreamOrderError, match="race on the"):
        run_guarded(c, 60.0)


def test_cuda_twin_with_checked_reads_every_update():
    """log_every=1: metrics and fail-fast flags are read at every update, on the learner's
    stream (a read on another stream would race with the update that wrote them)."""
    c = make_stub_collector("cuda-twin", total_frames=160, log_every=1)
    logs = []
    for td in c:
        logs.append(td)
    assert c.updates == len(logs) > 0 and c.stream_sync.errors == []
    assert c.failfast.check_every == 1


def test_cuda_twin_same_run_as_threaded():
    """The real tiny learner on both backends: the prefill rows are identical, every granted
    gradient step is taken (the same count), the ratio is kept, the learner only sampled
    committed rows, and the twin found no race or host sync in the hot loops."""
    thr = make_collector("threaded", total_frames=96, replay_ratio=0.125, learning_starts=32)
    run_guarded(thr)
    twin = make_collector("cuda-twin", total_frames=96, replay_ratio=0.125, learning_starts=32)
    twin_logs = list(twin)
    assert twin.stream_sync.errors == [] and twin.stream_sync.twin.ops > 0
    assert twin.updates == thr.updates == twin.limiter.inserts > 0
    assert twin.versions["lag"] == 0
    assert twin.replay_ratio_actual() == pytest.approx(0.125, rel=0.1)
    prefill = 32 // twin.num_envs  # random actions: the same rows on every backend
    for key, val in twin.storage.fields.items():
        assert torch.equal(val[:prefill], thr.storage.fields[key][:prefill]), key
    for td in twin_logs:
        assert td["sample_t_max"] <= td["committed_t"]
    twin.storage.check_invariants()
    assert twin.failfast.check_every == twin.config.log_every  # flags read only when logging


def test_cuda_twin_with_the_captured_learner():
    """capture=True (on a CPU its static-buffer twin: every batch copied into the buffers a
    CUDA graph would read) under the cuda-twin: the staging copy and the update stay on the
    learner stream, the weights reach the player in order."""
    with pytest.warns(RuntimeWarning, match="capture=True"):
        c = make_collector("cuda-twin", total_frames=96, replay_ratio=0.125, capture=True)
    run_guarded(c)
    assert c.learner.capture and c.learner._static is not None
    assert c.stream_sync.errors == []
    assert c.updates == c.limiter.inserts > 0 and c.versions["lag"] == 0


def test_episode_statistics_read_from_another_thread_under_the_twin():
    """What the trainer does between metric yields: read committed rows (EpisodeTracker) up to
    ``readable_committed_t()``, from the caller's thread; the twin watches those reads."""
    from torchrl_dreamer.trainers.episodes import EpisodeTracker

    c = make_stub_collector("cuda-twin", total_frames=320, capacity=256, log_every=1)
    tracker = EpisodeTracker(c.num_envs)
    episodes = 0
    for _ in c:
        with c.stream_sync.thread_scope():
            episodes += len(tracker.update(c.storage, upto=c.readable_committed_t()))
    episodes += len(tracker.update(c.storage))
    assert c.stream_sync.errors == [] and episodes > 0
    assert tracker.next_t == c.storage.committed_t + 1


@pytest.mark.parametrize("backend", ["threaded", "cuda-twin"])
def test_writer_margin_keeps_the_actor_off_sampled_rows(backend):
    """A window longer than the safety margin on a ring that wraps: the actor would overwrite
    rows a sampled batch still has to read. The collector keeps steps_per_rollout + 1 of the
    oldest rows out of sampling (again after a replay load resets the margin)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        c = make_stub_collector(backend, total_frames=320, capacity=20, steps_per_rollout=8,
                                seq_len=4, min_ready_steps=4, safety_margin=4, commit_stride=2,
                                replay_ratio=0.5, max_learner_steps_per_tick=64)
    assert AsyncDreamerCollector.writer_margin(c.config) == 9
    run_guarded(c)
    assert c.storage.safety_margin == 9 and c.storage.total_steps > 2 * c.storage.capacity
    c.storage.safety_margin = 4  # what loading a replay saved with the old margin does
    c.run(total_frames=480)
    assert c.storage.safety_margin == 9
    assert int(c.learner.bad) == 0 and int(c.learner.checked) == c.updates * 4
    assert AsyncDreamerCollector.writer_margin(
        make_stub_collector("reference").config) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_busy_time_and_overlap_reported_by_every_backend(backend):
    """Every backend reports actor / learner busy time and overlap; on the cuda backends the
    intervals are timed by events of the two streams (one per window, one per update)."""
    c = make_stub_collector(backend, total_frames=256)
    logs = list(c)
    s = c.summary()
    assert s["actor_busy_s"] > 0 and s["learner_busy_s"] > 0
    assert 0.0 <= s["overlap_s"] <= min(s["actor_busy_s"], s["learner_busy_s"]) + 1e-9
    assert s["overlap_eff"] == pytest.approx(
        OverlapMeter.efficiency_of(s["actor_busy_s"], s["learner_busy_s"], s["overlap_s"]))
    assert all("overlap_eff" in td.keys() for td in logs)
    assert c.overlap.intervals["learner"] == c.updates
    if backend == "reference":
        assert s["overlap_s"] == 0.0  # the window's timer stops while the learner runs
        assert c.overlap.intervals["actor"] >= c.windows
    else:
        assert c.overlap.intervals["actor"] == c.windows


# ------------------------------------------------------------------------------ the fuzz
def _fuzz_case(seed: int) -> tuple[dict, dict]:
    """Random valid collector settings (a fixed seed per case) and the stub's settings."""
    rng = random.Random(seed)
    seq_len = rng.choice([2, 3, 4, 8])
    spr = rng.choice([1, 2, 3, 5, 8, 12])
    commit = rng.randint(1, seq_len + 2)
    margin = seq_len + rng.choice([0, 2])
    cfg = dict(
        seq_len=seq_len, steps_per_rollout=spr, commit_stride=commit,
        min_ready_steps=seq_len + rng.choice([0, 3]), safety_margin=margin,
        replay_ratio=rng.choice([0.0, 0.0625, 0.2, 0.5, 1.0]),
        batch_size=rng.choice([1, 2, 4]),
        max_learner_steps_per_tick=rng.choice([1, 2, 5, 64]),
        off_policy_tolerance=rng.choice([1.0, 1.5, 3.0]),
        learning_starts=rng.choice([0, 8, 20]),
        log_every=rng.choice([1, 3, 7]),
        timeout_s=20.0, seed=seed,
    )
    n = rng.choice([1, 2, 3, 5])
    # a small ring, so that it wraps: the writer margin and the seam are exercised
    capacity = max(margin, spr + 1) + seq_len + commit + rng.randint(0, 16)
    run = dict(num_envs=n, capacity=capacity, total_frames=n * rng.randint(30, 80))
    return cfg, run


def _check_run(c: AsyncDreamerCollector, cfg: dict) -> None:
    """The guarantees every backend gives, checked after the run."""
    why = f"{c.config.backend} {cfg}"
    r = cfg["replay_ratio"]
    assert c.storage.committed_t == c.storage.total_steps - 1, why
    assert c.updates == c.limiter.inserts, why  # every granted step taken, none more
    rs = c.schedule.ratio_steps((c.storage.committed_t + 1) * c.num_envs)
    assert abs(c.updates - r * rs) <= 1 + 1e-9, why  # the ratio, to the schedule's one step
    assert c.versions["lag"] == 0, why
    assert int(c.learner.bad) == 0, why  # no sequence across the write pointer or overwritten
    assert int(c.learner.checked) == c.updates * cfg["batch_size"], why
    acted = [(int(v), host) for v, host in c.player.acted]
    assert acted, why
    versions = [v for v, _ in acted]
    assert versions == sorted(versions), why  # policy versions monotone
    assert all(v == host for v, host in acted), why  # the copy was complete when acted on
    assert versions[-1] <= c.updates, why


@pytest.mark.parametrize("case", range(8))
def test_backend_fuzz(case):
    """Random settings, one fixed seed per case, on every backend (each run under a watchdog):
    no deadlock, the asked ratio, the same number of gradient steps everywhere, no sequence
    sampled across the write pointer, policy versions monotone; the twin found no race."""
    cfg, run = _fuzz_case(1000 + case)
    updates = {}
    for backend in BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # commit_stride > seq_len / 2
            c = make_stub_collector(backend, **run, **cfg)
        run_guarded(c, 90.0)
        _check_run(c, cfg)
        updates[backend] = c.updates
        if backend == "cuda-twin":
            assert c.stream_sync.errors == []
    assert len(set(updates.values())) == 1, updates


# ------------------------------------------------------------------------------ on a GPU
@requires_cuda
@pytest.mark.parametrize("case", range(4))
def test_backend_fuzz_on_cuda(case):
    """The fuzz on the real cuda backend (everything on the GPU): the stub's checks run on the
    device, so a missing wait would show as a bad sequence or a stale policy version."""
    cfg, run = _fuzz_case(1000 + case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        c = make_stub_collector("cuda", device="cuda", **run, **cfg)
    run_guarded(c, 120.0)
    torch.cuda.synchronize()
    _check_run(c, cfg)


@requires_cuda
def test_cuda_backend_trains_the_maze_with_capture(tmp_path):
    """``--backend cuda --capture`` on the maze, briefly: the learner's CUDA graph and the
    emulator ran at the same time on their streams (device-timed overlap > 0), every granted
    gradient step was taken and the ratio kept."""
    from torchrl_dreamer.trainers import DreamerTrainer, TrainConfig

    cfg = TrainConfig(task="maze", preset="tiny", device="cuda", backend="cuda", capture=True,
                      num_envs=16, batch_size=8, seq_len=16, steps_per_rollout=16,
                      commit_stride=4, replay_capacity=8192, learning_starts=512,
                      replay_ratio=0.1, total_steps=4096, log_every=10, eval_episodes=0,
                      progress=False, logger="none", seed=0, log_dir=str(tmp_path))
    trainer = DreamerTrainer(cfg, quiet=True)
    try:
        row = trainer.train()
        c = trainer.collector
        s = c.summary()
    finally:
        trainer.close()
    assert row["policy_steps"] >= 4096 and s["updates"] == s["granted"] > 0
    assert s["replay_ratio_actual"] == pytest.approx(0.1, rel=0.05)
    assert s["overlap_eff"] > 0.0 and s["actor_busy_s"] > 0 and s["learner_busy_s"] > 0
    assert c.versions["lag"] == 0 and c.storage.committed_t == c.storage.total_steps - 1


def test_counter_env_rows_say_their_step():
    """The fuzz's env: replay row t holds observation t (what the stub learner relies on)."""
    c = make_stub_collector("reference", total_frames=64, replay_ratio=0.0)
    c.run()
    t = c.storage.fields["obs"][: c.storage.total_steps, :, 0]
    assert torch.equal(t, torch.arange(c.storage.total_steps, dtype=t.dtype)[:, None]
                       .expand_as(t))
    assert isinstance(c.env, CounterEnv) and c.driver._fast
