"""Human demonstrations in Ray runs (``--backend ray --demos``): the files, checked by the local
path's loader, become a static slot of the human replay service, and every batch draws
``round(demo_share * B)`` of its sequences from it, as the local ``DemoMixingSampler`` does.

The service, router and refusals run in-process (a 1-console maze env for the recordings); one
run goes through a real local Ray cluster: 1 runner, a few dozen policy steps.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tensordict import TensorDict

from torchrl_dreamer.data.demonstrations import (
    Demonstration,
    DemonstrationRecorder,
    demo_sequences,
    demonstration_storage,
)
from torchrl_dreamer.distributed import (
    AGENT,
    DEMO_SLOT,
    HUMAN,
    ControlModeRouter,
    EnvRunner,
    RayDreamerTrainer,
    RayTrainingConfig,
    ReplayService,
    call,
    init_ray,
    load_demonstration_rows,
    runner_schema,
)
from torchrl_dreamer.trainers import ConfigError, TrainConfig
from torchrl_dreamer.trainers.builder import build_run, make_env

torch.set_num_threads(1)

RUN = dict(task="maze", preset="tiny", num_envs=1, batch_size=4, seq_len=8, steps_per_rollout=8,
           replay_capacity=256, learning_starts=16, replay_ratio=0.125, total_steps=48,
           frame_skip=6, log_every=1, eval_episodes=0, progress=False, backend="ray", seed=0,
           threads=1, checkpoint_every=0)


def _record(env, path, steps=30):
    """A demonstration of ``steps`` env steps on ``env`` (1 console): the d-pad in turn."""
    rec = DemonstrationRecorder(env)
    rec.begin(env.reset())
    for i in range(steps):
        a = 1 + i % 4
        rec.step(a, env.fast_step(torch.tensor([a])))
    return rec.save(path)


@pytest.fixture(scope="module")
def maze_demo(tmp_path_factory):
    """A maze demonstration recorded with the run's env settings (31 rows)."""
    path = tmp_path_factory.mktemp("demos") / "maze.pt"
    return _record(make_env(TrainConfig(**RUN), num_envs=1), path)


def _rows(length, num_envs=1):
    """Rows that satisfy the replay invariants: one episode per env, obs[..., 0] = t."""
    is_first = torch.zeros(length, num_envs, dtype=torch.bool)
    is_first[0] = True
    return TensorDict({
        "obs": torch.arange(length, dtype=torch.float32)[:, None, None].expand(
            length, num_envs, 2).clone(),
        "is_first": is_first,
        "terminated": torch.zeros(length, num_envs, dtype=torch.bool),
        "truncated": torch.zeros(length, num_envs, dtype=torch.bool),
        "episode_id": torch.zeros(length, num_envs, dtype=torch.int32),
        "control_mode": torch.full((length, num_envs), HUMAN, dtype=torch.int8),
    }, [length, num_envs])


def test_static_slot_holds_all_rows_counts_no_steps_and_stays_out_of_checkpoints(tmp_path):
    svc = ReplayService(16, seq_len=4, rate_limited=False, name="human")
    entry = svc.load_static(DEMO_SLOT, _rows(40), group=DEMO_SLOT)
    # sized to its rows (40 > the service's 16-row capacity): nothing evicted, all committed
    assert (entry["size"], entry["total_steps"], entry["committed_t"]) == (40, 40, 39)
    assert entry["static"] and not entry["active"]
    assert torch.equal(svc.slot_rows(DEMO_SLOT)["obs"][:, 0, 0], torch.arange(40.0))
    assert "control_mode" not in svc.slot_rows(DEMO_SLOT)  # dropped, as from runner chunks
    assert svc.stats()["policy_steps"] == 0 and svc.limiter.inserts == 0  # no steps, no grants
    batch, info = svc.sample(8)
    assert batch.batch_size == (4, 8) and info["groups"] == [DEMO_SLOT]
    with pytest.raises(ValueError, match="static slot"):
        svc.register(DEMO_SLOT, 1)
    with pytest.raises(ValueError, match="seq_len=4"):
        svc.load_static("short", _rows(3))
    # not checkpointed (the files are reloaded): a restored service has no such slot
    svc.checkpoint(tmp_path / "ck")
    fresh = ReplayService(16, seq_len=4, rate_limited=False, name="human")
    assert DEMO_SLOT not in fresh.restore(tmp_path / "ck")["slots"]
    # loading the name again replaces the slot
    assert svc.load_static(DEMO_SLOT, _rows(12), group=DEMO_SLOT)["size"] == 12


def test_demonstration_rows_are_the_runners_rows_and_the_local_replays(maze_demo):
    cfg = TrainConfig(**RUN)
    probe = make_env(cfg, num_envs=1)
    rows = load_demonstration_rows(maze_demo, probe)
    demo = Demonstration.load(maze_demo)
    assert rows.batch_size == (len(demo), 1)
    # the runners' format: what an EnvRunner of the run sends, field by field
    service = ReplayService(64, seq_len=8, learning_starts=0, max_queued=64)
    EnvRunner("runner-0", lambda: make_env(cfg, num_envs=2), None, service,
              chunk_len=8).run(max_chunks=1)
    chunk = service.slot_rows("runner-0")
    assert {k: (v.dtype, v.shape[2:]) for k, v in rows.items()} == {
        k: (v.dtype, v.shape[2:]) for k, v in chunk.items()}
    assert runner_schema(probe) == runner_schema(make_env(cfg, num_envs=2))
    # the local replay's rows for the same fields
    local = demonstration_storage([demo], runner_schema(make_env(cfg, num_envs=1))).fields
    for key, value in rows.items():
        assert torch.equal(value, local[key]), key
    assert torch.equal(rows["pixels"][:, 0], demo.pixels)
    assert torch.equal(rows["action"][:, 0], demo.action)


def test_exact_router_draws_round_share_of_every_batch_from_the_demonstrations(maze_demo):
    cfg = TrainConfig(**RUN)
    agent = ReplayService(64, seq_len=8, replay_ratio=10.0, learning_starts=0, max_queued=1e6)
    human = ReplayService(64, seq_len=8, rate_limited=False, name="human")
    EnvRunner("runner-0", lambda: make_env(cfg, num_envs=2), None, agent,
              chunk_len=16).run(max_chunks=1)
    rows = load_demonstration_rows(maze_demo, make_env(cfg, num_envs=1))
    human.load_static(DEMO_SLOT, rows, group=DEMO_SLOT)
    router = ControlModeRouter({AGENT: agent, HUMAN: human}, {AGENT: 0.7, HUMAN: 0.3},
                               seed=0, exact=True)
    for batch_size in (4, 6, 16, 5):
        k = demo_sequences(0.3, batch_size)  # 1, 2, 5, 2: a drawn count would vary
        for _ in range(10):
            batch, info = router.sample(batch_size)
            assert (info["mode"] == HUMAN).tolist() == [True] * k + [False] * (batch_size - k)
            for j in range(k):  # the demonstration sequences are the recorded rows
                start = int(info["start"][j])
                assert torch.equal(batch["pixels"][:, j], rows["pixels"][start:start + 8, 0])
                assert torch.equal(batch["action"][:, j], rows["action"][start:start + 8, 0])
    assert agent.stats()["samples"] == 40  # each batch took one grant, from the agent side
    assert human.stats()["policy_steps"] == 0


def test_demonstrations_for_another_rom_are_refused_with_the_local_error(tmp_path):
    catch = _record(make_env(TrainConfig(**{**RUN, "task": "catch"}), num_envs=1),
                    tmp_path / "catch.pt", steps=10)
    errors = {}
    for backend in ("ray", "reference"):
        cfg = TrainConfig(**{**RUN, "backend": backend, "demos": str(catch),
                             "log_dir": str(tmp_path / backend)})
        with pytest.raises(ConfigError, match="--demos: .* another ROM") as err:
            build_run(cfg)  # ray: refused with the probe, before any actor starts
        errors[backend] = str(err.value)
    assert errors["ray"] == errors["reference"]


def test_demonstrations_the_run_cannot_mix_are_refused(maze_demo):
    rows = load_demonstration_rows(maze_demo, make_env(TrainConfig(**RUN), num_envs=1))
    cfg = dict(num_runners=1, envs_per_runner=1, steps_per_rollout=8, capacity=64, seq_len=8,
               batch_size=4, use_ray=False)

    def trainer(**kw):
        return RayDreamerTrainer(RayTrainingConfig(**{**cfg, **kw}), None, None,
                                 lambda: torch.nn.Linear(1, 1), demonstrations=rows)

    with pytest.raises(ValueError, match="not both"):
        trainer(human_runners=1)
    with pytest.raises(ValueError, match="fewer than one sequence of seq_len=32"):
        trainer(seq_len=32, capacity=128)


class _Recorder:
    """A learner that keeps the batch shapes it is given."""

    def __init__(self):
        self.shapes = []

    def update(self, batch):
        self.shapes.append(tuple(batch.batch_size))
        return {"loss": torch.tensor(0.0)}


def test_in_process_run_mixes_demonstrations_and_reloads_them_on_resume(maze_demo, tmp_path):
    env_cfg = TrainConfig(**RUN)
    rows = load_demonstration_rows(maze_demo, make_env(env_cfg, num_envs=1))
    cfg = RayTrainingConfig(num_runners=1, envs_per_runner=2, steps_per_rollout=8, capacity=64,
                            seq_len=8, batch_size=6, replay_ratio=0.25, learning_starts=16,
                            total_steps=64, human_proportion=0.25, use_ray=False, seed=0)
    learner = _Recorder()

    def trainer(**kw):
        return RayDreamerTrainer(dataclasses.replace(cfg, **kw),
                                 lambda: make_env(env_cfg, num_envs=2), None, lambda: learner,
                                 extract_fn=lambda _: {"w": torch.zeros(1)}, demonstrations=rows)

    run = trainer()
    try:
        out = run.run()
        run.checkpoint(tmp_path / "ck")
    finally:
        run.shutdown()
    k = demo_sequences(0.25, 6)  # round(1.5): 2
    assert out["updates"] >= 4 and set(learner.shapes) == {(8, 6)}
    assert out["sequences"] == {"human": k * out["updates"], "agent": (6 - k) * out["updates"]}
    assert out["human_service"]["policy_steps"] == 0 and out["policy_steps"] >= 64
    # the checkpoint leaves the demonstrations out; the resumed run loads them again
    assert not (tmp_path / "ck" / "replay_human" / "slots" / DEMO_SLOT).exists()
    resumed = trainer(resume_from=str(tmp_path / "ck"))
    try:
        resumed.start()
        again = resumed.human_service.slot_rows(DEMO_SLOT)
    finally:
        resumed.shutdown()
    assert resumed.resumed_from == str(tmp_path / "ck")
    assert all(torch.equal(again[key], value) for key, value in rows.items())


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module (the run joins it instead of starting its own)."""
    ray = pytest.importorskip(
        "ray", reason="ray is not installed: pip install 'ray[default]' (the [ray] extra)")
    if ray.is_initialized():
        ray.shutdown()
    init_ray(num_cpus=2)
    yield ray
    ray.shutdown()


def test_ray_run_draws_demo_share_of_every_batch_from_the_human_service(cluster, maze_demo,
                                                                         tmp_path):
    share = 0.25
    cfg = TrainConfig(**RUN, demos=str(maze_demo), demo_share=share,
                      log_dir=str(tmp_path / "run"))
    parts = build_run(cfg)
    trainer = parts.collector.trainer
    assert trainer.config.human_proportion == share and trainer.config.num_runners == 1
    try:
        for _ in parts.collector.iterator():
            pass
        demo_rows = call(trainer.human_service, "slot_rows", DEMO_SLOT)
        out = trainer.summary()
    finally:
        parts.collector.shutdown()
    demo = Demonstration.load(maze_demo)
    # the human buffer holds the recording, whole, and nothing else
    assert set(out["human_service"]["slots"]) == {DEMO_SLOT}
    assert torch.equal(demo_rows["pixels"][:, 0], demo.pixels)
    assert torch.equal(demo_rows["action"][:, 0], demo.action)
    assert torch.equal(demo_rows["reward"][:, 0], demo.reward)
    assert out["human_service"]["policy_steps"] == 0  # the demonstrations are not collected steps
    assert out["policy_steps"] >= 48 and out["updates"] >= 2
    # every batch the learner trained on: exactly round(share * B) demonstration sequences
    k = demo_sequences(share, cfg.batch_size)
    assert k == 1 and out["sequences"] == {"human": k * out["updates"],
                                           "agent": (cfg.batch_size - k) * out["updates"]}
