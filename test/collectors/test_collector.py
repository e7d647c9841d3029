"""AsyncDreamerCollector on CPU with the real replay, player and learner (tiny preset).

Covers: a smoke run per CPU backend, starvation, policy_ready ordering (instrumented), a deadlock
fuzz over random valid configs (each under a timeout), reference determinism, the achieved replay
ratio, backpressure, fail-fast on NaN, logging, and the CUDA backend (skipped without a GPU).
"""

from __future__ import annotations

import json
import random
import threading
import time
import warnings

import pytest
import torch
from conftest import requires_cuda
from test_collector_toys import make_collector
from torchrl.record.loggers import CSVLogger

from torchrl_dreamer.collectors import (
    AsyncCollectorConfig,
    AsyncDreamerCollector,
    CollectorTimeout,
    NonFiniteError,
    default_weight_sync,
)

CPU_BACKENDS = ["reference", "threaded"]


def _checksum(*modules) -> float:
    return float(sum(p.detach().double().sum() for m in modules for p in m.parameters()))


def _run_with_watchdog(collector, seconds: float = 90.0):
    """Runs the collector in a thread; fails (instead of hanging CI) if it does not finish."""
    result, error = {}, []

    def target():
        try:
            result.update(collector.run())
        except BaseException as e:  # noqa: BLE001 - re-raised below
            error.append(e)

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(seconds)
    if th.is_alive():
        collector.shutdown(timeout=5, close_env=False)
        pytest.fail(f"collector did not finish within {seconds}s (deadlock?): {collector!r}")
    if error:
        raise error[0]
    return result


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_smoke(backend):
    c = make_collector(backend, total_frames=192, replay_ratio=0.125)
    logs = list(c)
    s = c.summary()
    assert c.env_steps == 48 and c.policy_steps == 192
    # every granted gradient step was taken (drained), and the weights were handed over
    assert c.updates == c.limiter.inserts > 0
    assert c.versions == {"actor": c.updates, "learner": c.updates, "lag": 0}
    assert c.storage.committed_t == c.storage.total_steps - 1 == 47
    assert len(logs) == c.updates // c.config.log_every
    for key in ("loss_world_model", "loss_actor", "loss_critic", "replay_ratio_actual",
                "replay_fill", "committed_t", "sample_t_min", "sample_t_max", "policy_lag",
                "learner_ms", "overlap_eff"):
        assert key in logs[-1].keys(), key
    # the learner only ever sampled committed rows
    assert logs[-1]["sample_t_max"] <= logs[-1]["committed_t"]
    assert s["replay_ratio_actual"] == pytest.approx(0.125, rel=0.05)
    assert c.stats()["completed"] and c.stats()["policy_version"] == c.updates
    if backend == "reference":
        assert c.overlap_efficiency() == 0.0  # sequential: busy intervals never overlap


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_starvation_tiny_rollouts(backend):
    """One env step per window: the learner still trains under a valid commit_stride."""
    c = make_collector(backend, total_frames=160, steps_per_rollout=1, commit_stride=2,
                       replay_ratio=0.125)
    _run_with_watchdog(c)
    assert c.windows == 40 and c.updates == c.limiter.inserts > 0
    assert c.replay_ratio_actual() == pytest.approx(0.125, rel=0.05)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_policy_ready_ordering(backend):
    """The weight copy completes before policy_ready; no window starts on a stale policy."""
    c = make_collector(backend, total_frames=192, record_trace=True, replay_ratio=0.125)
    snapshots = {0: _checksum(c.learner.world_model, c.learner.actor)}
    acts = []

    def weight_sync(player, learner):
        default_weight_sync(player, learner)
        snapshots[c.learner_version] = _checksum(learner.world_model, learner.actor)
        # the copy is complete here: the player already holds exactly these weights
        assert _checksum(player.world_model, player.actor) == snapshots[c.learner_version]
        assert not c.policy_ready.is_set()

    c.weight_sync = weight_sync
    policy = c.driver.policy

    def instrumented(td):
        # the player gets is_first, so it resets (h, z, prev_action) of envs that restarted
        assert td["is_first"].shape[0] == c.num_envs
        acts.append((c.actor_version, _checksum(c.player.world_model, c.player.actor)))
        return policy(td)

    c.driver.policy = instrumented
    _run_with_watchdog(c)
    assert acts, "the policy never acted"
    # every action came from the weights of the version the actor believed it had
    for version, checksum in acts:
        assert checksum == snapshots[version]
    trace = c.trace
    last_update, last_ready = 0, None
    for i, ev in enumerate(trace):
        if ev[0] == "update":
            last_update = ev[1]
        elif ev[0] == "policy_ready":
            # nothing the learner finished is left out of the published policy
            assert ev[1] == last_update
            if i > 0 and ev[1] != (last_ready if last_ready is not None else 0):
                assert trace[i - 1] == ("copy_done", ev[1])
            last_ready = ev[1]
        elif ev[0] == "window_start":
            assert ev[2] == last_ready, f"window {ev[1]} ran on {ev[2]}, ready was {last_ready}"
    assert sum(ev[0] == "window_start" for ev in trace) == c.windows


def test_threaded_overlaps_actor_and_learner():
    """Truly concurrent: gradient steps finish while the actor is inside a window.

    Once a commit has granted a step, the actor holds still inside its window until the learner
    has taken one (at most 30 s). Left to the scheduler, a short window on 2 busy cores can end
    before the learner's first step; held, only a learner that cannot run during a window fails.
    """
    c = make_collector("threaded", total_frames=384, record_trace=True, replay_ratio=0.0625,
                       steps_per_rollout=48, commit_stride=4, max_learner_steps_per_tick=64)
    step, waited = c.driver.step, []

    def held_step(*args, **kwargs):
        t = step(*args, **kwargs)
        if not waited and c.limiter.can_sample(1):
            deadline = time.monotonic() + 30.0
            while not any(ev[0] == "update" for ev in c.trace) and time.monotonic() < deadline:
                time.sleep(0.001)
            waited.append(t)
        return t

    c.driver.step = held_step
    _run_with_watchdog(c)
    assert waited, "no commit granted a gradient step during collection"
    inside, in_window = 0, False
    for ev in c.trace:
        if ev[0] in ("window_start", "window_end"):
            in_window = ev[0] == "window_start"
        elif ev[0] == "update" and in_window:
            inside += 1
    assert inside > 0
    assert c.versions["lag"] == 0 and c.updates == c.limiter.inserts


def test_deadlock_fuzz():
    """Random valid configs on the threaded backend must finish (each under a watchdog)."""
    rng = random.Random(1234)
    for _ in range(8):
        seq_len = rng.choice([2, 4, 8])
        cfg = dict(
            seq_len=seq_len,
            steps_per_rollout=rng.choice([1, 2, 3, 8]),
            commit_stride=rng.randint(1, seq_len + 2),  # > seq_len/2 is valid (warns)
            min_ready_steps=seq_len + rng.choice([0, 3]),
            safety_margin=seq_len + rng.choice([0, 2]),
            replay_ratio=rng.choice([0.0, 0.0625, 0.125, 0.3]),
            max_learner_steps_per_tick=rng.choice([1, 2, 5]),
            off_policy_tolerance=rng.choice([1.0, 1.5, 3.0]),
            learning_starts=rng.choice([0, 8, 20]),
            batch_size=2,
            log_every=rng.choice([1, 3]),
            timeout_s=30.0,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            c = make_collector("threaded", num_envs=rng.choice([1, 2, 3]),
                               total_frames=rng.choice([24, 48]), capacity=64, **cfg)
        _run_with_watchdog(c, 120.0)
        assert c.updates == c.limiter.inserts, cfg
        assert c.versions["lag"] == 0, cfg


def test_reference_determinism():
    """Same seed: bit-identical losses and replay contents; another seed differs."""
    def run(seed):
        c = make_collector("reference", seed=seed, total_frames=160, replay_ratio=0.125,
                           log_every=1)
        logs = [dict(td.items()) for td in c]
        fields = {k: v.clone() for k, v in c.storage.fields.items()}
        return c, logs, fields

    c1, logs1, f1 = run(0)
    c2, logs2, f2 = run(0)
    assert c1.updates == c2.updates > 0 and len(logs1) == len(logs2)
    for a, b in zip(logs1, logs2):
        for k in ("loss_world_model", "loss_actor", "loss_critic", "sample_t_min"):
            assert torch.equal(a[k], b[k]), k
    for k in f1:
        assert torch.equal(f1[k], f2[k]), k
    assert _checksum(c1.learner.world_model) == _checksum(c2.learner.world_model)
    _, logs3, f3 = run(1)
    assert any(not torch.equal(f1[k], f3[k]) for k in f1)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_replay_ratio_within_5_percent(backend):
    c = make_collector(backend, total_frames=192, replay_ratio=0.1875, log_every=1,
                       steps_per_rollout=4, learning_starts=16)
    logs = list(c)
    target = 0.1875
    assert c.replay_ratio_actual() == pytest.approx(target, rel=0.05)
    # while running, the learner never fell behind by more than the Atropos tolerance
    for td in logs:
        assert td["backlog"] <= c.max_backlog + target * c.num_envs * 4 + 1
    # granted steps follow the sheeprl schedule exactly, and all of them were taken
    assert c.updates == c.limiter.inserts


def test_backpressure_pauses_actor():
    """A learner capped at 1 step per tick with a high ratio: the actor must pause."""
    c = make_collector("reference", total_frames=96, replay_ratio=0.5, record_trace=True,
                       max_learner_steps_per_tick=1, off_policy_tolerance=1.0,
                       steps_per_rollout=2, commit_stride=2, learning_starts=0)
    _run_with_watchdog(c)
    starts = [ev for ev in c.trace if ev[0] == "window_start"]
    # the backlog at each window start respects the pause rule
    assert all(ev[3] <= c.max_backlog for ev in starts)
    # and publications outnumber windows: the learner ran ticks while the actor paused
    assert c.publications > c.windows
    assert c.updates == c.limiter.inserts


def test_failfast_on_nan(tmp_path):
    c = make_collector("reference", total_frames=160, replay_ratio=0.125)
    c.failfast.bundle_dir = tmp_path
    update = c.learner.update
    calls = [0]

    def poisoned(batch):
        calls[0] += 1
        out = update(batch)
        if calls[0] == 3:
            out.set("loss_world_model", torch.tensor(float("nan")))
        return out

    c.learner.update = poisoned
    with pytest.raises(NonFiniteError, match="loss_world_model") as err:
        c.run()
    report = json.loads((err.value.bundle / "report.json").read_text())
    assert report["step"] == 3 and report["offending"] == ["loss_world_model"]
    assert report["config"]["seq_len"] == c.config.seq_len
    assert len(report["batch"]["start"]) == c.config.batch_size
    assert max(report["batch"]["start"]) + c.config.seq_len - 1 <= c.storage.committed_t


def test_logger_and_state_dict(tmp_path):
    logger = CSVLogger("collector", log_dir=str(tmp_path))
    c = make_collector("reference", total_frames=128, replay_ratio=0.125)
    c.logger = logger
    c.run()
    names = {p.name for p in tmp_path.rglob("*.csv")}
    assert {"replay_ratio_actual.csv", "loss_world_model.csv", "policy_lag.csv"} <= names
    sd = c.state_dict()
    c2 = make_collector("reference", total_frames=128, replay_ratio=0.125)
    c2.load_state_dict(sd)
    assert c2.versions == c.versions and c2.limiter.inserts == c.limiter.inserts
    assert c2.env_steps == c.env_steps
    assert c2.schedule.state_dict() == c.schedule.state_dict()


def test_bad_wiring_messages():
    c = make_collector("reference")
    from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage

    cfg = c.config
    auto = TimeMajorStorage(256, 4, safety_margin=8)
    with pytest.raises(ValueError, match="auto_commit=False"):
        AsyncDreamerCollector(c.env, auto, c.sampler, c.player, c.learner, cfg)
    small = TimeMajorStorage(16, 4, safety_margin=8, auto_commit=False)
    with pytest.raises(ValueError, match="capacity"):
        AsyncDreamerCollector(c.env, small, c.sampler, c.player, c.learner, cfg)
    margin = TimeMajorStorage(256, 4, safety_margin=2, auto_commit=False)
    with pytest.raises(ValueError, match="safety_margin"):
        AsyncDreamerCollector(c.env, margin, c.sampler, c.player, c.learner, cfg)
    wrong_len = ChronologicalSliceSampler(slice_len=5, generator=torch.Generator())
    with pytest.raises(ValueError, match="slice_len=8"):
        AsyncDreamerCollector(c.env, c.storage, wrong_len, c.player, c.learner, cfg)
    no_gen = ChronologicalSliceSampler(slice_len=8)
    with pytest.raises(ValueError, match="Generator"):
        AsyncDreamerCollector(c.env, c.storage, no_gen, c.player, c.learner, cfg)
    with pytest.raises(TypeError, match="update"):
        AsyncDreamerCollector(c.env, c.storage, c.sampler, c.player, object(), cfg)


def test_actor_timeout_reports_state():
    """A learner that never publishes makes the actor fail with a diagnostic, not hang."""
    c = make_collector("threaded", total_frames=10_000, timeout_s=0.5, replay_ratio=0.0)
    c._publish = lambda: None  # break the hand-off on purpose
    with pytest.raises(CollectorTimeout, match="policy_ready"):
        _run_with_watchdog(c, 30.0)


@requires_cuda
def test_cuda_backend_smoke():
    from test_collector_toys import LineWalkEnv

    from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage
    from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
    from torchrl_dreamer.objectives import DreamerV3Learner

    cfg = AsyncCollectorConfig(steps_per_rollout=8, commit_stride=4, seq_len=8, batch_size=4,
                               replay_ratio=0.125, learning_starts=32, min_ready_steps=8,
                               safety_margin=8, max_learner_steps_per_tick=4, log_every=2,
                               backend="cuda", device="cuda", timeout_s=60.0)
    env = LineWalkEnv(4)  # CPU env; the learner and replay live on the GPU
    storage = TimeMajorStorage(256, 4, auto_commit=False, safety_margin=8, device="cpu")
    sampler = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(0))
    wm, actor, critic = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
    wm, actor, critic = wm.cuda(), actor.cuda(), critic.cuda()
    learner = DreamerV3Learner(wm, actor, critic)
    player = DreamerPlayer(wm, actor, num_envs=4)

    class CpuToCuda:
        def __call__(self, td):
            return player(td.to("cuda")).to("cpu")

        def __getattr__(self, name):
            return getattr(player, name)

    c = AsyncDreamerCollector(env, storage, sampler, CpuToCuda(), learner, cfg,
                              total_frames=192,
                              weight_sync=lambda p, lrn: player.load_from(lrn.world_model,
                                                                          lrn.actor))
    _run_with_watchdog(c, 120.0)
    assert c.updates == c.limiter.inserts > 0 and c.versions["lag"] == 0



def test_actor_error_propagates_threaded():
    """An env failure in the actor thread surfaces in the caller instead of hanging."""
    c = make_collector("threaded", total_frames=10_000, replay_ratio=0.0625)
    step = c.env._step
    calls = [0]

    def failing(td):
        calls[0] += 1
        if calls[0] == 30:
            raise RuntimeError("emulator exploded")
        return step(td)

    c.env._step = failing
    with pytest.raises(RuntimeError, match="emulator exploded"):
        _run_with_watchdog(c, 60.0)


def test_start_and_async_shutdown():
    c = make_collector("threaded", total_frames=-1, replay_ratio=0.0625)
    c.start()
    try:
        for _ in range(600):  # poll (no timing assertion): wait for the first gradient step
            if c.updates > 0:
                break
            threading.Event().wait(0.1)
        assert c.updates > 0
    finally:
        c.async_shutdown(timeout=30, close_env=False)
    assert not c._bg_thread.is_alive()
    assert c._actor_thread is None or not c._actor_thread.is_alive()


def test_precision_and_device_must_match_learner():
    c = make_collector("reference")
    cfg = AsyncCollectorConfig(**{**c.config.to_dict(), "precision": "bf16"})
    with pytest.raises(ValueError, match="autocast_dtype"):
        AsyncDreamerCollector(c.env, c.storage, c.sampler, c.player, c.learner, cfg)
    c.learner.autocast_dtype = torch.bfloat16
    AsyncDreamerCollector(c.env, c.storage, c.sampler, c.player, c.learner, cfg)  # consistent
    with pytest.raises(ValueError, match="precision='fp32'"):
        AsyncDreamerCollector(c.env, c.storage, c.sampler, c.player, c.learner, c.config)


def test_env_driver_state_roundtrip():
    """The actor's next input and episode ids survive a state_dict round trip."""
    c = make_collector("reference", total_frames=64, replay_ratio=0.0)
    c.run()
    sd = c.driver.state_dict()
    c2 = make_collector("reference", total_frames=64, replay_ratio=0.0)
    c2.driver.load_state_dict(sd)
    assert c2.driver.env_steps == c.driver.env_steps == 16
    for k, v in c.driver.current.items(include_nested=True, leaves_only=True):
        assert torch.equal(c2.driver.current[k], v), k
    assert torch.equal(c2.driver._episode_id, c.driver._episode_id)
