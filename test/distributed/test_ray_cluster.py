"""The distributed data plane on a real local Ray cluster (2 CPUs, loopback only).

End-to-end smoke with a runner killed mid-run, versioned weight fetches, backpressure under a
slowed learner, and replay-service checkpoint/restore, all as Ray actors. One cluster for the
module (Ray takes several seconds to start); skipped when ray is not installed.
"""

from __future__ import annotations

import time

import pytest
import torch
from test_ray_toys import TickFactory, register_for_ray

ray = pytest.importorskip(
    "ray", reason="ray is not installed: pip install 'ray[default]' (the [ray] extra)"
)

from torchrl_dreamer.distributed import (  # noqa: E402
    EnvRunner,
    RayDreamerTrainer,
    RayTrainingConfig,
    ReplayService,
    WeightStore,
    call,
    extract_weights,
    init_ray,
    pack_weights,
    remote_class,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    init_ray(num_cpus=2)
    register_for_ray()
    yield ray
    ray.shutdown()


def test_cluster_binds_to_loopback(cluster):
    assert cluster.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    assert {n["NodeManagerAddress"] for n in cluster.nodes()} == {"127.0.0.1"}


def _cfg(**kw):
    base = dict(num_runners=2, envs_per_runner=2, steps_per_rollout=8, capacity=4096, seq_len=8,
                batch_size=4, replay_ratio=0.05, learning_starts=32, total_steps=10**6,
                max_weight_lag=3, timeout_s=120.0)
    base.update(kw)
    return RayTrainingConfig(**base)


def _until(cond, trainer, what: str, seconds: float = 120.0) -> None:
    """Trains one update at a time until ``cond()`` (runners start/restart at their own pace)."""
    deadline = time.monotonic() + seconds
    while not cond():
        trainer.run(max_updates=1)
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


def test_end_to_end_kill_runner_and_checkpoint(cluster, tmp_path):
    f = TickFactory(num_envs=2)
    cfg = _cfg()
    trainer = RayDreamerTrainer(cfg, f.env, f.policy, f.learner)
    try:
        trainer.start()

        def slots():
            return call(trainer.service, "stats")["slots"]

        _until(lambda: slots().get("runner-0", {}).get("committed_t", -1) >= 8, trainer,
               "runner-0's first chunks")
        before = call(trainer.service, "slot_rows", "runner-0")
        trainer.pool.kill(0)
        _until(lambda: trainer.pool.restarts[0] == 1, trainer, "the restart")
        _until(lambda: slots()["runner-0"]["committed_t"] >= before["obs"].shape[0] + 8,
               trainer, "the restarted runner's chunks")
        trainer.run(max_updates=2)
        out = trainer.stop_runners()
        svc = out["service"]
        assert out["restarts"] == 1 and ("died", "runner-0") in out["runner_events"]
        assert svc["slots"]["runner-0"]["registrations"] == 2
        after = call(trainer.service, "slot_rows", "runner-0")
        for k, v in before.items():  # nothing committed before the kill was lost or changed
            assert torch.equal(after[k][: v.shape[0]], v), k
        call(trainer.service, "check_invariants")  # episode ids continue across the restart
        # Every grant taken was trained on, except the one batch prefetched in flight.
        assert out["updates"] + out["prefetched"] == svc["samples"] <= svc["inserts"]
        assert out["max_lag_seen"] <= cfg.max_weight_lag
        assert out["version"] == out["updates"] + 1  # publish_every=1, plus the initial version
        assert svc["max_policy_version_seen"] >= 2  # runners acted with published weights
        assert svc["active_runners"] == 0  # every runner disconnected cleanly
        assert out["metrics"] == {} or all(v == v for v in out["metrics"].values())

        # Checkpoint the (now idle) service, restore into a fresh actor: same data, same samples.
        path = call(trainer.service, "checkpoint", str(tmp_path / "ck"))
        restored = remote_class(ReplayService).remote(
            cfg.capacity, cfg.seq_len, replay_ratio=cfg.replay_ratio, max_queued=cfg.max_queued)
        got = call(restored, "restore", path)
        for key in ("policy_steps", "inserts", "samples"):
            assert got[key] == svc[key]
        for name, s in svc["slots"].items():
            assert got["slots"][name]["committed_t"] == s["committed_t"]
        a = call(trainer.service, "sample", 6, 0)
        b = call(restored, "sample", 6, 0)
        assert torch.equal(a[0]["obs"], b[0]["obs"]) and torch.equal(a[1]["start"], b[1]["start"])
        ray.kill(restored)
    finally:
        trainer.shutdown()


def test_versioned_weight_fetch(cluster):
    f = TickFactory(num_envs=2)
    svc = remote_class(ReplayService).remote(256, 8, max_queued=1e6)
    store = remote_class(WeightStore).remote()
    learner = f.learner()
    call(store, "publish", 1, [ray.put(pack_weights(extract_weights(learner), 1))])
    runner = remote_class(EnvRunner).remote("r", f.env, f.policy, svc, store, chunk_len=4)
    stats = call(runner, "run", 3)
    assert (stats["version"], stats["fetches"]) == (1, 1)  # no fetch while versions match
    assert call(store, "stats")["noop_fetches"] == 2
    with torch.no_grad():
        for p in learner.actor.parameters():
            p.mul_(-2.0)
    call(store, "publish", 2, [ray.put(pack_weights(extract_weights(learner), 2))])
    stats = call(runner, "run", 2)
    assert (stats["version"], stats["fetches"]) == (2, 2)
    expect = sum(p.double().sum() for m in (learner.world_model, learner.actor)
                 for p in m.parameters())
    assert call(runner, "weights_checksum") == pytest.approx(float(expect), rel=1e-9)
    assert call(store, "lag") == {"r": 0}
    for actor in (runner, svc, store):
        ray.kill(actor)


class SlowLearner(torch.nn.Module):
    """A learner slowed artificially: each update sleeps."""

    def __init__(self, delay: float = 0.05):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))
        self.delay = delay

    def update(self, batch):
        time.sleep(self.delay)
        return {"batch_rows": torch.tensor(float(batch.numel()))}


def test_backpressure_bounds_backlog_with_slow_learner_and_human_runner(cluster):
    f = TickFactory(num_envs=2)
    cfg = _cfg(replay_ratio=0.25, learning_starts=0, total_steps=10**9,
               off_policy_tolerance=1.0, human_runners=1, human_proportion=0.25)
    trainer = RayDreamerTrainer(cfg, f.env, None, SlowLearner)
    try:
        trainer.start()
        _until(lambda: call(trainer.human_service, "stats")["policy_steps"] > 0, trainer,
               "the human runner's first chunk")
        trainer.run(max_updates=30)
        out = trainer.stop_runners()
    finally:
        trainer.shutdown()
    svc = out["service"]
    per_chunk = cfg.replay_ratio * cfg.steps_per_rollout * cfg.envs_per_runner
    bound = cfg.max_queued + cfg.num_runners * per_chunk + 1
    assert svc["paused_replies"] > 0  # runners were told to pause
    assert svc["max_backlog"] <= bound  # granted-but-untaken steps stayed bounded
    # Hence collected data is bounded by what the learner consumed: no runaway memory.
    assert svc["policy_steps"] <= (svc["samples"] + bound) / cfg.replay_ratio + 64
    assert out["updates"] >= 30
    # The human-in-the-loop runner went through the router into its own, never-paused service.
    human = out["human_service"]
    assert human["policy_steps"] > 0 and human["paused_replies"] == 0
    assert set(human["slots"]) == {"human-0", "runner-0", "runner-1"}  # registered everywhere
    assert human["slots"]["runner-0"]["total_steps"] == 0  # agent rows never land there
    assert svc["slots"]["human-0"]["total_steps"] == 0
