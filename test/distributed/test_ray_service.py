"""The distributed data plane in-process (no Ray needed): replay service, weights, routing, runs.

Every piece is a plain object here; ``test_ray_cluster.py`` runs the same objects as Ray actors.
"""

from __future__ import annotations

import pytest
import torch
from conftest import requires_cuda
from tensordict import TensorDict
from test_ray_toys import OBS_DIM, TickFactory

from torchrl_dreamer.collectors import RateLimiterTimeout
from torchrl_dreamer.distributed import (
    AGENT,
    HUMAN,
    ControlModeRouter,
    EnvRunner,
    RayTrainingConfig,
    ReplayService,
    WeightStore,
    pack_weights,
    run_ray_training,
    unpack_weights,
)

torch.set_num_threads(1)


def _chunk(length: int, num_envs: int, t0: int, first_ep: int = 0, mode: int | None = None):
    """Rows t0..t0+length-1 of num_envs envs; obs[..., 0] = env, obs[..., 1] = absolute t."""
    t = torch.arange(t0, t0 + length, dtype=torch.float32)
    obs = torch.zeros(length, num_envs, OBS_DIM)
    obs[..., 0] = torch.arange(num_envs, dtype=torch.float32)
    obs[..., 1] = t[:, None]
    is_first = torch.zeros(length, num_envs, dtype=torch.bool)
    if t0 == 0:
        is_first[0] = True
    td = TensorDict({
        "obs": obs,
        "action": torch.zeros(length, num_envs, dtype=torch.int64),
        "reward": torch.ones(length, num_envs),
        "is_first": is_first,
        "continue_": torch.ones(length, num_envs),
        "terminated": torch.zeros(length, num_envs, dtype=torch.bool),
        "truncated": torch.zeros(length, num_envs, dtype=torch.bool),
        "episode_id": torch.full((length, num_envs), first_ep, dtype=torch.int32),
    }, [length, num_envs])
    if mode is not None:
        td["control_mode"] = torch.full((length, num_envs), mode, dtype=torch.int8)
    return td


def _service(**kw):
    args = dict(seq_len=4, replay_ratio=0.25, max_queued=8, seed=0)
    args.update(kw)
    return ReplayService(kw.pop("capacity", 64), **{k: v for k, v in args.items()
                                                    if k != "capacity"})


def test_register_report_disconnect():
    svc = _service()
    r = svc.register("a", num_envs=2, group="g1", weight=2.0)
    assert r["runner_id"] == 0 and r["learner_step"] == 0 and not r["stop"]
    svc.report(r["runner_id"], step=7, queued_steps=3, weight=0.5)
    s = svc.stats()["slots"]["a"]
    assert (s["reported_step"], s["queued_steps"], s["weight"], s["active"]) == (7, 3, 0.5, True)
    svc.add_chunk(r["runner_id"], _chunk(8, 2, 0))
    svc.disconnect(r["runner_id"])
    assert svc.stats()["active_runners"] == 0
    with pytest.raises(KeyError, match="register"):
        svc.add_chunk(r["runner_id"], _chunk(4, 2, 8))
    # Data of a disconnected runner stays sampleable.
    assert svc.slot_rows("a")["obs"].shape == (8, 2, OBS_DIM)
    with pytest.raises(ValueError, match="num_envs"):
        svc.register("a", num_envs=3)
    with pytest.raises(ValueError, match="num_envs=2"):
        svc.add_chunk(svc.register("a", 2)["runner_id"], _chunk(4, 3, 8))


def test_chunks_commit_and_sample_only_committed_rows():
    svc = _service(replay_ratio=1.0, max_queued=1000)
    rid = svc.register("a", num_envs=2)["runner_id"]
    assert svc.sample(2) is None  # nothing committed
    svc.add_chunk(rid, _chunk(3, 2, 0))
    assert svc.sample(2) is None  # fewer rows than seq_len
    svc.add_chunk(rid, dict(_chunk(9, 2, 3).items()))  # a plain dict of [L, N] tensors works
    batch, info = svc.sample(16)
    assert batch.shape == (4, 16)
    t = batch["obs"][..., 1]
    assert torch.equal(t[0], info["start"].float())
    assert torch.equal(t[1:] - t[:-1], torch.ones(3, 16))  # consecutive steps, one env each
    assert int(t.max()) <= 11
    assert torch.equal(batch["obs"][0, :, 0], info["env_idx"].float())


def test_group_weights_set_sequence_shares():
    svc = _service(replay_ratio=100.0, max_queued=1e9)
    a = svc.register("a", num_envs=1, group="ga", weight=3.0)["runner_id"]
    b = svc.register("b", num_envs=4, group="gb", weight=1.0)["runner_id"]
    svc.add_chunk(a, _chunk(16, 1, 0))
    svc.add_chunk(b, _chunk(16, 4, 0))
    _, info = svc.sample(4000)
    share_a = (info["group"] == info["groups"].index("ga")).float().mean().item()
    assert abs(share_a - 0.75) < 0.03  # group weight, not envs, sets the share
    svc.set_group_weight("ga", 0.0)
    _, info = svc.sample(100)
    assert info["groups"] == ["gb"]


def test_event_fraction_draws_its_share_around_paid_rows_across_slots():
    """The Ray replay's biased draw is the local one's (``replay.event_fraction`` /
    ``event_key``): its share of every batch covers a paid row, whatever the slots' split."""
    def paid(length, n, t0, cells):
        td = _chunk(length, n, t0)
        td["reward"].zero_()
        for t, e in cells:
            td["reward"][t - t0, e] = -2.0  # a negative payment counts too
        return td

    svc = _service(replay_ratio=100.0, max_queued=1e9, event_fraction=0.25, event_key="reward")
    a = svc.register("a", num_envs=2)["runner_id"]
    b = svc.register("b", num_envs=3)["runner_id"]
    svc.add_chunk(a, paid(40, 2, 0, [(30, 1)]))
    svc.add_chunk(b, paid(40, 3, 0, [(5, 0), (22, 2)]))
    for _ in range(20):
        batch, info = svc.sample(8)
        covered = (batch["reward"] != 0).any(0)  # [B]: the sequence holds a paid row
        assert int(covered.sum()) >= 2  # round(0.25 * 8), spread over both slots
    batch, info = svc.sample(4000)
    covered = (batch["reward"] != 0).any(0)
    assert 0.25 <= covered.float().mean().item() < 0.35  # the share plus the uniform hits
    slots = {info["slots"][int(i)] for i in info["slot"][covered]}
    assert slots == {"a", "b"}
    cells = {(info["slots"][int(s)], int(e)) for s, e in zip(info["slot"][covered],
                                                          info["env_idx"][covered])}
    assert cells == {("a", 1), ("b", 0), ("b", 2)}  # every paid row gets drawn
    plain = _service(replay_ratio=100.0, max_queued=1e9)
    plain.add_chunk(plain.register("a", num_envs=2)["runner_id"], paid(40, 2, 0, [(30, 1)]))
    batch, _ = plain.sample(4000)
    assert (batch["reward"] != 0).any(0).float().mean().item() < 0.1  # uniform: 4/37 x 1/2
    with pytest.raises(ValueError, match="event_fraction=1.5 must lie in"):
        _service(event_fraction=1.5, event_key="reward")
    with pytest.raises(ValueError, match="needs event_key"):
        _service(event_fraction=0.5)


def test_rate_limiter_pauses_runners_and_starves_learner():
    svc = _service(replay_ratio=0.5, max_queued=6, learning_starts=0)
    rid = svc.register("a", num_envs=2)["runner_id"]
    t, reply = 0, {"paused": False}
    while not reply["paused"]:
        queued_before = svc.stats()["queued"]
        assert queued_before <= 6  # a runner only sends while not paused
        reply = svc.add_chunk(rid, _chunk(4, 2, t))
        t += 4
        assert t < 100, "the service never paused the runner"
    assert reply["queued"] > 6 and svc.report(rid)["paused"]
    while svc.report(rid)["paused"]:
        assert svc.sample(2) is not None
    assert svc.stats()["queued"] == 6  # resumes as soon as the backlog is back within bounds
    while svc.sample(2) is not None:
        pass
    stats = svc.stats()
    assert stats["samples"] == stats["inserts"] > 6  # starved exactly when grants run out
    with pytest.raises(RateLimiterTimeout):
        svc.consume(1)


def test_restart_keeps_data_and_continues_episode_ids():
    svc = _service()
    rid = svc.register("a", num_envs=2)["runner_id"]
    first = _chunk(6, 2, 0, first_ep=0)
    first["episode_id"][3:] = 1
    first["is_first"][3] = True
    svc.add_chunk(rid, first)
    before = svc.slot_rows("a")
    # The runner dies; a new one registers under the same name and starts at episode 0 again.
    rid2 = svc.register("a", num_envs=2)["runner_id"]
    assert rid2 != rid
    with pytest.raises(KeyError):
        svc.add_chunk(rid, _chunk(2, 2, 6))
    svc.add_chunk(rid2, _chunk(4, 2, 0, first_ep=0))
    after = svc.slot_rows("a")
    for k, v in before.items():
        assert torch.equal(after[k][:6], v)
    assert after["episode_id"][6:].unique().tolist() == [2]
    svc.check_invariants()


@pytest.mark.parametrize("memmap", [False, True])
def test_checkpoint_restore_same_samples(tmp_path, memmap):
    root = tmp_path / "replay" if memmap else None
    svc = _service(root_dir=root, replay_ratio=1.0, max_queued=1000)
    a = svc.register("a", num_envs=2, group="x", weight=2.0)["runner_id"]
    b = svc.register("b", num_envs=1)["runner_id"]
    svc.add_chunk(a, _chunk(10, 2, 0))
    svc.add_chunk(b, _chunk(7, 1, 0))
    svc.sample(3)
    path = svc.checkpoint(tmp_path / "ckpt")
    expect, expect_info = svc.sample(5)
    restored = _service(root_dir=None if root is None else tmp_path / "replay2",
                        replay_ratio=1.0, max_queued=1000)
    stats = restored.restore(path)
    assert stats["active_runners"] == 0 and stats["samples"] == 1
    assert stats["slots"]["a"]["committed_t"] == 9 and stats["slots"]["a"]["weight"] == 2.0
    got, got_info = restored.sample(5)
    assert torch.equal(got["obs"], expect["obs"]) and got_info["slots"] == expect_info["slots"]
    # Runners re-register and continue writing after the restored rows.
    a2 = restored.register("a", num_envs=2, group="x", weight=2.0)["runner_id"]
    restored.add_chunk(a2, _chunk(2, 2, 0))
    assert restored.stats()["slots"]["a"]["committed_t"] == 11
    with pytest.raises(ValueError, match="capacity"):
        _service(capacity=32).restore(path)


def test_weight_store_fetches_only_new_versions():
    store = WeightStore()
    assert store.fetch("r", have=0) is None
    sd = {"a": torch.randn(3, 2), "b": torch.arange(5, dtype=torch.int64),
          "c": torch.tensor([True, False, True]), "d": torch.randn(4).to(torch.bfloat16),
          "e": torch.randn(2, 2, dtype=torch.float64), "f": torch.zeros(0)}
    store.publish(1, [pack_weights(sd, 1)])
    version, payload = store.fetch("r", have=0)
    assert version == 1
    back = unpack_weights(payload[0])
    assert all(torch.equal(back[k], v) and back[k].dtype == v.dtype for k, v in sd.items())
    assert store.fetch("r", have=1) is None
    store.publish(2, [pack_weights(sd, 2)])
    store.publish(3, [pack_weights(sd, 3)])
    assert store.lag() == {"r": 2} and store.max_lag() == 2
    with pytest.raises(ValueError, match="increase"):
        store.publish(3, [None])
    store.forget("r")
    assert store.max_lag() == 0
    assert (store.fetches, store.noop_fetches) == (1, 2)


def test_runner_fetches_weights_only_when_version_changes():
    f = TickFactory(num_envs=2)
    svc, store = _service(capacity=128, max_queued=1000), WeightStore()
    learner = f.learner()
    with torch.no_grad():
        for p in learner.actor.parameters():
            p.add_(0.5)
    from torchrl_dreamer.distributed import extract_weights

    store.publish(1, [pack_weights(extract_weights(learner), 1)])
    runner = EnvRunner("r", f.env, f.policy, svc, store, chunk_len=4)
    runner.run(max_chunks=3)
    assert (runner.version, runner.fetches) == (1, 1)
    assert store.noop_fetches == 2
    expect = sum(p.double().sum() for m in (learner.world_model, learner.actor)
                 for p in m.parameters())
    assert runner.weights_checksum() == pytest.approx(float(expect), rel=1e-9)
    store.publish(2, [pack_weights(extract_weights(learner), 2)])
    runner.run(max_chunks=1)
    assert (runner.version, runner.fetches) == (2, 2)
    assert svc.stats()["slots"]["r"]["max_policy_version"] == 2


def test_router_routes_by_control_mode_and_mixes():
    agent = _service(replay_ratio=10.0, max_queued=1e6)
    human = _service(rate_limited=False)
    router = ControlModeRouter({AGENT: agent, HUMAN: human}, seed=1)
    rid = router.register("r", num_envs=2)["runner_id"]
    router.add_chunk(rid, _chunk(8, 2, 0, mode=AGENT))
    assert router.sample(4)[1]["mode"].unique().tolist() == [AGENT]  # human empty: agent only
    router.add_chunk(rid, _chunk(8, 2, 0, mode=HUMAN))
    assert agent.stats()["policy_steps"] == 16 and human.stats()["policy_steps"] == 16
    mixed = _chunk(4, 2, 8, mode=AGENT)
    mixed["control_mode"][:, 1] = HUMAN
    with pytest.raises(ValueError, match="mixes control modes"):
        router.add_chunk(rid, mixed)
    samples_before = agent.stats()["samples"]
    batch, info = router.sample(2000)
    assert batch.shape == (4, 2000)
    assert abs((info["mode"] == HUMAN).float().mean().item() - 0.5) < 0.04  # equal by default
    assert agent.stats()["samples"] == samples_before + 1  # one grant per batch, agent side
    assert "control_mode" not in batch.keys()
    skewed = ControlModeRouter({AGENT: agent, HUMAN: human}, {AGENT: 0.0, HUMAN: 1.0})
    assert skewed.sample(50)[1]["mode"].unique().tolist() == [HUMAN]
    assert agent.stats()["samples"] == samples_before + 2


def test_config_validation_messages():
    with pytest.raises(ValueError, match="capacity"):
        RayTrainingConfig(capacity=10, seq_len=64)
    with pytest.raises(ValueError, match="runner_groups"):
        RayTrainingConfig(num_runners=2, runner_groups=["a"])
    with pytest.raises(ValueError, match="checkpoint_dir"):
        RayTrainingConfig(checkpoint_every_updates=5)
    cfg = RayTrainingConfig(num_runners=2, envs_per_runner=4, steps_per_rollout=16, replay_ratio=0.5)
    assert cfg.max_queued == 2.0 * 0.5 * 16 * 8


def _small_cfg(**kw):
    base = dict(num_runners=2, envs_per_runner=2, steps_per_rollout=8, capacity=256, seq_len=8,
                batch_size=4, replay_ratio=0.05, learning_starts=32, total_steps=320,
                max_weight_lag=2, use_ray=False, timeout_s=60.0)
    base.update(kw)
    return RayTrainingConfig(**base)


def test_in_process_training_with_human_runner(tmp_path):
    f = TickFactory(num_envs=2)
    cfg = _small_cfg(human_runners=1, checkpoint_dir=str(tmp_path / "ck"), checkpoint_every_updates=5)
    out = run_ray_training(cfg, f.env, f.policy, f.learner)
    svc = out["service"]
    assert out["updates"] >= 5 and out["updates"] == svc["samples"]
    assert svc["policy_steps"] >= 320 * 2 // 3  # agent share of the frames
    assert svc["samples"] <= svc["inserts"]
    assert out["max_lag_seen"] <= cfg.max_weight_lag
    assert all(r["stopped"] for r in out["runners"].values())
    assert svc["active_runners"] == 0
    assert (tmp_path / "ck" / "replay_human" / "service.json").is_file()
    assert out["metrics"] and all(v == v for v in out["metrics"].values())  # finite, no NaN


def test_sample_numpy_round_trip():
    from torchrl_dreamer.distributed import batch_from_numpy

    a, b = (_service(replay_ratio=1.0, max_queued=1000) for _ in range(2))
    for svc in (a, b):
        rid = svc.register("a", num_envs=3)["runner_id"]
        svc.add_chunk(rid, _chunk(12, 3, 0))
    batch, info = a.sample(5)
    got, got_info = batch_from_numpy(b.sample_numpy(5))  # same seed: the same draw
    assert got.batch_size == batch.batch_size
    for k, v in batch.items():
        assert torch.equal(got[k], v) and got[k].dtype == v.dtype
    assert torch.equal(got_info["start"], info["start"]) and got_info["slots"] == ["a"]
    assert batch_from_numpy(None) is None


def test_train_config_maps_to_a_gameboy_ray_run(tmp_path):
    """ray_config: the same names and units as the TrainConfig; the runners build their envs and
    players with the run's factories, the learner is the run's."""
    from dataclasses import replace

    from torchrl_dreamer.distributed import RayDreamerTrainer, ray_config
    from torchrl_dreamer.trainers import RunFactories, TrainConfig

    tc = TrainConfig(task="maze", num_envs=4, total_steps=96, replay_capacity=400,
                     seq_len=8, batch_size=2, replay_ratio=0.05, learning_starts=16,
                     steps_per_rollout=8, replay_backing="memmap", checkpoint_every=0,
                     log_dir=str(tmp_path / "run"), backend="ray")
    cfg = ray_config(tc, use_ray=False)
    assert (cfg.num_runners, cfg.envs_per_runner, cfg.steps_per_rollout) == (2, 2, 8)
    assert cfg.capacity == 100 + 8 + 8 and cfg.total_steps == 96
    assert (cfg.replay_ratio, cfg.learning_starts, cfg.checkpoint_every_updates) == (0.05, 16, 0)
    assert (cfg.event_fraction, cfg.event_key) == (0.0, "terminated")
    biased = ray_config(tc.with_(event_fraction=0.25, event_key="reward"), use_ray=False)
    assert (biased.event_fraction, biased.event_key) == (0.25, "reward")
    assert cfg.replay_dir == str(tmp_path / "run" / "replay") and cfg.runner_gpus == 0.0
    with pytest.raises(ValueError, match="num_envs=4 cannot be split evenly over 3 Ray runners"):
        ray_config(tc, num_runners=3)
    f = RunFactories(tc)
    probe = f.env(num_envs=1)
    f = f.with_env(probe)
    learner = f.learner(*f.networks())
    assert learner.config.gamma == tc.gamma and learner.config.entropy_coef == tc.entropy_coef
    per_runner = replace(f, config=tc.with_(num_envs=cfg.envs_per_runner))
    trainer = RayDreamerTrainer(cfg, per_runner.env, per_runner.policy, lambda: learner)
    try:
        out = trainer.run()
    finally:
        trainer.shutdown()
    assert out["policy_steps"] >= 96 and out["updates"] >= 1
    assert (tmp_path / "run" / "replay" / "agent" / "slots" / "runner-0" / "pixels.memmap").is_file()
    trainer = RayDreamerTrainer(replace(biased, replay_dir=None), per_runner.env,
                                per_runner.policy, lambda: learner)
    try:
        trainer.start()
        assert trainer.service.event_fraction == 0.25
        assert trainer.service.event_sampler.event_key == "reward"
    finally:
        trainer.shutdown()


@requires_cuda
def test_cuda_runners_and_learner_in_process():
    """CUDA twin of the CLI test: GameBoyEnv renders into the runner's CUDA ring, chunks go to
    the host replay, batches back to the CUDA learner; weights cross devices both ways."""
    from torchrl_dreamer.distributed import RayDreamerTrainer
    from torchrl_dreamer.trainers import GameBoyDreamer

    f = GameBoyDreamer("maze", num_envs=2, device="cuda")
    cfg = _small_cfg(num_runners=1, total_steps=128, learning_starts=16, seq_len=8)
    trainer = RayDreamerTrainer(cfg, f.env, f.policy, f.learner)
    try:
        out = trainer.run()
        runner = trainer.pool.runners[0]
        assert runner.buffer.device.type == "cuda"
        assert runner.version >= 1  # acted with weights published from the CUDA learner
    finally:
        trainer.shutdown()
    assert trainer.learner_device.type == "cuda"
    assert out["updates"] >= 1 and out["policy_steps"] >= 128


def test_learner_waits_for_lagging_runners():
    from torchrl_dreamer.distributed import RayDreamerTrainer, TrainingTimeout

    f = TickFactory(num_envs=2)
    trainer = RayDreamerTrainer(_small_cfg(max_weight_lag=2, timeout_s=0.5), f.env, None,
                                f.learner)
    trainer.start()  # publishes version 1
    try:
        trainer.store.fetch("slow", have=0)  # a runner at version 1
        trainer.publish()
        trainer.wait_for_lag()  # publishing v3 keeps "slow" 2 behind: allowed
        trainer.publish()
        with pytest.raises(TrainingTimeout, match="max_weight_lag=2"):
            trainer.wait_for_lag()  # v4 would leave it 3 behind
        trainer.store.fetch("slow", have=1)  # it catches up
        trainer.wait_for_lag()
        assert trainer.store.lag() == {"slow": 0}
    finally:
        trainer.shutdown()


def test_several_tasks_by_runner_group():
    from torchrl_dreamer.distributed import RayDreamerTrainer

    short, long_ = TickFactory(num_envs=2, length=3), TickFactory(num_envs=2, length=50)
    cfg = _small_cfg(runner_groups=["short", "long"], group_weights={"short": 3.0, "long": 1.0})
    trainer = RayDreamerTrainer(cfg, {"short": short.env, "long": long_.env}, short.policy,
                                short.learner)
    try:
        trainer.run()
        rows = {n: trainer.service.slot_rows(n) for n in ("runner-0", "runner-1")}
        batch, info = trainer.service.sample(400, 0)
    finally:
        trainer.shutdown()
    assert rows["runner-0"]["obs"][..., 1].max() == 3  # each group got its own task
    assert rows["runner-1"]["obs"][..., 1].max() > 3
    share = (info["group"] == info["groups"].index("short")).float().mean().item()
    assert abs(share - 0.75) < 0.07
    with pytest.raises(KeyError, match="no entry for runner group"):
        RayDreamerTrainer(cfg, {"short": short.env}, None, short.learner).run()


def test_resume_from_checkpoint_continues_the_run(tmp_path):
    from torchrl_dreamer.distributed import RayDreamerTrainer

    f = TickFactory(num_envs=2)
    ck = str(tmp_path / "ck")
    first = RayDreamerTrainer(_small_cfg(checkpoint_dir=ck), f.env, f.policy, f.learner)
    try:
        out1 = first.run()
        first.checkpoint()
        weights = {k: v.clone() for k, v in first.learner.state_dict().items()}
    finally:
        first.shutdown()
    cfg = _small_cfg(resume_from=ck, total_steps=640)
    second = RayDreamerTrainer(cfg, f.env, f.policy, f.learner)
    try:
        second.start()
        assert second.resumed_from == ck and second.updates == out1["updates"]
        assert all(torch.equal(second.learner.state_dict()[k], v) for k, v in weights.items())
        slots = second.service.stats()["slots"]
        assert slots["runner-0"]["committed_t"] == out1["service"]["slots"]["runner-0"][
            "committed_t"]
        out2 = second.run()
    finally:
        second.shutdown()
    assert out2["policy_steps"] >= 640 and out2["updates"] > out1["updates"]
    assert out2["version"] > out1["version"]
    second.service.check_invariants()  # restarted runners continued their episode ids
    with pytest.raises(FileNotFoundError, match="resume_from"):
        RayDreamerTrainer(_small_cfg(resume_from=str(tmp_path)), f.env, None, f.learner).start()


def test_gameboy_dreamer_builds_through_the_run_factories():
    """GameBoyDreamer is a thin wrapper over RunFactories: its learner has the named preset's
    loss and optimiser settings (not the maze's training defaults), env_kwargs override the run's
    env settings, and the learner's published weights load into its player (Protocol paths of
    extract_weights / apply_weights)."""
    from torchrl_dreamer.distributed import apply_weights, extract_weights
    from torchrl_dreamer.objectives import LEARNER_PRESETS, LOSS_PRESETS
    from torchrl_dreamer.trainers import GameBoyDreamer

    f = GameBoyDreamer("maze", num_envs=2, loss_preset="sheeprl", env_kwargs={"frame_skip": 6})
    learner = f.learner()
    assert learner.config == LOSS_PRESETS["sheeprl"]
    assert learner.optim == LEARNER_PRESETS["sheeprl"]
    env = f.env()
    try:
        assert (env.frame_skip, env.press_frames, int(env.batch_size[0])) == (6, 6, 2)
        player = f.policy(env)
        apply_weights(player, extract_weights(learner))
        for a, b in zip(player.actor.parameters(), learner.actor.parameters()):
            assert torch.equal(a, b)
        for a, b in zip(player.world_model.parameters(), learner.world_model.parameters()):
            assert torch.equal(a, b)
    finally:
        env.close()
